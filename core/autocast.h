// Automatic mixed precision for contractions (autocast). Under an
// AutocastGuard, dot_general (matmul, nn::Linear, attention) and convolution
// take their f32 operands as bf16 (or f16): the graph gets a convert of each
// operand before the op, and the op itself returns f32, accumulated in f32
// (StableHLO's dot with a result element type wider than its operands).
// Everything else stays f32: parameters (master weights), norms, softmax,
// losses. In backward the converts send f32 gradients to the f32 parameters.
#pragma once

#include <optional>
#include <source_location>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace shardscope {

// Autocast on this thread while alive; nestable. `dtype` is bf16 or f16;
// std::nullopt turns autocast off inside (a block that must stay f32): the
// contractions it keeps f32 remember its line, so a recompilation that turning
// it on or off causes is blamed on it rather than on the outer guard. Any
// other type is a user's mistake that the next contraction reports (with the
// guard's line) instead of aborting.
class AutocastGuard {
 public:
  explicit AutocastGuard(std::optional<DType> dtype = DType::kBF16,
                         std::source_location loc = std::source_location::current());
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> prev_;
  SourceLoc prev_loc_;
  SourceLoc prev_off_loc_;
};

// The autocast type in effect on this thread, if any.
std::optional<DType> autocast_dtype();

namespace internal {

// The hook every contraction op calls on its two operands before building its
// node. Under autocast, when both are f32, *a and *b become convert nodes to
// the autocast type (at `loc`) and the result element type to use is f32;
// otherwise they are left alone and the result type is a's. An AutocastGuard
// with a type that is not a 16-bit float gives an error naming its line.
absl::StatusOr<DType> AutocastOperands(Tensor* a, Tensor* b, const SourceLoc& loc);

// Called on a contraction's result: when a user's AutocastGuard(std::nullopt)
// kept it f32 inside an outer autocast, its node notes that guard's line (via
// "autocast_off").
void NoteAutocastOff(Tensor* result);

// Autocast off inside the library's own code (gradients take their values'
// types), without counting as a user's guard that turned it off.
class AutocastPause {
 public:
  AutocastPause();
  ~AutocastPause();
  AutocastPause(const AutocastPause&) = delete;
  AutocastPause& operator=(const AutocastPause&) = delete;

 private:
  std::optional<DType> prev_;
  SourceLoc prev_off_loc_;
};

}  // namespace internal
}  // namespace shardscope
