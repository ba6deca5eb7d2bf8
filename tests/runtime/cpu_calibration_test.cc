// The measured `cpu` profile (runtime/cpu_calibration.h): how the values are
// resolved (pin, cache, measurement), the cache's round trip, and errors that
// name the file. One small measurement; no assertion on how fast anything ran.
#include "runtime/cpu_calibration.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/temp_files.h"

namespace shardscope::runtime {
namespace {

std::string TempPath(const std::string& name) {
  return test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/cpu_calibration_", name, "_", getpid(), ".json"));
}

// A probe of a machine `f` times as fast as a reference one (every figure alike).
SpeedProbe Probe(double f) {
  SpeedProbe p;
  p.gemm_flops = 100e9 * f;
  p.stream_bytes = 20e9 * f;
  p.exp_ns = 3.0 / f;
  p.reduce_ns = 0.2 / f;
  p.measured_at_unix_s = 1764000000;
  return p;
}

// A quick plan: the mechanism, not the figures (the bench measures those).
// Its speed probe is given, at speed 1: a test that resolves twice must not
// see the shared VM change speed between the two.
CalibrationPlan Small() {
  CalibrationPlan p;
  p.probe = [] { return Probe(1); };
  p.gemm_sizes = {64, 128};
  p.stream_min = 1 << 10;
  p.stream_max = 1 << 16;
  p.ops.cold_bytes = 1 << 20;
  p.ops.conv_batch = 1;
  p.ops.gemm_other_dim = 128;
  p.ops.elements = 1 << 12;
  p.ops.small_elements = 256;
  p.spread.chips = 4;
  p.spread.runs = 3;
  p.spread.rows = 8;
  p.spread.width = 32;
  p.spread.stream_elements = 4096;
  p.spread.stall_seconds = 0.05;
  p.collectives.members = 4;
  p.collectives.points = 2;
  p.collectives.cold_bytes = 1 << 20;
  p.collectives.rounds = 3;
  p.passes = 1;
  return p;
}

void ExpectSameFigures(const OpClassFigures& a, const OpClassFigures& b) {
  EXPECT_EQ(a.conv_flops, b.conv_flops);
  EXPECT_EQ(a.conv_dilated_flops, b.conv_dilated_flops);
  EXPECT_EQ(a.cold_bandwidth, b.cold_bandwidth);
  EXPECT_EQ(a.window_read_ns, b.window_read_ns);
  EXPECT_EQ(a.transcendental_ns, b.transcendental_ns);
  EXPECT_EQ(a.strided_broadcast_ns, b.strided_broadcast_ns);
  EXPECT_EQ(a.gemm8_flops, b.gemm8_flops);
  EXPECT_EQ(a.gemm32_flops, b.gemm32_flops);
  EXPECT_EQ(a.gemm128_flops, b.gemm128_flops);
  EXPECT_EQ(a.gemm8k_flops, b.gemm8k_flops);
  EXPECT_EQ(a.fused_op_ns, b.fused_op_ns);
  EXPECT_EQ(a.gemm128_narrow_flops, b.gemm128_narrow_flops);
  EXPECT_EQ(a.gemm8k_narrow_flops, b.gemm8k_narrow_flops);
  EXPECT_EQ(a.gemm128k_flops, b.gemm128k_flops);
  EXPECT_EQ(a.gemm8t_flops, b.gemm8t_flops);
  EXPECT_EQ(a.gemm32t_narrow_flops, b.gemm32t_narrow_flops);
  EXPECT_EQ(a.cold_kernel_overhead_ns, b.cold_kernel_overhead_ns);
  EXPECT_EQ(a.reduce_read_ns, b.reduce_read_ns);
  EXPECT_EQ(a.chip_spread_ns, b.chip_spread_ns);
  EXPECT_EQ(a.host_stall_per_s, b.host_stall_per_s);
  EXPECT_EQ(a.host_stall_mean_ns, b.host_stall_mean_ns);
  EXPECT_EQ(a.beside_compute, b.beside_compute);
  EXPECT_EQ(a.beside_memory, b.beside_memory);
}

TEST(CpuCalibration, MeasuresCachesAndReusesPerMachine) {
  const std::string cache = TempPath("cache");
  std::remove(cache.c_str());
  auto first = ResolveCpuCalibration("", cache, /*remeasure=*/false, Small());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, "measured");
  EXPECT_EQ(first->path, cache);
  EXPECT_EQ(first->machine, MachineKey());
  EXPECT_GT(first->peak_flops, 0);
  EXPECT_GT(first->hbm_bandwidth, 0);
  EXPECT_GE(first->kernel_overhead_ns, 0);
  EXPECT_GT(first->measured_at_unix_s, 0);
  EXPECT_FALSE(first->rows.empty());
  // The op classes, each through the runtime's kernel (a strided broadcast
  // may cost nothing over a plain one: >= 0).
  EXPECT_GT(first->ops.conv_flops, 0);
  EXPECT_GT(first->ops.conv_dilated_flops, 0);
  EXPECT_GT(first->ops.cold_bandwidth, 0);
  EXPECT_GT(first->ops.window_read_ns, 0);
  EXPECT_GT(first->ops.transcendental_ns, 0);
  EXPECT_GE(first->ops.strided_broadcast_ns, 0);
  EXPECT_GT(first->ops.gemm8_flops, 0);
  EXPECT_GT(first->ops.gemm32_flops, 0);
  EXPECT_GT(first->ops.gemm128_flops, 0);
  EXPECT_GT(first->ops.gemm8k_flops, 0);
  EXPECT_GT(first->ops.gemm32k_flops, 0);
  EXPECT_GT(first->ops.gemm128k_flops, 0);
  EXPECT_GT(first->ops.gemm8_narrow_flops, 0);
  EXPECT_GT(first->ops.gemm128k_narrow_flops, 0);
  EXPECT_GE(first->ops.cold_kernel_overhead_ns, 0);
  EXPECT_GT(first->ops.reduce_read_ns, 0);
  EXPECT_GE(first->ops.fused_op_ns, 0);  // ten more ops per element never cost less (clamped at 0)
  // Chips sharing the cores never finish a segment at the same instant.
  EXPECT_GT(first->ops.chip_spread_ns, 0);
  // The host's stalls: counted, perhaps none in 0.05 s (then no length either).
  EXPECT_GE(first->ops.host_stall_per_s, 0);
  EXPECT_EQ(first->ops.host_stall_per_s > 0, first->ops.host_stall_mean_ns > 0);
  if (std::thread::hardware_concurrency() >
      1) {  // the same kernels beside the other cores' chips, over alone
    EXPECT_GT(first->ops.beside_compute, 0);
    EXPECT_GT(first->ops.beside_memory, 0);
  }
  // The executor's collectives, each kind at the plan's points (the quick plan's first two), the rest not
  // measured.
  for (int k = 0; k < compiler::kMeasuredCollectiveKinds; ++k) {
    EXPECT_GT(first->collectives[k][0], 0) << k;
    EXPECT_GE(first->collectives[k][1], first->collectives[k][0]) << "more traffic never takes less time";
    EXPECT_EQ(first->collectives[k][2], 0) << k;
  }
  for (const char* table : {"convolution", "cold stream", "reduce_window", "transcendentals", "broadcast",
                            "skinny GEMM", "small kernels", "reduce (sum", "chip spread", "collectives (",
                            "fused loop of 2 ops", "beside a busy core", "host stalls (every core working"})
    EXPECT_TRUE(std::any_of(first->rows.begin(), first->rows.end(),
                            [&](const std::string& r) { return r.find(table) != std::string::npos; }))
        << table;
  // The second resolution reads the cache: the same values, said to come from it.
  auto second = ResolveCpuCalibration("", cache, false, Small());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->source, "cache");
  EXPECT_EQ(second->peak_flops, first->peak_flops);
  EXPECT_EQ(second->gang_peak_flops, first->gang_peak_flops);
  EXPECT_EQ(second->hbm_bandwidth, first->hbm_bandwidth);
  EXPECT_EQ(second->kernel_overhead_ns, first->kernel_overhead_ns);
  EXPECT_EQ(second->measured_at_unix_s, first->measured_at_unix_s);
  ExpectSameFigures(second->ops, first->ops);
  EXPECT_EQ(second->collectives, first->collectives);
  EXPECT_NE(second->Describe().find("read from the cache " + cache), std::string::npos) << second->Describe();
  EXPECT_NE(second->Describe().find("the executor's, measured"), std::string::npos) << second->Describe();
  // Asked to measure again: a new measurement replaces the entry.
  auto again = ResolveCpuCalibration("", cache, /*remeasure=*/true, Small());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source, "measured");
  auto reread = ReadCpuProfileFile(cache);
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->peak_flops, again->peak_flops);
  // The profile carries the four values; the rest are derived from them.
  const compiler::ChipProfile p = again->Profile();
  EXPECT_EQ(p.name, "cpu");
  EXPECT_EQ(p.peak_flops, again->peak_flops);
  EXPECT_EQ(p.link_bandwidth, again->hbm_bandwidth);
  EXPECT_EQ(p.link_latency_ns, again->kernel_overhead_ns);
  EXPECT_EQ(p.conv_flops, again->ops.conv_flops);
  EXPECT_EQ(p.cold_bandwidth, again->ops.cold_bandwidth);
  EXPECT_EQ(p.window_read_ns, again->ops.window_read_ns);
  EXPECT_EQ(p.transcendental_ns, again->ops.transcendental_ns);
  EXPECT_EQ(p.strided_broadcast_ns, again->ops.strided_broadcast_ns);
  EXPECT_EQ(p.gemm8_flops, again->ops.gemm8_flops);
  EXPECT_EQ(p.cold_kernel_overhead_ns, again->ops.cold_kernel_overhead_ns);
  EXPECT_EQ(p.reduce_read_ns, again->ops.reduce_read_ns);
  EXPECT_EQ(p.chip_spread_ns, again->ops.chip_spread_ns);
  EXPECT_EQ(p.beside_compute, again->ops.beside_compute);
  EXPECT_EQ(p.gemm_narrow_flops[2], again->ops.gemm128_narrow_flops);
  EXPECT_EQ(p.gemm_narrow_flops[3], again->ops.gemm8k_narrow_flops);
  EXPECT_EQ(p.collective_ns, again->collectives);
  EXPECT_NE(again->ProvenanceJson().find("\"conv_flops\""), std::string::npos) << again->ProvenanceJson();
  EXPECT_NE(again->ProvenanceJson().find("\"collective_ns\""), std::string::npos) << again->ProvenanceJson();
  std::remove(cache.c_str());
}

