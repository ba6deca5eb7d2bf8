// Optimizers update parameters in place (Tensor::assign) without recording
// gradients. The learning rate is passed as data (the scalar rule), so
// changing it never recompiles.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace shardscope::optim {

struct SGDOptions {
  double lr = 0.01;
};

class SGD {
 public:
  SGD(std::vector<Tensor*> params, SGDOptions opts) : params_(std::move(params)), opts_(opts) {}
  // p <- p - lr * grad for every parameter with a gradient; clears the gradients.
  absl::Status step();
  void set_lr(double lr) { opts_.lr = lr; }

 private:
  std::vector<Tensor*> params_;
  SGDOptions opts_;
};

}  // namespace shardscope::optim
