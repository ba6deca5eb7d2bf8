// The mlp sample: a 784-1024-1024-10 classifier trained with SGD, data
// parallel: the batch is split over the mesh's 'data' axis and the weights
// are replicated, so the partitioner all-reduces the gradients. Its batch
// size changes once (at step 10 by default), which recompiles the step.
#include <algorithm>
#include <random>

#include "core/shardscope.h"
#include "samples/samples.h"

namespace shardscope::samples {
namespace ss = shardscope;

namespace {
constexpr int64_t kIn = 784, kHidden = 1024, kClasses = 10;

// Synthetic data with structure to learn: each class is a noisy cloud around
// its own random centre. The same seed gives the same batches whatever the
// mesh, so sharded and single-device runs see identical data.
class Loader {
 public:
  explicit Loader(uint64_t seed) : rng_(seed), centres_(kClasses * kIn) {
    std::normal_distribution<float> n(0.f, 1.f);
    for (float& w : centres_) w = n(rng_);
  }
  std::pair<ss::Tensor, ss::Tensor> next(int64_t batch) {
    std::normal_distribution<float> noise(0.f, 1.5f);
    std::uniform_int_distribution<int32_t> cls(0, kClasses - 1);
    std::vector<float> xs(batch * kIn);
    std::vector<int32_t> ys(batch);
    for (int64_t b = 0; b < batch; ++b) {
      ys[b] = cls(rng_);
      for (int64_t i = 0; i < kIn; ++i) xs[b * kIn + i] = centres_[ys[b] * kIn + i] + noise(rng_);
    }
    ss::Tensor x = ss::Tensor::from_host(Literal::FromF32({batch, kIn}, xs), "x");
    ss::Tensor y = ss::Tensor::from_host(Literal::FromI32({batch}, ys), "y");
    return {x, y};
  }

 private:
  std::mt19937_64 rng_;
  std::vector<float> centres_;
};
}  // namespace

absl::StatusOr<SampleResult> RunMlp(const SampleConfig& cfg) {
  std::vector<int64_t> ids(cfg.mesh[0] * cfg.mesh[1]);
  for (size_t k = 0; k < ids.size(); ++k) ids[k] = static_cast<int64_t>(k);
  auto mesh = ss::Mesh::Create(ids, cfg.mesh, {"data", "model"});
  if (!mesh.ok()) return mesh.status();

  ss::nn::Linear l1(kIn, kHidden, "l1", cfg.seed), l2(kHidden, kHidden, "l2", cfg.seed),
      l3(kHidden, kClasses, "l3", cfg.seed);
  ss::optim::SGD opt(ss::parameters(l1, l2, l3), {.lr = cfg.lr});
  Loader loader(cfg.seed + 1);

  SampleResult result;
  for (int step = 0; step < cfg.steps; ++step) {
    int64_t batch = (cfg.change_step >= 0 && step >= cfg.change_step) ? cfg.batch_after : cfg.batch;
    auto [x, y] = loader.next(batch);
    if (auto s = ss::mark_sharding(x, *mesh, {"data", ss::none}); !s.ok()) return s;
    if (auto s = ss::mark_sharding(y, *mesh, {"data"}); !s.ok()) return s;

    ss::Tensor logits = l3(ss::relu(l2(ss::relu(l1(x)))));
    ss::Tensor loss = ss::cross_entropy(logits, y);
    if (auto s = ss::backward(loss); !s.ok()) return s;
    if (auto s = opt.step(); !s.ok()) return s;
    if (auto s = ss::mark_step(); !s.ok()) return s;

    auto value = loss.item();  // already computed by the step: no new graph
    if (!value.ok()) return value.status();
    ss::log_step(*value);
    result.losses.push_back(*value);
    if (cfg.on_step) cfg.on_step(step, *value);
  }
  return result;
}

const std::vector<SampleInfo>& Registry() {
  static const std::vector<SampleInfo> samples = {
      {"mlp", "784-1024-1024-10 classifier, SGD, data parallel; batch 64 -> 48 at step 10", RunMlp},
  };
  return samples;
}

const SampleInfo* Find(const std::string& name) {
  for (const auto& s : Registry())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace shardscope::samples
