// Elementwise kernels: binary arithmetic and power, unary math (negate, abs,
// exp, log, logistic, tanh, sqrt, rsqrt), clamp, compare, select, convert.
// Operands have the output's shape (StableHLO); as a convenience a 1-element
// operand is also accepted and repeats. Loops are flat over the row-major data
// so the compiler vectorises them; exp/log use Eigen's vectorised array
// functions, which std::exp loops would not get without -ffast-math.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

// GCC 12 with -march=native warns -Wmaybe-uninitialized inside its own AVX-512
// intrinsics once Eigen's packet code is inlined (a false positive of
// _mm512_undefined_*); silence it for this Eigen file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include "runtime/kernels_internal.h"
#include "runtime/kernels_vector.h"

namespace shardscope::runtime::internal {
namespace {

using compiler::CompareDirection;

// o[i] = f(a[i], b[i]) with a 1-element operand repeated. Three separate
// loops keep unit stride visible to the vectoriser.
template <typename T, typename R, typename F>
void BinaryLoop(const T* a, bool a_scalar, const T* b, bool b_scalar, R* o, int64_t n, F f) {
  if (!a_scalar && !b_scalar) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (b_scalar) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  }
}

// Checks that `in` has the output's dims, or is a 1-element value when
// `allow_scalar`. Sets *scalar for the repeated case.
absl::Status CheckSameDims(const Instruction& instr, const Literal& in, int index,
                           const Shape& out, bool allow_scalar, bool* scalar) {
  *scalar = false;
  if (in.shape().dims == out.dims) return absl::OkStatus();
  if (allow_scalar && in.elements() == 1) {
    *scalar = true;
    return absl::OkStatus();
  }
  return Invalid(instr, "operand ", index, " is ", in.shape().ToString(), "; elementwise ops need ",
                 out.DimsString(), " (or a 1-element value)");
}

// Integer power by squaring, wrapping like multiply. A negative exponent gives
// 0 except for bases 1 and -1 (XLA's rule; the exact result is not an integer).
template <typename T>
T Pow(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    if (b < 0) return a == 1 ? T(1) : a == -1 ? ((b & 1) ? T(-1) : T(1)) : T(0);
    T r = 1;
    while (b > 0) {
      if (b & 1) r = Mul<T>(r, a);
      a = Mul<T>(a, a);
      b >>= 1;
    }
    return r;
  }
}

absl::Status EvalBinary(const Instruction& instr, const Literal& a, const Literal& b,
                        Literal* out) {
  const Shape& os = out->shape();
  if (a.shape().dtype != os.dtype || b.shape().dtype != os.dtype) {
    return Invalid(instr, "operands ", a.shape().ToString(), " and ", b.shape().ToString(),
                   " must both have the result's element type ", DTypeName(os.dtype));
  }
  bool as = false, bs = false;
  if (auto s = CheckSameDims(instr, a, 0, os, true, &as); !s.ok()) return s;
  if (auto s = CheckSameDims(instr, b, 1, os, true, &bs); !s.ok()) return s;
  const int64_t n = os.elements();
  const Opcode op = instr.op;
  if (os.dtype == DType::kI1 && (op == Opcode::kSubtract || op == Opcode::kDivide || op == Opcode::kPower)) {
    return Invalid(instr, "not defined on i1");
  }
  return VisitWithPred(
      os.dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* pa = a.as<T>();
        const T* pb = b.as<T>();
        T* po = out->as<T>();
        switch (op) {
          case Opcode::kAdd: BinaryLoop(pa, as, pb, bs, po, n, Add<T>); break;
          case Opcode::kMultiply: BinaryLoop(pa, as, pb, bs, po, n, Mul<T>); break;
          case Opcode::kMaximum:
            if constexpr (std::is_floating_point_v<T>) VecMaxMin<T, true>(pa, as, pb, bs, po, n);
            else BinaryLoop(pa, as, pb, bs, po, n, Max<T>);
            break;
          case Opcode::kMinimum:
            if constexpr (std::is_floating_point_v<T>) VecMaxMin<T, false>(pa, as, pb, bs, po, n);
            else BinaryLoop(pa, as, pb, bs, po, n, Min<T>);
            break;
          case Opcode::kSubtract:
            if constexpr (!std::is_same_v<T, Pred>) BinaryLoop(pa, as, pb, bs, po, n, Sub<T>);
            break;
          case Opcode::kDivide:
            if constexpr (!std::is_same_v<T, Pred>) BinaryLoop(pa, as, pb, bs, po, n, Div<T>);
            break;
          case Opcode::kPower:
            if constexpr (!std::is_same_v<T, Pred>) BinaryLoop(pa, as, pb, bs, po, n, Pow<T>);
            break;
          default: return Invalid(instr, "not a binary arithmetic op");
        }
        return absl::OkStatus();
      },
      UnsupportedType(instr, os.dtype));
}