TEST(CpuCalibration, ADamagedCacheIsMeasuredAgain) {
  const std::string cache = TempPath("damaged");
  std::ofstream(cache) << "{\"format\": 1, \"peak_flops\": \"fast\"}";
  auto c = ResolveCpuCalibration("", cache, false, Small());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "measured");
  EXPECT_TRUE(ReadCpuProfileFile(cache).ok());
  std::remove(cache.c_str());
}

TEST(CpuCalibration, AnOlderCacheEntryIsMeasuredAgainAnOlderPinnedFileLoadsWithoutFigures) {
  // Format 1 (before the op-class figures): the cache measures again, with them.
  const std::string cache = TempPath("format1");
  const std::string old = R"({"format": 1, "peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
                              "kernel_overhead_ns": 1500, "measured_at_unix_s": 1764000000})";
  std::ofstream(cache) << old;
  auto c = ResolveCpuCalibration("", cache, false, Small());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "measured");
  EXPECT_GT(c->ops.conv_flops, 0);
  auto rewritten = ReadCpuProfileFile(cache);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_EQ(rewritten->format, 7);
  ExpectSameFigures(rewritten->ops, c->ops);
  // Pinned, the same file is used as it is: no figures, the plain roofline, said so.
  std::ofstream(cache) << old;
  auto pinned = ResolveCpuCalibration(cache, TempPath("unused"), false, Small());
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->source, "file");
  EXPECT_EQ(pinned->Profile().conv_flops, 0);
  EXPECT_EQ(pinned->Profile().gemm8_flops, 0);
  EXPECT_NE(pinned->Describe().find("no op-class figures"), std::string::npos) << pinned->Describe();
  std::remove(cache.c_str());
}

