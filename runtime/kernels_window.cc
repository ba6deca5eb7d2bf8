// reduce_window: every output element folds its window of the (padded,
// base-dilated) operand with the body's op, starting from init. Positions that
// fall on padding or on a base-dilation hole count as init, as the spec's
// pad-with-init definition implies. The window's last dim is the inner loop;
// the other dims are walked with odometers. Pooling windows are small, so this
// direct form beats building im2col-style copies.
#include <algorithm>

#include "runtime/kernels_internal.h"

namespace shardscope::runtime::internal {
namespace {

using compiler::ReduceKind;

template <typename T>
T Fold(T a, T b, ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum: return Add<T>(a, b);
    case ReduceKind::kProd: return Mul<T>(a, b);
    case ReduceKind::kMax: return Max<T>(a, b);
    case ReduceKind::kMin: return Min<T>(a, b);
  }
  return a;
}

bool Next(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    if (++idx[k] < dims[k]) return true;
    idx[k] = 0;
  }
  return false;
}

}  // namespace

absl::Status EvalReduceWindow(const Instruction& instr, const Literal& in, const Literal& init, Literal* out) {
  const auto& w = instr.window;
  const Shape& is = in.shape();
  const Shape& os = out->shape();
  const int r = is.rank();
  if (is.dtype != os.dtype || init.shape().dtype != os.dtype || init.elements() != 1)
    return Invalid(instr, "operand, scalar init and result must share one element type");
  if (static_cast<int>(w.dimensions.size()) != r || os.rank() != r)
    return Invalid(instr, "window_dimensions needs one entry per operand dim");
  auto at = [](const std::vector<int64_t>& v, int k, int64_t d) { return k < static_cast<int>(v.size()) ? v[k] : d; };
  std::vector<int64_t> stride(r), lo(r), bdil(r), wdil(r);
  for (int k = 0; k < r; ++k) {
    stride[k] = at(w.strides, k, 1);
    bdil[k] = at(w.base_dilations, k, 1);
    wdil[k] = at(w.window_dilations, k, 1);
    lo[k] = k < static_cast<int>(w.padding.size()) ? w.padding[k].first : 0;
    if (stride[k] < 1 || bdil[k] < 1 || wdil[k] < 1 || w.dimensions[k] < 1)
      return Invalid(instr, "window sizes, strides and dilations must be >= 1");
  }
  if (os.elements() == 0) return absl::OkStatus();
  const std::vector<int64_t> ist = Strides(is.dims);
  return VisitWithPred(
      os.dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* src = in.as<T>();
        const T iv = *init.as<T>();
        T* dst = out->as<T>();
        const ReduceKind kind = instr.reduce;
        if (r == 0) {
          dst[0] = Fold<T>(iv, src[0], kind);
          return absl::OkStatus();
        }
        const int last = r - 1;
        std::vector<int64_t> o(r, 0);
        std::vector<int64_t> outer_w(w.dimensions.begin(), w.dimensions.end() - 1);
        int64_t oflat = 0;
        std::vector<int64_t> wo(outer_w.size());  // reused: one allocation per call, not per element
        do {
          T acc = iv;
          std::fill(wo.begin(), wo.end(), 0);
          do {
            // Offset of the window row (all dims but the last), or init if
            // the row lies on padding or a dilation hole.
            int64_t base = 0;
            bool valid = true;
            for (int d = 0; d < last; ++d) {
              int64_t p = o[d] * stride[d] + wo[d] * wdil[d] - lo[d];
              if (p < 0 || p % bdil[d] != 0 || p / bdil[d] >= is.dims[d]) { valid = false; break; }
              base += (p / bdil[d]) * ist[d];
            }
            for (int64_t x = 0; x < w.dimensions[last]; ++x) {
              int64_t p = o[last] * stride[last] + x * wdil[last] - lo[last];
              bool ok = valid && p >= 0 && p % bdil[last] == 0 && p / bdil[last] < is.dims[last];
              acc = Fold<T>(acc, ok ? src[base + p / bdil[last]] : iv, kind);
            }
          } while (Next(wo, outer_w));
          dst[oflat++] = acc;
        } while (Next(o, os.dims));
        return absl::OkStatus();
      },
      UnsupportedType(instr, os.dtype));
}

}  // namespace shardscope::runtime::internal
