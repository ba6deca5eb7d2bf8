// Shared plumbing of the kernel files (kernels*.cc): error messages that name
// the instruction, element-type dispatch, the strided-copy engine behind every
// data-movement op, and per-thread scratch memory. Private to runtime/; no
// Eigen here, so the non-Eigen kernel files stay quick to compile.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "absl/strings/str_cat.h"
#include "compiler/ir.h"
#include "compiler/literal.h"

namespace shardscope::runtime::internal {

using compiler::Instruction;
using compiler::Opcode;

// "stablehlo.add (%12, samples/mlp.cc:42): <msg>" — the user sees which line of
// their program produced the op, not just an opcode.
std::string Describe(const Instruction& instr);

template <typename... Args>
absl::Status Invalid(const Instruction& instr, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(Describe(instr), ": ", args...));
}
template <typename... Args>
absl::Status Unimplemented(const Instruction& instr, const Args&... args) {
  return absl::UnimplementedError(absl::StrCat(Describe(instr), ": ", args...));
}

// i1 is stored one byte per element (0 or 1).
using Pred = uint8_t;

template <typename T> struct TypeTag { using type = T; };

// Below this input Eigen's vectorized exp clamps: without AVX-512 it returns
// exp(-88.72) = 2.9e-39 for any smaller float (exp(-1e9) included), so a
// causal mask of -1e9 would leak into a softmax. Results below it are
// denormal at most; they are flushed to 0 (error under 3e-39).
template <typename T> inline constexpr T kExpFlushBelow = std::is_same_v<T, float> ? T(-88.7228) : T(-708.39);
// exp of an Eigen array expression, with the flush above.
template <typename T, typename E>
auto FlushedExp(const E& in) {
  return (in < kExpFlushBelow<T>).select(T(0), in.exp());
}

// Calls f(TypeTag<T>{}) for the arithmetic element types the kernels compute
// (f32, f64, i32, i64); returns `unsupported` for the others. Callers decide
// whether i1 joins in (see VisitWithPred).
// The error for an element type an op does not compute, made only when
// returned: built eagerly, its message took allocations in every kernel call,
// under the malloc arena the chips' threads share (runtime/heap.h).
struct Unsupported {
  const Instruction* instr;
  DType type;
  bool convert = false;  // a convert from `type` to `to`
  DType to = DType::kF32;
  operator absl::Status() const;  // NOLINT: converts where a status is returned
};
inline Unsupported UnsupportedType(const Instruction& instr, DType t) { return {&instr, t}; }

template <typename F>
absl::Status VisitArith(DType t, F&& f, Unsupported unsupported) {
  switch (t) {
    case DType::kF32: return f(TypeTag<float>{});
    case DType::kF64: return f(TypeTag<double>{});
    case DType::kI32: return f(TypeTag<int32_t>{});
    case DType::kI64: return f(TypeTag<int64_t>{});
    default: return unsupported;
  }
}

// As VisitArith, plus i1 (as Pred).
template <typename F>
absl::Status VisitWithPred(DType t, F&& f, Unsupported unsupported) {
  if (t == DType::kI1) return f(TypeTag<Pred>{});
  return VisitArith(t, std::forward<F>(f), unsupported);
}

// Scalar arithmetic with StableHLO semantics, shared by elementwise ops and
// reductions.
template <typename T>
using Unsigned = std::make_unsigned_t<T>;

// Signed overflow is undefined behaviour in C++; StableHLO integers wrap, so
// integer +,-,* go through the unsigned type (same bits, defined wrap-around).
template <typename T> inline T Add(T a, T b) {
  if constexpr (std::is_same_v<T, Pred>) return a | b;  // i1: logical or
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(Unsigned<T>(a) + Unsigned<T>(b));
  else return a + b;
}
template <typename T> inline T Sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(Unsigned<T>(a) - Unsigned<T>(b));
  else return a - b;
}
template <typename T> inline T Mul(T a, T b) {
  if constexpr (std::is_same_v<T, Pred>) return a & b;  // i1: logical and
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(Unsigned<T>(a) * Unsigned<T>(b));
  else return a * b;
}
// Integer division by zero would trap (SIGFPE) and INT_MIN / -1 overflows;
// like XLA, x/0 gives -1 and INT_MIN / -1 gives INT_MIN (wrap), so a user's
// bad divisor never takes the process down.
template <typename T> inline T Div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return static_cast<T>(-1);
    if (b == -1) return static_cast<T>(Unsigned<T>(0) - Unsigned<T>(a));
    return a / b;
  } else {
    return a / b;
  }
}
// StableHLO maximum/minimum propagate NaN (either operand NaN gives NaN).
// Written as branch-free selects (| rather than ||) so the loops vectorise.
template <typename T> inline T Max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return ((a != a) | (a > b)) ? a : b;
  else return a > b ? a : b;
}
template <typename T> inline T Min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return ((a != a) | (a < b)) ? a : b;
  else return a < b ? a : b;
}


