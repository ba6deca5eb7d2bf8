// GEMM through the runtime's kernel (EvalInstruction on a dot_general
// [M,K]x[K,N] f32) side by side with a direct Eigen product on the same
// shapes and buffers, n = 256, 512, 1024. The two should match: the kernel is
// meant to be one Eigen GEMM plus negligible dispatch. Counter "FLOPS" is
// 2*n^3 per iteration as a rate (shown as G/s = GFLOP/s).
//
//   ./build/bench/gemm_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <malloc.h>

#include <random>

// bench/CMakeLists.txt links shardscope_runtime and benchmark only, and the
// runtime keeps Eigen private; fall back to Debian's include path.
// GCC 12 warns -Wmaybe-uninitialized inside its AVX-512 intrinsics once
// Eigen's GEMM is inlined (a false positive of _mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#if __has_include(<Eigen/Core>)
#include <Eigen/Core>
#else
#include <eigen3/Eigen/Core>
#endif
#include <benchmark/benchmark.h>

#include "compiler/ir.h"
#include "runtime/kernels.h"

namespace {

using shardscope::DType;
using shardscope::Literal;
using shardscope::Shape;

Literal RandomF32(int64_t rows, int64_t cols) {
  Literal l(Shape(DType::kF32, {rows, cols}));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < l.elements(); ++i) l.as<float>()[i] = u(rng);
  return l;
}

void SetFlops(benchmark::State& state, int64_t n) {
  state.counters["FLOPS"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_EvalInstructionDot(benchmark::State& state) {
  const int64_t n = state.range(0);
  shardscope::compiler::Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {n, n}), "a");
  auto* b = m.Parameter(Shape(DType::kF32, {n, n}), "b");
  shardscope::compiler::DotDims dd;
  dd.lhs_contracting = {1};
  dd.rhs_contracting = {0};
  auto* dot = m.DotGeneral(a, b, dd);
  Literal la = RandomF32(n, n), lb = RandomF32(n, n), out(dot->shape);
  for (auto _ : state) {
    absl::Status s = shardscope::runtime::EvalInstruction(*dot, {&la, &lb}, 0, &out);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n);
}

void BM_EigenDirect(benchmark::State& state) {
  const int64_t n = state.range(0);
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Literal la = RandomF32(n, n), lb = RandomF32(n, n), out(Shape(DType::kF32, {n, n}));
  Eigen::Map<const RowMat> A(la.as<float>(), n, n), B(lb.as<float>(), n, n);
  Eigen::Map<RowMat> C(out.as<float>(), n, n);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n);
}

// Interleaved per size so that the two columns of one n run back to back.
BENCHMARK(BM_EvalInstructionDot)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenDirect)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvalInstructionDot)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenDirect)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvalInstructionDot)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenDirect)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  // Keep freed GEMM work buffers in the heap: returning them to the OS makes
  // every call page-fault them back in (MACHINE-NOTES, "Two traps").
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