TEST(CpuCalibration, AFormat2CacheEntryIsMeasuredAgainForTheChipSpread) {
  // Format 2 had the op-class figures but no small-kernel, reduce or spread
  // figures: the cache measures again; pinned, it loads without them (no
  // wait at collectives) and says so.
  const std::string cache = TempPath("format2");
  const std::string old = R"({"format": 2, "peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "conv_flops": 2e10, "cold_bandwidth": 8e9, "measured_at_unix_s": 1764000000})";
  std::ofstream(cache) << old;
  auto c = ResolveCpuCalibration("", cache, false, Small());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "measured");
  EXPECT_GT(c->ops.chip_spread_ns, 0);
  std::ofstream(cache) << old;
  auto pinned = ResolveCpuCalibration(cache, TempPath("unused"), false, Small());
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->Profile().chip_spread_ns, 0);
  EXPECT_FALSE(pinned->Profile().ForSharedCores(8, 2).chip_waits);
  EXPECT_NE(pinned->Describe().find("no wait at collectives"), std::string::npos) << pinned->Describe();
  std::remove(cache.c_str());
}

TEST(CpuCalibration, AFormat3CacheEntryIsMeasuredAgainForTheCollectives) {
  // Format 3 had no measured collectives: the cache measures again; pinned,
  // it loads and prices collectives at the cold stream, said so.
  const std::string cache = TempPath("format3");
  const std::string old = R"({"format": 3, "peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "conv_flops": 2e10, "cold_bandwidth": 8e9, "chip_spread_ns": 5000,
      "measured_at_unix_s": 1764000000})";
  std::ofstream(cache) << old;
  auto c = ResolveCpuCalibration("", cache, false, Small());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "measured");
  EXPECT_GT(c->collectives[0][0], 0);
  std::ofstream(cache) << old;
  auto pinned = ResolveCpuCalibration(cache, TempPath("unused"), false, Small());
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->Profile().collective_ns[0][0], 0);
  EXPECT_NE(pinned->Describe().find("collectives not measured"), std::string::npos) << pinned->Describe();
  // Measured collectives that are not four numbers per kind are named.
  std::ofstream(cache) << R"({"format": 4, "peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "collective_ns": {"all_reduce": [1, 2, 3]}})";
  auto bad = ResolveCpuCalibration(cache, TempPath("unused"), false, Small());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'collective_ns' needs 'all_reduce' as 4 numbers"), std::string::npos)
      << bad.status();
  std::remove(cache.c_str());
}

TEST(CpuCalibration, EachFigureIsTheMedianOfItsPasses) {
  CalibrationPlan plan = Small();
  plan.passes = 3;
  const CpuCalibration c = MeasureCpu(plan);
  for (const char* pass : {"pass 1 of 3", "pass 2 of 3", "pass 3 of 3", "the figures of each pass"})
    EXPECT_TRUE(std::any_of(c.rows.begin(), c.rows.end(), [&](const std::string& r) {
      return r == pass || r.rfind(pass, 0) == 0;
    })) << pass;
  // The GEMM row: each pass's figure, then the profile's, their median.
  auto row = std::find_if(c.rows.begin(), c.rows.end(),
                          [](const std::string& r) { return r.find("GEMM, one core") != std::string::npos; });
  ASSERT_NE(row, c.rows.end());
  double a = 0, b = 0, d = 0, kept = 0;
  ASSERT_EQ(std::sscanf(row->c_str(), " GEMM, one core %lf %lf %lf -> %lf", &a, &b, &d, &kept), 4) << *row;
  EXPECT_EQ(kept, std::max(std::min(a, b), std::min(std::max(a, b), d))) << *row;
  EXPECT_NEAR(c.peak_flops / 1e9, kept, 0.006);
}

