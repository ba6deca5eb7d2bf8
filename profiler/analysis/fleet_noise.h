// The fleet diagnosis's test of a suspect against the run's noise: its ratio
// to its peers step by step, whether it is slow steadily, and how far its
// excess stands above what the run's own step-to-step moves give (fleet.cc,
// and fleet_host.cc for ranks compared on the host clock). Internal to
// profiler/analysis.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace shardscope::analysis::fleet_internal {

// The one-sided 99.5% quantile of Student's t with `df` degrees of freedom:
// how many standard errors a chip's mean ratio must stand above 1 to count as
// slow from step to step, not by what a few steps drew.
double StudentT995(size_t df);

// A suspect's slowness must stand this many standard deviations above what
// the run's own noise gives (Iglewicz and Hoaglin's cut for an outlier, with
// the deviation from the median absolute deviation, x1.4826), and more where
// many suspects are compared: the cut a normal value passes with probability
// 1% / n (Bonferroni), so that one of a run's n healthy suspects passes it by
// chance in one run of a hundred at most. 64 chips: 3.60; 4096: 4.57. (At 3.5
// alone, a chip of a 64-chip llama pod under jitter 0.9 stood 3.1 above.)
constexpr double kNoiseSpreads = 3.5;
double NoiseCut(size_t n);

// A suspect's ratio to its peers in each analysed step (a chip: its kernels'
// time over the sum of their peers' medians; a host: 1 + its excess over its
// peers' time), and what tells real slowness from what jitter draws. Under
// jitter a chip of few steps can read 1.10x over the run (mlp on 4x4x4, 5
// steps, jitter 0.3) and even hold it in every step (cnn, jitter 0.9: 1.07x to
// 1.10x in its four) while its excess is no more than the run's noise gives
// one of 64 chips.
struct StepRatios {
  std::vector<double> ratios;
  double mean = 1, sd = 0, lo = 1, hi = 1;
  double noise = 0;  // its excess over the run's noise (SetNoise), in standard deviations
  double cut = kNoiseSpreads;  // what `noise` must reach (NoiseCut of the suspects compared)

  void Summarize() {
    if (ratios.empty()) return;
    const double n = static_cast<double>(ratios.size());
    mean = 0;
    for (double q : ratios) mean += q / n;
    double var = 0;
    for (double q : ratios) var += (q - mean) * (q - mean) / std::max(1.0, n - 1);
    sd = std::sqrt(var);
    lo = *std::min_element(ratios.begin(), ratios.end());
    hi = *std::max_element(ratios.begin(), ratios.end());
  }
  // The mean's lower one-sided 99.5% confidence bound over the steps: above
  // 1, slow from step to step, not in one step or by what a few steps drew.
  double LowerBound() const {
    return sd == 0 ? mean : mean - StudentT995(ratios.size() - 1) * sd / std::sqrt(static_cast<double>(ratios.size()));
  }
  // The median's lower one-sided 99.5% bound, free of any distribution (the
  // sign test: the k-th smallest ratio, k the most that Binomial(n, 1/2)
  // falls below with probability 0.5% at most); NaN under 8 steps. A few
  // steps' outliers (a kernel that took 20x once) widen Student's bound past
  // 1 for a chip slow in every step (1.36x to 8.9x over 9 steps: t's bound
  // 0.6); they do not move this one.
  double MedianLowerBound() const { return MedianBound(true); }
  double MedianUpperBound() const { return MedianBound(false); }
  double MedianBound(bool lower) const {
    const size_t n = ratios.size();
    double below = std::pow(0.5, static_cast<double>(n)), term = below;  // P(Bin <= 0)
    if (below > 0.005) return std::numeric_limits<double>::quiet_NaN();
    size_t k = 0;  // P(Bin <= k) <= 0.5%
    while (k + 1 < n) {
      term *= static_cast<double>(n - k) / static_cast<double>(k + 1);
      if (below + term > 0.005) break;
      below += term;
      ++k;
    }
    std::vector<double> sorted = ratios;
    if (lower)
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
    else
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end(),
                       std::greater<double>());
    return sorted[k];
  }
  // The mean's upper one-sided 99.5% bound: below 1, fast from step to step.
  double UpperBound() const {
    return sd == 0 ? mean : mean + StudentT995(ratios.size() - 1) * sd / std::sqrt(static_cast<double>(ratios.size()));
  }
  bool SlowSteadily() const {
    const double median_bound = MedianLowerBound();
    return ratios.size() >= 2 && (LowerBound() > 1 || (!std::isnan(median_bound) && median_bound > 1));
  }
  bool BeyondNoise() const { return noise >= cut; }
};

// The run's step-to-step noise for suspects of one kind: how much a suspect's
// ratio moves from one step to the next, every suspect pooled (the median of
// the steps' absolute differences, x1.4826 for a standard deviation, / sqrt 2
// for one step's). Each suspect's excess over the median of all their per-step
// ratios, summed over its steps, in standard deviations of such a sum (that x
// sqrt(steps)): a pause in one step and a steady few percent in every step are
// measured alike. Differences, not deviations from a median over the
// suspects: a chip steadily slower than its peers is not noise, however its
// peers spread (4 chips at 1.0, 1.1, 1.2 and 1.3 ms a step: the last is
// 1.18x), and a pause moves one step, not the others. No noise (a simulated
// run without jitter): any excess is beyond it.
void SetNoise(std::vector<StepRatios*> all);

// Summarizes every suspect's step ratios of one kind (a map to StepRatios)
// and sets their noise against each other.
template <typename Map>
void SummarizeAndSetNoise(Map& by_suspect) {
  std::vector<StepRatios*> all;
  for (auto& [key, steps] : by_suspect) {
    steps.Summarize();
    all.push_back(&steps);
  }
  SetNoise(all);
}

// How far above the run's noise an excess stands (StepRatios::noise).
std::string AboveNoise(double z);

}  // namespace shardscope::analysis::fleet_internal