absl::Status EvalUnary(const Instruction& instr, const Literal& a, Literal* out) {
  const Shape& os = out->shape();
  if (a.shape() != os) {
    return Invalid(instr, "operand is ", a.shape().ToString(), " but the result is ", os.ToString());
  }
  const int64_t n = os.elements();
  return VisitArith(
      os.dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* pa = a.as<T>();
        T* po = out->as<T>();
        if (instr.op == Opcode::kAbs) {
          if constexpr (std::is_floating_point_v<T>) {
            for (int64_t i = 0; i < n; ++i) po[i] = std::fabs(pa[i]);  // -0 loses its sign too
          } else {
            // Integers wrap: abs(INT_MIN) is INT_MIN, as in XLA.
            for (int64_t i = 0; i < n; ++i) po[i] = pa[i] < T(0) ? Sub<T>(T(0), pa[i]) : pa[i];
          }
          return absl::OkStatus();
        }
        if (instr.op == Opcode::kNegate) {
          // -x, not 0 - x: negate(+0) is -0. Integers wrap (INT_MIN stays).
          if constexpr (std::is_floating_point_v<T>) {
            for (int64_t i = 0; i < n; ++i) po[i] = -pa[i];
          } else {
            for (int64_t i = 0; i < n; ++i) po[i] = Sub<T>(T(0), pa[i]);
          }
          return absl::OkStatus();
        }
        if constexpr (std::is_floating_point_v<T>) {
          using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
          Eigen::Map<const Arr> in(pa, n);
          Eigen::Map<Arr> res(po, n);
          switch (instr.op) {
            case Opcode::kExponential: res = FlushedExp<T>(in); break;
            case Opcode::kLog: res = in.log(); break;
            case Opcode::kTanh: res = in.tanh(); break;
            case Opcode::kSqrt: res = in.sqrt(); break;
            case Opcode::kRsqrt: res = in.rsqrt(); break;
            // 1 / (1 + e^-x): for very negative x, e^-x is inf and the result 0.
            case Opcode::kLogistic: res = (T(1) + FlushedExp<T>(-in)).inverse(); break;
            default: return Invalid(instr, "not a unary op");
          }
          return absl::OkStatus();
        } else {
          return Invalid(instr, "needs a floating-point operand, not ", os.ToString());
        }
      },
      UnsupportedType(instr, os.dtype));
}

