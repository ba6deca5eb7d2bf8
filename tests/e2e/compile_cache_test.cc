// The persistent compile cache end to end: two `shardscope run` processes
// share one empty cache directory at the same time (both succeed, every
// entry they leave is whole), then a third run of the same workload compiles
// nothing, trains identically, and `shardscope metrics` counts the hits; a
// damaged entry and a FIFO at an entry's path are each a diagnosed miss.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

// The value printed after a counter's name in `shardscope metrics`.
std::string Counter(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n  " + name + " ");
  if (at == std::string::npos) return "";
  std::istringstream line(text.substr(at + 3 + name.size()));
  std::string value;
  line >> value;
  return value;
}

TEST(CompileCacheE2e, TwoProcessesShareADirectoryThenARunCompilesNothing) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/cache_e2e_", getpid());
  std::filesystem::remove_all(dir);
  const std::string a = e2e::TempDb("cache_a"), b = e2e::TempDb("cache_b"), c = e2e::TempDb("cache_c");
  const std::string run = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x1 --steps 4 --quiet --cache-dir ", dir,
                                       " --db ");
  // Both at once; each prints its summary line, and the shell reports the worse exit status.
  e2e::Output both = e2e::Shell(absl::StrCat("(", run, a, " & ", run, b, " & wait %1 && wait %2)"));
  ASSERT_EQ(both.code, 0) << both.text;
  EXPECT_EQ(both.text.find("error"), std::string::npos) << both.text;
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().extension(), ".sscache") << e.path();  // no temporary file left behind
    ++entries;
  }
  EXPECT_GT(entries, 0);
  e2e::Output third = e2e::Shell(run + c);
  ASSERT_EQ(third.code, 0) << third.text;
  auto compiles = e2e::Q(c, "SELECT SUM(cache = 'miss') AS misses, SUM(cache = 'disk_hit') AS disk FROM compilations");
  EXPECT_EQ(compiles.Int(0, "misses"), 0);
  EXPECT_GT(compiles.Int(0, "disk"), 0);
  auto losses = e2e::Q(c, "SELECT group_concat(loss) AS l FROM steps");
  auto first = e2e::Q(a, "SELECT group_concat(loss) AS l FROM steps");
  EXPECT_EQ(losses.Text(0, "l"), first.Text(0, "l"));
  e2e::Output metrics = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", c));
  ASSERT_EQ(metrics.code, 0) << metrics.text;
  EXPECT_EQ(Counter(metrics.text, "UncachedCompile"), "0") << metrics.text;
  EXPECT_EQ(Counter(metrics.text, "PersistentCacheMiss"), "0") << metrics.text;
  EXPECT_NE(Counter(metrics.text, "PersistentCacheHit"), "0") << metrics.text;
  // A damaged entry: the next run recompiles that program and says why, naming the file.
  std::string damaged;
  for (const auto& e : std::filesystem::directory_iterator(dir)) damaged = e.path().string();
  { std::ofstream(damaged, std::ios::trunc) << "{\"version\": 7"; }
  const std::string d = e2e::TempDb("cache_d");
  ASSERT_EQ(e2e::Shell(run + d).code, 0);
  auto why = e2e::Q(d, "SELECT cause_kind, cause_detail FROM compilations WHERE cache = 'miss'");
  ASSERT_EQ(why.rows.size(), 1u);
  EXPECT_EQ(why.Text(0, "cause_kind"), "disk_cache_unreadable");
  EXPECT_TRUE(absl::StrContains(why.Text(0, "cause_detail"), damaged)) << why.Text(0, "cause_detail");
  // A FIFO at an entry's path: the run neither blocks (`timeout` would exit
  // 124) nor touches it; the program is compiled and the miss says why.
  std::filesystem::remove(damaged);
  ASSERT_EQ(mkfifo(damaged.c_str(), 0644), 0);
  const std::string f = e2e::TempDb("cache_f");
  e2e::Output fifo = e2e::Shell(absl::StrCat("timeout 120 ", run, f));
  ASSERT_EQ(fifo.code, 0) << fifo.text;
  auto skipped = e2e::Q(f, "SELECT cause_kind, cause_detail FROM compilations WHERE cache = 'miss'");
  ASSERT_EQ(skipped.rows.size(), 1u);
  EXPECT_EQ(skipped.Text(0, "cause_kind"), "disk_cache_unreadable");
  EXPECT_TRUE(absl::StrContains(skipped.Text(0, "cause_detail"), absl::StrCat(damaged, ": is a FIFO")))
      << skipped.Text(0, "cause_detail");
  EXPECT_TRUE(std::filesystem::is_fifo(damaged));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardscope
