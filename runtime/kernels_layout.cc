// Data-movement kernels: broadcast_in_dim, reshape, transpose, dynamic_slice,
// and the strided-copy engine they share (also used by constant splats and the
// permute steps of dot_general and reduce). These ops never look at values, so
// they work on every element type by width, bf16/f16 included.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_join.h"
#include "runtime/kernels_internal.h"

namespace shardscope::runtime::internal {
namespace {

// Calls fn(src_offset, dst_offset) for every index of `dims` in row-major
// order, with offsets from per-dimension strides. An odometer rather than
// recursion: the callers' innermost loops do the real work.
template <typename Fn>
void ForEachIndex(absl::Span<const int64_t> dims, absl::Span<const int64_t> src_strides,
                  absl::Span<const int64_t> dst_strides, Fn fn) {
  const int r = static_cast<int>(dims.size());
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  SmallDims idx(r, 0);
  int64_t so = 0, dof = 0;
  for (int64_t it = 0; it < total; ++it) {
    fn(so, dof);
    for (int k = r - 1; k >= 0; --k) {
      so += src_strides[k];
      dof += dst_strides[k];
      if (++idx[k] < dims[k]) break;
      so -= src_strides[k] * dims[k];
      dof -= dst_strides[k] * dims[k];
      idx[k] = 0;
    }
  }
}

template <typename E>
void CopyTyped(const E* src, E* dst, absl::Span<const int64_t> dims, absl::Span<const int64_t> st) {
  const int r = static_cast<int>(dims.size());
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = dims[r - 1];
  const int64_t s = st[r - 1];

  // A transpose: the innermost output dim walks the source with a large stride
  // while some other output dim j is the source's contiguous one. Copying
  // tile by tile keeps both the reads and the writes within cache lines.
  if (s != 0 && s != 1) {
    int j = -1;
    for (int k = 0; k < r - 1; ++k) {
      if (st[k] == 1) j = k;
    }
    if (j >= 0 && dims[j] >= 8 && inner >= 8) {
      const SmallDims ds = DenseStrides(dims);
      SmallDims odims, ost, ods;
      for (int k = 0; k < r - 1; ++k) {
        if (k == j) continue;
        odims.push_back(dims[k]);
        ost.push_back(st[k]);
        ods.push_back(ds[k]);
      }
      const int64_t A = dims[j], B = inner, dsa = ds[j];
      constexpr int64_t kTile = 16;  // 16 rows at a power-of-two stride still fit L1 associativity
      ForEachIndex(odims, ost, ods, [&](int64_t so, int64_t dof) {
        const E* sp = src + so;
        E* dp = dst + dof;
        for (int64_t a0 = 0; a0 < A; a0 += kTile) {
          const int64_t a1 = std::min(A, a0 + kTile);
          for (int64_t b0 = 0; b0 < B; b0 += kTile) {
            const int64_t b1 = std::min(B, b0 + kTile);
            for (int64_t a = a0; a < a1; ++a) {
              for (int64_t b = b0; b < b1; ++b) dp[a * dsa + b] = sp[a + b * s];
            }
          }
        }
      });
      return;
    }
  }

  // Everything else: runs along the innermost output dim, contiguous (copy),
  // repeated (fill) or strided (gather).
  SmallDims odims(dims.begin(), dims.end() - 1), ost(st.begin(), st.end() - 1);
  SmallDims ods = DenseStrides(odims);
  for (int64_t& d : ods) d *= inner;
  ForEachIndex(odims, ost, ods, [&](int64_t so, int64_t dof) {
    const E* sp = src + so;
    E* dp = dst + dof;
    if (s == 1) {
      std::memcpy(dp, sp, static_cast<size_t>(inner) * sizeof(E));
    } else if (s == 0) {
      std::fill_n(dp, inner, *sp);
    } else {
      for (int64_t i = 0; i < inner; ++i) dp[i] = sp[i * s];
    }
  });
}

}  // namespace

SmallDims DenseStrides(absl::Span<const int64_t> dims) {
  SmallDims s(dims.size(), 1);
  for (int k = static_cast<int>(dims.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * dims[k + 1];
  return s;
}

void StridedCopy(const void* src, void* dst, int64_t elem_bytes, absl::Span<const int64_t> dims,
                 absl::Span<const int64_t> src_strides) {
  // Normalise: drop size-1 dims (their stride never matters) and merge a dim
  // into its left neighbour when together they walk the source as one dim.
  // This turns most broadcasts, slices and transposes into 1-3 dims.
  SmallDims d, s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) return;  // nothing to write
    if (dims[i] == 1) continue;
    if (!d.empty() && s.back() == src_strides[i] * dims[i]) {
      d.back() *= dims[i];
      s.back() = src_strides[i];
    } else {
      d.push_back(dims[i]);
      s.push_back(src_strides[i]);
    }
  }
  switch (elem_bytes) {
    case 1: CopyTyped(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), d, s); break;
    case 2: CopyTyped(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), d, s); break;
    case 4: CopyTyped(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), d, s); break;
    case 8: CopyTyped(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), d, s); break;
    default: break;  // every DType is 1, 2, 4 or 8 bytes
  }
}

