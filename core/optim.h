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
  // Linear warmup from 0 to `peak`, then cosine decay to `floor`.
  double at(int step) const;
};

struct SGDOptions {
  double lr = 0.01;
};

class SGD {
 public:
  SGD(std::vector<Tensor*> params, SGDOptions opts) : params_(std::move(params)), opts_(opts) {}
  // p <- p - lr * grad for every parameter with a gradient; clears the gradients.
  absl::Status step();
  void set_lr(double lr) { opts_.lr = lr; }
  double lr() const { return opts_.lr; }

 private:
  std::vector<Tensor*> params_;
  SGDOptions opts_;
};

}  // namespace shardscope::optim
