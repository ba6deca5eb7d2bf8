// dot_general as batched GEMM. Output dims are (batch, lhs free, rhs free), so
// per batch the result is an [M,N] row-major matrix. When each operand already
// is a row-major [M,K] or [K,M] (resp. [K,N] or [N,K]) matrix per batch, Eigen
// multiplies the mapped memory directly, transposes expressed as .transpose()
// on the maps (Eigen's GEMM packs either storage order, so no copy is made).
// Other layouts are first permuted into [B,M,K] x [B,K,N] scratch buffers.
#include <algorithm>
#include <cstring>
#include <numeric>

// GCC 12 with -march=native warns -Wmaybe-uninitialized inside its own AVX-512
// intrinsics once Eigen's packet code is inlined (a false positive of
// _mm512_undefined_*); silence it for this Eigen file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include "absl/strings/str_join.h"
#include "runtime/gemm.h"
#include "runtime/intra_op.h"
#include "runtime/kernels_internal.h"

namespace shardscope::runtime::internal {
namespace {

using runtime::CurrentGang;
using runtime::Gang;
using runtime::ParallelRange;
using runtime::Sgemm;

using compiler::DotDims;
using compiler::FreeDims;

// How an operand's memory is read per batch: as the GEMM operand itself or as
// its transpose.
struct OperandView {
  const void* data = nullptr;
  bool transposed = false;
};

template <typename T>
void GemmEigen(const T* a, bool a_t, const T* b, bool b_t, T* c, int64_t m, int64_t n,
               int64_t k) {
  using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<RowMat> C(c, m, n);
  if (!a_t && !b_t) {
    C.noalias() = Eigen::Map<const RowMat>(a, m, k) * Eigen::Map<const RowMat>(b, k, n);
  } else if (!a_t && b_t) {
    C.noalias() = Eigen::Map<const RowMat>(a, m, k) * Eigen::Map<const RowMat>(b, n, k).transpose();
  } else if (a_t && !b_t) {
    C.noalias() = Eigen::Map<const RowMat>(a, k, m).transpose() * Eigen::Map<const RowMat>(b, k, n);
  } else {
    C.noalias() = Eigen::Map<const RowMat>(a, k, m).transpose() *
                  Eigen::Map<const RowMat>(b, n, k).transpose();
  }
}

// f32 batched GEMM split over the chip's gang (intra_op.h): across batches
// when there are enough of them, else across the larger of M and N, in parts
// of at least ~4 MFLOP so that waking a helper pays for itself.
void GemmF32(const float* a, bool a_t, const float* b, bool b_t, float* c, int64_t batch, int64_t m,
             int64_t n, int64_t k, bool accumulate) {
  constexpr double kMinPartFlops = 4e6;
  const Gang* gang = CurrentGang();
  const int64_t width = gang ? gang->width() : 1;
  const double flops = 2.0 * m * n * k;
  const int64_t lda = a_t ? m : k, ldb = b_t ? k : n;
  if (batch >= width || width == 1) {
    const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(kMinPartFlops / flops));
    ParallelRange(batch, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t bi = b0; bi < b1; ++bi)
        Sgemm(a_t, b_t, m, n, k, a + bi * m * k, lda, b + bi * k * n, ldb, c + bi * m * n, n, accumulate);
    });
    return;
  }
  for (int64_t bi = 0; bi < batch; ++bi) {
    const float* ab = a + bi * m * k;
    const float* bb = b + bi * k * n;
    float* cb = c + bi * m * n;
    constexpr int64_t kBlock = 16;  // a part is whole 16-wide panels
    if (n > m) {
      const int64_t blocks = (n + kBlock - 1) / kBlock;
      const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(kMinPartFlops / (2.0 * m * k * kBlock)));
      ParallelRange(blocks, grain, [&](int64_t p0, int64_t p1) {
        const int64_t j0 = p0 * kBlock, j1 = std::min(n, p1 * kBlock);
        Sgemm(a_t, b_t, m, j1 - j0, k, ab, lda, b_t ? bb + j0 * ldb : bb + j0, ldb, cb + j0, n, accumulate);
      });
    } else {
      const int64_t blocks = (m + kBlock - 1) / kBlock;
      const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(kMinPartFlops / (2.0 * n * k * kBlock)));
      ParallelRange(blocks, grain, [&](int64_t p0, int64_t p1) {
        const int64_t i0 = p0 * kBlock, i1 = std::min(m, p1 * kBlock);
        Sgemm(a_t, b_t, i1 - i0, n, k, a_t ? ab + i0 : ab + i0 * lda, lda, bb, ldb, cb + i0 * n, n, accumulate);
      });
    }
  }
}

