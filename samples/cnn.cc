// The cnn sample: a small ResNet on 32x32 RGB images — a 3x3 stem with
// BatchNorm, three stages of one basic residual block each (16, 32 and 64
// channels, the last two halving the resolution, with average pooling and a
// 1x1 convolution on the shortcut), global average pooling, dropout and a
// linear classifier over 10 classes — trained with SGD (momentum 0.9, weight decay 5e-4), data
// parallel: the batch is split over the mesh's 'data' axis. The images are
// synthetic: each class is a grating of its own orientation and colour, with
// a random phase, a random offset and noise, so there is something to learn.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/shardscope.h"
#include "samples/common.h"
#include "samples/samples.h"

namespace shardscope::samples {
namespace ss = shardscope;

namespace {
constexpr int64_t kSize = 32, kColours = 3, kClasses = 10;

// Class c: stripes at angle c * 18 degrees, tinted with the class's colour.
// The same seed and step give the same batch whatever the mesh.
class ImageLoader {
 public:
  explicit ImageLoader(uint64_t seed) : seed_(seed), tint_(kClasses * kColours) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(0.2f, 1.0f);
    for (float& t : tint_) t = u(rng);
  }

  // `stream` separates the training batches (one per step) from held-out ones.
  std::pair<ss::Tensor, ss::Tensor> batch(int64_t n, uint64_t stream) const {
    std::mt19937_64 rng(seed_ * 1000003 + stream);
    std::uniform_int_distribution<int32_t> cls(0, kClasses - 1);
    std::uniform_real_distribution<float> phase(0.f, 6.2831853f), offset(-0.3f, 0.3f);
    std::normal_distribution<float> noise(0.f, 0.6f);
    std::vector<float> xs(n * kColours * kSize * kSize);
    std::vector<int32_t> ys(n);
    for (int64_t b = 0; b < n; ++b) {
      const int32_t c = ys[b] = cls(rng);
      const float angle = static_cast<float>(c) * 3.14159265f / kClasses, freq = 0.5f + 0.05f * c;
      const float ca = std::cos(angle), sa = std::sin(angle), ph = phase(rng), off = offset(rng);
      for (int64_t k = 0; k < kColours; ++k)
        for (int64_t i = 0; i < kSize; ++i)
          for (int64_t j = 0; j < kSize; ++j) {
            float stripe = std::sin(freq * (static_cast<float>(i) * ca + static_cast<float>(j) * sa) + ph);
            xs[((b * kColours + k) * kSize + i) * kSize + j] = tint_[c * kColours + k] * stripe + off + noise(rng);
          }
    }
    ss::Tensor x = ss::Tensor::from_host(Literal::FromF32({n, kColours, kSize, kSize}, xs), "images");
    ss::Tensor y = ss::Tensor::from_host(Literal::FromI32({n}, ys), "labels");
    return {x, y};
  }

