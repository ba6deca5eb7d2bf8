// The reference interpreter (see reference.h). Each op below is written from
// the spec's definition: "for every result index, the value is ...". Indices
// are plain vectors, values doubles (Literal::GetDouble/SetDouble round once
// into the result type). Integer results are made exact where double would not
// be (wrap-around, truncating division) by going through int64.
#include "runtime/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace shardscope::runtime {
namespace {

using compiler::CompareDirection;
using compiler::Instruction;
using compiler::Opcode;
using compiler::ReduceKind;
using Index = std::vector<int64_t>;

absl::Status Fail(const Instruction& i, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("reference: ", compiler::OpcodeName(i.op), " (%", i.id, "): ", why));
}

Index Unravel(int64_t k, const std::vector<int64_t>& dims) {
  Index idx(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = dims[d] ? k % dims[d] : 0;
    k = dims[d] ? k / dims[d] : 0;
  }
  return idx;
}
int64_t Ravel(const Index& idx, const std::vector<int64_t>& dims) {
  int64_t k = 0;
  for (size_t d = 0; d < dims.size(); ++d) k = k * dims[d] + idx[d];
  return k;
}
bool InBounds(const Index& idx, const std::vector<int64_t>& dims) {
  for (size_t d = 0; d < dims.size(); ++d)
    if (idx[d] < 0 || idx[d] >= dims[d]) return false;
  return true;
}
bool Has(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }
double Get(const Literal& l, const Index& idx) { return l.GetDouble(Ravel(idx, l.shape().dims)); }
bool IsIntType(DType t) { return t == DType::kI32 || t == DType::kI64; }

// Stores v into element k of `out`, wrapping integers like two's complement.
void Put(Literal* out, int64_t k, double v) {
  DType t = out->shape().dtype;
  if (t == DType::kI32) out->as<int32_t>()[k] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v)));
  else out->SetDouble(k, v);
}

double Combine(ReduceKind k, double a, double b) {
  switch (k) {
    case ReduceKind::kSum: return a + b;
    case ReduceKind::kProd: return a * b;
    case ReduceKind::kMax: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case ReduceKind::kMin: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  }
  return a;
}

// i1 values are 0/1: their sum is "or", product "and" (Put stores != 0).
double Binary(Opcode op, DType t, double a, double b) {
  const bool integer = IsIntType(t);
  switch (op) {
    case Opcode::kAdd: return a + b;
    case Opcode::kSubtract: return a - b;
    case Opcode::kMultiply: return a * b;
    case Opcode::kDivide:
      if (integer) return b == 0 ? -1.0 : std::trunc(a / b);
      return a / b;
    case Opcode::kMaximum: return Combine(ReduceKind::kMax, a, b);
    case Opcode::kMinimum: return Combine(ReduceKind::kMin, a, b);
    case Opcode::kPower:
      if (integer && b < 0) return a == 1 ? 1 : a == -1 ? (std::fmod(b, 2) != 0 ? -1 : 1) : 0;
      return std::pow(a, b);
    default: return NAN;
  }
}

double Unary(Opcode op, double x) {
  switch (op) {
    case Opcode::kNegate: return -x;
    case Opcode::kAbs: return std::fabs(x);
    case Opcode::kExponential: return std::exp(x);
    case Opcode::kLog: return std::log(x);
    case Opcode::kLogistic: return 1.0 / (1.0 + std::exp(-x));
    case Opcode::kTanh: return std::tanh(x);
    case Opcode::kSqrt: return std::sqrt(x);
    case Opcode::kRsqrt: return 1.0 / std::sqrt(x);
    default: return NAN;
  }
}

bool Compare(CompareDirection d, double a, double b) {
  switch (d) {
    case CompareDirection::kEQ: return a == b;
    case CompareDirection::kNE: return a != b;
    case CompareDirection::kLT: return a < b;
    case CompareDirection::kLE: return a <= b;
    case CompareDirection::kGT: return a > b;
    case CompareDirection::kGE: return a >= b;
  }
  return false;
}

