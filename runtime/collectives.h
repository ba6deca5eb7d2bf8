// Collectives among the virtual chips of one host process. They really move
// and combine data between device buffers; the Scheduler makes each one wait
// for its slowest participant on the device clock.
#pragma once

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir.h"
#include "compiler/literal.h"

namespace shardscope::runtime {

// Every member of the group gets the element-wise reduction of all inputs
// (summed in group order, so results are deterministic).
absl::Status AllReduce(compiler::ReduceKind kind, const std::vector<const Literal*>& inputs,
                       Literal* out);

// Concatenates the inputs along `dim` in group order.
absl::Status AllGather(int64_t dim, const std::vector<const Literal*>& inputs, Literal* out);

// The kernels below give each member its own result: inputs[k] and
// outputs[k] belong to the group's k-th member.

// outputs[k] is block k, along `dim`, of the element-wise reduction of all
// inputs (the group size must divide that dimension). Types as AllReduce.
absl::Status ReduceScatter(compiler::ReduceKind kind, int64_t dim, const std::vector<const Literal*>& inputs,
                           const std::vector<Literal*>& outputs);

// Every input is split into as many blocks along `split_dim` as the group has
// members; outputs[j] is block j of every input, concatenated in member order
// along `concat_dim`. Any element type (the bytes move).
absl::Status AllToAll(int64_t split_dim, int64_t concat_dim, const std::vector<const Literal*>& inputs,
                      const std::vector<Literal*>& outputs);

// For each (source, target) pair of positions, outputs[target] gets
// inputs[source]; an output no pair targets is zeros. Any element type.
absl::Status CollectivePermute(const std::vector<std::pair<int64_t, int64_t>>& pairs,
                               const std::vector<const Literal*>& inputs,
                               const std::vector<Literal*>& outputs);

// Every output gets inputs[0]. Any element type.
absl::Status CollectiveBroadcast(const std::vector<const Literal*>& inputs,
                                 const std::vector<Literal*>& outputs);

// The groups of devices (of `num_devices`) that run collective `c` together,
// each group in member order. Replica-group ops: their replica_groups (empty:
// one group of every device); ids must be in range and appear once, and every
// device must be in a group, except for collective_broadcast, where a device
// in none gets a group of its own and zeros (StableHLO's rule).
// collective_permute: the connected parts of the graph its pairs draw, so a
// device waits only for the devices it exchanges with, directly or through
// others; a device no pair names is a group of its own (it gets zeros).
// The Scheduler makes each group wait for its slowest member.
absl::StatusOr<std::vector<std::vector<int64_t>>> ParticipantGroups(const compiler::Instruction& c,
                                                                    int num_devices);

// The bytes device group[position] puts on its links and takes off them when
// collective `c` runs for `group` (from ParticipantGroups), under the
// algorithm the cost model prices (compiler::CostModel::CollectiveNs), with
// B the operand's bytes per chip and n the group's size: all_reduce, a ring
// reduce-scatter then all-gather, 2(n-1)/n B each way; all_gather (n-1) B
// ((n-1)/n of the result); reduce_scatter and all_to_all (n-1)/n B;
// collective_permute, B sent per pair this device is the source of and B
// received when it is a target (pairs to itself move nothing);
// collective_broadcast, a binomial tree from the group's first member, B
// sent per device forwarded to and B received by every other member. Summed
// over a group, sent equals received.
struct LinkBytes {
  int64_t sent = 0, received = 0;
};
LinkBytes CollectiveLinkBytes(const compiler::Instruction& c, const std::vector<int64_t>& group, size_t position);

// Runs collective `c` for one group from ParticipantGroups: inputs[k] and
// outputs[k] belong to device members[k].
absl::Status RunCollective(const compiler::Instruction& c, const std::vector<int64_t>& members,
                           const std::vector<const Literal*>& inputs, const std::vector<Literal*>& outputs);

// Copies block `src` into `dst` at element offsets `offsets` (same rank); the
// part of the block past the end of `dst` (an uneven shard's padding) is left out.
void CopyBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst);
// Extracts the block of `src` starting at `offsets` with the shape of `dst`;
// where the block runs past the end of `src`, `dst` keeps what it held.
void ExtractBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst);

}  // namespace shardscope::runtime
