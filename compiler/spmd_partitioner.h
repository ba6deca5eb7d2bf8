// The SPMD partitioner's state and steps (spmd.cc: propagation and the
// driver; spmd_reshard.cc: moving values between layouts and combining
// partial results; spmd_emit.cc: the local program, op by op). Internal to
// the compiler; the interface is compiler/spmd.h.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/spmd.h"
#include "compiler/spmd_layout.h"

namespace shardscope::compiler::spmd_internal {

using namespace spmd_layout;  // the layouts and rules of spmd_layout.h

// The layouts a while's region is partitioned under: its parameters come in,
// and its results must leave, in the carried values' layouts (the cond's one
// result: replicated).
struct RegionPins {
  std::vector<Tiles> params, outputs;
};

class Partitioner {
 public:
  Partitioner(const Module& g, int n, const RegionPins* pins = nullptr) : g_(g), n_(n), pins_(pins) {}

  absl::StatusOr<SpmdResult> Run();

 private:
  // Gives every instruction a sharding from its operands; pinned ones keep theirs.
  absl::Status Forward();

  // "op at file:line", or the parameter's name.
  static std::string Where(const Instruction& i);

  // Manual values (each device's own, as a user's per-device program has
  // them): a parameter or value annotated {manual}, and every op reading
  // one. Mixing one with a value the partitioner lays out is an error:
  // there is no telling which part of it each device should see. Values
  // made from constants alone (a broadcast 1) are the same everywhere and mix.
  absl::Status MarkManual(const Instruction& i);

  // Lets values that are cheap to produce split (broadcasts, iotas, constants,
  // and elementwise ops on them) take the split of the elementwise op using
  // them, so they are made already local instead of whole then sliced. A
  // cheap value moves only when every user already has that split (or is
  // this one): a broadcast CSE shares between a split and a whole update
  // (AdamW's per-shape constants) would otherwise pull the whole one's chain
  // into the split, and the next step would gather it back. A contraction
  // made whole (a weight gradient summed over a split batch) moves whatever
  // its other users: it then combines its partial sums straight into the
  // split (a reduce_scatter), and those users work on the split value, which
  // only makes them cheaper.
  void Backward();

  // Layout rules are pure functions of the op's attributes and its operands'
  // layouts, and a program applies the same few to the same few layouts over
  // and over (every activation shares one): results are kept, keyed by those,
  // with the operands' device tables held so a key's addresses stay theirs.
  struct Memo {
    std::vector<Tiles> inputs;  // keeps the keyed device tables alive
    std::optional<Tiles> out;
    DotPlan dot;
  };
  std::vector<int64_t> MemoKey(int tag, const Instruction& i, std::initializer_list<const Tiles*> in);
  template <typename F>
  const Memo& Remember(std::vector<int64_t> key, std::initializer_list<const Tiles*> in, F fill) {
    auto [it, fresh] = memo_.try_emplace(std::move(key));
    if (fresh) {
      for (const Tiles* t : in) it->second.inputs.push_back(*t);
      fill(it->second);
    }
    return it->second;
  }
  Tiles BroadcastOutOf(const Instruction& i, const Tiles& t);
  Tiles TransposeOutOf(const Instruction& i, const Tiles& t);
  std::optional<Tiles> ReshapeOutOf(const Instruction& i, const Tiles& t);
  const DotPlan& PlanDotOf(const Instruction& i);

  // Counts collective `c`, which moves (or adds up) global value `value`.
  Instruction* Moves(Instruction* c, const Instruction& value);

  Instruction* Pid();

  // This device's start index along `dim` of a `to`-tiled value, as a scalar.
  // Programs ask for the same offsets many times: each table is made once.
  Instruction* StartIndex(const Tiles& to, int dim, int64_t shard_size);

  // A device's share of a `t`-tiled value: ceil(size / tiles) per dim. Where
  // the tiles do not divide a dim the last shards end in padding, which holds
  // anything: ops that combine elements along such a dim mask it first
  // (MaskPadding), and gathering the dim cuts it off (Resize).
  static Shape LocalShape(const Shape& global, const Tiles& t);
  static bool Uneven(const Shape& global, const Tiles& t, int64_t d);

