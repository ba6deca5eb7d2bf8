// Tests of the lazy frontend (core/): op results against hand-computed values,
// autograd against finite differences (f64), mark_sharding and Mesh errors,
// op errors surfacing from mark_step, data-parallel training equal to
// single-device training, and recompilation causes as a Recorder sees them.
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shardscope.h"
#include "core/symbols.h"
#include "gtest/gtest.h"
#include "profiler/trace/recorder.h"

namespace shardscope {
namespace {

constexpr const char* kFile = "tests/core/core_test.cc";

std::vector<double> Values(const Literal& l) {
  std::vector<double> v;
  for (int64_t k = 0; k < l.elements(); ++k) v.push_back(l.GetDouble(k));
  return v;
}

std::vector<double> Host(const Tensor& t) {
  auto v = t.to_host();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? Values(*v) : std::vector<double>{};
}

Literal F64(std::vector<int64_t> dims, std::vector<double> values) {
  Literal l(Shape(DType::kF64, std::move(dims)));
  for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, values[k]);
  return l;
}

Literal F32(std::vector<int64_t> dims, std::vector<float> values) { return Literal::FromF32(std::move(dims), values); }

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], tol) << "element " << k;
}

class CoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok()); }
  void TearDown() override { Shutdown(); }
  static void Reinit(int chips) { ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = chips}).ok()); }
};

// ---------------------------------------------------------------- ops

TEST_F(CoreTest, ElementwiseAndBroadcasting) {
  Tensor a = Tensor::from_host(F32({2, 3}, {1, 2, 3, 4, 5, 6}), "a");
  Tensor b = Tensor::from_host(F32({3}, {10, 20, 30}), "b");
  Tensor c = Tensor::from_host(F32({2, 1}, {-1, 2}), "c");
  ExpectNear(Host(a + b), {11, 22, 33, 14, 25, 36});
  ExpectNear(Host(a - b), {-9, -18, -27, -6, -15, -24});
  ExpectNear(Host(a * c), {-1, -2, -3, 8, 10, 12});
  ExpectNear(Host(b / a), {10, 10, 10, 2.5, 4, 5});
  ExpectNear(Host(maximum(a, c)), {1, 2, 3, 4, 5, 6});
  ExpectNear(Host(maximum(c, Tensor::from_host(F32({3}, {0, 3, 1})))), {0, 3, 1, 2, 3, 2});
  ExpectNear(Host(-c), {1, -2});
  ExpectNear(Host(relu(c)), {0, 2});
  ExpectNear(Host(exp(c)), {std::exp(-1.0), std::exp(2.0)});
  ExpectNear(Host(log(b)), {std::log(10.0), std::log(20.0), std::log(30.0)});
  ExpectNear(Host(add(a, 0.5)), {1.5, 2.5, 3.5, 4.5, 5.5, 6.5});
  ExpectNear(Host(mul(a, 2.0)), {2, 4, 6, 8, 10, 12});
  ExpectNear(Host(mul(a, 1.0)), {1, 2, 3, 4, 5, 6});
  ExpectNear(Host(convert(a, DType::kI32)), {1, 2, 3, 4, 5, 6});
}

TEST_F(CoreTest, LayoutAndContractions) {
  Tensor a = Tensor::from_host(F32({2, 3}, {1, 2, 3, 4, 5, 6}), "a");
  Tensor w = Tensor::from_host(F32({3, 2}, {1, 0, 0, 1, 1, 1}), "w");
  ExpectNear(Host(matmul(a, w)), {4, 5, 10, 11});
  ExpectNear(Host(transpose(a, {1, 0})), {1, 4, 2, 5, 3, 6});
  Tensor r = reshape(a, {3, 2});
  EXPECT_EQ(r.shape(), Shape(DType::kF32, {3, 2}));
  ExpectNear(Host(r), {1, 2, 3, 4, 5, 6});
  ExpectNear(Host(broadcast_to(Tensor::from_host(F32({2}, {7, 8})), {3, 2})), {7, 8, 7, 8, 7, 8});
  // Batched: [2,1,2] x [2,2,1].
  Tensor x = Tensor::from_host(F32({2, 1, 2}, {1, 2, 3, 4}));
  Tensor y = Tensor::from_host(F32({2, 2, 1}, {5, 6, 7, 8}));
  ExpectNear(Host(matmul(x, y)), {1 * 5 + 2 * 6, 3 * 7 + 4 * 8});
}

TEST_F(CoreTest, Reductions) {
  Tensor a = Tensor::from_host(F32({2, 3}, {1, 5, 3, 4, 2, 6}), "a");
  ExpectNear(Host(sum(a)), {21});
  ExpectNear(Host(sum(a, {0})), {5, 7, 9});
  ExpectNear(Host(sum(a, {-1})), {9, 12});
  Tensor k = sum(a, {1}, true);
  EXPECT_EQ(k.shape().dims, (std::vector<int64_t>{2, 1}));
  ExpectNear(Host(k), {9, 12});
  ExpectNear(Host(mean(a)), {3.5});
  ExpectNear(Host(mean(a, {1})), {3, 4});
  ExpectNear(Host(max(a, {1})), {5, 6});
  ExpectNear(Host(max(a, {0}, true)), {4, 5, 6});
  auto item = mean(a).item();
  ASSERT_TRUE(item.ok());
  EXPECT_DOUBLE_EQ(*item, 3.5);
  EXPECT_FALSE(a.item().ok());  // six elements
}

TEST_F(CoreTest, SoftmaxFamily) {
  Tensor x = Tensor::from_host(F32({2, 3}, {1, 2, 3, 0, 0, 0}), "x");
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double lse1 = std::log(3.0);
  ExpectNear(Host(log_softmax(x)), {1 - lse0, 2 - lse0, 3 - lse0, -lse1, -lse1, -lse1});
  Tensor labels = Tensor::from_host(Literal::FromI32({2}, {2, 0}), "labels");
  ExpectNear(Host(one_hot(labels, 3)), {0, 0, 1, 1, 0, 0});
  ExpectNear(Host(cross_entropy(x, labels)), {-((3 - lse0) + (-lse1)) / 2});
}

TEST_F(CoreTest, ScalarRule) {
  // 0 and 1 are inlined constants; other values are data.
  EXPECT_EQ(Tensor::scalar(1.0).node()->op, compiler::Opcode::kConstant);
  EXPECT_EQ(Tensor::scalar(0.0).node()->op, compiler::Opcode::kConstant);
  Tensor lr = Tensor::scalar(0.25);
  EXPECT_TRUE(lr.node()->is_data());
  ExpectNear(Host(lr), {0.25});
  ExpectNear(Host(Tensor::scalar(1.0)), {1});
}

// ---------------------------------------------------------------- autograd

struct GradCase {
  std::string name;
  std::vector<std::vector<int64_t>> shapes;
  double lo, hi;  // input range
  std::function<Tensor(const std::vector<Tensor>&)> f;
};

