// The cost model's measured op-class figures (ChipProfile::conv_flops and the
// rest, measured by runtime/cpu_op_benchmarks.cc): which ops each one prices
// and how, on a made-up profile with round numbers; a profile without them
// prices as the plain roofline.
#include <cmath>
#include <string>

#include "compiler/cost_model.h"
#include "tests/compiler/strided_conv.h"
#include "gtest/gtest.h"

namespace shardscope::compiler {
namespace {

ChipProfile Plain() {
  ChipProfile p;
  p.name = "toy";
  p.peak_flops = 1e12;
  p.vector_flops = 1e11;
  p.hbm_bandwidth = 1e11;  // 100 bytes per ns
  p.kernel_overhead_ns = 50;
  return p;
}

ChipProfile Measured() {
  ChipProfile p = Plain();
  p.conv_flops = 1e11;
  p.cold_bandwidth = 2.5e10;  // 25 bytes per ns
  p.window_read_ns = 2;
  p.transcendental_ns = 5;
  p.strided_broadcast_ns = 3;
  p.gemm8_flops = 1e10;
  p.gemm32_flops = 4e10;
  p.gemm128_flops = 2e11;
  return p;
}

Instruction* Conv3x3(Module& m) {
  auto* in = m.Parameter(Shape(DType::kF32, {4, 16, 32, 32}), "in");
  auto* k = m.Parameter(Shape(DType::kF32, {16, 16, 3, 3}), "k");
  ConvDims d;
  d.input_spatial = d.kernel_spatial = d.output_spatial = {2, 3};
  d.window_strides = {1, 1};
  d.padding = {{1, 1}, {1, 1}};
  return m.Convolution(in, k, d);
}

// [m, k] x [k, n]
Instruction* Dot(Module& mod, int64_t m, int64_t k, int64_t n) {
  auto* a = mod.Parameter(Shape(DType::kF32, {m, k}), "a");
  auto* b = mod.Parameter(Shape(DType::kF32, {k, n}), "b");
  return mod.DotGeneral(a, b, {{}, {}, {1}, {0}});
}

TEST(CostModelMeasured, ConvolutionsRunAtTheConvolutionRate) {
  Module m;
  Instruction* conv = Conv3x3(m);
  const double flops = CostModel::Flops(*conv);
  ASSERT_GT(flops, 0);
  const OpCost measured = CostModel(Measured()).InstructionCost(*conv);
  EXPECT_DOUBLE_EQ(measured.compute_ns, flops / 1e11 * 1e9);
  EXPECT_EQ(measured.roofline, RooflineClass::kCompute);
  EXPECT_EQ(measured.modeled_ns, std::llround(flops / 1e11 * 1e9 + 50));
  // Without the figure: the matrix peak.
  EXPECT_DOUBLE_EQ(CostModel(Plain()).InstructionCost(*conv).compute_ns, flops / 1e12 * 1e9);
}

TEST(CostModelMeasured, AConvolutionWithADilatedInputRunsAtItsOwnRate) {
  // The input gradient of a stride-2 conv: the runtime splits it by output phase.
  Module m;
  Instruction* dilated = StridedConvInputGradient(m);
  ChipProfile p = Measured();
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dilated), 1e11) << "not measured: the convolution rate";
  p.conv_dilated_flops = 4e10;
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dilated), 4e10);
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*Conv3x3(m)), 1e11) << "no dilation";
  ConvDims d = dilated->conv;
  d.lhs_dilation = {1, 1};
  d.rhs_dilation = {2, 2};  // a dilated kernel reads a plain input
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*m.Convolution(dilated->operands[0], dilated->operands[1], d)), 1e11);
}

