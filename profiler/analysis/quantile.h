// One quantile for every figure the reports, diffs and views print: linear
// interpolation between the two nearest ranks (the median of an even count
// is the mean of the middle two). With one definition the same steps give the
// same median in `report`, `diff` and the app's Overview; three definitions
// had them print 30, 29 and 10.5-against-10.3 ms.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace shardscope::analysis {

// `sorted` ascending; q in [0, 1]; 0 when empty.
inline double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(sorted.size() - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

// Of values in any order; whole nanoseconds rounded to the nearest.
inline int64_t QuantileOf(const std::vector<int64_t>& values, double q) {
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  return static_cast<int64_t>(std::llround(Quantile(v, q)));
}

}  // namespace shardscope::analysis