std::vector<GradCase> GradCases() {
  auto labels = [] { return Tensor::from_host(Literal::FromI32({3}, {1, 0, 3}), "labels"); };
  return {
      {"add", {{2, 3}, {2, 3}}, -1, 1, [](auto& x) { return x[0] + x[1]; }},
      {"add_broadcast", {{2, 3}, {3}}, -1, 1, [](auto& x) { return x[0] + x[1]; }},
      {"sub", {{2, 3}, {2, 1}}, -1, 1, [](auto& x) { return x[0] - x[1]; }},
      {"mul", {{2, 3}, {2, 3}}, -1, 1, [](auto& x) { return x[0] * x[1]; }},
      {"mul_scalar", {{4}}, -1, 1, [](auto& x) { return mul(x[0], 3.0); }},
      {"div", {{2, 3}, {2, 3}}, 0.5, 1.5, [](auto& x) { return x[0] / x[1]; }},
      {"maximum", {{2, 3}, {2, 3}}, -1, 1, [](auto& x) { return maximum(x[0], x[1]); }},
      {"relu", {{2, 3}}, -1, 1, [](auto& x) { return relu(x[0]); }},
      {"neg", {{2, 3}}, -1, 1, [](auto& x) { return -x[0]; }},
      {"exp", {{2, 3}}, -1, 1, [](auto& x) { return exp(x[0]); }},
      {"log", {{2, 3}}, 0.5, 2, [](auto& x) { return log(x[0]); }},
      {"matmul", {{2, 3}, {3, 4}}, -1, 1, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul_batched", {{2, 2, 3}, {2, 3, 2}}, -1, 1, [](auto& x) { return matmul(x[0], x[1]); }},
      {"matmul_rank3_by_2", {{2, 2, 3}, {3, 2}}, -1, 1, [](auto& x) { return matmul(x[0], x[1]); }},
      {"transpose", {{2, 3, 2}}, -1, 1, [](auto& x) { return transpose(x[0], {2, 0, 1}); }},
      {"reshape", {{2, 3, 2}}, -1, 1, [](auto& x) { return reshape(x[0], {3, 4}); }},
      {"broadcast", {{3}}, -1, 1, [](auto& x) { return broadcast_to(x[0], {2, 3}); }},
      {"sum", {{2, 3, 2}}, -1, 1, [](auto& x) { return sum(x[0], {0, 2}); }},
      {"sum_keepdim", {{2, 3}}, -1, 1, [](auto& x) { return sum(x[0], {1}, true); }},
      {"sum_all", {{2, 3}}, -1, 1, [](auto& x) { return sum(x[0]); }},
      {"mean", {{2, 3}}, -1, 1, [](auto& x) { return mean(x[0], {0}); }},
      {"mean_all", {{2, 3}}, -1, 1, [](auto& x) { return mean(x[0]); }},
      {"max", {{2, 3}}, -1, 1, [](auto& x) { return max(x[0], {1}); }},
      {"log_softmax", {{2, 4}}, -2, 2, [](auto& x) { return log_softmax(x[0]); }},
      {"cross_entropy", {{3, 4}}, -2, 2, [labels](auto& x) { return cross_entropy(x[0], labels()); }},
      {"minimum", {{2, 3}, {2, 3}}, -1, 1, [](auto& x) { return minimum(x[0], x[1]); }},
      {"slice", {{3, 5}}, -1, 1, [](auto& x) { return slice(x[0], 1, 1, 4); }},
      {"concatenate", {{2, 3}, {2, 2}}, -1, 1, [](auto& x) { return concatenate({x[0], x[1], x[0]}, 1); }},
      {"rotate_half", {{2, 4}}, -1, 1,
       [](auto& x) { return concatenate({-slice(x[0], 1, 2, 4), slice(x[0], 1, 0, 2)}, 1); }},
      {"embedding", {{5, 3}}, -1, 1,
       [](auto& x) {
         // Repeated ids: their gradients add up in the table.
         return embedding_lookup(x[0], Tensor::from_host(Literal::FromI32({2, 3}, {4, 0, 4, 2, 2, 4}), "ids"));
       }},
      {"sqrt", {{2, 3}}, 0.5, 2, [](auto& x) { return sqrt(x[0]); }},
      {"rsqrt", {{2, 3}}, 0.5, 2, [](auto& x) { return rsqrt(x[0]); }},
      {"tanh", {{2, 3}}, -2, 2, [](auto& x) { return tanh(x[0]); }},
      {"sigmoid", {{2, 3}}, -3, 3, [](auto& x) { return sigmoid(x[0]); }},
      {"silu", {{2, 3}}, -3, 3, [](auto& x) { return silu(x[0]); }},
      {"abs", {{2, 3}}, 0.2, 1, [](auto& x) { return abs(-x[0]); }},
      {"pow", {{2, 3}, {2, 3}}, 0.5, 1.5, [](auto& x) { return pow(x[0], x[1]); }},
      {"rms_norm", {{2, 4}, {4}}, -1, 1,
       [](auto& x) { return mul(mul(x[0], rsqrt(add(mean(mul(x[0], x[0]), {-1}, true), 1e-3))), x[1]); }},
      {"layer_norm", {{2, 4}}, -1, 1,
       [](auto& x) {
         Tensor c = sub(x[0], mean(x[0], {-1}, true));
         return mul(c, rsqrt(add(mean(mul(c, c), {-1}, true), 1e-3)));
       }},
      {"softmax", {{2, 4}}, -2, 2, [](auto& x) { return softmax(x[0]); }},
      {"mse", {{2, 3}, {2, 3}}, -1, 1, [](auto& x) { return mse_loss(x[0], x[1]); }},
      {"rope", {{2, 3, 4}}, -1, 1, [](auto& x) { return apply_rope(x[0]); }},
      {"attention_causal", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, -1, 1,
       [](auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], true); }},
      {"attention_full", {{1, 3, 2}, {1, 3, 2}, {1, 3, 2}}, -1, 1,
       [](auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], false); }},
      {"attention_heads", {{2, 2, 3, 2}, {2, 2, 3, 2}, {2, 2, 3, 2}}, -1, 1,  // [B, H, T, Dh]
       [](auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], true); }},
      {"rope_heads", {{1, 2, 3, 4}}, -1, 1, [](auto& x) { return apply_rope(x[0]); }},
      {"mlp", {{3, 4}, {4, 5}, {5}}, -1, 1,
       [](auto& x) { return log_softmax(relu(matmul(x[0], x[1]) + x[2])); }},
      // Convolutions: the input gradient is a convolution of the dilated
      // gradient with the flipped kernel, the kernel's one of input and gradient.
      {"conv2d", {{2, 3, 5, 5}, {4, 3, 3, 3}}, -1, 1, [](auto& x) { return conv2d(x[0], x[1], Tensor(), 1, 1); }},
      {"conv2d_stride2_bias", {{1, 2, 6, 7}, {3, 2, 3, 3}, {3}}, -1, 1,
       [](auto& x) { return conv2d(x[0], x[1], x[2], 2, 1); }},
      {"conv2d_1x1_stride2", {{2, 3, 4, 4}, {2, 3, 1, 1}}, -1, 1,  // rows the windows never reach
       [](auto& x) { return conv2d(x[0], x[1], Tensor(), 2, 0); }},
      {"conv2d_rect_kernel", {{1, 2, 5, 4}, {2, 2, 2, 3}}, -1, 1, [](auto& x) { return conv2d(x[0], x[1], Tensor(), 1, 1); }},
      {"max_pool2d", {{1, 2, 4, 6}}, -1, 1, [](auto& x) { return max_pool2d(x[0], 2); }},
      {"max_pool2d_padded", {{1, 2, 5, 5}}, -1, 1, [](auto& x) { return max_pool2d(x[0], 2, 2, 1); }},
      {"avg_pool2d_overlapping", {{1, 2, 5, 5}}, -1, 1, [](auto& x) { return avg_pool2d(x[0], 3, 2, 1); }},
      {"avg_pool2d", {{2, 1, 4, 5}}, -1, 1, [](auto& x) { return avg_pool2d(x[0], 2); }},
      {"global_avg_pool2d", {{2, 3, 3, 4}}, -1, 1, [](auto& x) { return global_avg_pool2d(x[0]); }},
      {"dropout", {{2, 3, 4, 4}}, -1, 1,
       [](auto& x) {
         Generator gen(7);  // the same mask on every evaluation
         return dropout(x[0], 0.5, true, gen);
       }},
      {"batch_norm2d_train", {{3, 2, 2, 3}, {2}, {2}}, -1, 1,
       [](auto& x) {
         Tensor rm = Tensor::from_host(F64({2}, {0, 0}), "rm"), rv = Tensor::from_host(F64({2}, {1, 1}), "rv");
         return batch_norm2d(x[0], rm, rv, x[1], x[2], true);
       }},
      {"batch_norm2d_eval", {{2, 2, 3, 3}, {2}, {2}}, -1, 1,
       [](auto& x) {
         Tensor rm = Tensor::from_host(F64({2}, {0.1, -0.2}), "rm"), rv = Tensor::from_host(F64({2}, {0.5, 2}), "rv");
         return batch_norm2d(x[0], rm, rv, x[1], x[2], false);
       }},
      {"residual_block", {{2, 2, 4, 4}, {2, 2, 3, 3}, {2, 2, 3, 3}}, -1, 1,
       [](auto& x) {
         Tensor rm = Tensor::from_host(F64({2}, {0, 0}), "rm"), rv = Tensor::from_host(F64({2}, {1, 1}), "rv");
         Tensor h = relu(batch_norm2d(conv2d(x[0], x[1], Tensor(), 1, 1), rm, rv, Tensor(), Tensor(), true));
         return max_pool2d(relu(conv2d(h, x[2], Tensor(), 1, 1) + x[0]), 2);
       }},
  };
}

TEST_F(CoreTest, AutogradMatchesFiniteDifferences) {
  for (const GradCase& c : GradCases()) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(std::hash<std::string>{}(c.name));
    std::uniform_real_distribution<double> u(c.lo, c.hi);
    std::vector<Literal> inputs;
    for (const auto& dims : c.shapes) {
      Literal l(Shape(DType::kF64, dims));
      for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, u(rng));
      inputs.push_back(std::move(l));
    }
    // A fixed random weighting makes every output element count: L = sum(f * W).
    Literal weights;
    auto loss_of = [&](const std::vector<Tensor>& xs) {
      Tensor y = c.f(xs);
      if (weights.elements() == 0 || weights.shape() != y.shape()) {
        weights = Literal(y.shape());
        std::uniform_real_distribution<double> wu(0.5, 1.5);
        std::mt19937_64 wr(7);
        for (int64_t k = 0; k < weights.elements(); ++k) weights.SetDouble(k, wu(wr));
      }
      return sum(mul(y, Tensor::from_host(weights, "W")));
    };

    std::vector<Tensor> xs;
    for (size_t k = 0; k < inputs.size(); ++k) {
      xs.push_back(Tensor::from_host(inputs[k], absl::StrCat("x", k)));
      xs.back().requires_grad_();
    }
    Tensor loss = loss_of(xs);
    ASSERT_TRUE(loss.status().ok()) << loss.status();
    ASSERT_TRUE(backward(loss).ok());
    { absl::Status ms = mark_step(); ASSERT_TRUE(ms.ok()) << ms; }

    for (size_t k = 0; k < inputs.size(); ++k) {
      SCOPED_TRACE(absl::StrCat("input ", k));
      ASSERT_TRUE(xs[k].grad().defined());
      std::vector<double> analytic = Host(xs[k].grad());
      ASSERT_EQ(static_cast<int64_t>(analytic.size()), inputs[k].elements());
      for (int64_t e = 0; e < inputs[k].elements(); ++e) {
        const double h = 1e-6;
        double at[2];
        for (int side = 0; side < 2; ++side) {
          std::vector<Tensor> ps;
          for (size_t j = 0; j < inputs.size(); ++j) {
            Literal l = inputs[j];
            if (j == k) l.SetDouble(e, l.GetDouble(e) + (side ? h : -h));
            ps.push_back(Tensor::from_host(std::move(l), absl::StrCat("x", j)));
          }
          auto v = loss_of(ps).item();
          ASSERT_TRUE(v.ok()) << v.status();
          at[side] = *v;
        }
        double numeric = (at[1] - at[0]) / (2 * h);
        EXPECT_NEAR(analytic[e], numeric, 1e-5 * (1 + std::abs(numeric))) << "element " << e;
      }
    }
  }
}

TEST_F(CoreTest, GradientsAccumulateAndZero) {
  Tensor x = Tensor::from_host(F64({2}, {1, 2}), "x");
  x.requires_grad_();
  ASSERT_TRUE(backward(sum(x * x)).ok());
  ASSERT_TRUE(backward(sum(x)).ok());
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(x.grad()), {3, 5});
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  Tensor y = Tensor::from_host(F64({2}, {1, 2}), "y");
  absl::Status s = backward(sum(y));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("requires a gradient"), std::string::npos) << s;
  x.requires_grad_();
  s = backward(x * x);
  EXPECT_NE(s.message().find("must be a scalar"), std::string::npos) << s;
}

