// The timeline loader on a simulated pod (`shardscope run --simulate`): its
// chips' summaries are made from their schedules, so the loader reads none of
// them at open but the first chip's (the lanes' depth), loads a chip's window
// when it is asked for, and reads the rest in the background only while
// prefetching is not paused, in the order it was given. What it loads is
// checked against SQL over the same file (the `slices` view makes a simulated
// chip's slices from the same schedules).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/temp_files.h"
#include "store/reader.h"
#include "store/timeline.h"
#include "ui/app/timeline_loader.h"
#include "ui/app/trace_model.h"

namespace shardscope::app {
namespace {

class LazyLoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(test_files::RemoveAtExit(::testing::TempDir() + absl::StrCat("lazy_loader_sim_", getpid(), ".db")));
    std::filesystem::remove(*db_);
    const std::string cmd = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --simulate --topology 4x2x2 --steps 4 --db ",
                                         *db_, " --quiet > /dev/null 2>&1");
    recorded_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { delete db_; }
  void SetUp() override {
    ASSERT_TRUE(recorded_) << "shardscope run mlp --simulate failed";
    auto model = LoadTraceModel(*db_, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<TraceModel>(*std::move(model));
    loader_ = std::make_unique<TimelineLoader>(*model_, nullptr);
    ASSERT_TRUE(loader_->WaitIdle(60));
    ASSERT_TRUE(loader_->error().ok()) << loader_->error();
    ASSERT_NE(loader_->overview(), nullptr);
    auto r = store::Reader::Open(*db_);
    ASSERT_TRUE(r.ok()) << r.status();
    reader_ = std::make_unique<store::Reader>(*std::move(r));
  }
  int64_t SlicesOf(int64_t track) {
    auto q = reader_->Query(absl::StrCat("SELECT count(*) AS n FROM slices WHERE run_id = ", model_->run.run_id,
                                         " AND track_id = ", track));
    EXPECT_TRUE(q.ok()) << q.status();
    return q.ok() ? q->Int(0, "n") : -1;
  }
  static int64_t Count(const WindowData& w) {
    int64_t n = 0;
    for (const auto& row : w.depths) {
      for (const auto& b : row) n += b.count;
    }
    return n;
  }
  static std::string* db_;
  static bool recorded_;
  std::unique_ptr<TraceModel> model_;
  std::unique_ptr<TimelineLoader> loader_;
  std::unique_ptr<store::Reader> reader_;
};
std::string* LazyLoaderTest::db_ = nullptr;
bool LazyLoaderTest::recorded_ = false;

TEST_F(LazyLoaderTest, OpensWithOnlyTheFirstChipsSummaries) {
  const RunOverview& ov = *loader_->overview();
  auto q = reader_->Query(absl::StrCat("SELECT track_id FROM sim_chips WHERE run_id = ", model_->run.run_id,
                                       " ORDER BY track_id"));
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(ov.lazy_tracks.size(), 16u);
  ASSERT_EQ(q->rows.size(), 16u);
  for (size_t i = 0; i < q->rows.size(); ++i) EXPECT_EQ(ov.lazy_tracks[i], q->Int(i, "track_id"));
  // The first chip's whole run is read (its depth sets every chip's rows); no other chip's.
  auto first = loader_->WholeRun(ov.lazy_tracks[0]);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(Count(*first), SlicesOf(ov.lazy_tracks[0]));
  for (size_t i = 1; i < ov.lazy_tracks.size(); ++i) EXPECT_EQ(loader_->WholeRun(ov.lazy_tracks[i]), nullptr);
  for (int64_t t : ov.lazy_tracks) EXPECT_EQ(ov.depths.at(t), std::max<int>(1, int(first->depths.size())));
  const LoaderProgress p = loader_->progress();
  EXPECT_EQ(p.whole_run_done, 1u);
  EXPECT_EQ(p.whole_run_total, 16u);
  EXPECT_FALSE(p.busy());
  // The chips' clock spans its steps (step_bounds), as the store places their slices.
  auto bounds = reader_->Query(absl::StrCat("SELECT min(start_ns) AS lo, max(end_ns) AS hi FROM step_bounds WHERE run_id = ",
                                            model_->run.run_id, " AND clock = 'modeled'"));
  ASSERT_TRUE(bounds.ok());
  ASSERT_TRUE(ov.extent[int(Clock::kModeled)]);
  EXPECT_LE(ov.extent[int(Clock::kModeled)]->first, bounds->Int(0, "lo"));
  EXPECT_GE(ov.extent[int(Clock::kModeled)]->second, bounds->Int(0, "hi"));
}

TEST_F(LazyLoaderTest, AChipsWindowLoadsWhenAskedFor) {
  const RunOverview& ov = *loader_->overview();
  const int64_t chip = ov.lazy_tracks[5];
  const auto& ext = *ov.extent[int(Clock::kModeled)];
  const WindowKey key{chip, 0, ext.first, ext.second};
  loader_->Request({key});
  ASSERT_TRUE(loader_->WaitIdle(60));
  auto w = loader_->Get(key);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(Count(*w), SlicesOf(chip));
  EXPECT_EQ(loader_->WholeRun(chip), nullptr);  // a window, not the whole-run summaries
}

TEST_F(LazyLoaderTest, PrefetchWaitsWhilePausedThenReadsEveryChipListed) {
  const RunOverview& ov = *loader_->overview();
  std::vector<int64_t> order(ov.lazy_tracks.rbegin(), ov.lazy_tracks.rend());
  order.push_back(123456789);  // not a chip of this run: ignored
  loader_->Prefetch(order);
  // Paused from the start (the app unpauses it while the timeline is shown).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(loader_->progress().whole_run_done, 1u);
  loader_->SetPrefetchPaused(false);
  for (int i = 0; i < 600 && loader_->progress().whole_run_done < ov.lazy_tracks.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(loader_->progress().whole_run_done, ov.lazy_tracks.size());
  ASSERT_TRUE(loader_->error().ok()) << loader_->error();
  for (int64_t t : ov.lazy_tracks) {
    auto w = loader_->WholeRun(t);
    ASSERT_NE(w, nullptr) << t;
    EXPECT_EQ(Count(*w), SlicesOf(t)) << "track " << t;
    // What a zoomed-out lane draws from once its window is gone.
    EXPECT_EQ(loader_->Best(t, 13, ov.extent[int(Clock::kModeled)]->first, ov.extent[int(Clock::kModeled)]->second), w);
  }
}

}  // namespace
}  // namespace shardscope::app
