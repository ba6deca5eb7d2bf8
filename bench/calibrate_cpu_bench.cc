// Calibrates the cost model's `cpu` profile (compiler/cost_model.cc) on two
// microbenchmarks only, never on the samples' kernels:
//   1. GEMM: a square f32 dot_general through the runtime's kernel
//      (EvalInstruction), n = 256, 512, 1024 -> peak FLOP/s of one core, and
//      again with an intra-op gang spanning every core (a chip on a mesh with
//      fewer chips than cores), timed as the executor times it: the chip
//      thread's CPU time plus the helpers' excess (Gang::TakeExtraNs).
//   2. Stream: an f32 elementwise add through the same kernel entry, from
//      1 Ki to 16 Mi elements -> bandwidth and per-kernel overhead, fitted as
//      t = overhead + bytes / bandwidth by least squares on the relative error
//      (the error the model is scored on), so small and large kernels weigh
//      alike.
// Each kernel is timed on the thread's CPU clock, as the executor times the
// device clock. Three parameters in all; the program prints them in the form
// the profile uses. Run it with OPENBLAS_CORETYPE unset:
//
//   OPENBLAS_CORETYPE= build-cost/bench/calibrate_cpu_bench
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "bench/bench_main.h"
#include "compiler/ir.h"
#include "runtime/intra_op.h"
#include "runtime/kernels.h"

namespace {

using shardscope::DType;
using shardscope::Literal;
using shardscope::Shape;
namespace compiler = shardscope::compiler;

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Literal Random(const Shape& s) {
  Literal l(s);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < l.elements(); ++i) l.as<float>()[i] = u(rng);
  return l;
}

// Median device time of one kernel call, after a warm-up call: thread CPU
// time, plus the helpers' critical-path excess when `gang` runs it.
double MedianNs(const compiler::Instruction& i, const std::vector<const Literal*>& ops, Literal* out,
                int reps, shardscope::runtime::Gang* gang = nullptr) {
  shardscope::runtime::GangScope scope(gang);
  if (absl::Status s = shardscope::runtime::EvalInstruction(i, ops, 0, out); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  if (gang) gang->TakeExtraNs();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    int64_t t0 = ThreadCpuNs();
    (void)shardscope::runtime::EvalInstruction(i, ops, 0, out);
    t.push_back(static_cast<double>(ThreadCpuNs() - t0 + (gang ? gang->TakeExtraNs() : 0)));
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  shardscope::bench::KeepFreedMemory();  // as the `run` driver does
  if (const char* c = std::getenv("OPENBLAS_CORETYPE"); c && *c)
    std::fprintf(stderr, "warning: OPENBLAS_CORETYPE=%s is set; unset it for calibration\n", c);

  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  shardscope::runtime::Gang gang(std::max(0, cores - 1));
  double gemm_peak = 0, gang_peak = 0;
  for (shardscope::runtime::Gang* g : {static_cast<shardscope::runtime::Gang*>(nullptr), &gang}) {
  std::printf("GEMM (dot_general f32 [n,n]x[n,n], device time, median) on %d thread(s)\n", g ? g->width() : 1);
  double& peak = g ? gang_peak : gemm_peak;
  for (int64_t n : {256, 512, 1024}) {
    compiler::Module m;
    auto* a = m.Parameter(Shape(DType::kF32, {n, n}), "a");
    auto* b = m.Parameter(Shape(DType::kF32, {n, n}), "b");
    compiler::DotDims dd;
    dd.lhs_contracting = {1};
    dd.rhs_contracting = {0};
    auto* dot = m.DotGeneral(a, b, dd);
    Literal la = Random(a->shape), lb = Random(b->shape), out(dot->shape);
    double ns = MedianNs(*dot, {&la, &lb}, &out, n >= 1024 ? 7 : 21, g);
    double rate = 2.0 * n * n * n / ns * 1e9;
    peak = std::max(peak, rate);
    std::printf("  n=%-5lld %10.1f us  %6.1f GFLOP/s\n", static_cast<long long>(n), ns / 1e3, rate / 1e9);
  }
  }

  std::printf("stream (add f32, 3 x 4 bytes per element, thread CPU time, median)\n");
  // Weighted least squares of t = c + b * x (x bytes, b = 1/bandwidth) with
  // weights 1/t^2: minimises the summed squared relative error.
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
  for (int64_t e = 1 << 10; e <= (int64_t{1} << 24); e *= 4) {
    compiler::Module m;
    auto* a = m.Parameter(Shape(DType::kF32, {e}), "a");
    auto* b = m.Parameter(Shape(DType::kF32, {e}), "b");
    auto* add = m.Binary(compiler::Opcode::kAdd, a, b);
    Literal la = Random(a->shape), lb = Random(b->shape), out(add->shape);
    double ns = MedianNs(*add, {&la, &lb}, &out, e >= (1 << 22) ? 7 : 41);
    double x = 12.0 * static_cast<double>(e);
    std::printf("  %9lld elements %10.2f us  %6.2f GB/s\n", static_cast<long long>(e), ns / 1e3, x / ns);
    double w = 1.0 / (ns * ns);
    s00 += w;
    s01 += w * x;
    s11 += w * x * x;
    r0 += w * ns;
    r1 += w * x * ns;
  }
  double det = s00 * s11 - s01 * s01;
  double overhead = (r0 * s11 - r1 * s01) / det;
  double per_byte = (s00 * r1 - s01 * r0) / det;
  double bandwidth = per_byte > 0 ? 1.0 / per_byte * 1e9 : 0;

  std::printf("\ncpu profile (compiler/cost_model.cc):\n");
  std::printf("  peak_flops         = %.1f * kGiga;  // GEMM FLOP/s, one core\n", gemm_peak / 1e9);
  std::printf("  gang_peak_flops    = %.1f * kGiga;  // GEMM FLOP/s, a gang of %d\n", gang_peak / 1e9, gang.width());
  std::printf("  hbm_bandwidth      = %.2f * kGiga;  // stream bytes/s, one core\n", bandwidth / 1e9);
  std::printf("  kernel_overhead_ns = %.0f;           // stream fit intercept\n", std::max(0.0, overhead));
  return 0;
}