// A value read before backward (a loss logged, an activation's mean) cuts
// the lazy graph, not the gradient's path: the gradients are those of the
// same program without the read, as in PyTorch/XLA. It had made the read
// tensor a leaf: a silently missing gradient, or a refused backward.
TEST_F(CoreTest, AValueReadBeforeBackwardKeepsTheGradients) {
  auto grads = [](int read) {
    Tensor w = Tensor::from_host(F64({2, 2}, {0.5, -1, 2, 0.25}), "w");
    w.requires_grad_();
    Tensor v = Tensor::from_host(F64({2}, {1.5, -0.5}), "v");
    v.requires_grad_();
    Tensor x = Tensor::from_host(F64({3, 2}, {1, 2, 3, 4, 5, 6}), "x");
    Tensor h = tanh(matmul(x, w));
    if (read == 1) EXPECT_TRUE(mean(h).item().ok());  // the activation's mean, logged
    Tensor y = matmul(h, reshape(v, {2, 1}));
    Tensor loss = sum(y * y);
    if (read == 2) EXPECT_TRUE(loss.item().ok());  // the loss, logged before backward
    EXPECT_TRUE(backward(loss).ok());
    EXPECT_TRUE(mark_step().ok());
    std::vector<double> g = Host(w.grad());
    for (double d : Host(v.grad())) g.push_back(d);
    return g;
  };
  const std::vector<double> want = grads(0);
  ASSERT_EQ(want.size(), 6u);
  ExpectNear(grads(1), want, 1e-9);
  ExpectNear(grads(2), want, 1e-9);

  // Backward frees what it went through (retain_graph=False): a second
  // backward through the read value is an error naming it, not a gradient
  // silently missing; one after mark_step keeps no graph (nor old weights).
  Tensor w = Tensor::from_host(F64({2}, {1, 2}), "w");
  w.requires_grad_();
  Tensor h = w * w;
  ASSERT_TRUE(sum(h).item().ok());
  ASSERT_TRUE(backward(sum(h)).ok());
  absl::Status again = backward(sum(h * h));
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find("an earlier backward already used"), std::string::npos) << again;
  EXPECT_NE(again.message().find("core_test.cc"), std::string::npos) << again;
  Tensor loss = sum(w * w);
  ASSERT_TRUE(backward(loss).ok());
  ASSERT_TRUE(mark_step().ok());
  EXPECT_TRUE(loss.node()->grad_through.empty());
}

// ---------------------------------------------------------------- meshes and shardings

TEST_F(CoreTest, MeshCreateErrors) {
  auto count = Mesh::Create({0, 1, 2}, {2, 2}, {"data", "model"});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("holds 4 devices but 3 ids"), std::string::npos) << count.status();
  auto dup = Mesh::Create({0, 1, 1, 2}, {2, 2}, {"data", "model"});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("appears twice"), std::string::npos) << dup.status();
  auto names = Mesh::Create({0, 1, 2, 3}, {2, 2}, {"data", "data"});
  ASSERT_FALSE(names.ok());
  EXPECT_NE(names.status().message().find("axis name appears twice"), std::string::npos) << names.status();
  EXPECT_FALSE(Mesh::Create({0, 1, 2, 3}, {2, 2}, {"data"}).ok());
  EXPECT_FALSE(Mesh::Create({}, {0}, {"data"}).ok());
  auto ok = Mesh::Create({0, 1, 2, 3}, {2, 2}, {"data", "model"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->Describe(), "data (2), model (2)");
}

TEST_F(CoreTest, MeshToSharding) {
  auto mesh = Mesh::Create({0, 1, 2, 3}, {2, 2}, {"data", "model"});
  ASSERT_TRUE(mesh.ok());
  auto dp = mesh->ToSharding({"data", none}, 2);
  ASSERT_TRUE(dp.ok());
  EXPECT_EQ(dp->ToString(), "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  auto mp = mesh->ToSharding({none, "model"}, 2);
  ASSERT_TRUE(mp.ok());
  EXPECT_EQ(mp->ToString(), "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  auto both = mesh->ToSharding({"model", "data"}, 2);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->ToString(), "{devices=[2,2]0,2,1,3}");
  auto by_index = mesh->ToSharding({1, 0}, 2);
  ASSERT_TRUE(by_index.ok());
  EXPECT_EQ(*by_index, *both);
  auto repl = mesh->ToSharding({none, none}, 2);
  ASSERT_TRUE(repl.ok());
  EXPECT_TRUE(repl->IsReplicated());
}

TEST_F(CoreTest, MarkShardingErrorsNameTheTensorAndItsLine) {
  Reinit(4);
  auto mesh = Mesh::Create({0, 1, 2, 3}, {2, 2}, {"data", "model"});
  ASSERT_TRUE(mesh.ok());
  const int made_line = __LINE__ + 1;
  Tensor w = Tensor::from_host(F32({4, 8}, std::vector<float>(32, 1.f)), "w");
  std::string made = absl::StrCat("w was created at ", kFile, ":", made_line);

  absl::Status rank = mark_sharding(w, *mesh, {"data"});
  ASSERT_FALSE(rank.ok());
  EXPECT_EQ(rank.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rank.message().find("spec has 1 entries but the tensor has rank 2"), std::string::npos) << rank;
  EXPECT_NE(rank.message().find(made), std::string::npos) << rank;
  EXPECT_NE(rank.message().find(absl::StrCat("mark_sharding at ", kFile, ":")), std::string::npos) << rank;

  absl::Status unknown = mark_sharding(w, *mesh, {"batch", none});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("'batch'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.message().find(made), std::string::npos) << unknown;
  EXPECT_NE(unknown.message().find("data (2), model (2)"), std::string::npos) << unknown;

  absl::Status twice = mark_sharding(w, *mesh, {"data", "data"});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("used twice"), std::string::npos) << twice;
  EXPECT_NE(twice.message().find(made), std::string::npos) << twice;

  absl::Status index = mark_sharding(w, *mesh, {5, none});
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.message().find(made), std::string::npos) << index;
  absl::Status negative = mark_sharding(w, *mesh, {-1, none});  // not silently "none"
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.message().find("names axis -1"), std::string::npos) << negative;
  absl::Status tuple_twice = mark_sharding(w, *mesh, {axes("data", "model"), "model"});
  ASSERT_FALSE(tuple_twice.ok());
  EXPECT_NE(tuple_twice.message().find("'model' is used twice"), std::string::npos) << tuple_twice;

  auto small = Mesh::Create({0, 1}, {2}, {"data"});
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(mark_sharding(w, *small, {"data", none}).ok());

  // A good annotation after the bad ones works and runs.
  ASSERT_TRUE(mark_sharding(w, *mesh, {"data", "model"}).ok());
  Tensor y = w * w;
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(y), std::vector<double>(32, 1.0));
}

// 3 rows over 2 chips: each holds 2, the second's last one padding; a sum
// over the rows and the values themselves come back as on one chip.
TEST_F(CoreTest, UnevenShardingPadsTheLastShard) {
  Reinit(2);
  auto mesh = Mesh::Create({0, 1}, {2}, {"data"});
  ASSERT_TRUE(mesh.ok());
  Tensor x = Tensor::from_host(F32({3, 2}, {1, 2, 3, 4, 5, 6}), "x");
  ASSERT_TRUE(mark_sharding(x, *mesh, {"data", none}).ok());
  Tensor y = x * x;
  Tensor s = sum(y, {0});
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(y), {1, 4, 9, 16, 25, 36});
  ExpectNear(Host(s), {35, 56});
}

// A tuple entry splits one dim over several mesh axes, the first the most
// major: on a 2x2 (data, model) mesh, dim 0 in four, device (d, m) holding
// block 2d + m; swapped, block 2m + d.
TEST_F(CoreTest, TupleSpecSplitsOneDimOverSeveralAxes) {
  auto mesh = Mesh::Create({0, 1, 2, 3}, {2, 2}, {"data", "model"});
  ASSERT_TRUE(mesh.ok());
  auto s = mesh->ToSharding({axes("data", "model"), none}, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ToString(), "{devices=[4,1]0,1,2,3}");
  auto swapped = mesh->ToSharding({axes("model", "data"), none}, 2);
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(swapped->ToString(), "{devices=[4,1]0,2,1,3}");
  EXPECT_EQ(axes("data", 1).ToString(), "('data', 1)");

  Reinit(4);
  Tensor x = Tensor::from_host(F32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), "x");
  ASSERT_TRUE(mark_sharding(x, *mesh, {axes("model", "data"), none}).ok());
  Tensor y = x * x;
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(y), {1, 4, 9, 16, 25, 36, 49, 64});
}

// Two slices of 2x2 chips side by side along the second axis: a 2x4 mesh
// whose columns 0-1 are slice 0 (ids 0-3) and 2-3 slice 1 (ids 4-7).
TEST_F(CoreTest, HybridMeshKeepsEachSlicesChipsTogether) {
  auto m = HybridMesh({2, 2}, {1, 2}, {"data", "model"});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(m->device_ids(), (std::vector<int64_t>{0, 1, 4, 5, 2, 3, 6, 7}));
  auto rows = HybridMesh({1, 2}, {2, 1}, {"dcn", "ici"});  // slices stacked along the first axis
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->device_ids(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_FALSE(HybridMesh({2}, {1, 2}, {"a"}).ok());
  EXPECT_FALSE(HybridMesh({2, 0}, {1, 2}, {"a", "b"}).ok());
  auto dup = HybridMesh({2, 2}, {1, 1}, {"a", "a"});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("axis name appears twice"), std::string::npos) << dup.status();
}

