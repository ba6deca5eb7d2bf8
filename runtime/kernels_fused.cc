// Fused loop kernels (compiler/fusion.h): the members of a kernel run block
// by block over the loop's linear index space, each block small enough to stay
// in cache, so an intermediate never goes out to memory. Every member's block
// is computed with the same scalar functions and Eigen array expressions as
// its unfused kernel (kernels_elementwise.cc, kernels_reduce.cc), so fusion
// changes where values live, not what they are. Blocks are split over the
// chip's gang (intra_op.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

// See kernels_dot.cc: a GCC 12 false positive inside AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include "absl/container/inlined_vector.h"
#include "runtime/intra_op.h"
#include "runtime/kernels.h"
#include "runtime/kernels_internal.h"
#include "runtime/kernels_vector.h"

namespace shardscope::runtime {
namespace {

using compiler::CompareDirection;
using compiler::FusedKernel;
using compiler::Instruction;
using compiler::Opcode;
using compiler::ReduceKind;
using internal::Pred;

constexpr int64_t kBlock = 2048;  // elements per member block: 8 KiB of f32

// Where a member reads one operand from.
struct Source {
  int member = -1;                 // index of a member computed in this block, or
  const Literal* value = nullptr;  // a value outside the kernel: full size, or one element (splat)
};

// How a broadcast member maps output index i to its operand's element.
struct BroadcastMap {
  enum class Mode { kSplat, kInner, kOuter, kGeneral } mode = Mode::kGeneral;
  int64_t size = 1;                      // kInner: i % size; kOuter: i / size
  std::vector<int64_t> out_dims, strides;  // kGeneral: operand stride per output dim (0: broadcast)
};

struct Step {
  const Instruction* instr = nullptr;
  std::vector<Source> in;
  bool pred = false;  // i1 block (else f32)
  bool alias = false; // a reshape: its block is its operand's
  BroadcastMap bcast;
  // An f32 broadcast of one value: binary arithmetic reads the value itself;
  // its block is filled only when another kind of member reads it.
  bool splat = false;
  float splat_value = 0;
  bool needs_block = true;
};

// Sets `m` to how broadcast `b` maps its output to its operand, reusing m's
// vectors (a runner's steps are kept per thread: no allocation once grown).
void MapBroadcast(const Instruction& b, BroadcastMap* m) {
  const Shape& in = b.operands[0]->shape;
  const Shape& out = b.shape;
  const int64_t ie = in.elements();
  m->size = 1;
  if (ie == 1) {
    m->mode = BroadcastMap::Mode::kSplat;
    return;
  }
  // The operand's dims of size > 1 (size-1 dims repeat, like missing ones),
  // in order and each filling its output dim: the operand is then the
  // output's trailing block (i % size) when they are the output's last dims,
  // or its leading block (i / size) when they are its first ones.
  absl::InlinedVector<int64_t, 8> kept;  // output positions of the operand's dims of size > 1
  bool ordered = true, full = true;
  for (size_t k = 0; k < b.dims.size(); ++k) {
    if (in.dims[k] == 1) continue;
    if (!kept.empty() && b.dims[k] <= kept.back()) ordered = false;
    if (in.dims[k] != out.dims[b.dims[k]]) full = false;
    kept.push_back(b.dims[k]);
  }
  const int r = out.rank(), n = in.rank();
  if (ordered && full && !kept.empty()) {
    // Output dims of size 1 may sit anywhere without breaking the block.
    int64_t lo = kept.front(), hi = kept.back();
    bool contiguous = true;
    for (int64_t d = lo; d <= hi; ++d)
      if (out.dims[d] != 1 && std::find(kept.begin(), kept.end(), d) == kept.end()) contiguous = false;
    bool suffix = contiguous, prefix = contiguous;
    for (int64_t d = hi + 1; d < r; ++d) suffix &= out.dims[d] == 1;
    for (int64_t d = 0; d < lo; ++d) prefix &= out.dims[d] == 1;
    if (suffix) {
      m->mode = BroadcastMap::Mode::kInner;
      m->size = ie;
      return;
    }
    if (prefix) {
      m->mode = BroadcastMap::Mode::kOuter;
      m->size = out.elements() / ie;
      return;
    }
  }
  m->mode = BroadcastMap::Mode::kGeneral;
  m->out_dims.assign(out.dims.begin(), out.dims.end());
  m->strides.assign(r, 0);
  absl::InlinedVector<int64_t, 8> in_strides(n, 1);
  for (int k = n - 2; k >= 0; --k) in_strides[k] = in_strides[k + 1] * in.dims[k + 1];
  for (int k = 0; k < n; ++k)
    if (in.dims[k] != 1) m->strides[b.dims[k]] = in_strides[k];
}

// Fills dst[0..len) with the broadcast's values at output indices [begin, begin+len).
template <typename T>
void Broadcast(const BroadcastMap& m, const T* src, int64_t begin, int64_t len, T* dst) {
  switch (m.mode) {
    case BroadcastMap::Mode::kSplat: std::fill_n(dst, len, src[0]); return;
    case BroadcastMap::Mode::kInner: {
      int64_t j = begin % m.size, i = 0;
      while (i < len) {
        const int64_t run = std::min(len - i, m.size - j);
        std::memcpy(dst + i, src + j, static_cast<size_t>(run) * sizeof(T));
        i += run;
        j = 0;
      }
      return;
    }
    case BroadcastMap::Mode::kOuter: {
      int64_t i = 0, q = begin / m.size, r = begin % m.size;
      while (i < len) {
        const int64_t run = std::min(len - i, m.size - r);
        std::fill_n(dst + i, run, src[q]);
        i += run;
        ++q;
        r = 0;
      }
      return;
    }
    case BroadcastMap::Mode::kGeneral: {
      const int r = static_cast<int>(m.out_dims.size());
      absl::InlinedVector<int64_t, 8> idx(r);
      int64_t rest = begin, off = 0;
      for (int k = r - 1; k >= 0; --k) {
        idx[k] = rest % m.out_dims[k];
        rest /= m.out_dims[k];
        off += idx[k] * m.strides[k];
      }
      for (int64_t i = 0; i < len; ++i) {
        dst[i] = src[off];
        for (int k = r - 1; k >= 0; --k) {  // odometer step
          off += m.strides[k];
          if (++idx[k] < m.out_dims[k]) break;
          off -= m.strides[k] * m.out_dims[k];
          idx[k] = 0;
        }
      }
      return;
    }
  }
}

// One thread's blocks: slot k holds member k's values for the current block.
// Aligned as a Literal's storage is (compiler/literal.h): Eigen computes the
// elements before the first aligned one without vectors (std::exp against its
// own polynomial, a sum in another order), so with malloc's alignment, which
// differs from process to process, llama's losses differed in their 7th digit
// between two identical runs.
struct Blocks {
  std::vector<float, AlignedAllocator<float>> f;
  std::vector<Pred, AlignedAllocator<Pred>> p;
  std::vector<float, AlignedAllocator<float>> splat_f;  // splat operands, materialised per block
  std::vector<Pred, AlignedAllocator<Pred>> splat_p;
  void Reserve(size_t members, int64_t len) {
    const size_t need = members * static_cast<size_t>(len);
    if (f.size() < need) f.resize(need);
    if (p.size() < need) p.resize(need);
    if (splat_f.size() < 3 * static_cast<size_t>(len)) splat_f.resize(3 * len);
    if (splat_p.size() < 3 * static_cast<size_t>(len)) splat_p.resize(3 * len);
  }
};

Blocks& ThreadBlocks() {
  thread_local Blocks b;  // grows only: fresh pages are slow here (MACHINE-NOTES)
  return b;
}

// Binary ops that read a splat operand as one value (no block).
bool ScalarAware(Opcode op) {
  switch (op) {
    case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum:
      return true;
    default:
      return false;
  }
}

// The op on two single values, as the vector paths compute it per element.
float ScalarOp(Opcode op, float x, float y) {
  float out = 0;
  switch (op) {
    case Opcode::kAdd: return x + y;
    case Opcode::kSubtract: return x - y;
    case Opcode::kMultiply: return x * y;
    case Opcode::kDivide: return x / y;
    case Opcode::kMaximum: internal::VecMaxMin<float, true>(&x, false, &y, false, &out, 1); return out;
    case Opcode::kMinimum: internal::VecMaxMin<float, false>(&x, false, &y, false, &out, 1); return out;
    default: return 0;
  }
}

// A runner's per-member state, kept per thread and reused. Built fresh per
// call (a vector per member and one per instruction id, twice a call), a
// small kernel's time was mostly malloc under the one arena's lock that the
// other chip thread takes too (runtime/heap.h): the cnn's fused kernels under
// 4 KiB took 9.5 us a call, 3 us without (docs/simulate.md).
struct RunnerState {
  std::vector<Step> steps;  // grows only; a runner uses the first members.size()
  std::vector<float*> ptr_f;
  std::vector<Pred*> ptr_p;
  bool busy = false;  // a runner of this thread holds it
};

RunnerState& ThreadRunnerState() {
  thread_local RunnerState s;
  return s;
}

class FusedRunner {
 public:
  FusedRunner(const FusedKernel& k, const std::vector<const Literal*>& values) : kernel_(k) {
    RunnerState& shared = ThreadRunnerState();
    state_ = shared.busy ? &own_ : &shared;  // a second runner alive on this thread: its own
    state_->busy = true;
    n_ = k.members.size();
    if (state_->steps.size() < n_) state_->steps.resize(n_);
    for (size_t m = 0; m < n_; ++m) {
      const Instruction* i = k.members[m];
      Step& s = state_->steps[m];
      s.instr = i;
      s.pred = i->shape.dtype == DType::kI1;
      s.alias = i->op == Opcode::kReshape;
      s.splat = false;
      s.splat_value = 0;
      s.needs_block = true;
      s.in.clear();
      if (i->op == Opcode::kBroadcastInDim) MapBroadcast(*i, &s.bcast);
      for (const Instruction* o : i->operands) {
        Source src;
        src.member = MemberIndex(o, m);
        if (src.member < 0) src.value = values[o->id];
        s.in.push_back(src);
      }
      if (i->op == Opcode::kBroadcastInDim && s.bcast.mode == BroadcastMap::Mode::kSplat && !s.pred &&
          s.in[0].value != nullptr) {
        s.splat = true;
        s.splat_value = s.in[0].value->as<float>()[0];
      }
    }
    for (size_t m = 0; m < n_; ++m)
      if (step(m).splat) step(m).needs_block = false;
    for (size_t m = 0; m < n_; ++m) {
      const Step& st = step(m);
      const bool scalar_aware = ScalarAware(st.instr->op) && st.in.size() == 2 && !st.pred;
      for (const Source& src : st.in)
        if (src.member >= 0 && !scalar_aware) step(src.member).needs_block = true;
    }
    // The root's block is the kernel's output: a splat root is always filled.
    if (step(n_ - 1).splat) step(n_ - 1).needs_block = true;
  }
  ~FusedRunner() { state_->busy = false; }
  FusedRunner(const FusedRunner&) = delete;
  FusedRunner& operator=(const FusedRunner&) = delete;

