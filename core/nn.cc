#include "core/nn.h"

#include <cmath>
#include <random>

#include "core/ops.h"

namespace shardscope {
namespace nn {

Linear::Linear(int64_t in, int64_t out, std::string name, uint64_t seed, std::source_location loc)
    : Module(name) {
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(name));
  float bound = 1.0f / std::sqrt(static_cast<float>(in));
  std::uniform_real_distribution<float> u(-bound, bound);
  Literal w(Shape(DType::kF32, {out, in})), b(Shape(DType::kF32, {out}));
  for (int64_t k = 0; k < w.elements(); ++k) w.as<float>()[k] = u(rng);
  for (int64_t k = 0; k < b.elements(); ++k) b.as<float>()[k] = u(rng);
  weight = Tensor::from_host(std::move(w), name + ".weight", loc);
  bias = Tensor::from_host(std::move(b), name + ".bias", loc);
  weight.requires_grad_();
  bias.requires_grad_();
}

Tensor Linear::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::Linear", loc);
  NameScope scope(name());
  // x [.., in] contracted with W [out, in] on W's dim 1: no transpose op.
  SourceLoc l = Loc(loc);
  Tensor y = internal::Dot(x, weight, {{}, {}, {x.rank() - 1}, {1}}, l);
  if (x.shape().dims.back() != weight.shape().dims[1])
    return internal::Error(absl::InvalidArgumentError(
                               "Linear '" + name() + "': input " + x.shape().ToString() + " does not match weight " +
                               weight.shape().ToString() + " (at " + l.file + ":" + std::to_string(l.line) + ")"),
                           x.shape());
  return add(y, bias, loc);
}

namespace {
Literal Filled(int64_t dim, float v) {
  Literal l(Shape(DType::kF32, {dim}));
  for (int64_t k = 0; k < dim; ++k) l.as<float>()[k] = v;
  return l;
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, std::string name, uint64_t seed, std::source_location loc)
    : Module(name) {
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(name));
  std::normal_distribution<float> n(0.f, 1.f);
  Literal w(Shape(DType::kF32, {num, dim}));
  for (int64_t k = 0; k < w.elements(); ++k) w.as<float>()[k] = n(rng);
  weight = Tensor::from_host(std::move(w), name + ".weight", loc);
  weight.requires_grad_();
}

Tensor Embedding::operator()(const Tensor& ids, std::source_location loc) const {
  internal::LibraryCall call("nn::Embedding", loc);
  NameScope scope(name());
  return embedding_lookup(weight, ids, loc);
}

RMSNorm::RMSNorm(int64_t dim, std::string name, double e, std::source_location loc) : Module(name), eps(e) {
  weight = Tensor::from_host(Filled(dim, 1.f), name + ".weight", loc);
  weight.requires_grad_();
}

Tensor RMSNorm::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::RMSNorm", loc);
  NameScope scope(name());
  SourceLoc l = Loc(loc);
  // eps follows from the module, not from data: an inlined constant.
  Tensor ms = mean(mul(x, x, loc), {-1}, true, loc);
  Tensor e = internal::Broadcast(internal::Constant(eps, x.dtype(), l), ms.shape().dims, {}, l);
  return mul(mul(x, rsqrt(add(ms, e, loc), loc), loc), weight, loc);
}

LayerNorm::LayerNorm(int64_t dim, std::string name, double e, std::source_location loc) : Module(name), eps(e) {
  weight = Tensor::from_host(Filled(dim, 1.f), name + ".weight", loc);
  bias = Tensor::from_host(Filled(dim, 0.f), name + ".bias", loc);
  weight.requires_grad_();
  bias.requires_grad_();
}

Tensor LayerNorm::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::LayerNorm", loc);
  NameScope scope(name());
  SourceLoc l = Loc(loc);
  Tensor mu = mean(x, {-1}, true, loc);
  Tensor c = sub(x, mu, loc);
  Tensor var = mean(mul(c, c, loc), {-1}, true, loc);
  Tensor e = internal::Broadcast(internal::Constant(eps, x.dtype(), l), var.shape().dims, {}, l);
  return add(mul(mul(c, rsqrt(add(var, e, loc), loc), loc), weight, loc), bias, loc);
}

MultiHeadAttention::MultiHeadAttention(int64_t d, int64_t h, std::string name, bool c, bool r, uint64_t seed,
                                       std::source_location loc)
    : Module(name),
      q_proj(d, d, name + ".q_proj", seed, loc),
      k_proj(d, d, name + ".k_proj", seed, loc),
      v_proj(d, d, name + ".v_proj", seed, loc),
      o_proj(d, d, name + ".o_proj", seed, loc),
      heads(h),
      causal(c),
      rope(r) {}

std::vector<Tensor*> MultiHeadAttention::parameters() {
  std::vector<Tensor*> out;
  for (Linear* l : {&q_proj, &k_proj, &v_proj, &o_proj})
    for (Tensor* p : l->parameters()) out.push_back(p);
  return out;
}