TEST_F(CoreTest, ClearShardingMakesAValueWholeAgain) {
  Reinit(2);
  auto mesh = Mesh::Create({0, 1}, {2}, {"data"});
  ASSERT_TRUE(mesh.ok());
  Tensor x = Tensor::from_host(F32({4}, {1, 2, 3, 4}), "x");
  ASSERT_TRUE(mark_sharding(x, *mesh, {"data"}).ok());
  Tensor y = x + x;
  ASSERT_TRUE(mark_step().ok());
  EXPECT_EQ(y.node()->data->sharding.ToString(), "{devices=[2]0,1}");
  ASSERT_TRUE(clear_sharding(y).ok());
  EXPECT_TRUE(y.node()->data->sharding.IsReplicated());
  Tensor z = y * y;
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(z), {4, 16, 36, 64});
  // On a value being recorded it drops the constraint.
  Tensor pending = z + z;
  ASSERT_TRUE(mark_sharding(pending, *mesh, {"data"}).ok());
  ASSERT_TRUE(clear_sharding(pending).ok());
  EXPECT_FALSE(pending.node()->annotation.has_value());
  Tensor undefined;
  EXPECT_FALSE(clear_sharding(undefined).ok());
}

// Values (not inputs) of the newest compiled program whose sharding the user fixed.
int AnnotatedValues() {
  auto exes = GetClient().CachedExecutables();
  if (exes.empty()) return -1;
  int n = 0;
  for (const auto& d : exes.back()->sharding.decisions) n += d.source == "annotated";
  return n - static_cast<int>(exes.back()->param_shapes.size());  // the lowering lays out every input
}

// mark_sharding on a value being recorded is a constraint: the partitioner
// keeps it (the value and what follows from it come out split), the result
// is unchanged, and with_gradients gives the value's gradient the same one.
TEST_F(CoreTest, AnnotatingAnIntermediateValueSplitsIt) {
  Reinit(2);
  auto mesh = Mesh::Create({0, 1}, {2}, {"data"});
  ASSERT_TRUE(mesh.ok());
  Tensor x = Tensor::from_host(F32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), "x");  // replicated
  Tensor y = x * x;
  ASSERT_TRUE(mark_sharding(y, *mesh, {"data", none}).ok());
  Tensor z = y + y;
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(z), {2, 8, 18, 32, 50, 72, 98, 128});
  EXPECT_EQ(z.node()->data->sharding.ToString(), "{devices=[2,1]0,1}");
  EXPECT_EQ(AnnotatedValues(), 1);

  Tensor w = Tensor::from_host(F32({2, 2}, {1, 0, 0, 1}), "w");
  w.requires_grad_();
  Tensor h = matmul(x, w);
  ASSERT_TRUE(mark_sharding_with_gradients(h, *mesh, {"data", none}).ok());
  ASSERT_TRUE(backward(sum(h * h)).ok());
  Tensor g = w.grad();
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(g), {2 * (1 + 9 + 25 + 49), 2 * (2 + 12 + 30 + 56), 2 * (2 + 12 + 30 + 56), 2 * (4 + 16 + 36 + 64)});
  EXPECT_EQ(AnnotatedValues(), 2);  // h and its gradient
  EXPECT_FALSE(mark_sharding_with_gradients(x, *mesh, {"data", none}).ok());  // an input: no gradient to fix
}

TEST_F(CoreTest, ReshardingAValueOnTheDevices) {
  Reinit(2);
  auto mesh = Mesh::Create({0, 1}, {2}, {"data"});
  ASSERT_TRUE(mesh.ok());
  Tensor x = Tensor::from_host(F32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), "x");
  ASSERT_TRUE(mark_sharding(x, *mesh, {"data", none}).ok());
  Tensor y = x + x;
  ASSERT_TRUE(mark_step().ok());
  ASSERT_TRUE(mark_sharding(y, *mesh, {none, "data"}).ok());
  Tensor z = y * y;
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(z), {4, 16, 36, 64, 100, 144, 196, 256});
  ExpectNear(Host(y), {2, 4, 6, 8, 10, 12, 14, 16});
}

TEST_F(CoreTest, TensorsOutliveShutdown) {
  Reinit(2);
  auto mesh = Mesh::Create({0, 1}, {2}, {"data"});
  ASSERT_TRUE(mesh.ok());
  Tensor x = Tensor::from_host(F32({4}, {1, 2, 3, 4}), "x");
  ASSERT_TRUE(mark_sharding(x, *mesh, {"data"}).ok());
  Tensor y = x * x;
  ASSERT_TRUE(mark_step().ok());
  Tensor pending = y + y;  // still a pending graph over on-device data
  // The devices go away; the tensors keep their values on the host and can be
  // used after the next Init (their shardings are kept, so on the same number
  // of devices).
  Shutdown();
  EXPECT_FALSE(y.to_host().ok());
  Reinit(2);
  ExpectNear(Host(y), {1, 4, 9, 16});
  Tensor z = Tensor::from_host(F32({4}, {1, 1, 1, 1}), "z");
  Tensor w = y + z;
  ExpectNear(Host(w), {2, 5, 10, 17});
  // A graph still pending at Shutdown was forgotten: a clear error.
  auto lost = pending.to_host();
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(lost.status().message().find("Shutdown"), std::string::npos) << lost.status();
  // Tensors from before do not disturb the new context's bookkeeping when they die.
  Tensor fresh = Tensor::from_host(F32({4}, {1, 2, 3, 4}), "fresh");
  Tensor doubled = fresh + fresh;
  pending = Tensor();
  y = Tensor();
  ExpectNear(Host(doubled), {2, 4, 6, 8});
}

TEST_F(CoreTest, TensorFromBeforeInitDoesNotHideANewOne) {
  Reinit(1);  // a fresh context
  Tensor old_a = Tensor::from_host(F32({2}, {1, 2}), "old_a");
  Tensor old_b = add(old_a, old_a);
  Reinit(1);  // Shutdown and Init again
  Tensor a = Tensor::from_host(F32({2}, {3, 4}), "a");
  Tensor b = add(a, a);
  old_b = Tensor();  // dies in the new context
  old_a = Tensor();
  ExpectNear(Host(b), {6, 8});
}

// ---------------------------------------------------------------- errors from ops

TEST_F(CoreTest, ShapeErrorsSurfaceFromMarkStep) {
  Tensor a = Tensor::from_host(F32({2, 3}, std::vector<float>(6, 1.f)), "a");
  Tensor b = Tensor::from_host(F32({4}, std::vector<float>(4, 1.f)), "b");
  {
    const int line = __LINE__ + 1;
    Tensor bad = add(a, b);
    Tensor worse = exp(bad);  // poisoned by the first error
    EXPECT_FALSE(bad.status().ok());
    absl::Status s = mark_step();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("add"), std::string::npos) << s;
    EXPECT_NE(s.message().find(absl::StrCat(kFile, ":", line)), std::string::npos) << s;
    auto read = worse.to_host();
    ASSERT_FALSE(read.ok());
    EXPECT_NE(read.status().message().find(absl::StrCat(kFile, ":", line)), std::string::npos) << read.status();
  }
  {
    // Operators record the user's line too (through OpArg), not core/ops.h.
    const int line = __LINE__ + 1;
    Tensor bad = a * b;
    absl::Status s = mark_step();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(absl::StrCat(kFile, ":", line)), std::string::npos) << s;
  }
  {
    const int line = __LINE__ + 1;
    Tensor bad = matmul(a, a);
    absl::Status s = mark_step();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("matmul"), std::string::npos) << s;
    EXPECT_NE(s.message().find(absl::StrCat(kFile, ":", line)), std::string::npos) << s;
  }
  {
    const int line = __LINE__ + 1;
    Tensor bad = reshape(a, {4, 2});
    absl::Status s = mark_step();
    EXPECT_NE(s.message().find("reshape"), std::string::npos) << s;
    EXPECT_NE(s.message().find(absl::StrCat(kFile, ":", line)), std::string::npos) << s;
  }
  {
    Tensor bad = transpose(a, {0, 0});
    EXPECT_NE(mark_step().message().find("transpose"), std::string::npos);
    Tensor bad2 = sum(a, {3});
    EXPECT_FALSE(bad2.status().ok());
  }
  {
    Tensor bad = a + Tensor::from_host(Literal(Shape(DType::kF64, {2, 3})));
    EXPECT_NE(mark_step().message().find("element types differ"), std::string::npos);
  }
  // With the bad tensors gone, work goes on.
  Tensor ok = a * a;
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(ok), std::vector<double>(6, 1.0));
}

// ---------------------------------------------------------------- training

// A small MLP trained data parallel on `mesh_shape`; returns the losses.
std::vector<double> TrainMlp(int chips, std::vector<int64_t> mesh_shape, int steps) {
  EXPECT_TRUE(Init({.num_hosts = 1, .chips_per_host = chips}).ok());
  std::vector<int64_t> ids(chips);
  for (int k = 0; k < chips; ++k) ids[k] = k;
  auto mesh = Mesh::Create(ids, mesh_shape, {"data", "model"});
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  std::vector<double> losses;
  {
    nn::Linear l1(12, 16, "l1", 3), l2(16, 4, "l2", 3);
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    std::mt19937_64 rng(11);
    std::normal_distribution<float> n(0.f, 1.f);
    for (int step = 0; step < steps; ++step) {
      std::vector<float> xs(8 * 12);
      std::vector<int32_t> ys(8);
      for (int b = 0; b < 8; ++b) {
        ys[b] = b % 4;
        for (int i = 0; i < 12; ++i) xs[b * 12 + i] = n(rng) + (i % 4 == ys[b] ? 1.5f : 0.f);
      }
      Tensor x = Tensor::from_host(Literal::FromF32({8, 12}, xs), "x");
      Tensor y = Tensor::from_host(Literal::FromI32({8}, ys), "y");
      EXPECT_TRUE(mark_sharding(x, *mesh, {"data", none}).ok());
      EXPECT_TRUE(mark_sharding(y, *mesh, {"data"}).ok());
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      EXPECT_TRUE(backward(loss).ok());
      EXPECT_TRUE(opt.step().ok());
      absl::Status s = mark_step();
      EXPECT_TRUE(s.ok()) << s;
      auto v = loss.item();
      EXPECT_TRUE(v.ok()) << v.status();
      losses.push_back(v.ok() ? *v : NAN);
    }
  }
  Shutdown();
  return losses;
}