 private:
  uint64_t seed_;
  std::vector<float> tint_;
};

// conv3x3 - BN - relu - conv3x3 - BN, plus the input (through a 2x2 average
// pool, a 1x1 conv and BN where the shape changes), then relu. Submodules name their own
// ops ("layer2.0.conv1"); the block's own ops (the sum, the relus) carry the
// block's path ("layer2.0").
struct BasicBlock {
  BasicBlock(int64_t in, int64_t out, int64_t stride, const std::string& name, uint64_t seed)
      : name(name),
        conv1(in, out, 3, stride, 1, false, name + ".conv1", seed),
        bn1(out, name + ".bn1"),
        conv2(out, out, 3, 1, 1, false, name + ".conv2", seed),
        bn2(out, name + ".bn2") {
    if (stride != 1) shortcut_pool = std::make_unique<ss::nn::AvgPool2d>(stride, stride, 0, name + ".shortcut.pool");
    if (stride != 1 || in != out) {
      shortcut_conv = std::make_unique<ss::nn::Conv2d>(in, out, 1, 1, 0, false, name + ".shortcut.conv", seed);
      shortcut_bn = std::make_unique<ss::nn::BatchNorm2d>(out, name + ".shortcut.bn");
    }
  }
  ss::Tensor operator()(const ss::Tensor& x) {
    ss::Tensor h = bn1(conv1(x));
    {
      ss::NameScope scope(name);
      h = ss::relu(h);
    }
    h = bn2(conv2(h));
    // The shortcut averages 2x2 windows before its 1x1 conv (ResNet-D) rather
    // than striding over 3 of every 4 inputs.
    ss::Tensor skip = shortcut_pool ? (*shortcut_pool)(x) : x;
    if (shortcut_conv) skip = (*shortcut_bn)((*shortcut_conv)(skip));
    ss::NameScope scope(name);
    return ss::relu(ss::add(h, skip));
  }
  std::vector<ss::nn::Module*> modules() {
    std::vector<ss::nn::Module*> m = {&conv1, &bn1, &conv2, &bn2};
    if (shortcut_pool) m.push_back(shortcut_pool.get());
    if (shortcut_conv) m.insert(m.end(), {shortcut_conv.get(), shortcut_bn.get()});
    return m;
  }
  std::string name;
  ss::nn::Conv2d conv1;
  ss::nn::BatchNorm2d bn1;
  ss::nn::Conv2d conv2;
  ss::nn::BatchNorm2d bn2;
  std::unique_ptr<ss::nn::AvgPool2d> shortcut_pool;
  std::unique_ptr<ss::nn::Conv2d> shortcut_conv;
  std::unique_ptr<ss::nn::BatchNorm2d> shortcut_bn;
};

struct ResNet {
  explicit ResNet(uint64_t seed)
      : stem_conv(kColours, 16, 3, 1, 1, false, "stem.conv", seed),
        stem_bn(16, "stem.bn"),
        dropout(0.1, "dropout", seed),
        fc(64, kClasses, "fc", seed) {
    blocks.push_back(std::make_unique<BasicBlock>(16, 16, 1, "layer1.0", seed));
    blocks.push_back(std::make_unique<BasicBlock>(16, 32, 2, "layer2.0", seed));
    blocks.push_back(std::make_unique<BasicBlock>(32, 64, 2, "layer3.0", seed));
  }
  ss::Tensor loss(const ss::Tensor& images, const ss::Tensor& labels) {
    // Mixed precision: every convolution and the classifier's matmul on
    // 16-bit copies of their operands, f32 out (batch norm stays f32).
    ss::AutocastGuard mixed(autocast);
    ss::Tensor h = stem_bn(stem_conv(images));
    {
      ss::NameScope scope("stem");
      h = ss::relu(h);
    }
    for (auto& b : blocks) h = (*b)(h);
    {
      ss::NameScope scope("pool");
      h = ss::global_avg_pool2d(h);  // [N, 64]
    }
    return ss::cross_entropy(fc(dropout(h)), labels);
  }
  std::optional<DType> autocast;  // --autocast
  std::vector<ss::nn::Module*> modules() {
    std::vector<ss::nn::Module*> m = {&stem_conv, &stem_bn};
    for (auto& b : blocks)
      for (ss::nn::Module* x : b->modules()) m.push_back(x);
    m.insert(m.end(), {&dropout, &fc});
    return m;
  }
  std::vector<ss::Tensor*> parameters() {
    std::vector<ss::Tensor*> out;
    for (ss::nn::Module* m : modules())
      for (ss::Tensor* p : m->parameters()) out.push_back(p);
    return out;
  }
  std::vector<ss::Tensor*> buffers() {
    std::vector<ss::Tensor*> out;
    for (ss::nn::Module* m : modules())
      for (ss::Tensor* b : m->buffers()) out.push_back(b);
    return out;
  }
  // BatchNorm on batch or running statistics, dropout on or off.
  void train(bool on) {
    stem_bn.training = on;
    dropout.training = on;
    for (auto& b : blocks)
      for (ss::nn::BatchNorm2d* bn : {&b->bn1, &b->bn2, b->shortcut_bn.get()})
        if (bn) bn->training = on;
  }

