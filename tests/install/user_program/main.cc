// my_mlp: a tiny model trained five steps on four virtual chips (a 2x2 mesh),
// every compilation, step and chip timeline recorded into run.db.
#include <cstdio>
#include <vector>

#include "core/shardscope.h"
#include "record/recording.h"

namespace ss = shardscope;

int fail(const absl::Status& s) { return std::fprintf(stderr, "error: %s\n", s.ToString().c_str()), 1; }

int main() {
  auto rec = ss::Recording::Start({.db = "run.db", .workload = "my_mlp", .mesh = {2, 2}});
  if (!rec.ok()) return fail(rec.status());
  ss::nn::Linear l1(8, 32, "l1"), l2(32, 1, "l2");
  ss::optim::SGD opt(ss::parameters(l1, l2), {.lr = 0.05});
  std::vector<float> xs(16 * 8), ys(16);
  for (int i = 0; i < 16 * 8; ++i) xs[i] = (i * 7 % 11) / 10.f, ys[i / 8] += xs[i] / 8;
  for (int step = 0; step < 5; ++step) {
    ss::Tensor x = ss::Tensor::from_host(ss::Literal::FromF32({16, 8}, xs), "x");
    ss::Tensor y = ss::Tensor::from_host(ss::Literal::FromF32({16, 1}, ys), "y");
    if (auto s = ss::mark_sharding(x, (*rec)->mesh(), {"data", ss::none}); !s.ok()) return fail(s);
    ss::Tensor loss = ss::mse_loss(l2(ss::relu(l1(x))), y);
    if (auto s = ss::backward(loss); !s.ok()) return fail(s);
    if (auto s = opt.step(); !s.ok()) return fail(s);
    if (auto s = ss::mark_step(); !s.ok()) return fail(s);  // compile (once) and run the step
    auto value = loss.item();
    if (!value.ok()) return fail(value.status());
    ss::log_step(*value);
    std::printf("step %d  loss %.4f\n", step, *value);
  }
  if (auto s = (*rec)->Finish(); !s.ok()) return fail(s);
  std::printf("recorded run %lld into run.db\n", static_cast<long long>((*rec)->run_id()));
}
