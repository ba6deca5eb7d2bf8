// Which speed this machine runs at now, in about a tenth of a second
// (docs/cost_model.md, "The machine's speed moves"). On the shared VMs this
// project runs on, the same cores ran a GEMM 1.2x, a stream 2.5x and an exp
// 1.8x faster for stretches of seconds to minutes, then went back: a profile
// measured in one stretch mispriced the samples' steps by 35% in the other. The probe
// times four kernels, one per kind of figure that moves apart (a GEMM, a
// stream beyond the caches, a transcendental, a reduce); every calibration
// pass carries the probe taken with it, so a run picks the passes measured at
// the speed the machine has now (cpu_calibration.h).
#pragma once

#include <cstdint>
#include <string>

namespace shardscope::runtime {

struct SpeedProbe {
  double gemm_flops = 0;    // square f32 GEMM on one core, FLOP/s
  double stream_bytes = 0;  // f32 add beyond the caches, bytes/s
  double exp_ns = 0;        // f32 exp, ns per element
  double reduce_ns = 0;     // f32 sum of a vector, ns per element
  int64_t measured_at_unix_s = 0;

  bool measured() const { return gemm_flops > 0 && stream_bytes > 0 && exp_ns > 0 && reduce_ns > 0; }
  // How far apart two probes are: the mean over the four figures of |ln| of
  // their ratio (0.1: 10.5% apart on average; one figure's own scatter, a
  // stream's up to 15% between probes a second apart, moves it by a quarter);
  // infinity when either is not measured.
  double DistanceTo(const SpeedProbe& other) const;
  // "GEMM 193.6 GFLOP/s, stream 34.8 GB/s, exp 2.32 ns, reduce 0.19 ns per element".
  std::string Describe() const;
  // "GEMM 1.18x, stream 1.45x, exp 1.75x, reduce 2.20x as fast" as `base` (speed ratios: an exp
  // 1.75x as fast takes 1/1.75 the ns).
  std::string RatiosTo(const SpeedProbe& base) const;
  // {"gemm_flops": ..., "stream_bytes": ..., "exp_ns": ..., "reduce_ns": ..., "measured_at_unix_s": ...}
  std::string Json() const;
  // The object Json() writes; false (and `*out` untouched) when it is not one
  // with four figures each in a range any machine could read (GEMM 1e6-1e16
  // FLOP/s, stream 1e6-1e14 bytes/s, exp 1e-4-1e5 ns, reduce 1e-5-1e5 ns).
  static bool FromJson(const std::string& text, SpeedProbe* out);
  // The midpoint of two probes, figure by figure in ratio (geometric mean).
  static SpeedProbe Midpoint(const SpeedProbe& a, const SpeedProbe& b);
};

// Two probes further apart than this ran at different speeds of the machine.
// Measured 2026-11-29 on 18 calibration passes, each probed before and after
// (about 6 s apart): the nine that held one speed read 0.026-0.079 between
// their two probes, the ones the machine changed speed under 0.20-0.63 (the
// stream 13.5 against 34 GB/s, exp 3.8 against 2.05 ns).
constexpr double kSameSpeedDistance = 0.12;

// Times the four kernels through the runtime's own entry (EvalInstruction) on
// the thread's CPU clock, `rounds` times interleaved; each figure the median.
SpeedProbe MeasureSpeedProbe(int rounds = 15);

}  // namespace shardscope::runtime
