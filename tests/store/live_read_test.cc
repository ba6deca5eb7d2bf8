// Reading a run while another process writes it (what `shardscope-ui --follow`
// and `report` on a running run do): no read ever fails with "database is
// locked", and a step that is visible is whole: its row and all its slices
// arrive in one transaction, so no reader sees a torn step.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "store/reader.h"
#include "store/timeline.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::store {
namespace {

constexpr int kSteps = 120, kTracks = 4, kPerStep = 250;

void WriteRun(const std::string& path) {
  auto w = Writer::Open(path);
  if (!w.ok()) _exit(3);
  trace::RunRecord run;
  run.sample = "live";
  if (!(*w)->StartRun(run).ok()) _exit(4);
  for (int t = 0; t < kTracks; ++t) {
    trace::TrackRecord tr;
    tr.track_id = 1 + t;
    tr.name = absl::StrCat("chip ", t);
    tr.clock = trace::Clock::kDevice;
    tr.device_id = t;
    (*w)->Record(tr);
  }
  int64_t id = 1, now = 0;
  for (int step = 0; step < kSteps; ++step) {
    for (int t = 0; t < kTracks; ++t) {
      for (int i = 0; i < kPerStep; ++i) {
        trace::SliceRecord s;
        s.slice_id = id++;
        s.track_id = 1 + t;
        s.start_ns = now + i * 1000;
        s.dur_ns = 900;
        s.name = "fusion.1";
        s.kind = trace::SliceKind::kCompute;
        s.step = step;
        s.graph_id = 1;
        (*w)->Record(s);
      }
    }
    now += kPerStep * 1000;
    trace::StepRecord st;
    st.step = step;
    st.wall_ns = 1;
    (*w)->Record(st);
    if (step % 10 == 0) usleep(2000);  // let readers in between
  }
  (*w)->EndRun();
  _exit((*w)->status().ok() ? 0 : 5);
}

TEST(LiveRead, ReadersOfARunBeingWrittenNeverSeeALockOrATornStep) {
  const std::string path = shardscope::testing::TempDbPath("live_read");
  {
    auto w = Writer::Open(path);  // the file exists before the reader starts
    ASSERT_TRUE(w.ok()) << w.status();
  }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) WriteRun(path);
  int reads = 0, max_steps_seen = 0;
  for (;;) {
    int status = 0;
    const bool done = waitpid(child, &status, WNOHANG) == child;
    auto r = Reader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status();
    // Every visible step has all of its slices.
    auto q = r->Query(
        "SELECT s.step, (SELECT coalesce(sum(c.count), 0) FROM slice_chunks c WHERE c.run_id = s.run_id"
        " AND c.step = s.step) AS n FROM steps s ORDER BY s.step");
    ASSERT_TRUE(q.ok()) << q.status();
    for (size_t i = 0; i < q->rows.size(); ++i)
      ASSERT_EQ(q->Int(i, "n"), kTracks * kPerStep) << "step " << q->Int(i, "step") << " read torn";
    TimelineReader tl(*r);
    auto steps = tl.Steps(1);
    ASSERT_TRUE(steps.ok()) << steps.status();
    auto slices = tl.Slices(1, 1, 0, int64_t{1} << 40);
    ASSERT_TRUE(slices.ok()) << slices.status();
    max_steps_seen = std::max<int>(max_steps_seen, static_cast<int>(q->rows.size()));
    ++reads;
    if (done) {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      break;
    }
  }
  EXPECT_EQ(max_steps_seen, kSteps);
  EXPECT_GT(reads, 3);
}

}  // namespace
}  // namespace shardscope::store
