// Microbenchmarks of the op classes the `cpu` profile's roofline misprices
// (docs/cost_model.md, "Calibrating cpu"): each runs the runtime's own kernel
// (EvalInstruction, EvalFusedKernel) at a few representative shapes and is
// timed on the thread's CPU clock, as the device clock times a chip. Operands
// rotate through enough copies to exceed the caches, as a chip's do when
// eight chips time-share two cores. Measured, never fitted to the samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::runtime {

struct OpClassFigures {
  double conv_flops = 0;            // convolution FLOP/s, median over the shapes
  double conv_dilated_flops = 0;    // ... an input dilated by 2 (a strided conv's input gradient)
  double cold_bandwidth = 0;        // stream bytes/s, operands out of cache
  double window_read_ns = 0;        // reduce_window: ns per window element read
  double transcendental_ns = 0;     // exp and logistic: ns per element (their mean)
  double strided_broadcast_ns = 0;  // fused loop, strided broadcast: ns per element over a plain one
  double gemm8_flops = 0, gemm32_flops = 0, gemm128_flops = 0;     // smallest dim 8, 32, 128: the rows
  double gemm8k_flops = 0, gemm32k_flops = 0, gemm128k_flops = 0;  // ... the contraction (a weight gradient)
  double gemm8t_flops = 0, gemm32t_flops = 0, gemm128t_flops = 0;  // ... the rows, weight [out,in] (x W^T)
  // The same nine with the other dims a quarter as wide (gemm_other_dim / 4)
  double gemm8_narrow_flops = 0, gemm32_narrow_flops = 0, gemm128_narrow_flops = 0;
  double gemm8k_narrow_flops = 0, gemm32k_narrow_flops = 0, gemm128k_narrow_flops = 0;
  double gemm8t_narrow_flops = 0, gemm32t_narrow_flops = 0, gemm128t_narrow_flops = 0;
  double cold_kernel_overhead_ns = 0;  // a kernel of a few KiB, cold, fresh result: its time less its traffic
  double reduce_read_ns = 0;           // a reduce kernel: ns per operand element
  double fused_op_ns = 0;              // a fused loop: ns per element per arithmetic op beyond the first
  double chip_spread_ns = 0;           // chips' segment-time variance per ns (cpu_spread_benchmark.h)
  // The host's stalls of a core (MeasureHostStalls): a second of a core's
  // work, and their mean length in ns (0: none seen)
  double host_stall_per_s = 0, host_stall_mean_ns = 0;
  // A GEMM's and a stream's slowdown with another core running chips (MeasureBeside in the .cc):
  // the mean of beside a compute-bound and beside a memory-bound neighbour; 0: one core
  double beside_compute = 0, beside_memory = 0;

  bool measured() const { return conv_flops > 0; }
};

struct OpClassPlan {
  bool measure = true;                        // false: leave the figures at 0
  int64_t cold_bytes = int64_t{96} << 20;     // operand copies rotate over at least this much
  int64_t conv_batch = 4;                     // a chip's share of the cnn's batch of 32 on 8 chips
  int64_t gemm_other_dim = 1024;              // the skinny GEMMs' other two dims
  int64_t elements = int64_t{1} << 16;        // elementwise, window and broadcast operands
  int64_t small_elements = 1024;              // the small kernels: 4 KiB of f32 per operand
  bool beside = true;  // the slowdowns beside a busy core (beside_compute, beside_memory)
};

// The median of timings (the mean of the middle two for an even count); 0 when empty.
double MedianOf(std::vector<double> v);

// Measures the figures; appends the table (as printed by `shardscope
// calibrate`) to `rows`.
OpClassFigures MeasureOpClasses(const OpClassPlan& plan, std::vector<std::string>* rows);

}  // namespace shardscope::runtime
