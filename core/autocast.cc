#include "core/autocast.h"

#include "absl/strings/str_cat.h"
#include "core/ops.h"

namespace shardscope {
namespace {
// Per thread, like the gradient mode: tracing is single-threaded per workload.
thread_local std::optional<DType> g_autocast;
thread_local SourceLoc g_autocast_loc;  // the innermost guard's line, for errors
// The user's AutocastGuard(std::nullopt) that turned an outer autocast off, while it is alive.
thread_local SourceLoc g_autocast_off_loc;
}  // namespace

AutocastGuard::AutocastGuard(std::optional<DType> dtype, std::source_location loc)
    : prev_(g_autocast), prev_loc_(g_autocast_loc), prev_off_loc_(g_autocast_off_loc) {
  g_autocast = dtype;
  g_autocast_loc = Loc(loc);
  if (dtype) g_autocast_off_loc = SourceLoc();                // on again inside
  else if (prev_) g_autocast_off_loc = g_autocast_loc;        // this guard turns it off
}

AutocastGuard::~AutocastGuard() {
  g_autocast = prev_;
  g_autocast_loc = prev_loc_;
  g_autocast_off_loc = prev_off_loc_;
}

std::optional<DType> autocast_dtype() { return g_autocast; }

namespace internal {

absl::StatusOr<DType> AutocastOperands(Tensor* a, Tensor* b, const SourceLoc& loc) {
  const DType same = a->defined() ? a->dtype() : DType::kF32;
  if (!g_autocast || !a->defined() || !b->defined() || !a->status().ok() || !b->status().ok()) return same;
  if (a->dtype() != DType::kF32 || b->dtype() != DType::kF32) return same;  // only f32 math is lowered
  const DType t = *g_autocast;
  if (t != DType::kBF16 && t != DType::kF16)
    return absl::InvalidArgumentError(absl::StrCat("autocast: ", DTypeName(t),
                                                   " is not a 16-bit float type (bf16 or f16); AutocastGuard at ",
                                                   g_autocast_loc.file, ":", g_autocast_loc.line));
  *a = Convert(*a, t, loc);
  *b = Convert(*b, t, loc);
  a->node()->note_loc = b->node()->note_loc = g_autocast_loc;  // the guard that made them
  return DType::kF32;
}

void NoteAutocastOff(Tensor* result) {
  if (g_autocast || !g_autocast_off_loc.known() || !result->defined() || !result->status().ok()) return;
  if (result->dtype() != DType::kF32) return;  // only f32 math would have been cast
  result->node()->note_loc = g_autocast_off_loc;
  result->node()->note_loc.via = "autocast_off";
}

AutocastPause::AutocastPause() : prev_(g_autocast), prev_off_loc_(g_autocast_off_loc) {
  g_autocast = std::nullopt;
  g_autocast_off_loc = SourceLoc();
}

AutocastPause::~AutocastPause() {
  g_autocast = prev_;
  g_autocast_off_loc = prev_off_loc_;
}

}  // namespace internal
}  // namespace shardscope
