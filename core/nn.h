// Neural-network modules. Parameters are named by module path
// ("l1.weight") and ops created inside a module's forward carry that path.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <source_location>
#include <string>
#include <vector>

#include "core/ops_cnn.h"
#include "core/tensor.h"

namespace shardscope {

namespace nn {

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  virtual ~Module() = default;
  const std::string& name() const { return name_; }
  virtual std::vector<Tensor*> parameters() = 0;
  // State that is not trained but belongs in a checkpoint (BatchNorm2d's running statistics).
  virtual std::vector<Tensor*> buffers() { return {}; }

 private:
  std::string name_;
};

// y = x W^T + b, with W [out, in] initialised uniformly in +-1/sqrt(in)
// (PyTorch's default) from a fixed seed so runs are reproducible.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, std::string name = "linear", uint64_t seed = 0,
         std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override { return {&weight, &bias}; }

  Tensor weight;  // [out, in]
  Tensor bias;    // [out]
};

// Rows of a [num, dim] table picked by integer ids; weight ~ N(0, 1) like PyTorch.
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, std::string name = "embed", uint64_t seed = 0,
            std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& ids, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override { return {&weight}; }
  Tensor weight;  // [num, dim]
};

// y = x / sqrt(mean(x^2) + eps) * weight, over the last dimension.
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, std::string name = "norm", double eps = 1e-6,
          std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override { return {&weight}; }
  Tensor weight;  // [dim], ones
  double eps;
};

// y = (x - mean) / sqrt(var + eps) * weight + bias, over the last dimension.
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t dim, std::string name = "norm", double eps = 1e-5,
            std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override { return {&weight, &bias}; }
  Tensor weight;  // [dim], ones
  Tensor bias;    // [dim], zeros
  double eps;
};

// Multi-head self-attention on x [B, T, D]: q/k/v projections, optional
// rotary position embedding of q and k, causal scaled dot-product attention,
// and the output projection. Ops carry "<name>.q_proj" etc. as module paths.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t heads, std::string name = "attn", bool causal = true,
                     bool rope = true, uint64_t seed = 0,
                     std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override;
  Linear q_proj, k_proj, v_proj, o_proj;
  int64_t heads;
  bool causal, rope;
};

// The SwiGLU feed-forward block: down(silu(gate(x)) * up(x)).
class SwiGLU : public Module {
 public:
  SwiGLU(int64_t d_model, int64_t hidden, std::string name = "mlp", uint64_t seed = 0,
         std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override;
  Linear gate, up, down;
};

// 2-D convolution of x [N, in, H, W] with weight [out, in, k, k] (+ bias
// [out]), initialised like Linear: uniform in +-1/sqrt(in * k * k).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = true,
         std::string name = "conv", uint64_t seed = 0, std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override;
  Tensor weight;  // [out, in, k, k]
  Tensor bias;    // [out], undefined without bias
  int64_t stride, padding;
};

// Batch normalisation over N, H, W per channel of x [N, C, H, W] (see
// batch_norm2d). `training` picks batch statistics (and updates the running
// ones, as tensors on the devices) or the running statistics.
class BatchNorm2d : public Module {
 public:
  BatchNorm2d(int64_t channels, std::string name = "bn", double eps = 1e-5, double momentum = 0.1,
              std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current());
  std::vector<Tensor*> parameters() override { return {&weight, &bias}; }
  std::vector<Tensor*> buffers() override { return {&running_mean, &running_var}; }
  Tensor weight;        // [C], ones
  Tensor bias;          // [C], zeros
  Tensor running_mean;  // [C], zeros
  Tensor running_var;   // [C], ones
  double eps, momentum;
  bool training = true;
};

// Pooling over k x k windows of [N, C, H, W] (stride 0: the window size).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0, std::string name = "pool")
      : Module(std::move(name)), kernel(kernel), stride(stride), padding(padding) {}
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override { return {}; }
  int64_t kernel, stride, padding;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0, std::string name = "pool")
      : Module(std::move(name)), kernel(kernel), stride(stride), padding(padding) {}
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor*> parameters() override { return {}; }
  int64_t kernel, stride, padding;
};

// Dropout with its own device-side generator ("<name>.rng.state"), seeded
// from `seed` and the name, so masks are reproducible and change every step
// without recompiling. The identity when not `training`.
class Dropout : public Module {
 public:
  explicit Dropout(double p, std::string name = "dropout", uint64_t seed = 0,
                   std::source_location loc = std::source_location::current());
  Tensor operator()(const Tensor& x, std::source_location loc = std::source_location::current());
  std::vector<Tensor*> parameters() override { return {}; }
  std::vector<Tensor*> buffers() override { return {&generator.state()}; }
  double p;
  bool training = true;
  Generator generator;
};

}  // namespace nn

// All parameters of the given modules, in order.
std::vector<Tensor*> parameters(std::initializer_list<nn::Module*> modules);
template <typename... M>
std::vector<Tensor*> parameters(M&... modules) {
  return parameters({static_cast<nn::Module*>(&modules)...});
}

}  // namespace shardscope
