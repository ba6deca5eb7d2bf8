#include "runtime/gemm.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

// See kernels_dot.cc: a GCC 12 false positive inside AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <cblas.h>

#include "absl/strings/str_format.h"

namespace shardscope::runtime {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

template <typename P>
void Assign(Map& C, const P& product, bool accumulate) {
  if (accumulate) C.noalias() += product;
  else C.noalias() = product;
}

void EigenSgemm(bool a_t, bool b_t, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  Map C(c, m, n, Eigen::OuterStride<>(ldc));
  // Stored shapes: A is [m,k] or [k,m]; B is [k,n] or [n,k].
  ConstMap A(a, a_t ? k : m, a_t ? m : k, Eigen::OuterStride<>(lda));
  ConstMap B(b, b_t ? n : k, b_t ? k : n, Eigen::OuterStride<>(ldb));
  if (!a_t && !b_t) Assign(C, A * B, accumulate);
  else if (!a_t && b_t) Assign(C, A * B.transpose(), accumulate);
  else if (a_t && !b_t) Assign(C, A.transpose() * B, accumulate);
  else Assign(C, A.transpose() * B.transpose(), accumulate);
}

void BlasSgemm(bool a_t, bool b_t, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  cblas_sgemm(CblasRowMajor, a_t ? CblasTrans : CblasNoTrans, b_t ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), accumulate ? 1.0f : 0.0f, c,
              static_cast<blasint>(ldc));
}

// GFLOP/s of each backend, for the record: the best of a few runs on a shape
// typical of the samples (a [1024,256] x [256,256] projection), the two taken
// in turn (this VM's speed moves by a fifth within seconds).
struct Rates {
  double eigen = 0, blas = 0;
};
Rates MeasureBoth() {
  const int64_t m = 1024, n = 256, k = 256;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 6; ++round)
    for (int lib = 0; lib < 2; ++lib) {
      auto t0 = std::chrono::steady_clock::now();
      (lib == 0 ? EigenSgemm : BlasSgemm)(false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n,
                                          false);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (round > 0 && s < best[lib]) best[lib] = s;  // the first round pays for first touches
    }
  return {2.0 * m * n * k / best[0] / 1e9, 2.0 * m * n * k / best[1] / 1e9};
}

GemmBackend Choose() {
  // The runtime splits GEMMs over its own threads and times them per thread;
  // OpenBLAS threads of its own would oversubscribe and hide from the clock.
  openblas_set_num_threads(1);
  GemmBackend g;
  g.blas_core = openblas_get_corename();
  const char* force = std::getenv("SHARDSCOPE_GEMM");
  const Rates rates = MeasureBoth();
  g.eigen_gflops = rates.eigen;
  g.blas_gflops = rates.blas;
  g.use_blas = !(force && std::strcmp(force, "eigen") == 0);
  return g;
}

}  // namespace

std::string GemmBackend::Describe() const {
  return absl::StrFormat("%s%s (measured on one thread: openblas/%s %.0f GFLOP/s, eigen %.0f GFLOP/s)",
                         use_blas ? "openblas" : "eigen", use_blas ? "" : ", by SHARDSCOPE_GEMM", blas_core,
                         blas_gflops, eigen_gflops);
}

const GemmBackend& ChosenGemmBackend() {
  static const GemmBackend chosen = Choose();
  return chosen;
}

void Sgemm(bool a_t, bool b_t, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (ChosenGemmBackend().use_blas) BlasSgemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  else EigenSgemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

}  // namespace shardscope::runtime
