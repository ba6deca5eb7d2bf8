// Mixed precision and gradient checkpointing in the lazy frontend.
// Autocast: the traced graph converts f32 operands to bf16 in front of
// dot_general, whose result is f32; values and gradients stay within bf16's
// precision of the f32 ones, and gradients reach the f32 parameters as f32.
// remat: gradients equal the unchecked ones, the recomputation survives CSE
// (it is kept apart by optimization barriers), and the compiled step's memory
// plan peaks lower for a deep stack of checkpointed blocks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/shardscope.h"
#include "gtest/gtest.h"
#include "profiler/trace/recorder.h"
#include "samples/samples.h"

namespace shardscope {
namespace {

using compiler::Opcode;

Literal Random(std::vector<int64_t> dims, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, scale);
  Literal l(Shape(DType::kF32, std::move(dims)));
  for (int64_t k = 0; k < l.elements(); ++k) l.as<float>()[k] = n(rng);
  return l;
}

std::vector<double> Host(const Tensor& t) {
  auto v = t.to_host();
  EXPECT_TRUE(v.ok()) << v.status();
  std::vector<double> out;
  if (v.ok())
    for (int64_t k = 0; k < v->elements(); ++k) out.push_back(v->GetDouble(k));
  return out;
}

// max |a - b| / max |b|: the error relative to the values' scale.
double RelError(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    err = std::max(err, std::fabs(a[k] - b[k]));
    scale = std::max(scale, std::fabs(b[k]));
  }
  return scale > 0 ? err / scale : err;
}

// Records what the compiler reports: the graphs' text and their memory plans.
class CompileLog : public trace::Recorder {
 public:
  using trace::Recorder::Record;
  void Record(const trace::GraphRecord& g) override { graphs.push_back(g); }
  void Record(const trace::MemoryPlanRecord& m) override { plans.push_back(m); }
  std::vector<trace::GraphRecord> graphs;
  std::vector<trace::MemoryPlanRecord> plans;
};

class AutocastRematTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace::SetRecorder(&log_);
    ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  }
  void TearDown() override {
    Shutdown();
    trace::SetRecorder(nullptr);
  }
  CompileLog log_;
};

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// ---------------------------------------------------------------- autocast

TEST_F(AutocastRematTest, AutocastFeedsBf16OperandsToAnF32Dot) {
  nn::Linear lin(64, 32, "lin", 3);
  Tensor x = Tensor::from_host(Random({16, 64}, 1), "x");
  Tensor y32 = lin(x);
  Tensor y16;
  {
    AutocastGuard autocast(DType::kBF16);
    EXPECT_EQ(autocast_dtype(), DType::kBF16);
    y16 = lin(x);
  }
  EXPECT_FALSE(autocast_dtype().has_value());
  ASSERT_TRUE(y16.status().ok()) << y16.status();
  EXPECT_EQ(y16.dtype(), DType::kF32);
  // y = dot(convert(x), convert(W)) + b: find the dot under the bias add.
  const Node* dot = nullptr;
  for (const auto& o : y16.node()->operands)
    if (o->op == Opcode::kDotGeneral) dot = o.get();
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->shape.dtype, DType::kF32);
  for (const auto& o : dot->operands) {
    EXPECT_EQ(o->op, Opcode::kConvert);
    EXPECT_EQ(o->shape.dtype, DType::kBF16);
    EXPECT_EQ(o->operands[0]->shape.dtype, DType::kF32);
  }
  // Within bf16's precision (8 bits of mantissa, sums in f32) of the f32 result, but not equal to it.
  std::vector<double> a = Host(y16), b = Host(y32);
  EXPECT_LT(RelError(a, b), 2e-2);
  EXPECT_GT(RelError(a, b), 0);
  // The compiled program says the same in StableHLO.
  ASSERT_FALSE(log_.graphs.empty());
  const std::string& ir = log_.graphs.back().ir_text;
  EXPECT_NE(ir.find("stablehlo.convert"), std::string::npos);
  EXPECT_NE(ir.find("(tensor<16x64xbf16>, tensor<32x64xbf16>) -> tensor<16x32xf32>"), std::string::npos) << ir;
}

