// CSE and DCE: equal ops merge, unused ops go, parameters and outputs stay.
#include "compiler/passes.h"

#include <gtest/gtest.h>

#include "compiler/text.h"

namespace shardscope::compiler {
namespace {

TEST(Passes, MergesEqualOpsAndDropsDeadOnes) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {4}), "x");
  Instruction* unused = m.Parameter(Shape(DType::kF32, {4}), "unused");
  Instruction* a = m.Unary(Opcode::kExponential, x, {"a.cc", 1, ""});
  Instruction* b = m.Unary(Opcode::kExponential, x, {"b.cc", 2, ""});  // same value, other line
  Instruction* c1 = m.ScalarConstant(DType::kF32, 2);
  Instruction* c2 = m.ScalarConstant(DType::kF32, 2);
  Instruction* c3 = m.ScalarConstant(DType::kF32, 3);                  // differs: kept apart
  Instruction* s = m.Binary(Opcode::kAdd, a, b);
  m.Unary(Opcode::kLog, s);                                             // dead
  Instruction* bc1 = m.BroadcastInDim(c1, {4}, {});
  Instruction* bc2 = m.BroadcastInDim(c2, {4}, {});
  Instruction* bc3 = m.BroadcastInDim(c3, {4}, {});
  Instruction* y = m.Binary(Opcode::kMultiply, s, bc1);
  Instruction* z = m.Binary(Opcode::kMultiply, s, bc2);                 // equal to y once c2 == c1
  Instruction* w = m.Binary(Opcode::kMultiply, s, bc3);
  m.SetOutputs({y, z, w});
  PassStats st;
  auto out = Simplify(m, &st);
  ASSERT_TRUE(Verify(*out).ok());
  EXPECT_EQ(st.cse_removed, 4);  // b, c2, bc2, z
  EXPECT_EQ(st.dce_removed, 1);  // the log
  ASSERT_EQ(out->parameters().size(), 2u);  // "unused" stays: the calling convention
  EXPECT_EQ(out->parameters()[1]->name, "unused");
  (void)unused;
  ASSERT_EQ(out->outputs().size(), 3u);
  EXPECT_EQ(out->outputs()[0], out->outputs()[1]);  // y and z are one value
  EXPECT_NE(out->outputs()[0], out->outputs()[2]);
  EXPECT_EQ(out->instructions().size(), m.instructions().size() - 5);
}

}  // namespace
}  // namespace shardscope::compiler

namespace shardscope::compiler {
namespace {

int Count(const Module& m, Opcode op) {
  int n = 0;
  for (const auto& i : m.instructions()) n += i->op == op;
  return n;
}

TEST(Passes, AlgebraicIdentitiesDropOps) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {4, 2}), "x");
  Instruction* one = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 1), {4, 2}, {});
  Instruction* zero = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 0), {4, 2}, {});
  Instruction* a = m.Binary(Opcode::kMultiply, x, one);               // x
  Instruction* b = m.Binary(Opcode::kAdd, zero, a);                   // x
  Instruction* c = m.Unary(Opcode::kNegate, m.Unary(Opcode::kNegate, b));  // x
  Instruction* d = m.Reshape(c, {4, 2});                              // x
  Instruction* e = m.Transpose(d, {0, 1});                            // x
  Instruction* f = m.Binary(Opcode::kDivide, e, one);                 // x
  Instruction* keep = m.Binary(Opcode::kMultiply, f, zero);           // x*0 is not 0 for NaN/inf: kept
  m.SetOutputs({f, keep});
  PassStats st;
  auto out = Simplify(m, &st);
  ASSERT_TRUE(Verify(*out).ok());
  EXPECT_EQ(st.algebraic_simplified, 6);  // a, b, -(-x) (the inner negate is then dead), d, e, f
  EXPECT_EQ(out->outputs()[0], out->parameters()[0]);  // f is x itself
  EXPECT_EQ(Count(*out, Opcode::kMultiply), 1);
  EXPECT_EQ(Count(*out, Opcode::kNegate), 0);
  EXPECT_EQ(Count(*out, Opcode::kReshape), 0);
}

