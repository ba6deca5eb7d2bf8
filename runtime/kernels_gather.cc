// gather and scatter with StableHLO's dimension numbers. Both walk the batch
// (scatter) positions of the index tensor with an odometer and move one
// window per position: gather copies the slice as a strided block (for an
// embedding lookup, one contiguous row per token); scatter combines the update
// window into the result element by element, skipping elements that fall
// outside the operand (StableHLO leaves that implementation-defined; the
// reference interpreter does the same).
#include <algorithm>
#include <cstring>

#include "runtime/kernels_internal.h"

namespace shardscope::runtime::internal {
namespace {

bool Has(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Advances `idx` over `dims` (row-major); false after the last index.
bool Next(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    if (++idx[k] < dims[k]) return true;
    idx[k] = 0;
  }
  return false;
}

// The index tensor's "batch" dims (all but index_vector_dim), and the offset
// of element k of the index vector at a batch position.
struct IndexView {
  const Literal* lit;
  std::vector<int64_t> batch_dims, batch_strides;
  int64_t vec_stride = 0, vec_len = 1;

  IndexView(const Literal& l, int64_t ivd) : lit(&l) {
    const Shape& s = l.shape();
    const std::vector<int64_t> st = Strides(s.dims);
    for (int d = 0; d < s.rank(); ++d) {
      if (d == ivd) {
        vec_stride = st[d];
        vec_len = s.dims[d];
      } else {
        batch_dims.push_back(s.dims[d]);
        batch_strides.push_back(st[d]);
      }
    }
  }
  int64_t At(const std::vector<int64_t>& b, int64_t k) const {
    int64_t off = k * vec_stride;
    for (size_t d = 0; d < b.size(); ++d) off += b[d] * batch_strides[d];
    return IndexAt(*lit, off);
  }
};

absl::Status CheckIndices(const Instruction& instr, const Literal& idx) {
  if (idx.shape().dtype != DType::kI32 && idx.shape().dtype != DType::kI64)
    return Invalid(instr, "indices must be i32 or i64, not ", idx.shape().ToString());
  return absl::OkStatus();
}

template <typename T>
void CombineInto(T* dst, T v, compiler::ReduceKind k, bool replace) {
  if (replace) { *dst = v; return; }
  switch (k) {
    case compiler::ReduceKind::kSum: *dst = Add<T>(*dst, v); break;
    case compiler::ReduceKind::kProd: *dst = Mul<T>(*dst, v); break;
    case compiler::ReduceKind::kMax: *dst = Max<T>(*dst, v); break;
    case compiler::ReduceKind::kMin: *dst = Min<T>(*dst, v); break;
  }
}

}  // namespace

absl::Status EvalGather(const Instruction& instr, const Literal& in, const Literal& idx, Literal* out) {
  const auto& g = instr.gather;
  const Shape& is = in.shape();
  const Shape& os = out->shape();
  if (auto s = CheckIndices(instr, idx); !s.ok()) return s;
  if (is.dtype != os.dtype) return Invalid(instr, "operand and result element types differ");
  if (static_cast<int>(g.slice_sizes.size()) != is.rank() || g.index_vector_dim < 0 ||
      g.index_vector_dim > idx.shape().rank())
    return Invalid(instr, "dimension numbers do not fit ", is.ToString());
  IndexView iv(idx, g.index_vector_dim);
  if (static_cast<int64_t>(g.start_index_map.size()) != iv.vec_len)
    return Invalid(instr, "start_index_map does not match the index vector");
  const std::vector<int64_t> in_st = Strides(is.dims), out_st = Strides(os.dims);
  // Window: operand dims not collapsed, paired in order with offset_dims.
  std::vector<int64_t> wdims, wsrc, wdst, batch_out;
  size_t oi = 0;
  for (int d = 0; d < is.rank(); ++d) {
    if (Has(g.collapsed_slice_dims, d)) continue;
    if (oi >= g.offset_dims.size()) return Invalid(instr, "offset_dims do not match the slice");
    wdims.push_back(g.slice_sizes[d]);
    wsrc.push_back(in_st[d]);
    wdst.push_back(out_st[g.offset_dims[oi++]]);
  }
  for (int d = 0; d < os.rank(); ++d)
    if (!Has(g.offset_dims, d)) batch_out.push_back(out_st[d]);
  if (batch_out.size() != iv.batch_dims.size()) return Invalid(instr, "result rank does not match the indices");
  if (os.elements() == 0) return absl::OkStatus();
  const int64_t eb = DTypeBytes(os.dtype);
  std::vector<int64_t> b(iv.batch_dims.size(), 0);
  do {
    int64_t src = 0, dst = 0;
    for (int64_t k = 0; k < iv.vec_len; ++k) {
      const int64_t d = g.start_index_map[k];
      // Gather clamps: the slice always lies inside the operand.
      src += std::clamp<int64_t>(iv.At(b, k), 0, is.dims[d] - g.slice_sizes[d]) * in_st[d];
    }
    for (size_t k = 0; k < b.size(); ++k) dst += b[k] * batch_out[k];
    StridedCopyTo(static_cast<const uint8_t*>(in.data()) + src * eb, wsrc,
                  static_cast<uint8_t*>(out->data()) + dst * eb, wdst, wdims, eb);
  } while (Next(b, iv.batch_dims));
  return absl::OkStatus();
}

absl::Status EvalScatter(const Instruction& instr, const Literal& in, const Literal& idx, const Literal& up,
                         Literal* out) {
  const auto& s = instr.scatter;
  const Shape& os = out->shape();
  if (auto st = CheckIndices(instr, idx); !st.ok()) return st;
  if (in.shape() != os || up.shape().dtype != os.dtype)
    return Invalid(instr, "operand, updates and result must share the type ", os.ToString());
  if (s.index_vector_dim < 0 || s.index_vector_dim > idx.shape().rank())
    return Invalid(instr, "index_vector_dim out of range");
  IndexView iv(idx, s.index_vector_dim);
  if (static_cast<int64_t>(s.scatter_dims_to_operand_dims.size()) != iv.vec_len)
    return Invalid(instr, "scatter_dims_to_operand_dims does not match the index vector");
  if (in.data() != out->data() && os.bytes() > 0) std::memcpy(out->data(), in.data(), static_cast<size_t>(os.bytes()));
  const Shape& us = up.shape();
  const std::vector<int64_t> ust = Strides(us.dims), ost = Strides(os.dims);
  // Update dims: scatter dims (paired with the index batch dims) and window
  // dims (paired with the operand dims that are not inserted).
  std::vector<int64_t> sdims, sstr, wdims, wstr, wop;
  for (int d = 0; d < us.rank(); ++d) {
    if (Has(s.update_window_dims, d)) {
      wdims.push_back(us.dims[d]);
      wstr.push_back(ust[d]);
    } else {
      sdims.push_back(us.dims[d]);
      sstr.push_back(ust[d]);
    }
  }
  for (int d = 0; d < os.rank(); ++d)
    if (!Has(s.inserted_window_dims, d)) wop.push_back(d);
  if (wop.size() != wdims.size() || sdims != iv.batch_dims)
    return Invalid(instr, "updates ", us.ToString(), " do not match the indices and operand");
  if (us.elements() == 0) return absl::OkStatus();
  return VisitWithPred(
      os.dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* u = up.as<T>();
        T* o = out->as<T>();
        std::vector<int64_t> b(sdims.size(), 0), start(os.rank(), 0), w(wdims.size(), 0);
        // Row mode: the last window dim runs along the operand's last dim with
        // unit strides on both sides (embedding-gradient rows), so a row is
        // placed once and combined element by element without index math.
        const bool rows = !wdims.empty() && wstr.back() == 1 && wop.back() == os.rank() - 1;
        const int64_t row_len = rows ? wdims.back() : 1;
        std::vector<int64_t> outer = wdims;
        if (rows) outer.back() = 1;
        do {
          std::fill(start.begin(), start.end(), 0);
          int64_t ubase = 0;
          for (int64_t k = 0; k < iv.vec_len; ++k) start[s.scatter_dims_to_operand_dims[k]] = iv.At(b, k);
          for (size_t k = 0; k < b.size(); ++k) ubase += b[k] * sstr[k];
          std::fill(w.begin(), w.end(), 0);
          do {
            int64_t uo = ubase, oo = 0;
            bool inside = true;
            for (size_t k = 0; k < w.size(); ++k) uo += w[k] * wstr[k];
            int64_t row_pos = 0;  // position along the operand's last dim (row mode)
            for (int d = 0; d < os.rank(); ++d) {
              int64_t pos = start[d];
              for (size_t k = 0; k < wop.size(); ++k)
                if (wop[k] == d) pos += w[k];
              if (rows && d == os.rank() - 1) row_pos = pos;
              else inside &= pos >= 0 && pos < os.dims[d];
              oo += pos * ost[d];
            }
            if (!inside) continue;
            if (!rows) {
              CombineInto<T>(o + oo, u[uo], instr.reduce, s.replace);
              continue;
            }
            // The whole row at once, clipped to the operand's last dim.
            const int64_t lo = std::max<int64_t>(0, -row_pos);
            const int64_t hi = std::min<int64_t>(row_len, os.dims.back() - row_pos);
            for (int64_t j = lo; j < hi; ++j) CombineInto<T>(o + oo + j, u[uo + j], instr.reduce, s.replace);
          } while (Next(w, outer));
        } while (Next(b, sdims));
        return absl::OkStatus();
      },
      UnsupportedType(instr, os.dtype));
}

}  // namespace shardscope::runtime::internal
