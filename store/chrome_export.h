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
#include <string>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::store {

struct ChromeExportStats {
  int64_t processes = 0, slices = 0, flows = 0, counters = 0;
  int64_t counters_left_out = 0;  // samples whose value is not a finite number (JSON has no Inf/NaN)
};

absl::StatusOr<ChromeExportStats> ExportChromeTrace(const Reader& reader, int64_t run_id, const std::string& path);

}  // namespace shardscope::store