// clamp(min, x, max) = min(max(x, min), max), NaN-propagating like them.
absl::Status EvalClamp(const Instruction& instr, const Literal& lo, const Literal& x, const Literal& hi,
                       Literal* out) {
  const Shape& os = out->shape();
  if (x.shape() != os || lo.shape().dtype != os.dtype || hi.shape().dtype != os.dtype) {
    return Invalid(instr, "operand ", x.shape().ToString(), " and bounds ", lo.shape().ToString(), ", ",
                   hi.shape().ToString(), " must share the result type ", os.ToString());
  }
  bool ls = false, hs = false;
  if (auto s = CheckSameDims(instr, lo, 0, os, true, &ls); !s.ok()) return s;
  if (auto s = CheckSameDims(instr, hi, 2, os, true, &hs); !s.ok()) return s;
  const int64_t n = os.elements();
  return VisitWithPred(
      os.dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* pl = lo.as<T>();
        const T* px = x.as<T>();
        const T* ph = hi.as<T>();
        T* po = out->as<T>();
        if constexpr (std::is_floating_point_v<T>) {
          VecMaxMin<T, true>(px, false, pl, ls, po, n);
          VecMaxMin<T, false>(po, false, ph, hs, po, n);
        } else {
          for (int64_t i = 0; i < n; ++i) po[i] = Min<T>(Max<T>(px[i], pl[ls ? 0 : i]), ph[hs ? 0 : i]);
        }
        return absl::OkStatus();
      },
      UnsupportedType(instr, os.dtype));
}

absl::Status EvalCompare(const Instruction& instr, const Literal& a, const Literal& b,
                         Literal* out) {
  const Shape& os = out->shape();
  if (os.dtype != DType::kI1) return Invalid(instr, "compare produces i1, not ", os.ToString());
  if (a.shape().dtype != b.shape().dtype) {
    return Invalid(instr, "operands ", a.shape().ToString(), " and ", b.shape().ToString(),
                   " differ in element type");
  }
  bool as = false, bs = false;
  if (auto s = CheckSameDims(instr, a, 0, os, true, &as); !s.ok()) return s;
  if (auto s = CheckSameDims(instr, b, 1, os, true, &bs); !s.ok()) return s;
  const int64_t n = os.elements();
  Pred* po = out->as<Pred>();
  return VisitWithPred(
      a.shape().dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* pa = a.as<T>();
        const T* pb = b.as<T>();
        // IEEE semantics for floats: every comparison with NaN is false except NE.
        switch (instr.compare) {
          case CompareDirection::kEQ:
            BinaryLoop(pa, as, pb, bs, po, n, [](T x, T y) -> Pred { return x == y; }); break;
          case CompareDirection::kNE:
            BinaryLoop(pa, as, pb, bs, po, n, [](T x, T y) -> Pred { return x != y; }); break;
          case CompareDirection::kLT:
            BinaryLoop(pa, as, pb, bs, po, n, [](T x, T y) -> Pred { return x < y; }); break;
          case CompareDirection::kLE:
            BinaryLoop(pa, as, pb, bs, po, n, [](T x, T y) -> Pred { return x <= y; }); break;
          case CompareDirection::kGT:
            BinaryLoop(pa, as, pb, bs, po, n, [](T x, T y) -> Pred { return x > y; }); break;
          case CompareDirection::kGE:
            BinaryLoop(pa, as, pb, bs, po, n, [](T x, T y) -> Pred { return x >= y; }); break;
        }
        return absl::OkStatus();
      },
      UnsupportedType(instr, a.shape().dtype));
}

// Select moves elements without looking at them, so it works for every
// element type by width (bf16/f16 included).
template <typename E>
void SelectLoop(const Pred* p, bool p_scalar, const E* t, const E* f, E* o, int64_t n) {
  if (p_scalar) {
    if (n > 0) std::memmove(o, p[0] ? t : f, static_cast<size_t>(n) * sizeof(E));
    return;
  }
  for (int64_t i = 0; i < n; ++i) o[i] = p[i] ? t[i] : f[i];
}

