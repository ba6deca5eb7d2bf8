// A kernel allocates nothing once its thread has run one like it: the
// chips' threads share one malloc arena (runtime/heap.h), so an allocation in
// a kernel takes a lock the other chip thread takes too, and a 16-element
// batch-norm update in the cnn took 6-10 us of device time against 2 us alone.
// Its own binary: it counts every operator new of the process.
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <string>

#include "compiler/fusion.h"
#include "compiler/parser.h"
#include "gtest/gtest.h"
#include "runtime/kernels.h"

namespace {
std::atomic<long> g_news{0};
}  // namespace

void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace shardscope {
namespace {

using compiler::FusedKernel;
using compiler::Instruction;

struct Program {
  std::unique_ptr<compiler::Module> module;
  compiler::FusionPlan plan;
  std::vector<Literal> values;  // by instruction id: everything outside the kernels
  std::vector<const Literal*> ptr;
};

// Parses `text` and computes every instruction no kernel absorbs, op by op.
Program Prepare(const std::string& text) {
  Program p;
  auto m = compiler::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return p;
  p.module = std::move(*m);
  p.plan = compiler::PlanFusion(*p.module);
  int64_t ids = 0;
  for (const auto& i : p.module->instructions()) ids = std::max(ids, i->id + 1);
  p.values.resize(ids);
  p.ptr.assign(ids, nullptr);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  for (const auto& i : p.module->instructions()) {
    p.values[i->id] = Literal(i->shape);
    if (i->op == compiler::Opcode::kParameter) {
      for (int64_t k = 0; k < p.values[i->id].elements(); ++k) p.values[i->id].as<float>()[k] = u(rng);
    } else if (!p.plan.Absorbed(i->id) && !p.plan.KernelOf(i->id)) {
      std::vector<const Literal*> ops;
      for (const Instruction* o : i->operands) ops.push_back(p.ptr[o->id]);
      EXPECT_TRUE(runtime::EvalInstruction(*i, ops, 0, &p.values[i->id]).ok());
    } else {
      continue;
    }
    p.ptr[i->id] = &p.values[i->id];
  }
  return p;
}

// Operator news in the third run of each kernel (the first two may grow the thread's state).
long NewsInAWarmRun(Program& p) {
  EXPECT_FALSE(p.plan.kernels.empty());
  long news = 0;
  for (const FusedKernel& k : p.plan.kernels) {
    Literal out(k.root->shape);
    for (int run = 0; run < 3; ++run) {
      const long before = g_news.load();
      EXPECT_TRUE(runtime::EvalFusedKernel(k, p.ptr, &out).ok()) << k.name();
      if (run == 2) news += g_news.load() - before;
    }
  }
  return news;
}

TEST(KernelAllocations, ABatchNormUpdateAllocatesNothingOnceWarm) {
  // running = running * 0.9 + mean * 0.1: broadcast scalars and arithmetic.
  Program p = Prepare(R"(module {
  func.func @main(%r: tensor<16xf32>, %m: tensor<16xf32>) -> tensor<16xf32> {
    %a = stablehlo.constant dense<0.9> : tensor<f32>
    %b = stablehlo.constant dense<0.1> : tensor<f32>
    %ab = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %x = stablehlo.multiply %r, %ab : tensor<16xf32>
    %y = stablehlo.multiply %m, %bb : tensor<16xf32>
    %z = stablehlo.add %x, %y : tensor<16xf32>
    return %z : tensor<16xf32>
  }
})");
  ASSERT_TRUE(p.module);
  EXPECT_EQ(NewsInAWarmRun(p), 0);
}

TEST(KernelAllocations, GeneralBroadcastsAndReductionsAllocateNothingOnceWarm) {
  // A broadcast over dims 0 and 2 of three (neither the output's leading nor
  // its trailing block), and reductions over the trailing and the leading dim.
  Program p = Prepare(R"(module {
  func.func @main(%x: tensor<4x3x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x3x8xf32>, tensor<4x3xf32>, tensor<3x8xf32>) {
    %bb = stablehlo.broadcast_in_dim %b, dims = [0, 2] : (tensor<4x8xf32>) -> tensor<4x3x8xf32>
    %s = stablehlo.add %x, %bb : tensor<4x3x8xf32>
    %e = stablehlo.exponential %s : tensor<4x3x8xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %t = stablehlo.tanh %x : tensor<4x3x8xf32>
    %rows = stablehlo.reduce(%t init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<4x3x8xf32>, tensor<f32>) -> tensor<4x3xf32>
    %sq = stablehlo.multiply %x, %x : tensor<4x3x8xf32>
    %lead = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4x3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
    return %e, %rows, %lead : tensor<4x3x8xf32>, tensor<4x3xf32>, tensor<3x8xf32>
  }
})");
  ASSERT_TRUE(p.module);
  EXPECT_GE(p.plan.kernels.size(), 3u);
  EXPECT_EQ(NewsInAWarmRun(p), 0);
}

TEST(KernelAllocations, OpsOnTheirOwnAllocateNothingOnceWarm) {
  // Outside kernels (each reads a program input, so none is fused): reduces
  // over the trailing, the leading and two split dims, a broadcast, a
  // transpose, elementwise arithmetic and a convert.
  Program p = Prepare(R"(module {
  func.func @main(%x: tensor<4x3x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<3x8xf32>, tensor<3xf32>, tensor<4x3x8xf32>, tensor<8x4x3xf32>, tensor<4x3x8xf32>, tensor<4x3x8xi32>) {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %rows = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<4x3x8xf32>, tensor<f32>) -> tensor<4x3xf32>
    %lead = stablehlo.reduce(%x init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<4x3x8xf32>, tensor<f32>) -> tensor<3x8xf32>
    %mid = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0, 2] : (tensor<4x3x8xf32>, tensor<f32>) -> tensor<3xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [0, 2] : (tensor<4x8xf32>) -> tensor<4x3x8xf32>
    %t = stablehlo.transpose %x, dims = [2, 0, 1] : (tensor<4x3x8xf32>) -> tensor<8x4x3xf32>
    %s = stablehlo.multiply %x, %x : tensor<4x3x8xf32>
    %c = stablehlo.convert %x : (tensor<4x3x8xf32>) -> tensor<4x3x8xi32>
    return %rows, %lead, %mid, %bb, %t, %s, %c : tensor<4x3xf32>, tensor<3x8xf32>, tensor<3xf32>, tensor<4x3x8xf32>, tensor<8x4x3xf32>, tensor<4x3x8xf32>, tensor<4x3x8xi32>
  }
})");
  ASSERT_TRUE(p.module);
  int ops = 0;
  for (const auto& i : p.module->instructions()) {
    if (i->op == compiler::Opcode::kParameter || i->op == compiler::Opcode::kConstant) continue;
    ++ops;
    std::vector<const Literal*> in;
    for (const Instruction* o : i->operands) in.push_back(&p.values[o->id]);
    Literal out(i->shape);
    long news = 0;
    for (int run = 0; run < 3; ++run) {
      const long before = g_news.load();
      EXPECT_TRUE(runtime::EvalInstruction(*i, in, 0, &out).ok());
      news = g_news.load() - before;
    }
    EXPECT_EQ(news, 0) << compiler::OpcodeName(i->op) << " %" << i->id;
  }
  EXPECT_EQ(ops, 7);
}

}  // namespace
}  // namespace shardscope