TEST_F(CoreTest, DataParallelTrainingMatchesOneDevice) {
  Shutdown();
  std::vector<double> one = TrainMlp(1, {1, 1}, 6);
  std::vector<double> four = TrainMlp(4, {2, 2}, 6);
  ASSERT_EQ(one.size(), four.size());
  for (size_t k = 0; k < one.size(); ++k)
    EXPECT_NEAR(four[k], one[k], 1e-4 * std::abs(one[k])) << "step " << k;
  EXPECT_LT(one.back(), one.front());  // it learns
  Reinit(1);
}

// ---------------------------------------------------------------- recompilation causes

class CompileRecorder : public trace::Recorder {
 public:
  using trace::Recorder::Record;
  void Record(const trace::CompilationRecord& c) override { compiles.push_back(c); }
  std::vector<trace::CompilationRecord> compiles;
};

class RecompileTest : public CoreTest {
 protected:
  void SetUp() override {
    trace::SetRecorder(&rec_);
    CoreTest::SetUp();
  }
  void TearDown() override {
    CoreTest::TearDown();
    trace::SetRecorder(nullptr);
  }
  std::vector<trace::CompilationRecord> Misses() const {
    std::vector<trace::CompilationRecord> out;
    for (const auto& c : rec_.compiles)
      if (c.cache == "miss") out.push_back(c);
    return out;
  }
  CompileRecorder rec_;
};

int g_input_line = 0, g_shard_line = 0;

// One training-like step from one call site: its input made at g_input_line.
absl::Status Step(std::vector<int64_t> dims, DType dtype = DType::kF32, const Mesh* mesh = nullptr,
                  std::vector<AxisSpec> spec = {}) {
  Literal v(Shape(dtype, dims));
  for (int64_t k = 0; k < v.elements(); ++k) v.SetDouble(k, 0.01 * static_cast<double>(k));
  g_input_line = __LINE__ + 1;
  Tensor x = Tensor::from_host(std::move(v), "x");
  if (mesh) {
    g_shard_line = __LINE__ + 1;
    if (absl::Status s = mark_sharding(x, *mesh, spec); !s.ok()) return s;
  }
  Tensor y = sum(exp(x) * x, {1});
  return mark_step();
}

// The call site is the mark_step line plus the user's stack, so a training
// loop calls Step from one line; these tests do the same.
struct StepArgs {
  std::vector<int64_t> dims;
  DType dtype = DType::kF32;
  std::vector<AxisSpec> spec;
};
absl::Status Steps(const std::vector<StepArgs>& steps, const Mesh* mesh = nullptr) {
  for (const StepArgs& a : steps)
    if (absl::Status s = Step(a.dims, a.dtype, mesh, a.spec); !s.ok()) return s;
  return absl::OkStatus();
}

TEST_F(RecompileTest, FirstCompileThenHitsForNewDataOfTheSameShape) {
  ASSERT_TRUE(Steps({{{4, 3}}, {{4, 3}}, {{4, 3}}, {{4, 3}}}).ok());
  ASSERT_EQ(rec_.compiles.size(), 4u);
  EXPECT_EQ(rec_.compiles[0].cache, "miss");
  EXPECT_EQ(rec_.compiles[0].cause_kind, "first_compile");
  EXPECT_EQ(rec_.compiles[0].source_file, kFile);
  for (int k = 1; k < 4; ++k) {
    EXPECT_EQ(rec_.compiles[k].cache, "memory_hit") << k;
    EXPECT_EQ(rec_.compiles[k].graph_id, rec_.compiles[0].graph_id);
  }
}

TEST_F(RecompileTest, InputShapeChanged) {
  ASSERT_TRUE(Steps({{{4, 3}}, {{4, 3}}, {{8, 3}}}).ok());
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[1].cause_kind, "input_shape_changed");
  EXPECT_NE(misses[1].cause_detail.find("x"), std::string::npos) << misses[1].cause_detail;
  EXPECT_NE(misses[1].cause_detail.find("f32[4,3] -> f32[8,3]"), std::string::npos) << misses[1].cause_detail;
  EXPECT_EQ(misses[1].source_file, kFile);
  EXPECT_EQ(misses[1].source_line, g_input_line);
  EXPECT_EQ(misses[1].prev_graph_id, misses[0].graph_id);
  // Back to the first shape: a hit, no new cause.
  ASSERT_TRUE(Steps({{{4, 3}}}).ok());
  EXPECT_EQ(Misses().size(), 2u);
  EXPECT_EQ(rec_.compiles.back().cache, "memory_hit");
}

int g_scalar_line = 0, g_branch_line = 0;

// A step whose scalar is 0 or 1 (inlined into the graph by the scalar rule),
// or whose op depends on a host-side flag (a branch).
absl::Status ScalarStep(double s) {
  Tensor x = Tensor::from_host(Literal::FromF32({4, 3}, std::vector<float>(12, 0.5f)), "x");
  g_scalar_line = __LINE__ + 1;
  Tensor y = add(x, s);
  return mark_step();
}
absl::Status BranchStep(bool flag) {
  Tensor x = Tensor::from_host(Literal::FromF32({4, 3}, std::vector<float>(12, 0.5f)), "x");
  g_branch_line = __LINE__ + 1;
  Tensor y = flag ? exp(x) : tanh(x);
  return mark_step();
}

int g_window_line = 0, g_reshape_line = 0;

// A slice window and a reshape taken from host integers (a crop that moves,
// heads that regroup): the structural diff leaves out what follows from
// shapes, so these read "differs only in what the comparison does not cover",
// or blamed the mean after a narrower slice. The op and its line are named.
absl::Status WindowStep(int64_t start, int64_t width, std::vector<int64_t> regroup) {
  Tensor x = Tensor::from_host(Literal::FromF32({4, 8}, std::vector<float>(32, 0.5f)), "x");
  g_window_line = __LINE__ + 1;
  Tensor w = slice(x, 1, start, start + width);
  g_reshape_line = __LINE__ + 1;
  Tensor r = reshape(x, regroup);
  Tensor y = mean(w) + sum(exp(r));
  return mark_step();
}

TEST_F(RecompileTest, ASliceWindowOrReshapeThatMovesIsNamedAtItsLine) {
  struct Args {
    int64_t start, width;
    std::vector<int64_t> regroup;
  };
  for (const Args& a : std::vector<Args>{{0, 4, {4, 2, 4}},
                                         {1, 4, {4, 2, 4}},    // the window moves: the same shapes
                                         {1, 3, {4, 2, 4}},    // narrower: the mean's divisor follows
                                         {1, 3, {4, 4, 2}}}) {  // regrouped
    ASSERT_TRUE(WindowStep(a.start, a.width, a.regroup).ok());  // one call site, as a training loop
  }
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 4u);
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_EQ(misses[k].cause_kind, "graph_changed") << misses[k].cause_detail;
    EXPECT_EQ(misses[k].cause_subkind, "dims_changed") << misses[k].cause_detail;
  }
  EXPECT_EQ(misses[1].source_line, g_window_line) << misses[1].cause_detail;
  EXPECT_NE(misses[1].cause_detail.find("slice at "), std::string::npos) << misses[1].cause_detail;
  EXPECT_NE(misses[1].cause_detail.find("[0:4:1, 0:4:1] -> [0:4:1, 1:5:1]"), std::string::npos)
      << misses[1].cause_detail;
  EXPECT_EQ(misses[2].source_line, g_window_line) << misses[2].cause_detail;
  EXPECT_NE(misses[2].cause_detail.find("[0:4:1, 1:5:1] -> [0:4:1, 1:4:1]"), std::string::npos)
      << misses[2].cause_detail;
  EXPECT_EQ(misses[3].source_line, g_reshape_line) << misses[3].cause_detail;
  EXPECT_NE(misses[3].cause_detail.find("f32[4,2,4] -> f32[4,4,2]"), std::string::npos) << misses[3].cause_detail;
}

TEST_F(RecompileTest, InlinedScalarChanged) {
  for (double s : {0.0, 1.0})
    ASSERT_TRUE(ScalarStep(s).ok());
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[1].cause_kind, "inlined_scalar_changed");
  EXPECT_NE(misses[1].cause_detail.find("from 0 to 1"), std::string::npos) << misses[1].cause_detail;
  EXPECT_EQ(misses[1].source_line, g_scalar_line);
  // Any other value is data: 0.25, 0.5 and 0.75 share one graph.
  for (double s : {0.25, 0.5, 0.75})
    ASSERT_TRUE(ScalarStep(s).ok());
  EXPECT_EQ(Misses().size(), 3u);
}

TEST_F(RecompileTest, GraphChangedNamesTheFirstDifferingOp) {
  for (bool flag : {true, false})
    ASSERT_TRUE(BranchStep(flag).ok());
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[1].cause_kind, "graph_changed");
  EXPECT_EQ(misses[1].cause_subkind, "ops_changed");
  EXPECT_NE(misses[1].cause_detail.find(absl::StrCat("first: tanh at ", kFile, ":", g_branch_line, " (was exponential)")),
            std::string::npos)
      << misses[1].cause_detail;
  EXPECT_EQ(misses[1].source_line, g_branch_line);
  // Aligned, not positional: exactly that op, made by the same line, changed.
  ASSERT_EQ(misses[1].diff.size(), 1u);
  EXPECT_EQ(misses[1].diff[0].change, "changed");
  EXPECT_EQ(misses[1].diff[0].what, "opcode");
  EXPECT_EQ(misses[1].diff[0].opcode, "stablehlo.tanh");
}

// nonzero's count follows the values: a graph using it recompiles when the
// count changes, diagnosed as data_dependent_shape at the nonzero line.
int g_nonzero_line = 0;
absl::Status NonzeroStep(std::vector<float> mask) {
  Tensor m = Tensor::from_host(Literal::FromF32({4}, mask), "mask");
  g_nonzero_line = __LINE__ + 1;
  auto idx = nonzero(m);
  if (!idx.ok()) return idx.status();
  Tensor y = sum(convert(*idx, DType::kF32));
  return mark_step();
}