  // `v` (a local value of global shape `global`, laid out as `t`) with the
  // padding of its uneven dims among `dims` replaced by `fill`: the identity
  // of a sum, a dot or a max that combines elements along them.
  Instruction* MaskPadding(Instruction* v, const Shape& global, const Tiles& t, const std::vector<int64_t>& dims,
                           double fill, const SourceLoc& loc);

  // A local value whose dims outside `kept` are whole (or padded whole, after
  // an all_gather of an uneven split) cut or padded to the size a device
  // slices `to`'s tiles from: the global size where `to` keeps the dim whole,
  // tiles * ceil(size / tiles) where it splits it.
  Instruction* Resize(Instruction* v, const Instruction& global, const Tiles& to, const std::vector<int64_t>& kept);

  // Moves a local value from one layout to another: splits both layouts share
  // (same tiles, every device at the same coordinate) stay; the other split
  // dims are gathered; then each device slices out what `to` splits further.
  absl::StatusOr<Instruction*> Reshard(Instruction* v, const Instruction& global, const Tiles& from,
                                       const Tiles& to);

  // Reshards that move data without gathering it whole, or null:
  //  - the same tiles on other devices: a collective_permute sends each
  //    device the tile it needs (a device that has it sends to itself);
  //  - one split moving from dim a to dim b, each device keeping its block
  //    index: an all_to_all among the devices that differ on a.
  Instruction* MoveSplit(Instruction* v, const Instruction& global, const Tiles& from, const Tiles& to,
                         const std::vector<int64_t>& kept);

  absl::StatusOr<Instruction*> Operand(const Instruction& i, int k, const Tiles& want);

  // Combines the partial results each group of devices holds, ending in
  // `want`. When `want` splits one dim that the combined value (`natural`)
  // holds whole, and each group's members fall evenly on that dim's tiles, a
  // reduce_scatter hands each device its block (then an all-reduce adds up
  // the members that share a block): the gradient reduce-scatter of FSDP.
  // Otherwise an all-reduce, then the reshard.
  absl::Status CombinePartials(Instruction** r, const Instruction& i, ReduceKind kind,
                               const std::vector<std::vector<int64_t>>& groups, const Tiles& natural,
                               const Tiles& want);

  // The first want.size() operands of `i`, each in the layout wanted of it.
  absl::StatusOr<std::vector<Instruction*>> Operands(const Instruction& i, const std::vector<Tiles>& want);

  absl::Status Emit(const Instruction& i);

  // A while: each carried value keeps its init's layout through the loop; the
  // regions are partitioned as programs of their own under those layouts
  // (collectives inside the body run every iteration).
  absl::Status EmitWhile(const Instruction& w, Instruction** r);

  // No split rule for this op (or for how its operands are split): every
  // device computes it whole on whole operands (gathered if they were split,
  // and recorded as such), then takes its share of the result.
  absl::Status EmitWhole(const Instruction& i, Instruction** r);

  // When an op's natural result layout differs from the one assigned to it.
  absl::Status Fix(Instruction** r, const Instruction& i, const Tiles& natural, const Tiles& want);

  const Module& g_;
  int n_;
  const RegionPins* pins_;  // a while region's fixed layouts, or null
  std::map<int64_t, std::vector<Instruction*>> while_results_;  // global while id -> local results
  std::vector<Tiles> sh_;
  std::vector<bool> pinned_;
  std::vector<bool> manual_;    // each device's own value (MarkManual)
  std::vector<bool> constant_;  // made from constants alone
  std::vector<std::string> source_, via_;
  std::vector<int64_t> from_;  // the instruction each propagated layout came from (-1: none)
  std::vector<Instruction*> lv_;
  Instruction* pid_ = nullptr;
  const Instruction* emitting_ = nullptr;  // the global op being emitted
  bool emitting_whole_ = false;            // its operands are made whole for want of a split rule
  std::map<std::vector<int32_t>, Instruction*> starts_;  // StartIndex's tables by content
  std::map<std::vector<int64_t>, Memo> memo_;             // layout rules' results (Remember)
  SpmdResult result_;
};

}  // namespace shardscope::compiler::spmd_internal
