// Tests of the convolutional frontend (core/ops_cnn.cc, the CNN modules of
// core/nn.h, SGD's momentum and weight decay): results against plain loops,
// module paths on the recorded ops, BatchNorm's running statistics updated on
// the devices, dropout masks that change every step without recompiling,
// clear errors, and data-parallel convolution equal to one chip. The
// gradients themselves are checked against finite differences in core_test.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/shardscope.h"
#include "gtest/gtest.h"
#include "profiler/trace/recorder.h"

namespace shardscope {
namespace {

std::vector<double> Host(const Tensor& t) {
  auto v = t.to_host();
  EXPECT_TRUE(v.ok()) << v.status();
  std::vector<double> out;
  if (v.ok())
    for (int64_t k = 0; k < v->elements(); ++k) out.push_back(v->GetDouble(k));
  return out;
}

Literal Random(std::vector<int64_t> dims, uint64_t seed, DType t = DType::kF32) {
  Literal l(Shape(t, std::move(dims)));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, u(rng));
  return l;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], tol) << "element " << k;
}

class CnnTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok()); }
  void TearDown() override { Shutdown(); }
};

TEST_F(CnnTest, Conv2dMatchesALoop) {
  const int64_t N = 2, C = 3, H = 7, W = 6, O = 4, K = 3, S = 2, P = 1;
  Literal xl = Random({N, C, H, W}, 1), wl = Random({O, C, K, K}, 2), bl = Random({O}, 3);
  Tensor y = conv2d(Tensor::from_host(xl, "x"), Tensor::from_host(wl, "w"), Tensor::from_host(bl, "b"), S, P);
  const int64_t OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
  ASSERT_EQ(y.shape(), Shape(DType::kF32, {N, O, OH, OW}));
  std::vector<double> want;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = bl.GetDouble(o);
          for (int64_t c = 0; c < C; ++c)
            for (int64_t a = 0; a < K; ++a)
              for (int64_t b = 0; b < K; ++b) {
                int64_t h = i * S + a - P, w = j * S + b - P;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                acc += xl.GetDouble(((n * C + c) * H + h) * W + w) * wl.GetDouble(((o * C + c) * K + a) * K + b);
              }
          want.push_back(acc);
        }
  ExpectNear(Host(y), want, 1e-5);
}

TEST_F(CnnTest, PoolingValues) {
  // One 4x4 channel: 1..16 row-major.
  std::vector<float> v(16);
  for (int k = 0; k < 16; ++k) v[k] = static_cast<float>(k + 1);
  Tensor x = Tensor::from_host(Literal::FromF32({1, 1, 4, 4}, v), "x");
  ExpectNear(Host(max_pool2d(x, 2)), {6, 8, 14, 16});
  ExpectNear(Host(avg_pool2d(x, 2)), {3.5, 5.5, 11.5, 13.5});
  // Padding counts as -inf for max, as 0 for the average (divided by 4 always).
  ExpectNear(Host(max_pool2d(x, 2, 2, 1)), {1, 3, 4, 9, 11, 12, 13, 15, 16});
  ExpectNear(Host(avg_pool2d(x, 2, 2, 1)), {0.25, 1.25, 1, 3.5, 8.5, 5, 3.25, 7.25, 4});
  // Overlapping windows forward are fine.
  ExpectNear(Host(max_pool2d(x, 3, 1)), {11, 12, 15, 16});
  ExpectNear(Host(global_avg_pool2d(x)), {8.5});
}

TEST_F(CnnTest, MaxPoolGradientGoesToTheFirstMaximumOfAWindow) {
  Tensor x = Tensor::from_host(Literal::FromF32({1, 1, 2, 4}, {5, 5, 1, 2, 5, 0, 2, 2}), "x");
  x.requires_grad_();
  ASSERT_TRUE(backward(sum(max_pool2d(x, 2))).ok());
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(x.grad()), {1, 0, 0, 1, 0, 0, 0, 0});
}

TEST_F(CnnTest, OverlappingMaxPoolGradientIsAClearError) {
  Tensor x = Tensor::from_host(Random({1, 1, 5, 5}, 4), "x");
  x.requires_grad_();
  const int line = __LINE__ + 1;
  Tensor y = max_pool2d(x, 3, 2);
  ASSERT_TRUE(y.status().ok());  // the forward pass is fine
  ASSERT_TRUE(backward(sum(y)).ok());
  absl::Status s = mark_step();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max_pool2d"), std::string::npos) << s;
  EXPECT_NE(s.message().find("overlapping"), std::string::npos) << s;
  EXPECT_NE(s.message().find("tests/core/cnn_test.cc:" + std::to_string(line)), std::string::npos) << s;
}