// A cache entry whose passes have GEMM peaks 1..n GFLOP/s, the newest last,
// a minute apart up to `newest_age_s` ago; `machine` as MachineKey() says.
void WriteEntryWithPasses(const std::string& path, int n, int64_t newest_age_s, const std::string& machine) {
  CpuCalibration c;
  c.peak_flops = 1e9;
  c.hbm_bandwidth = 1e10;
  c.machine = machine;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  c.measured_at_unix_s = now - newest_age_s;
  for (int k = 1; k <= n; ++k) {
    CpuCalibration p;
    p.peak_flops = k * 1e9;
    p.hbm_bandwidth = 1e10;
    p.ops.conv_flops = k * 1e9;
    p.measured_at_unix_s = now - newest_age_s - 60 * (n - k);
    p.probe_before = p.probe_after = Probe(1);  // Small()'s speed
    c.passes.push_back(p);
  }
  ASSERT_TRUE(WriteCpuProfileFile(path, c).ok());
}

// A cache entry of this machine whose passes ran at the speeds given (each
// probed before and after), a minute apart, the newest last; pass k has
// GEMM and convolution figures of k GFLOP/s.
void WriteEntryAtSpeeds(const std::string& path, const std::vector<std::pair<double, double>>& before_after) {
  CpuCalibration c;
  c.peak_flops = 1e9;
  c.hbm_bandwidth = 1e10;
  c.machine = MachineKey();
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  c.measured_at_unix_s = now - 10;
  const int n = static_cast<int>(before_after.size());
  for (int k = 1; k <= n; ++k) {
    CpuCalibration p;
    p.peak_flops = k * 1e9;
    p.hbm_bandwidth = 1e10;
    p.ops.conv_flops = k * 1e9;
    p.measured_at_unix_s = now - 10 - 60 * (n - k);
    p.probe_before = Probe(before_after[k - 1].first);
    p.probe_after = Probe(before_after[k - 1].second);
    c.passes.push_back(p);
  }
  ASSERT_TRUE(WriteCpuProfileFile(path, c).ok());
}

TEST(SpeedProbe, DistanceMidpointAndItsJson) {
  EXPECT_NEAR(Probe(1).DistanceTo(Probe(2)), std::log(2.0), 1e-12);
  EXPECT_EQ(Probe(1.5).DistanceTo(Probe(1.5)), 0);
  SpeedProbe mixed = Probe(1);
  mixed.stream_bytes *= 1.5;  // one figure of four moved by 50%
  EXPECT_NEAR(mixed.DistanceTo(Probe(1)), std::log(1.5) / 4, 1e-12);
  EXPECT_TRUE(std::isinf(SpeedProbe().DistanceTo(Probe(1))));
  const SpeedProbe mid = SpeedProbe::Midpoint(Probe(1), Probe(4));
  EXPECT_NEAR(mid.gemm_flops, Probe(2).gemm_flops, 1);
  EXPECT_NEAR(mid.exp_ns, Probe(2).exp_ns, 1e-12);
  EXPECT_EQ(SpeedProbe::Midpoint(SpeedProbe(), Probe(3)).gemm_flops, Probe(3).gemm_flops);
  SpeedProbe back;
  ASSERT_TRUE(SpeedProbe::FromJson(Probe(1.25).Json(), &back));
  EXPECT_EQ(back.DistanceTo(Probe(1.25)), 0);
  EXPECT_EQ(back.measured_at_unix_s, 1764000000);
  for (const char* bad : {"", "[]", "{\"gemm_flops\": 1}", R"({"gemm_flops": 1, "stream_bytes": 1, "exp_ns": 0, "reduce_ns": 1})",
                          R"({"gemm_flops": "fast", "stream_bytes": 1, "exp_ns": 1, "reduce_ns": 1})"})
    EXPECT_FALSE(SpeedProbe::FromJson(bad, &back)) << bad;
  EXPECT_EQ(back.DistanceTo(Probe(1.25)), 0) << "a failed read leaves the probe as it was";
  EXPECT_EQ(Probe(2).RatiosTo(Probe(1)), "GEMM 2.00x, stream 2.00x, exp 2.00x, reduce 2.00x as fast");
  for (const char* absurd : {R"({"gemm_flops": 1e300, "stream_bytes": 2e10, "exp_ns": 3, "reduce_ns": 0.2})",
                             R"({"gemm_flops": 1e11, "stream_bytes": 2e10, "exp_ns": 1e9, "reduce_ns": 0.2})"})
    EXPECT_FALSE(SpeedProbe::FromJson(absurd, &back)) << absurd;
}

TEST(SpeedProbe, MeasuresTheMachine) {
  const SpeedProbe p = MeasureSpeedProbe(3);
  EXPECT_TRUE(p.measured()) << p.Describe();
  EXPECT_GT(p.measured_at_unix_s, 0);
}