TEST(CostModelMeasured, SkinnyDotsRunAtTheRateOfTheirSmallestDim) {
  const CostModel model(Measured());
  auto rate = [&](int64_t m, int64_t k, int64_t n) {
    Module mod;
    return model.MatrixRate(*Dot(mod, m, k, n));
  };
  EXPECT_DOUBLE_EQ(rate(8, 1024, 1024), 1e10);
  EXPECT_DOUBLE_EQ(rate(1024, 1024, 32), 4e10);   // few columns
  EXPECT_DOUBLE_EQ(rate(1024, 8, 1024), 1e10);    // a weight gradient: the batch contracted
  EXPECT_DOUBLE_EQ(rate(4, 1024, 1024), 0.5e10);  // below 8 the rows' share of reading the weights
  EXPECT_NEAR(rate(64, 1024, 1024), 1.2e11, 1);   // halfway (log2) from 32 to 128
  EXPECT_DOUBLE_EQ(rate(512, 512, 512), 1e12);    // from 256 up: the peak
  Module mod;
  Instruction* skinny = Dot(mod, 8, 1024, 1024);
  EXPECT_DOUBLE_EQ(model.InstructionCost(*skinny).compute_ns, 2.0 * 8 * 1024 * 1024 / 1e10 * 1e9);
  EXPECT_DOUBLE_EQ(CostModel(Plain()).MatrixRate(*skinny), 1e12) << "not measured: the peak";
}

TEST(CostModelMeasured, AWeightGradientRunsAtTheContractedRatesWhereMeasured) {
  ChipProfile p = Measured();
  p.gemm8k_flops = 0.6e10;
  p.gemm32k_flops = 2e10;
  p.gemm128k_flops = 1e11;
  const CostModel model(p);
  auto rate = [&](int64_t m, int64_t k, int64_t n) {
    Module mod;
    return model.MatrixRate(*Dot(mod, m, k, n));
  };
  EXPECT_DOUBLE_EQ(rate(1024, 8, 1024), 0.6e10);  // the batch contracted
  EXPECT_DOUBLE_EQ(rate(1024, 128, 256), 1e11);
  EXPECT_NEAR(rate(1024, 64, 1024), 6e10, 1);  // halfway (log2) from 32 to 128
  EXPECT_DOUBLE_EQ(rate(8, 1024, 1024), 1e10) << "few rows: the rows' figures";
  EXPECT_DOUBLE_EQ(rate(128, 256, 1024), 2e11);
  EXPECT_DOUBLE_EQ(rate(512, 512, 512), 1e12) << "from 256 up: the peak";
}

TEST(CostModelMeasured, AWindowOpReadsItsWholeWindowPerOutput) {
  Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {4, 16, 32, 32}), "a");
  auto* init = m.Constant(Literal::Scalar(DType::kF32, 0));
  WindowDims w;
  w.dimensions = {1, 1, 2, 2};
  w.strides = {1, 1, 2, 2};
  auto* pool = m.ReduceWindow(a, init, w, ReduceKind::kMax);
  ASSERT_EQ(pool->shape.elements(), 4 * 16 * 16 * 16);
  const CostModel model(Measured());
  EXPECT_DOUBLE_EQ(model.SerialNs(*pool, false), 16384.0 * 4 * 2);
  const OpCost c = model.InstructionCost(*pool);
  EXPECT_DOUBLE_EQ(c.compute_ns, CostModel::Flops(*pool) / 1e11 * 1e9 + 16384.0 * 4 * 2);
  EXPECT_EQ(c.roofline, RooflineClass::kCompute);
  EXPECT_DOUBLE_EQ(CostModel(Plain()).SerialNs(*pool, false), 0);
}

