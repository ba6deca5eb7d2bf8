// Fast reads of chunked slices for shardscope's own connections. The file's
// `slices` view expands chunks with json_each so that the plain sqlite3 shell
// can read it; that costs microseconds per slice. On the connections the
// reader, the writer and `check` open, a native table-valued function
// (shardscope_chunk_slices) decodes a chunk instead, and TEMP views named
// slices, events, step_device_summary, kernel_stats, time_by_source_line and
// time_by_module_path use it: unqualified names find temp before main, so
// every query the reports run reads the same rows, natively.
#pragma once

#include "absl/status/status.h"

struct sqlite3;

namespace shardscope::store::internal {

// Registers the function and, on a chunked (version 2) file, makes the temp
// views. Call after the schema and any migration are in place.
absl::Status InstallNativeSlices(sqlite3* db);

}  // namespace shardscope::store::internal