  absl::Status Check() const {
    for (size_t m = 0; m < n_; ++m)
      for (const Source& src : step(m).in)
        if (src.member < 0 && !src.value)
          return absl::InternalError(absl::StrCat(kernel_.name(), ": an operand of ", step(m).instr->id, " is missing"));
    return absl::OkStatus();
  }

  // Computes every member but the root for loop indices [begin, begin+len),
  // then the root into `root_out` (f32 or i1, len elements) — or, for a
  // reduce kernel, leaves the reduce's operand block in `*reduce_in`.
  void RunBlock(Blocks& b, int64_t begin, int64_t len, void* root_out, const float** reduce_in) {
    std::vector<float*>& ptr_f = state_->ptr_f;
    std::vector<Pred*>& ptr_p = state_->ptr_p;
    ptr_f.assign(n_, nullptr);
    ptr_p.assign(n_, nullptr);
    const size_t last = n_ - 1;
    for (size_t m = 0; m < n_; ++m) {
      const Step& s = step(m);
      if (m == last && s.instr->op == Opcode::kReduce) {
        *reduce_in = F(b, s.in[0], begin, len, 0);
        return;
      }
      const Source& first = s.in[0];
      if (s.alias && m != last && (first.member >= 0 || first.value->elements() == len)) {
        // A reshape inside the kernel is free: its block is its operand's.
        ptr_f[m] = s.pred ? nullptr : const_cast<float*>(F(b, first, begin, len, 0));
        ptr_p[m] = s.pred ? const_cast<Pred*>(P(b, first, begin, len, 0)) : nullptr;
        continue;
      }
      if (!s.needs_block) continue;  // a splat read as its value (Scalar)
      float* of = b.f.data() + m * len;
      Pred* op = b.p.data() + m * len;
      if (m == last) {
        of = s.pred ? nullptr : static_cast<float*>(root_out);
        op = s.pred ? static_cast<Pred*>(root_out) : nullptr;
      }
      Eval(b, s, begin, len, of, op);
      ptr_f[m] = of;
      ptr_p[m] = op;
    }
  }

