// Calibrates the cost model's `cpu` profile on microbenchmarks only, never on
// the samples' kernels, and prints the table and the four values. The
// measurement itself is runtime/cpu_calibration.cc (MeasureCpu), the one a run
// makes when the profile is first needed on a machine and `shardscope
// calibrate` repeats; this program prints it without touching the cache, in
// the form compiler/cost_model.cc's fixed profile takes. Run it with
// OPENBLAS_CORETYPE unset:
//
//   env -u OPENBLAS_CORETYPE build/bench/calibrate_cpu_bench
#include <cstdio>
#include <cstdlib>

#include "bench/bench_main.h"
#include "runtime/cpu_calibration.h"

int main() {
  shardscope::bench::KeepFreedMemory();  // as the `run` driver does
  if (const char* c = std::getenv("OPENBLAS_CORETYPE"); c && *c)
    std::fprintf(stderr, "warning: OPENBLAS_CORETYPE=%s is set; unset it for calibration\n", c);
  const shardscope::runtime::CpuCalibration c = shardscope::runtime::MeasureCpu();
  for (const std::string& row : c.rows) std::printf("%s\n", row.c_str());
  std::printf("\ncpu profile (compiler/cost_model.cc), measured in %.2f s:\n", c.seconds);
  std::printf("  peak_flops         = %.1f * kGiga;  // GEMM FLOP/s, one core\n", c.peak_flops / 1e9);
  std::printf("  gang_peak_flops    = %.1f * kGiga;  // GEMM FLOP/s, a gang of %d\n", c.gang_peak_flops / 1e9,
              c.gang_width);
  std::printf("  hbm_bandwidth      = %.2f * kGiga;  // stream bytes/s, one core\n", c.hbm_bandwidth / 1e9);
  std::printf("  kernel_overhead_ns = %.0f;           // stream fit intercept\n", c.kernel_overhead_ns);
  return 0;
}