TEST(CostModelMeasured, TranscendentalsAndStridedBroadcastsAddTheirPerElementTime) {
  Module m;
  const Shape full(DType::kF32, {4, 16, 32, 32});
  auto* x = m.Parameter(full, "x");
  auto* scale = m.Parameter(Shape(DType::kF32, {16}), "scale");
  auto* b = m.BroadcastInDim(scale, full.dims, {1});  // per channel of NCHW: strided
  auto* mul = m.Binary(Opcode::kMultiply, x, b);
  auto* e = m.Unary(Opcode::kExponential, mul);
  const CostModel model(Measured());
  EXPECT_DOUBLE_EQ(model.SerialNs(*e, false), 65536.0 * 5);
  EXPECT_DOUBLE_EQ(model.SerialNs(*b, /*fused=*/false), 0) << "the broadcast kernel on its own is a copy";
  EXPECT_DOUBLE_EQ(model.SerialNs(*mul, true), 0);
  // Fused: the exp overlaps the traffic (measured on its own, cold); the
  // gathered broadcast is work on the loop's cached blocks, after it.
  const OpCost fused = model.KernelCost({b, mul, e});
  const double flops = CostModel::Flops(*mul) + CostModel::Flops(*e);
  EXPECT_DOUBLE_EQ(fused.compute_ns, flops / 1e11 * 1e9 + 65536.0 * (3 + 5));
  EXPECT_EQ(fused.modeled_ns,
            std::llround(std::max(flops / 1e11 * 1e9 + 65536.0 * 5, fused.memory_ns) + 65536.0 * 3 +
                         Measured().kernel_overhead_ns));
  // A channel-last layout's broadcast is a trailing block: copied in runs.
  auto* trailing = m.BroadcastInDim(m.Parameter(Shape(DType::kF32, {32}), "c"), full.dims, {3});
  auto* mul2 = m.Binary(Opcode::kMultiply, x, trailing);
  EXPECT_DOUBLE_EQ(model.KernelCost({trailing, mul2}).compute_ns, CostModel::Flops(*mul2) / 1e11 * 1e9);
}

TEST(CostModelMeasured, NarrowOtherDimsRunAtTheNarrowRates) {
  ChipProfile p = Measured();
  p.gemm8k_flops = 0.6e10;
  p.gemm32k_flops = 2e10;
  p.gemm128k_flops = 1e11;
  p.gemm_narrow_flops = {0.5e10, 2e10, 1e11, 0.3e10, 1e10, 0.5e11};
  const CostModel model(p);
  auto rate = [&](int64_t m, int64_t k, int64_t n) {
    Module mod;
    return model.MatrixRate(*Dot(mod, m, k, n));
  };
  EXPECT_DOUBLE_EQ(rate(128, 256, 256), 1e11) << "few rows, the other dims 256";
  EXPECT_DOUBLE_EQ(rate(128, 1024, 1024), 2e11) << "the other dims 1024";
  EXPECT_NEAR(rate(128, 512, 1024), 1.5e11, 1) << "middle dim 512: halfway in log2";
  EXPECT_DOUBLE_EQ(rate(256, 128, 256), 0.5e11) << "a weight gradient, the other dims 256";
  EXPECT_DOUBLE_EQ(rate(128, 256, 4096), 1e11) << "the middle dim decides: 256";
  EXPECT_DOUBLE_EQ(rate(8, 64, 64), 0.5e10) << "below 256: the narrow figures";
  Module mod;
  EXPECT_DOUBLE_EQ(CostModel(Measured()).MatrixRate(*Dot(mod, 128, 256, 256)), 2e11)
      << "not measured: the 1024 figures";
}

