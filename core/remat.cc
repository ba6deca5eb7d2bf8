// Gradient checkpointing over the lazy graph (see remat.h for the why).
//
// remat() runs fn once, then finds the block it made: the op nodes stamped
// (Node::seq) between its start and end that fn's outputs reach without
// passing through an input. The outputs are handed back as copies marked with
// the block (`remat`), whose one gradient edge is a region node; the region
// node's edges are the outside values the block reads that need gradients
// (inputs, parameters). Backward thus skips the block's forward nodes: the
// outputs give their gradients to the region node, where RematPass copies
// the block's ops (its recomputation, fed through optimization barriers that
// hold those gradients) and runs the autograd engine over the copy, stopping
// at the region's edges, whose gradients go back to the outer pass.
#include "core/remat.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "core/autograd.h"
#include "core/ops.h"

namespace shardscope {
namespace internal {

struct RematRegion {
  std::vector<std::shared_ptr<Node>> inside;   // the nodes the block made, operands first
  std::vector<std::shared_ptr<Node>> outputs;  // per output of fn: its node if the block made it
  std::unordered_set<const Node*> inputs;      // fn's declared inputs
  std::unordered_set<const Node*> reads_input;  // inside nodes that depend on an input
  std::vector<std::shared_ptr<Node>> region_node;  // {the region node}: the outputs' gradient edge
  SourceLoc loc;                               // the remat() call
  std::string scope;                           // the module path there
};

namespace {

std::atomic<uint64_t> g_next_seq{1};
thread_local int g_inside_fn = 0;  // > 0 while a remat's fn runs: inner remats join the outer block

std::string Recomputed(const std::string& scope) {
  return scope.empty() ? "(recomputed)" : absl::StrCat(scope, " (recomputed)");
}

// The recomputation of `r` given its outputs' gradients, differentiated:
// gradients for the region node's edges.
std::vector<Tensor> RecomputeAndDifferentiate(const RematRegion& r, const std::vector<std::shared_ptr<Node>>& edges,
                                              const std::vector<Tensor>& out_grads) {
  // Every barrier holds the block's incoming gradients, so nothing recomputed
  // can be scheduled before backward has reached the block.
  std::vector<std::shared_ptr<Node>> after;
  for (const Tensor& g : out_grads)
    if (g.defined()) after.push_back(g.node());
  std::unordered_map<const Node*, std::shared_ptr<Node>> held;  // outside value -> its barrier
  auto barrier = [&](const std::shared_ptr<Node>& v) {
    auto [it, fresh] = held.try_emplace(v.get());
    if (fresh) {
      auto b = std::make_shared<Node>();
      b->op = compiler::Opcode::kOptimizationBarrier;
      b->shape = v->shape;
      b->operands = {v};
      b->operands.insert(b->operands.end(), after.begin(), after.end());
      b->loc = r.loc;
      b->scope = Recomputed(r.scope);
      b->requires_grad = v->requires_grad;
      b->seq = NextNodeSeq();
      it->second = std::move(b);
    }
    return it->second;
  };
  std::unordered_map<const Node*, std::shared_ptr<Node>> made;  // forward node -> its recomputation
  for (const auto& f : r.inside) {
    auto c = std::make_shared<Node>(*f);
    c->grad_leaf = nullptr;
    c->seq = NextNodeSeq();
    c->scope = Recomputed(f->scope);
    // An op reading an input reads its barrier; outside values read next to
    // an input (a weight beside the activation) are read as they are: the op
    // is apart from the forward's already, and the weight is not copied.
    // An op of outside values alone would equal the forward's and be merged
    // with it. When it is no bigger than what it reads (a weight's convert or
    // transpose) that is fine: it costs what a weight costs. A bigger one (a
    // bias broadcast to the activations' shape, an iota) would then live
    // from the forward to the backward, so it reads barriers instead.
    const bool reads_input = r.reads_input.count(f.get()) > 0;
    int64_t largest_operand = 0;
    for (const auto& o : f->operands) largest_operand = std::max(largest_operand, o->shape.bytes());
    const bool keep_apart = !reads_input && f->shape.bytes() > largest_operand;
    for (auto& o : c->operands) {
      if (auto m = made.find(o.get()); m != made.end()) o = m->second;
      else if (r.inputs.count(o.get()) || keep_apart) o = barrier(o);
    }
    made[f.get()] = keep_apart && c->operands.empty() ? barrier(c) : c;
  }
  std::vector<std::pair<std::shared_ptr<Node>, Tensor>> seeds;
  for (size_t k = 0; k < r.outputs.size(); ++k)
    if (r.outputs[k] && k < out_grads.size() && out_grads[k].defined())
      seeds.push_back({made.at(r.outputs[k].get()), out_grads[k]});
  std::unordered_set<const Node*> stops;
  for (const auto& e : edges) stops.insert(e.get());
  std::unordered_map<const Node*, Tensor> got = Backprop(seeds, stops, r.loc);
  std::vector<Tensor> out(edges.size());
  for (size_t k = 0; k < edges.size(); ++k)
    if (auto it = got.find(edges[k].get()); it != got.end()) out[k] = it->second;
  // The gradients handed on to the inputs wait for the block's other
  // gradients (its weights'), so the block's backward is finished — and its
  // recomputed values dead — before the block below starts recomputing.
  // Otherwise a weight's gradient could be placed late (an optimizer that
  // reads all gradients at once, say) and keep every block's values alive.
  std::vector<std::shared_ptr<Node>> weights;
  for (size_t k = 0; k < edges.size(); ++k)
    if (out[k].defined() && !r.inputs.count(edges[k].get())) weights.push_back(out[k].node());
  if (!weights.empty()) {
    for (size_t k = 0; k < edges.size(); ++k) {
      if (!out[k].defined() || !r.inputs.count(edges[k].get())) continue;
      auto b = std::make_shared<Node>();
      b->op = compiler::Opcode::kOptimizationBarrier;
      b->shape = out[k].shape();
      b->operands = {out[k].node()};
      b->operands.insert(b->operands.end(), weights.begin(), weights.end());
      b->loc = r.loc;
      b->scope = Recomputed(r.scope);
      b->seq = NextNodeSeq();
      out[k] = Tensor(std::move(b));
    }
  }
  return out;
}

}  // namespace

uint64_t NextNodeSeq() { return g_next_seq.fetch_add(1, std::memory_order_relaxed); }

const std::vector<std::shared_ptr<Node>>& GradEdges(const Node& n) {
  if (!n.grad_through.empty()) return n.grad_through;
  if (n.remat && n.remat_output >= 0) return n.remat->region_node;
  return n.operands;
}

bool RematPass::Handles(const Node& n) const {
  return (n.remat && n.remat_output >= 0) || pending_.count(&n) > 0;
}

std::vector<Tensor> RematPass::Vjp(const std::shared_ptr<Node>& n, const Tensor& g) {
  if (n->remat && n->remat_output >= 0) {  // an output: keep its gradient for the region node
    const std::shared_ptr<RematRegion>& region = n->remat;
    auto [it, fresh] = pending_.try_emplace(region->region_node[0].get());
    if (fresh) {
      it->second.region = region;
      it->second.grads.resize(region->outputs.size());
    }
    Tensor& slot = it->second.grads[n->remat_output];
    slot = slot.defined() ? Binary(compiler::Opcode::kAdd, slot, g, n->loc) : g;
    // The region node is reached once, from the first output with a gradient;
    // what it is handed does not matter (it reads `grads`).
    return {fresh ? g : Tensor()};
  }
  auto it = pending_.find(n.get());
  if (it == pending_.end()) return std::vector<Tensor>(n->operands.size());
  Pending p = std::move(it->second);
  pending_.erase(it);
  return RecomputeAndDifferentiate(*p.region, n->operands, p.grads);
}

}  // namespace internal

std::vector<Tensor> remat(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, std::source_location sl) {
  if (internal::g_inside_fn > 0 || !GradEnabled()) return fn(inputs);
  const uint64_t begin = internal::NextNodeSeq();
  std::vector<Tensor> outs;
  {
    struct Depth {
      Depth() { ++internal::g_inside_fn; }
      ~Depth() { --internal::g_inside_fn; }
    } depth;
    outs = fn(inputs);
  }
  const uint64_t end = internal::NextNodeSeq();
  for (const Tensor& t : outs)
    if (!t.defined() || !t.status().ok()) return outs;  // the error travels on as it is

  auto region = std::make_shared<internal::RematRegion>();
  region->loc = Loc(sl);
  region->scope = internal::CurrentScope();
  for (const Tensor& t : inputs)
    if (t.defined()) region->inputs.insert(t.node().get());
  auto made_by_fn = [&](const Node* n) {
    return n->seq >= begin && n->seq < end && !n->is_data() && !region->inputs.count(n);
  };
  // The block: post-order from the outputs through the nodes fn made. Its
  // edges are the outside values those nodes read that need gradients.
  std::vector<std::shared_ptr<Node>> edges;
  std::unordered_set<const Node*> visited, edge_set;
  for (const Tensor& t : outs) {
    if (!made_by_fn(t.node().get()) || !visited.insert(t.node().get()).second) continue;
    std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{t.node(), 0}};
    while (!stack.empty()) {
      auto& [n, k] = stack.back();
      if (k < n->operands.size()) {
        std::shared_ptr<Node> o = n->operands[k++];
        if (made_by_fn(o.get())) {
          if (visited.insert(o.get()).second) stack.push_back({o, 0});
        } else if (o->requires_grad && edge_set.insert(o.get()).second) {
          edges.push_back(o);
        }
        continue;
      }
      bool reads = false;
      for (const auto& o : n->operands) reads |= region->inputs.count(o.get()) || region->reads_input.count(o.get());
      if (reads) region->reads_input.insert(n.get());
      region->inside.push_back(n);
      stack.pop_back();
    }
  }
  if (edges.empty()) return outs;  // nothing in the block needs a gradient

  auto rn = std::make_shared<Node>();
  rn->op = compiler::Opcode::kOptimizationBarrier;  // never lowered: it stands for the block in backward
  rn->operands = edges;
  rn->requires_grad = true;
  rn->loc = region->loc;
  region->region_node = {rn};
  region->outputs.resize(outs.size());
  std::vector<Tensor> result = outs;
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::shared_ptr<Node>& o = outs[k].node();
    if (!made_by_fn(o.get())) continue;  // an input or outside value handed back: nothing to recompute
    region->outputs[k] = o;
    // The same op (so it lowers to the forward's value), marked as the block's.
    auto marked = std::make_shared<Node>(*o);
    marked->remat = region;
    marked->remat_output = static_cast<int>(k);
    result[k] = Tensor(std::move(marked));
    result[k].set_name(outs[k].name());
  }
  return result;
}

Tensor remat(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, std::source_location sl) {
  std::vector<Tensor> out = remat(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, std::vector<Tensor>{input}, sl);
  return out[0];
}

}  // namespace shardscope
