// reduce: result = init combined with every element along the reduced dims.
// Dims are first normalised (size-1 dims dropped, neighbours of the same kind
// merged), so the common cases become [K,R] (reduce trailing: one contiguous
// reduction per row, Eigen's vectorised sum/max/...) or [R,K] / [K,R,K]
// (reduce leading/middle: accumulate whole rows into the output, a loop the
// compiler vectorises). Any other pattern is permuted to [K,R] first.
#include <algorithm>
#include <cstring>

// GCC 12 with -march=native warns -Wmaybe-uninitialized inside its own AVX-512
// intrinsics once Eigen's packet code is inlined (a false positive of
// _mm512_undefined_*); silence it for this Eigen file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include "absl/strings/str_join.h"
#include "runtime/kernels_internal.h"
#include "runtime/kernels_vector.h"

namespace shardscope::runtime::internal {
namespace {

using compiler::ReduceKind;

template <typename T, ReduceKind K>
inline T Combine(T a, T b) {
  if constexpr (K == ReduceKind::kSum) return Add<T>(a, b);
  else if constexpr (K == ReduceKind::kProd) return Mul<T>(a, b);
  else if constexpr (K == ReduceKind::kMax) return Max<T>(a, b);
  else return Min<T>(a, b);
}

// Reduces n >= 1 contiguous elements.
template <typename T, ReduceKind K>
T ReduceRow(const T* p, int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    // Eigen reassociates with several vector accumulators, which a plain loop
    // may not (the compiler must keep the float sum's order without -ffast-math).
    Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> a(p, n);
    if constexpr (K == ReduceKind::kSum) return a.sum();
    else if constexpr (K == ReduceKind::kProd) return a.prod();
    else if constexpr (K == ReduceKind::kMax) return a.template maxCoeff<Eigen::PropagateNaN>();
    else return a.template minCoeff<Eigen::PropagateNaN>();
  } else {
    T acc = p[0];
    for (int64_t i = 1; i < n; ++i) acc = Combine<T, K>(acc, p[i]);
    return acc;
  }
}

// out[k] = init (+) reduce(in[k, :]) for a [rows, n] block.
template <typename T, ReduceKind K>
void ReduceTrailing(const T* in, int64_t rows, int64_t n, T init, T* out) {
  for (int64_t k = 0; k < rows; ++k) out[k] = Combine<T, K>(init, ReduceRow<T, K>(in + k * n, n));
}

// out[j] = init (+) in[0, j] (+) in[1, j] ... for a [r, cols] block: whole rows
// at a time, so the inner loop is unit-stride and vectorises.
template <typename T, ReduceKind K>
void ReduceLeading(const T* in, int64_t r, int64_t cols, T init, T* out) {
  std::fill_n(out, cols, init);
  for (int64_t i = 0; i < r; ++i) {
    const T* row = in + i * cols;
    if constexpr (std::is_floating_point_v<T> && (K == ReduceKind::kMax || K == ReduceKind::kMin)) {
      VecMaxMin<T, K == ReduceKind::kMax>(out, false, row, false, out, cols);
    } else {
      for (int64_t j = 0; j < cols; ++j) out[j] = Combine<T, K>(out[j], row[j]);
    }
  }
}

template <typename T, ReduceKind K>
void ReduceTyped(const T* in, const std::vector<int64_t>& in_dims, const SmallFlags& reduced, T init, T* out,
                 int64_t out_elems) {
  int64_t total = 1;
  for (int64_t d : in_dims) total *= d;
  if (total == 0) {  // reducing nothing leaves init everywhere
    std::fill_n(out, out_elems, init);
    return;
  }
  // Normalise to alternating runs of kept (false) and reduced (true) dims.
  SmallDims d;
  SmallFlags red;
  for (size_t i = 0; i < in_dims.size(); ++i) {
    if (in_dims[i] == 1) continue;
    if (!d.empty() && red.back() == reduced[i]) {
      d.back() *= in_dims[i];
    } else {
      d.push_back(in_dims[i]);
      red.push_back(reduced[i]);
    }
  }
  if (d.empty() || (d.size() == 1 && !red[0])) {  // nothing to fold: out = init (+) in
    for (int64_t i = 0; i < total; ++i) out[i] = Combine<T, K>(init, in[i]);
    return;
  }
  if (d.size() == 1) {  // reduce everything
    out[0] = Combine<T, K>(init, ReduceRow<T, K>(in, d[0]));
    return;
  }
  if (d.size() == 2 && !red[0]) {  // [K, R]
    ReduceTrailing<T, K>(in, d[0], d[1], init, out);
    return;
  }
  if (d.size() == 2) {  // [R, K]
    ReduceLeading<T, K>(in, d[0], d[1], init, out);
    return;
  }
  if (d.size() == 3 && !red[0]) {  // [K, R, K2]
    for (int64_t k = 0; k < d[0]; ++k) {
      ReduceLeading<T, K>(in + k * d[1] * d[2], d[1], d[2], init, out + k * d[2]);
    }
    return;
  }
  // General: permute kept dims first, reduced dims last, then [K, R].
  const SmallDims st = DenseStrides(d);
  SmallDims pdims, pstrides;
  int64_t kept = 1;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < d.size(); ++i) {
      if (red[i] != (pass == 1)) continue;
      pdims.push_back(d[i]);
      pstrides.push_back(st[i]);
      if (pass == 0) kept *= d[i];
    }
  }
  T* tmp = static_cast<T*>(Scratch(0, total * static_cast<int64_t>(sizeof(T))));
  StridedCopy(in, tmp, sizeof(T), pdims, pstrides);
  ReduceTrailing<T, K>(tmp, kept, total / kept, init, out);
}

}  // namespace

