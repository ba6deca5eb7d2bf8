#include "core/autograd.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "core/autocast.h"
#include "core/ops.h"
#include "core/ops_cnn.h"
#include "core/remat.h"

namespace shardscope {
namespace {
using compiler::Opcode;
using namespace internal;

Tensor Wrap(const std::shared_ptr<Node>& n) {
  // A handle on an existing node (autograd reuses forward values); a value a
  // cut computed is read as that data, not computed again.
  if (std::shared_ptr<Node> data = n->materialized.lock()) return Tensor(std::move(data));
  return Tensor(n);
}

Tensor Full(const Shape& s, double v, const SourceLoc& loc) {
  return Broadcast(Constant(v, s.dtype, loc), s.dims, {}, loc);
}

Tensor Zeros(const Shape& s, const SourceLoc& loc) { return Full(s, 0, loc); }

// Sums `g` down to `shape` over the dimensions a broadcast_in_dim expanded.
Tensor UnBroadcast(const Tensor& g, const Node& n, const SourceLoc& loc) {
  const Shape& in = n.operands[0]->shape;
  std::vector<int64_t> reduce;
  for (int od = 0; od < g.rank(); ++od) {
    auto it = std::find(n.dims.begin(), n.dims.end(), od);
    if (it == n.dims.end()) reduce.push_back(od);
    else if (in.dims[it - n.dims.begin()] == 1 && g.shape().dims[od] != 1) reduce.push_back(od);
  }
  Tensor r = reduce.empty() ? g : Reduce(g, reduce, compiler::ReduceKind::kSum, loc);
  return Reshape(r, in.dims, loc);
}

bool Contains(const std::vector<int64_t>& v, int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); }

// Gradient of one dot_general operand: contract g with the other operand over
// the other's free dims, then put the dims back in this operand's order.
Tensor DotGrad(const Tensor& g, const Tensor& other, const Shape& self, const std::vector<int64_t>& self_batch,
               const std::vector<int64_t>& self_contract, const std::vector<int64_t>& other_batch,
               const std::vector<int64_t>& other_contract, bool self_is_lhs, int other_free_start_in_g,
               const SourceLoc& loc) {
  int nb = static_cast<int>(self_batch.size());
  std::vector<int64_t> other_free;
  for (int d = 0; d < other.rank(); ++d)
    if (!Contains(other_batch, d) && !Contains(other_contract, d)) other_free.push_back(d);
  compiler::DotDims dd;
  for (int k = 0; k < nb; ++k) { dd.lhs_batch.push_back(k); dd.rhs_batch.push_back(other_batch[k]); }
  for (size_t k = 0; k < other_free.size(); ++k) {
    dd.lhs_contracting.push_back(other_free_start_in_g + static_cast<int64_t>(k));
    dd.rhs_contracting.push_back(other_free[k]);
  }
  Tensor r = Dot(g, other, dd, loc);
  // r dims: [batch, self free (as in g), other's contracting dims in other's order].
  std::vector<int64_t> self_free;
  for (int d = 0; d < self.rank(); ++d)
    if (!Contains(self_batch, d) && !Contains(self_contract, d)) self_free.push_back(d);
  std::vector<int64_t> other_contract_sorted;
  for (int d = 0; d < other.rank(); ++d)
    if (Contains(other_contract, d)) other_contract_sorted.push_back(d);
  std::vector<int64_t> pos(self.rank());  // position in r of each self dim
  for (int k = 0; k < nb; ++k) pos[self_batch[k]] = k;
  for (size_t k = 0; k < self_free.size(); ++k) pos[self_free[k]] = nb + static_cast<int64_t>(k);
  for (size_t k = 0; k < other_contract_sorted.size(); ++k) {
    int64_t od = other_contract_sorted[k];
    int64_t idx = std::find(other_contract.begin(), other_contract.end(), od) - other_contract.begin();
    pos[self_contract[idx]] = nb + static_cast<int64_t>(self_free.size() + k);
  }
  (void)self_is_lhs;
  bool identity = true;
  for (int d = 0; d < self.rank(); ++d) identity &= pos[d] == d;
  return identity ? r : Transpose(r, pos, loc);
}

// Gradients of node `n`'s operands given the gradient `g` of its result.
std::vector<Tensor> Vjp(const std::shared_ptr<Node>& np, const Tensor& g) {
  const Node& n = *np;
  const SourceLoc& loc = n.loc;
  auto op = [&](int k) { return Wrap(n.operands[k]); };
  switch (n.op) {
    case Opcode::kAdd: return {g, g};
    case Opcode::kSubtract: return {g, Unary(Opcode::kNegate, g, loc)};
    case Opcode::kMultiply: return {Binary(Opcode::kMultiply, g, op(1), loc), Binary(Opcode::kMultiply, g, op(0), loc)};
    case Opcode::kDivide: {
      Tensor ga = Binary(Opcode::kDivide, g, op(1), loc);
      Tensor gb = Unary(Opcode::kNegate, Binary(Opcode::kDivide, Binary(Opcode::kMultiply, ga, op(0), loc), op(1), loc), loc);
      return {ga, gb};
    }
    case Opcode::kMaximum: {
      Tensor p = Compare(op(0), op(1), compiler::CompareDirection::kGE, loc);
      Tensor z = Zeros(g.shape(), loc);
      return {Select(p, g, z, loc), Select(p, z, g, loc)};
    }
    case Opcode::kMinimum: {
      Tensor p = Compare(op(0), op(1), compiler::CompareDirection::kLE, loc);
      Tensor z = Zeros(g.shape(), loc);
      return {Select(p, g, z, loc), Select(p, z, g, loc)};
    }
    case Opcode::kSlice: {  // zeros around the gradient (stride 1 only)
      const Shape& in = n.operands[0]->shape;
      compiler::PadDims p;
      for (int d = 0; d < in.rank(); ++d) {
        p.low.push_back(n.slice.start[d]);
        p.high.push_back(in.dims[d] - n.slice.limit[d]);
        p.interior.push_back(0);
      }
      return {Pad(g, std::move(p), loc)};
    }
    case Opcode::kConcatenate: {  // each part's slice of the gradient
      std::vector<Tensor> out;
      int64_t dim = n.dims[0], at = 0;
      for (const auto& o : n.operands) {
        compiler::SliceDims s;
        for (int d = 0; d < g.rank(); ++d) {
          s.start.push_back(d == dim ? at : 0);
          s.limit.push_back(d == dim ? at + o->shape.dims[d] : g.shape().dims[d]);
          s.stride.push_back(1);
        }
        at += o->shape.dims[dim];
        out.push_back(Slice(g, std::move(s), loc));
      }
      return out;
    }
    case Opcode::kGather: {  // embedding rows: scatter-add the gradient back
      const auto& gd = n.gather;
      compiler::ScatterDims s;
      s.update_window_dims = gd.offset_dims;
      s.inserted_window_dims = gd.collapsed_slice_dims;
      s.scatter_dims_to_operand_dims = gd.start_index_map;
      s.index_vector_dim = gd.index_vector_dim;
      return {ScatterAdd(Zeros(n.operands[0]->shape, loc), op(1), g, std::move(s), loc), Tensor()};
    }
    case Opcode::kNegate: return {Unary(Opcode::kNegate, g, loc)};
    case Opcode::kSqrt:  // d sqrt(x) = 1 / (2 sqrt(x))
      return {Binary(Opcode::kDivide, g, Binary(Opcode::kMultiply, Full(g.shape(), 2, loc), Wrap(np), loc), loc)};
    case Opcode::kRsqrt: {  // d x^-1/2 = -1/2 x^-3/2 = -1/2 out^3
      Tensor out = Wrap(np);
      Tensor cube = Binary(Opcode::kMultiply, Binary(Opcode::kMultiply, out, out, loc), out, loc);
      return {Binary(Opcode::kMultiply, g, Binary(Opcode::kMultiply, Full(g.shape(), -0.5, loc), cube, loc), loc)};
    }
    case Opcode::kTanh: {  // 1 - tanh^2
      Tensor out = Wrap(np);
      Tensor d = Binary(Opcode::kSubtract, Full(g.shape(), 1, loc), Binary(Opcode::kMultiply, out, out, loc), loc);
      return {Binary(Opcode::kMultiply, g, d, loc)};
    }
    case Opcode::kLogistic: {  // s (1 - s)
      Tensor out = Wrap(np);
      Tensor d = Binary(Opcode::kMultiply, out, Binary(Opcode::kSubtract, Full(g.shape(), 1, loc), out, loc), loc);
      return {Binary(Opcode::kMultiply, g, d, loc)};
    }
    case Opcode::kAbs: {
      Tensor p = Compare(op(0), Zeros(g.shape(), loc), compiler::CompareDirection::kGE, loc);
      return {Select(p, g, Unary(Opcode::kNegate, g, loc), loc)};
    }
    case Opcode::kPower: {  // d a^b = b a^(b-1) da + a^b log(a) db
      Tensor bm1 = Binary(Opcode::kSubtract, op(1), Full(g.shape(), 1, loc), loc);
      Tensor ga = Binary(Opcode::kMultiply, g,
                         Binary(Opcode::kMultiply, op(1), Binary(Opcode::kPower, op(0), bm1, loc), loc), loc);
      Tensor gb = Binary(Opcode::kMultiply, g, Binary(Opcode::kMultiply, Wrap(np), Unary(Opcode::kLog, op(0), loc), loc), loc);
      return {ga, gb};
    }
    case Opcode::kExponential: return {Binary(Opcode::kMultiply, g, Wrap(np), loc)};
    case Opcode::kLog: return {Binary(Opcode::kDivide, g, op(0), loc)};
    case Opcode::kConvert:
      return {IsFloat(n.operands[0]->shape.dtype) ? Convert(g, n.operands[0]->shape.dtype, loc) : Tensor()};
    case Opcode::kSelect: {
      Tensor z = Zeros(g.shape(), loc);
      return {Tensor(), Select(op(0), g, z, loc), Select(op(0), z, g, loc)};
    }
    case Opcode::kBroadcastInDim: return {UnBroadcast(g, n, loc)};
    case Opcode::kReshape: return {Reshape(g, n.operands[0]->shape.dims, loc)};
    case Opcode::kTranspose: {
      std::vector<int64_t> inv(n.dims.size());
      for (size_t k = 0; k < n.dims.size(); ++k) inv[n.dims[k]] = static_cast<int64_t>(k);
      return {Transpose(g, inv, loc)};
    }
    case Opcode::kReduce: {
      const Shape& in = n.operands[0]->shape;
      std::vector<int64_t> kept;
      for (int d = 0; d < in.rank(); ++d)
        if (!Contains(n.dims, d)) kept.push_back(d);
      Tensor gb = Broadcast(g, in.dims, kept, loc);
      if (n.reduce == compiler::ReduceKind::kSum) return {gb, Tensor()};
      if (n.reduce == compiler::ReduceKind::kMax || n.reduce == compiler::ReduceKind::kMin) {
        Tensor hit = Compare(op(0), Broadcast(Wrap(np), in.dims, kept, loc), compiler::CompareDirection::kEQ, loc);
        return {Select(hit, gb, Zeros(in, loc), loc), Tensor()};
      }
      return {Tensor(), Tensor()};
    }
    case Opcode::kOptimizationBarrier: {  // the identity on its first operand
      std::vector<Tensor> out(n.operands.size());
      out[0] = g;
      return out;
    }
    case Opcode::kDotGeneral: {
      // Under autocast the result is f32 and the operands bf16: their
      // gradients take their type (g rounded once; the GEMMs still sum in f32).
      const Tensor gd = Convert(g, n.operands[0]->shape.dtype, loc);
      const auto& dd = n.dot;
      int nb = static_cast<int>(dd.lhs_batch.size());
      int lhs_free = n.operands[0]->shape.rank() - nb - static_cast<int>(dd.lhs_contracting.size());
      Tensor ga = DotGrad(gd, op(1), n.operands[0]->shape, dd.lhs_batch, dd.lhs_contracting, dd.rhs_batch,
                          dd.rhs_contracting, true, nb + lhs_free, loc);
      // For the rhs, g's lhs-free dims are contracted with the lhs's free dims;
      // move gd's rhs-free dims ahead of them first.
      std::vector<int64_t> perm;
      int rhs_free = gd.rank() - nb - lhs_free;
      for (int k = 0; k < nb; ++k) perm.push_back(k);
      for (int k = 0; k < rhs_free; ++k) perm.push_back(nb + lhs_free + k);
      for (int k = 0; k < lhs_free; ++k) perm.push_back(nb + k);
      bool id = true;
      for (size_t k = 0; k < perm.size(); ++k) id &= perm[k] == static_cast<int64_t>(k);
      Tensor gt = id ? gd : Transpose(gd, perm, loc);
      Tensor gb = DotGrad(gt, op(0), n.operands[1]->shape, dd.rhs_batch, dd.rhs_contracting, dd.lhs_batch,
                          dd.lhs_contracting, false, nb + rhs_free, loc);
      return {ga, gb};
    }
    case Opcode::kConvolution: return ConvolutionVjp(np, g);  // core/ops_cnn.cc
    case Opcode::kReduceWindow: return ReduceWindowVjp(np, g);
    default:
      return std::vector<Tensor>(n.operands.size());
  }
}

}  // namespace