TEST_F(AutocastRematTest, AutocastGradientsAreF32AndCloseToF32Training) {
  // A two-layer net with attention-style batched matmuls, trained one step
  // both ways from the same weights.
  auto run = [&](bool autocast, std::vector<std::vector<double>>* grads) {
    nn::Linear l1(32, 64, "l1", 5), l2(64, 16, "l2", 6);
    Tensor x = Tensor::from_host(Random({4, 8, 32}, 2), "x");
    Tensor target = Tensor::from_host(Random({4, 8, 16}, 3), "target");
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace(DType::kBF16);
    Tensor h = silu(l1(x));
    Tensor att = matmul(softmax(matmul(h, transpose(h, {0, 2, 1}))), h);  // [4, 8, 64]
    Tensor loss = mse_loss(l2(att), target);
    guard.reset();
    EXPECT_TRUE(backward(loss).ok());
    for (Tensor* p : parameters(l1, l2)) {
      EXPECT_EQ(p->grad().dtype(), DType::kF32) << p->name();  // master weights get f32 gradients
      grads->push_back(Host(p->grad()));
    }
    return *loss.item();
  };
  std::vector<std::vector<double>> g32, g16;
  double loss32 = run(false, &g32), loss16 = run(true, &g16);
  EXPECT_NEAR(loss16, loss32, 2e-2 * std::fabs(loss32));
  ASSERT_EQ(g16.size(), g32.size());
  for (size_t k = 0; k < g32.size(); ++k) EXPECT_LT(RelError(g16[k], g32[k]), 5e-2) << "parameter " << k;
}

TEST_F(AutocastRematTest, AutocastConvolutionsTakeBf16OperandsAndGiveF32Gradients) {
  // Two strided, padded convolutions with a relu between, trained one step
  // both ways from the same weights.
  auto run = [&](bool autocast, std::vector<std::vector<double>>* grads) {
    nn::Conv2d c1(3, 8, 3, 2, 1, true, "c1", 5), c2(8, 4, 3, 1, 1, true, "c2", 6);
    Tensor x = Tensor::from_host(Random({2, 3, 9, 9}, 2), "x");
    std::optional<AutocastGuard> guard;
    if (autocast) guard.emplace(DType::kBF16);
    Tensor y = c2(relu(c1(x)));
    guard.reset();
    EXPECT_EQ(y.dtype(), DType::kF32);
    if (autocast) {
      // y = conv(convert(h), convert(w)) + bias: the convolution under the bias add.
      const Node* conv = nullptr;
      for (const auto& o : y.node()->operands)
        if (o->op == Opcode::kConvolution) conv = o.get();
      EXPECT_NE(conv, nullptr);
      if (conv) {
        EXPECT_EQ(conv->shape.dtype, DType::kF32);
        for (const auto& o : conv->operands) EXPECT_EQ(o->shape.dtype, DType::kBF16);
      }
    }
    Tensor loss = mean(mul(y, y));
    EXPECT_TRUE(backward(loss).ok());
    for (Tensor* p : parameters(c1, c2)) {
      EXPECT_EQ(p->grad().dtype(), DType::kF32) << p->name();
      grads->push_back(Host(p->grad()));
    }
    return *loss.item();
  };
  std::vector<std::vector<double>> g32, g16;
  double loss32 = run(false, &g32), loss16 = run(true, &g16);
  EXPECT_NEAR(loss16, loss32, 2e-2 * std::fabs(loss32));
  EXPECT_NE(loss16, loss32);  // really computed on rounded operands
  ASSERT_EQ(g16.size(), g32.size());
  for (size_t k = 0; k < g32.size(); ++k) EXPECT_LT(RelError(g16[k], g32[k]), 5e-2) << "parameter " << k;
}

TEST_F(AutocastRematTest, AutocastCanBeTurnedOffInsideAndABadTypeIsAnError) {
  Tensor a = Tensor::from_host(Random({4, 8}, 1), "a"), b = Tensor::from_host(Random({8, 2}, 2), "b");
  AutocastGuard on(DType::kBF16);
  {
    AutocastGuard off(std::nullopt);
    Tensor c = matmul(a, b);
    EXPECT_EQ(c.node()->operands[0]->op, Opcode::kParameter);  // no convert in front
  }
  const int line = __LINE__ + 1;
  AutocastGuard bad(DType::kI32);
  Tensor d = matmul(a, b);
  ASSERT_FALSE(d.status().ok());
  EXPECT_NE(d.status().message().find("autocast: i32 is not a 16-bit float type"), std::string::npos) << d.status();
  EXPECT_NE(d.status().message().find("autocast_remat_test.cc:" + std::to_string(line)), std::string::npos)
      << d.status();
}

// ---------------------------------------------------------------- remat

