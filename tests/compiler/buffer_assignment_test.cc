// Buffer assignment: lifetimes, the peak and what is live there, and reuse.
#include "compiler/buffer_assignment.h"

#include <gtest/gtest.h>

namespace shardscope::compiler {
namespace {

SourceLoc At(int line) { return SourceLoc{"samples/mem.cc", line, ""}; }

// A chain x -> a -> b -> c: each value dies when the next is made, so the
// arena reuses memory; the peak is an input, one value and the next.
TEST(BufferAssignment, ChainReusesMemory) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {256, 256}), "x", At(1));  // 256 KiB
  Instruction* a = m.Unary(Opcode::kExponential, x, At(2));
  Instruction* b = m.Unary(Opcode::kNegate, a, At(3));
  Instruction* c = m.Unary(Opcode::kLog, b, At(4));
  Instruction* d = m.Unary(Opcode::kNegate, c, At(5));
  m.AddOutput(d);
  MemoryPlan p = PlanMemory(m);
  const int64_t kb = 256 * 256 * 4;
  EXPECT_EQ(p.parameter_bytes, kb);
  EXPECT_EQ(p.unshared_bytes, 4 * kb);
  EXPECT_EQ(p.arena_bytes, 2 * kb);  // two buffers alternate
  EXPECT_EQ(p.peak_bytes, 3 * kb);   // the input, an operand and its result
  ASSERT_EQ(p.live_at_peak.size(), 3u);
  // No two buffers whose lifetimes overlap share addresses.
  for (const auto& u : p.buffers)
    for (const auto& v : p.buffers) {
      if (&u == &v || u.parameter || v.parameter) continue;
      bool time = u.first <= v.last && v.first <= u.last;
      bool space = u.offset < v.offset + v.bytes && v.offset < u.offset + u.bytes;
      EXPECT_FALSE(time && space) << u.op << " and " << v.op;
    }
}

// A value used late stays live: the peak is where the big temporaries meet.
TEST(BufferAssignment, PeakNamesTheLargestLiveBuffers) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 8}), "x", At(10));
  Instruction* big = m.BroadcastInDim(x, {64, 8, 8}, {1, 2}, At(11));  // 16 KiB
  big->scope = "encoder";
  Instruction* init = m.ScalarConstant(DType::kF32, 0, At(12));
  Instruction* r = m.Reduce(big, init, {0}, ReduceKind::kSum, At(13));
  Instruction* y = m.Binary(Opcode::kAdd, r, x, At(14));
  m.AddOutput(y);
  MemoryPlan p = PlanMemory(m);
  ASSERT_FALSE(p.live_at_peak.empty());
  const BufferInfo& largest = p.buffers[p.live_at_peak[0]];
  EXPECT_EQ(largest.instruction_id, big->id);
  EXPECT_EQ(largest.bytes, 64 * 8 * 8 * 4);
  std::string d = p.DescribeLargestAtPeak(2);
  EXPECT_NE(d.find("16.0 KiB broadcast_in_dim"), std::string::npos) << d;
  EXPECT_NE(d.find("samples/mem.cc:11, encoder"), std::string::npos) << d;
}

TEST(BufferAssignment, OutputsLiveToTheEnd) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {4}), "x");
  Instruction* a = m.Unary(Opcode::kNegate, x);
  Instruction* b = m.Unary(Opcode::kExponential, x);
  m.AddOutput(a);
  m.AddOutput(b);
  MemoryPlan p = PlanMemory(m);
  int n = static_cast<int>(m.instructions().size());
  EXPECT_EQ(p.buffers[1].last, n);
  EXPECT_EQ(p.buffers[2].last, n);
  EXPECT_NE(p.buffers[1].offset, p.buffers[2].offset);
  EXPECT_EQ(FormatBytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(FormatBytes(100), "100 B");
}

}  // namespace
}  // namespace shardscope::compiler