TEST(CostModelMeasured, AFusedLoopPaysForEachArithmeticOpBeyondTheFirst) {
  Module m;
  const Shape s(DType::kF32, {1 << 16});
  auto* x = m.Parameter(s, "x");
  auto* y = m.Parameter(s, "y");
  auto* mul = m.Binary(Opcode::kMultiply, x, y);
  auto* add = m.Binary(Opcode::kAdd, mul, x);
  auto* root = m.Unary(Opcode::kSqrt, add);
  auto* e = m.Unary(Opcode::kExponential, root);
  ChipProfile p = Measured();
  p.fused_op_ns = 0.25;
  const double flops = CostModel::Flops(*mul) + CostModel::Flops(*add) + CostModel::Flops(*root);
  // Three arithmetic members: two beyond the first, each 0.25 ns an element.
  EXPECT_DOUBLE_EQ(CostModel(p).KernelCost({mul, add, root}).compute_ns,
                   flops / 1e11 * 1e9 + 2 * 65536 * 0.25);
  // exp is priced as a transcendental, not as arithmetic.
  EXPECT_DOUBLE_EQ(CostModel(p).KernelCost({mul, add, root, e}).compute_ns,
                   (flops + CostModel::Flops(*e)) / 1e11 * 1e9 + 2 * 65536 * 0.25 + 65536 * 5.0);
  EXPECT_DOUBLE_EQ(CostModel(p).KernelCost({mul}).compute_ns, CostModel::Flops(*mul) / 1e11 * 1e9)
      << "one op";
  EXPECT_DOUBLE_EQ(CostModel(Measured()).KernelCost({mul, add, root}).compute_ns, flops / 1e11 * 1e9)
      << "not measured: the roofline alone";
}

TEST(CostModelMeasured, AFusedLoopsBlockWorkAddsToItsTrafficNotOverlapsIt) {
  // The loop streams a block in, then runs its members over it: the profile
  // measures the arithmetic as time beyond a stream-bound loop's, so the
  // model adds it after the roofline's max, whichever side is larger.
  Module m;
  const Shape s(DType::kF32, {1 << 16});
  auto* x = m.Parameter(s, "x");
  auto* y = m.Parameter(s, "y");
  auto* mul = m.Binary(Opcode::kMultiply, x, y);
  auto* add = m.Binary(Opcode::kAdd, mul, x);
  for (double per_op : {0.01, 10.0}) {  // less than the traffic, more than it
    ChipProfile p = Measured();
    p.fused_op_ns = per_op;
    const OpCost c = CostModel(p).KernelCost({mul, add});
    const double flops_ns = (CostModel::Flops(*mul) + CostModel::Flops(*add)) / 1e11 * 1e9;
    EXPECT_DOUBLE_EQ(c.memory_ns, 3.0 * s.bytes() / p.hbm_bandwidth * 1e9);
    EXPECT_EQ(c.modeled_ns,
              std::llround(std::max(flops_ns, c.memory_ns) + 65536 * per_op + p.kernel_overhead_ns))
        << per_op;
  }
}

TEST(CostModelMeasured, AForwardLinearsDotRunsAtTheTransposedWeightsRate) {
  // x [s, in] . W [out, in] contracted on `in`, the weight's minor dim: a
  // Linear's forward, which reads the weight across its rows.
  ChipProfile p = Measured();
  p.gemm8t_flops = 0.8e10;
  p.gemm32t_flops = 3e10;
  p.gemm128t_flops = 1.6e11;
  auto dot = [](Module& mod, int64_t s, int64_t k, int64_t n, bool wt) {
    auto* a = mod.Parameter(Shape(DType::kF32, {s, k}), "x");
    auto* w = mod.Parameter(wt ? Shape(DType::kF32, {n, k}) : Shape(DType::kF32, {k, n}), "w");
    DotDims d;
    d.lhs_contracting = {1};
    d.rhs_contracting = {wt ? 1 : 0};
    return mod.DotGeneral(a, w, d);
  };
  Module mod;
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dot(mod, 8, 1024, 1024, true)), 0.8e10);
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dot(mod, 32, 1024, 1024, true)), 3e10);
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dot(mod, 8, 1024, 1024, false)), 1e10) << "the weight [in, out]";
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dot(mod, 4, 1024, 1024, true)), 0.4e10) << "below 8: falls with s";
  // The few rows on the right: not the measured orientation, the rows' figures.
  auto* a = mod.Parameter(Shape(DType::kF32, {1024, 1024}), "a");
  auto* b = mod.Parameter(Shape(DType::kF32, {8, 1024}), "b");
  DotDims d;
  d.lhs_contracting = {1};
  d.rhs_contracting = {1};
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*mod.DotGeneral(a, b, d)), 1e10);
  // Narrow other dims: the W^T narrow figures (index 6 to 8).
  p.gemm_narrow_flops = {0.5e10, 2e10, 1e11, 0.3e10, 1e10, 0.5e11, 0.4e10, 1.5e10, 0.8e11};
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dot(mod, 8, 256, 256, true)), 0.4e10);
  EXPECT_DOUBLE_EQ(CostModel(p).MatrixRate(*dot(mod, 32, 256, 256, false)), 2e10);
  EXPECT_DOUBLE_EQ(CostModel(Measured()).MatrixRate(*dot(mod, 8, 1024, 1024, true)), 1e10)
      << "not measured: the rows' figures";
}