TEST_F(CnnTest, ShapeErrorsNameTheTensorsAndTheLine) {
  Tensor x = Tensor::from_host(Random({2, 3, 8, 8}, 5), "images");
  Tensor w = Tensor::from_host(Random({4, 2, 3, 3}, 6), "conv.weight");
  const int line = __LINE__ + 1;
  Tensor y = conv2d(x, w);
  ASSERT_FALSE(y.status().ok());
  const std::string m(y.status().message());
  EXPECT_NE(m.find("'images' f32[2,3,8,8] has 3 channels"), std::string::npos) << m;
  EXPECT_NE(m.find("'conv.weight'"), std::string::npos) << m;
  EXPECT_NE(m.find("cnn_test.cc:" + std::to_string(line)), std::string::npos) << m;
  EXPECT_FALSE(conv2d(x, Tensor::from_host(Random({4, 3, 9, 9}, 7)), Tensor(), 1, 0).status().ok());
  EXPECT_FALSE(max_pool2d(x, 3, 1, 2).status().ok());  // padding over half the window
  EXPECT_FALSE(max_pool2d(reshape(x, {6, 64}), 2).status().ok());
  EXPECT_FALSE(dropout(x, 1.0, true).status().ok());
  EXPECT_FALSE(mark_step().ok());  // the poisoned results surface here too
}

TEST_F(CnnTest, ModulesNameTheirParametersAndOps) {
  nn::Conv2d conv(3, 8, 3, 1, 1, false, "stem.conv");
  nn::BatchNorm2d bn(8, "stem.bn");
  nn::MaxPool2d pool(2, 0, 0, "stem.pool");
  EXPECT_EQ(conv.weight.name(), "stem.conv.weight");
  EXPECT_EQ(conv.weight.shape(), Shape(DType::kF32, {8, 3, 3, 3}));
  EXPECT_FALSE(conv.bias.defined());
  EXPECT_EQ(conv.parameters().size(), 1u);
  EXPECT_EQ(bn.parameters()[0]->name(), "stem.bn.weight");
  EXPECT_EQ(bn.buffers()[1]->name(), "stem.bn.running_var");
  Tensor x = Tensor::from_host(Random({2, 3, 8, 8}, 8), "x");
  Tensor c = conv(x);
  EXPECT_EQ(c.node()->op, compiler::Opcode::kConvolution);
  EXPECT_EQ(c.node()->scope, "stem.conv");
  EXPECT_EQ(c.node()->loc.file, "tests/core/cnn_test.cc");
  Tensor p = pool(bn(c));
  EXPECT_EQ(p.node()->op, compiler::Opcode::kReduceWindow);
  EXPECT_EQ(p.node()->scope, "stem.pool");
  EXPECT_EQ(p.shape(), Shape(DType::kF32, {2, 8, 4, 4}));
  nn::Conv2d biased(3, 8, 1, 2, 0, true, "proj");
  EXPECT_EQ(biased.bias.name(), "proj.bias");
  EXPECT_EQ(biased(x).shape(), Shape(DType::kF32, {2, 8, 4, 4}));
}

TEST_F(CnnTest, BatchNormTrainsOnBatchStatisticsAndKeepsRunningOnesOnTheDevices) {
  nn::BatchNorm2d bn(2, "bn", 1e-5, 0.1);
  // Channel 0 holds 0..7, channel 1 holds 10 x that.
  std::vector<float> v;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 4; ++k) v.push_back(static_cast<float>((c ? 10 : 1) * (n * 4 + k)));
  Tensor x = Tensor::from_host(Literal::FromF32({2, 2, 2, 2}, v), "x");
  Tensor y = bn(x);
  // The update is part of the graph: nothing was read back.
  EXPECT_FALSE(bn.running_mean.node()->is_data());
  ASSERT_TRUE(mark_step().ok());
  EXPECT_TRUE(bn.running_mean.node()->is_data());
  // Per channel: mean 3.5 (35), biased variance 5.25 (525), unbiased 6 (600).
  ExpectNear(Host(bn.running_mean), {0.35, 3.5}, 1e-5);
  ExpectNear(Host(bn.running_var), {0.9 + 0.6, 0.9 + 60}, 1e-4);
  std::vector<double> out = Host(y);
  EXPECT_NEAR(out[0], (0 - 3.5) / std::sqrt(5.25 + 1e-5), 1e-5);
  EXPECT_NEAR(out[4], (0 - 35) / std::sqrt(525 + 1e-5), 1e-5);
  // Eval mode: the running statistics, and no update.
  bn.training = false;
  Tensor e = bn(x);
  EXPECT_TRUE(bn.running_mean.node()->is_data());
  std::vector<double> ev = Host(e);
  EXPECT_NEAR(ev[1], (1 - 0.35) / std::sqrt(1.5 + 1e-5), 1e-5);
  EXPECT_NEAR(ev[5], (10 - 3.5) / std::sqrt(60.9 + 1e-5), 1e-4);
}

class CompileCounter : public trace::Recorder {
 public:
  using trace::Recorder::Record;
  void Record(const trace::CompilationRecord& c) override { misses += c.cache == "miss"; }
  int misses = 0;
};

