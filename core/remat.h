// Gradient checkpointing (rematerialization): a block whose activations are
// not kept for backward. remat(fn, inputs) runs `fn` as usual; backward then
// recomputes the block's values from its inputs — a copy of the block's ops
// placed just before its gradient — instead of reading the forward's. Only
// the inputs (and the parameters) stay alive between forward and backward,
// so a stack of checkpointed layers keeps one layer's activations at a time.
//
// In a lazy graph the recomputation is the same ops on the same values, which
// the compiler would merge back into the forward (CSE) and could schedule as
// early. The block's inputs therefore enter it through optimization_barriers
// that also hold the block's incoming gradients: the recomputed ops are not
// equal to the forward's, and cannot run before backward reaches the block.
// The gradients the block hands to its inputs wait in turn for its weights'
// gradients, so one block's backward ends before the next one recomputes.
// The gradients equal the unchecked ones (the same ops on the same values).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace shardscope {

// Runs `fn(inputs)` as a checkpointed block. Values `fn` captures instead of
// taking them as inputs (parameters, say) are fine: they are read again in
// backward, not recomputed. A remat inside another's `fn` is part of the
// outer block. Without gradient recording (NoGradGuard), it is just fn(inputs).
std::vector<Tensor> remat(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs,
                          std::source_location loc = std::source_location::current());
// One input, one output: `h = remat([&](const Tensor& x) { return block(x); }, h);`
Tensor remat(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
             std::source_location loc = std::source_location::current());

namespace internal {

// A number per op node, increasing with creation (ops.cc stamps it), so that
// remat can tell the nodes `fn` made from the ones it was given.
uint64_t NextNodeSeq();

struct RematRegion;  // remat.cc

// The nodes backward differentiates `n` with respect to: its operands, except
// for a checkpointed block's outputs, whose one edge is the block's region
// node, whose edges are the values the block reads from outside, and for a
// data node a cut made (Node::grad_through), whose one edge is its op node.
const std::vector<std::shared_ptr<Node>>& GradEdges(const Node& n);

// The checkpointed blocks met during one backward pass (autograd.cc's engine
// asks it about every node). A block's outputs hand it their gradients; at
// the block's region node it builds the recomputation and differentiates it,
// returning the gradients of the region's edges.
class RematPass {
 public:
  bool Handles(const Node& n) const;
  // Gradients for GradEdges(*n), like autograd's vector-Jacobian products.
  std::vector<Tensor> Vjp(const std::shared_ptr<Node>& n, const Tensor& g);

 private:
  struct Pending {
    std::shared_ptr<RematRegion> region;
    std::vector<Tensor> grads;  // one per region output (undefined: no gradient)
  };
  std::unordered_map<const Node*, Pending> pending_;  // by region node
};

}  // namespace internal
}  // namespace shardscope
