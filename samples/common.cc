#include "samples/common.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/checkpoint.h"
#include "core/lazy.h"

namespace shardscope::samples {

absl::StatusOr<std::optional<DType>> AutocastType(const SampleConfig& c) {
  if (c.autocast.empty()) return std::optional<DType>();
  if (c.autocast == "bf16") return std::optional<DType>(DType::kBF16);
  if (c.autocast == "f16") return std::optional<DType>(DType::kF16);
  return absl::InvalidArgumentError(absl::StrCat("--autocast '", c.autocast, "': expected bf16 or f16"));
}

absl::StatusOr<int> ResumeFromCheckpoint(const SampleConfig& cfg, const std::vector<Tensor*>& tensors,
                                         const std::string& sample) {
  if (cfg.init_path.empty()) return 0;
  auto ckpt = load_checkpoint(cfg.init_path);
  if (!ckpt.ok()) return ckpt.status();
  if (absl::Status s = CheckCheckpointSample(*ckpt, cfg.init_path, sample); !s.ok()) return s;
  std::set<std::string> used;
  for (const Tensor* t : tensors) used.insert(t->name());
  std::vector<std::string> extra;
  for (const auto& [name, value] : ckpt->tensors)
    if (!used.count(name)) extra.push_back(absl::CHexEscape(name));
  if (!extra.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", cfg.init_path, " holds ", extra.size(), extra.size() == 1 ? " tensor" : " tensors",
        " this ", sample, " run does not have: '", extra.front(), "'", extra.size() > 1 ? ", ..." : "",
        " (another model, optimizer or configuration saved it)"));
  if (auto s = load_into(*ckpt, tensors, cfg.init_path); !s.ok()) return s;
  int step = 0;  // load_checkpoint checked it is a number 0..kMaxCheckpointStep
  if (auto it = ckpt->metadata.find("step"); it != ckpt->metadata.end() && !absl::SimpleAtoi(it->second, &step))
    return absl::InvalidArgumentError(cfg.init_path + ": metadata step '" + it->second + "' is not a number");
  const int end = cfg.stop_at >= 0 ? std::min(cfg.stop_at, cfg.steps) : cfg.steps;
  if (step >= end)
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint ", cfg.init_path, " resumes at step ", step, " but the run ends before step ", end,
        cfg.stop_at >= 0 && cfg.stop_at < cfg.steps ? " (--stop-at)" : " (--steps)", ": nothing left to train"));
  set_current_step(step);
  return step;
}

absl::Status CheckCheckpointSample(const Checkpoint& ckpt, const std::string& path, const std::string& sample) {
  if (auto it = ckpt.metadata.find("sample"); it != ckpt.metadata.end() && it->second != sample)
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", path, " was saved by the ", absl::CHexEscape(it->second), " sample, not ", sample));
  return absl::OkStatus();
}

absl::Status SaveCheckpoint(const SampleConfig& cfg, const std::vector<Tensor*>& tensors, int step,
                            const std::string& sample) {
  if (cfg.save_path.empty()) return absl::OkStatus();
  return save_checkpoint(cfg.save_path, tensors, {{"step", std::to_string(step)}, {"sample", sample}});
}

absl::Status LossLog::Push(int step, Tensor loss) {
  if (absl::Status s = Flush(); !s.ok()) return s;
  pending_ = std::move(loss);
  pending_step_ = step;
  return absl::OkStatus();
}

absl::Status LossLog::Flush(std::optional<double> eval_loss) {
  if (!pending_) return absl::OkStatus();
  const int next = current_step();
  set_current_step(std::max(0, next - 1));
  auto value = pending_->item();  // computed by its step: no new graph
  set_current_step(next);
  if (!value.ok()) return value.status();
  pending_.reset();
  log_step_at(pending_step_, *value, eval_loss);
  result_->losses.push_back(*value);
  if (eval_loss) result_->eval_losses.push_back({pending_step_, *eval_loss});
  if (cfg_.on_step) cfg_.on_step(pending_step_, *value);
  return absl::OkStatus();
}

absl::StatusOr<shardscope::Mesh> SampleMesh(const SampleConfig& cfg, std::vector<std::string> axes) {
  std::vector<int64_t> ids = cfg.mesh_device_ids;
  if (ids.empty())
    for (int64_t k = 0; k < cfg.mesh[0] * cfg.mesh[1]; ++k) ids.push_back(k);
  return shardscope::Mesh::Create(ids, cfg.mesh, std::move(axes));
}

}  // namespace shardscope::samples
