// The local program, op by op: each global op with its operands in the
// layouts its plan wants; see spmd_partitioner.h.
#include "compiler/spmd_partitioner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardscope::compiler::spmd_internal {

absl::Status Partitioner::Emit(const Instruction& i) {
  emitting_ = &i;
  Module& m = *result_.local;
  if (manual_[i.id]) {  // as written: each device runs it on its own values
    auto e = std::make_unique<Instruction>(i);
    for (auto& o : e->operands) o = lv_[o->id];
    if (i.op != Opcode::kParameter) e->sharding.reset();
    lv_[i.id] = m.Add(std::move(e));
    return absl::OkStatus();
  }
  const Tiles& out = sh_[i.id];
  const Shape local_shape = LocalShape(i.shape, out);
  Instruction* r = nullptr;
  switch (i.op) {
    case Opcode::kParameter:
      r = m.Parameter(local_shape, i.name, i.loc);
      if (i.sharding && i.sharding->kind() == Sharding::Kind::kMaximal) {
        // Only that device's value counts: every device takes it from there.
        r->sharding = i.sharding;
        std::vector<int64_t> group = {i.sharding->maximal_device()};
        for (int64_t d = 0; d < n_; ++d)
          if (d != group[0]) group.push_back(d);
        if (n_ > 1) {
          r = Moves(m.CollectiveBroadcast(r, {group}, i.loc), i);
        }
        break;
      }
      r->sharding = out.ToSharding();
      break;
    case Opcode::kConstant: {
      const Literal& lit = *i.literal;
      bool splat = true;
      for (int64_t k = 1; k < lit.elements() && splat; ++k) splat = lit.GetDouble(k) == lit.GetDouble(0);
      if (out.DataTiles() == 1) {
        r = m.Constant(lit, i.loc);
      } else if (splat) {
        Literal l(local_shape);
        for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, lit.GetDouble(0));
        r = m.Constant(std::move(l), i.loc);
      } else {
        auto s = Reshard(m.Constant(lit, i.loc), i, Tiles::Replicated(i.shape.rank(), n_), out);
        if (!s.ok()) return s.status();
        r = *s;
      }
      break;
    }
    case Opcode::kIota:
      if (out.dims[i.dims[0]] == 1) {
        r = m.Iota(local_shape, i.dims[0], i.loc);
      } else {
        auto s = Reshard(m.Iota(i.shape, i.dims[0], i.loc), i, Tiles::Replicated(i.shape.rank(), n_), out);
        if (!s.ok()) return s.status();
        r = *s;
      }
      break;
    case Opcode::kBroadcastInDim: {
      auto a = Operand(i, 0, BroadcastOperandFor(i, out, n_));
      if (!a.ok()) return a.status();
      r = m.BroadcastInDim(*a, local_shape.dims, i.dims, i.loc);
      break;
    }
    case Opcode::kTranspose: {
      Tiles in = sh_[i.operands[0]->id];
      r = m.Transpose(lv_[i.operands[0]->id], i.dims, i.loc);
      if (absl::Status s = Fix(&r, i, TransposeOutOf(i, in), out); !s.ok()) return s;
      break;
    }
    case Opcode::kReshape: {
      Tiles in = sh_[i.operands[0]->id];
      auto mapped = ReshapeOutOf(i, in);
      if (mapped) {
        r = m.Reshape(lv_[i.operands[0]->id], LocalShape(i.shape, *mapped).dims, i.loc);
        if (absl::Status s = Fix(&r, i, *mapped, out); !s.ok()) return s;
      } else {
        auto a = Operand(i, 0, Tiles::Replicated(in.rank(), n_));
        if (!a.ok()) return a.status();
        r = m.Reshape(*a, i.shape.dims, i.loc);
        if (absl::Status s = Fix(&r, i, Tiles::Replicated(i.shape.rank(), n_), out); !s.ok()) return s;
      }
      break;
    }
    case Opcode::kDotGeneral: {
      const DotPlan p = PlanDotOf(i);
      auto ops = Operands(i, {p.lhs, p.rhs});
      if (!ops.ok()) return ops.status();
      if (p.partial) {  // split contracting dims: padding must add nothing
        (*ops)[0] = MaskPadding((*ops)[0], i.operands[0]->shape, p.lhs, i.dot.lhs_contracting, 0, i.loc);
        (*ops)[1] = MaskPadding((*ops)[1], i.operands[1]->shape, p.rhs, i.dot.rhs_contracting, 0, i.loc);
      }
      r = m.DotGeneral((*ops)[0], (*ops)[1], i.dot, i.loc, i.shape.dtype);
      absl::Status s = p.partial ? CombinePartials(&r, i, ReduceKind::kSum, p.groups, p.out, out)
                                 : Fix(&r, i, p.out, out);
      if (!s.ok()) return s;
      break;
    }
    case Opcode::kWhile:
      if (absl::Status s = EmitWhile(i, &r); !s.ok()) return s;
      break;
    case Opcode::kGetTupleElement:
      r = while_results_.at(i.operands[0]->id).at(i.dims[0]);
      break;
    case Opcode::kOptimizationBarrier: {
      // Each device holds its own shard; the values it waits for are not
      // read, so they are taken in whatever layout they have.
      std::vector<Instruction*> after;
      for (size_t k = 1; k < i.operands.size(); ++k) after.push_back(lv_[i.operands[k]->id]);
      r = m.OptimizationBarrier(lv_[i.operands[0]->id], std::move(after), i.loc);
      break;
    }
    case Opcode::kReduce: {
      ReducePlan p = PlanReduce(i, sh_[i.operands[0]->id], n_);
      Instruction* init = lv_[i.operands[1]->id];
      // Partial sums and products start from the identity, so that the
      // all-reduce counts the init once, not once per shard; it is combined
      // after. Max and min may see it on every shard.
      const bool once = !p.groups.empty() && (i.reduce == ReduceKind::kSum || i.reduce == ReduceKind::kProd);
      const double identity = ReduceIdentity(i.reduce, i.shape.dtype);
      const bool init_is_identity = i.operands[1]->op == Opcode::kConstant &&
                                    i.operands[1]->literal->GetDouble(0) == identity;
      const Instruction& in = *i.operands[0];
      Instruction* x = MaskPadding(lv_[in.id], in.shape, sh_[in.id], i.dims,
                                   ReduceIdentity(i.reduce, in.shape.dtype), i.loc);
      r = m.Reduce(x, once ? m.ScalarConstant(init->shape.dtype, identity, i.loc) : init, i.dims, i.reduce, i.loc);
      absl::Status s = !p.groups.empty() ? CombinePartials(&r, i, i.reduce, p.groups, p.out, out)
                                         : Fix(&r, i, p.out, out);
      if (!s.ok()) return s;
      if (once && !init_is_identity) {
        Instruction* b = m.BroadcastInDim(init, r->shape.dims, {}, i.loc);
        r = m.Binary(i.reduce == ReduceKind::kSum ? Opcode::kAdd : Opcode::kMultiply, r, b, i.loc);
      }
      break;
    }
    case Opcode::kGather: {
      auto p = PlanGather(i, sh_[i.operands[0]->id], sh_[i.operands[1]->id], n_);
      if (!p) {
        if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
        break;
      }
      auto ops = Operands(i, {p->operand, p->indices});
      if (!ops.ok()) return ops.status();
      GatherDims g = i.gather;
      for (int d = 0; d < p->operand.rank(); ++d)  // split dims are taken whole: the local columns
        if (p->operand.dims[d] > 1) g.slice_sizes[d] = (*ops)[0]->shape.dims[d];
      r = m.Gather((*ops)[0], (*ops)[1], std::move(g), i.loc);
      if (absl::Status s = Fix(&r, i, p->out, out); !s.ok()) return s;
      break;
    }
    case Opcode::kScatter: {
      auto p = PlanScatter(i, sh_[i.operands[1]->id], sh_[i.operands[2]->id], n_);
      if (!p) {
        if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
        break;
      }
      const int rank = i.shape.rank();
      const bool sum = i.reduce == ReduceKind::kSum;
      const bool zero_base = IsZero(i.operands[0]);
      auto ops = Operands(i, {Tiles::Replicated(rank, n_), p->indices, p->updates});
      if (!ops.ok()) return ops.status();
      Instruction* into = (*ops)[0];
      // Padded rows of split indices point anywhere: their updates change nothing.
      (*ops)[2] = MaskPadding((*ops)[2], i.operands[2]->shape, p->updates,
                              FreeDims(i.operands[2]->shape.rank(), i.scatter.update_window_dims, {}),
                              ReduceIdentity(i.reduce, i.shape.dtype), i.loc);
      if (sum && !zero_base)
        into = m.BroadcastInDim(m.ScalarConstant(i.shape.dtype, 0, i.loc), i.shape.dims, {}, i.loc);
      r = m.Scatter(into, (*ops)[1], (*ops)[2], i.scatter, i.reduce, i.loc);
      if (absl::Status s = CombinePartials(&r, i, i.reduce, p->groups, Tiles::Replicated(rank, n_), out); !s.ok())
        return s;
      if (sum && !zero_base) {
        auto base = Operand(i, 0, out);
        if (!base.ok()) return base.status();
        r = m.Binary(Opcode::kAdd, r, *base, i.loc);
      }
      break;
    }
    case Opcode::kConvolution: {
      auto p = PlanConv(i, sh_[i.operands[0]->id], n_);
      if (!p) {
        if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
        break;
      }
      auto ops = Operands(i, {p->lhs, p->rhs});
      if (!ops.ok()) return ops.status();
      if (!p->groups.empty()) {  // split features: padding must add nothing
        (*ops)[0] = MaskPadding((*ops)[0], i.operands[0]->shape, p->lhs, {i.conv.input_feature}, 0, i.loc);
        (*ops)[1] = MaskPadding((*ops)[1], i.operands[1]->shape, p->rhs, {i.conv.kernel_input_feature}, 0, i.loc);
      }
      r = m.Convolution((*ops)[0], (*ops)[1], i.conv, i.loc, i.shape.dtype);
      absl::Status s = !p->groups.empty() ? CombinePartials(&r, i, ReduceKind::kSum, p->groups, p->out, out)
                                          : Fix(&r, i, p->out, out);
      if (!s.ok()) return s;
      break;
    }
    case Opcode::kReduceWindow: {
      const Tiles& t = sh_[i.operands[0]->id];
      if (!WindowKeepsSplit(i, t)) {
        if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
        break;
      }
      r = m.ReduceWindow(lv_[i.operands[0]->id], lv_[i.operands[1]->id], i.window, i.reduce, i.loc);
      if (absl::Status s = Fix(&r, i, t, out); !s.ok()) return s;
      break;
    }
    case Opcode::kPad: {
      const Tiles& t = sh_[i.operands[0]->id];
      if (!PadKeepsSplit(i, t)) {
        if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
        break;
      }
      auto v = Operand(i, 1, Tiles::Replicated(0, n_));
      if (!v.ok()) return v.status();
      r = m.Pad(lv_[i.operands[0]->id], *v, i.pad, i.loc);
      if (absl::Status s = Fix(&r, i, t, out); !s.ok()) return s;
      break;
    }
    case Opcode::kSlice:
    case Opcode::kConcatenate:
    case Opcode::kDynamicSlice:
    case Opcode::kDynamicUpdateSlice: {
      // Computed in SliceLayout: the array operands taken in it, scalar
      // start indices whole; a split dim is whole in the window, so its
      // local window is the local dim (and starts at 0).
      const Tiles layout = SliceLayout(i, sh_);
      auto e = std::make_unique<Instruction>(i);
      e->sharding.reset();
      for (size_t k = 0; k < i.operands.size(); ++k) {
        const int rank = i.operands[k]->shape.rank();
        auto v = Operand(i, static_cast<int>(k), rank == 0 ? Tiles::Replicated(0, n_) : layout);
        if (!v.ok()) return v.status();
        e->operands[k] = *v;
      }
      const Shape local = LocalShape(i.shape, layout);
      e->shape = local;
      for (int d = 0; d < layout.rank(); ++d) {
        if (layout.dims[d] == 1) continue;
        if (i.op == Opcode::kSlice) e->slice.limit[d] = local.dims[d];
        if (i.op == Opcode::kDynamicSlice) e->dims[d] = local.dims[d];
      }
      r = m.Add(std::move(e));
      if (absl::Status s = Fix(&r, i, layout, out); !s.ok()) return s;
      break;
    }
    default: {
      if (!IsElementwise(i.op)) {
        if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
        break;
      }
      std::vector<Instruction*> ops;
      for (size_t k = 0; k < i.operands.size(); ++k) {
        const Instruction* o = i.operands[k];
        if (o->shape.rank() != i.shape.rank()) {  // scalar predicate of select
          ops.push_back(lv_[o->id]);
          continue;
        }
        Tiles want = out;
        auto v = Operand(i, static_cast<int>(k), want);
        if (!v.ok()) return v.status();
        ops.push_back(*v);
      }
      auto e = std::make_unique<Instruction>();
      e->op = i.op;
      e->shape = local_shape;
      e->operands = ops;
      e->compare = i.compare;
      e->loc = i.loc;
      e->scope = i.scope;
      r = m.Add(std::move(e));
    }
  }
  if (r->scope.empty()) r->scope = i.scope;
  lv_[i.id] = r;
  return absl::OkStatus();
}