  const FusedKernel& kernel() const { return kernel_; }

 private:
  // True (and the value) when `src` is one f32 value: a splat member or a
  // one-element operand.
  bool Scalar(const Source& src, float* v) const {
    if (src.member >= 0) {
      if (!step(src.member).splat) return false;
      *v = step(src.member).splat_value;
      return true;
    }
    if (src.value->elements() != 1 || src.value->shape().dtype != DType::kF32) return false;
    *v = src.value->as<float>()[0];
    return true;
  }

  // Operand blocks. `slot` (0-2) picks the splat buffer, so up to three
  // splat operands of one op coexist.
  const float* F(Blocks& b, const Source& s, int64_t begin, int64_t len, int slot) {
    if (s.member >= 0) return state_->ptr_f[s.member];
    if (s.value->elements() == 1) {
      float* d = b.splat_f.data() + slot * len;
      std::fill_n(d, len, s.value->as<float>()[0]);
      return d;
    }
    return s.value->as<float>() + begin;
  }
  const Pred* P(Blocks& b, const Source& s, int64_t begin, int64_t len, int slot) {
    if (s.member >= 0) return state_->ptr_p[s.member];
    if (s.value->elements() == 1) {
      Pred* d = b.splat_p.data() + slot * len;
      std::fill_n(d, len, s.value->as<Pred>()[0]);
      return d;
    }
    return s.value->as<Pred>() + begin;
  }

