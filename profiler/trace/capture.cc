// CaptureFilter (see capture.h).
#include "profiler/trace/capture.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardscope::trace {
namespace {

// "5" or "0-9".
std::string Range(int a, int b) { return a == b ? absl::StrCat(a) : absl::StrCat(a, "-", b); }

}  // namespace

std::string CaptureSettings::WindowText() const {
  return absl::StrCat(first_step, ":", last_step == INT_MAX ? "" : absl::StrCat(last_step));
}

bool IsKernelSlice(const SliceRecord& s) {
  return s.op_id >= 0 || s.kind == SliceKind::kCollective || s.kind == SliceKind::kTransfer;
}

CaptureFilter::CaptureFilter(Recorder* sink, CaptureSettings settings) : sink_(sink), settings_(settings) {}

void CaptureFilter::StepRange::Add(int step) {
  if (step < 0) return;
  // Relaxed loads first: the common case (a step already inside the range) writes nothing.
  int lo = first.load(std::memory_order_relaxed);
  while (step < lo && !first.compare_exchange_weak(lo, step, std::memory_order_relaxed)) {
  }
  int hi = last.load(std::memory_order_relaxed);
  while (step > hi && !last.compare_exchange_weak(hi, step, std::memory_order_relaxed)) {
  }
}

SliceDetail CaptureFilter::Detail(int step) const {
  asked_.Add(step);
  if (step >= 0 && (step < settings_.first_step || step > settings_.last_step)) return SliceDetail::kNone;
  return settings_.detail;
}

bool CaptureFilter::Drops(const SliceRecord& r) const {
  const SliceDetail d = Detail(r.step);
  return d == SliceDetail::kNone || (d == SliceDetail::kPrograms && IsKernelSlice(r));
}

void CaptureFilter::Record(const SliceRecord& r) {
  if (Drops(r)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  sink_->Record(r);
}

void CaptureFilter::RecordSlices(std::vector<SliceRecord>&& slices) {
  const size_t before = slices.size();
  slices.erase(std::remove_if(slices.begin(), slices.end(), [&](const SliceRecord& r) { return Drops(r); }),
               slices.end());
  if (slices.size() != before) dropped_.fetch_add(static_cast<int64_t>(before - slices.size()), std::memory_order_relaxed);
  if (!slices.empty()) sink_->RecordSlices(std::move(slices));
}

void CaptureFilter::Record(const StepRecord& r) {
  logged_.Add(r.step);
  sink_->Record(r);
}

std::vector<std::string> CaptureFilter::NotesAtStart() const {
  std::vector<std::string> notes;
  switch (settings_.detail) {
    case SliceDetail::kNone:
      notes.push_back(
          "--trace off: no timeline (compilations, executions, steps, counters and metrics are recorded)");
      return notes;  // a window says nothing more when nothing is captured
    case SliceDetail::kPrograms:
      notes.push_back(
          "--trace steps: kernels not recorded (each chip's lanes hold one slice per program run, "
          "its kernels, collectives and transfers together)");
      break;
    case SliceDetail::kKernels:
      break;
  }
  if (settings_.windowed()) {
    notes.push_back(absl::StrCat("timeline only for steps ",
                                 settings_.last_step == INT_MAX
                                     ? absl::StrCat(settings_.first_step, " on")
                                     : Range(settings_.first_step, settings_.last_step),
                                 " (--trace-steps ", settings_.WindowText(), ")"));
  }
  return notes;
}

std::string CaptureFilter::NoteAtEnd() const {
  if (!settings_.windowed() || settings_.detail == SliceDetail::kNone) return "";
  const StepRange& steps = logged_.first.load() <= logged_.last.load() ? logged_ : asked_;
  const int lo = steps.first.load(), hi = steps.last.load();
  if (lo > hi) return "";
  std::vector<std::string> gaps;
  if (lo < settings_.first_step) gaps.push_back(Range(lo, std::min(hi, settings_.first_step - 1)));
  if (settings_.last_step != INT_MAX && hi > settings_.last_step)
    gaps.push_back(Range(std::max(lo, settings_.last_step + 1), hi));
  if (gaps.empty()) return "";
  const bool one = gaps.size() == 1 && gaps[0].find('-') == std::string::npos;
  return absl::StrCat(one ? "step " : "steps ", absl::StrJoin(gaps, " and "), " not captured (--trace-steps ",
                      settings_.WindowText(), ")");
}

}  // namespace shardscope::trace