absl::Status backward(const Tensor& loss, std::source_location sl) {
  SourceLoc where = Loc(sl);
  if (!loss.defined()) return absl::InvalidArgumentError("backward: undefined tensor");
  if (!loss.status().ok()) return loss.status();
  if (loss.shape().elements() != 1)
    return absl::InvalidArgumentError(absl::StrCat("backward: loss must be a scalar, got ", loss.shape().ToString(),
                                                   " (at ", where.file, ":", where.line, ")"));
  if (!loss.requires_grad())
    return absl::InvalidArgumentError(absl::StrCat("backward: the loss does not depend on any tensor that requires a "
                                                   "gradient (at ", where.file, ":", where.line, ")"));
  const Node* freed = nullptr;
  internal::Backprop({{loss.node(), internal::Broadcast(internal::Constant(1, loss.dtype(), where),
                                                        loss.shape().dims, {}, where)}},
                     {}, where, &freed);
  if (freed)
    return absl::FailedPreconditionError(absl::StrCat(
        "backward at ", where.file, ":", where.line, ": the loss depends on a value made at ", freed->created.file, ":",
        freed->created.line, " whose graph an earlier backward already used and freed (a value read or mark_step "
        "since then keeps its value, not its graph); compute it again from the inputs, or call backward once"));
  return absl::OkStatus();
}