  void Eval(Blocks& b, const Step& s, int64_t begin, int64_t len, float* of, Pred* op) {
    using namespace internal;
    const Instruction& i = *s.instr;
    using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
    switch (i.op) {
      case Opcode::kBroadcastInDim:
        // The operand is never a member (fusion.h): read through the map.
        if (s.pred) Broadcast(s.bcast, s.in[0].value->as<Pred>(), begin, len, op);
        else Broadcast(s.bcast, s.in[0].value->as<float>(), begin, len, of);
        return;
      case Opcode::kReshape:
      case Opcode::kConvert: {
        // A reshape computed here is the root (or reshapes a splat): a copy.
        const bool from_pred = i.operands[0]->shape.dtype == DType::kI1;
        if (s.pred) {
          if (from_pred) std::memcpy(op, P(b, s.in[0], begin, len, 0), len);
          else {
            const float* a = F(b, s.in[0], begin, len, 0);
            for (int64_t k = 0; k < len; ++k) op[k] = a[k] != 0.0f ? 1 : 0;
          }
        } else if (from_pred) {
          const Pred* a = P(b, s.in[0], begin, len, 0);
          for (int64_t k = 0; k < len; ++k) of[k] = static_cast<float>(a[k]);
        } else {
          std::memcpy(of, F(b, s.in[0], begin, len, 0), len * sizeof(float));
        }
        return;
      }
      case Opcode::kCompare: {
        const float* x = F(b, s.in[0], begin, len, 0);
        const float* y = F(b, s.in[1], begin, len, 1);
        switch (i.compare) {
          case CompareDirection::kEQ: for (int64_t k = 0; k < len; ++k) op[k] = x[k] == y[k]; break;
          case CompareDirection::kNE: for (int64_t k = 0; k < len; ++k) op[k] = x[k] != y[k]; break;
          case CompareDirection::kLT: for (int64_t k = 0; k < len; ++k) op[k] = x[k] < y[k]; break;
          case CompareDirection::kLE: for (int64_t k = 0; k < len; ++k) op[k] = x[k] <= y[k]; break;
          case CompareDirection::kGT: for (int64_t k = 0; k < len; ++k) op[k] = x[k] > y[k]; break;
          case CompareDirection::kGE: for (int64_t k = 0; k < len; ++k) op[k] = x[k] >= y[k]; break;
        }
        return;
      }
      case Opcode::kSelect: {
        const Pred* c = P(b, s.in[0], begin, len, 0);
        const float* t = F(b, s.in[1], begin, len, 1);
        const float* f = F(b, s.in[2], begin, len, 2);
        for (int64_t k = 0; k < len; ++k) of[k] = c[k] ? t[k] : f[k];
        return;
      }
      case Opcode::kClamp: {
        const float* lo = F(b, s.in[0], begin, len, 0);
        const float* x = F(b, s.in[1], begin, len, 1);
        const float* hi = F(b, s.in[2], begin, len, 2);
        VecMaxMin<float, true>(x, false, lo, false, of, len);
        VecMaxMin<float, false>(of, false, hi, false, of, len);
        return;
      }
      default: break;
    }
    if (s.in.size() == 2 && ScalarAware(i.op)) {
      float xs = 0, ys = 0;
      const bool xsc = Scalar(s.in[0], &xs), ysc = Scalar(s.in[1], &ys);
      if (xsc || ysc) {
        const float* x = xsc ? nullptr : F(b, s.in[0], begin, len, 0);
        const float* y = ysc ? nullptr : F(b, s.in[1], begin, len, 1);
        if (xsc && ysc) {
          const float v = ScalarOp(i.op, xs, ys);
          std::fill_n(of, len, v);
        } else if (ysc) {
          switch (i.op) {
            case Opcode::kAdd: for (int64_t k = 0; k < len; ++k) of[k] = x[k] + ys; return;
            case Opcode::kSubtract: for (int64_t k = 0; k < len; ++k) of[k] = x[k] - ys; return;
            case Opcode::kMultiply: for (int64_t k = 0; k < len; ++k) of[k] = x[k] * ys; return;
            case Opcode::kDivide: for (int64_t k = 0; k < len; ++k) of[k] = x[k] / ys; return;
            case Opcode::kMaximum: VecMaxMin<float, true>(x, false, &ys, true, of, len); return;
            case Opcode::kMinimum: VecMaxMin<float, false>(x, false, &ys, true, of, len); return;
            default: break;
          }
        } else {
          switch (i.op) {
            case Opcode::kAdd: for (int64_t k = 0; k < len; ++k) of[k] = xs + y[k]; return;
            case Opcode::kSubtract: for (int64_t k = 0; k < len; ++k) of[k] = xs - y[k]; return;
            case Opcode::kMultiply: for (int64_t k = 0; k < len; ++k) of[k] = xs * y[k]; return;
            case Opcode::kDivide: for (int64_t k = 0; k < len; ++k) of[k] = xs / y[k]; return;
            case Opcode::kMaximum: VecMaxMin<float, true>(&xs, true, y, false, of, len); return;
            case Opcode::kMinimum: VecMaxMin<float, false>(&xs, true, y, false, of, len); return;
            default: break;
          }
        }
        return;
      }
    }
    if (s.in.size() == 2) {
      const float* x = F(b, s.in[0], begin, len, 0);
      const float* y = F(b, s.in[1], begin, len, 1);
      switch (i.op) {
        case Opcode::kAdd: for (int64_t k = 0; k < len; ++k) of[k] = x[k] + y[k]; return;
        case Opcode::kSubtract: for (int64_t k = 0; k < len; ++k) of[k] = x[k] - y[k]; return;
        case Opcode::kMultiply: for (int64_t k = 0; k < len; ++k) of[k] = x[k] * y[k]; return;
        case Opcode::kDivide: for (int64_t k = 0; k < len; ++k) of[k] = x[k] / y[k]; return;
        case Opcode::kMaximum: VecMaxMin<float, true>(x, false, y, false, of, len); return;
        case Opcode::kMinimum: VecMaxMin<float, false>(x, false, y, false, of, len); return;
        case Opcode::kPower: for (int64_t k = 0; k < len; ++k) of[k] = std::pow(x[k], y[k]); return;
        default: break;
      }
    }
    const float* x = F(b, s.in[0], begin, len, 0);
    Eigen::Map<const Arr> in(x, len);
    Eigen::Map<Arr> res(of, len);
    switch (i.op) {
      case Opcode::kNegate: for (int64_t k = 0; k < len; ++k) of[k] = -x[k]; return;
      case Opcode::kAbs: for (int64_t k = 0; k < len; ++k) of[k] = std::fabs(x[k]); return;
      case Opcode::kExponential: res = FlushedExp<float>(in); return;
      case Opcode::kLog: res = in.log(); return;
      case Opcode::kTanh: res = in.tanh(); return;
      case Opcode::kSqrt: res = in.sqrt(); return;
      case Opcode::kRsqrt: res = in.rsqrt(); return;
      case Opcode::kLogistic: res = (1.0f + FlushedExp<float>(-in)).inverse(); return;
      default: break;
    }
  }

