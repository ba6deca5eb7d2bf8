// The fleet diagnosis's noise test (see fleet_noise.h).
#include "profiler/analysis/fleet_noise.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"
#include "profiler/analysis/fleet_steps.h"

namespace shardscope::analysis::fleet_internal {

double StudentT995(size_t df) {
  static constexpr double kT[] = {63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
                                  3.106,  3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845,
                                  2.831,  2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750};
  return df == 0 ? INFINITY : kT[std::min<size_t>(df, std::size(kT)) - 1];  // beyond 30: 30's, a little wider
}

double NoiseCut(size_t n) {
  const double p = 0.01 / static_cast<double>(std::max<size_t>(n, 1));
  double lo = 0, hi = 40;  // 0.5 erfc(z / sqrt 2) falls from 0.5 to 0 over it
  for (int k = 0; k < 60; ++k) {
    const double z = (lo + hi) / 2;
    (0.5 * std::erfc(z / std::sqrt(2.0)) > p ? lo : hi) = z;
  }
  return std::max(kNoiseSpreads, hi);
}

void SetNoise(std::vector<StepRatios*> all) {
  std::vector<double> pooled, moves;
  for (const StepRatios* s : all) {
    pooled.insert(pooled.end(), s->ratios.begin(), s->ratios.end());
    for (size_t k = 1; k < s->ratios.size(); ++k) moves.push_back(std::fabs(s->ratios[k] - s->ratios[k - 1]));
  }
  if (pooled.empty()) return;
  const double median = Median(std::move(pooled));
  const double spread = moves.empty() ? 0 : 1.4826 * Median(std::move(moves)) / std::sqrt(2.0);
  const double cut = NoiseCut(all.size());
  for (StepRatios* s : all) {
    s->cut = cut;
    double excess = 0;
    for (double q : s->ratios) excess += q - median;
    const double n = static_cast<double>(s->ratios.size()), sd = spread * std::sqrt(n);
    // Below rounding (a healthy simulated chip reads 1 to the last bits): no excess.
    s->noise = excess <= 1e-9 * n ? 0 : sd > 0 ? excess / sd : INFINITY;
  }
}

std::string AboveNoise(double z) {
  return std::isinf(z) ? "its peers read alike in every step: the run has no noise to hide it"
                       : absl::StrFormat("%.1f standard deviations above the run's noise", std::max(0.0, z));
}

}  // namespace shardscope::analysis::fleet_internal
