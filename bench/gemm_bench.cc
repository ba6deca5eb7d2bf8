// GEMM through the runtime's kernel (EvalInstruction on a dot_general
// [M,K]x[K,N] f32) side by side with direct library calls on the same shapes:
// on one thread against Eigen (n = 256, 512, 1024), and on every core (the
// runtime's gang, as a 1-chip mesh runs it) against one OpenBLAS call with as
// many threads, on the llama sample's projection shapes. Counter "FLOPS" is
// 2*M*N*K per iteration as a rate (shown as G/s = GFLOP/s). Run with
// OPENBLAS_CORETYPE unset (MACHINE-NOTES).
//
//   ./build/bench/gemm_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <random>
#include <thread>

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

#include <cblas.h>

#include "bench/bench_main.h"
#include "compiler/ir.h"
#include "runtime/intra_op.h"
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

void SetFlops(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  state.counters["FLOPS"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

// An [M,K] x [K,N] f32 dot_general through the runtime's kernel; with `b_t`
// the right operand is stored [N,K] (a Linear layer's weight, as the mlp's
// forward pass reads it).
void RunRuntimeDot(benchmark::State& state, int64_t m, int64_t k, int64_t n, bool b_t = false) {
  shardscope::compiler::Module mod;
  auto* a = mod.Parameter(Shape(DType::kF32, {m, k}), "a");
  auto* b = mod.Parameter(b_t ? Shape(DType::kF32, {n, k}) : Shape(DType::kF32, {k, n}), "b");
  shardscope::compiler::DotDims dd;
  dd.lhs_contracting = {1};
  dd.rhs_contracting = {b_t ? 1 : 0};
  auto* dot = mod.DotGeneral(a, b, dd);
  Literal la = RandomF32(m, k), lb = b_t ? RandomF32(n, k) : RandomF32(k, n), out(dot->shape);
  for (auto _ : state) {
    absl::Status s = shardscope::runtime::EvalInstruction(*dot, {&la, &lb}, 0, &out);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, m, n, k);
}

void BM_EvalInstructionDot(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunRuntimeDot(state, n, n, n);
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
  SetFlops(state, n, n, n);
}

// The llama sample's projection shapes on the whole machine: the runtime's
// kernel with a gang spanning every core (as a 1-chip mesh runs it) against
// one direct OpenBLAS call with as many threads. Args: M, K, N, B stored
// transposed (0/1).
void BM_GangDot(benchmark::State& state) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  shardscope::runtime::Gang gang(std::max(0, cores - 1));
  shardscope::runtime::GangScope scope(&gang);
  RunRuntimeDot(state, state.range(0), state.range(1), state.range(2), state.range(3) != 0);
}

void BM_BlasDirectAllCores(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool b_t = state.range(3) != 0;
  Literal la = RandomF32(m, k), lb = b_t ? RandomF32(n, k) : RandomF32(k, n), out(Shape(DType::kF32, {m, n}));
  openblas_set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_t ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, la.as<float>(), k,
                lb.as<float>(), b_t ? k : n, 0.0f, out.as<float>(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  SetFlops(state, m, n, k);
}

BENCHMARK(BM_GangDot)->Args({1024, 256, 256, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({1024, 256, 256, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GangDot)->Args({1024, 256, 1024, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({1024, 256, 1024, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GangDot)->Args({1024, 1024, 256, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({1024, 1024, 256, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
// The mlp's forward layers at batch 64: skinny, B-bound, the weight stored
// [out, in] as nn::Linear keeps it.
BENCHMARK(BM_GangDot)->Args({64, 1024, 1024, 1})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({64, 1024, 1024, 1})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GangDot)->Args({64, 784, 1024, 1})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({64, 784, 1024, 1})->Unit(benchmark::kMicrosecond)->UseRealTime();
// Its input gradient: [64, 1024] x [1024, 1024], the weight as stored.
BENCHMARK(BM_GangDot)->Args({64, 1024, 1024, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({64, 1024, 1024, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
// Weight gradients: [256, B*T] x [B*T, 1024] and [256, B*T] x [B*T, 256].
BENCHMARK(BM_GangDot)->Args({256, 1024, 1024, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({256, 1024, 1024, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GangDot)->Args({256, 1024, 256, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BlasDirectAllCores)->Args({256, 1024, 256, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();

// Interleaved per size so that the two columns of one n run back to back.
BENCHMARK(BM_EvalInstructionDot)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenDirect)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvalInstructionDot)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenDirect)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvalInstructionDot)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EigenDirect)->Arg(1024)->Unit(benchmark::kMicrosecond);

}  // namespace

// GEMM work buffers freed between calls stay in the heap (KeepFreedMemory).
int main(int argc, char** argv) { return shardscope::bench::BenchmarkMain(argc, argv); }