namespace internal {

std::unordered_map<const Node*, Tensor> Backprop(const std::vector<std::pair<std::shared_ptr<Node>, Tensor>>& seeds,
                                                 const std::unordered_set<const Node*>& stops,
                                                 const SourceLoc& where, const Node** freed) {
  // Topological order of the nodes that need gradients (iterative DFS).
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  for (const auto& [root, g0] : seeds) {
    if (!seen.insert(root.get()).second) continue;
    std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [n, k] = stack.back();
      const auto& edges = GradEdges(*n);
      if (n->grad_leaf || stops.count(n.get()) || k >= edges.size()) {
        order.push_back(n);
        stack.pop_back();
        continue;
      }
      auto child = edges[k++];
      if (child->requires_grad && seen.insert(child.get()).second) stack.push_back({child, 0});
    }
  }
  for (const auto& n : order)
    if (n->history_freed && n->grad_through.empty() && !n->grad_leaf && freed) {
      *freed = n.get();
      return {};
    }
  std::unordered_map<Node*, Tensor> grads;
  for (const auto& [root, g0] : seeds) {
    auto [slot, fresh] = grads.try_emplace(root.get(), g0);
    if (!fresh) slot->second = internal::Binary(Opcode::kAdd, slot->second, g0, where);
  }
  NoGradGuard no_grad;  // gradient graphs are not themselves differentiated
  internal::AutocastPause no_autocast;  // gradients take their values' types (see the dot's Vjp)
  RematPass remat;
  std::unordered_map<const Node*, Tensor> stopped;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto& n = *it;
    auto gi = grads.find(n.get());
    if (gi == grads.end()) continue;
    Tensor g = gi->second;
    if (n->annotation && n->shard_gradient && g.defined() && !g.node()->is_data()) {
      g.node()->annotation = n->annotation;  // mark_sharding_with_gradients
      g.node()->note_loc = n->note_loc;      // its line, for a recompilation it causes
    }
    if (stops.count(n.get())) {
      stopped[n.get()] = g;
      continue;
    }
    if (n->grad_leaf) {
      TensorImpl* leaf = n->grad_leaf;
      if (leaf->grad) {
        Tensor prev;
        Tensor acc = internal::Binary(Opcode::kAdd, Tensor(leaf->grad->node), g, where);
        leaf->grad = acc.impl();
      } else {
        leaf->grad = g.impl();
      }
      if (leaf->grad && leaf->grad->name.empty()) leaf->grad->name = absl::StrCat(leaf->name, ".grad");
      continue;
    }
    std::vector<Tensor> og = !n->grad_through.empty() ? std::vector<Tensor>{g}  // through a cut: identity
                             : remat.Handles(*n)          ? remat.Vjp(n, g)
                                                          : Vjp(n, g);
    const auto& edges = GradEdges(*n);
    for (size_t k = 0; k < edges.size() && k < og.size(); ++k) {
      const auto& o = edges[k];
      if (!o->requires_grad || !og[k].defined()) continue;
      auto [slot, fresh] = grads.try_emplace(o.get(), og[k]);
      if (!fresh) slot->second = internal::Binary(Opcode::kAdd, slot->second, og[k], o->loc);
    }
    grads.erase(gi);
  }
  // Done with this graph: what it kept for backward is let go.
  for (const auto& n : order) {
    if (!n->is_data()) n->backward_done = true;
    if (!n->grad_through.empty()) {
      n->grad_through.clear();
      n->history_freed = true;
    }
  }
  return stopped;
}

}  // namespace internal

}  // namespace shardscope
