// Clock alignment; see clock_alignment.h for the rule.
#include "ui/app/clock_alignment.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ui/app/format.h"

namespace shardscope::app {

ClockAlignment AlignClocks(const std::array<std::vector<StepSpan>, kNumClocks>& steps,
                           const std::vector<Dispatch>& dispatches,
                           const std::array<std::optional<std::pair<int64_t, int64_t>>, kNumClocks>& extent) {
  ClockAlignment out;
  // The host's reference time per step: its first dispatch, else its start.
  absl::flat_hash_map<int32_t, int64_t> reference;
  const char* reference_what = "dispatch";
  for (const Dispatch& d : dispatches) {
    auto [it, fresh] = reference.try_emplace(d.step, d.host_start_ns);
    if (!fresh) it->second = std::min(it->second, d.host_start_ns);
  }
  if (reference.empty()) {
    reference_what = "step start";
    for (const StepSpan& s : steps[static_cast<int>(Clock::kHost)]) reference[s.step] = s.start_ns;
  }
  for (Clock clock : {Clock::kDevice, Clock::kModeled}) {
    const int c = static_cast<int>(clock);
    const StepSpan* first = nullptr;
    for (const StepSpan& s : steps[c]) {
      if (reference.contains(s.step) && (!first || s.step < first->step)) first = &s;
    }
    if (first) {
      const int64_t host_t = reference.at(first->step);
      const int64_t gap = first->start_ns - host_t;  // > 0: the clock starts after the dispatch
      out.related[c] = true;
      if (gap < 0) {
        out.offset_ns[c] = -gap;
        out.note[c] = absl::StrCat("shifted +", FormatDuration(double(-gap)), " to start step ",
                                   first->step, " at the host's ", reference_what);
      } else if (gap > kUnrelatedClockNs) {
        out.offset_ns[c] = -gap;
        out.note[c] = absl::StrCat("another clock domain: shifted -", FormatDuration(double(gap)),
                                   " to start step ", first->step, " at the host's ", reference_what);
      } else {
        out.note[c] = absl::StrCat("same time base as the host: programs start after their ",
                                   reference_what);
      }
    } else if (extent[c] && extent[static_cast<int>(Clock::kHost)]) {
      out.offset_ns[c] = extent[static_cast<int>(Clock::kHost)]->first - extent[c]->first;
      out.note[c] = "not aligned: no step in common with the host; first events lined up";
    } else if (extent[c]) {
      out.note[c] = "no host events to align to";
    }
  }
  return out;
}

}  // namespace shardscope::app