// A pre-norm residual MLP block, the shape of a transformer layer's half.
struct Block {
  Block(int64_t d, int64_t hidden, int i)
      : norm(d, "blocks." + std::to_string(i) + ".norm"),
        up(d, hidden, "blocks." + std::to_string(i) + ".up", 11 + i),
        down(hidden, d, "blocks." + std::to_string(i) + ".down", 31 + i) {}
  Tensor operator()(const Tensor& h) const { return add(h, down(silu(up(norm(h))))); }
  nn::RMSNorm norm;
  nn::Linear up, down;
};

struct Stack {
  Stack(int layers, int64_t d, int64_t hidden) {
    for (int i = 0; i < layers; ++i) blocks.push_back(std::make_unique<Block>(d, hidden, i));
  }
  std::vector<Tensor*> parameters() {
    std::vector<Tensor*> out;
    for (auto& b : blocks)
      for (Tensor* p : shardscope::parameters(b->norm, b->up, b->down)) out.push_back(p);
    return out;
  }
  // The loss, with each block checkpointed or not.
  Tensor Loss(const Tensor& x, bool checkpoint) const {
    Tensor h = x;
    for (const auto& b : blocks) {
      const Block& blk = *b;
      h = checkpoint ? remat([&](const Tensor& in) { return blk(in); }, h) : blk(h);
    }
    return mean(mul(h, h));
  }
  std::vector<std::unique_ptr<Block>> blocks;
};

TEST_F(AutocastRematTest, RematGradientsEqualTheUncheckedOnes) {
  Stack net(3, 32, 96);
  Tensor x = Tensor::from_host(Random({24, 32}, 4), "x").requires_grad_();
  auto grads = [&](bool checkpoint) {
    for (Tensor* p : net.parameters()) p->zero_grad();
    x.zero_grad();
    Tensor loss = net.Loss(x, checkpoint);
    EXPECT_TRUE(backward(loss).ok());
    std::vector<std::vector<double>> g;
    for (Tensor* p : net.parameters()) g.push_back(Host(p->grad()));
    g.push_back(Host(x.grad()));  // the gradient flows on through the first block's input
    return g;
  };
  // Op by op, the recomputation gives the forward's values to the bit, and so
  // the gradients are the same bits.
  GetClient().set_fusion(false);
  auto plain = grads(false), checked = grads(true);
  ASSERT_EQ(plain.size(), checked.size());
  for (size_t k = 0; k < plain.size(); ++k) EXPECT_EQ(checked[k], plain[k]) << "gradient " << k;
  // Fused kernels may group the recomputation's ops differently from the
  // forward's (the barriers end chains), which can move a last bit.
  GetClient().set_fusion(true);
  plain = grads(false);
  checked = grads(true);
  for (size_t k = 0; k < plain.size(); ++k) EXPECT_LT(RelError(checked[k], plain[k]), 1e-5) << "gradient " << k;
}

TEST_F(AutocastRematTest, RematSeveralInputsAndOutputsAndCapturedWeights) {
  nn::Linear a(16, 16, "a", 1), b(16, 16, "b", 2);
  Tensor x = Tensor::from_host(Random({8, 16}, 5), "x").requires_grad_();
  Tensor y = Tensor::from_host(Random({8, 16}, 6), "y").requires_grad_();
  auto block = [&](const std::vector<Tensor>& in) {
    Tensor s = tanh(a(in[0]) + in[1]);
    return std::vector<Tensor>{s, b(s) * in[0]};
  };
  auto grads = [&](bool checkpoint) {
    for (Tensor* p : {&a.weight, &a.bias, &b.weight, &b.bias, &x, &y}) p->zero_grad();
    std::vector<Tensor> out = checkpoint ? remat(block, {x, y}) : block({x, y});
    EXPECT_TRUE(backward(sum(out[0] * out[0]) + mean(out[1])).ok());
    std::vector<std::vector<double>> g;
    for (Tensor* p : {&a.weight, &a.bias, &b.weight, &b.bias, &x, &y}) g.push_back(Host(p->grad()));
    return g;
  };
  auto plain = grads(false), checked = grads(true);
  for (size_t k = 0; k < plain.size(); ++k) EXPECT_LT(RelError(checked[k], plain[k]), 1e-6) << "gradient " << k;
}

