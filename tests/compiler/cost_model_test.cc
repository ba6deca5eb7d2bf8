// The cost model: FLOPs and bytes per op, the roofline (compute- vs
// memory-bound, with the per-kernel overhead), the alpha-beta ring model of
// collectives, fused kernels, and that the built-in profiles are sane.
#include "compiler/cost_model.h"
#include "tests/compiler/strided_conv.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace shardscope::compiler {
namespace {

// A made-up chip with round numbers, so expected times are easy to write.
ChipProfile Toy() {
  ChipProfile p;
  p.name = "toy";
  p.peak_flops = 1e12;          // 1 FLOP per ps
  p.vector_flops = 1e11;
  p.hbm_bandwidth = 1e11;       // 100 bytes per ns
  p.hbm_bytes = 1 << 20;
  p.link_bandwidth = 1e10;      // 10 bytes per ns
  p.link_latency_ns = 100;
  p.host_bandwidth = 1e9;       // 1 byte per ns
  p.kernel_overhead_ns = 50;
  return p;
}

DotDims MatMul() {
  DotDims d;
  d.lhs_contracting = {1};
  d.rhs_contracting = {0};
  return d;
}

TEST(CostModelTest, AConvolutionCountsOnlyTheTapsThatLandOnInputElements) {
  // Brute force: every (output, tap) pair per spatial dim, its input position
  // in the padded, dilated input, counted where it is an element.
  auto brute = [](int64_t in, int64_t k, int64_t out, int64_t stride, int64_t pad, int64_t ld, int64_t rd) {
    double n = 0;
    const int64_t dilated = (in - 1) * ld + 1;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t t = 0; t < k; ++t) {
        const int64_t pos = o * stride + t * rd - pad;
        n += pos >= 0 && pos < dilated && pos % ld == 0 ? 1 : 0;
      }
    return n;
  };
  struct Case {
    int64_t in, k, stride, pad_lo, pad_hi, ld, rd;
  };
  for (const Case& c : std::vector<Case>{{32, 3, 1, 1, 1, 1, 1},  // a forward 3x3, padded
                                         {16, 3, 1, 1, 2, 2, 1},  // input gradient of a stride-2 conv
                                         {32, 3, 2, 1, 1, 1, 1},  // stride 2
                                         {32, 32, 1, 1, 1, 1, 1}, // a kernel gradient's wide window
                                         {9, 3, 1, 2, 2, 1, 2},   // rhs dilation
                                         {7, 4, 3, 0, 5, 3, 1}}) {
    Module m;
    const int64_t dilated = (c.in - 1) * c.ld + 1;
    const int64_t span = (c.k - 1) * c.rd + 1;
    const int64_t out = (dilated + c.pad_lo + c.pad_hi - span) / c.stride + 1;
    auto* x = m.Parameter(Shape(DType::kF32, {2, 3, c.in}), "x");
    auto* w = m.Parameter(Shape(DType::kF32, {5, 3, c.k}), "w");
    ConvDims d;
    d.input_spatial = d.kernel_spatial = d.output_spatial = {2};
    d.window_strides = {c.stride};
    d.padding = {{c.pad_lo, c.pad_hi}};
    d.lhs_dilation = {c.ld};
    d.rhs_dilation = {c.rd};
    auto* conv = m.Convolution(x, w, d);
    ASSERT_EQ(conv->shape.dims[2], out);
    // 2 x batch 2 x 5 output features x 3 input features x the valid pairs.
    EXPECT_DOUBLE_EQ(InstructionFlops(*conv), 2.0 * 2 * 5 * 3 * brute(c.in, c.k, out, c.stride, c.pad_lo, c.ld, c.rd))
        << c.in << " " << c.k << " lhs dilation " << c.ld;
  }
  // A stride-2 conv's input gradient does about a quarter of its dense count in 2D.
  Module m;
  auto* conv = StridedConvInputGradient(m);
  ASSERT_EQ(conv->shape.ToString(), "f32[4,16,32,32]");
  const double dense = 2.0 * 4 * 16 * 32 * 32 * 32 * 9;
  EXPECT_NEAR(InstructionFlops(*conv) / dense, 0.24, 0.01);
}

