// The persistent compile cache: one file per compiled program in a directory
// (`--cache-dir`, or SHARDSCOPE_CACHE_DIR), so a second run of a workload
// compiles nothing. An entry holds what partitioning produced — the local
// program as StableHLO text, the layouts of its inputs and outputs, the
// sharding decisions and rematerializations as they are recorded — and is
// keyed by everything that decides it (CompileCacheKey). Fusion, the memory
// plan and costs are recomputed on load: they are cheap and depend on the
// run's profile. Writes go to a temporary file renamed into place, so
// processes sharing a directory never see half an entry; an entry that cannot
// be read is removed and the program recompiled.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/client.h"

namespace shardscope::runtime {

// Bumped whenever partitioning or the program text changes what a cached
// entry would contain (an old entry then simply misses).
inline constexpr const char* kCompilerVersion = "shardscope-spmd-9";

class CompileCache {
 public:
  explicit CompileCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // The executable stored under `key`, without graph id, fusion, memory plan
  // or costs; nullopt when there is none; an error (after removing the file)
  // when the entry cannot be read.
  absl::StatusOr<std::optional<std::shared_ptr<Executable>>> Load(const std::string& key);
  // Stores `exe` under `key` (best effort: a full disk is an error the caller may ignore).
  absl::Status Store(const std::string& key, const Executable& exe);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  int64_t unreadable() const { return unreadable_; }

 private:
  std::string PathOf(const std::string& key) const;
  std::string dir_;
  std::atomic<int64_t> hits_{0}, misses_{0}, unreadable_{0};
};

}  // namespace shardscope::runtime