TEST_F(AutocastRematTest, RematIsKeptApartFromTheForwardAndLowersPeakMemory) {
  // Deep enough that the activations of all blocks outweigh the inputs kept.
  Stack net(8, 64, 256);
  Tensor x = Tensor::from_host(Random({256, 64}, 7), "x");
  struct Compiled {
    int64_t peak = 0;
    std::string ir;
  };
  auto step = [&](bool checkpoint) {
    for (Tensor* p : net.parameters()) p->zero_grad();
    log_.graphs.clear();
    log_.plans.clear();
    Tensor loss = net.Loss(x, checkpoint);
    EXPECT_TRUE(backward(loss).ok());
    EXPECT_TRUE(mark_step().ok());
    EXPECT_TRUE(loss.item().ok());
    Compiled c;
    for (const auto& p : log_.plans) c.peak = std::max(c.peak, p.peak_bytes);
    EXPECT_EQ(log_.graphs.size(), 1u);
    if (!log_.graphs.empty()) c.ir = log_.graphs[0].ir_text_after;
    return c;
  };
  Compiled plain = step(false), checked = step(true);
  // The recomputation survives CSE: each block's `up` dot runs a second time
  // (backward needs its result; the recomputed `down` dot is dead and dropped).
  EXPECT_EQ(Count(checked.ir, "stablehlo.dot_general"), Count(plain.ir, "stablehlo.dot_general") + 8);
  EXPECT_EQ(Count(plain.ir, "stablehlo.optimization_barrier"), 0);
  EXPECT_GT(Count(checked.ir, "stablehlo.optimization_barrier"), 8);
  // One block's activations at a time instead of eight.
  EXPECT_LT(checked.peak, plain.peak * 2 / 3) << "peak with remat " << checked.peak << ", without " << plain.peak;
  std::printf("peak memory of the step: %lld bytes unchecked, %lld with remat\n", static_cast<long long>(plain.peak),
              static_cast<long long>(checked.peak));
}

TEST_F(AutocastRematTest, RematWithoutGradientRecordingIsThePlainCall) {
  nn::Linear a(8, 8, "a");
  Tensor x = Tensor::from_host(Random({2, 8}, 1), "x");
  NoGradGuard no_grad;
  Tensor y = remat([&](const Tensor& in) { return a(in); }, x);
  EXPECT_EQ(y.node()->remat, nullptr);
  EXPECT_EQ(Host(y), Host(a(x)));
}

// ---------------------------------------------------------------- the llama sample

samples::SampleConfig TinyLlama() {
  samples::SampleConfig c;
  c.steps = 6;
  c.layers = 2;
  c.d_model = 32;
  c.heads = 2;
  c.ffn = 64;
  c.seq = 16;
  c.llama_batch = 4;
  c.eval_every = 0;
  return c;
}

TEST_F(AutocastRematTest, LlamaWithCheckpointingTrainsExactlyAsWithout) {
  samples::SampleConfig c = TinyLlama();
  auto plain = samples::RunLlama(c);
  ASSERT_TRUE(plain.ok()) << plain.status();
  c.checkpoint_layers = true;
  auto checked = samples::RunLlama(c);
  ASSERT_TRUE(checked.ok()) << checked.status();
  ASSERT_EQ(checked->losses.size(), plain->losses.size());
  for (size_t k = 0; k < plain->losses.size(); ++k)
    EXPECT_NEAR(checked->losses[k], plain->losses[k], 1e-5 * plain->losses[k]) << "step " << k;
}

TEST_F(AutocastRematTest, LlamaCheckpointingLowersThePeakOfADeepModel) {
  // The sample as it is written, 6 layers deep: the peak of its training step
  // (AdamW and global-norm clipping included, which read every gradient at once).
  auto peak = [&](bool checkpoint) {
    samples::SampleConfig c = TinyLlama();
    c.steps = 1;
    c.layers = 6;
    c.d_model = 64;
    c.ffn = 256;
    c.seq = 64;
    c.checkpoint_layers = checkpoint;
    log_.plans.clear();
    EXPECT_TRUE(samples::RunLlama(c).ok());
    int64_t p = 0;
    for (const auto& m : log_.plans) p = std::max(p, m.peak_bytes);
    return p;
  };
  const int64_t plain = peak(false), checked = peak(true);
  std::printf("llama, 6 layers: peak %lld bytes unchecked, %lld checkpointed\n", static_cast<long long>(plain),
              static_cast<long long>(checked));
  EXPECT_LT(checked, plain * 3 / 4);
}

TEST_F(AutocastRematTest, LlamaLearnsUnderAutocastWithCheckpointingOnTwoChips) {
  Shutdown();
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 2}).ok());
  samples::SampleConfig c = TinyLlama();
  c.steps = 12;
  c.mesh = {2, 1};  // data parallel: the barriers pass the batch split through
  c.autocast = "bf16";
  c.checkpoint_layers = true;
  auto r = samples::RunLlama(c);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->losses.size(), 12u);
  EXPECT_LT(r->losses.back(), r->losses.front() - 0.3);
}

}  // namespace
}  // namespace shardscope