TEST(CpuCalibration, ARunUsesThePassesMeasuredAtTheMachinesSpeedNow) {
  // Passes 1-3 ran at speed 1, 4-6 at speed 2 (a machine twice as fast for a
  // stretch), pass 7 straddled both (probed at 1 before, 2 after).
  const std::string cache = TempPath("speeds");
  WriteEntryAtSpeeds(cache, {{1, 1}, {1, 1.05}, {1, 1}, {2, 2}, {2, 2.1}, {2, 2}, {1, 2}});
  CalibrationPlan plan = Small();
  plan.probe = [] { return Probe(2.05); };
  auto fast = ResolveCpuCalibration("", cache, /*remeasure=*/false, plan);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_EQ(fast->source, "cache");
  EXPECT_EQ(fast->used, (std::vector<int>{5, 4, 3})) << "speed 2's passes, newest first; never the straddler";
  EXPECT_EQ(fast->peak_flops, 5e9);
  EXPECT_EQ(fast->ops.conv_flops, 5e9);
  EXPECT_EQ(fast->passes.size(), 7u) << "the entry keeps every speed's";
  EXPECT_EQ(fast->speed.DistanceTo(Probe(2.05)), 0);
  EXPECT_NE(fast->Describe().find("3 of the 7 kept passes ran at the machine's speed now"), std::string::npos)
      << fast->Describe();
  EXPECT_NE(fast->Describe().find("median of 3 passes"), std::string::npos) << fast->Describe();
  EXPECT_NE(fast->ProvenanceJson().find("\"speed\":{"), std::string::npos) << fast->ProvenanceJson();
  EXPECT_NE(fast->ProvenanceJson().find("\"passes_used\":3"), std::string::npos) << fast->ProvenanceJson();
  plan.probe = [] { return Probe(0.97); };
  auto slow = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->source, "cache");
  EXPECT_EQ(slow->used, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(slow->peak_flops, 2e9);
  // A recorded run's speed instead of the machine's now (run --simulate --calibrate-from).
  plan.at_speed = Probe(2);
  auto theirs = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(theirs->peak_flops, 5e9);
  EXPECT_NE(theirs->Describe().find("ran at the recorded run's speed"), std::string::npos) << theirs->Describe();
  // ... one pass at it will do (a measurement now would be at the machine's
  // speed now); none: the nearest passes, said so, and nothing is measured.
  plan.at_speed = Probe(1.5);
  plan.probe = [] { return Probe(1.5); };
  WriteEntryAtSpeeds(cache, {{1, 1}, {1, 1.05}, {1, 1}, {2, 2}, {2, 2.1}, {1.5, 1.5}, {1, 2}});
  auto one = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->source, "cache");
  EXPECT_EQ(one->used, (std::vector<int>{5}));
  plan.at_speed = Probe(3);
  auto none = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->source, "cache") << "not measured: the machine now is not the run then";
  EXPECT_EQ(none->used.size(), 3u);
  EXPECT_EQ(none->peak_flops, 5e9) << "the three nearest: speed 2's";
  EXPECT_NE(none->Describe().find("no kept pass ran within 13% of the recorded run's speed"), std::string::npos)
      << none->Describe();
  EXPECT_NE(none->Describe().find("(its speed against the nearest's: GEMM 1.46x"), std::string::npos)
      << none->Describe();
  WriteEntryAtSpeeds(cache, {{1, 1}, {1, 1.05}, {1, 1}, {2, 2}, {2, 2.1}, {2, 2}, {1, 2}});
  // ... a run whose speed moved while it ran: the newest passes, any speed, and why.
  plan.at_speed = SpeedProbe();
  plan.any_speed = "it moved";
  plan.history = 4;
  auto any = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->used, (std::vector<int>{3, 4, 5, 6}));
  EXPECT_EQ(any->peak_flops, 5.5e9);
  EXPECT_NE(any->Describe().find("no kept pass ran at its speeds: the newest 4 of the 7 kept, of any speed: it moved"),
            std::string::npos)
      << any->Describe();
  // ... its two speeds given: as many passes at each.
  plan.mixed = {Probe(1), Probe(2)};
  auto both = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->used, (std::vector<int>{1, 2, 4, 5}));
  EXPECT_EQ(both->peak_flops, 4e9);
  EXPECT_NE(both->Describe().find("4 of the 7 kept passes (2 at its start's speed, 2 at its end's): it moved"),
            std::string::npos)
      << both->Describe();
  std::remove(cache.c_str());
}

