// Parsing of the CLI's numeric flag values: every number a command takes goes
// through these, so each is checked against its allowed range and every
// error reads the same way, naming the flag, the value and the range:
//   --steps 2147483648 is out of range (allowed 1..10000000)
//   --lr nan is not a finite number (allowed 0 < LR <= 100)
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace shardscope::cli {

// "1..10000000"
std::string RangeText(int64_t lo, int64_t hi);

// A decimal integer (an optional '-' then digits; no spaces, no '+') in [lo, hi].
absl::StatusOr<int64_t> ParseIntFlag(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);

// A finite decimal number in (lo, hi] (lo itself excluded: a rate, a scale);
// NaN and infinities are refused. `metavar` names the value in the range text.
absl::StatusOr<double> ParsePositiveRealFlag(const std::string& flag, const std::string& text, const std::string& metavar,
                                             double lo, double hi);

// A window of steps: "N:M" (steps N to M, inclusive), "N:" (N on) or ":M"
// (0 to M), each end in 0..max_step and N <= M. Returns {N, M}, M = -1 when open.
//   --trace-steps '5:2': the first step 5 is after the last 2
absl::StatusOr<std::pair<int64_t, int64_t>> ParseStepWindowFlag(const std::string& flag, const std::string& text,
                                                                int64_t max_step);

}  // namespace shardscope::cli