TEST(CostModelTest, ACpuChipWithAGangIsModeledAtTheGangsPeak) {
  const ChipProfile cpu = *FindProfile("cpu");
  ASSERT_GT(cpu.gang_peak_flops, cpu.peak_flops);
  const ChipProfile one = cpu.ForGangWidth(1), two = cpu.ForGangWidth(2);
  EXPECT_EQ(one.peak_flops, cpu.peak_flops);
  EXPECT_EQ(two.peak_flops, cpu.gang_peak_flops);
  EXPECT_EQ(two.vector_flops, cpu.gang_peak_flops);
  EXPECT_EQ(two.hbm_bandwidth, cpu.hbm_bandwidth);  // streams do not scale with the gang
  // A large dot on the gang is modeled proportionally faster.
  Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {1024, 1024}), "a");
  auto* b = m.Parameter(Shape(DType::kF32, {1024, 1024}), "b");
  auto* d = m.DotGeneral(a, b, {{}, {}, {1}, {0}});
  const double t1 = CostModel(one).InstructionCost(*d, 1).modeled_ns;
  const double t2 = CostModel(two).InstructionCost(*d, 1).modeled_ns;
  EXPECT_NEAR(t1 / t2, cpu.gang_peak_flops / cpu.peak_flops, 0.05);
  // Profiles of other chips have no gang figure and stay as they are.
  const ChipProfile tpu = *FindProfile("tpu-v4");
  EXPECT_EQ(tpu.ForGangWidth(2).peak_flops, tpu.peak_flops);
}

TEST(CostModelTest, DotIsComputeBoundWhenLarge) {
  Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {512, 512}), "a");
  auto* b = m.Parameter(Shape(DType::kF32, {512, 512}), "b");
  auto* dot = m.DotGeneral(a, b, MatMul());
  CostModel cm(Toy());
  OpCost c = cm.InstructionCost(*dot);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 512 * 512 * 512);
  EXPECT_EQ(c.bytes_read, 2 * 512 * 512 * 4);
  EXPECT_EQ(c.bytes_written, 512 * 512 * 4);
  EXPECT_NEAR(c.compute_ns, 2.0 * 512 * 512 * 512 / 1e3, 1e-6);  // 268 us at 1 TFLOP/s
  EXPECT_NEAR(c.memory_ns, 3.0 * 512 * 512 * 4 / 100, 1e-6);     // 31 us at 100 GB/s
  EXPECT_EQ(c.roofline, RooflineClass::kCompute);
  EXPECT_EQ(c.modeled_ns, std::llround(c.compute_ns + 50));
  EXPECT_STREQ(RooflineClassName(c.roofline), "compute");
}

TEST(CostModelTest, SkinnyDotAndElementwiseAreMemoryBound) {
  Module m;
  auto* v = m.Parameter(Shape(DType::kF32, {1, 4096}), "v");
  auto* w = m.Parameter(Shape(DType::kF32, {4096, 4096}), "w");
  auto* gemv = m.DotGeneral(v, w, MatMul());
  auto* x = m.Parameter(Shape(DType::kF32, {1000}), "x");
  auto* add = m.Binary(Opcode::kAdd, x, x);
  CostModel cm(Toy());
  OpCost g = cm.InstructionCost(*gemv);
  EXPECT_EQ(g.roofline, RooflineClass::kMemory);
  EXPECT_GT(g.memory_ns, g.compute_ns);
  OpCost e = cm.InstructionCost(*add);
  EXPECT_DOUBLE_EQ(e.flops, 1000);
  EXPECT_EQ(e.bytes_read, 8000);
  EXPECT_EQ(e.bytes_written, 4000);
  EXPECT_EQ(e.roofline, RooflineClass::kMemory);
  EXPECT_EQ(e.modeled_ns, 120 + 50);  // 12000 bytes at 100 bytes/ns, plus overhead
  EXPECT_STREQ(RooflineClassName(e.roofline), "memory");
}