TEST(Passes, FoldsFloatOpsOnConstants) {
  // The kind of arithmetic autograd and optimizers leave: (1 - 0.9) * 2 on
  // broadcast constants, then used with a real value.
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {3}), "x");
  Instruction* one = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 1), {3}, {});
  Instruction* beta = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 0.9), {3}, {});
  Instruction* two = m.ScalarConstant(DType::kF32, 2);
  Instruction* diff = m.Binary(Opcode::kSubtract, one, beta);
  Instruction* scale = m.Binary(Opcode::kMultiply, diff, m.BroadcastInDim(two, {3}, {}));
  Instruction* sq = m.Unary(Opcode::kSqrt, m.ScalarConstant(DType::kF32, 4));
  Instruction* y = m.Binary(Opcode::kMultiply, x, scale);
  m.SetOutputs({y, sq});
  PassStats st;
  auto out = Simplify(m, &st);
  ASSERT_TRUE(Verify(*out).ok()) << Verify(*out);
  EXPECT_EQ(st.constants_folded, 3);  // diff, scale, sq
  const Instruction* o = out->outputs()[0];
  ASSERT_EQ(o->op, Opcode::kMultiply);
  const Instruction* folded = o->operands[1];
  ASSERT_EQ(folded->op, Opcode::kBroadcastInDim);
  ASSERT_EQ(folded->operands[0]->op, Opcode::kConstant);
  EXPECT_FLOAT_EQ(static_cast<float>(folded->operands[0]->literal->GetDouble(0)), static_cast<float>((1 - 0.9) * 2));
  EXPECT_EQ(out->outputs()[1]->op, Opcode::kConstant);
  EXPECT_EQ(out->outputs()[1]->literal->GetDouble(0), 2.0);
  EXPECT_EQ(Count(*out, Opcode::kSubtract), 0);
}

TEST(Passes, TransposesFoldIntoDotsThatReadThem) {
  // A weight gradient as autograd writes it: dW = transpose(g) . x over the
  // batch and sequence dims. The dot reads g in place instead.
  Module m;
  Instruction* g = m.Parameter(Shape(DType::kF32, {2, 3, 5}), "g");
  Instruction* x = m.Parameter(Shape(DType::kF32, {2, 3, 4}), "x");
  Instruction* gt = m.Transpose(g, {2, 0, 1});  // [5, 2, 3]
  DotDims dd;
  dd.lhs_contracting = {1, 2};
  dd.rhs_contracting = {0, 1};
  Instruction* dw = m.DotGeneral(gt, x, dd);  // [5, 4]
  // Swapping the free dims would change the result's layout: kept.
  Instruction* y = m.Parameter(Shape(DType::kF32, {3, 4, 6}), "y");
  Instruction* yt = m.Transpose(y, {1, 0, 2});  // [4, 3, 6]: free dims 4 and 6 keep their order
  Instruction* z = m.Parameter(Shape(DType::kF32, {6, 4, 3}), "z");
  Instruction* zt = m.Transpose(z, {1, 0, 2});  // [4, 6, 3]: free dims 4, 6 come from dims 1, 0: swapped
  DotDims d2;
  d2.lhs_contracting = {2};
  d2.rhs_contracting = {0};
  Instruction* w3 = m.Parameter(Shape(DType::kF32, {3, 2}), "w3");
  Instruction* kept = m.DotGeneral(zt, w3, d2);
  DotDims d3;
  d3.lhs_contracting = {1};
  d3.rhs_contracting = {0};
  Instruction* folded = m.DotGeneral(yt, m.Parameter(Shape(DType::kF32, {3, 2}), "w"), d3);
  m.SetOutputs({dw, kept, folded});
  PassStats st;
  auto out = Simplify(m, &st);
  ASSERT_TRUE(Verify(*out).ok()) << Verify(*out);
  EXPECT_EQ(st.algebraic_simplified, 2);
  const Instruction* o = out->outputs()[0];
  ASSERT_EQ(o->op, Opcode::kDotGeneral);
  EXPECT_EQ(o->operands[0]->op, Opcode::kParameter);
  EXPECT_EQ(o->dot.lhs_contracting, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(o->shape, dw->shape);
  EXPECT_EQ(out->outputs()[1]->operands[0]->op, Opcode::kTranspose);
  EXPECT_EQ(out->outputs()[2]->operands[0]->op, Opcode::kParameter);
  EXPECT_EQ(out->outputs()[2]->dot.lhs_contracting, (std::vector<int64_t>{0}));
  EXPECT_EQ(Count(*out, Opcode::kTranspose), 1);
}

}  // namespace
}  // namespace shardscope::compiler