TEST(CpuCalibration, AtASpeedNoKeptPassRanAtTheMachineIsMeasuredAgain) {
  const std::string cache = TempPath("moved");
  WriteEntryAtSpeeds(cache, {{1, 1}, {1, 1}, {1, 1}, {1, 1}});
  CalibrationPlan plan = Small();  // measures at speed 1 ...
  plan.probe = [] { return Probe(1.6); };  // ... but the machine runs at 1.6 now
  auto c = ResolveCpuCalibration("", cache, /*remeasure=*/false, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "measured");
  EXPECT_NE(c->Describe().find("the machine's speed now"), std::string::npos) << c->Describe();
  EXPECT_NE(c->Describe().find("is not that of the cache entry's passes (0 of 4 within 13%; against the "
                               "nearest's: GEMM 1.60x, stream 1.60x, exp 1.60x, reduce 1.60x as fast); 1 pass for the "
                               "machine's speed now"),
            std::string::npos)
      << c->Describe();
  // The new pass (its probes at 1.6) alone makes the figures; the entry keeps all five.
  EXPECT_EQ(c->used, (std::vector<int>{4}));
  EXPECT_GT(c->peak_flops, 5e9) << "measured, not the entry's";
  auto reread = ReadCpuProfileFile(cache);
  ASSERT_TRUE(reread.ok()) << reread.status();
  ASSERT_EQ(reread->passes.size(), 5u);
  EXPECT_EQ(reread->passes[4].probe_after.DistanceTo(Probe(1.6)), 0);
  EXPECT_TRUE(reread->passes[4].Steady());
  // Fewer than three at the speed now (and the entry holds more): measured again too.
  WriteEntryAtSpeeds(cache, {{1, 1}, {1, 1}, {1.6, 1.6}, {1, 1}});
  c = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "measured");
  EXPECT_EQ(c->used, (std::vector<int>{2, 4})) << "the one earlier pass at 1.6 joins the new one";
  EXPECT_EQ(c->earlier_passes, 1);
  // Only the passes missing at the speed now are measured (one at 1.6 kept: two more).
  WriteEntryAtSpeeds(cache, {{1.6, 1.6}, {1, 1}, {1, 1}});
  plan.passes = 3;
  c = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->used, (std::vector<int>{0, 3, 4}));
  EXPECT_NE(c->Describe().find("3 passes for the machine's speed now"), std::string::npos) << c->Describe();
  EXPECT_NE(c->Describe().find("2 of the 2 measured now, 1 of 3 earlier ones"), std::string::npos) << c->Describe();
  plan.passes = 1;
  // The entry keeps at most plan.kept passes, the newest (and the ones used).
  WriteEntryAtSpeeds(cache, {{1.6, 1.6}, {1, 1}, {1, 1}, {1, 1}, {1, 1}});
  plan.kept = 3;
  plan.min_at_speed = 2;
  c = ResolveCpuCalibration("", cache, false, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->passes.size(), 4u) << "the oldest, used, and the newest three";
  EXPECT_EQ(c->passes[0].peak_flops, 1e9);
  EXPECT_EQ(c->passes[1].peak_flops, 4e9);
  EXPECT_EQ(c->used, (std::vector<int>{0, 3}));
  std::remove(cache.c_str());
}

TEST(CpuCalibration, PassesTheSpeedMovedUnderAreSetAsideAndSaidSo) {
  // Three earlier passes at speed 2; the machine moves from 1 to 2 under the new pass.
  const std::string cache = TempPath("set_aside");
  WriteEntryAtSpeeds(cache, {{2, 2}, {2, 2}, {2, 2}});
  CalibrationPlan plan = Small();
  auto calls = std::make_shared<int>(0);
  plan.probe = [calls] { return Probe((*calls)++ % 2 == 0 ? 1 : 2); };
  auto c = ResolveCpuCalibration("", cache, /*remeasure=*/true, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->used, (std::vector<int>{0, 1, 2})) << "the new pass is not one speed's";
  EXPECT_EQ(c->peak_flops, 2e9);
  EXPECT_NE(c->Describe().find("0 of the 1 measured now (1 set aside"), std::string::npos) << c->Describe();
  EXPECT_TRUE(std::any_of(c->rows.begin(), c->rows.end(), [](const std::string& r) {
    return r == "(the pass below is set aside: the machine changed speed while it ran)";
  }));
  EXPECT_GT(c->measured_at_unix_s, c->passes[2].measured_at_unix_s) << "measured now, though set aside";
  EXPECT_EQ(c->gang_width, c->passes[3].gang_width) << "this machine's, not a kept pass's default";
  // --fresh: this calibration's passes alone; none held a speed: the nearest, said so.
  plan.history = plan.kept = 0;
  c = ResolveCpuCalibration("", cache, true, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->passes.size(), 1u);
  EXPECT_EQ(c->used, (std::vector<int>{0}));
  EXPECT_NE(c->Describe().find("no pass held that speed within 13%: the 1 nearest"), std::string::npos)
      << c->Describe();
  std::remove(cache.c_str());
}

TEST(CpuCalibration, ARecordedRunWhoseSpeedMovedUsesEverySpeed) {
  CalibrationPlan plan;
  ChoosePassesFor(Probe(1), Probe(1.05), &plan);
  EXPECT_TRUE(plan.any_speed.empty());
  EXPECT_LT(plan.at_speed.DistanceTo(SpeedProbe::Midpoint(Probe(1), Probe(1.05))), 1e-12);
  ChoosePassesFor(Probe(1), SpeedProbe(), &plan);  // no probe at its end: its start's
  EXPECT_EQ(plan.at_speed.DistanceTo(Probe(1)), 0);
  ChoosePassesFor(Probe(1), Probe(1.5), &plan);
  EXPECT_FALSE(plan.at_speed.measured());
  EXPECT_NE(plan.any_speed.find("changed speed while it ran"), std::string::npos) << plan.any_speed;
  EXPECT_NE(plan.any_speed.find("at its end GEMM 1.50x"), std::string::npos) << plan.any_speed;
  ChoosePassesFor(SpeedProbe(), Probe(1), &plan);  // none recorded (a fixed or pinned profile)
  EXPECT_FALSE(plan.at_speed.measured());
  EXPECT_TRUE(plan.any_speed.empty());
}