TEST(CostModelMeasured, StridedBroadcastsAreThoseTheFusedLoopGathers) {
  Module m;
  const Shape full(DType::kF32, {4, 16, 32, 32});
  auto bcast = [&](std::vector<int64_t> in, std::vector<int64_t> dims) {
    return CostModel::IsStridedBroadcast(*m.BroadcastInDim(m.Parameter(Shape(DType::kF32, in), "v"), full.dims, dims));
  };
  EXPECT_TRUE(bcast({16}, {1}));
  EXPECT_TRUE(bcast({16, 1, 1}, {1, 2, 3}));
  EXPECT_TRUE(bcast({4, 32}, {0, 3}));
  EXPECT_FALSE(bcast({32, 32}, {2, 3}));  // trailing block
  EXPECT_FALSE(bcast({4, 16}, {0, 1}));   // leading block
  EXPECT_FALSE(bcast({}, {}));            // one value
  EXPECT_FALSE(bcast({1}, {1}));
}

TEST(CostModelMeasured, ChipsOutnumberingCoresStreamCold) {
  Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {1 << 20}), "a");
  auto* add = m.Binary(Opcode::kAdd, a, a);
  const double bytes = 12.0 * (1 << 20);
  EXPECT_DOUBLE_EQ(CostModel(Measured().ForSharedCores(8, 2)).InstructionCost(*add).memory_ns, bytes / 25);
  EXPECT_DOUBLE_EQ(CostModel(Measured().ForSharedCores(2, 2)).InstructionCost(*add).memory_ns, bytes / 100);
  EXPECT_DOUBLE_EQ(CostModel(Plain().ForSharedCores(8, 2)).InstructionCost(*add).memory_ns, bytes / 100)
      << "no cold figure: the stream bandwidth";
  EXPECT_EQ(Measured().ForSharedCores(8, 2).hbm_bandwidth, 1e11);
  // The executor's collective passes through every member's buffer: cold too.
  ChipProfile in_memory = Measured();
  in_memory.collectives_in_memory = true;
  const double traffic = InMemoryCollectiveBytes(CollectiveKind::kAllReduce, 1 << 20, 8);
  EXPECT_DOUBLE_EQ(CostModel(in_memory.ForSharedCores(8, 2)).CollectiveNs(CollectiveKind::kAllReduce, 1 << 20, 8),
                   50 + traffic / 25);
  EXPECT_DOUBLE_EQ(CostModel(in_memory).CollectiveNs(CollectiveKind::kAllReduce, 1 << 20, 8), 50 + traffic / 100);
}

TEST(CostModelMeasured, ExpectedMaxOfNormalsHasItsKnownValues) {
  EXPECT_EQ(ExpectedMaxOfNormals(1), 0);
  EXPECT_NEAR(ExpectedMaxOfNormals(2), 1 / std::sqrt(3.14159265358979), 1e-4);  // 1/sqrt(pi)
  EXPECT_NEAR(ExpectedMaxOfNormals(3), 1.5 / std::sqrt(3.14159265358979), 1e-4);
  EXPECT_NEAR(ExpectedMaxOfNormals(8), 1.4236, 1e-3);     // tables of normal order statistics
  EXPECT_NEAR(ExpectedMaxOfNormals(100), 2.5076, 1e-3);
}