TEST(CostModelTest, ParametersAndConstantsCostNothing) {
  Module m;
  auto* p = m.Parameter(Shape(DType::kF32, {64}), "p");
  auto* c = m.ScalarConstant(DType::kF32, 2);
  CostModel cm(Toy());
  for (const Instruction* i : {p, c}) {
    OpCost k = cm.InstructionCost(*i);
    EXPECT_EQ(k.modeled_ns, 0);
    EXPECT_EQ(k.bytes(), 0);
    EXPECT_EQ(k.roofline, RooflineClass::kNone);
  }
}

TEST(CostModelTest, DynamicSliceReadsOnlyItsWindow) {
  Module m;
  auto* x = m.Parameter(Shape(DType::kF32, {1000, 8}), "x");
  auto* i = m.ScalarConstant(DType::kI32, 0);
  auto* s = m.DynamicSlice(x, {i, i}, {10, 8});
  int64_t read = 0, written = 0;
  CostModel::Bytes(*s, &read, &written);
  EXPECT_EQ(written, 10 * 8 * 4);
  EXPECT_EQ(read, 10 * 8 * 4 + 2 * 4);
}

TEST(CostModelTest, NewerOpsFallBackToOperandsAndResult) {
  // Ops without a rule of their own read every operand once and write the result.
  Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {100}), "a");
  auto* b = m.Parameter(Shape(DType::kF32, {100}), "b");
  Instruction* sel = m.Select(m.Compare(a, b, CompareDirection::kLT), a, b);
  int64_t read = 0, written = 0;
  CostModel::Bytes(*sel, &read, &written);
  EXPECT_EQ(read, 100 * 1 + 2 * 100 * 4);  // i1 predicate + two f32 operands
  EXPECT_EQ(written, 100 * 4);
  EXPECT_EQ(CostModel(Toy()).InstructionCost(*sel).roofline, RooflineClass::kMemory);
}