TEST(CpuCalibration, ACalibrationJoinsTheNewestEarlierPassesAndTakesTheMedianOfAll) {
  const std::string cache = TempPath("history");
  CalibrationPlan plan = Small();  // one pass a calibration
  plan.history = 4;
  // Five earlier passes (GEMM 1..5 GFLOP/s, far below any real one), all at
  // the speed of the new pass: the newest three join it, so the median is
  // between 4 and 5. The entry keeps all six.
  WriteEntryWithPasses(cache, 5, /*newest_age_s=*/10, MachineKey());
  auto c = ResolveCpuCalibration("", cache, /*remeasure=*/true, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->passes.size(), 6u);
  EXPECT_EQ(c->used, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(c->earlier_passes, 3);
  EXPECT_EQ(c->passes[2].peak_flops, 3e9);
  EXPECT_GT(c->passes[5].peak_flops, 5e9) << "the new pass, measured";
  EXPECT_EQ(c->peak_flops, 4.5e9);
  EXPECT_EQ(c->ops.conv_flops, MedianOf({3e9, 4e9, 5e9, c->passes[5].ops.conv_flops}));
  EXPECT_NE(c->Describe().find("median of 4 passes"), std::string::npos) << c->Describe();
  EXPECT_NE(c->Describe().find("3 of them from earlier calibrations"), std::string::npos) << c->Describe();
  EXPECT_NE(c->Describe().find("4 passes for the machine's speed now"), std::string::npos) << c->Describe();
  EXPECT_NE(c->Describe().find("1 of the 1 measured now, 3 of 5 earlier ones"), std::string::npos) << c->Describe();
  // The entry now holds those six, and the next calibration builds on them.
  auto reread = ReadCpuProfileFile(cache);
  ASSERT_TRUE(reread.ok()) << reread.status();
  ASSERT_EQ(reread->passes.size(), 6u);
  EXPECT_EQ(reread->passes[0].peak_flops, 1e9);
  EXPECT_EQ(reread->passes[5].peak_flops, c->passes[5].peak_flops);
  EXPECT_EQ(reread->passes[5].measured_at_unix_s, c->passes[5].measured_at_unix_s);
  EXPECT_EQ(reread->passes[5].probe_before.DistanceTo(Probe(1)), 0) << "each pass keeps its probes";
  EXPECT_EQ(reread->peak_flops, c->peak_flops);
  // Read back, the cache gives the same figures (the same four passes: the newest at the speed now).
  plan.min_at_speed = 1;
  auto cached = ResolveCpuCalibration("", cache, /*remeasure=*/false, plan);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->source, "cache");
  EXPECT_EQ(cached->peak_flops, c->peak_flops);

  // Passes older than the age limit, or of another machine, are dropped.
  WriteEntryWithPasses(cache, 5, /*newest_age_s=*/plan.history_max_age_s + 60, MachineKey());
  c = ResolveCpuCalibration("", cache, true, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->passes.size(), 1u);
  EXPECT_EQ(c->earlier_passes, 0);
  WriteEntryWithPasses(cache, 5, 10, "cpu=another machine");
  c = ResolveCpuCalibration("", cache, true, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->passes.size(), 1u);
  // --fresh (history and kept 0): this calibration's passes only.
  WriteEntryWithPasses(cache, 5, 10, MachineKey());
  plan.history = 0;
  plan.kept = 0;
  c = ResolveCpuCalibration("", cache, true, plan);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->passes.size(), 1u);
  EXPECT_EQ(c->peak_flops, c->passes[0].peak_flops);
  EXPECT_GT(c->peak_flops, 5e9);
  // A damaged pass in a pinned file is named; in the cache it is measured again.
  std::ofstream(cache) << R"({"format": 5, "peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "passes": [{"peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "measured_at_unix_s": 1764000000}, {"peak_flops": -1}]})";
  auto bad = ResolveCpuCalibration(cache, TempPath("unused"), false, Small());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("passes[1]: 'peak_flops' is -1"), std::string::npos) << bad.status();
  std::ofstream(cache) << R"({"format": 6, "peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "passes": [{"peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "measured_at_unix_s": 1764000000, "probe_before": {"gemm_flops": -1}}]})";
  bad = ResolveCpuCalibration(cache, TempPath("unused"), false, Small());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("passes[0]: 'probe_before' is not a speed probe"), std::string::npos)
      << bad.status();
  auto remeasured = ResolveCpuCalibration("", cache, false, Small());
  ASSERT_TRUE(remeasured.ok()) << remeasured.status();
  EXPECT_EQ(remeasured->source, "measured");
  std::remove(cache.c_str());
}

TEST(CpuCalibration, APinnedFileWithFiguresGivesThemToTheProfile) {
  const std::string file = TempPath("figures");
  std::ofstream(file) << R"({"format": 2, "peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "conv_flops": 2e10, "cold_bandwidth": 8e9, "window_read_ns": 1.5,
      "transcendental_ns": 4, "strided_broadcast_ns": 2.5, "gemm8_flops": 1e10, "gemm32_flops": 3e10,
      "gemm128_flops": 6e10, "cold_kernel_overhead_ns": 3000, "reduce_read_ns": 0.75, "chip_spread_ns": 5000})";
  auto c = ResolveCpuCalibration(file, TempPath("unused"), false, Small());
  ASSERT_TRUE(c.ok()) << c.status();
  const compiler::ChipProfile p = c->Profile();
  EXPECT_EQ(p.conv_flops, 2e10);
  EXPECT_EQ(p.cold_bandwidth, 8e9);
  EXPECT_EQ(p.window_read_ns, 1.5);
  EXPECT_EQ(p.transcendental_ns, 4);
  EXPECT_EQ(p.strided_broadcast_ns, 2.5);
  EXPECT_EQ(p.gemm8_flops, 1e10);
  EXPECT_EQ(p.gemm32_flops, 3e10);
  EXPECT_EQ(p.gemm128_flops, 6e10);
  EXPECT_EQ(p.cold_kernel_overhead_ns, 3000);
  EXPECT_EQ(p.reduce_read_ns, 0.75);
  EXPECT_EQ(p.chip_spread_ns, 5000);
  EXPECT_FALSE(p.cold_operands);
  EXPECT_FALSE(p.chip_waits);
  EXPECT_TRUE(p.ForSharedCores(8, 2).cold_operands);
  EXPECT_TRUE(p.ForSharedCores(8, 2).chip_waits);
  EXPECT_FALSE(p.ForSharedCores(2, 2).chip_waits) << "a chip per core: nothing time-shares";
  EXPECT_NE(c->Describe().find("convolution 20.0 GFLOP/s"), std::string::npos) << c->Describe();
  // A figure that is not a number is named.
  std::ofstream(file) << R"({"peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
      "kernel_overhead_ns": 1500, "conv_flops": "fast"})";
  auto bad = ResolveCpuCalibration(file, TempPath("unused"), false, Small());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'conv_flops' is not a number >= 0"), std::string::npos) << bad.status();
  std::remove(file.c_str());
}

