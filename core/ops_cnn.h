// The convolutional part of the frontend: 2-D convolution, pooling, dropout
// with a device-side random generator, and batch normalisation. Images are
// NCHW, convolution kernels OIHW (PyTorch's layouts). Convolution lowers to
// stablehlo.convolution and pooling to stablehlo.reduce_window; their
// gradients are themselves convolutions and window reductions (ops_cnn.cc).
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace shardscope {

// x [N, C, H, W] * w [O, C, KH, KW] -> [N, O, OH, OW], OH = (H + 2 padding -
// KH) / stride + 1. `bias` [O], when defined, is added per output channel.
// One group only (no depthwise), no dilation.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, std::source_location loc = std::source_location::current());

// Max / average over `kernel` x `kernel` windows of x [N, C, H, W], moved by
// `stride` (0: the kernel size, i.e. windows that do not overlap) over x
// padded by `padding` on each side. Padding counts as -inf for max and as 0
// for the average, which always divides by kernel^2 (PyTorch's
// count_include_pad). The gradient of max_pool2d is defined for windows that
// do not overlap (stride == kernel); overlapping windows are an error of
// backward() naming the op's line.
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0,
                  std::source_location loc = std::source_location::current());
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride = 0, int64_t padding = 0,
                  std::source_location loc = std::source_location::current());
// Mean over H and W: [N, C, H, W] -> [N, C].
Tensor global_avg_pool2d(const Tensor& x, std::source_location loc = std::source_location::current());

// Random bits made on the devices. The state is a tensor<2xi64> {seed,
// counter} held as device data; each draw uses the current state and
// advances the counter inside the graph, so a new mask every step neither
// recompiles nor moves anything from the host.
class Generator {
 public:
  // `loc`: the user's line its state is said to be made at (never the library's).
  explicit Generator(uint64_t seed = 0, std::string name = "rng",
                     std::source_location loc = std::source_location::current());
  // Restarts the stream at {seed, 0}.
  void manual_seed(uint64_t seed, std::source_location loc = std::source_location::current());
  // The state for one draw; the generator moves on to the next.
  Tensor next(std::source_location loc = std::source_location::current());
  // The state itself, e.g. for a checkpoint.
  Tensor& state() { return state_; }

 private:
  std::string name_;
  Tensor state_;
};

// The process-wide generator that dropout() uses when given none (made at
// the first caller's line).
Generator& default_generator(std::source_location loc = std::source_location::current());
void manual_seed(uint64_t seed, std::source_location loc = std::source_location::current());

// Zeroes each element with probability p and scales the rest by 1 / (1 - p)
// while training; the identity otherwise (or when p == 0).
Tensor dropout(const Tensor& x, double p, bool training, std::source_location loc = std::source_location::current());
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen,
               std::source_location loc = std::source_location::current());

// Batch normalisation of x [N, C, H, W] per channel. Training: normalises with
// the batch's mean and (biased) variance over N, H, W and moves the running
// statistics towards them in place — running = (1 - momentum) running +
// momentum batch, with the unbiased variance — as part of the graph, without a
// host read. Otherwise normalises with the running statistics. `weight` and
// `bias` [C] scale and shift the result when defined.
Tensor batch_norm2d(const Tensor& x, Tensor& running_mean, Tensor& running_var, const Tensor& weight,
                    const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                    std::source_location loc = std::source_location::current());

namespace internal {
// Gradients of a convolution / reduce_window node's operands (autograd.cc).
std::vector<Tensor> ConvolutionVjp(const std::shared_ptr<Node>& n, const Tensor& g);
std::vector<Tensor> ReduceWindowVjp(const std::shared_ptr<Node>& n, const Tensor& g);
}  // namespace internal

}  // namespace shardscope
