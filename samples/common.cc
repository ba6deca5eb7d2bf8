#include "samples/common.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/lazy.h"

namespace shardscope::samples {

absl::StatusOr<std::optional<DType>> AutocastType(const SampleConfig& c) {
  if (c.autocast.empty()) return std::optional<DType>();
  if (c.autocast == "bf16") return std::optional<DType>(DType::kBF16);
  if (c.autocast == "f16") return std::optional<DType>(DType::kF16);
  return absl::InvalidArgumentError(absl::StrCat("--autocast '", c.autocast, "': expected bf16 or f16"));
}

absl::Status LossLog::Push(int step, Tensor loss) {
  if (absl::Status s = Flush(); !s.ok()) return s;
  pending_ = std::move(loss);
  pending_step_ = step;
  return absl::OkStatus();
}

absl::Status LossLog::Flush(std::optional<double> eval_loss) {
  if (!pending_) return absl::OkStatus();
  auto value = pending_->item();  // computed by its step: no new graph
  if (!value.ok()) return value.status();
  pending_.reset();
  log_step_at(pending_step_, *value, eval_loss);
  result_->losses.push_back(*value);
  if (eval_loss) result_->eval_losses.push_back({pending_step_, *eval_loss});
  if (cfg_.on_step) cfg_.on_step(pending_step_, *value);
  return absl::OkStatus();
}

}  // namespace shardscope::samples
