// convolution as im2col + GEMM. The operands are first brought to the
// canonical layouts input [N, C, S...] and kernel [O, I, K...] (no copy when
// they already are, e.g. NCHW/OIHW). Then, per group and per chunk of the
// batch, the input windows are unrolled into a column matrix
// col[I*K, n*OS] (zero where the window reads padding or a dilation hole) and
// one Eigen GEMM computes out[Og, n*OS] = W[Og, I*K] * col (col is built
// transposed when the window is wider than the output, as for kernel
// gradients, so that copies run along the long dim). The result is
// written to a canonical [N, O, OS...] buffer and permuted to the output
// layout when that differs. An input dilated by s (the input gradient of a
// strided convolution) is split into s^d plain convolutions by output phase
// instead (ConvPolyphase). f32 and f64; bf16/f16 arrive here widened to f32
// (kernels.cc), so they accumulate in f32.
#include <algorithm>
#include <cstring>
#include <vector>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 false positive in Eigen's AVX-512 code
#include <Eigen/Core>

#include "runtime/kernels_internal.h"

namespace shardscope::runtime::internal {
namespace {

// A tensor of `dims` permuted so that dims `order` come first in that order
// (returns the data itself when `order` is the identity).
const void* Canonical(const Literal& l, const std::vector<int64_t>& order, int slot) {
  bool identity = true;
  for (size_t k = 0; k < order.size(); ++k) identity &= order[k] == static_cast<int64_t>(k);
  if (identity) return l.data();
  const std::vector<int64_t> st = Strides(l.shape().dims);
  std::vector<int64_t> dims, strides;
  for (int64_t d : order) {
    dims.push_back(l.shape().dims[d]);
    strides.push_back(st[d]);
  }
  void* buf = Scratch(slot, l.shape().bytes());
  StridedCopy(l.data(), buf, DTypeBytes(l.shape().dtype), dims, strides);
  return buf;
}

struct Geometry {
  int ns = 0;                                   // spatial rank
  std::vector<int64_t> in, k, out;              // spatial sizes
  std::vector<int64_t> stride, lo, ldil, rdil;  // per spatial dim
  int64_t in_size = 1, k_size = 1, out_size = 1;
};

// Where the window at output position `oidx` and kernel position `kidx` reads
// in the input, over every spatial dim but the last: the offset of that input
// line (*base), or false when it falls in padding or a dilation hole.
bool LineBase(const Geometry& g, const std::vector<int64_t>& oidx, const std::vector<int64_t>& kidx,
              const std::vector<int64_t>& ist, int64_t* base) {
  *base = 0;
  for (int d = 0; d + 1 < g.ns; ++d) {
    const int64_t p = oidx[d] * g.stride[d] + kidx[d] * g.rdil[d] - g.lo[d];
    if (p < 0 || p % g.ldil[d] != 0 || p / g.ldil[d] >= g.in[d]) return false;
    *base += (p / g.ldil[d]) * ist[d];
  }
  return true;
}

// dst[x] = the input line's element at dilated position off + x * step, or 0
// where that is padding or between dilated elements, for x in [0, n). Runs
// without dilation copy the valid middle in one piece.
template <typename T>
void GatherLine(const T* line, int64_t len, int64_t off, int64_t step, int64_t dil, int64_t n, T* dst) {
  if (dil != 1) {
    for (int64_t x = 0; x < n; ++x) {
      const int64_t p = off + x * step;
      dst[x] = (p >= 0 && p % dil == 0 && p / dil < len) ? line[p / dil] : T(0);
    }
    return;
  }
  // Valid x: 0 <= off + x * step < len.
  int64_t a = off >= 0 ? 0 : (-off + step - 1) / step;
  int64_t b = len - off <= 0 ? 0 : std::min(n, (len - off + step - 1) / step);
  a = std::min(a, b);
  std::fill_n(dst, a, T(0));
  if (step == 1) {
    std::memcpy(dst + a, line + a + off, static_cast<size_t>(b - a) * sizeof(T));
  } else {
    for (int64_t x = a; x < b; ++x) dst[x] = line[off + x * step];
  }
  std::fill(dst + b, dst + n, T(0));
}

// Fills rows [I*K) x columns [OS) of `col` (row stride `ld`) from one batch
// element's channels [I, S...] (`src`).
template <typename T>
void Im2Col(const T* src, int64_t channels, const Geometry& g, T* col, int64_t ld) {
  const int ns = g.ns;
  const int last = ns - 1;
  std::vector<int64_t> kidx(ns, 0), oidx(ns, 0);
  const std::vector<int64_t> ist = Strides(g.in);
  const int64_t ow = g.out[last];
  for (int64_t c = 0; c < channels; ++c) {
    const T* chan = src + c * g.in_size;
    std::fill(kidx.begin(), kidx.end(), 0);
    for (int64_t kk = 0; kk < g.k_size; ++kk) {
      T* row = col + (c * g.k_size + kk) * ld;
      // Odometer over the output positions except the last spatial dim.
      std::fill(oidx.begin(), oidx.end(), 0);
      for (int64_t orow = 0; orow < g.out_size / std::max<int64_t>(ow, 1); ++orow) {
        T* dst = row + orow * ow;
        int64_t base = 0;
        if (!LineBase(g, oidx, kidx, ist, &base)) {
          std::fill_n(dst, ow, T(0));
        } else {
          // Along the output's last dim: input position x * stride + k * rdil - lo.
          GatherLine(chan + base, g.in[last], kidx[last] * g.rdil[last] - g.lo[last], g.stride[last], g.ldil[last],
                     ow, dst);
        }
        for (int d = last - 1; d >= 0; --d) {
          if (++oidx[d] < g.out[d]) break;
          oidx[d] = 0;
        }
      }
      for (int d = ns - 1; d >= 0; --d) {
        if (++kidx[d] < g.k[d]) break;
        kidx[d] = 0;
      }
    }
  }
}

// The transpose of Im2Col, for windows wider than the output (a kernel
// gradient: the "kernel" is the output gradient, e.g. 32x32, and the result
// the 3x3 window): row o of `colT` (row stride `ld`) holds, for output position
// o, channels [I) x kernel positions [K). Copying runs along the kernel's last
// dim, which is long here, where Im2Col's run along the output's (3 wide).
template <typename T>
void Im2ColT(const T* src, int64_t channels, const Geometry& g, T* colT, int64_t ld) {
  const int ns = g.ns;
  const int last = ns - 1;
  std::vector<int64_t> kidx(ns, 0), oidx(ns, 0);
  const std::vector<int64_t> ist = Strides(g.in);
  const int64_t kw = g.k[last];
  const int64_t krows = g.k_size / std::max<int64_t>(kw, 1);
  for (int64_t o = 0; o < g.out_size; ++o) {
    T* row = colT + o * ld;
    for (int64_t c = 0; c < channels; ++c) {
      const T* chan = src + c * g.in_size;
      std::fill(kidx.begin(), kidx.end(), 0);
      for (int64_t kr = 0; kr < krows; ++kr) {
        T* dst = row + (c * krows + kr) * kw;
        int64_t base = 0;
        if (!LineBase(g, oidx, kidx, ist, &base)) {
          std::fill_n(dst, kw, T(0));
        } else {
          // Along the kernel's last dim: input position o * stride + x * rdil - lo.
          GatherLine(chan + base, g.in[last], oidx[last] * g.stride[last] - g.lo[last], g.rdil[last], g.ldil[last],
                     kw, dst);
        }
        for (int d = last - 1; d >= 0; --d) {
          if (++kidx[d] < g.k[d]) break;
          kidx[d] = 0;
        }
      }
    }
    for (int d = ns - 1; d >= 0; --d) {
      if (++oidx[d] < g.out[d]) break;
      oidx[d] = 0;
    }
  }
}

template <typename T>
void Conv(const T* in, const T* ker, T* out, int64_t N, int64_t C, int64_t O, const Geometry& g, int64_t fg,
          int64_t bg) {
  using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t I = C / fg;           // input channels per group
  const int64_t groups = fg * bg;     // one of the two is 1
  const int64_t Og = O / groups;      // output features per group
  const int64_t Nout = N / bg;
  const int64_t IK = I * g.k_size, OS = g.out_size;
  // Chunk the batch so that the column matrix stays within ~16 MiB.
  const int64_t chunk = std::clamp<int64_t>((int64_t{4} << 20) / std::max<int64_t>(1, IK * OS), 1, Nout);
  T* col = static_cast<T*>(Scratch(3, IK * chunk * OS * static_cast<int64_t>(sizeof(T))));
  // Output rows shorter than the window's: unroll window-major (see Im2ColT).
  const bool transposed = g.out[g.ns - 1] < g.k[g.ns - 1];
  RowMat tmp;
  for (int64_t grp = 0; grp < groups; ++grp) {
    const int64_t c0 = fg > 1 ? grp * I : 0;       // input channels of this group
    const int64_t n_off = bg > 1 ? grp * Nout : 0; // input batch elements of this group
    const int64_t o0 = grp * Og;
    Eigen::Map<const RowMat> W(ker + o0 * IK, Og, IK);
    for (int64_t n0 = 0; n0 < Nout; n0 += chunk) {
      const int64_t nc = std::min(chunk, Nout - n0);
      if (transposed) {
        // colT[n*OS + o, I*K]: the same matrix as Col, stored transposed.
        for (int64_t n = 0; n < nc; ++n)
          Im2ColT<T>(in + ((n_off + n0 + n) * C + c0) * g.in_size, I, g, col + n * OS * IK, IK);
        Eigen::Map<const RowMat> ColT(col, nc * OS, IK);
        if (nc == 1) {
          Eigen::Map<RowMat>(out + (n0 * O + o0) * OS, Og, OS).noalias() = W * ColT.transpose();
          continue;
        }
        tmp.resize(Og, nc * OS);
        tmp.noalias() = W * ColT.transpose();
      } else {
        for (int64_t n = 0; n < nc; ++n)
          Im2Col<T>(in + ((n_off + n0 + n) * C + c0) * g.in_size, I, g, col + n * OS, nc * OS);
        Eigen::Map<const RowMat> Col(col, IK, nc * OS);
        if (nc == 1) {
          Eigen::Map<RowMat>(out + (n0 * O + o0) * OS, Og, OS).noalias() = W * Col;
          continue;
        }
        tmp.resize(Og, nc * OS);
        tmp.noalias() = W * Col;
      }
      for (int64_t n = 0; n < nc; ++n)
        for (int64_t o = 0; o < Og; ++o)
          std::memcpy(out + ((n0 + n) * O + o0 + o) * OS, tmp.data() + o * nc * OS + n * OS,
                      static_cast<size_t>(OS) * sizeof(T));
    }
  }
}

// Buffers of the polyphase path, kept between calls like Scratch's.
void* PhaseScratch(int slot, int64_t bytes) {
  thread_local std::vector<uint8_t> buffers[2];
  std::vector<uint8_t>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < bytes) b.resize(static_cast<size_t>(bytes));
  return b.data();
}

bool NextIndex(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// lhs dilation s (the input gradient of a strided convolution) puts most
// window taps on holes: im2col would copy zeros and the GEMM multiply them.
// Split the output by phase instead: positions o = phase + s*m read only the
// taps k = k0 + s*t with k0 = (lo - phase) mod s, and over those the
// convolution is a plain one (stride 1, no dilation) with the sub-kernel
// ker[k0 + s*t] and low padding (lo - phase - k0) / s. One ordinary
// convolution per phase, written to its strided output positions. Needs
// window strides and rhs dilation 1 and one group.
template <typename T>
void ConvPolyphase(const T* in, const T* ker, T* out, int64_t N, int64_t C, int64_t O, const Geometry& g) {
  const int ns = g.ns;
  const std::vector<int64_t> kst = Strides(g.k), ost = Strides(g.out);
  std::vector<int64_t> phase(ns, 0);
  do {
    Geometry p;
    p.ns = ns;
    std::vector<int64_t> k0(ns);
    bool no_output = false;
    for (int d = 0; d < ns; ++d) {
      const int64_t s = g.ldil[d];
      k0[d] = ((g.lo[d] - phase[d]) % s + s) % s;
      p.in.push_back(g.in[d]);
      p.k.push_back(k0[d] < g.k[d] ? (g.k[d] - k0[d] + s - 1) / s : 0);
      p.out.push_back(phase[d] < g.out[d] ? (g.out[d] - phase[d] + s - 1) / s : 0);
      p.stride.push_back(1);
      p.lo.push_back((g.lo[d] - phase[d] - k0[d]) / s);  // exact: k0 makes it divisible
      p.ldil.push_back(1);
      p.rdil.push_back(1);
      p.in_size *= p.in[d];
      p.k_size *= p.k[d];
      p.out_size *= p.out[d];
      no_output |= p.out[d] == 0;
    }
    if (no_output) continue;
    T* part = static_cast<T*>(PhaseScratch(1, N * O * p.out_size * static_cast<int64_t>(sizeof(T))));
    if (p.k_size == 0) {
      std::fill_n(part, N * O * p.out_size, T(0));  // no tap of this phase falls on the input
    } else {
      T* sub = static_cast<T*>(PhaseScratch(0, O * C * p.k_size * static_cast<int64_t>(sizeof(T))));
      std::vector<int64_t> t(ns, 0);
      int64_t at = 0;
      do {
        int64_t src = 0;
        for (int d = 0; d < ns; ++d) src += (k0[d] + g.ldil[d] * t[d]) * kst[d];
        for (int64_t oc = 0; oc < O * C; ++oc) sub[oc * p.k_size + at] = ker[oc * g.k_size + src];
        ++at;
      } while (NextIndex(t, p.k));
      Conv<T>(in, sub, part, N, C, O, p, 1, 1);
    }
    // part[n, o, m...] -> out[n, o, phase + s*m ...]
    std::vector<int64_t> m(ns, 0);
    int64_t from = 0;
    do {
      int64_t to = 0;
      for (int d = 0; d < ns; ++d) to += (phase[d] + g.ldil[d] * m[d]) * ost[d];
      for (int64_t plane = 0; plane < N * O; ++plane) out[plane * g.out_size + to] = part[plane * p.out_size + from];
      ++from;
    } while (NextIndex(m, p.out));
  } while (NextIndex(phase, g.ldil));
}

}  // namespace

absl::Status EvalConvolution(const Instruction& instr, const Literal& lhs, const Literal& rhs, Literal* out) {
  const auto& c = instr.conv;
  const Shape& ls = lhs.shape();
  const Shape& rs = rhs.shape();
  const Shape& os = out->shape();
  if (ls.dtype != os.dtype || rs.dtype != os.dtype)
    return Invalid(instr, "input ", ls.ToString(), " and kernel ", rs.ToString(), " must have the result's type");
  if (os.dtype != DType::kF32 && os.dtype != DType::kF64)
    return IsFloat(os.dtype) ? UnsupportedType(instr, os.dtype)
                             : Unimplemented(instr, "integer convolution is not computed by this build");
  Geometry g;
  g.ns = static_cast<int>(c.input_spatial.size());
  if (ls.rank() != g.ns + 2 || rs.rank() != g.ns + 2 || os.rank() != g.ns + 2 ||
      static_cast<int>(c.kernel_spatial.size()) != g.ns || static_cast<int>(c.output_spatial.size()) != g.ns)
    return Invalid(instr, "dimension numbers do not fit ", ls.ToString(), " x ", rs.ToString());
  if (g.ns == 0) return Unimplemented(instr, "convolution without spatial dims is not computed (use dot_general)");
  for (int k = 0; k < g.ns; ++k) {
    g.in.push_back(ls.dims[c.input_spatial[k]]);
    g.k.push_back(rs.dims[c.kernel_spatial[k]]);
    g.out.push_back(os.dims[c.output_spatial[k]]);
    g.stride.push_back(k < static_cast<int>(c.window_strides.size()) ? c.window_strides[k] : 1);
    g.lo.push_back(k < static_cast<int>(c.padding.size()) ? c.padding[k].first : 0);
    g.ldil.push_back(k < static_cast<int>(c.lhs_dilation.size()) ? c.lhs_dilation[k] : 1);
    g.rdil.push_back(k < static_cast<int>(c.rhs_dilation.size()) ? c.rhs_dilation[k] : 1);
    if (g.stride[k] < 1 || g.ldil[k] < 1 || g.rdil[k] < 1) return Invalid(instr, "strides and dilations must be >= 1");
    g.in_size *= g.in[k];
    g.k_size *= g.k[k];
    g.out_size *= g.out[k];
  }
  const int64_t N = ls.dims[c.input_batch], C = ls.dims[c.input_feature], O = rs.dims[c.kernel_output_feature];
  const int64_t fg = c.feature_group_count, bg = c.batch_group_count;
  if (fg < 1 || bg < 1 || (fg > 1 && bg > 1) || C % fg || O % (fg * bg) || N % bg ||
      rs.dims[c.kernel_input_feature] != C / fg || os.dims[c.output_feature] != O || os.dims[c.output_batch] != N / bg)
    return Invalid(instr, "feature/batch groups do not fit ", ls.ToString(), " x ", rs.ToString(), " -> ",
                   os.ToString());
  if (os.elements() == 0) return absl::OkStatus();
  bool dilated = false, plain = fg == 1 && bg == 1;
  for (int k = 0; k < g.ns; ++k) {
    dilated |= g.ldil[k] > 1;
    plain &= g.stride[k] == 1 && g.rdil[k] == 1;
  }
  const bool polyphase = dilated && plain;
  std::vector<int64_t> lo = {c.input_batch, c.input_feature}, ko = {c.kernel_output_feature, c.kernel_input_feature},
                       oo = {c.output_batch, c.output_feature};
  lo.insert(lo.end(), c.input_spatial.begin(), c.input_spatial.end());
  ko.insert(ko.end(), c.kernel_spatial.begin(), c.kernel_spatial.end());
  oo.insert(oo.end(), c.output_spatial.begin(), c.output_spatial.end());
  const void* in = Canonical(lhs, lo, 1);
  const void* ker = Canonical(rhs, ko, 2);
  bool out_canonical = true;
  for (size_t k = 0; k < oo.size(); ++k) out_canonical &= oo[k] == static_cast<int64_t>(k);
  // Canonical result [N', O, OS...]; slot 0 when it must be permuted after.
  void* res = out_canonical ? out->data() : Scratch(0, os.bytes());
  if (g.k_size == 0 || C == 0) {
    std::memset(res, 0, static_cast<size_t>(os.bytes()));
  } else if (polyphase) {
    if (os.dtype == DType::kF32) {
      ConvPolyphase<float>(static_cast<const float*>(in), static_cast<const float*>(ker), static_cast<float*>(res), N,
                           C, O, g);
    } else {
      ConvPolyphase<double>(static_cast<const double*>(in), static_cast<const double*>(ker),
                            static_cast<double*>(res), N, C, O, g);
    }
  } else if (os.dtype == DType::kF32) {
    Conv<float>(static_cast<const float*>(in), static_cast<const float*>(ker), static_cast<float*>(res), N, C, O, g,
                fg, bg);
  } else {
    Conv<double>(static_cast<const double*>(in), static_cast<const double*>(ker), static_cast<double*>(res), N, C, O,
                 g, fg, bg);
  }
  if (!out_canonical) {
    // out dim oo[k] holds canonical dim k: walk the output in its own order.
    std::vector<int64_t> cdims = {N / bg, O};
    cdims.insert(cdims.end(), g.out.begin(), g.out.end());
    const std::vector<int64_t> cst = Strides(cdims);
    std::vector<int64_t> strides(os.rank());
    for (size_t k = 0; k < oo.size(); ++k) strides[oo[k]] = cst[k];
    StridedCopy(res, out->data(), DTypeBytes(os.dtype), os.dims, strides);
  }
  return absl::OkStatus();
}

}  // namespace shardscope::runtime::internal