TEST(CostModelMeasured, ChipsOutnumberingCoresWaitForTheSlowestAtEachCollective) {
  ChipProfile p = Measured();
  p.chip_spread_ns = 1e4;  // a segment of T ns: chips spread with sd sqrt(1e4 T)
  const CostModel shared(p.ForSharedCores(8, 2));
  EXPECT_TRUE(shared.profile().chip_waits);
  // 1 ms of work since the previous collective: sd 100 us; 8 chips' slowest
  // arrives E[max of 8] = 1.4236 sd after the mean.
  EXPECT_NEAR(shared.ChipWaitNs(1e6, 8), ExpectedMaxOfNormals(8) * 1e5, 1e-6);
  EXPECT_NEAR(shared.ChipWaitNs(4e6, 8), 2 * shared.ChipWaitNs(1e6, 8), 1e-6) << "grows with sqrt(T)";
  EXPECT_NEAR(shared.ChipWaitNs(1e6, 2), ExpectedMaxOfNormals(2) * 1e5, 1e-6);
  EXPECT_EQ(shared.ChipWaitNs(1e6, 1), 0) << "one chip waits for no one";
  EXPECT_EQ(shared.ChipWaitNs(0, 8), 0);
  // A chip per core, no figure, or a profile other than a shared cpu: no wait.
  EXPECT_EQ(CostModel(p.ForSharedCores(2, 2)).ChipWaitNs(1e6, 2), 0);
  EXPECT_EQ(CostModel(p).ChipWaitNs(1e6, 8), 0);
  EXPECT_EQ(CostModel(Measured().ForSharedCores(8, 2)).ChipWaitNs(1e6, 8), 0);
  for (const char* name : {"tpu-v4", "h100"})
    EXPECT_EQ(CostModel(FindProfile(name)->ForSharedCores(4096, 2)).ChipWaitNs(1e6, 8), 0) << name;
}

TEST(CostModelMeasured, TheHostsStallsAddTheirChanceTimesTheirLengthToTheWait) {
  ChipProfile p = Measured();
  p.chip_spread_ns = 1e4;
  const double body = CostModel(p.ForSharedCores(8, 2)).ChipWaitNs(1e6, 8);
  p.host_stall_per_s = 2;       // two stalls a second of a core's work ...
  p.host_stall_mean_ns = 3e6;   // ... of 3 ms each
  const CostModel shared(p.ForSharedCores(8, 2));
  ChipProfile q = p;
  q.host_stall_per_s = 0;
  const CostModel no_stalls(q.ForSharedCores(8, 2));
  // 8 chips x 1 ms of work: 8 ms of the cores' time, a stall with chance 1 - exp(-0.016).
  EXPECT_NEAR(shared.ChipWaitNs(1e6, 8) - body, (1 - std::exp(-0.016)) * 3e6, 1e-6);
  // Over long segments the chance saturates: at most one stall's length waited for.
  EXPECT_LT(shared.ChipWaitNs(1e12, 8) - no_stalls.ChipWaitNs(1e12, 8), 3e6 + 1e-3);
  // Fewer chips in the group, fewer chances.
  EXPECT_LT(shared.ChipWaitNs(1e6, 2) - no_stalls.ChipWaitNs(1e6, 2), shared.ChipWaitNs(1e6, 8) - body);
  // No figure, or no shared cores: nothing.
  EXPECT_EQ(CostModel(p.ForSharedCores(2, 2)).ChipWaitNs(1e6, 2), 0);
}

