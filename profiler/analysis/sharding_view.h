// Where each tensor's shards live, from a stored run: what `shardscope
// sharding` prints. For each tensor (as recorded: one row per sharding it was
// seen with) the tiles of the split dims and the chips holding each tile, in
// the spirit of PyTorch/XLA's visualize_tensor_sharding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/run_report.h"
#include "store/reader.h"

namespace shardscope::analysis {

struct TensorTiles {
  ShardingRow tensor;                          // as the run report has it
  int64_t global_bytes = 0;                    // the whole tensor
  // Dims cut into more than one range, and those ranges in order ("0:128").
  std::vector<int> split_dims;
  std::vector<std::vector<std::string>> ranges;
  // One tile per combination of the split dims' ranges (row-major over
  // split_dims): the chips holding it, ascending.
  std::vector<std::vector<int64_t>> tile_chips;
};

struct ShardingView {
  int64_t run_id = 0;
  std::string sample, mesh, mesh_axes, strategy;
  std::vector<TensorTiles> tensors;
  std::vector<RematRow> rematerializations;  // every compiled program's
  std::vector<AutoShardingSummary> auto_sharding;
  // Placements left out because their row is damaged (index_ranges that do
  // not parse, a rank unlike the tensor's other shards), one line each: the
  // rest of the view stands. `shardscope check` names them too.
  std::vector<std::string> damaged;
  int64_t damaged_rows = 0;  // placements (chips) left out, all of them
  int64_t damaged_shown = 0;  // of those, the ones `damaged` names
};

// All tensors of the run, or those named `tensor` (an error lists the names
// there are when none matches).
absl::StatusOr<ShardingView> BuildShardingView(const store::Reader& reader, int64_t run_id,
                                               const std::string& tensor = "");

// "chip 3", "chips 0,2": who holds a tile, as every view says it.
std::string ChipsText(const std::vector<int64_t>& chips);

// Where the layout of the op or input named `name` (as sharding_decisions
// names it: "dot_general.12", "tokens") came from, in the newest program that
// has it: one line per op propagation carried it through, back to an
// annotation (with its line), auto-sharding or the default. An error lists a
// few names there are when none matches.
absl::StatusOr<std::string> RenderShardingChain(const store::Reader& reader, int64_t run_id, const std::string& name);

// A table of every tensor (sharding, source, bytes per chip) and a grid of
// tiles per layout: with `all_grids` one per tensor, else one per distinct
// layout naming the tensors that share it.
std::string RenderShardingText(const ShardingView& view, bool all_grids);
// The placements left out as damaged, as lines under a heading; "" when none.
std::string DamagedPlacementsText(const ShardingView& view);

}  // namespace shardscope::analysis