TEST_F(RecompileTest, DataDependentShape) {
  for (auto mask : {std::vector<float>{1, 0, 1, 0}, std::vector<float>{0, 1, 0, 1}, std::vector<float>{1, 1, 1, 0}})
    ASSERT_TRUE(NonzeroStep(mask).ok());
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);  // two nonzeros twice: one graph; three: another
  EXPECT_EQ(misses[1].cause_kind, "data_dependent_shape");
  EXPECT_NE(misses[1].cause_detail.find("i32[2,1] -> i32[3,1]"), std::string::npos) << misses[1].cause_detail;
  EXPECT_NE(misses[1].cause_detail.find(absl::StrCat("nonzero at ", kFile, ":", g_nonzero_line)), std::string::npos)
      << misses[1].cause_detail;
  EXPECT_EQ(misses[1].source_line, g_nonzero_line);
}

TEST_F(RecompileTest, InputDtypeChanged) {
  ASSERT_TRUE(Steps({{{4, 3}}, {{4, 3}, DType::kF64}}).ok());
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[1].cause_kind, "input_dtype_changed");
  EXPECT_NE(misses[1].cause_detail.find("f32[4,3] -> f64[4,3]"), std::string::npos) << misses[1].cause_detail;
  EXPECT_EQ(misses[1].source_line, g_input_line);
}

TEST_F(RecompileTest, InputShardingChanged) {
  Reinit(2);
  auto mesh = Mesh::Create({0, 1}, {2}, {"data"});
  ASSERT_TRUE(mesh.ok());
  ASSERT_TRUE(Steps({{{4, 6}, DType::kF32, {none, none}},
                     {{4, 6}, DType::kF32, {"data", none}},
                     {{4, 6}, DType::kF32, {"data", none}}},
                    &*mesh)
                  .ok());
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[1].cause_kind, "input_sharding_changed");
  EXPECT_NE(misses[1].cause_detail.find("{replicated} -> {devices=[2,1]0,1}"), std::string::npos)
      << misses[1].cause_detail;
  // A layout's cause is the mark_sharding that set it, not where the tensor was made.
  EXPECT_EQ(misses[1].source_line, g_shard_line);
}

TEST_F(RecompileTest, SameGraphFromAnotherLineDoesNotRecompile) {
  Literal v = F32({2, 2}, {1, 2, 3, 4});
  Tensor a = Tensor::from_host(v, "a");
  Tensor ra = exp(a) + a;
  ASSERT_TRUE(mark_step().ok());
  Tensor b = Tensor::from_host(v, "b");
  Tensor rb = exp(b) + b;
  ASSERT_TRUE(mark_step().ok());
  ASSERT_EQ(rec_.compiles.size(), 2u);
  EXPECT_EQ(rec_.compiles[0].cache, "miss");
  EXPECT_EQ(rec_.compiles[1].cache, "memory_hit");
  EXPECT_EQ(rec_.compiles[1].graph_id, rec_.compiles[0].graph_id);
  ExpectNear(Host(rb), Host(ra));
}

// The same step with its independent lines in the opposite order: u = exp(x)
// and v = tanh(x) (different ops), exps of inputs of different shapes, and
// x - y. The lowering is canonical: one compilation, the second order a cache
// hit, every tensor its own value.
struct Ordered {
  Tensor u, v, w, a, b;
};
Ordered OrderedStep(bool swap) {
  Tensor x = Tensor::from_host(F32({2, 2}, {0.5f, 1, 1.5f, 2}), "x");
  Tensor y = Tensor::from_host(F32({2, 2}, {-1, 0, 1, 3}), "y");
  Tensor p = Tensor::from_host(F32({4}, {1, 2, 3, 4}), "p");
  Tensor q = Tensor::from_host(F32({2}, {5, 6}), "q");
  Ordered o;
  if (!swap) {
    o.u = exp(x);
    o.v = tanh(x);
    o.a = exp(p);
    o.b = exp(q);
    o.w = x - y;
  } else {
    o.w = x - y;
    o.b = exp(q);
    o.a = exp(p);
    o.v = tanh(x);
    o.u = exp(x);
  }
  EXPECT_TRUE(mark_step().ok());
  return o;
}

TEST_F(RecompileTest, SameGraphBuiltInAnotherOrderDoesNotRecompile) {
  std::vector<Ordered> steps;
  for (bool swap : {false, true}) steps.push_back(OrderedStep(swap));
  ASSERT_EQ(rec_.compiles.size(), 2u);
  EXPECT_EQ(Misses().size(), 1u);
  EXPECT_EQ(rec_.compiles[1].cache, "memory_hit");
  EXPECT_EQ(rec_.compiles[1].graph_id, rec_.compiles[0].graph_id);
  for (const Ordered& o : steps) {
    ExpectNear(Host(o.u), {std::exp(0.5), std::exp(1.0), std::exp(1.5), std::exp(2.0)});
    ExpectNear(Host(o.v), {std::tanh(0.5), std::tanh(1.0), std::tanh(1.5), std::tanh(2.0)});
    ExpectNear(Host(o.w), {1.5, 1, 0.5, -1});
    ExpectNear(Host(o.a), {std::exp(1.0), std::exp(2.0), std::exp(3.0), std::exp(4.0)}, 1e-4);
    ExpectNear(Host(o.b), {std::exp(5.0), std::exp(6.0)}, 1e-3);
  }
}

// exp(x) and exp(y) of one shape: equal subgraphs, ordered by how x and y are
// used elsewhere (x - y reads x first), whichever the user made first.
TEST_F(RecompileTest, EqualSubgraphsOrderedByHowTheirInputsAreUsed) {
  std::vector<std::vector<Tensor>> steps;
  for (bool swap : {false, true}) {
    Tensor x = Tensor::from_host(F32({3}, {1, 2, 3}), "x");
    Tensor y = Tensor::from_host(F32({3}, {0, -1, -2}), "y");
    Tensor ex, ey;
    if (swap)
      ey = exp(y), ex = exp(x);
    else
      ex = exp(x), ey = exp(y);
    Tensor d = x - y;
    ASSERT_TRUE(mark_step().ok());
    steps.push_back({ex, ey, d});
  }
  EXPECT_EQ(Misses().size(), 1u);
  for (const auto& t : steps) {
    ExpectNear(Host(t[0]), {std::exp(1.0), std::exp(2.0), std::exp(3.0)}, 1e-4);
    ExpectNear(Host(t[1]), {1, std::exp(-1.0), std::exp(-2.0)});
    ExpectNear(Host(t[2]), {1, 3, 5});
  }
}

// A value read right after mark_step (the loss logged after the step) is the
// step that computed it: after the last step it made a "read value" slice
// of a step that never ran. One read once the next step has traced is that step's.
class HostSliceRecorder : public trace::Recorder {
 public:
  using trace::Recorder::Record;
  void Record(const trace::SliceRecord& s) override {
    if (s.name == "read value") read_steps.push_back(s.step);
  }
  std::vector<int> read_steps;
};

TEST(ValueReadStep, AReadAfterMarkStepIsTheStepThatComputedIt) {
  HostSliceRecorder rec;
  trace::SetRecorder(&rec);
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  Tensor w = Tensor::from_host(F32({2}, {1, 2}), "w");
  for (int step = 0; step < 3; ++step) {
    Tensor loss = sum(w * w);
    ASSERT_TRUE(mark_step().ok());
    ASSERT_TRUE(loss.item().ok());  // after the step
  }
  Tensor late = sum(w);
  Tensor next = w * w;  // the next step has begun tracing
  ASSERT_TRUE(mark_step().ok());
  Tensor more = w + w;
  ASSERT_TRUE(late.item().ok());
  Shutdown();
  trace::SetRecorder(nullptr);
  EXPECT_EQ(rec.read_steps, (std::vector<int>{0, 1, 2, 4}));
}