absl::Status EvalSelect(const Instruction& instr, const Literal& pred, const Literal& on_true,
                        const Literal& on_false, Literal* out) {
  const Shape& os = out->shape();
  if (pred.shape().dtype != DType::kI1) {
    return Invalid(instr, "predicate must be i1, not ", pred.shape().ToString());
  }
  if (on_true.shape() != os || on_false.shape() != os) {
    return Invalid(instr, "branches are ", on_true.shape().ToString(), " and ",
                   on_false.shape().ToString(), "; both must be the result type ", os.ToString());
  }
  bool ps = false;
  if (auto s = CheckSameDims(instr, pred, 0, os, true, &ps); !s.ok()) return s;
  const int64_t n = os.elements();
  const Pred* p = pred.as<Pred>();
  switch (DTypeBytes(os.dtype)) {
    case 1: SelectLoop(p, ps, on_true.as<uint8_t>(), on_false.as<uint8_t>(), out->as<uint8_t>(), n); break;
    case 2: SelectLoop(p, ps, on_true.as<uint16_t>(), on_false.as<uint16_t>(), out->as<uint16_t>(), n); break;
    case 4: SelectLoop(p, ps, on_true.as<uint32_t>(), on_false.as<uint32_t>(), out->as<uint32_t>(), n); break;
    case 8: SelectLoop(p, ps, on_true.as<uint64_t>(), on_false.as<uint64_t>(), out->as<uint64_t>(), n); break;
    default: return UnsupportedType(instr, os.dtype);
  }
  return absl::OkStatus();
}

// One element of convert. Float to integer truncates toward zero; values out
// of the target's range saturate and NaN gives 0 (a plain cast would be
// undefined behaviour there). Anything to i1 is "!= 0".
template <typename To, typename From>
inline To ConvertOne(From x) {
  if constexpr (std::is_same_v<To, Pred>) {
    return x != From(0) ? 1 : 0;
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // -2^(bits-1) and 2^(bits-1) are exact in float and double.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    if (x != x) return 0;
    if (x <= lo) return std::numeric_limits<To>::min();
    if (x >= -lo) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);  // integer narrowing wraps (defined since C++20)
  }
}

absl::Status EvalConvert(const Instruction& instr, const Literal& a, Literal* out) {
  const Shape& os = out->shape();
  if (a.shape().dims != os.dims) {
    return Invalid(instr, "operand is ", a.shape().ToString(), " but the result is ", os.ToString());
  }
  const int64_t n = os.elements();
  if (a.shape().dtype == os.dtype) {  // identity: any type, bf16 included
    if (n > 0 && a.data() != out->data()) {
      std::memmove(out->data(), a.data(), static_cast<size_t>(os.bytes()));
    }
    return absl::OkStatus();
  }
  const Unsupported unsupported{&instr, a.shape().dtype, /*convert=*/true, os.dtype};
  return VisitWithPred(
      a.shape().dtype,
      [&](auto from_tag) -> absl::Status {
        using From = typename decltype(from_tag)::type;
        return VisitWithPred(
            os.dtype,
            [&](auto to_tag) -> absl::Status {
              using To = typename decltype(to_tag)::type;
              const From* in = a.as<From>();
              To* o = out->as<To>();
              // In place only when the widths match (see kernels.h), so
              // reading element i before writing it is enough.
              for (int64_t i = 0; i < n; ++i) o[i] = ConvertOne<To, From>(in[i]);
              return absl::OkStatus();
            },
            unsupported);
      },
      unsupported);
}

}  // namespace

absl::Status EvalElementwise(const Instruction& instr, const std::vector<const Literal*>& ops,
                             Literal* out) {
  switch (instr.op) {
    case Opcode::kAdd:
    case Opcode::kSubtract:
    case Opcode::kMultiply:
    case Opcode::kDivide:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kPower:
      return EvalBinary(instr, *ops[0], *ops[1], out);
    case Opcode::kNegate:
    case Opcode::kExponential:
    case Opcode::kLog:
    case Opcode::kAbs:
    case Opcode::kLogistic:
    case Opcode::kTanh:
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
      return EvalUnary(instr, *ops[0], out);
    case Opcode::kClamp: return EvalClamp(instr, *ops[0], *ops[1], *ops[2], out);
    case Opcode::kCompare: return EvalCompare(instr, *ops[0], *ops[1], out);
    case Opcode::kSelect: return EvalSelect(instr, *ops[0], *ops[1], *ops[2], out);
    case Opcode::kConvert: return EvalConvert(instr, *ops[0], out);
    default: return Invalid(instr, "not an elementwise op");
  }
}

}  // namespace shardscope::runtime::internal
