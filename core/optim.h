// Optimizers update parameters in place (Tensor::assign) without recording
// gradients. The learning rate is passed as data (the scalar rule), so
// changing it never recompiles.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace shardscope::optim {

// Learning-rate schedules are evaluated on the host each step and handed to
// the optimizer, which always passes the rate as data (never as an inlined
// constant, even at 0 or 1), so a changing rate never recompiles.
struct WarmupCosine {
  double peak = 1e-3;
  int warmup_steps = 0;
  int total_steps = 1;
  double floor = 0;  // the rate the cosine decays to
  // Linear warmup to `peak`: step s < warmup_steps gets peak * (s + 1) /
  // (warmup_steps + 1), never 0, so the first step trains; then cosine decay
  // to `floor`.
  double at(int step) const;
};

// SGD as PyTorch defines it: with weight decay, g <- g + weight_decay * p;
// with momentum, buf <- momentum * buf + g and the step follows buf. The
// buffers are tensors named "sgd.momentum.<param>" (zeros at first), so a
// checkpoint can hold them; the hyperparameters travel as data.
struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double weight_decay = 0;
};

class SGD {
 public:
  SGD(std::vector<Tensor*> params, SGDOptions opts, std::source_location loc = std::source_location::current());
  // p <- p - lr * grad (plus momentum and weight decay when set) for every
  // parameter with a gradient; clears the gradients. Its ops are attributed
  // to the caller's line.
  absl::Status step(std::source_location loc = std::source_location::current());
  void set_lr(double lr) { opts_.lr = lr; }
  double lr() const { return opts_.lr; }
  // The momentum buffers, for checkpoints (empty without momentum).
  std::vector<Tensor*> state();

 private:
  std::vector<Tensor*> params_;
  std::vector<Tensor> momentum_;
  SGDOptions opts_;
};

// AdamW (decoupled weight decay, Loshchilov & Hutter). The rate and the bias
// corrections change every step and travel as data, so the step compiles
// once. Moments are tensors named "adamw.m.<param>" / "adamw.v.<param>", so a
// checkpoint can hold them.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW {
 public:
  AdamW(std::vector<Tensor*> params, AdamWOptions opts,
        std::source_location loc = std::source_location::current());
  absl::Status step(std::source_location loc = std::source_location::current());
  void set_lr(double lr) { opts_.lr = lr; }
  double lr() const { return opts_.lr; }
  int steps_taken() const { return t_; }
  // Resuming from a checkpoint: the bias corrections continue from `t`.
  void set_steps_taken(int t) { t_ = t; }
  // The moment tensors, for checkpoints.
  std::vector<Tensor*> state();

 private:
  std::vector<Tensor*> params_;
  std::vector<Tensor> m_, v_;
  AdamWOptions opts_;
  int t_ = 0;
};

// Scales all gradients so their global L2 norm is at most `max_norm`, without
// reading anything back to the host; returns the norm before clipping (lazy).
Tensor clip_grad_norm(const std::vector<Tensor*>& params, double max_norm,
                      std::source_location loc = std::source_location::current());

}  // namespace shardscope::optim
