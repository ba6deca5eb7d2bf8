// What the Graph view shows, read from the store without a display: one
// compiled program's IR (as traced, graphs.ir_text, or after partitioning and
// passes, graphs.ir_text_after), its ops' costs (`ops`: per device and per
// execution, for the partitioned program the chips run), which ops each fused
// kernel holds (`fusion_decisions`), and each kernel's measured time on the
// device clock (its slices over the first steps that ran the program). A
// view draws the neighbourhood of one op to a depth, never all ops at once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"
#include "ui/app/graph_text.h"

namespace shardscope::app {

struct GraphSummary {
  int64_t graph_id = 0;
  int64_t op_count = 0;
  std::string call_site;
};
// The run's graphs with IR text, by id.
absl::StatusOr<std::vector<GraphSummary>> ListGraphs(const store::Reader& reader, int64_t run_id);

struct OpCost {
  std::string name, opcode, shape, roofline;
  double flops = 0;
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t modeled_ns = -1;
};

struct OpMeasured {
  int64_t count = 0;    // kernel runs timed (all chips)
  int64_t total_ns = 0;
  double mean_ns() const { return count ? double(total_ns) / count : 0; }
};

struct GraphModel {
  int64_t graph_id = -1;
  bool partitioned = true;  // ir_text_after; false: as traced
  IrProgram program;
  std::map<int64_t, OpCost> costs;          // by op id (partitioned only)
  // Fused op id -> the roots of the kernels it runs in: a cheap producer (a
  // broadcast, a constant) may be fused into several kernels, each a copy.
  std::map<int64_t, std::vector<int64_t>> kernels_of;
  std::map<int64_t, std::vector<int64_t>> members;  // kernel root id -> its ops (root included), by id
  std::map<int64_t, OpMeasured> measured;   // by op id (kernel root for a fusion)
  std::vector<int32_t> measured_steps;      // the steps measured (device clock)
  std::string note;                         // why something is missing, one line

  // The kernels an op runs in: its own id when it runs alone or is a
  // kernel's root, else the roots of the kernels it was fused into.
  std::vector<int64_t> KernelsOf(int64_t op_id) const {
    auto it = kernels_of.find(op_id);
    if (members.contains(op_id) || it == kernels_of.end()) return {op_id};
    return it->second;
  }
  // The first of them: where its time is measured.
  int64_t KernelOf(int64_t op_id) const { return KernelsOf(op_id).front(); }
};

// `measure_steps`: how many of the steps that ran the program are read for
// measured times (their slices only, found through the chunks' graph ids).
absl::StatusOr<GraphModel> LoadGraphModel(const store::Reader& reader, int64_t run_id, int64_t graph_id,
                                          bool partitioned, int measure_steps = 16);

// Indexes (into program.ops) of the ops within `depth` edges of `center`
// (operands and users both ways), in program order, each with its distance.
std::vector<std::pair<int, int>> Neighbourhood(const IrProgram& program, int center, int depth);

}  // namespace shardscope::app