absl::Status EvalReduce(const Instruction& instr, const Literal& in, const Literal& init,
                        Literal* out) {
  const Shape& is = in.shape();
  const Shape& os = out->shape();
  if (is.dtype != os.dtype || init.shape().dtype != os.dtype) {
    return Invalid(instr, "input ", is.ToString(), ", init ", init.shape().ToString(),
                   " and result ", os.ToString(), " must share one element type");
  }
  if (init.elements() != 1) {
    return Invalid(instr, "init value must be a scalar, not ", init.shape().ToString());
  }
  SmallFlags reduced(is.rank(), false);  // on the stack: a reduce ran ten allocations a call
  for (int64_t d : instr.dims) {
    if (d < 0 || d >= is.rank() || reduced[d]) {
      return Invalid(instr, "reduce dimensions [", absl::StrJoin(instr.dims, ","),
                     "] are out of range or repeated for ", is.ToString());
    }
    reduced[d] = true;
  }
  SmallDims expect;
  for (int i = 0; i < is.rank(); ++i) {
    if (!reduced[i]) expect.push_back(is.dims[i]);
  }
  if (!std::equal(expect.begin(), expect.end(), os.dims.begin(), os.dims.end())) {
    return Invalid(instr, "reducing [", absl::StrJoin(instr.dims, ","), "] of ", is.ToString(), " gives ",
                   Shape(os.dtype, std::vector<int64_t>(expect.begin(), expect.end())).ToString(), ", not ",
                   os.ToString());
  }
  return VisitWithPred(
      os.dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* pi = in.as<T>();
        const T iv = *init.as<T>();
        T* po = out->as<T>();
        const int64_t n = os.elements();
        switch (instr.reduce) {
          case ReduceKind::kSum: ReduceTyped<T, ReduceKind::kSum>(pi, is.dims, reduced, iv, po, n); break;
          case ReduceKind::kProd: ReduceTyped<T, ReduceKind::kProd>(pi, is.dims, reduced, iv, po, n); break;
          case ReduceKind::kMax: ReduceTyped<T, ReduceKind::kMax>(pi, is.dims, reduced, iv, po, n); break;
          case ReduceKind::kMin: ReduceTyped<T, ReduceKind::kMin>(pi, is.dims, reduced, iv, po, n); break;
        }
        return absl::OkStatus();
      },
      UnsupportedType(instr, os.dtype));
}

}  // namespace shardscope::runtime::internal