TEST(CostModelMeasured, SmallKernelsPayTheColdOverheadReducesTheirPerElementTime) {
  ChipProfile p = Measured();
  p.cold_kernel_overhead_ns = 3000;
  p.reduce_read_ns = 2;
  Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {256}), "a");
  auto* add = m.Binary(Opcode::kAdd, a, a);
  const double traffic = 12.0 * 256;
  // Chips sharing the cores: a small kernel costs the measured overhead.
  EXPECT_EQ(CostModel(p.ForSharedCores(8, 2)).InstructionCost(*add).modeled_ns, std::llround(traffic / 25 + 3000));
  EXPECT_EQ(CostModel(p).InstructionCost(*add).modeled_ns, std::llround(traffic / 100 + 50)) << "a chip per core";
  // A reduce on its own: its operand's elements at the measured rate.
  auto* x = m.Parameter(Shape(DType::kF32, {4, 16, 32, 32}), "x");
  auto* r = m.Reduce(x, m.ScalarConstant(DType::kF32, 0), {0, 2, 3}, ReduceKind::kSum);
  const OpCost c = CostModel(p).InstructionCost(*r);
  EXPECT_DOUBLE_EQ(c.compute_ns, 65536 / 1e11 * 1e9 + 2 * 65536);
  EXPECT_EQ(c.roofline, RooflineClass::kCompute);
  EXPECT_DOUBLE_EQ(CostModel(Measured()).InstructionCost(*r).compute_ns, 65536 / 1e11 * 1e9) << "not measured";
}

TEST(CostModelMeasured, MeasuredCollectivesAreInterpolatedBetweenTheirPoints) {
  ChipProfile p = Measured();
  p.collectives_in_memory = true;
  // all_reduce: 10 us at the first point, then 4x the time per 8x the traffic
  // (the caches' gain fading), the last at 8x per 8x (memory).
  p.collective_ns[0] = {10e3, 40e3, 160e3, 1280e3};
  const CostModel model(p);
  const auto& at = kCollectiveTraffic;
  for (int k = 0; k < kCollectivePoints; ++k)
    EXPECT_NEAR(model.MeasuredCollectiveNs(CollectiveKind::kAllReduce, at[k]), p.collective_ns[0][k], 1e-6)
        << k;
  // Log-log between points: halfway in log traffic, halfway in log time.
  EXPECT_NEAR(model.MeasuredCollectiveNs(CollectiveKind::kAllReduce, std::sqrt(at[0] * at[1])), 20e3, 1e-6);
  // Above the last point: its time per byte.
  EXPECT_NEAR(model.MeasuredCollectiveNs(CollectiveKind::kAllReduce, 2 * at[3]), 2 * 1280e3, 1e-6);
  // Below the first: the kernel overhead plus the first point's time per byte.
  EXPECT_NEAR(model.MeasuredCollectiveNs(CollectiveKind::kAllReduce, at[0] / 4), 50 + (10e3 - 50) / 4, 1e-6);
  // CollectiveNs prices the executor's collective by its traffic.
  const int64_t bytes = 1 << 20;
  const double traffic = InMemoryCollectiveBytes(CollectiveKind::kAllReduce, bytes, 8);
  EXPECT_DOUBLE_EQ(model.CollectiveNs(CollectiveKind::kAllReduce, bytes, 8),
                   model.MeasuredCollectiveNs(CollectiveKind::kAllReduce, traffic));
  EXPECT_EQ(model.CollectiveNs(CollectiveKind::kAllReduce, bytes, 1), 0) << "one chip moves nothing";
  // A kind not measured keeps the pass at the stream's bandwidth; permutes are priced as all_gather's copies.
  EXPECT_EQ(model.MeasuredCollectiveNs(CollectiveKind::kReduceScatter, traffic), 0);
  EXPECT_DOUBLE_EQ(model.CollectiveNs(CollectiveKind::kReduceScatter, bytes, 8),
                   50 + InMemoryCollectiveBytes(CollectiveKind::kReduceScatter, bytes, 8) / 100);
  p.collective_ns[MeasuredCollectiveRow(CollectiveKind::kAllGather)] = {5e3, 20e3, 80e3, 640e3};
  EXPECT_NEAR(CostModel(p).MeasuredCollectiveNs(CollectiveKind::kCollectivePermute, at[2]), 80e3, 1e-6);
  // A quick calibration measures the first points only: the last measured one extrapolates.
  ChipProfile quick = Measured();
  quick.collective_ns[0] = {10e3, 40e3, 0, 0};
  EXPECT_NEAR(CostModel(quick).MeasuredCollectiveNs(CollectiveKind::kAllReduce, 4 * at[1]), 160e3, 1e-6);
}

