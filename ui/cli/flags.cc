// Numeric flag values (see flags.h).
#include "ui/cli/flags.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardscope::cli {
namespace {

// The value as the error shows it: quoted, and cut short when long.
std::string Shown(const std::string& text) {
  constexpr size_t kMax = 40;
  if (text.size() <= kMax) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kMax), "...' (", text.size(), " characters)");
}

bool IsDecimalInteger(const std::string& text) {
  const size_t from = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() == from) return false;
  for (char c : text.substr(from))
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

std::string RangeText(int64_t lo, int64_t hi) { return absl::StrCat(lo, "..", hi); }

absl::StatusOr<int64_t> ParseIntFlag(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  const std::string allowed = absl::StrCat("(allowed ", RangeText(lo, hi), ")");
  if (!IsDecimalInteger(text))
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", Shown(text), " is not an integer ", allowed));
  int64_t v = 0;
  // All digits but no int64: beyond any range this machine runs.
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi)
    return absl::OutOfRangeError(absl::StrCat(flag, " ", Shown(text), " is out of range ", allowed));
  return v;
}

absl::StatusOr<double> ParsePositiveRealFlag(const std::string& flag, const std::string& text, const std::string& metavar,
                                             double lo, double hi) {
  const std::string allowed = absl::StrCat("(allowed ", lo, " < ", metavar, " <= ", hi, ")");
  double v = 0;
  const bool spaced = !text.empty() && (absl::ascii_isspace(static_cast<unsigned char>(text.front())) ||
                                        absl::ascii_isspace(static_cast<unsigned char>(text.back())));
  if (spaced || !absl::SimpleAtod(text, &v))
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", Shown(text), " is not a number ", allowed));
  if (!std::isfinite(v))
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", Shown(text), " is not a finite number ", allowed));
  if (!(v > lo && v <= hi))
    return absl::OutOfRangeError(absl::StrCat(flag, " ", Shown(text), " is out of range ", allowed));
  return v;
}

absl::StatusOr<std::pair<int64_t, int64_t>> ParseStepWindowFlag(const std::string& flag, const std::string& text,
                                                                int64_t max_step) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || text.find(':', colon + 1) != std::string::npos || text.size() == 1)
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", Shown(text),
                                                   " is not a window of steps: N:M (N to M, inclusive), N: or :M"));
  const std::string first = text.substr(0, colon), last = text.substr(colon + 1);
  std::pair<int64_t, int64_t> w{0, -1};
  if (!first.empty()) {
    auto n = ParseIntFlag(absl::StrCat(flag, " ", text, ": N"), first, 0, max_step);
    if (!n.ok()) return n.status();
    w.first = *n;
  }
  if (!last.empty()) {
    auto m = ParseIntFlag(absl::StrCat(flag, " ", text, ": M"), last, 0, max_step);
    if (!m.ok()) return m.status();
    w.second = *m;
  }
  if (w.second >= 0 && w.first > w.second)
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", Shown(text), ": the first step ", w.first,
                                                   " is after the last ", w.second, " (N:M keeps steps N to M)"));
  return w;
}

}  // namespace shardscope::cli
