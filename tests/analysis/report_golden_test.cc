// Golden files of `shardscope report` in every format over the synthetic run
// (tests/store/synthetic_run.h: fixed times, four chips on two hosts, a
// recompilation, an all-reduce per step). A change of the report's content or
// layout shows here as a diff; when it is intended, regenerate with
//   SHARDSCOPE_UPDATE_GOLDEN=1 build/tests/analysis/analysis_report_golden_test
// and review the diff of tests/data/golden/ like code.
#include <sqlite3.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "profiler/analysis/metrics.h"
#include "profiler/analysis/run_report.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::analysis {
namespace {

using namespace shardscope::testing;

class ReportGolden : public ::testing::TestWithParam<std::string> {};

std::string Render(const std::string& format, const std::string& path) {
  auto reader = store::Reader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return "";
  auto r = BuildRunReport(*reader, 1);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  std::string out;
  if (format == "txt") out = RenderText(*r);
  if (format == "md") out = RenderMarkdown(*r);
  if (format == "json") out = RenderJson(*r);
  if (format == "html") {
    auto m = BuildMetricsReport(*reader, 1);
    EXPECT_TRUE(m.ok()) << m.status();
    out = RenderHtml(*r, m.ok() ? RenderMetricsText(*m) : "");
  }
  // The file's temporary path is the only thing that varies between runs.
  return absl::StrReplaceAll(out, {{path, "SYNTHETIC.db"}});
}

TEST_P(ReportGolden, MatchesTheGoldenFile) {
  const std::string format = GetParam();
  const std::string path = TempDbPath("report_golden_" + format);
  {
    auto w = store::Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(WriteSyntheticRun(**w).ok());
  }
  {
    // The run ended when the test ran: pin its end, one minute after its start.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "UPDATE runs SET ended_at_ns = started_at_ns + 60000000000;"
                           " UPDATE run_writers SET closed_at_ns = (SELECT ended_at_ns FROM runs),"
                           " heartbeat_ns = (SELECT ended_at_ns FROM runs)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  const std::string got = Render(format, path);
  ASSERT_FALSE(got.empty());
  const std::string golden = SHARDSCOPE_TEST_DATA "/golden/report." + format;
  if (std::getenv("SHARDSCOPE_UPDATE_GOLDEN")) {
    std::ofstream(golden) << got;
    GTEST_SKIP() << "rewrote " << golden;
  }
  std::ifstream f(golden);
  ASSERT_TRUE(f.good()) << "missing " << golden << " (SHARDSCOPE_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << f.rdbuf();
  EXPECT_EQ(got, want.str()) << "the " << format << " report differs from " << golden;
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, ReportGolden, ::testing::Values("txt", "md", "json", "html"));

}  // namespace
}  // namespace shardscope::analysis
