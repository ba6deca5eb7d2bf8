// The recompile_storm sample: a next-token model (embedding, one hidden
// layer, softmax over 64 tokens) fed batches of random lengths 8..48, as a
// sequence model on variable-length text is. Every new length is a new graph:
// a recompilation storm, which `shardscope recompiles` diagnoses
// (input_shape_changed) and answers with padding buckets and their saving.
// `--bucket` applies that suggestion: each batch is padded to the next power
// of two, the padding masked out of the loss, so the same losses come from
// at most three graphs.
#include <random>

#include "core/shardscope.h"
#include "samples/common.h"
#include "samples/samples.h"

namespace shardscope::samples {
namespace ss = shardscope;

namespace {
constexpr int64_t kVocab = 64, kDim = 64, kBatch = 8, kMinLen = 8, kMaxLen = 48;

int64_t Bucket(int64_t n) {
  int64_t b = 1;
  while (b < n) b *= 2;
  return b;
}
}  // namespace

absl::StatusOr<SampleResult> RunRecompileStorm(const SampleConfig& cfg) {
  auto mesh = SampleMesh(cfg);
  if (!mesh.ok()) return mesh.status();
  ss::nn::Embedding embed(kVocab, kDim, "embed", cfg.seed);
  ss::nn::Linear hidden(kDim, kDim, "hidden", cfg.seed), head(kDim, kVocab, "head", cfg.seed);
  std::vector<ss::Tensor*> params = {&embed.weight};
  for (ss::Tensor* p : ss::parameters(hidden, head)) params.push_back(p);
  ss::optim::SGD opt(params, {.lr = cfg.lr});
  SampleResult result;
  LossLog losses(cfg, &result);
  for (int step = 0; step < cfg.steps; ++step) {
    std::mt19937_64 rng(cfg.seed * 1000003 + static_cast<uint64_t>(step));
    const int64_t len = std::uniform_int_distribution<int64_t>(kMinLen, kMaxLen)(rng);
    const int64_t padded = cfg.bucket ? Bucket(len) : len;
    // A learnable sequence: each token is the previous one plus a per-row stride.
    std::vector<int32_t> in(kBatch * padded, 0), next(kBatch * padded, 0);
    std::vector<float> mask(kBatch * padded, 0.f);
    for (int64_t b = 0; b < kBatch; ++b) {
      int32_t t = static_cast<int32_t>(rng() % kVocab), stride = 1 + static_cast<int32_t>(b % 3);
      for (int64_t i = 0; i < len; ++i) {
        in[b * padded + i] = t;
        t = (t + stride) % kVocab;
        next[b * padded + i] = t;
        mask[b * padded + i] = 1.f;
      }
    }
    ss::Tensor x = ss::Tensor::from_host(Literal::FromI32({kBatch, padded}, in), "tokens");
    ss::Tensor y = ss::Tensor::from_host(Literal::FromI32({kBatch * padded}, next), "targets");
    ss::Tensor m = ss::Tensor::from_host(Literal::FromF32({kBatch * padded}, mask), "mask");
    if (auto s = ss::mark_sharding(x, *mesh, {"data", ss::none}); !s.ok()) return s;
    ss::Tensor h = ss::reshape(embed(x), {kBatch * padded, kDim});
    ss::Tensor logits = head(ss::relu(hidden(h)));
    // Mean negative log-likelihood over the real tokens only.
    ss::Tensor picked = ss::sum(ss::log_softmax(logits) * ss::one_hot(y, kVocab), {1});
    ss::Tensor loss = -(ss::sum(picked * m) / ss::sum(m));
    if (auto s = ss::backward(loss); !s.ok()) return s;
    if (auto s = opt.step(); !s.ok()) return s;
    if (auto s = ss::mark_step(); !s.ok()) return s;
    if (auto s = losses.Push(step, std::move(loss)); !s.ok()) return s;
  }
  if (auto s = losses.Flush(); !s.ok()) return s;
  return result;
}

}  // namespace shardscope::samples