TEST(CostModelTest, AlphaBetaRing) {
  CostModel cm(Toy());
  const int64_t bytes = 1'000'000;
  // All-reduce over 4: 2(n-1) = 6 steps of 100 ns, 2(n-1)/n = 1.5 of the bytes at 10 bytes/ns.
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kAllReduce, bytes, 4), 6 * 100 + 1.5 * bytes / 10, 1e-6);
  // All-gather over 4: 3 steps, 3/4 of the (gathered) bytes.
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kAllGather, bytes, 4), 3 * 100 + 0.75 * bytes / 10, 1e-6);
  // Two chips: all-reduce moves the buffer once.
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kAllReduce, bytes, 2), 2 * 100 + 1.0 * bytes / 10, 1e-6);
  EXPECT_EQ(cm.CollectiveNs(CollectiveKind::kAllReduce, bytes, 1), 0);

  Module m;
  auto* x = m.Parameter(Shape(DType::kF32, {250'000}), "x");
  auto* ar = m.AllReduce(x, ReduceKind::kSum, {{0, 1, 2, 3}});
  OpCost c = cm.InstructionCost(*ar);
  EXPECT_EQ(c.roofline, RooflineClass::kCollective);
  EXPECT_EQ(c.modeled_ns, std::llround(cm.CollectiveNs(CollectiveKind::kAllReduce, bytes, 4)));
  // Without replica groups the group is the whole program.
  auto* ar_all = m.AllReduce(x, ReduceKind::kSum, {});
  EXPECT_EQ(cm.InstructionCost(*ar_all, 2).modeled_ns,
            std::llround(cm.CollectiveNs(CollectiveKind::kAllReduce, bytes, 2)));
  auto* ag = m.AllGather(x, 0, {{0, 1}, {2, 3}});
  EXPECT_EQ(cm.InstructionCost(*ag).modeled_ns,
            std::llround(cm.CollectiveNs(CollectiveKind::kAllGather, 2 * bytes, 2)));
}

TEST(CostModelTest, AlphaBetaOfTheNewCollectives) {
  CostModel cm(Toy());
  const int64_t bytes = 1'000'000;  // the whole value; 100 ns latency, 10 bytes/ns
  // Reduce-scatter ring over 4: 3 steps, each sends a quarter of the operand.
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kReduceScatter, bytes, 4), 3 * 100 + 0.75 * bytes / 10, 1e-6);
  // All-to-all over 4: 3 pairwise rounds, 3/4 of the value leaves each chip.
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kAllToAll, bytes, 4), 3 * 100 + 0.75 * bytes / 10, 1e-6);
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kAllToAll, bytes, 2), 1 * 100 + 0.5 * bytes / 10, 1e-6);
  // Permute: one transfer of the whole value, whatever the number of devices.
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kCollectivePermute, bytes, 2), 100 + 1.0 * bytes / 10, 1e-6);
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kCollectivePermute, bytes, 8), 100 + 1.0 * bytes / 10, 1e-6);
  // Broadcast, binomial tree: ceil(log2 n) steps of the whole value.
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kCollectiveBroadcast, bytes, 2), 1 * (100 + bytes / 10.0),
              1e-6);
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kCollectiveBroadcast, bytes, 3), 2 * (100 + bytes / 10.0),
              1e-6);
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kCollectiveBroadcast, bytes, 4), 2 * (100 + bytes / 10.0),
              1e-6);
  EXPECT_NEAR(cm.CollectiveNs(CollectiveKind::kCollectiveBroadcast, bytes, 8), 3 * (100 + bytes / 10.0),
              1e-6);
  for (CollectiveKind k : {CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll,
                           CollectiveKind::kCollectivePermute, CollectiveKind::kCollectiveBroadcast})
    EXPECT_EQ(cm.CollectiveNs(k, bytes, 1), 0);

  Module m;
  auto* x = m.Parameter(Shape(DType::kF32, {250'000}), "x");  // 1 MB
  // reduce_scatter is costed on its operand (the whole value), not its quarter-size result.
  auto* rs = m.ReduceScatter(x, 0, ReduceKind::kSum, {{0, 1, 2, 3}});
  OpCost c = cm.InstructionCost(*rs);
  EXPECT_EQ(c.roofline, RooflineClass::kCollective);
  EXPECT_EQ(c.modeled_ns, std::llround(cm.CollectiveNs(CollectiveKind::kReduceScatter, bytes, 4)));
  EXPECT_DOUBLE_EQ(c.flops, 250'000);  // one combine per operand element, as all_reduce
  EXPECT_EQ(c.bytes_read, bytes);
  EXPECT_EQ(c.bytes_written, bytes / 4);
  auto* a2a = m.AllToAll(x, 0, 0, 2, {{0, 1}, {2, 3}});
  EXPECT_EQ(cm.InstructionCost(*a2a).modeled_ns,
            std::llround(cm.CollectiveNs(CollectiveKind::kAllToAll, bytes, 2)));
  // Without replica groups the group is the whole program.
  auto* bc = m.CollectiveBroadcast(x, {});
  EXPECT_EQ(cm.InstructionCost(*bc, 8).modeled_ns,
            std::llround(cm.CollectiveNs(CollectiveKind::kCollectiveBroadcast, bytes, 8)));
  auto* ring = m.CollectivePermute(x, {{0, 1}, {1, 2}, {2, 0}});
  EXPECT_EQ(cm.InstructionCost(*ring, 8).modeled_ns,
            std::llround(cm.CollectiveNs(CollectiveKind::kCollectivePermute, bytes, 3)));
  EXPECT_GT(cm.InstructionCost(*ring, 8).modeled_ns, 0);
  // A permute that names no two devices moves nothing.
  EXPECT_EQ(cm.InstructionCost(*m.CollectivePermute(x, {}), 8).modeled_ns, 0);
  EXPECT_EQ(cm.InstructionCost(*m.CollectivePermute(x, {{3, 3}}), 8).modeled_ns, 0);

  EXPECT_EQ(CollectiveKindOf(Opcode::kReduceScatter), CollectiveKind::kReduceScatter);
  EXPECT_EQ(CollectiveKindOf(Opcode::kAllToAll), CollectiveKind::kAllToAll);
  EXPECT_EQ(CollectiveKindOf(Opcode::kCollectivePermute), CollectiveKind::kCollectivePermute);
  EXPECT_EQ(CollectiveKindOf(Opcode::kCollectiveBroadcast), CollectiveKind::kCollectiveBroadcast);
  EXPECT_EQ(CollectiveKindOf(Opcode::kAllGather), CollectiveKind::kAllGather);
}

TEST(CostModelTest, FusedKernelMovesOnlyItsBoundary) {
  Module m;
  auto* x = m.Parameter(Shape(DType::kF32, {1000}), "x");
  auto* y = m.Parameter(Shape(DType::kF32, {1000}), "y");
  auto* a = m.Binary(Opcode::kAdd, x, y);
  auto* e = m.Unary(Opcode::kExponential, a);
  auto* r = m.Binary(Opcode::kMultiply, e, x);
  CostModel cm(Toy());
  OpCost fused = cm.KernelCost({a, e, r});
  EXPECT_DOUBLE_EQ(fused.flops, 3000);
  EXPECT_EQ(fused.bytes_read, 8000);     // x and y, once each
  EXPECT_EQ(fused.bytes_written, 4000);  // only r leaves the kernel
  int64_t separate = cm.InstructionCost(*a).modeled_ns + cm.InstructionCost(*e).modeled_ns +
                     cm.InstructionCost(*r).modeled_ns;
  EXPECT_LT(fused.modeled_ns, separate);
  OpCost two_out = cm.KernelCost({a, e, r}, {e, r});
  EXPECT_EQ(two_out.bytes_written, 8000);
}

TEST(CostModelTest, TransfersUseTheHostLink) {
  CostModel cm(Toy());
  OpCost t = cm.TransferCost(1000);
  EXPECT_EQ(t.modeled_ns, 1000 + 50);
}

TEST(CostModelTest, ProgramCostsByInstructionId) {
  Module m;
  auto* x = m.Parameter(Shape(DType::kF32, {16}), "x");
  auto* n = m.Unary(Opcode::kNegate, x);
  m.AddOutput(n);
  CostModel cm(Toy());
  auto costs = cm.ProgramCosts(m);
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[x->id].modeled_ns, 0);
  EXPECT_EQ(costs[n->id].modeled_ns, cm.InstructionCost(*n).modeled_ns);
}

TEST(CostModelTest, ProfilesAreSane) {
  ASSERT_EQ(BuiltinProfiles().size(), 3u);
  for (const ChipProfile& p : BuiltinProfiles()) {
    SCOPED_TRACE(p.name);
    EXPECT_GT(p.peak_flops, 0);
    EXPECT_GT(p.vector_flops, 0);
    EXPECT_LE(p.vector_flops, p.peak_flops);
    EXPECT_GT(p.hbm_bandwidth, 0);
    EXPECT_GT(p.hbm_bytes, int64_t{1} << 30);
    EXPECT_GT(p.link_bandwidth, 0);
    EXPECT_GE(p.link_latency_ns, 0);
    EXPECT_GT(p.host_bandwidth, 0);
    EXPECT_GE(p.kernel_overhead_ns, 0);
    EXPECT_LT(p.kernel_overhead_ns, 100'000);
    EXPECT_GT(p.ridge_point(), 1);  // every chip computes faster than it loads
    auto found = FindProfile(p.name);
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(found->peak_flops, p.peak_flops);
  }
  auto tpu = *FindProfile("tpu-v4");
  auto h100 = *FindProfile("h100");
  auto cpu = *FindProfile("cpu");
  EXPECT_DOUBLE_EQ(tpu.peak_flops, 275e12);
  EXPECT_DOUBLE_EQ(tpu.hbm_bandwidth, 1200e9);
  EXPECT_DOUBLE_EQ(h100.hbm_bandwidth, 3350e9);
  // The accelerators are orders of magnitude beyond one CPU core.
  EXPECT_GT(tpu.peak_flops, 100 * cpu.peak_flops);
  EXPECT_GT(h100.peak_flops, 100 * cpu.peak_flops);
  EXPECT_LT(cpu.peak_flops, 1e12);
  auto bad = FindProfile("tpu-v9");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cpu, tpu-v4, h100"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace shardscope::compiler
