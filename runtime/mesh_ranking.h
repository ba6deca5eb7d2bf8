// `--mesh-map auto` measured on the compiled step (docs/simulate.md, "Mesh
// axes onto the topology"): which mesh axis moves the most bytes, and which
// placement of the axes makes the step's collectives fastest on the links they
// would ride. The step is compiled once on any order (row-major, say); its
// collectives' groups are read back as mesh positions, which name the axes they
// run over whatever chips later sit there, and every candidate placement is
// priced by the simulator's CollectivePricer over its own chips.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/cost_model.h"
#include "compiler/ir.h"
#include "runtime/interconnect.h"
#include "runtime/mesh_mapping.h"

namespace shardscope::runtime {

// One collective of a compiled step, its groups as mesh positions (row-major
// over the mesh's shape), so it can be priced under any placement.
struct StepCollective {
  std::string name;  // the instruction, for messages
  compiler::CollectiveKind kind = compiler::CollectiveKind::kAllReduce;
  int64_t bytes = 0;  // compiler::CollectiveBytes: per chip, the whole value
  std::vector<std::vector<int>> groups;
  int64_t runs = 1;  // how often the step runs it (the programs it is in, each once a step)
};

// The collectives of the partitioned per-device `program` (the top level: a
// while's regions are priced by the cost model as a whole, not here), compiled
// with the chip `device_ids[p]` at mesh position p. Errors name the collective
// whose groups name a chip outside the mesh.
absl::StatusOr<std::vector<StepCollective>> StepCollectivesOf(const compiler::Module& program,
                                                              const std::vector<int64_t>& device_ids);

// What each axis of the mesh carries over one step: the bytes a chip puts on
// its links for the collectives whose groups run along it (a ring's per-chip
// traffic: all-reduce 2(n-1)/n of the value, gathers, scatters and all-to-all
// (n-1)/n, a permute or broadcast all of it). A collective over several axes
// counts toward each.
struct AxisTraffic {
  std::string axis;
  double bytes = 0;
};
std::vector<AxisTraffic> TrafficPerAxis(const std::vector<StepCollective>& step, const std::vector<int64_t>& shape,
                                        const std::vector<std::string>& names);

// A placement tried, and what the step's collectives take on it (the modeled
// clock of `model`: per collective its slowest group, times its runs).
struct PricedMap {
  std::string label;  // "model first", "data first", "row-major"
  int64_t collective_ns = 0;
  MeshMapping mapping;
};

struct MeshMapChoice {
  MeshMapping mapping;                // the one chosen (mode "auto")
  std::vector<AxisTraffic> traffic;   // most bytes first
  std::vector<PricedMap> tried;       // in the order tried; ties go to the earlier
  int chosen = 0;                     // index into tried
  // What was measured, for Describe: a run's probe step, or a replay's stored run.
  std::string source = "the compiled step's collectives";
  std::string per = "a chip a step";
  // "ranked by the compiled step's collectives: model 12.0 MiB, data 3.1 MiB a chip;
  //  model first 1.234 ms (chosen), data first 1.456 ms, row-major 1.456 ms (modeled clock, h100)"
  std::string Describe() const;
};

// Every order of the axes with more than one chip placed by MapMesh's auto
// rule (the axis first in the order gets the fastest links), and row-major
// last, each priced on `ic` with `model`'s profile; the cheapest is taken.
// `fallback` (the axes most-communicating first, by rule) is tried first, so a
// tie — a profile whose collectives run through memory and see no links,
// a step without collectives — keeps what the rule gives. `keep` (a replay's
// stored order, "as stored"), when given, is tried before them all: a replay
// moves its mesh only for a faster one.
absl::StatusOr<MeshMapChoice> ChooseMeshMap(const Interconnect& ic, const compiler::CostModel& model,
                                            const std::vector<int64_t>& shape, const std::vector<std::string>& names,
                                            const std::vector<StepCollective>& step,
                                            const std::vector<std::string>& fallback,
                                            const std::vector<int64_t>& keep = {});

}  // namespace shardscope::runtime
