// Auto-sharding of a traced step: compiler/auto_sharding.h searches layouts
// for the inputs of the step that is about to run (the pending graph), on the
// runtime's mesh, cost model profile and per-chip memory budget; the choice
// lays those inputs out (recorded as "auto") before mark_step runs the step.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/auto_sharding.h"
#include "core/mesh.h"

namespace shardscope {

// A hand-written layout to compare the choice with: the spec it gives each
// input of the step (by the input's name and rank), on its own mesh naming.
struct HandStrategy {
  std::string name;
  Mesh mesh;
  std::function<std::vector<AxisSpec>(const std::string& input, int rank)> spec;
};

struct AutoShardingChoice {
  std::map<std::string, std::vector<AxisSpec>> spec_of_group;  // by group name (role), on `mesh`'s axes
  compiler::AutoShardingResult result;
  std::vector<std::pair<std::string, compiler::StepEstimate>> hand;  // the compared strategies
  int64_t search_ns = 0;  // host clock
};

// Chooses layouts for every input of the pending step of rank >= 1; inputs
// whose `group_of(name)` agree share a choice (a weight, its optimizer
// moments, the same weight in every layer). Lays the inputs out as chosen,
// scores `compare` on the same graph, and records all of it (tables
// auto_sharding, auto_sharding_candidates, auto_sharding_choices).
absl::StatusOr<AutoShardingChoice> auto_shard_pending_step(
    const Mesh& mesh, const std::function<std::string(const std::string&)>& group_of,
    const std::vector<HandStrategy>& compare, const compiler::AutoShardingOptions& options = {});

// The choice as text: the search, the per-group layouts, and the comparison
// table (modeled step, collectives, peak per chip), for a run's log.
std::string DescribeAutoSharding(const AutoShardingChoice& c, const std::string& profile);

}  // namespace shardscope