  Step& step(size_t m) { return state_->steps[m]; }
  const Step& step(size_t m) const { return state_->steps[m]; }
  // The member computing `o` (operands precede their users: searched back
  // from `m`), or -1 for a value from outside the kernel.
  int MemberIndex(const Instruction* o, size_t m) const {
    const auto& members = kernel_.members;
    for (size_t j = m; j-- > 0;)
      if (members[j] == o) return static_cast<int>(j);
    for (size_t j = m + 1; j < members.size(); ++j)
      if (members[j] == o) return static_cast<int>(j);
    return -1;
  }

  const FusedKernel& kernel_;
  RunnerState* state_ = nullptr;
  RunnerState own_;
  size_t n_ = 0;
};

float ReduceInit(const Instruction& r, const std::vector<const Literal*>& values) {
  return values[r.operands[1]->id]->as<float>()[0];
}

template <ReduceKind K>
inline float Combine(float a, float b) {
  using namespace internal;
  if constexpr (K == ReduceKind::kSum) return a + b;
  else if constexpr (K == ReduceKind::kProd) return a * b;
  else if constexpr (K == ReduceKind::kMax) return Max<float>(a, b);
  else return Min<float>(a, b);
}

template <ReduceKind K>
float ReduceRow(const float* p, int64_t n) {
  Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, 1>> a(p, n);
  if constexpr (K == ReduceKind::kSum) return a.sum();
  else if constexpr (K == ReduceKind::kProd) return a.prod();
  else if constexpr (K == ReduceKind::kMax) return a.maxCoeff<Eigen::PropagateNaN>();
  else return a.minCoeff<Eigen::PropagateNaN>();
}

// Reduce kernels: rows of the operand's [outer, inner] view. Trailing
// reductions reduce each row (blocks are whole rows, split over the gang);
// leading ones add whole rows into the output (one thread, in row order).
// Runs body(runner) with `first` (the calling thread's runner) on the thread
// that made it, and with a runner of their own on a gang's helpers.
template <typename Body>
void WithRunner(FusedRunner& first, std::thread::id caller, const FusedKernel& k,
                const std::vector<const Literal*>& values, Body&& body) {
  if (std::this_thread::get_id() == caller) {
    body(first);
  } else {
    FusedRunner run(k, values);
    body(run);
  }
}

template <ReduceKind K>
absl::Status RunReduce(const FusedKernel& k, const std::vector<const Literal*>& values, FusedRunner& first,
                       Literal* out) {
  const Instruction& r = *k.root;
  const Shape& in = r.operands[0]->shape;
  const int64_t n = in.elements();
  const int64_t out_n = r.shape.elements();
  const float init = ReduceInit(r, values);
  float* o = out->as<float>();
  int64_t lo = *std::min_element(r.dims.begin(), r.dims.end());
  const bool trailing = lo > 0 || static_cast<int64_t>(r.dims.size()) == in.rank();
  if (trailing) {
    const int64_t inner = out_n > 0 ? n / out_n : 0;
    if (inner == 0) {
      std::fill_n(o, out_n, init);
      return absl::OkStatus();
    }
    const int64_t rows_per_block = std::max<int64_t>(1, kBlock / inner);
    const int64_t blocks = (out_n + rows_per_block - 1) / rows_per_block;
    const std::thread::id caller = std::this_thread::get_id();
    ParallelRange(blocks, std::max<int64_t>(1, 32768 / (rows_per_block * inner)), [&](int64_t b0, int64_t b1) {
      WithRunner(first, caller, k, values, [&](FusedRunner& run) {
        Blocks& b = ThreadBlocks();
        b.Reserve(k.members.size(), rows_per_block * inner);
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t row0 = blk * rows_per_block, rows = std::min(rows_per_block, out_n - row0);
          const float* src = nullptr;
          run.RunBlock(b, row0 * inner, rows * inner, nullptr, &src);
          for (int64_t q = 0; q < rows; ++q) o[row0 + q] = Combine<K>(init, ReduceRow<K>(src + q * inner, inner));
        }
      });
    });
    return absl::OkStatus();
  }
  // Leading: out[j] = init (+) in[0, j] (+) in[1, j] ...
  const int64_t inner = out_n;
  const int64_t outer = inner > 0 ? n / inner : 0;
  std::fill_n(o, out_n, init);
  if (outer == 0) return absl::OkStatus();
  const int64_t rows_per_block = std::max<int64_t>(1, kBlock / inner);
  FusedRunner& run = first;
  Blocks& b = ThreadBlocks();
  b.Reserve(k.members.size(), rows_per_block * inner);
  for (int64_t row0 = 0; row0 < outer; row0 += rows_per_block) {
    const int64_t rows = std::min(rows_per_block, outer - row0);
    const float* src = nullptr;
    run.RunBlock(b, row0 * inner, rows * inner, nullptr, &src);
    for (int64_t q = 0; q < rows; ++q) {
      const float* row = src + q * inner;
      if constexpr (K == ReduceKind::kMax || K == ReduceKind::kMin) {
        internal::VecMaxMin<float, K == ReduceKind::kMax>(o, false, row, false, o, inner);
      } else {
        for (int64_t j = 0; j < inner; ++j) o[j] = Combine<K>(o[j], row[j]);
      }
    }
  }
  return absl::OkStatus();
}

// add(dot, broadcast(bias)): the result starts as the bias, row by row, and
// the GEMM accumulates into it (where it would otherwise zero it first).
absl::Status RunGemmBias(const FusedKernel& k, const std::vector<const Literal*>& values, Literal* out) {
  const Instruction& dot = *k.gemm;
  const Literal& bias = *values[k.bias->operands[0]->id];
  const int64_t n = out->elements();
  const int64_t row = bias.elements();
  float* o = out->as<float>();
  const float* b = bias.as<float>();
  if (row == 1) {
    std::fill_n(o, n, b[0]);
  } else {
    for (int64_t at = 0; at < n; at += row) std::memcpy(o + at, b, static_cast<size_t>(row) * sizeof(float));
  }
  return internal::EvalDotGeneral(dot, *values[dot.operands[0]->id], *values[dot.operands[1]->id], out,
                                  /*accumulate=*/true);
}

}  // namespace

