// The persistent compile cache: one file per compiled program in a directory
// (`--cache-dir`, or SHARDSCOPE_CACHE_DIR), so a second run of a workload
// compiles nothing. An entry holds what partitioning produced — the local
// program as StableHLO text, the layouts of its inputs and outputs, the
// sharding decisions and rematerializations as they are recorded — and is
// keyed by everything that decides it (CompileCacheKey). Fusion, the memory
// plan and costs are recomputed on load: they are cheap and depend on the
// run's profile.
//
// An entry file (`<XXH3-128 of key and format version, hex>.sscache`) is
//
//   shardscope-compile-cache <format> <key bytes> <body bytes> <checksum>\n
//   <key>\n
//   <body: JSON — program text, layouts, sharding rows>
//
// where <checksum> is XXH3-128 (32 hex digits) over every other byte of the
// file: the header up to the checksum, the key, the newline and the body. On
// load the header, the sizes, the checksum and the full key are checked
// before anything is parsed; any failure is a miss with a one-line error
// naming the file and what failed, the entry is removed (when it is a regular
// file this user owns, and still the one that was read) and the caller
// recompiles and rewrites it. Only regular files are read (opened with
// O_NONBLOCK | O_NOFOLLOW, then checked), so a FIFO, a directory or a symbolic
// link at an entry's path is reported, skipped, left in place and never
// written over. Writes go to `<entry>.tmp.<host>.<pid>.<random>` renamed into
// place, so processes sharing a directory never see half an entry; opening
// the cache removes temporaries left by killed writers: those of this host
// whose writer process is gone, and any older than kOrphanTempAge.
#pragma once

#include <atomic>
#include <chrono>
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

// The entry file's layout (above). Bumped when the layout or the body's
// fields change; it is part of every file name, so entries of another format
// are never opened (a clean miss), and one found at this format's name is
// reported as unreadable.
inline constexpr int kEntryFormatVersion = 2;
inline constexpr const char* kEntryMagic = "shardscope-compile-cache";

// A temporary file this old is a killed writer's, whatever its pid says.
inline constexpr std::chrono::seconds kOrphanTempAge{3600};

class CompileCache {
 public:
  // Opens the cache in `dir`, which must exist and be a directory, and
  // removes orphaned temporaries (see above).
  static absl::StatusOr<std::unique_ptr<CompileCache>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }

  // The executable stored under `key`, without graph id, fusion, memory plan
  // or costs; nullopt when there is none; an error naming the file and what
  // failed when the entry cannot be used (the caller recompiles).
  absl::StatusOr<std::optional<std::shared_ptr<Executable>>> Load(const std::string& key);
  // Stores `exe` under `key` (best effort: a full disk is an error the caller
  // may ignore; so is an entry path held by something other than a regular file).
  absl::Status Store(const std::string& key, const Executable& exe);

  // Where the entry for `key` lives (whether or not it exists).
  std::string PathOf(const std::string& key) const;
  // The temporary a writer with `pid` on this host uses for `entry_path`.
  static std::string TempPathOf(const std::string& entry_path, int pid, uint32_t nonce);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  int64_t unreadable() const { return unreadable_; }
  // Temporaries removed when the cache was opened.
  int64_t orphans_removed() const { return orphans_removed_; }

 private:
  explicit CompileCache(std::string dir) : dir_(std::move(dir)) {}
  void RemoveOrphanedTemporaries();

  std::string dir_;
  std::atomic<int64_t> hits_{0}, misses_{0}, unreadable_{0}, orphans_removed_{0};
};

}  // namespace shardscope::runtime