// convert: float to integer truncates and saturates, NaN gives 0.
double Convert(double x, DType from, DType to) {
  if (to == DType::kI1) return x != 0;
  if (IsFloat(from) && IsIntType(to)) {
    if (std::isnan(x)) return 0;
    double lo = to == DType::kI32 ? -2147483648.0 : -9223372036854775808.0;
    if (x <= lo) return lo;
    if (x >= -lo) return to == DType::kI32 ? 2147483647.0 : 9223372036854775807.0;
    return std::trunc(x);
  }
  return x;
}

// Window position p (in the padded, dilated operand) -> operand index, or -1.
int64_t Undilate(int64_t p, int64_t dil, int64_t size) {
  if (p < 0 || p % dil != 0 || p / dil >= size) return -1;
  return p / dil;
}
int64_t Or(const std::vector<int64_t>& v, size_t k, int64_t d) { return k < v.size() ? v[k] : d; }

absl::Status Eval(const Instruction& i, const std::vector<const Literal*>& in, int64_t pid, Literal* out) {
  const Shape& os = out->shape();
  const int64_t n = os.elements();
  auto each = [&](auto f) {
    for (int64_t k = 0; k < n; ++k) Put(out, k, f(Unravel(k, os.dims), k));
  };
  auto A = [&](size_t k) -> const Literal& { return *in[k]; };
  switch (i.op) {
    case Opcode::kConstant: {
      const Literal& v = *i.literal;
      each([&](const Index&, int64_t k) { return v.GetDouble(v.elements() == 1 ? 0 : k); });
      return absl::OkStatus();
    }
    case Opcode::kIota:
      each([&](const Index& x, int64_t) { return static_cast<double>(x[i.dims[0]]); });
      return absl::OkStatus();
    case Opcode::kPartitionId:
      Put(out, 0, static_cast<double>(pid));
      return absl::OkStatus();
    case Opcode::kRngBitGenerator: {
      auto mix = [](uint64_t z) {
        z += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
      };
      const uint64_t key = static_cast<uint64_t>(A(0).as<int64_t>()[0]) ^ mix(static_cast<uint64_t>(A(0).as<int64_t>()[1]));
      for (int64_t k = 0; k < n; ++k) {
        uint64_t bits = mix(key + static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ull);
        if (os.dtype == DType::kI64) out->as<int64_t>()[k] = static_cast<int64_t>(bits);
        else out->as<int32_t>()[k] = static_cast<int32_t>(bits >> 32);
      }
      return absl::OkStatus();
    }
    case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kPower:
      each([&](const Index&, int64_t k) { return Binary(i.op, os.dtype, A(0).GetDouble(k), A(1).GetDouble(k)); });
      return absl::OkStatus();
    case Opcode::kNegate: case Opcode::kAbs: case Opcode::kExponential: case Opcode::kLog:
    case Opcode::kLogistic: case Opcode::kTanh: case Opcode::kSqrt: case Opcode::kRsqrt:
      each([&](const Index&, int64_t k) { return Unary(i.op, A(0).GetDouble(k)); });
      return absl::OkStatus();
    case Opcode::kClamp:
      each([&](const Index&, int64_t k) {
        double lo = A(0).GetDouble(A(0).elements() == 1 ? 0 : k), hi = A(2).GetDouble(A(2).elements() == 1 ? 0 : k);
        return Combine(ReduceKind::kMin, Combine(ReduceKind::kMax, A(1).GetDouble(k), lo), hi);
      });
      return absl::OkStatus();
    case Opcode::kCompare:
      each([&](const Index&, int64_t k) { return Compare(i.compare, A(0).GetDouble(k), A(1).GetDouble(k)) ? 1.0 : 0.0; });
      return absl::OkStatus();
    case Opcode::kSelect:
      each([&](const Index&, int64_t k) {
        return A(0).GetDouble(A(0).elements() == 1 ? 0 : k) != 0 ? A(1).GetDouble(k) : A(2).GetDouble(k);
      });
      return absl::OkStatus();
    case Opcode::kConvert:
      each([&](const Index&, int64_t k) { return Convert(A(0).GetDouble(k), A(0).shape().dtype, os.dtype); });
      return absl::OkStatus();
    case Opcode::kBroadcastInDim:
      each([&](const Index& x, int64_t) {
        const auto& d = A(0).shape().dims;
        Index s(d.size());
        for (size_t k = 0; k < d.size(); ++k) s[k] = d[k] == 1 ? 0 : x[i.dims[k]];
        return Get(A(0), s);
      });
      return absl::OkStatus();
    case Opcode::kReshape:
    case Opcode::kOptimizationBarrier:  // the first operand, unchanged
      each([&](const Index&, int64_t k) { return A(0).GetDouble(k); });
      return absl::OkStatus();
    case Opcode::kTranspose:
      each([&](const Index& x, int64_t) {
        Index s(x.size());
        for (size_t k = 0; k < x.size(); ++k) s[i.dims[k]] = x[k];
        return Get(A(0), s);
      });
      return absl::OkStatus();
    case Opcode::kSlice:
      each([&](const Index& x, int64_t) {
        Index s(x.size());
        for (size_t k = 0; k < x.size(); ++k) s[k] = i.slice.start[k] + x[k] * i.slice.stride[k];
        return Get(A(0), s);
      });
      return absl::OkStatus();
    case Opcode::kDynamicSlice: case Opcode::kDynamicUpdateSlice: {
      const bool update = i.op == Opcode::kDynamicUpdateSlice;
      const auto& od = A(0).shape().dims;
      const auto& sizes = update ? A(1).shape().dims : os.dims;
      Index start(od.size());
      for (size_t k = 0; k < od.size(); ++k)
        start[k] = std::clamp<int64_t>(static_cast<int64_t>(A(k + (update ? 2 : 1)).GetDouble(0)), 0, od[k] - sizes[k]);
      each([&](const Index& x, int64_t k) {
        if (!update) {
          Index s(x.size());
          for (size_t d = 0; d < x.size(); ++d) s[d] = start[d] + x[d];
          return Get(A(0), s);
        }
        Index u(x.size());
        for (size_t d = 0; d < x.size(); ++d) u[d] = x[d] - start[d];
        return InBounds(u, sizes) ? Get(A(1), u) : A(0).GetDouble(k);
      });
      return absl::OkStatus();
    }
    case Opcode::kPad:
      each([&](const Index& x, int64_t) {
        Index s(x.size());
        for (size_t k = 0; k < x.size(); ++k) {
          int64_t p = x[k] - i.pad.low[k];
          if (p < 0 || p % (i.pad.interior[k] + 1) != 0) return A(1).GetDouble(0);
          s[k] = p / (i.pad.interior[k] + 1);
        }
        return InBounds(s, A(0).shape().dims) ? Get(A(0), s) : A(1).GetDouble(0);
      });
      return absl::OkStatus();
    case Opcode::kConcatenate:
      each([&](const Index& x, int64_t) {
        Index s = x;
        const int64_t d = i.dims[0];
        for (const Literal* l : in) {
          if (s[d] < l->shape().dims[d]) return Get(*l, s);
          s[d] -= l->shape().dims[d];
        }
        return std::numeric_limits<double>::quiet_NaN();
      });
      return absl::OkStatus();
    case Opcode::kDotGeneral: {
      const auto& dd = i.dot;
      const Shape& ls = A(0).shape();
      const Shape& rs = A(1).shape();
      std::vector<int64_t> lfree, rfree, csize;
      for (int d = 0; d < ls.rank(); ++d)
        if (!Has(dd.lhs_batch, d) && !Has(dd.lhs_contracting, d)) lfree.push_back(d);
      for (int d = 0; d < rs.rank(); ++d)
        if (!Has(dd.rhs_batch, d) && !Has(dd.rhs_contracting, d)) rfree.push_back(d);
      int64_t ctotal = 1;
      for (int64_t d : dd.lhs_contracting) { csize.push_back(ls.dims[d]); ctotal *= ls.dims[d]; }
      each([&](const Index& x, int64_t) {
        Index l(ls.rank()), r(rs.rank());
        size_t p = 0;
        for (size_t k = 0; k < dd.lhs_batch.size(); ++k, ++p) { l[dd.lhs_batch[k]] = x[p]; r[dd.rhs_batch[k]] = x[p]; }
        for (int64_t d : lfree) l[d] = x[p++];
        for (int64_t d : rfree) r[d] = x[p++];
        double sum = 0;
        for (int64_t c = 0; c < ctotal; ++c) {
          Index ci = Unravel(c, csize);
          for (size_t k = 0; k < ci.size(); ++k) { l[dd.lhs_contracting[k]] = ci[k]; r[dd.rhs_contracting[k]] = ci[k]; }
          sum += Get(A(0), l) * Get(A(1), r);
        }
        return sum;
      });
      return absl::OkStatus();
    }
    case Opcode::kConvolution: {
      // out[b, o, s...] = sum_{c, k...} lhs[batch, group's c, s*stride + k*rdil - lo (undilated)] * rhs[o, c, k...]
      const auto& c = i.conv;
      const Shape& ls = A(0).shape();
      const Shape& rs = A(1).shape();
      const size_t ns = c.input_spatial.size();
      const int64_t I = rs.dims[c.kernel_input_feature], O = rs.dims[c.kernel_output_feature];
      const int64_t N = ls.dims[c.input_batch];
      std::vector<int64_t> ksize;
      for (int64_t d : c.kernel_spatial) ksize.push_back(rs.dims[d]);
      int64_t ktotal = 1;
      for (int64_t k : ksize) ktotal *= k;
      each([&](const Index& x, int64_t) {
        const int64_t b = x[c.output_batch], o = x[c.output_feature];
        const int64_t fgroup = o / (O / c.feature_group_count), bgroup = o / (O / c.batch_group_count);
        Index l(ls.rank()), r(rs.rank());
        l[c.input_batch] = bgroup * (N / c.batch_group_count) + b;
        r[c.kernel_output_feature] = o;
        double sum = 0;
        for (int64_t f = 0; f < I; ++f) {
          l[c.input_feature] = fgroup * I + f;
          r[c.kernel_input_feature] = f;
          for (int64_t kk = 0; kk < ktotal; ++kk) {
            Index ki = Unravel(kk, ksize);
            bool inside = true;
            for (size_t s = 0; s < ns; ++s) {
              int64_t p = x[c.output_spatial[s]] * Or(c.window_strides, s, 1) + ki[s] * Or(c.rhs_dilation, s, 1) -
                          (s < c.padding.size() ? c.padding[s].first : 0);
              int64_t q = Undilate(p, Or(c.lhs_dilation, s, 1), ls.dims[c.input_spatial[s]]);
              inside &= q >= 0;
              l[c.input_spatial[s]] = q;
              r[c.kernel_spatial[s]] = ki[s];
            }
            if (inside) sum += Get(A(0), l) * Get(A(1), r);
          }
        }
        return sum;
      });
      return absl::OkStatus();
    }
    case Opcode::kReduce: {
      const Shape& is = A(0).shape();
      std::vector<double> acc(n, A(1).GetDouble(0));
      for (int64_t k = 0; k < is.elements(); ++k) {
        Index x = Unravel(k, is.dims), kept;
        for (int d = 0; d < is.rank(); ++d)
          if (!Has(i.dims, d)) kept.push_back(x[d]);
        double& a = acc[Ravel(kept, os.dims)];
        a = Combine(i.reduce, a, A(0).GetDouble(k));
      }
      for (int64_t k = 0; k < n; ++k) Put(out, k, acc[k]);
      return absl::OkStatus();
    }
    case Opcode::kReduceWindow: {
      const auto& w = i.window;
      const Shape& is = A(0).shape();
      const double init = A(1).GetDouble(0);
      int64_t wtotal = 1;
      for (int64_t d : w.dimensions) wtotal *= d;
      each([&](const Index& x, int64_t) {
        double acc = init;
        for (int64_t wk = 0; wk < wtotal; ++wk) {
          Index wi = Unravel(wk, w.dimensions), s(x.size());
          bool inside = true;
          for (size_t d = 0; d < x.size(); ++d) {
            int64_t p = x[d] * Or(w.strides, d, 1) + wi[d] * Or(w.window_dilations, d, 1) -
                        (d < w.padding.size() ? w.padding[d].first : 0);
            s[d] = Undilate(p, Or(w.base_dilations, d, 1), is.dims[d]);
            inside &= s[d] >= 0;
          }
          acc = Combine(i.reduce, acc, inside ? Get(A(0), s) : init);
        }
        return acc;
      });
      return absl::OkStatus();
    }
    case Opcode::kGather: {
      const auto& g = i.gather;
      const Shape& as = A(0).shape();
      const Shape& is = A(1).shape();
      each([&](const Index& x, int64_t) {
        Index batch, offset, full(as.rank(), 0);
        for (int d = 0; d < os.rank(); ++d) (Has(g.offset_dims, d) ? offset : batch).push_back(x[d]);
        for (size_t k = 0; k < g.start_index_map.size(); ++k) {
          Index ix = batch;  // the index vector dim inserted at index_vector_dim
          if (g.index_vector_dim < is.rank()) ix.insert(ix.begin() + g.index_vector_dim, static_cast<int64_t>(k));
          const int64_t d = g.start_index_map[k];
          full[d] = std::clamp<int64_t>(static_cast<int64_t>(Get(A(1), ix)), 0, as.dims[d] - g.slice_sizes[d]);
        }
        size_t o = 0;
        for (int d = 0; d < as.rank(); ++d)
          if (!Has(g.collapsed_slice_dims, d)) full[d] += offset[o++];
        return Get(A(0), full);
      });
      return absl::OkStatus();
    }
    case Opcode::kScatter: {
      const auto& s = i.scatter;
      const Shape& is = A(1).shape();
      const Shape& us = A(2).shape();
      std::vector<double> res(n);
      for (int64_t k = 0; k < n; ++k) res[k] = A(0).GetDouble(k);
      for (int64_t k = 0; k < us.elements(); ++k) {
        Index u = Unravel(k, us.dims), scatter, window, full(os.rank(), 0);
        for (int d = 0; d < us.rank(); ++d) (Has(s.update_window_dims, d) ? window : scatter).push_back(u[d]);
        for (size_t v = 0; v < s.scatter_dims_to_operand_dims.size(); ++v) {
          Index ix = scatter;
          if (s.index_vector_dim < is.rank()) ix.insert(ix.begin() + s.index_vector_dim, static_cast<int64_t>(v));
          full[s.scatter_dims_to_operand_dims[v]] = static_cast<int64_t>(Get(A(1), ix));
        }
        size_t w = 0;
        for (int d = 0; d < os.rank(); ++d)
          if (!Has(s.inserted_window_dims, d)) full[d] += window[w++];
        if (!InBounds(full, os.dims)) continue;  // skipped, as the kernels do
        double& r = res[Ravel(full, os.dims)];
        r = s.replace ? A(2).GetDouble(k) : Combine(i.reduce, r, A(2).GetDouble(k));
      }
      for (int64_t k = 0; k < n; ++k) Put(out, k, res[k]);
      return absl::OkStatus();
    }
    default:
      return Fail(i, "no reference for this op");
  }
}

}  // namespace

absl::Status EvalReference(const Instruction& instr, const std::vector<const Literal*>& operands,
                           int64_t partition_id, Literal* out) {
  if (out == nullptr || out->shape() != instr.shape) return Fail(instr, "output does not have the instruction's type");
  const int arity = compiler::OpcodeArity(instr.op);
  if ((arity >= 0 && static_cast<int>(operands.size()) != arity) || operands.size() != instr.operands.size())
    return Fail(instr, "wrong number of operands");
  for (size_t k = 0; k < operands.size(); ++k)
    if (operands[k] == nullptr || operands[k]->shape() != instr.operands[k]->shape)
      return Fail(instr, absl::StrCat("operand ", k, " does not have the instruction's operand type"));
  if (auto s = compiler::InferShape(instr); !s.ok() || *s != instr.shape)
    return Fail(instr, s.ok() ? "result type differs from the inferred one" : std::string(s.status().message()));
  if (instr.op == Opcode::kConstant && !instr.literal) return Fail(instr, "constant without a value");
  return Eval(instr, operands, partition_id, out);
}

}  // namespace shardscope::runtime