absl::Status EvalFusedKernel(const compiler::FusedKernel& k, const std::vector<const Literal*>& values,
                             Literal* out) {
  FusedRunner first(k, values);  // the calling thread's, which also checks the operands
  if (absl::Status s = first.Check(); !s.ok()) return s;
  const Instruction& root = *k.root;
  if (k.kind == FusedKernel::Kind::kGemmBias) return RunGemmBias(k, values, out);
  if (k.kind == FusedKernel::Kind::kReduce) {
    switch (root.reduce) {
      case ReduceKind::kSum: return RunReduce<ReduceKind::kSum>(k, values, first, out);
      case ReduceKind::kProd: return RunReduce<ReduceKind::kProd>(k, values, first, out);
      case ReduceKind::kMax: return RunReduce<ReduceKind::kMax>(k, values, first, out);
      case ReduceKind::kMin: return RunReduce<ReduceKind::kMin>(k, values, first, out);
    }
  }
  const int64_t n = root.shape.elements();
  const bool pred = root.shape.dtype == DType::kI1;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const std::thread::id caller = std::this_thread::get_id();
  ParallelRange(blocks, 16, [&](int64_t b0, int64_t b1) {
    WithRunner(first, caller, k, values, [&](FusedRunner& run) {
      Blocks& b = ThreadBlocks();
      b.Reserve(k.members.size(), kBlock);
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t begin = blk * kBlock, len = std::min(kBlock, n - begin);
        void* dst =
            pred ? static_cast<void*>(out->as<Pred>() + begin) : static_cast<void*>(out->as<float>() + begin);
        run.RunBlock(b, begin, len, dst, nullptr);
      }
    });
  });
  return absl::OkStatus();
}

}  // namespace shardscope::runtime
