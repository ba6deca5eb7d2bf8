// Reading a simulated pod's lanes through an even sample of them: every chip
// runs the same programs, so a sample gives the op mix at a fraction of the
// cost (the Op profile, the report's names by self time).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "store/reader.h"

namespace shardscope::analysis {

// Keeps `k` of `q`'s rows, evenly spaced, first and last included, in order;
// all of them when there are no more than k (or k < 2).
inline void KeepEvenSample(store::QueryResult& q, size_t k) {
  const size_t n = q.rows.size();
  if (k < 2 || n <= k) return;
  std::vector<std::vector<store::Cell>> sample;
  sample.reserve(k);
  for (size_t i = 0; i < k; ++i) sample.push_back(std::move(q.rows[i * (n - 1) / (k - 1)]));
  q.rows = std::move(sample);
}

}  // namespace shardscope::analysis
