// Export of a stored run in the Chrome trace event format, which Perfetto UI
// (ui.perfetto.dev) and chrome://tracing open. Each chip is a process per
// clock ("chip 3 (device clock)", "chip 3 (modeled clock)"), sorted by chip
// id so that thousands of chips stay in order; each host is a process with a
// thread per host track. Slices are complete ("X") events, nested as stored;
// the slices of one collective are linked by flow events across chips;
// counters are "C" events. Rows are streamed from the database to the file
// (gzip-compressed when the name ends in .gz), never held whole in memory.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::store {

struct ChromeExportStats {
  int64_t processes = 0, slices = 0, flows = 0, counters = 0;
  int64_t counters_left_out = 0;  // samples whose value is not a finite number (JSON has no Inf/NaN)
  int64_t counters_unplaced = 0;  // --steps asked and no step has bounds on the clocks: not written
};

// What to write of the run: a pod's whole timeline (50M slices, 883 MB of
// gzip for 4096 chips x 20 steps) is more than a viewer opens.
struct ChromeExportOptions {
  std::set<int64_t> chips;        // empty: every chip (host lanes are always kept)
  int64_t first_step = -1, last_step = -1;  // -1: every step; else [first, last]
  // Said in otherData's capture_note, which `import` reads back ("exported:
  // chips 0-63 of 4096, steps 3-5"): the file is not the whole run.
  std::string selection;
};

absl::StatusOr<ChromeExportStats> ExportChromeTrace(const Reader& reader, int64_t run_id, const std::string& path,
                                                    const ChromeExportOptions& options = {});

// About how many slices ExportChromeTrace would write for `options`: the
// chunks' counts (stored lanes), plus for a simulated run a few kept chips'
// slices made from the schedule, their mean times the chips kept. What
// `export` weighs before writing a pod's whole timeline; 0 when the file
// cannot say.
int64_t EstimateChromeSlices(const Reader& reader, int64_t run_id, const ChromeExportOptions& options = {});

}  // namespace shardscope::store
