// The mlp sample: a 784-1024-1024-10 classifier trained with SGD, data
// parallel: the batch is split over the mesh's 'data' axis and the weights
// are replicated, so the partitioner all-reduces the gradients. Its batch
// size changes once (at step 10 by default), which recompiles the step.
#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "core/shardscope.h"
#include "samples/common.h"
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
  explicit Loader(uint64_t seed) : seed_(seed), centres_(kClasses * kIn) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n(0.f, 1.f);
    for (float& w : centres_) w = n(rng);
  }
  // The batch of step `step`: each step draws from its own stream, so a run
  // resumed at step k sees exactly the batches an uninterrupted run would.
  std::pair<ss::Tensor, ss::Tensor> next(int64_t batch, int step) {
    std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(step));
    std::normal_distribution<float> noise(0.f, 1.5f);
    std::uniform_int_distribution<int32_t> cls(0, kClasses - 1);
    std::vector<float> xs(batch * kIn);
    std::vector<int32_t> ys(batch);
    for (int64_t b = 0; b < batch; ++b) {
      ys[b] = cls(rng);
      for (int64_t i = 0; i < kIn; ++i) xs[b * kIn + i] = centres_[ys[b] * kIn + i] + noise(rng);
    }
    ss::Tensor x = ss::Tensor::from_host(Literal::FromF32({batch, kIn}, xs), "x");
    ss::Tensor y = ss::Tensor::from_host(Literal::FromI32({batch}, ys), "y");
    return {x, y};
  }

 private:
  uint64_t seed_;
  std::vector<float> centres_;
};
}  // namespace

absl::StatusOr<SampleResult> RunMlp(const SampleConfig& cfg) {
  auto mesh = SampleMesh(cfg);
  if (!mesh.ok()) return mesh.status();

  ss::nn::Linear l1(kIn, kHidden, "l1", cfg.seed), l2(kHidden, kHidden, "l2", cfg.seed),
      l3(kHidden, kClasses, "l3", cfg.seed);
  ss::optim::SGD opt(ss::parameters(l1, l2, l3), {.lr = cfg.lr});
  Loader loader(cfg.seed + 1);

  std::vector<ss::Tensor*> params = ss::parameters(l1, l2, l3);
  SampleResult result;
  auto first = ResumeFromCheckpoint(cfg, params, "mlp");
  if (!first.ok()) return first.status();
  result.first_step = *first;
  const int end = cfg.stop_at >= 0 ? std::min(cfg.stop_at, cfg.steps) : cfg.steps;
  LossLog losses(cfg, &result);
  for (int step = result.first_step; step < end; ++step) {
    int64_t batch = (cfg.change_step >= 0 && step >= cfg.change_step) ? cfg.batch_after : cfg.batch;
    auto [x, y] = loader.next(batch, step);
    if (auto s = ss::mark_sharding(x, *mesh, {"data", ss::none}); !s.ok()) return s;
    if (auto s = ss::mark_sharding(y, *mesh, {"data"}); !s.ok()) return s;

    ss::Tensor logits = l3(ss::relu(l2(ss::relu(l1(x)))));
    ss::Tensor loss = ss::cross_entropy(logits, y);
    if (auto s = ss::backward(loss); !s.ok()) return s;
    if (cfg.read_loss_every > 0 && (step - result.first_step) % cfg.read_loss_every == 0) {
      // A logging line before the update: the read cuts the graph (loss and gradients run now).
      if (auto v = loss.item(); !v.ok()) return v.status();
    }
    if (auto s = opt.step(); !s.ok()) return s;
    if (auto s = ss::mark_step(); !s.ok()) return s;
    if (auto s = losses.Push(step, std::move(loss)); !s.ok()) return s;
  }
  if (auto s = losses.Flush(); !s.ok()) return s;
  if (auto s = SaveCheckpoint(cfg, params, end, "mlp"); !s.ok()) return s;
  return result;
}

const std::vector<SampleInfo>& Registry() {
  // The flags are what each Run* reads of its SampleConfig; the batch limits
  // keep a step's activations (and their gradients) within a few GiB:
  // about 28 KiB per example for mlp, 8 MiB for llama (128 positions, 2
  // layers, 4x128x128 attention scores), 2.5 MiB for cnn.
  static const std::vector<SampleInfo> samples = {
      {"mlp", "784-1024-1024-10 classifier, SGD, data parallel; batch 64 -> 48 at step 10", RunMlp,
       {"--batch", "--batch-after", "--change-step", "--lr", "--init", "--save", "--stop-at", "--read-loss-every"},
       16384},
      {"llama", "Llama-style decoder (2 layers, d 256, 4 heads, SwiGLU 1024, RMSNorm, RoPE), bytes, AdamW", RunLlama,
       {"--batch", "--init", "--save", "--stop-at", "--data", "--eval-every", "--autocast", "--checkpoint"}, 256},
      {"cnn", "ResNet-style CNN (stem + 3 residual stages 16/32/64, BatchNorm, dropout) on 32x32 images, SGD momentum",
       RunCnn, {"--batch", "--lr", "--init", "--save", "--stop-at", "--eval-every", "--autocast"}, 1024},
      {"recompile_storm", "next-token model fed random lengths 8..48: a graph per length; --bucket pads to powers of two",
       RunRecompileStorm, {"--lr", "--bucket"}, 0},
  };
  return samples;
}

const SampleInfo* Find(const std::string& name) {
  for (const auto& s : Registry())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace shardscope::samples
