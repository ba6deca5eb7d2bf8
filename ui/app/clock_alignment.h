// Placing the three clocks on one screen without mixing them. Each clock keeps
// its own axis (labelled, in its own time since the run started), but the
// sections are drawn so that the same x is the same moment wherever the clocks
// are related: a chip's program is never drawn before the host dispatched it.
// Pure functions of stored facts (step bounds per clock, the host's dispatch
// of each program), so the rule is tested without a display.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ui/app/trace_model.h"

namespace shardscope::app {

// Where one step ran on one clock.
struct StepSpan {
  int32_t step = 0;
  int64_t start_ns = 0, end_ns = 0;
};

struct ClockAlignment {
  // Added to a clock's times to place them on the shared screen axis (the
  // host clock's own times). Host: always 0.
  std::array<int64_t, kNumClocks> offset_ns{};
  // How each clock was placed, for its ruler ("" for the host).
  std::array<std::string, kNumClocks> note;
  // True when the placement rests on the run's dispatches or common steps;
  // false when the clock shares nothing with the host and its first event is
  // simply lined up with the host's.
  std::array<bool, kNumClocks> related{};
};

// Beyond this, a clock whose first step begins after the host dispatched it is
// taken to be another clock domain (an imported trace's GPU timestamps) and
// pulled back to the dispatch; below it, its times are kept as recorded.
inline constexpr int64_t kUnrelatedClockNs = int64_t{60} * 1'000'000'000;

// The rule, for the device and modeled clocks: take the earliest step the clock
// shares with the host; the host's dispatch of it is the earliest launch of a
// program of that step (executions.host_start_ns), or without executions the
// step's start on the host clock.
//  - the clock's step begins before that dispatch: shift the clock later so it
//    begins at the dispatch (chips never run a program the host has not
//    launched);
//  - it begins more than kUnrelatedClockNs after: another clock domain; shift
//    it back to the dispatch;
//  - otherwise the clocks already agree (shardscope's Scheduler lays every
//    program out from its host launch): offset 0.
// A clock with no step in common with the host has its first event lined up
// with the host's first event, and says so.
ClockAlignment AlignClocks(const std::array<std::vector<StepSpan>, kNumClocks>& steps,
                           const std::vector<Dispatch>& dispatches,
                           const std::array<std::optional<std::pair<int64_t, int64_t>>, kNumClocks>& extent);

}  // namespace shardscope::app