// Integers: a plain i-k-j loop with wrap-around arithmetic (Eigen's integer
// GEMM would overflow signed values, which is undefined behaviour). Operands
// are canonical here ([M,K] x [K,N]).
template <typename T>
void GemmInt(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k) {
  std::fill_n(c, m * n, T(0));
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * k + p];
      const T* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) crow[j] = Add<T>(crow[j], Mul<T>(av, brow[j]));
    }
  }
}

// True when `dims` (taken in the given order) are the consecutive positions
// first, first+1, ...
bool Consecutive(const std::vector<int64_t>& dims, int64_t first) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != first + static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Copies operand `lit` with its dims in `order` into scratch `slot`: the
// canonical [B,M,K] / [B,K,N] layout of the general path.
const void* Permuted(const Literal& lit, const std::vector<int64_t>& order, int slot) {
  const Shape& s = lit.shape();
  const std::vector<int64_t> st = Strides(s.dims);
  std::vector<int64_t> dims, strides;
  for (int64_t d : order) {
    dims.push_back(s.dims[d]);
    strides.push_back(st[d]);
  }
  void* buf = Scratch(slot, s.bytes());
  StridedCopy(lit.data(), buf, DTypeBytes(s.dtype), dims, strides);
  return buf;
}

absl::Status CheckDims(const Instruction& instr, const char* side, const char* what,
                       const std::vector<int64_t>& dims, int rank, std::vector<bool>* used) {
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || (*used)[d]) {
      return Invalid(instr, side, " ", what, " dimensions [", absl::StrJoin(dims, ","),
                     "] are out of range or repeated for a rank-", rank, " operand");
    }
    (*used)[d] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EvalDotGeneral(const Instruction& instr, const Literal& lhs, const Literal& rhs,
                            Literal* out, bool accumulate) {
  const Shape& ls = lhs.shape();
  const Shape& rs = rhs.shape();
  const Shape& os = out->shape();
  const DotDims& dd = instr.dot;
  if (ls.dtype != os.dtype || rs.dtype != os.dtype) {
    return Invalid(instr, "operands ", ls.ToString(), " and ", rs.ToString(),
                   " must have the result's element type ", DTypeName(os.dtype));
  }
  if (dd.lhs_batch.size() != dd.rhs_batch.size() ||
      dd.lhs_contracting.size() != dd.rhs_contracting.size()) {
    return Invalid(instr, "lhs and rhs must list as many batch and as many contracting dims");
  }
  {
    std::vector<bool> lu(ls.rank(), false), ru(rs.rank(), false);
    if (auto s = CheckDims(instr, "lhs", "batch", dd.lhs_batch, ls.rank(), &lu); !s.ok()) return s;
    if (auto s = CheckDims(instr, "lhs", "contracting", dd.lhs_contracting, ls.rank(), &lu); !s.ok()) return s;
    if (auto s = CheckDims(instr, "rhs", "batch", dd.rhs_batch, rs.rank(), &ru); !s.ok()) return s;
    if (auto s = CheckDims(instr, "rhs", "contracting", dd.rhs_contracting, rs.rank(), &ru); !s.ok()) return s;
  }
  int64_t batch = 1, m = 1, n = 1, k = 1;
  std::vector<int64_t> expect;
  for (size_t i = 0; i < dd.lhs_batch.size(); ++i) {
    const int64_t sz = ls.dims[dd.lhs_batch[i]];
    if (sz != rs.dims[dd.rhs_batch[i]]) {
      return Invalid(instr, "batch dim sizes differ: ", ls.ToString(), " vs ", rs.ToString());
    }
    batch *= sz;
    expect.push_back(sz);
  }
  for (size_t i = 0; i < dd.lhs_contracting.size(); ++i) {
    const int64_t sz = ls.dims[dd.lhs_contracting[i]];
    if (sz != rs.dims[dd.rhs_contracting[i]]) {
      return Invalid(instr, "contracting dim sizes differ: ", ls.ToString(), " vs ", rs.ToString());
    }
    k *= sz;
  }
  const std::vector<int64_t> lfree = FreeDims(ls.rank(), dd.lhs_batch, dd.lhs_contracting);
  const std::vector<int64_t> rfree = FreeDims(rs.rank(), dd.rhs_batch, dd.rhs_contracting);
  for (int64_t d : lfree) { m *= ls.dims[d]; expect.push_back(ls.dims[d]); }
  for (int64_t d : rfree) { n *= rs.dims[d]; expect.push_back(rs.dims[d]); }
  if (expect != os.dims) {
    return Invalid(instr, "result of ", ls.ToString(), " x ", rs.ToString(), " is ",
                   Shape(os.dtype, expect).ToString(), ", not ", os.ToString());
  }
  const bool is_float = os.dtype == DType::kF32 || os.dtype == DType::kF64;
  const bool is_int = os.dtype == DType::kI32 || os.dtype == DType::kI64;
  if (!is_float && !is_int) return UnsupportedType(instr, os.dtype);
  if (batch * m * n == 0) return absl::OkStatus();
  if (accumulate && os.dtype != DType::kF32) return Invalid(instr, "accumulating into the result is f32 only");
  if (k == 0) {  // empty sum
    if (!accumulate) std::memset(out->data(), 0, static_cast<size_t>(os.bytes()));
    return absl::OkStatus();
  }

  // Fast layouts: batch dims leading and in order on both sides, contracting
  // dims one consecutive block (paired in memory order) at either end of the
  // rest. Pairs are sorted by lhs position so that a permuted pairing that is
  // the same on both sides still counts.
  const int64_t nb = static_cast<int64_t>(dd.lhs_batch.size());
  std::vector<size_t> pairs(dd.lhs_contracting.size());
  std::iota(pairs.begin(), pairs.end(), 0);
  std::sort(pairs.begin(), pairs.end(),
            [&](size_t a, size_t b) { return dd.lhs_contracting[a] < dd.lhs_contracting[b]; });
  std::vector<int64_t> lc, rc;
  for (size_t p : pairs) {
    lc.push_back(dd.lhs_contracting[p]);
    rc.push_back(dd.rhs_contracting[p]);
  }
  const int64_t nc = static_cast<int64_t>(lc.size());
  OperandView lv, rv;
  bool fast = Consecutive(dd.lhs_batch, 0) && Consecutive(dd.rhs_batch, 0);
  if (fast) {
    // lhs: contracting at the end -> [M,K]; right after the batch dims -> [K,M].
    if (Consecutive(lc, ls.rank() - nc)) lv = {lhs.data(), false};
    else if (Consecutive(lc, nb)) lv = {lhs.data(), true};
    else fast = false;
    // rhs: contracting right after the batch dims -> [K,N]; at the end -> [N,K].
    if (Consecutive(rc, nb)) rv = {rhs.data(), false};
    else if (Consecutive(rc, rs.rank() - nc)) rv = {rhs.data(), true};
    else fast = false;
  }
  // Integers use a plain loop that wants canonical operands.
  if (!fast || (is_int && (lv.transposed || rv.transposed))) {
    std::vector<int64_t> lorder(dd.lhs_batch), rorder(dd.rhs_batch);
    lorder.insert(lorder.end(), lfree.begin(), lfree.end());
    lorder.insert(lorder.end(), dd.lhs_contracting.begin(), dd.lhs_contracting.end());
    rorder.insert(rorder.end(), dd.rhs_contracting.begin(), dd.rhs_contracting.end());
    rorder.insert(rorder.end(), rfree.begin(), rfree.end());
    lv = {Permuted(lhs, lorder, 1), false};
    rv = {Permuted(rhs, rorder, 2), false};
  }

  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* a = static_cast<const T*>(lv.data);
    const T* b = static_cast<const T*>(rv.data);
    T* c = out->as<T>();
    if constexpr (std::is_same_v<T, float>) {
      GemmF32(a, lv.transposed, b, rv.transposed, c, batch, m, n, k, accumulate);
      return absl::OkStatus();
    }
    for (int64_t bi = 0; bi < batch; ++bi) {
      if constexpr (std::is_floating_point_v<T>) {
        GemmEigen<T>(a + bi * m * k, lv.transposed, b + bi * k * n, rv.transposed, c + bi * m * n,
                     m, n, k);
      } else {
        GemmInt<T>(a + bi * m * k, b + bi * k * n, c + bi * m * n, m, n, k);
      }
    }
    return absl::OkStatus();
  };
  return VisitArith(os.dtype, run, UnsupportedType(instr, os.dtype));
}

}  // namespace shardscope::runtime::internal
