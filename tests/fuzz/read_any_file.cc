// See read_any_file.h.
#include "tests/fuzz/read_any_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "profiler/analysis/metrics.h"
#include "profiler/analysis/recompiles.h"
#include "profiler/analysis/run_report.h"
#include "profiler/analysis/sharding_view.h"
#include "store/check.h"
#include "store/reader.h"
#include "store/run_state.h"
#include "store/trace_import.h"

namespace shardscope::fuzz {

void ReadAnyFile(const std::string& path) {
  store::CheckReport check = store::CheckDatabase(path);
  (void)check;
  absl::StatusOr<store::Reader> reader = store::Reader::Open(path);
  if (!reader.ok()) return;
  (void)store::ReadRunStates(*reader);
  absl::StatusOr<int64_t> latest = reader->LatestRunId();
  if (!latest.ok()) return;
  for (int64_t run : {*latest, int64_t{1}}) {
    if (auto r = analysis::BuildRunReport(*reader, run); r.ok()) {
      (void)analysis::RenderText(*r);
      (void)analysis::RenderMarkdown(*r);
      (void)analysis::RenderJson(*r);
    }
    if (auto m = analysis::BuildMetricsReport(*reader, run); m.ok()) (void)analysis::RenderMetricsText(*m);
    if (auto c = analysis::BuildRecompilesReport(*reader, run); c.ok()) (void)analysis::RenderRecompilesText(*c);
    if (auto v = analysis::BuildShardingView(*reader, run, ""); v.ok()) (void)analysis::RenderShardingText(*v, true);
    if (*latest == 1) break;
  }
}

void ImportAnyBytes(const uint8_t* data, size_t size) {
  static const std::string base = absl::StrCat(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
                                               "/shardscope_fuzz_import_", getpid());
  const std::string trace = base + ".json", db = base + ".db";
  auto clean = [&] {
    std::remove(trace.c_str());
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((db + suffix).c_str());
  };
  clean();
  {
    std::ofstream out(trace, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  // Small spill chunks, so the merge of temporary files is exercised too.
  store::ImportOptions options;
  options.chunk_records = 64;
  if (store::ImportChromeTraces({trace}, db, options).ok()) ReadAnyFile(db);
  clean();
}

void ReadAnyBytes(const uint8_t* data, size_t size) {
  // /dev/shm where there is one: the file is written once per input.
  static const std::string path = absl::StrCat(
      access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", "/shardscope_fuzz_", getpid(), ".db");
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ReadAnyFile(path);
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  // The same bytes as a trace for `shardscope import`.
  ImportAnyBytes(data, size);
}

}  // namespace shardscope::fuzz
