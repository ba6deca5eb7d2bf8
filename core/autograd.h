// Reverse-mode autograd over the lazy graph. backward(loss) walks the
// pending nodes that need gradients in reverse topological order and records
// (lazily, like everything else) the gradient of every leaf tensor that
// requires one; they land in Tensor::grad() and are computed at the next cut.
#pragma once

#include <source_location>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace shardscope {

// `loss` must be a scalar. Gradients accumulate into existing ones.
absl::Status backward(const Tensor& loss, std::source_location loc = std::source_location::current());

}  // namespace shardscope
