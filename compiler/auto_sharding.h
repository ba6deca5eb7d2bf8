// Auto-sharding: for the parameters of a global program that the user left
// unannotated, choose the layouts over a device mesh that minimise the modeled
// step time under a per-chip memory budget.
//
// A choice gives each tensor dimension a set of mesh axes (each axis used at
// most once); every choice is scored by the real pipeline — sharding
// propagation and the SPMD partitioner, fusion, the cost model with an
// alpha-beta link per mesh axis (ICI, or DCN where the axis crosses hosts),
// and the buffer assignment's peak — so compute, collective and resharding
// costs all come from the program that would run. Parameters can be tied into
// groups that share a choice (a weight and its optimizer moments; the same
// weight of every layer). Small searches are exhaustive (exact); beyond
// `exact_limit` combinations, coordinate descent from two seeds (docs/
// auto_sharding.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/cost_model.h"
#include "compiler/ir.h"
#include "compiler/sharding.h"

namespace shardscope::compiler {

struct AutoMesh {
  std::vector<int64_t> shape;            // devices per axis
  std::vector<int64_t> device_ids;       // row-major over shape
  std::vector<std::string> axis_names;
  std::vector<Link> links;               // per axis
  // When set, a collective's time as the run will schedule it (a simulated
  // pod's topology: its routes, algorithms and shared links), in place of
  // the alpha-beta over the axes' links: candidates are scored as they run.
  std::function<double(const Instruction& collective)> price_collective{};

  int64_t size() const;
  // Links from where the devices sit: an axis along which some neighbour is
  // on another host (host_of_device[id]) runs over the model's DCN link, the
  // rest over its chip-to-chip (ICI) link.
  static AutoMesh Make(std::vector<int64_t> shape, std::vector<int64_t> device_ids,
                       std::vector<std::string> axis_names, const std::vector<int>& host_of_device,
                       const CostModel& model);
};

// Mesh axes per tensor dimension: axes[d] split dim d (the first the most major).
using AxesOfDims = std::vector<std::vector<int>>;

// "[data, none]", "[(data, model), none]"
std::string AxesToString(const AxesOfDims& axes, const AutoMesh& mesh);

// What one layout of the program costs per chip.
struct StepEstimate {
  double modeled_ns = 0;     // every kernel and collective of the local program, one after another
  double collective_ns = 0;  // the collectives' share (alpha-beta over their mesh axes' links)
  int collectives = 0;
  int64_t peak_bytes = 0;    // the buffer assignment's peak per chip
  int rematerializations = 0;
  bool fits = true;          // peak_bytes within the budget
};

// Scores `global` with its parameters' shardings as they are set.
absl::StatusOr<StepEstimate> EstimateStep(const Module& global, const AutoMesh& mesh, const CostModel& model,
                                          int64_t memory_budget);

// The same for `global` as the runtime compiles it (simplified first), with
// parameter k laid out as params[k]: how hand-written layouts compare.
absl::StatusOr<StepEstimate> EstimateLayout(const Module& global, const std::vector<Sharding>& params,
                                            const AutoMesh& mesh, const CostModel& model, int64_t memory_budget);

struct AutoShardGroup {
  std::string name;          // e.g. "layers.*.attn.q_proj.weight"
  std::vector<int> params;   // parameter indices sharing one choice (same rank)
};

struct AutoShardingOptions {
  int64_t memory_budget = 0;   // bytes per chip; 0: no limit
  int64_t exact_limit = 4096;  // at most this many combinations: try them all
  int max_passes = 3;          // coordinate descent passes per seed
  int kicks = 8;               // random restarts from the best (iterated local search)
};

struct AutoShardingResult {
  std::vector<AxesOfDims> choice;           // per group (groups as returned)
  std::vector<AutoShardGroup> groups;       // the caller's, plus one per other unannotated parameter
  std::vector<Sharding> param_shardings;    // per parameter of the program
  StepEstimate estimate;
  std::string method;                       // "exact" or "heuristic"
  double combinations = 0;                  // size of the search space
  int evaluations = 0;                      // layouts scored
};

// Chooses layouts for every unannotated parameter of `global` (annotated ones,
// and values annotated inside the program, stay as they are).
absl::StatusOr<AutoShardingResult> AutoShard(const Module& global, std::vector<AutoShardGroup> groups,
                                             const AutoMesh& mesh, const CostModel& model,
                                             const AutoShardingOptions& options);

}  // namespace shardscope::compiler
