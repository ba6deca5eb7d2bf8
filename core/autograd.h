// Reverse-mode autograd over the lazy graph. backward(loss) walks the
// pending nodes that need gradients in reverse topological order and records
// (lazily, like everything else) the gradient of every leaf tensor that
// requires one; they land in Tensor::grad() and are computed at the next cut.
#pragma once

#include <memory>
#include <source_location>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace shardscope {

// `loss` must be a scalar. Gradients accumulate into existing ones.
absl::Status backward(const Tensor& loss, std::source_location loc = std::source_location::current());

namespace internal {
// The engine under backward(): reverse mode from `seeds` (a node and the
// gradient of its value). Leaf tensors' gradients accumulate into their
// grad(); a node in `stops` is not differentiated past: its gradient is
// returned instead (how a checkpointed block hands its inputs' gradients back).
// `freed` (when given) is set to a node whose history an earlier backward
// freed, met on the way (nothing is differentiated then).
std::unordered_map<const Node*, Tensor> Backprop(const std::vector<std::pair<std::shared_ptr<Node>, Tensor>>& seeds,
                                                 const std::unordered_set<const Node*>& stops,
                                                 const SourceLoc& where, const Node** freed = nullptr);
}  // namespace internal

}  // namespace shardscope