// Writes the strided view of `src` (dims `dims`, source stride in elements per
// dimension; 0 repeats an element) densely, row-major, into `dst`. The one
// engine behind broadcast_in_dim, transpose, dynamic_slice, constant splats and
// the permute steps of the general dot/reduce paths. It merges dimensions that
// are contiguous in both views, uses memcpy/fill for unit/zero inner strides,
// and a cache-blocked loop for transposes. `dst` must not overlap `src`.
void StridedCopy(const void* src, void* dst, int64_t elem_bytes, absl::Span<const int64_t> dims,
                 absl::Span<const int64_t> src_strides);

// Dims and strides of a kernel call, on the stack up to rank 8: a kernel that
// allocates takes the malloc arena's lock the other chip thread takes too
// (runtime/heap.h).
using SmallDims = absl::InlinedVector<int64_t, 8>;
using SmallFlags = absl::InlinedVector<bool, 8>;

// Row-major strides (in elements) of `dims`, as compiler::Strides, on the stack.
SmallDims DenseStrides(absl::Span<const int64_t> dims);

// As StridedCopy, but the destination is strided too (dst_strides in
// elements; dims/strides are not normalised). Used where a block lands inside
// a larger result: pad, dynamic_update_slice, gather.
void StridedCopyTo(const void* src, const std::vector<int64_t>& src_strides, void* dst,
                   const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& dims,
                   int64_t elem_bytes);

// Scalar index k of an i32/i64 literal, widened to int64.
inline int64_t IndexAt(const Literal& l, int64_t k) {
  return l.shape().dtype == DType::kI64 ? l.as<int64_t>()[k] : l.as<int32_t>()[k];
}

// bf16/f16 <-> f32 for n elements (Eigen's round-to-nearest-even
// conversions); `t` is kBF16 or kF16. kernels_convert.cc.
void HalfToF32(DType t, const void* src, float* dst, int64_t n);
void F32ToHalf(DType t, const float* src, void* dst, int64_t n);

// Per-thread scratch buffer `slot` (0..3) of at least `bytes` bytes. It only
// grows and is reused by later calls: the runtime runs one device per thread,
// and fresh pages cost ~10 us each to fault in (MACHINE-NOTES "Two traps").
void* Scratch(int slot, int64_t bytes);

// Per-op kernels, split by file. Operands have been null-checked and their
// count matches the op; each kernel checks the shapes it relies on.
absl::Status EvalElementwise(const Instruction& instr, const std::vector<const Literal*>& ops,
                             Literal* out);  // kernels_elementwise.cc
absl::Status EvalDataMovement(const Instruction& instr, const std::vector<const Literal*>& ops,
                              Literal* out);  // kernels_layout.cc
absl::Status EvalReduce(const Instruction& instr, const Literal& in, const Literal& init,
                        Literal* out);  // kernels_reduce.cc
absl::Status EvalDotGeneral(const Instruction& instr, const Literal& lhs, const Literal& rhs,
                            Literal* out, bool accumulate = false);  // kernels_dot.cc
// slice, pad, concatenate, dynamic_update_slice (by element width).
absl::Status EvalSlicing(const Instruction& instr, const std::vector<const Literal*>& ops,
                         Literal* out);  // kernels_slicing.cc
absl::Status EvalGather(const Instruction& instr, const Literal& in, const Literal& idx,
                        Literal* out);  // kernels_gather.cc
absl::Status EvalScatter(const Instruction& instr, const Literal& in, const Literal& idx,
                         const Literal& updates, Literal* out);  // kernels_gather.cc
absl::Status EvalConvolution(const Instruction& instr, const Literal& lhs, const Literal& rhs,
                             Literal* out);  // kernels_conv.cc
absl::Status EvalReduceWindow(const Instruction& instr, const Literal& in, const Literal& init,
                              Literal* out);  // kernels_window.cc

}  // namespace shardscope::runtime::internal
