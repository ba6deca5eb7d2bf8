// Single-precision GEMM for the kernels, on OpenBLAS (single-threaded; the
// runtime does its own splitting, see intra_op.h) or, when asked, Eigen's own
// GEMM. The choice is fixed, not timed: the two sum in different orders, so a
// choice made by timing them at start-up (as this once did) gave two
// processes of the same program different losses in the last digits whenever
// the machine was busy enough to flip it. OpenBLAS measured 1.3-1.5x Eigen
// here even at OPENBLAS_CORETYPE=Haswell; both rates are still measured and
// recorded (Describe), so a run says when the other would have been faster.
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

// OpenBLAS unless SHARDSCOPE_GEMM=eigen; measures both backends' rates the
// first time it is called (a few ms), for the record.
const GemmBackend& ChosenGemmBackend();

}  // namespace shardscope::runtime