TEST(CostModelMeasured, KernelsBesideTheOtherCoresChipsRunAtTheMeasuredShare) {
  ChipProfile p = Measured();
  p.beside_compute = 1.25;
  p.beside_memory = 1.6;
  p.reduce_read_ns = 2;
  p.collectives_in_memory = true;
  p.collective_ns[0] = {10e3, 40e3, 160e3, 1280e3};
  p.conv_dilated_flops = 4e10;
  p.gemm8t_flops = 0.8e10;
  p.gemm_narrow_flops[8] = 2e10;
  const ChipProfile shared = p.ForSharedCores(8, 2);
  EXPECT_DOUBLE_EQ(shared.peak_flops, 1e12 / 1.25);
  EXPECT_DOUBLE_EQ(shared.conv_flops, 1e11 / 1.25);
  EXPECT_DOUBLE_EQ(shared.conv_dilated_flops, 4e10 / 1.25);
  EXPECT_DOUBLE_EQ(shared.gemm8t_flops, 0.8e10 / 1.25);
  EXPECT_DOUBLE_EQ(shared.gemm_narrow_flops[8], 2e10 / 1.25);
  EXPECT_DOUBLE_EQ(shared.gemm32_flops, 4e10 / 1.25);
  EXPECT_DOUBLE_EQ(shared.transcendental_ns, 5 * 1.25);
  EXPECT_DOUBLE_EQ(shared.cold_bandwidth, 2.5e10 / 1.6);
  EXPECT_DOUBLE_EQ(shared.reduce_read_ns, 2 * 1.6);
  EXPECT_NE(shared.description.find("GEMMs x1.25, streams x1.60"), std::string::npos) << shared.description;
  // A collective runs on one thread while the other cores wait for it: as measured alone.
  EXPECT_EQ(CostModel(shared).CollectiveNs(CollectiveKind::kAllReduce, 1 << 20, 8),
            CostModel(p).CollectiveNs(CollectiveKind::kAllReduce, 1 << 20, 8));
  // A chip per core, or no figure: the one-thread figures.
  EXPECT_EQ(p.ForSharedCores(2, 2).peak_flops, 1e12);
  EXPECT_EQ(Measured().ForSharedCores(8, 2).peak_flops, 1e12);
}

TEST(CostModelMeasured, TheFixedCpuProfileHasNoFiguresAndPricesThePlainRoofline) {
  const ChipProfile cpu = *FindProfile("cpu");
  EXPECT_EQ(cpu.conv_flops, 0);
  EXPECT_EQ(cpu.cold_bandwidth, 0);
  EXPECT_EQ(cpu.gemm8_flops, 0);
  EXPECT_EQ(cpu.chip_spread_ns, 0);
  EXPECT_EQ(cpu.collective_ns[0][0], 0);
  EXPECT_EQ(cpu.beside_compute, 0);
  EXPECT_FALSE(cpu.ForSharedCores(8, 2).chip_waits);
  Module m;
  Instruction* conv = Conv3x3(m);
  int64_t read = 0, written = 0;
  CostModel::Bytes(*conv, &read, &written);
  const CostModel model(cpu.ForSharedCores(8, 2));
  EXPECT_EQ(model.InstructionCost(*conv).modeled_ns,
            model.Roofline(CostModel::Flops(*conv), read, written, /*matrix=*/true).modeled_ns);
}

}  // namespace
}  // namespace shardscope::compiler