TEST_F(CnnTest, DropoutDrawsANewMaskEveryStepWithoutRecompiling) {
  CompileCounter rec;
  trace::SetRecorder(&rec);
  nn::Dropout drop(0.25, "drop", 3);
  std::vector<std::vector<double>> masks;
  for (int step = 0; step < 3; ++step) {
    Tensor x = Tensor::from_host(Literal::FromF32({64, 64}, std::vector<float>(64 * 64, 1.f)), "x");
    Tensor y = drop(x);
    ASSERT_TRUE(mark_step().ok());
    masks.push_back(Host(y));
  }
  trace::SetRecorder(nullptr);
  EXPECT_EQ(rec.misses, 1);  // one graph; the generator's state is data
  for (const auto& m : masks) {
    int kept = 0;
    for (double v : m) {
      ASSERT_TRUE(v == 0 || std::abs(v - 1 / 0.75) < 1e-6) << v;
      kept += v != 0;
    }
    EXPECT_NEAR(kept / 4096.0, 0.75, 0.03);
  }
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
  // The same seed gives the same masks again; eval mode is the identity.
  nn::Dropout again(0.25, "drop", 3);
  Tensor x = Tensor::from_host(Literal::FromF32({64, 64}, std::vector<float>(64 * 64, 1.f)), "x");
  EXPECT_EQ(Host(again(x)), masks[0]);
  again.training = false;
  EXPECT_EQ(Host(again(x)), std::vector<double>(4096, 1.0));
}

TEST_F(CnnTest, SgdMomentumAndWeightDecayFollowPyTorch) {
  Tensor p = Tensor::from_host(Literal::FromF32({2}, {1, -2}), "p");
  p.requires_grad_();
  optim::SGD opt({&p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  ASSERT_EQ(opt.state().size(), 1u);
  EXPECT_EQ(opt.state()[0]->name(), "sgd.momentum.p");
  double w[2] = {1, -2}, buf[2] = {0, 0};
  for (int step = 0; step < 3; ++step) {
    // loss = sum(p^2) / 2: gradient p.
    ASSERT_TRUE(backward(mul(sum(mul(p, p)), 0.5)).ok());
    ASSERT_TRUE(opt.step().ok());
    ASSERT_TRUE(mark_step().ok());
    for (int k = 0; k < 2; ++k) {
      double g = w[k] + 0.01 * w[k];
      buf[k] = 0.9 * buf[k] + g;
      w[k] -= 0.1 * buf[k];
    }
    ExpectNear(Host(p), {w[0], w[1]}, 1e-6);
  }
  ExpectNear(Host(*opt.state()[0]), {buf[0], buf[1]}, 1e-6);
}

// A conv - BN - relu - pool - linear step, on `chips` chips with the batch split.
std::vector<double> TrainSmallCnn(int chips) {
  EXPECT_TRUE(Init({.num_hosts = 1, .chips_per_host = chips}).ok());
  std::vector<int64_t> ids(chips);
  for (int k = 0; k < chips; ++k) ids[k] = k;
  auto mesh = Mesh::Create(ids, {chips, 1}, {"data", "model"});
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  std::vector<double> out;
  {
    nn::Conv2d c1(2, 4, 3, 1, 1, false, "c1", 1), c2(4, 6, 3, 2, 1, true, "c2", 1);
    nn::BatchNorm2d bn(4, "bn");
    nn::Linear fc(6, 3, "fc", 1);
    optim::SGD opt(parameters(c1, bn, c2, fc), {.lr = 0.1, .momentum = 0.9});
    for (int step = 0; step < 3; ++step) {
      Tensor x = Tensor::from_host(Random({4, 2, 8, 8}, 20 + step), "x");
      Tensor y = Tensor::from_host(Literal::FromI32({4}, {0, 1, 2, 1}), "y");
      EXPECT_TRUE(mark_sharding(x, *mesh, {"data", none, none, none}).ok());
      EXPECT_TRUE(mark_sharding(y, *mesh, {"data"}).ok());
      Tensor h = max_pool2d(relu(bn(c1(x))), 2);
      Tensor loss = cross_entropy(fc(global_avg_pool2d(relu(c2(h)))), y);
      EXPECT_TRUE(backward(loss).ok());
      EXPECT_TRUE(opt.step().ok());
      absl::Status s = mark_step();
      EXPECT_TRUE(s.ok()) << s;
      auto v = loss.item();
      out.push_back(v.ok() ? *v : NAN);
    }
    for (double v : Host(c1.weight)) out.push_back(v);
    for (double v : Host(bn.running_var)) out.push_back(v);
  }
  Shutdown();
  return out;
}

TEST_F(CnnTest, DataParallelConvolutionMatchesOneChip) {
  Shutdown();
  std::vector<double> one = TrainSmallCnn(1), two = TrainSmallCnn(2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t k = 0; k < one.size(); ++k) EXPECT_NEAR(two[k], one[k], 1e-4 * (1 + std::abs(one[k]))) << k;
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
}

}  // namespace
}  // namespace shardscope