  ss::nn::Conv2d stem_conv;
  ss::nn::BatchNorm2d stem_bn;
  std::vector<std::unique_ptr<BasicBlock>> blocks;
  ss::nn::Dropout dropout;
  ss::nn::Linear fc;
};

// Held-out loss in eval mode (running statistics, no dropout) over fixed batches.
absl::StatusOr<double> EvalLoss(ResNet& model, const ImageLoader& loader, int64_t batch, const ss::Mesh& mesh) {
  // Evaluation cuts belong to the training step they follow (mark_step has
  // moved the count to the next): each, and the read of its value, is recorded
  // under that step's number, and the count goes on where it was.
  const int step = ss::current_step();
  model.train(false);
  double total = 0;
  const int batches = 2;
  for (int k = 0; k < batches; ++k) {
    auto [x, y] = loader.batch(batch, (uint64_t{1} << 40) + k);
    if (auto s = ss::mark_sharding(x, mesh, {"data", ss::none, ss::none, ss::none}); !s.ok()) return s;
    if (auto s = ss::mark_sharding(y, mesh, {"data"}); !s.ok()) return s;
    ss::Tensor loss = model.loss(x, y);
    ss::set_current_step(step - 1);
    if (auto s = ss::mark_step(); !s.ok()) return s;
    ss::set_current_step(step - 1);  // its value's read too
    auto v = loss.item();
    if (!v.ok()) return v.status();
    total += *v;
  }
  model.train(true);
  ss::set_current_step(step);
  return total / batches;
}

}  // namespace

absl::StatusOr<SampleResult> RunCnn(const SampleConfig& cfg) {
  auto mesh = SampleMesh(cfg);
  if (!mesh.ok()) return mesh.status();
  if (cfg.cnn_batch % cfg.mesh[0] != 0)
    return absl::InvalidArgumentError(absl::StrCat("cnn: the batch (", cfg.cnn_batch, ") must split evenly over the ",
                                                   cfg.mesh[0], " chips of the 'data' axis"));

  auto autocast = AutocastType(cfg);
  if (!autocast.ok()) return autocast.status();
  ResNet model(cfg.seed);
  model.autocast = *autocast;
  std::vector<ss::Tensor*> params = model.parameters();
  ss::optim::SGD opt(params, {.lr = cfg.lr, .momentum = 0.9, .weight_decay = 5e-4});
  ImageLoader loader(cfg.seed + 1);

  // Checkpoints hold the weights, BatchNorm's running statistics, the dropout
  // generator's state and the momentum buffers: a resumed run goes on exactly.
  std::vector<ss::Tensor*> saved = params;
  for (ss::Tensor* t : model.buffers()) saved.push_back(t);
  for (ss::Tensor* t : opt.state()) saved.push_back(t);
  SampleResult result;
  auto first = ResumeFromCheckpoint(cfg, saved, "cnn");
  if (!first.ok()) return first.status();
  result.first_step = *first;
  const int end = cfg.stop_at >= 0 ? std::min(cfg.stop_at, cfg.steps) : cfg.steps;
  LossLog losses(cfg, &result);
  for (int step = result.first_step; step < end; ++step) {
    auto [x, y] = loader.batch(cfg.cnn_batch, static_cast<uint64_t>(step));
    if (auto s = ss::mark_sharding(x, *mesh, {"data", ss::none, ss::none, ss::none}); !s.ok()) return s;
    if (auto s = ss::mark_sharding(y, *mesh, {"data"}); !s.ok()) return s;
    ss::Tensor loss = model.loss(x, y);
    if (auto s = ss::backward(loss); !s.ok()) return s;
    if (auto s = opt.step(); !s.ok()) return s;
    if (auto s = ss::mark_step(); !s.ok()) return s;
    if (auto s = losses.Push(step, std::move(loss)); !s.ok()) return s;
    if (cfg.eval_every > 0 && ((step + 1) % cfg.eval_every == 0 || step + 1 == end)) {
      auto e = EvalLoss(model, loader, cfg.cnn_batch, *mesh);
      if (!e.ok()) return e.status();
      if (auto s = losses.Flush(*e); !s.ok()) return s;
    }
  }
  if (auto s = losses.Flush(); !s.ok()) return s;
  if (auto s = SaveCheckpoint(cfg, saved, end, "cnn"); !s.ok()) return s;
  return result;
}

}  // namespace shardscope::samples