absl::Status Partitioner::EmitWhile(const Instruction& w, Instruction** r) {
  RegionPins body_pins, cond_pins;
  std::vector<Instruction*> init;
  for (const Instruction* o : w.operands) {
    body_pins.params.push_back(sh_[o->id]);
    init.push_back(lv_[o->id]);
  }
  body_pins.outputs = body_pins.params;
  cond_pins.params = body_pins.params;
  cond_pins.outputs = {Tiles::Replicated(0, n_)};
  const std::string where = absl::StrCat("stablehlo.while", w.loc.known() ? " at " : "", w.loc.file,
                                         w.loc.known() ? absl::StrCat(":", w.loc.line) : "");
  std::shared_ptr<const Module> regions[2];
  for (int k = 0; k < 2; ++k) {
    const Module& region = k == 0 ? *w.cond : *w.body;
    auto part = Partitioner(region, n_, k == 0 ? &cond_pins : &body_pins).Run();
    if (!part.ok())
      return absl::Status(part.status().code(), absl::StrCat(where, ", its ", k == 0 ? "cond" : "body", ": ",
                                                             part.status().message()));
    result_.collectives += part->collectives;
    // What the loop makes whole every iteration is recorded against the loop.
    for (Rematerialization rm : part->rematerializations) {
      rm.instruction_id = w.id;
      rm.op = absl::StrCat("while ", k == 0 ? "cond" : "body", ": ", rm.op);
      result_.rematerializations.push_back(std::move(rm));
    }
    regions[k] = std::move(part->local);
  }
  std::vector<Instruction*> results = result_.local->While(init, regions[0], regions[1], w.loc);
  while_results_[w.id] = results;
  *r = results.empty() ? nullptr : results[0]->operands[0];
  if (!*r) return absl::InvalidArgumentError(absl::StrCat(where, " carries no values"));
  return absl::OkStatus();
}

absl::Status Partitioner::EmitWhole(const Instruction& i, Instruction** r) {
  std::vector<Instruction*> ops;
  emitting_whole_ = true;
  for (size_t k = 0; k < i.operands.size(); ++k) {
    auto v = Operand(i, static_cast<int>(k), Tiles::Replicated(i.operands[k]->shape.rank(), n_));
    if (!v.ok()) return v.status();
    ops.push_back(*v);
  }
  emitting_whole_ = false;
  auto e = std::make_unique<Instruction>(i);
  e->operands = ops;
  e->sharding.reset();
  *r = result_.local->Add(std::move(e));
  return Fix(r, i, Tiles::Replicated(i.shape.rank(), n_), sh_[i.id]);
}

}  // namespace shardscope::compiler::spmd_internal
