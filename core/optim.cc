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

namespace {
// A scalar that travels as data whatever its value (never inlined).
Tensor Data(double v, const char* name) { return Tensor::from_host(Literal::Scalar(DType::kF32, v), name); }
}  // namespace

AdamW::AdamW(std::vector<Tensor*> params, AdamWOptions opts, std::source_location loc)
    : params_(std::move(params)), opts_(opts) {
  internal::LibraryCall call("optim::AdamW", loc);
  for (Tensor* p : params_) {
    m_.push_back(Tensor::zeros(p->shape().dims, p->dtype()).set_name("adamw.m." + p->name()));
    v_.push_back(Tensor::zeros(p->shape().dims, p->dtype()).set_name("adamw.v." + p->name()));
  }
}

std::vector<Tensor*> AdamW::state() {
  std::vector<Tensor*> out;
  for (size_t k = 0; k < m_.size(); ++k) {
    out.push_back(&m_[k]);
    out.push_back(&v_[k]);
  }
  return out;
}

absl::Status AdamW::step(std::source_location loc) {
  internal::LibraryCall call("optim::AdamW::step", loc);
  NoGradGuard no_grad;
  ++t_;
  const double bc1 = 1 - std::pow(opts_.beta1, t_), bc2 = 1 - std::pow(opts_.beta2, t_);
  // Per-step values as data; fixed hyperparameters as data too (they are not 0 or 1).
  Tensor lr = Data(opts_.lr, "lr"), inv_bc1 = Data(1 / bc1, "adamw.inv_bc1"), inv_bc2 = Data(1 / bc2, "adamw.inv_bc2");
  Tensor b1 = Data(opts_.beta1, "adamw.beta1"), b2 = Data(opts_.beta2, "adamw.beta2");
  Tensor one_b1 = Data(1 - opts_.beta1, "adamw.1-beta1"), one_b2 = Data(1 - opts_.beta2, "adamw.1-beta2");
  Tensor eps = Data(opts_.eps, "adamw.eps"), decay = Data(1 - opts_.lr * opts_.weight_decay, "adamw.decay");
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor* p = params_[k];
    Tensor g = p->grad();
    if (!g.defined()) continue;
    const auto& d = p->shape().dims;
    auto B = [&](const Tensor& s) { return broadcast_to(s, d); };
    Tensor m = add(mul(B(b1), m_[k]), mul(B(one_b1), g));
    Tensor v = add(mul(B(b2), v_[k]), mul(B(one_b2), mul(g, g)));
    Tensor update = div(mul(m, B(inv_bc1)), add(sqrt(mul(v, B(inv_bc2))), B(eps)));
    Tensor next = sub(mul(*p, B(decay)), mul(B(lr), update));
    if (absl::Status s = m_[k].assign(m); !s.ok()) return s;
    if (absl::Status s = v_[k].assign(v); !s.ok()) return s;
    if (absl::Status s = p->assign(next); !s.ok()) return s;
    p->zero_grad();
  }
  return absl::OkStatus();
}

Tensor clip_grad_norm(const std::vector<Tensor*>& params, double max_norm, std::source_location loc) {
  internal::LibraryCall call("optim::clip_grad_norm", loc);
  NoGradGuard no_grad;
  Tensor total;
  for (Tensor* p : params) {
    Tensor g = p->grad();
    if (!g.defined()) continue;
    Tensor sq = sum(mul(g, g));
    total = total.defined() ? add(total, sq) : sq;
  }
  if (!total.defined()) return total;
  Tensor norm = sqrt(total);
  Tensor limit = Data(max_norm, "clip.max_norm");
  // scale = min(1, max_norm / (norm + 1e-6))
  Tensor scale = minimum(div(limit, add(norm, Data(1e-6, "clip.eps"))), Tensor::scalar(1.0));
  for (Tensor* p : params) {
    Tensor g = p->grad();
    if (!g.defined()) continue;
    Tensor clipped = mul(g, broadcast_to(scale, g.shape().dims));
    clipped.set_name(g.name());
    p->impl()->grad = clipped.impl();
  }
  return norm;
}

SGD::SGD(std::vector<Tensor*> params, SGDOptions opts, std::source_location loc)
    : params_(std::move(params)), opts_(opts) {
  internal::LibraryCall call("optim::SGD", loc);
  if (opts_.momentum != 0)
    for (Tensor* p : params_)
      momentum_.push_back(Tensor::zeros(p->shape().dims, p->dtype()).set_name("sgd.momentum." + p->name()));
}

std::vector<Tensor*> SGD::state() {
  std::vector<Tensor*> out;
  for (Tensor& m : momentum_) out.push_back(&m);
  return out;
}

absl::Status SGD::step(std::source_location loc) {
  internal::LibraryCall call("optim::SGD::step", loc);
  NoGradGuard no_grad;
  // Data, not Tensor::scalar: the rate must never be inlined into the graph.
  Tensor lr = Tensor::from_host(Literal::Scalar(DType::kF32, opts_.lr), "lr");
  // Plain SGD records exactly the graph it always did; the extras only when asked for.
  Tensor decay = opts_.weight_decay != 0 ? Data(opts_.weight_decay, "sgd.weight_decay") : Tensor();
  Tensor mu = opts_.momentum != 0 ? Data(opts_.momentum, "sgd.momentum") : Tensor();
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor* p = params_[k];
    Tensor g = p->grad();
    if (!g.defined()) continue;
    const auto& d = p->shape().dims;
    if (decay.defined()) g = add(g, mul(*p, broadcast_to(decay, d)));
    if (mu.defined()) {
      Tensor buf = add(mul(momentum_[k], broadcast_to(mu, d)), g);
      if (absl::Status s = momentum_[k].assign(buf); !s.ok()) return s;
      g = buf;
    }
    Tensor update = sub(*p, mul(g, broadcast_to(lr, d)));
    if (absl::Status s = p->assign(update); !s.ok()) return s;
    p->zero_grad();
  }
  return absl::OkStatus();
}

}  // namespace shardscope::optim
