// Single-precision GEMM for the kernels, on whichever of two backends measures
// faster on this machine: Eigen's own GEMM or OpenBLAS (single-threaded; the
// runtime does its own splitting, see intra_op.h). Which one is faster depends
// on the machine and its environment (OPENBLAS_CORETYPE=Haswell halves
// OpenBLAS on AVX-512 machines), so the choice is measured once per process,
// side by side on the same shapes, instead of assumed.
#pragma once

#include <cstdint>
#include <string>

namespace shardscope::runtime {

// C = op(A) op(B), or C += op(A) op(B) when `accumulate`, all row-major with
// leading dimensions lda/ldb/ldc; op(X) is X or its transpose. A is [m,k] (or
// [k,m] when a_t), B is [k,n] (or [n,k]).
void Sgemm(bool a_t, bool b_t, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate = false);

struct GemmBackend {
  bool use_blas = false;
  std::string blas_core;       // OpenBLAS's kernel family, e.g. "SkylakeX"
  double blas_gflops = 0;      // measured on one thread, the calibration shape
  double eigen_gflops = 0;
  std::string Describe() const;  // "openblas (SkylakeX) 190 GFLOP/s vs eigen 150 GFLOP/s"
};

// Measures both backends the first time it is called (a few ms) and keeps the
// choice. SHARDSCOPE_GEMM=eigen|openblas forces one.
const GemmBackend& ChosenGemmBackend();

}  // namespace shardscope::runtime