TEST_F(RecompileTest, ValueReadAndNothingPending) {
  ASSERT_TRUE(mark_step().ok());  // nothing pending: no graph
  EXPECT_TRUE(rec_.compiles.empty());
  Tensor a = Tensor::from_host(F32({2}, {1, 2}), "a");
  Tensor r = a * a;
  ExpectNear(Host(r), {1, 4});
  ASSERT_EQ(rec_.compiles.size(), 1u);
  EXPECT_EQ(rec_.compiles[0].cause_kind, "value_read_cut");
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// The per-op counters: each op node the frontend traced counts once under its
// opcode (a tensor made again on the same node does not), sampled at every
// mark_step as "TracedOp:<opcode>" when it moved; the last sample is the total.
class CounterRecorder : public trace::Recorder {
 public:
  using trace::Recorder::Record;
  void Record(const trace::CounterRecord& c) override { last[c.name] = {c.value, ++samples[c.name]}; }
  std::map<std::string, std::pair<double, int>> last;  // name -> (last value, samples)
  std::map<std::string, int> samples;
};

TEST(TracedOpCounters, CountEachOpKindTracedPerRun) {
  CounterRecorder rec;
  trace::SetRecorder(&rec);
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  for (int step = 0; step < 3; ++step) {
    Tensor x = Tensor::from_host(F32({2}, {1, 2}), "x");
    x.requires_grad_();
    Tensor y = exp(x) + exp(x) * x;
    if (step == 0) Tensor t = tanh(y);
    Tensor same = stop_gradient(y);  // a new tensor on a copy of y's node: no new op
    ASSERT_TRUE(mark_step().ok());
  }
  Shutdown();
  trace::SetRecorder(nullptr);
  EXPECT_EQ(rec.last["TracedOp:stablehlo.exponential"], (std::pair<double, int>{6, 3}));
  EXPECT_EQ(rec.last["TracedOp:stablehlo.add"], (std::pair<double, int>{3, 3}));
  EXPECT_EQ(rec.last["TracedOp:stablehlo.multiply"], (std::pair<double, int>{3, 3}));
  // Sampled once: it never moved after step 0.
  EXPECT_EQ(rec.last["TracedOp:stablehlo.tanh"], (std::pair<double, int>{1, 1}));
  EXPECT_EQ(rec.last.count("TracedOp:parameter"), 0u);  // data is not an op
}

// A learning rate that warms up from 0 and decays changes every step, yet the
// training step compiles once: the optimizer passes the rate as data.
TEST_F(RecompileTest, ChangingLearningRateNeverRecompiles) {
  nn::Linear l(3, 2, "l");
  optim::SGD opt(parameters(l), {.lr = 0});
  optim::WarmupCosine sched{.peak = 0.5, .warmup_steps = 3, .total_steps = 8};
  std::vector<double> rates;
  for (int step = 0; step < 8; ++step) {
    opt.set_lr(sched.at(step));
    rates.push_back(opt.lr());
    Tensor x = Tensor::from_host(Literal::FromF32({4, 3}, std::vector<float>(12, 0.5f)), "x");
    ASSERT_TRUE(backward(sum(l(x))).ok());
    ASSERT_TRUE(opt.step().ok());
    ASSERT_TRUE(mark_step().ok());
  }
  EXPECT_EQ(Misses().size(), 1u);
  EXPECT_NEAR(rates[0], 0.125, 1e-12);  // warmup
  EXPECT_NEAR(rates[3], 0.5, 1e-12);    // peak
  EXPECT_NEAR(rates[7], 0.5 * 0.5 * (1 + std::cos(M_PI * 4 / 5.0)), 1e-12);
  for (size_t k = 4; k < rates.size(); ++k) EXPECT_LT(rates[k], rates[k - 1]);  // decays
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

TEST_F(CoreTest, AdamWFirstStepMovesBySignOfTheGradient) {
  Tensor p = Tensor::from_host(Literal::FromF32({3}, {0.5f, -2.f, 1.f}), "p");
  p.requires_grad_();
  optim::AdamW opt({&p}, {.lr = 0.1, .weight_decay = 0.5});
  ASSERT_TRUE(backward(sum(mul(p, p))).ok());
  ASSERT_TRUE(opt.step().ok());
  ASSERT_TRUE(mark_step().ok());
  // t=1: the bias-corrected update is g / (|g| + eps) = sign(g); decay scales p first.
  std::vector<double> want = {0.5 * 0.95 - 0.1, -2 * 0.95 + 0.1, 1 * 0.95 - 0.1};
  ExpectNear(Host(p), want, 1e-5);
  ASSERT_EQ(opt.state().size(), 2u);
  EXPECT_EQ(opt.state()[0]->name(), "adamw.m.p");
  ExpectNear(Host(*opt.state()[0]), {0.1, -0.4, 0.2}, 1e-6);  // (1 - beta1) g
}

TEST_F(CoreTest, ClipGradNormScalesWithoutAHostRead) {
  Tensor a = Tensor::from_host(Literal::FromF32({2}, {3.f, 0.f}), "a");
  Tensor b = Tensor::from_host(Literal::FromF32({1}, {4.f}), "b");
  a.requires_grad_();
  b.requires_grad_();
  // Gradients (3, 0) and (4): global norm 5.
  ASSERT_TRUE(backward(add(sum(mul(a, Tensor::from_host(Literal::FromF32({2}, {3.f, 0.f})))),
                           sum(mul(b, Tensor::from_host(Literal::FromF32({1}, {4.f})))))).ok());
  Tensor norm = optim::clip_grad_norm({&a, &b}, 1.0);
  EXPECT_FALSE(norm.node()->is_data());  // still lazy: nothing was read
  ASSERT_TRUE(mark_step().ok());
  ExpectNear(Host(norm), {5}, 1e-5);
  ExpectNear(Host(a.grad()), {0.6, 0}, 1e-5);
  ExpectNear(Host(b.grad()), {0.8}, 1e-5);
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// A causal attention block: position t sees only positions <= t, so the
// output at t does not depend on later inputs (its gradient there is zero).
TEST_F(CoreTest, CausalAttentionIgnoresTheFuture) {
  nn::MultiHeadAttention attn(8, 2, "attn");
  Literal xs(Shape(DType::kF32, {1, 4, 8}));
  for (int64_t k = 0; k < xs.elements(); ++k) xs.as<float>()[k] = 0.1f * static_cast<float>(k % 7) - 0.3f;
  Tensor x = Tensor::from_host(xs, "x");
  x.requires_grad_();
  Tensor y = attn(x);
  ASSERT_EQ(y.shape().dims, (std::vector<int64_t>{1, 4, 8}));
  // d sum(y[:, 1, :]) / dx: zero at positions 2 and 3.
  ASSERT_TRUE(backward(sum(slice(y, 1, 1, 2))).ok());
  ASSERT_TRUE(mark_step().ok());
  auto g = x.grad().to_host();
  ASSERT_TRUE(g.ok());
  double before = 0, after = 0;
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t d = 0; d < 8; ++d) (t <= 1 ? before : after) += std::abs(g->GetDouble(t * 8 + d));
  EXPECT_GT(before, 1e-6);
  EXPECT_EQ(after, 0.0);
  EXPECT_EQ(attn.parameters().size(), 8u);
  nn::SwiGLU mlp(8, 16, "mlp");
  EXPECT_EQ(mlp(x).shape().dims, (std::vector<int64_t>{1, 4, 8}));
}

// A second loop's step function (fine-tuning at another batch size): the
// same ops, its own mark_step line.
absl::Status FineTuneStep(std::vector<int64_t> dims) {
  Literal v(Shape(DType::kF32, dims));
  for (int64_t k = 0; k < v.elements(); ++k) v.SetDouble(k, 0.01 * static_cast<double>(k));
  Tensor x = Tensor::from_host(std::move(v), "x");
  Tensor y = sum(exp(x) * x, {1});
  return mark_step();
}

// A second loop with its own step function has its own call site: its first
// graph is a first compile, said with the graph it would have shared at one
// shape.
TEST_F(RecompileTest, ASecondLoopAtAnotherBatchSizeNamesTheFirstLoopsGraph) {
  ASSERT_TRUE(Step({16, 3}).ok());         // the first loop
  ASSERT_TRUE(FineTuneStep({8, 3}).ok());  // the second
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[1].cause_kind, "first_compile");
  EXPECT_NE(misses[1].cause_detail.find(absl::StrCat("graph ", misses[0].graph_id, " (")), std::string::npos)
      << misses[1].cause_detail;
  EXPECT_NE(misses[1].cause_detail.find("is this graph at other input shapes: x f32[16,3] -> f32[8,3]"),
            std::string::npos)
      << misses[1].cause_detail;
}

// One step function called from two lines of a function is one call site
// (the stack reads the same): the second shape is a recompilation with its
// cause, not a first compile.
TEST_F(RecompileTest, OneStepFunctionCalledFromTwoLinesIsOneCallSite) {
  ASSERT_TRUE(Step({16, 3}).ok());
  ASSERT_TRUE(Step({8, 3}).ok());  // from another line
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[1].cause_kind, "input_shape_changed") << misses[1].cause_detail;
  EXPECT_EQ(misses[1].source_line, g_input_line);
}

int g_backward_line = 0, g_update_line = 0;

// Gradient accumulation: the optimizer steps every other micro-step. The
// graph that updates adds ops at the update's line and, at backward's, the
// adds of the gradients carried in from the step before: the update on some
// steps only, at the update's line (it read "first: added add" at
// backward's only, then ops_changed counted by line).
absl::Status AccumulationStep(nn::Linear& l, optim::SGD& opt, bool update) {
  Tensor x = Tensor::from_host(Literal::FromF32({4, 3}, std::vector<float>(12, 0.5f)), "x");
  g_backward_line = __LINE__ + 1;
  if (absl::Status s = backward(sum(l(x))); !s.ok()) return s;
  g_update_line = __LINE__ + 1;
  if (update) if (absl::Status s = opt.step(); !s.ok()) return s;
  return mark_step();
}

TEST_F(RecompileTest, AccumulatedGradientsAddedWhereTheUpdateRunsAreTheUpdateOnSomeSteps) {
  nn::Linear l(3, 2, "l");
  optim::SGD opt(parameters(l), {.lr = 0.1});
  for (int step = 0; step < 4; ++step) ASSERT_TRUE(AccumulationStep(l, opt, step % 2 == 1).ok());
  auto misses = Misses();
  ASSERT_EQ(misses.size(), 2u);
  const std::string& d = misses[1].cause_detail;
  EXPECT_EQ(misses[1].cause_kind, "graph_changed") << d;
  EXPECT_EQ(misses[1].cause_subkind, "optimizer_on_some_steps") << d;
  EXPECT_EQ(misses[1].source_line, g_update_line) << d;
  EXPECT_NE(d.find("earlier gradients carried in and added"), std::string::npos) << d;
  EXPECT_LE(d.size(), 240u) << d;
}

