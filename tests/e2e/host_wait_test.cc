// A chip waiting on the host is visible as such. With asynchronous dispatch
// mark_step enqueues a step and returns; when the host is slower than the
// chips, a chip finishes step N and sits idle until step N+1 arrives. That
// wait lands on the chip's device-clock track as "waiting for host" (kind
// host_wait), in step_device_summary.host_wait_ns, and in the report. A host
// that sleeps between steps makes the chips wait about that long; a host
// that keeps the queue full makes them wait not at all.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/shardscope.h"
#include "profiler/analysis/run_report.h"
#include "profiler/trace/recorder.h"
#include "store/reader.h"
#include "store/writer.h"

namespace shardscope {
namespace {

using namespace std::chrono_literals;

Literal Filled(int64_t rows, int64_t cols, float v) {
  return Literal::FromF32({rows, cols}, std::vector<float>(rows * cols, v));
}

// Records `steps` steps of `step(k)` on `chips` chips into a new database;
// returns its path. The host waits for the devices only at the end.
std::string RecordRun(const std::string& name, int chips, int steps, const std::function<void(int)>& step) {
  std::string path = absl::StrCat(::testing::TempDir(), "/host_wait_", name, "_", getpid(), ".db");
  std::remove(path.c_str());
  auto writer = store::Writer::Open(path);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return path;
  trace::ResetHostClock();
  trace::SetRecorder(writer->get());
  trace::RunRecord run;
  run.sample = name;
  run.mesh = absl::StrCat(chips, "x1");
  run.num_hosts = 1;
  run.num_devices = chips;
  EXPECT_TRUE((*writer)->StartRun(run).ok());
  EXPECT_TRUE(Init({.num_hosts = 1, .chips_per_host = chips}).ok());
  for (int k = 0; k < steps; ++k) step(k);
  GetClient().Synchronize();
  Shutdown();
  EXPECT_TRUE((*writer)->EndRunAndCheck().ok()) << (*writer)->status();
  trace::SetRecorder(nullptr);
  return path;
}

struct Waits {
  std::vector<int64_t> per_step_ns;  // by step, the largest over the chips
  int64_t total_ns = 0, compute_ns = 0;
  int64_t slices = 0, modeled_slices = 0;
};

Waits ReadWaits(const store::Reader& r, int steps) {
  Waits w;
  w.per_step_ns.assign(steps, 0);
  auto q = r.Query("SELECT step, device_id, host_wait_ns, compute_ns FROM step_device_summary ORDER BY step");
  EXPECT_TRUE(q.ok()) << q.status();
  if (!q.ok()) return w;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    int step = static_cast<int>(q->Int(i, "step"));
    int64_t ns = q->Int(i, "host_wait_ns");
    if (step >= 0 && step < steps) w.per_step_ns[step] = std::max(w.per_step_ns[step], ns);
    w.total_ns += ns;
    w.compute_ns += q->Int(i, "compute_ns");
  }
  auto n = r.Query(
      "SELECT sum(clock = 'device') AS device, sum(clock = 'modeled') AS modeled FROM events"
      " WHERE kind = 'host_wait' AND name = 'waiting for host' AND device_id IS NOT NULL");
  EXPECT_TRUE(n.ok()) << n.status();
  if (n.ok()) {
    w.slices = n->Int(0, "device");
    w.modeled_slices = n->Int(0, "modeled");
  }
  return w;
}

TEST(HostWait, SlowHostMakesTheChipsWaitAboutAsLongAsItSleeps) {
  constexpr int kSteps = 6;
  constexpr auto kSleep = 40ms;
  std::optional<Tensor> w;
  std::string path = RecordRun("slow_host", 2, kSteps, [&](int k) {
    if (!w) w = Tensor::from_host(Filled(32, 32, 0.01f), "w");
    if (k > 0) std::this_thread::sleep_for(kSleep);  // the host is busy elsewhere
    Tensor x = Tensor::from_host(Filled(32, 32, 1.0f), "x");
    *w = sub(*w, mul(matmul(x, *w), 0.001));
    ASSERT_TRUE(mark_step().ok());
  });
  w.reset();
  auto r = store::Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  Waits waits = ReadWaits(*r, kSteps);
  EXPECT_EQ(waits.per_step_ns[0], 0) << "nothing ran before the first step";
  // Each wait is the 40 ms sleep plus tracing, less the wall time the chips
  // spent on the step before; bounds leave room for a loaded machine.
  int64_t longest = 0;
  for (int k = 1; k < kSteps; ++k) {
    EXPECT_GE(waits.per_step_ns[k], 20'000'000) << "step " << k;
    EXPECT_LE(waits.per_step_ns[k], 240'000'000) << "step " << k;
    longest = std::max(longest, waits.per_step_ns[k]);
  }
  EXPECT_GE(longest, 35'000'000);
  std::printf("waits per step (ms, largest over the chips):");
  for (int64_t ns : waits.per_step_ns) std::printf(" %.1f", ns / 1e6);
  std::printf("\n");
  EXPECT_EQ(waits.slices, 2 * (kSteps - 1)) << "one slice per chip per waited-for step";
  EXPECT_EQ(waits.modeled_slices, 0);

  auto report = analysis::BuildRunReport(*r, 1);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GE(report->devices.median_host_wait_ns, 20'000'000);
  for (const auto& row : report->devices.rows) EXPECT_EQ(row.median_step.bottleneck, "host");
  std::string text = analysis::RenderText(*report);
  EXPECT_NE(text.find("host wait"), std::string::npos) << text;
  EXPECT_NE(text.find("Waiting for host: "), std::string::npos) << text;
  EXPECT_EQ(text.find("none recorded (every program"), std::string::npos) << text;
  std::remove(path.c_str());
}

TEST(HostWait, FastHostKeepsTheChipsBusy) {
  constexpr int kSteps = 8;
  std::optional<Tensor> w;
  std::string path = RecordRun("fast_host", 1, kSteps, [&](int) {
    // Several big matmuls per step: the chip takes far longer than the host
    // needs to trace and enqueue the next step, so the queue never runs dry.
    if (!w) w = Tensor::from_host(Filled(512, 512, 0.001f), "w");
    Tensor y = *w;
    for (int k = 0; k < 8; ++k) y = matmul(y, *w);
    *w = sub(*w, mul(y, 0.001));
    ASSERT_TRUE(mark_step().ok());
  });
  w.reset();
  auto r = store::Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  Waits waits = ReadWaits(*r, kSteps);
  EXPECT_GT(waits.compute_ns, 0);
  std::printf("waits %.3f ms in all, compute %.1f ms in all\n", waits.total_ns / 1e6, waits.compute_ns / 1e6);
  EXPECT_LE(waits.total_ns, waits.compute_ns / 50) << "waits " << waits.total_ns << " ns vs compute "
                                                   << waits.compute_ns << " ns";
  auto report = analysis::BuildRunReport(*r, 1);
  ASSERT_TRUE(report.ok()) << report.status();
  if (waits.total_ns == 0) {
    std::string text = analysis::RenderText(*report);
    EXPECT_NE(text.find("Waiting for host: none recorded"), std::string::npos) << text;
    EXPECT_EQ(text.find("host wait"), std::string::npos) << text;
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace shardscope
