// Whether a run has chips' lanes on a clock, asked of the tracks table alone.
// Analyses that read chips' device-clock slices ask first: a simulated run has
// none, and a query that filters them out only after joining its tracks makes
// every chip's slices from the schedules first (minutes on a 4096-chip pod).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "store/reader.h"

namespace shardscope::analysis {

inline absl::StatusOr<bool> HasChipLanes(const store::Reader& rd, int64_t run_id, const std::string& clock) {
  auto q = rd.Query(
      "SELECT EXISTS (SELECT 1 FROM tracks WHERE run_id = ?1 AND clock = ?2 AND device_id IS NOT NULL) AS n",
      {absl::StrCat(run_id), clock});
  if (!q.ok()) return q.status();
  return q->Int(0, "n") != 0;
}

}  // namespace shardscope::analysis