namespace {

absl::Status SameElementType(const Instruction& instr, const Literal& a, const Shape& out) {
  if (a.shape().dtype == out.dtype) return absl::OkStatus();
  return Invalid(instr, "operand is ", a.shape().ToString(), " but the result is ",
                 out.ToString(), " (element types differ)");
}

absl::Status EvalBroadcastInDim(const Instruction& instr, const Literal& a, Literal* out) {
  const Shape& os = out->shape();
  const Shape& as = a.shape();
  if (auto s = SameElementType(instr, a, os); !s.ok()) return s;
  if (static_cast<int>(instr.dims.size()) != as.rank()) {
    return Invalid(instr, "has ", instr.dims.size(), " broadcast dimensions for a rank-",
                   as.rank(), " operand");
  }
  SmallDims strides(os.rank(), 0);  // 0: the operand repeats along this dim
  SmallFlags used(os.rank(), false);
  const SmallDims in_strides = DenseStrides(as.dims);
  for (int i = 0; i < as.rank(); ++i) {
    const int64_t bd = instr.dims[i];
    if (bd < 0 || bd >= os.rank() || used[bd]) {
      return Invalid(instr, "broadcast dimension ", bd, " is out of range or repeated for a rank-",
                     os.rank(), " result");
    }
    used[bd] = true;
    if (as.dims[i] != os.dims[bd] && as.dims[i] != 1) {
      return Invalid(instr, "operand dim ", i, " has size ", as.dims[i], " but result dim ", bd,
                     " has size ", os.dims[bd], " (sizes must match or the operand's be 1)");
    }
    if (as.dims[i] != 1) strides[bd] = in_strides[i];
  }
  StridedCopy(a.data(), out->data(), DTypeBytes(os.dtype), os.dims, strides);
  return absl::OkStatus();
}

absl::Status EvalReshape(const Instruction& instr, const Literal& a, Literal* out) {
  const Shape& os = out->shape();
  if (auto s = SameElementType(instr, a, os); !s.ok()) return s;
  if (a.elements() != os.elements()) {
    return Invalid(instr, "cannot reshape ", a.shape().ToString(), " (", a.elements(),
                   " elements) to ", os.ToString());
  }
  // Row-major data is unchanged by a reshape; memmove also allows in place.
  if (os.bytes() > 0 && a.data() != out->data()) {
    std::memmove(out->data(), a.data(), static_cast<size_t>(os.bytes()));
  }
  return absl::OkStatus();
}

absl::Status EvalTranspose(const Instruction& instr, const Literal& a, Literal* out) {
  const Shape& os = out->shape();
  const Shape& as = a.shape();
  if (auto s = SameElementType(instr, a, os); !s.ok()) return s;
  const int r = as.rank();
  if (static_cast<int>(instr.dims.size()) != r || os.rank() != r) {
    return Invalid(instr, "permutation ", absl::StrJoin(instr.dims, ","), " does not fit ",
                   as.ToString(), " -> ", os.ToString());
  }
  SmallFlags seen(r, false);
  const SmallDims in_strides = DenseStrides(as.dims);
  SmallDims strides(r);
  for (int i = 0; i < r; ++i) {
    const int64_t p = instr.dims[i];
    if (p < 0 || p >= r || seen[p]) {
      return Invalid(instr, "[", absl::StrJoin(instr.dims, ","), "] is not a permutation of ", r,
                     " dims");
    }
    seen[p] = true;
    if (os.dims[i] != as.dims[p]) {
      return Invalid(instr, "result dim ", i, " has size ", os.dims[i], " but operand dim ", p,
                     " has size ", as.dims[p]);
    }
    strides[i] = in_strides[p];
  }
  StridedCopy(a.data(), out->data(), DTypeBytes(os.dtype), os.dims, strides);
  return absl::OkStatus();
}

absl::Status EvalDynamicSlice(const Instruction& instr, const std::vector<const Literal*>& ops,
                              Literal* out) {
  const Literal& a = *ops[0];
  const Shape& os = out->shape();
  const Shape& as = a.shape();
  if (auto s = SameElementType(instr, a, os); !s.ok()) return s;
  const int r = as.rank();
  if (static_cast<int>(ops.size()) != r + 1) {
    return Invalid(instr, "needs one start index per dimension (", r, "), got ", ops.size() - 1);
  }
  if (static_cast<int>(instr.dims.size()) != r || os.dims != instr.dims) {
    return Invalid(instr, "slice sizes [", absl::StrJoin(instr.dims, ","),
                   "] must have one entry per operand dim and equal the result dims ",
                   os.DimsString());
  }
  const SmallDims strides = DenseStrides(as.dims);
  int64_t offset = 0;
  for (int i = 0; i < r; ++i) {
    const int64_t size = instr.dims[i];
    if (size < 0 || size > as.dims[i]) {
      return Invalid(instr, "slice size ", size, " does not fit operand dim ", i, " of size ",
                     as.dims[i]);
    }
    const Literal& idx = *ops[i + 1];
    int64_t start = 0;
    if (idx.elements() != 1) {
      return Invalid(instr, "start index ", i, " must be a scalar, not ", idx.shape().ToString());
    }
    switch (idx.shape().dtype) {
      case DType::kI32: start = *idx.as<int32_t>(); break;
      case DType::kI64: start = *idx.as<int64_t>(); break;
      default:
        return Invalid(instr, "start index ", i, " must be i32 or i64, not ",
                       idx.shape().ToString());
    }
    // StableHLO clamps rather than failing: the slice always stays in bounds.
    start = std::clamp<int64_t>(start, 0, as.dims[i] - size);
    offset += start * strides[i];
  }
  const int64_t eb = DTypeBytes(os.dtype);
  StridedCopy(static_cast<const uint8_t*>(a.data()) + offset * eb, out->data(), eb, os.dims,
              strides);
  return absl::OkStatus();
}

}  // namespace

absl::Status EvalDataMovement(const Instruction& instr, const std::vector<const Literal*>& ops,
                              Literal* out) {
  switch (instr.op) {
    case Opcode::kBroadcastInDim: return EvalBroadcastInDim(instr, *ops[0], out);
    case Opcode::kReshape: return EvalReshape(instr, *ops[0], out);
    case Opcode::kTranspose: return EvalTranspose(instr, *ops[0], out);
    case Opcode::kDynamicSlice: return EvalDynamicSlice(instr, ops, out);
    default: return Invalid(instr, "not a data-movement op");
  }
}

}  // namespace shardscope::runtime::internal
