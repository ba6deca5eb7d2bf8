// stablehlo.optimization_barrier and mixed-precision contractions in the
// compiler: text round trip, what the verifier accepts, CSE that does not see
// through a barrier, and the partitioner passing a sharding through it.
#include <gtest/gtest.h>

#include "compiler/parser.h"
#include "compiler/passes.h"
#include "compiler/spmd.h"
#include "compiler/text.h"

namespace shardscope::compiler {
namespace {

int Count(const Module& m, Opcode op) {
  int n = 0;
  for (const auto& i : m.instructions()) n += i->op == op;
  return n;
}

constexpr const char* kProgram = R"(
module @m attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%arg0: tensor<4x8xf32> {mhlo.sharding = "{devices=[2,1]0,1}"}, %arg1: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %2 = stablehlo.exponential %arg0 : tensor<4x8xf32>
    %3 = stablehlo.optimization_barrier %arg0, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %4 = stablehlo.exponential %3 : tensor<4x8xf32>
    return %2, %4 : tensor<4x8xf32>, tensor<4x8xf32>
  }
}
)";

TEST(OptimizationBarrier, RoundTripsAndKeepsValuesApartFromCse) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status();
  auto again = ParseModule(PrintModule(**m));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PrintModule(**again), PrintModule(**m));
  // exp(x) and exp(barrier(x)) are the same numbers, but the second may not be
  // merged into the first: both stay.
  PassStats st;
  auto simple = Simplify(**m, &st);
  EXPECT_EQ(Count(*simple, Opcode::kExponential), 2);
  EXPECT_EQ(Count(*simple, Opcode::kOptimizationBarrier), 1);
}

TEST(OptimizationBarrier, PassesTheShardingThroughWithoutCollectives) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status();
  auto r = SpmdPartition(**m, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->collectives, 0);
  EXPECT_EQ(r->output_shardings[1].ToString(), r->output_shardings[0].ToString());
  for (const auto& i : r->local->instructions()) {
    if (i->op == Opcode::kOptimizationBarrier) {
      EXPECT_EQ(i->shape, Shape(DType::kF32, {2, 8}));  // this chip's rows
    }
  }
}

TEST(OptimizationBarrier, NeedsAnOperand) {
  Module m;
  auto i = std::make_unique<Instruction>();
  i->op = Opcode::kOptimizationBarrier;
  m.AddOutput(m.Add(std::move(i)));
  absl::Status s = Verify(m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("needs at least one operand"), std::string::npos) << s;
}

TEST(MixedPrecision, DotAndConvolutionMayReturnF32ForHalfOperands) {
  Module m;
  Instruction* a = m.Parameter(Shape(DType::kBF16, {4, 8}), "a");
  Instruction* b = m.Parameter(Shape(DType::kBF16, {8, 3}), "b");
  Instruction* d = m.DotGeneral(a, b, {{}, {}, {1}, {0}}, {}, DType::kF32);
  Instruction* same = m.DotGeneral(a, b, {{}, {}, {1}, {0}});
  m.SetOutputs({d, same});
  ASSERT_TRUE(Verify(m).ok()) << Verify(m);
  EXPECT_EQ(d->shape, Shape(DType::kF32, {4, 3}));
  EXPECT_EQ(same->shape, Shape(DType::kBF16, {4, 3}));
  EXPECT_NE(PrintModule(m).find("(tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xf32>"), std::string::npos);
  // Only f32, and only from 16-bit floats: an f32 dot cannot claim f64, nor bf16 claim i32.
  auto bad = ParseModule(R"(
    module @m {
      func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<4x3xf64> {
        %r = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf64>
        return %r : tensor<4x3xf64>
      }
    })");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("differs from the tensor<4x3xf32> its operands imply"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace shardscope::compiler