// Accumulation with zero_grad: the graph that applies the update differs from
// the one before it by the whole update only. It was "the optimizer changed:
// create it once before the loop", which the program already does.
TEST_F(RecompileTest, AnUpdateOnSomeStepsIsNotANewOptimizer) {
  nn::Linear l(3, 2, "l");
  std::vector<Tensor*> params = parameters(l);
  optim::SGD opt(params, {.lr = 0.1});
  for (int micro = 0; micro < 6; ++micro) {
    if (micro % 3 == 0)
      for (Tensor* p : params) p->zero_grad();
    Tensor x = Tensor::from_host(Literal::FromF32({4, 3}, std::vector<float>(12, 0.5f)), "x");
    ASSERT_TRUE(backward(sum(l(x))).ok());
    if (micro % 3 == 2) ASSERT_TRUE(opt.step().ok());
    ASSERT_TRUE(mark_step().ok());
  }
  bool said = false;
  for (const auto& m : Misses()) {
    EXPECT_NE(m.cause_subkind, "optimizer_changed") << m.cause_detail;
    said |= m.cause_subkind == "optimizer_on_some_steps" &&
            m.cause_detail.find("it steps on some steps only (gradient accumulation)") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

// A training step, then an evaluation (no backward, no update, dropout off):
// the second graph lacks the update and backward's ops; the Dropout layer was
// not "removed". The by-line count names the lines the ops came from.
TEST_F(RecompileTest, AnEvaluationStepIsNotALayerRemoved) {
  nn::Linear l(3, 2, "l");
  nn::Dropout drop(0.5, "drop");
  std::vector<Tensor*> params = parameters(l);
  optim::SGD opt(params, {.lr = 0.1});
  for (int step = 0; step < 2; ++step) {
    const bool train = step == 0;
    drop.training = train;
    Tensor x = Tensor::from_host(Literal::FromF32({4, 3}, std::vector<float>(12, 0.5f)), "x");
    Tensor loss = sum(drop(l(x)));
    if (train) {
      ASSERT_TRUE(backward(loss).ok());
      ASSERT_TRUE(opt.step().ok());
    }
    ASSERT_TRUE(mark_step().ok());
  }
  ASSERT_EQ(Misses().size(), 2u);
  const trace::CompilationRecord eval = Misses()[1];
  EXPECT_EQ(eval.cause_subkind, "ops_changed") << eval.cause_detail;
  EXPECT_EQ(eval.cause_detail.find("layer 'drop'"), std::string::npos) << eval.cause_detail;
  EXPECT_NE(eval.cause_detail.find("by line: "), std::string::npos) << eval.cause_detail;
}

// A second mark_step in a row has nothing to run: it ends no step (it made a
// step row of a few us, and the real steps' losses every other number).
// Reading or cutting with no context (after Recording::Finish) says so, at the line.
TEST(NoContext, ReadsAndMarkStepsSayNoRecordingIsOpen) {
  Shutdown();
  Tensor x = Tensor::from_host(F32({2}, {1, 2}), "x");
  Tensor y = x * x;
  auto v = y.to_host();
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("no recording is open"), std::string::npos) << v.status();
  EXPECT_NE(v.status().message().find("core_test.cc:"), std::string::npos) << v.status();
  absl::Status s = mark_step();
  EXPECT_NE(s.message().find("mark_step at "), std::string::npos) << s;
  EXPECT_NE(s.message().find("no recording is open"), std::string::npos) << s;
}

TEST_F(CoreTest, AnEmptyMarkStepEndsNoStep) {
  const int first = current_step();
  for (int k = 0; k < 3; ++k) {
    Tensor x = Tensor::from_host(F32({2}, {1, 2}), "x");
    Tensor y = x * x;
    ASSERT_TRUE(mark_step().ok());
    ASSERT_TRUE(mark_step().ok());  // nothing pending
  }
  EXPECT_EQ(current_step(), first + 3);
  // A step whose work a value read already ran still ends at its mark_step.
  Tensor x = Tensor::from_host(F32({2}, {1, 2}), "x");
  Tensor y = sum(x * x);
  ASSERT_TRUE(y.item().ok());
  ASSERT_TRUE(mark_step().ok());
  EXPECT_EQ(current_step(), first + 4);
}

// Dropout's p annealed every step: its keep threshold and scale are data,
// as the scalar rule says, so the step compiles once (they were constants and
// it recompiled every step, blamed as ops_changed).
TEST_F(RecompileTest, ChangingDropoutProbabilityNeverRecompiles) {
  Generator gen(3, "g");
  std::vector<double> kept;
  for (int step = 0; step < 5; ++step) {
    const double p = 0.1 + 0.1 * step;
    Tensor x = Tensor::from_host(Literal::FromF32({64}, std::vector<float>(64, 1.0f)), "x");
    Tensor y = dropout(x, p, /*training=*/true, gen);
    ASSERT_TRUE(mark_step().ok());
    auto v = y.to_host();
    ASSERT_TRUE(v.ok()) << v.status();
    int nonzero = 0;
    for (int64_t k = 0; k < 64; ++k) {
      const double e = v->GetDouble(k);
      if (e != 0) {
        ++nonzero;
        EXPECT_NEAR(e, 1.0 / (1.0 - p), 1e-6);  // the kept ones are scaled by this step's p
      }
    }
    kept.push_back(nonzero);
  }
  EXPECT_EQ(Misses().size(), 1u);
  EXPECT_GT(kept.front(), kept.back());  // more dropped as p grows
}

// A model built before Init (before Recording::Start, the common order)
// was never cut: each step's graph replayed every earlier update (13, 37,
// 61, ... ops) and recompiled, blamed on the backward line. Its tensors are
// adopted by Init now; so are the values a model keeps across a Shutdown.
// A call site names the user's functions, also those dladdr cannot see (a
// static function, one in an anonymous namespace): from the symbol table.
__attribute__((noinline)) int StaticHelperForTheCallSite(int x) { return x * 3 + 1; }

TEST(CallSiteNames, AStaticFunctionIsNamedFromTheSymbolTable) {
  EXPECT_EQ(StaticHelperForTheCallSite(2), 7);
  // As a return address inside it would be.
  void* inside = reinterpret_cast<char*>(&StaticHelperForTheCallSite) + 1;
  EXPECT_EQ(internal::FunctionName(inside), "shardscope::StaticHelperForTheCallSite");
  EXPECT_EQ(internal::FunctionName(nullptr), "");
}

TEST(CallSiteNames, NamesAreShortened) {
  EXPECT_EQ(internal::ShortFunctionName("(anonymous namespace)::TrainStep(shardscope::nn::Linear&, int)"),
            "TrainStep");
  EXPECT_EQ(internal::ShortFunctionName("main::{lambda(int, float)#2}::operator()(int, float) const"),
            "main::{lambda#2}");
  EXPECT_EQ(internal::ShortFunctionName("shardscope::samples::RunCnn(shardscope::samples::Options const&)"),
            "shardscope::samples::RunCnn");
  EXPECT_EQ(internal::ShortFunctionName("Trainer::Step()"), "Trainer::Step");
  EXPECT_EQ(internal::ShortFunctionName("Suite_Test::TestBody()::{lambda(int)#1}::operator()(int) const"),
            "Suite_Test::TestBody::{lambda#1}");
  EXPECT_EQ(internal::ShortFunctionName("Loop::Run(int) const::{lambda()#3}::operator()() const"),
            "Loop::Run::{lambda#3}");
  EXPECT_EQ(internal::ShortFunctionName("Trainer::operator()(int)"), "Trainer::operator()");
  EXPECT_EQ(internal::ShortFunctionName("Trainer::operator()(int)::{lambda()#1}::operator()() const"),
            "Trainer::operator()::{lambda#1}");
  EXPECT_EQ(internal::ShortFunctionName("void Apply<void (*)(int)>(void (*)(int))"), "Apply<void (*)(int)>");
  EXPECT_EQ(internal::ShortFunctionName("void shardscope::internal::F<int>(int)"), "shardscope::internal::F<int>");
  EXPECT_EQ(internal::ShortFunctionName("bool operator<(Key const&, Key const&)"), "operator<");
  EXPECT_EQ(internal::ShortFunctionName("Broken(int"), "Broken");
}

// A generator's state is an input of every step that draws from it: its
// "made at" is the user's line (a Dropout's, a manual_seed's), never the
// library's, so a cause or the sharding view that names it points at the user.
TEST(SourceLines, ADropoutsGeneratorStateIsMadeAtTheUsersLine) {
  const int made = __LINE__ + 1;
  nn::Dropout drop(0.1, "drop");
  EXPECT_EQ(drop.generator.state().node()->created.file, kFile);
  EXPECT_EQ(drop.generator.state().node()->created.line, made);
  const int seeded = __LINE__ + 1;
  drop.generator.manual_seed(7);
  EXPECT_EQ(drop.generator.state().node()->created.line, seeded);
  Generator own(3, "own"); const int own_line = __LINE__;
  EXPECT_EQ(own.state().node()->created.line, own_line);
}

TEST(OrphanTensors, AModelBuiltBeforeInitCompilesOnce) {
  Shutdown();
  CompileRecorder rec;
  trace::SetRecorder(&rec);
  auto train = [](nn::Linear& l, optim::SGD& opt, int steps) {
    std::vector<double> losses;
    for (int step = 0; step < steps; ++step) {
      Tensor x = Tensor::from_host(Literal::FromF32({4, 3}, std::vector<float>(12, 0.1f * (step + 1))), "x");
      Tensor loss = sum(l(x) * l(x));
      EXPECT_TRUE(backward(loss).ok());
      EXPECT_TRUE(opt.step().ok());
      EXPECT_TRUE(mark_step().ok());
      auto v = loss.item();
      EXPECT_TRUE(v.ok()) << v.status();
      losses.push_back(v.ok() ? *v : 0);
    }
    return losses;
  };
  std::vector<double> before_init, after_init;
  {
    nn::Linear l(3, 2, "l", /*seed=*/7);  // no context yet
    optim::SGD opt(parameters(l), {.lr = 0.1});
    ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
    before_init = train(l, opt, 4);
    size_t misses = 0;
    for (const auto& c : rec.compiles) misses += c.cache == "miss";
    EXPECT_EQ(misses, 1u);
    // Kept for a second context: its values go on, and it compiles once there too.
    Shutdown();
    ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
    rec.compiles.clear();
    train(l, opt, 3);
    for (const auto& c : rec.compiles) misses += c.cache == "miss";
    EXPECT_EQ(misses, 2u);
  }
  {
    nn::Linear l(3, 2, "l", /*seed=*/7);  // made in a context: the reference
    optim::SGD opt(parameters(l), {.lr = 0.1});
    after_init = train(l, opt, 4);
  }
  ASSERT_EQ(before_init.size(), after_init.size());
  for (size_t k = 0; k < before_init.size(); ++k) EXPECT_NEAR(before_init[k], after_init[k], 1e-6) << "step " << k;
  Shutdown();
  trace::SetRecorder(nullptr);
}

}  // namespace
}  // namespace shardscope
