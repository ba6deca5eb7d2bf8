// Files a test binary makes in the temporary folder, removed when it ends
// with every test passed (kept to look at when one failed, or with
// SHARDSCOPE_KEEP_TEST_FILES set): a full run left gigabytes behind, run
// after run, until the disk was full.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace shardscope::test_files {

inline std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}

inline std::vector<std::string>& Paths() {
  static auto* paths = new std::vector<std::string>();  // never destroyed: read at exit
  return *paths;
}

// `path` (a file and its -wal, -shm, -journal files, or a folder and all in it) removed at exit if every test passed, by the
// process that asked: a child it forks (a test of a crash, of exit()) leaves them to it.
inline const std::string& RemoveAtExit(const std::string& path) {
  static const pid_t owner = getpid();
  static const bool registered = [] {
    std::atexit([] {
      if (getpid() != owner) return;
      if (std::getenv("SHARDSCOPE_KEEP_TEST_FILES") || !::testing::UnitTest::GetInstance()->Passed()) return;
      std::lock_guard<std::mutex> l(Mu());
      for (const std::string& p : Paths()) {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);  // a file, or a folder and what is in it
        for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((p + suffix).c_str());
      }
    });
    return true;
  }();
  (void)registered;
  std::lock_guard<std::mutex> l(Mu());
  Paths().push_back(path);
  return path;
}

}  // namespace shardscope::test_files