TEST(CpuCalibration, APinWinsOverTheCache) {
  const std::string cache = TempPath("pinned_cache");
  std::remove(cache.c_str());
  auto fixed = ResolveCpuCalibration("fixed", cache, false, Small());
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->source, "fixed");
  EXPECT_EQ(fixed->Profile().peak_flops, compiler::FindProfile("cpu")->peak_flops);
  EXPECT_EQ(fixed->Profile().gang_peak_flops, compiler::FindProfile("cpu")->gang_peak_flops);
  EXPECT_EQ(fixed->Profile().kernel_overhead_ns, compiler::FindProfile("cpu")->kernel_overhead_ns);
  EXPECT_FALSE(std::ifstream(cache).good()) << "a pinned profile measures nothing";

  const std::string file = TempPath("pin");
  std::ofstream(file) << R"({"peak_flops": 1e11, "gang_peak_flops": 0, "hbm_bandwidth": 2e10,
                             "kernel_overhead_ns": 1500, "measured_at_unix_s": 1764000000})";
  auto pinned = ResolveCpuCalibration(file, cache, false, Small());
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->source, "file");
  EXPECT_EQ(pinned->Profile().peak_flops, 1e11);
  EXPECT_EQ(pinned->Profile().ForGangWidth(2).peak_flops, 1e11) << "no gang measured: the one-core peak stays";
  EXPECT_NE(pinned->ProvenanceJson().find("\"source\":\"file\""), std::string::npos) << pinned->ProvenanceJson();
  std::remove(file.c_str());
}

TEST(CpuCalibration, APinnedFileThatCannotBeReadIsAnErrorNamingIt) {
  const std::string file = TempPath("bad");
  auto expect_error = [&](const std::string& text, const std::string& problem) {
    std::ofstream(file) << text;
    auto c = ResolveCpuCalibration(file, TempPath("unused"), false, Small());
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(file), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find("SHARDSCOPE_CPU_PROFILE"), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find(problem), std::string::npos) << c.status();
  };
  expect_error("not json", "not a JSON object");
  expect_error(R"({"gang_peak_flops": 0, "hbm_bandwidth": 2e10, "kernel_overhead_ns": 1})", "'peak_flops' is missing");
  expect_error(R"({"peak_flops": -5, "gang_peak_flops": 0, "hbm_bandwidth": 2e10, "kernel_overhead_ns": 1})",
               "'peak_flops' is -5, not a positive number");
  expect_error(R"({"format": 99, "peak_flops": 1, "gang_peak_flops": 0, "hbm_bandwidth": 1, "kernel_overhead_ns": 1})",
               "format 99");
  std::remove(file.c_str());
  auto missing = ResolveCpuCalibration(file, TempPath("unused"), false, Small());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot be read"), std::string::npos) << missing.status();
}

TEST(CpuCalibration, TheCacheIsKeyedByMachine) {
  const std::string key = MachineKey();
  EXPECT_NE(key.find("cores="), std::string::npos) << key;
  EXPECT_NE(key.find("host="), std::string::npos) << key;
  EXPECT_NE(key.find("gemm="), std::string::npos) << key;
  setenv("XDG_CACHE_HOME", "/some/cache", 1);
  EXPECT_EQ(CpuProfileCachePath().rfind("/some/cache/shardscope/cpu-profile-", 0), 0u) << CpuProfileCachePath();
  // OPENBLAS_CORETYPE halves or doubles the GEMM peak: another entry.
  const std::string before = CpuProfileCachePath();
  setenv("OPENBLAS_CORETYPE", "SomethingElse", 1);
  EXPECT_NE(CpuProfileCachePath(), before);
}

TEST(CpuCalibration, TestsArePinnedToTheFixedProfile) {
  // tests/pin_cpu_profile.cc: no test process calibrates, goldens hold.
  const char* pin = std::getenv("SHARDSCOPE_CPU_PROFILE");
  ASSERT_NE(pin, nullptr);
  auto p = ResolveProfile("cpu");
  ASSERT_TRUE(p.ok()) << p.status();
  if (std::string(pin) == "fixed") {
    EXPECT_EQ(p->peak_flops, compiler::FindProfile("cpu")->peak_flops);
  }
}

}  // namespace
}  // namespace shardscope::runtime
