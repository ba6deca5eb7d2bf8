// Sharding propagation and SPMD partitioning.
//
// Input: a global module whose parameters carry the user's shardings (none =
// replicated). Propagation gives every instruction a sharding (forward from
// the parameters, then backward into broadcasts, iotas, constants and
// elementwise ops so that values are produced already split). Partitioning
// then emits ONE local program, driven by stablehlo.partition_id, that every
// device runs on its shard: local shapes, local slices where a replicated
// value meets a split one, all_reduce where a reduction or a dot contracts a
// split dimension, all_gather where a split value must be whole.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir.h"

namespace shardscope::compiler {

// One sharding decision, for the placement views ("where did this come from").
struct ShardingDecision {
  int64_t instruction_id = 0;   // in the global module
  Sharding sharding;
  std::string source;           // annotated | propagated | default
  std::string via;              // the op propagation carried it through
  int64_t from = -1;            // the instruction whose layout it took (an operand; a user, backward)
};

// An involuntary full rematerialization: a split value made whole on every
// device (all-gathered) because the op reading it (`op`) has no split rule,
// or on the way between two split layouts. Planned gathers (an FSDP weight
// gathered for its matmul) are not recorded.
struct Rematerialization {
  int64_t instruction_id = 0;  // the value, in the global module
  std::string op;              // the op that needed it whole
  int64_t bytes = 0;           // its global size
  SourceLoc loc;               // where the value was made
};

struct SpmdResult {
  std::unique_ptr<Module> local;           // the per-device program
  std::vector<Sharding> param_shardings;   // global param index -> sharding
  std::vector<Sharding> output_shardings;  // output index -> sharding
  std::vector<ShardingDecision> decisions;
  std::vector<Rematerialization> rematerializations;
  int collectives = 0;
  // (local collective's id, the global instruction whose value it moves or
  // adds up): which tensor a collective on the timeline belongs to.
  std::vector<std::pair<int64_t, int64_t>> moved_values;
};

// Partitions `global` for `num_partitions` devices (ids 0..n-1). With one
// partition the local program equals the global one.
absl::StatusOr<SpmdResult> SpmdPartition(const Module& global, int num_partitions);

}  // namespace shardscope::compiler
