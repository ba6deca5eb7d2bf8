// Slicing kernels: slice, pad, concatenate, dynamic_update_slice, and the
// strided-destination copy they share with gather. Like the other
// data-movement ops they never look at values, so every element type works by
// width (bf16/f16 included).
#include <algorithm>
#include <cstring>

#include "absl/strings/str_join.h"
#include "runtime/kernels_internal.h"

namespace shardscope::runtime::internal {
namespace {

template <typename E>
void CopyTo(const E* src, const std::vector<int64_t>& ss, E* dst, const std::vector<int64_t>& ds,
            const std::vector<int64_t>& dims) {
  const int r = static_cast<int>(dims.size());
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total == 0) return;
  if (r == 0) {
    *dst = *src;
    return;
  }
  // Odometer over all dims but the last; the last is one run.
  const int64_t inner = dims[r - 1], si = ss[r - 1], di = ds[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  int64_t so = 0, doff = 0;
  for (int64_t it = 0; it < total / inner; ++it) {
    if (si == 1 && di == 1) {
      std::memcpy(dst + doff, src + so, static_cast<size_t>(inner) * sizeof(E));
    } else {
      for (int64_t k = 0; k < inner; ++k) dst[doff + k * di] = src[so + k * si];
    }
    for (int k = r - 2; k >= 0; --k) {
      so += ss[k];
      doff += ds[k];
      if (++idx[k] < dims[k]) break;
      so -= ss[k] * dims[k];
      doff -= ds[k] * dims[k];
      idx[k] = 0;
    }
  }
}

const uint8_t* Bytes(const Literal& l) { return static_cast<const uint8_t*>(l.data()); }

absl::Status SameType(const Instruction& instr, const Literal& a, const Shape& out) {
  if (a.shape().dtype == out.dtype) return absl::OkStatus();
  return Invalid(instr, "operand ", a.shape().ToString(), " and result ", out.ToString(), " differ in element type");
}

absl::Status EvalSlice(const Instruction& instr, const Literal& a, Literal* out) {
  const Shape& as = a.shape();
  const Shape& os = out->shape();
  const auto& s = instr.slice;
  if (auto st = SameType(instr, a, os); !st.ok()) return st;
  const int r = as.rank();
  if (static_cast<int>(s.start.size()) != r || static_cast<int>(s.stride.size()) != r || os.rank() != r)
    return Invalid(instr, "slice attributes do not fit ", as.ToString());
  const std::vector<int64_t> in = Strides(as.dims);
  std::vector<int64_t> strides(r);
  int64_t off = 0;
  for (int d = 0; d < r; ++d) {
    if (s.start[d] < 0 || s.stride[d] < 1 ||
        (os.dims[d] > 0 && s.start[d] + (os.dims[d] - 1) * s.stride[d] >= as.dims[d]))
      return Invalid(instr, "slice of dim ", d, " runs outside ", as.ToString());
    off += s.start[d] * in[d];
    strides[d] = in[d] * s.stride[d];
  }
  const int64_t eb = DTypeBytes(os.dtype);
  StridedCopy(Bytes(a) + off * eb, out->data(), eb, os.dims, std::move(strides));
  return absl::OkStatus();
}

absl::Status EvalPad(const Instruction& instr, const Literal& a, const Literal& value, Literal* out) {
  const Shape& as = a.shape();
  const Shape& os = out->shape();
  const auto& p = instr.pad;
  if (auto st = SameType(instr, a, os); !st.ok()) return st;
  if (auto st = SameType(instr, value, os); !st.ok()) return st;
  const int r = as.rank();
  if (value.elements() != 1 || static_cast<int>(p.low.size()) != r || static_cast<int>(p.interior.size()) != r ||
      os.rank() != r)
    return Invalid(instr, "pad attributes or padding value do not fit ", as.ToString());
  const int64_t eb = DTypeBytes(os.dtype);
  StridedCopy(value.data(), out->data(), eb, {os.elements()}, {0});
  // Per dim, the operand indices [lo, hi) that land inside the result (a
  // negative low/high padding crops).
  const std::vector<int64_t> is = Strides(as.dims), ost = Strides(os.dims);
  std::vector<int64_t> dims(r), ss(r), ds(r);
  int64_t soff = 0, doff = 0;
  for (int d = 0; d < r; ++d) {
    const int64_t step = p.interior[d] + 1;
    if (p.interior[d] < 0) return Invalid(instr, "negative interior padding");
    int64_t lo = 0;
    if (p.low[d] < 0) lo = (-p.low[d] + step - 1) / step;
    const int64_t room = os.dims[d] - p.low[d];  // index i lands inside while i * step < room
    const int64_t hi = room <= 0 ? 0 : std::min(as.dims[d], (room + step - 1) / step);
    dims[d] = std::max<int64_t>(0, hi - lo);
    ss[d] = is[d];
    ds[d] = ost[d] * step;
    soff += lo * is[d];
    doff += (p.low[d] + lo * step) * ost[d];
  }
  for (int64_t d : dims)
    if (d == 0) return absl::OkStatus();
  StridedCopyTo(Bytes(a) + soff * eb, ss, static_cast<uint8_t*>(out->data()) + doff * eb, ds, dims, eb);
  return absl::OkStatus();
}

absl::Status EvalConcatenate(const Instruction& instr, const std::vector<const Literal*>& ops, Literal* out) {
  const Shape& os = out->shape();
  if (instr.dims.size() != 1 || instr.dims[0] < 0 || instr.dims[0] >= os.rank())
    return Invalid(instr, "concatenate dimension out of range");
  const int dim = static_cast<int>(instr.dims[0]);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= os.dims[d];
  for (int d = dim + 1; d < os.rank(); ++d) inner *= os.dims[d];
  const int64_t eb = DTypeBytes(os.dtype), row = os.dims[dim] * inner * eb;
  int64_t at = 0, total = 0;
  for (const Literal* l : ops) {
    if (auto st = SameType(instr, *l, os); !st.ok()) return st;
    if (l->shape().rank() != os.rank()) return Invalid(instr, "operand ranks differ");
    total += l->shape().dims[dim];
  }
  if (total != os.dims[dim]) return Invalid(instr, "operands do not add up to ", os.ToString());
  for (const Literal* l : ops) {
    const int64_t part = l->shape().dims[dim] * inner * eb;
    for (int64_t o = 0; o < outer && part > 0; ++o)
      std::memcpy(static_cast<uint8_t*>(out->data()) + o * row + at, Bytes(*l) + o * part, static_cast<size_t>(part));
    at += part;
  }
  return absl::OkStatus();
}

absl::Status EvalDynamicUpdateSlice(const Instruction& instr, const std::vector<const Literal*>& ops,
                                    Literal* out) {
  const Literal& a = *ops[0];
  const Literal& u = *ops[1];
  const Shape& os = out->shape();
  if (auto st = SameType(instr, a, os); !st.ok()) return st;
  if (auto st = SameType(instr, u, os); !st.ok()) return st;
  const int r = os.rank();
  if (a.shape().dims != os.dims || u.shape().rank() != r || static_cast<int>(ops.size()) != r + 2)
    return Invalid(instr, "operand, update and start indices do not fit ", os.ToString());
  const int64_t eb = DTypeBytes(os.dtype);
  if (a.data() != out->data() && os.bytes() > 0) std::memmove(out->data(), a.data(), static_cast<size_t>(os.bytes()));
  const std::vector<int64_t> st = Strides(os.dims);
  int64_t off = 0;
  for (int d = 0; d < r; ++d) {
    const Literal& idx = *ops[d + 2];
    if (idx.elements() != 1 || (idx.shape().dtype != DType::kI32 && idx.shape().dtype != DType::kI64))
      return Invalid(instr, "start index ", d, " must be an i32 or i64 scalar");
    if (u.shape().dims[d] > os.dims[d]) return Invalid(instr, "update is larger than the operand");
    // StableHLO clamps the start so the update stays inside.
    off += std::clamp<int64_t>(IndexAt(idx, 0), 0, os.dims[d] - u.shape().dims[d]) * st[d];
  }
  StridedCopyTo(u.data(), Strides(u.shape().dims), static_cast<uint8_t*>(out->data()) + off * eb, st,
                u.shape().dims, eb);
  return absl::OkStatus();
}

}  // namespace

void StridedCopyTo(const void* src, const std::vector<int64_t>& ss, void* dst, const std::vector<int64_t>& ds,
                   const std::vector<int64_t>& dims, int64_t eb) {
  switch (eb) {
    case 1: CopyTo(static_cast<const uint8_t*>(src), ss, static_cast<uint8_t*>(dst), ds, dims); break;
    case 2: CopyTo(static_cast<const uint16_t*>(src), ss, static_cast<uint16_t*>(dst), ds, dims); break;
    case 4: CopyTo(static_cast<const uint32_t*>(src), ss, static_cast<uint32_t*>(dst), ds, dims); break;
    case 8: CopyTo(static_cast<const uint64_t*>(src), ss, static_cast<uint64_t*>(dst), ds, dims); break;
    default: break;
  }
}

absl::Status EvalSlicing(const Instruction& instr, const std::vector<const Literal*>& ops, Literal* out) {
  switch (instr.op) {
    case Opcode::kSlice: return EvalSlice(instr, *ops[0], out);
    case Opcode::kPad: return EvalPad(instr, *ops[0], *ops[1], out);
    case Opcode::kConcatenate: return EvalConcatenate(instr, ops, out);
    case Opcode::kDynamicUpdateSlice: return EvalDynamicUpdateSlice(instr, ops, out);
    default: return Invalid(instr, "not a slicing op");
  }
}

}  // namespace shardscope::runtime::internal
