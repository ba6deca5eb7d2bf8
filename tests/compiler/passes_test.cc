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