Tensor MultiHeadAttention::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::MultiHeadAttention", loc);
  SourceLoc l = Loc(loc);
  if (x.rank() != 3 || x.shape().dims[2] % heads != 0)
    return internal::Error(absl::InvalidArgumentError("MultiHeadAttention '" + name() + "': input " +
                                                      x.shape().ToString() + " must be [B, T, D] with D divisible by " +
                                                      std::to_string(heads) + " heads (at " + l.file + ":" +
                                                      std::to_string(l.line) + ")"),
                           x.shape());
  const int64_t b = x.shape().dims[0], t = x.shape().dims[1], d = x.shape().dims[2], dh = d / heads;
  // [B, T, D] -> [B, H, T, Dh]: batch and heads are the batch dims of the
  // attention's matmuls, kept apart so that a split of either (data or tensor
  // parallelism) stays a split of its own dim.
  auto split = [&](const Tensor& y) {
    return transpose(reshape(y, {b, t, heads, dh}, loc), {0, 2, 1, 3}, loc);
  };
  Tensor q = split(q_proj(x, loc)), k = split(k_proj(x, loc)), v = split(v_proj(x, loc));
  Tensor o;
  {
    // The projections name themselves ("attn.q_proj"); the attention proper is "attn".
    NameScope scope(name());
    if (rope) {
      q = apply_rope(q, loc);
      k = apply_rope(k, loc);
    }
    o = scaled_dot_product_attention(q, k, v, causal, loc);
    o = reshape(transpose(o, {0, 2, 1, 3}, loc), {b, t, d}, loc);
  }
  return o_proj(o, loc);
}

SwiGLU::SwiGLU(int64_t d, int64_t hidden, std::string name, uint64_t seed, std::source_location loc)
    : Module(name),
      gate(d, hidden, name + ".gate_proj", seed, loc),
      up(d, hidden, name + ".up_proj", seed, loc),
      down(hidden, d, name + ".down_proj", seed, loc) {}

std::vector<Tensor*> SwiGLU::parameters() {
  std::vector<Tensor*> out;
  for (Linear* l : {&gate, &up, &down})
    for (Tensor* p : l->parameters()) out.push_back(p);
  return out;
}

Tensor SwiGLU::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::SwiGLU", loc);
  return down(mul(silu(gate(x, loc), loc), up(x, loc), loc), loc);
}

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t s, int64_t p, bool with_bias, std::string name,
               uint64_t seed, std::source_location loc)
    : Module(name), stride(s), padding(p) {
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(name));
  float bound = 1.0f / std::sqrt(static_cast<float>(in * kernel * kernel));
  std::uniform_real_distribution<float> u(-bound, bound);
  Literal w(Shape(DType::kF32, {out, in, kernel, kernel}));
  for (int64_t k = 0; k < w.elements(); ++k) w.as<float>()[k] = u(rng);
  weight = Tensor::from_host(std::move(w), name + ".weight", loc);
  weight.requires_grad_();
  if (with_bias) {
    Literal b(Shape(DType::kF32, {out}));
    for (int64_t k = 0; k < b.elements(); ++k) b.as<float>()[k] = u(rng);
    bias = Tensor::from_host(std::move(b), name + ".bias", loc);
    bias.requires_grad_();
  }
}

std::vector<Tensor*> Conv2d::parameters() {
  if (bias.defined()) return {&weight, &bias};
  return {&weight};
}

Tensor Conv2d::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::Conv2d", loc);
  NameScope scope(name());
  return conv2d(x, weight, bias, stride, padding, loc);
}

BatchNorm2d::BatchNorm2d(int64_t channels, std::string name, double e, double m, std::source_location loc)
    : Module(name), eps(e), momentum(m) {
  weight = Tensor::from_host(Filled(channels, 1.f), name + ".weight", loc);
  bias = Tensor::from_host(Filled(channels, 0.f), name + ".bias", loc);
  running_mean = Tensor::from_host(Filled(channels, 0.f), name + ".running_mean", loc);
  running_var = Tensor::from_host(Filled(channels, 1.f), name + ".running_var", loc);
  weight.requires_grad_();
  bias.requires_grad_();
}

Tensor BatchNorm2d::operator()(const Tensor& x, std::source_location loc) {
  internal::LibraryCall call("nn::BatchNorm2d", loc);
  NameScope scope(name());
  return batch_norm2d(x, running_mean, running_var, weight, bias, training, momentum, eps, loc);
}

Tensor MaxPool2d::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::MaxPool2d", loc);
  NameScope scope(name());
  return max_pool2d(x, kernel, stride, padding, loc);
}

Tensor AvgPool2d::operator()(const Tensor& x, std::source_location loc) const {
  internal::LibraryCall call("nn::AvgPool2d", loc);
  NameScope scope(name());
  return avg_pool2d(x, kernel, stride, padding, loc);
}

Dropout::Dropout(double prob, std::string name, uint64_t seed, std::source_location loc)
    : Module(name), p(prob), generator(seed ^ std::hash<std::string>{}(name), name + ".rng", loc) {}

Tensor Dropout::operator()(const Tensor& x, std::source_location loc) {
  internal::LibraryCall call("nn::Dropout", loc);
  NameScope scope(name());
  return dropout(x, p, training, generator, loc);
}

}  // namespace nn

std::vector<Tensor*> parameters(std::initializer_list<nn::Module*> modules) {
  std::vector<Tensor*> out;
  for (nn::Module* m : modules)
    for (Tensor* p : m->parameters()) out.push_back(p);
  return out;
}

}  // namespace shardscope
