#include "core/optim.h"

#include "core/ops.h"

#include <algorithm>
#include <cmath>

namespace shardscope::optim {

double WarmupCosine::at(int step) const {
  if (step < warmup_steps) return peak * (step + 1) / static_cast<double>(warmup_steps + 1);
  int span = std::max(1, total_steps - warmup_steps);
  double t = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
  return floor + 0.5 * (peak - floor) * (1 + std::cos(M_PI * t));
}

absl::Status SGD::step() {
  NoGradGuard no_grad;
  // Data, not Tensor::scalar: the rate must never be inlined into the graph.
  Tensor lr = Tensor::from_host(Literal::Scalar(DType::kF32, opts_.lr), "lr");
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
