// Sharding propagation (forward, backward, manual values) and the driver of
// the SPMD partitioner; see spmd_partitioner.h.
#include "compiler/spmd.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "compiler/spmd_partitioner.h"

namespace shardscope::compiler::spmd_internal {

absl::StatusOr<SpmdResult> Partitioner::Run() {
  size_t count = g_.instructions().size();
  sh_.resize(count);
  pinned_.assign(count, false);
  manual_.assign(count, false);
  constant_.assign(count, false);
  source_.assign(count, "propagated");
  via_.assign(count, "");
  from_.assign(count, -1);
  if (absl::Status s = Forward(); !s.ok()) return s;
  Backward();
  if (absl::Status s = Forward(); !s.ok()) return s;
  result_.local = std::make_unique<Module>(g_.name());
  result_.local->set_num_partitions(n_);
  lv_.assign(count, nullptr);
  for (const auto& i : g_.instructions()) {
    if (absl::Status s = Emit(*i); !s.ok()) return s;
  }
  std::vector<Instruction*> outs;
  for (size_t k = 0; k < g_.outputs().size(); ++k) {
    const Instruction* o = g_.outputs()[k];
    Instruction* v = lv_[o->id];
    Tiles layout = sh_[o->id];
    if (pins_ && k < pins_->outputs.size() && !manual_[o->id] && !layout.SameLayout(pins_->outputs[k])) {
      auto moved = Reshard(v, *o, layout, pins_->outputs[k]);
      if (!moved.ok()) return moved.status();
      v = *moved;
      layout = pins_->outputs[k];
    }
    outs.push_back(v);
    result_.output_shardings.push_back(manual_[o->id] ? Sharding::Manual() : layout.ToSharding());
  }
  result_.local->SetOutputs(outs);
  result_.local->output_shardings() = result_.output_shardings;
  for (const Instruction* p : g_.parameters()) {
    const bool own = p->sharding && (p->sharding->kind() == Sharding::Kind::kMaximal ||
                                     p->sharding->kind() == Sharding::Kind::kManual);
    result_.param_shardings.push_back(own ? *p->sharding : sh_[p->id].ToSharding());
  }
  std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, Sharding> as_sharding;
  for (const auto& i : g_.instructions()) {
    // Many ops share a layout, and converting one costs a pass over the devices.
    const Tiles& t = sh_[i->id];
    auto [it, fresh] = as_sharding.try_emplace(std::make_pair(t.dims, t.devices()));
    if (fresh) it->second = t.ToSharding();
    const bool maximal = i->sharding && i->sharding->kind() == Sharding::Kind::kMaximal;
    result_.decisions.push_back({i->id, manual_[i->id] ? Sharding::Manual() : maximal ? *i->sharding : it->second,
                                 source_[i->id], via_[i->id], from_[i->id]});
  }
  if (absl::Status s = Verify(*result_.local); !s.ok())
    return absl::InternalError(absl::StrCat("SPMD partitioner produced an invalid program: ", s.message()));
  return std::move(result_);
}

absl::Status Partitioner::Forward() {
  for (const auto& ip : g_.instructions()) {
    const Instruction& i = *ip;
    if (pinned_[i.id]) continue;
    int rank = i.shape.rank();
    if (absl::Status s = MarkManual(i); !s.ok()) return s;
    if (manual_[i.id]) {  // each device's own value: the partitioner leaves it alone
      sh_[i.id] = Tiles::Replicated(rank, n_);
      pinned_[i.id] = true;
      source_[i.id] = i.op == Opcode::kParameter ? "annotated" : "propagated";
      via_[i.id] = i.op == Opcode::kParameter ? "" : absl::StrCat(OpcodeName(i.op), " (manual)");
      continue;
    }
    // A value on one device is made whole on every device from it (a
    // collective_broadcast, in Emit); it is then replicated.
    const bool maximal = i.sharding && i.sharding->kind() == Sharding::Kind::kMaximal;
    if (maximal) {
      if (i.sharding->maximal_device() < 0 || i.sharding->maximal_device() >= n_)
        return absl::InvalidArgumentError(absl::StrCat(Where(i), ": ", i.sharding->ToString(), " names a device the ",
                                                       n_, " devices do not have"));
      sh_[i.id] = Tiles::Replicated(rank, n_);
      pinned_[i.id] = true;
      source_[i.id] = "annotated";
      continue;
    }
    if (i.sharding && i.op != Opcode::kParameter) {  // the user's constraint on a value: fixed
      auto t = Tiles::From(*i.sharding, rank, n_);
      if (!t.ok())
        return absl::InvalidArgumentError(absl::StrCat(OpcodeName(i.op), i.loc.known() ? " at " : "", i.loc.file,
                                                       i.loc.known() ? absl::StrCat(":", i.loc.line) : "", ": ",
                                                       t.status().message()));
      sh_[i.id] = *t;
      pinned_[i.id] = true;
      source_[i.id] = "annotated";
      continue;
    }
    switch (i.op) {
      case Opcode::kParameter: {
        if (pins_ && i.param_index < static_cast<int64_t>(pins_->params.size())) {  // a while's carried value
          sh_[i.id] = pins_->params[i.param_index];
          pinned_[i.id] = true;
          source_[i.id] = "propagated";
          via_[i.id] = "while";
          break;
        }
        auto t = Tiles::From(i.sharding.value_or(Sharding()), rank, n_);
        if (!t.ok())
          return absl::InvalidArgumentError(absl::StrCat("parameter '", i.name, "' ", i.shape.ToString(),
                                                         ": ", t.status().message()));
        sh_[i.id] = *t;
        pinned_[i.id] = true;
        source_[i.id] = i.sharding ? "annotated" : "default";
        break;
      }
      case Opcode::kBroadcastInDim:
        sh_[i.id] = BroadcastOutOf(i, sh_[i.operands[0]->id]);
        via_[i.id] = "broadcast_in_dim";
        break;
      case Opcode::kTranspose:
        sh_[i.id] = TransposeOutOf(i, sh_[i.operands[0]->id]);
        via_[i.id] = "transpose";
        break;
      case Opcode::kReshape: {
        auto t = ReshapeOutOf(i, sh_[i.operands[0]->id]);
        sh_[i.id] = t ? *t : Tiles::Replicated(rank, n_);
        via_[i.id] = "reshape";
        break;
      }
      case Opcode::kDotGeneral:
        sh_[i.id] = PlanDotOf(i).out;
        via_[i.id] = "dot_general";
        break;
      case Opcode::kReduce:
        sh_[i.id] = PlanReduce(i, sh_[i.operands[0]->id], n_).out;
        via_[i.id] = "reduce";
        break;
      case Opcode::kConvolution: {
        auto p = PlanConv(i, sh_[i.operands[0]->id], n_);
        sh_[i.id] = p ? p->out : Tiles::Replicated(rank, n_);
        via_[i.id] = "convolution";
        break;
      }
      case Opcode::kReduceWindow: {
        const Tiles& t = sh_[i.operands[0]->id];
        sh_[i.id] = WindowKeepsSplit(i, t) ? t : Tiles::Replicated(rank, n_);
        via_[i.id] = "reduce_window";
        break;
      }
      case Opcode::kPad: {
        const Tiles& t = sh_[i.operands[0]->id];
        sh_[i.id] = PadKeepsSplit(i, t) ? t : Tiles::Replicated(rank, n_);
        via_[i.id] = "pad";
        break;
      }
      case Opcode::kSlice:
      case Opcode::kConcatenate:
      case Opcode::kDynamicSlice:
      case Opcode::kDynamicUpdateSlice:
        sh_[i.id] = SliceLayout(i, sh_);
        via_[i.id] = OpcodeName(i.op);
        break;
      case Opcode::kGather: {
        auto p = PlanGather(i, sh_[i.operands[0]->id], sh_[i.operands[1]->id], n_);
        sh_[i.id] = p ? p->out : Tiles::Replicated(rank, n_);
        via_[i.id] = "gather";
        break;
      }
      case Opcode::kWhile:  // holds no value; its results are laid out as their inits
        sh_[i.id] = Tiles::Replicated(rank, n_);
        break;
      case Opcode::kGetTupleElement:
        sh_[i.id] = sh_[i.operands[0]->operands[i.dims[0]]->id];
        via_[i.id] = "while";
        from_[i.id] = i.operands[0]->operands[i.dims[0]]->id;
        break;
      case Opcode::kOptimizationBarrier:  // the value passes through as it is laid out
        sh_[i.id] = sh_[i.operands[0]->id];
        via_[i.id] = "optimization_barrier";
        break;
      default:
        if (IsCollective(i.op) || i.op == Opcode::kPartitionId)
          return absl::InvalidArgumentError(absl::StrCat(
              OpcodeName(i.op), " in a global program: collectives are inserted by the partitioner"));
        if (IsElementwise(i.op)) {
          const Tiles* best = nullptr;
          for (const Instruction* o : i.operands) {
            if (o->shape.rank() != rank) continue;
            const Tiles& t = sh_[o->id];
            if (!best || t.DataTiles() > best->DataTiles()) best = &t;
          }
          sh_[i.id] = best ? *best : Tiles::Replicated(rank, n_);
          via_[i.id] = OpcodeName(i.op);
        } else {
          sh_[i.id] = Tiles::Replicated(rank, n_);  // constant, iota, ops without a split rule
        }
    }
    // The operand the layout came from: the most split one (the first on
    // a tie), as the rules let the most split operand drive; not one that
    // took its layout from this op (backward), which would close a loop.
    const Instruction* from = nullptr;
    for (const Instruction* o : i.operands)
      if (o->shape.rank() > 0 && o->op != Opcode::kWhile && from_[o->id] != i.id &&
          (!from || sh_[o->id].DataTiles() > sh_[from->id].DataTiles()))
        from = o;
    if (from && !via_[i.id].empty()) from_[i.id] = from->id;
  }
  return absl::OkStatus();
}

std::string Partitioner::Where(const Instruction& i) {
  if (i.op == Opcode::kParameter) return absl::StrCat("parameter '", i.name, "'");
  return absl::StrCat(OpcodeName(i.op), i.loc.known() ? absl::StrCat(" at ", i.loc.file, ":", i.loc.line) : "");
}

absl::Status Partitioner::MarkManual(const Instruction& i) {
  bool any = i.sharding && i.sharding->kind() == Sharding::Kind::kManual, all = true;
  bool constant = i.op == Opcode::kConstant || i.op == Opcode::kIota;
  if (!i.operands.empty()) constant = i.op != Opcode::kParameter;
  for (const Instruction* o : i.operands) {
    constant = constant && constant_[o->id];
    if (manual_[o->id]) any = true;
    else if (!constant_[o->id]) all = false;
  }
  constant_[i.id] = constant;
  if (any && !all)
    return absl::InvalidArgumentError(absl::StrCat(
        Where(i), " mixes manually sharded values with values the partitioner lays out; annotate them "
        "all {manual}, or none"));
  manual_[i.id] = any;
  return absl::OkStatus();
}

void Partitioner::Backward() {
  const auto& instrs = g_.instructions();
  std::vector<std::vector<const Instruction*>> users(instrs.size());
  for (const auto& i : instrs)
    for (const Instruction* o : i->operands) users[o->id].push_back(i.get());
  std::vector<bool> is_output(instrs.size(), false);
  for (const Instruction* o : g_.outputs()) is_output[o->id] = true;
  // Every user of `o` but `reader` is elementwise in `layout`.
  auto users_agree = [&](const Instruction& o, const Instruction& reader, const Tiles& layout) {
    if (is_output[o.id]) return false;
    for (const Instruction* u : users[o.id])
      if (u != &reader && !(IsElementwise(u->op) && sh_[u->id].SameLayout(layout))) return false;
    return true;
  };
  for (auto it = instrs.rbegin(); it != instrs.rend(); ++it) {
    const Instruction& i = **it;
    if (!IsElementwise(i.op) || sh_[i.id].DataTiles() == 1) continue;
    for (const Instruction* o : i.operands) {
      // A loop's result split by its user: start the loop split, when its
      // init is cheap to make so and read by the loop alone (an accumulator
      // of zeros); the carried value then stays split through the loop.
      const Instruction* reader = &i;
      if (o->op == Opcode::kGetTupleElement) {
        reader = o->operands[0];
        o = reader->operands[o->dims[0]];
      }
      if (o->op == Opcode::kParameter || pinned_[o->id]) continue;
      if (o->shape.dims != i.shape.dims || sh_[o->id].DataTiles() != 1) continue;
      const bool cheap = o->op == Opcode::kBroadcastInDim || o->op == Opcode::kIota ||
                         o->op == Opcode::kConstant || IsElementwise(o->op);
      const bool contraction = o->op == Opcode::kDotGeneral || o->op == Opcode::kReduce ||
                               o->op == Opcode::kConvolution || o->op == Opcode::kScatter;
      if (!(cheap && users_agree(*o, *reader, sh_[i.id])) && !contraction) continue;
      sh_[o->id] = sh_[i.id];
      pinned_[o->id] = true;
      via_[o->id] = absl::StrCat(OpcodeName(i.op), " (backward)");
      from_[o->id] = i.id;
    }
  }
}

std::vector<int64_t> Partitioner::MemoKey(int tag, const Instruction& i, std::initializer_list<const Tiles*> in) {
  std::vector<int64_t> k = {tag, i.shape.rank()};
  k.insert(k.end(), i.shape.dims.begin(), i.shape.dims.end());
  k.insert(k.end(), i.dims.begin(), i.dims.end());
  for (const Instruction* o : i.operands) {
    k.push_back(-1);
    k.insert(k.end(), o->shape.dims.begin(), o->shape.dims.end());
  }
  for (const auto* v : {&i.dot.lhs_batch, &i.dot.rhs_batch, &i.dot.lhs_contracting, &i.dot.rhs_contracting}) {
    k.push_back(-2);
    k.insert(k.end(), v->begin(), v->end());
  }
  for (const Tiles* t : in) {
    k.push_back(-3);
    k.insert(k.end(), t->dims.begin(), t->dims.end());
    k.push_back(reinterpret_cast<intptr_t>(t->assignment.get()));
  }
  return k;
}

Tiles Partitioner::BroadcastOutOf(const Instruction& i, const Tiles& t) {
  return *Remember(MemoKey(0, i, {&t}), {&t}, [&](Memo& m) { m.out = BroadcastOut(i, t, n_); }).out;
}

Tiles Partitioner::TransposeOutOf(const Instruction& i, const Tiles& t) {
  return *Remember(MemoKey(1, i, {&t}), {&t}, [&](Memo& m) { m.out = TransposeOut(i, t, n_); }).out;
}

std::optional<Tiles> Partitioner::ReshapeOutOf(const Instruction& i, const Tiles& t) {
  return Remember(MemoKey(2, i, {&t}), {&t}, [&](Memo& m) { m.out = ReshapeOut(i, t, n_); }).out;
}

const DotPlan& Partitioner::PlanDotOf(const Instruction& i) {
  const Tiles& l = sh_[i.operands[0]->id];
  const Tiles& r = sh_[i.operands[1]->id];
  return Remember(MemoKey(3, i, {&l, &r}), {&l, &r}, [&](Memo& m) { m.dot = PlanDot(i, l, r, n_); }).dot;
}

}  // namespace shardscope::compiler::spmd_internal

namespace shardscope::compiler {

absl::StatusOr<SpmdResult> SpmdPartition(const Module& global, int num_partitions) {
  if (num_partitions < 1) return absl::InvalidArgumentError("num_partitions must be >= 1");
  if (absl::Status s = Verify(global); !s.ok()) return s;
  return spmd_internal::Partitioner(global, num_partitions).Run();
}

}  // namespace shardscope::compiler
