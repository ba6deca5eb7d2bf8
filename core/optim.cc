#include "core/optim.h"

#include "core/ops.h"

namespace shardscope::optim {

absl::Status SGD::step() {
  NoGradGuard no_grad;
  Tensor lr = Tensor::scalar(opts_.lr);
  lr.set_name("lr");
  for (Tensor* p : params_) {
    Tensor g = p->grad();
    if (!g.defined()) continue;
    Tensor update = sub(*p, mul(g, broadcast_to(lr, p->shape().dims)));
    if (absl::Status s = p->assign(update); !s.ok()) return s;
    p->zero_grad();
  }
  return absl::OkStatus();
}

}  // namespace shardscope::optim
