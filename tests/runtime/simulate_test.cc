// Simulated mode's pieces (runtime/simulate.h, profiler/trace/sim_program.h):
// the compact schedule places ops exactly as the Scheduler does, jitter is
// seeded, and collectives are priced per link by ring, tree and per-dimension
// torus algorithms, shared and faulted links included (runtime_simulate_test).
#include "runtime/simulate.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>

#include "profiler/trace/sim_program.h"
#include "runtime/scheduler.h"

namespace shardscope::runtime {
namespace {

using compiler::CollectiveKind;

compiler::CostModel Model() { return compiler::CostModel(*compiler::FindProfile("tpu-v4")); }

// A program of 3 chips: a kernel, an all-reduce over {0,1} and {2}, a kernel,
// an all-reduce over all three; chip 1 twice as slow.
trace::SimProgram ThreeChipProgram() {
  trace::SimProgram p;
  p.graph_id = 7;
  p.group_sets = {{{0, 1}, {2}}, {{0, 1, 2}}};
  p.collectives.push_back({0, "ring", {100, 0}, {}});
  p.collectives.push_back({1, "ring", {50}, {}});
  p.ops.push_back({"a", 0, trace::SliceKind::kCompute, 1, 1000, -1, -1, 0});
  p.ops.push_back({"ar1", 0, trace::SliceKind::kCollective, 2, 0, 0, 0, 64});
  p.ops.push_back({"b", 0, trace::SliceKind::kCompute, 3, 300, -1, -1, 0});
  p.ops.push_back({"ar2", 0, trace::SliceKind::kCollective, 4, 0, 1, 1, 64});
  p.num_collective_ops = 2;
  p.BuildIndex(3);
  return p;
}

TEST(SimSchedule, PlacesOpsAsTheSchedulerDoes) {
  trace::SimProgram p = ThreeChipProgram();
  std::vector<trace::SimChip> chips(3);
  chips[1].time_scale = 2;
  trace::SimRun run;
  run.step = 4;
  run.start_ns = {0, 10, 0};
  ASSERT_TRUE(trace::SimSchedule(p, chips, &run).ok());

  // The same run through the Scheduler, from per-device op lists.
  ScheduleInput in;
  in.step = 4;
  in.per_device.resize(3);
  for (int d = 0; d < 3; ++d) {
    const double s = chips[d].time_scale;
    in.per_device[d].push_back({1, "a", trace::SliceKind::kCompute, static_cast<int64_t>(1000 * s), -1, 0});
    in.per_device[d].push_back({2, "ar1", trace::SliceKind::kCollective, 0, 0, 64});
    in.per_device[d].push_back({3, "b", trace::SliceKind::kCompute, static_cast<int64_t>(300 * s), -1, 0});
    in.per_device[d].push_back({4, "ar2", trace::SliceKind::kCollective, 0, 1, 64});
  }
  in.collectives.push_back({{{0, 1}, {2}}, {100, 0}});
  in.collectives.push_back({{{0, 1, 2}}, {50}});
  Scheduler sched(trace::Clock::kModeled, {1, 2, 3});
  // Chip 1 starts at 10: let the Scheduler find it busy until then.
  ScheduleInput warm;
  warm.per_device.resize(3);
  warm.per_device[1].push_back({0, "w", trace::SliceKind::kCompute, 10, -1, 0});
  ASSERT_TRUE(sched.Schedule(warm).ok());
  auto spans = sched.Schedule(in);
  ASSERT_TRUE(spans.ok()) << spans.status();
  for (int d = 0; d < 3; ++d) EXPECT_EQ(run.end_ns[d], (*spans)[d].end_ns) << "chip " << d;
  // Chip 1 arrives last at ar1 (10 + 2000): the group {0,1} ends at 2110.
  EXPECT_EQ(run.collective_end_ns[0][0], 2110);
  EXPECT_EQ(run.collective_end_ns[0][1], 1000);  // chip 2 alone
  // ar2 waits for chip 1 (2110 + 600) and lasts 50.
  EXPECT_EQ(run.end_ns[0], 2760);
  EXPECT_EQ(run.end_ns[2], 2760);

  // Chip 0's slices: its wait in ar1 is chip 1's lateness.
  std::vector<trace::SimSlice> slices;
  trace::SimChipSlices(1, p, chips[0], run, 0, &slices);
  ASSERT_EQ(slices.size(), 4u);
  EXPECT_EQ(slices[1].kind, trace::SliceKind::kCollective);
  EXPECT_EQ(slices[1].arrival_ns, 1000);
  EXPECT_EQ(slices[1].start_ns, 2010);
  EXPECT_EQ(slices[1].dur_ns, 100);
  EXPECT_EQ(slices[2].start_ns, 2110);
  // The slices of one collective group share a flow across chips; ids are unique.
  std::vector<trace::SimSlice> other;
  trace::SimChipSlices(1, p, chips[1], run, 1, &other);
  EXPECT_EQ(other[1].flow_id, slices[1].flow_id);
  EXPECT_NE(other[1].slice_id, slices[1].slice_id);
  EXPECT_NE(slices[0].slice_id, slices[1].slice_id);
}

TEST(SimSchedule, JitterIsSeededAndBounded) {
  trace::SimOp op{"k", 0, trace::SliceKind::kCompute, 1, 1'000'000, -1, -1, 0};
  trace::SimChip c{1, 0.05, 42};
  double sum = 0;
  int differ = 0;
  for (int k = 0; k < 2000; ++k) {
    const int64_t d = trace::SimOpDuration(op, c, 3, k % 7, k);
    EXPECT_GE(d, 950'000);
    EXPECT_LE(d, 1'050'000);
    EXPECT_EQ(d, trace::SimOpDuration(op, c, 3, k % 7, k));  // the same draw again
    trace::SimChip other = c;
    other.seed = 43;
    differ += trace::SimOpDuration(op, other, 3, k % 7, k) != d;
    sum += static_cast<double>(d);
  }
  EXPECT_NEAR(sum / 2000, 1'000'000, 3'000);  // mean of uniform [-5%, 5%] ~ 0
  EXPECT_GT(differ, 1900);
  // Transfers are not jittered, but a slow chip slows them.
  trace::SimOp t{"t", 0, trace::SliceKind::kTransfer, -1, 1000, -1, -1, 0};
  EXPECT_EQ(trace::SimOpDuration(t, c, 3, 0, 0), 1000);
  EXPECT_EQ(trace::SimOpDuration(t, trace::SimChip{2.5, 0, 0}, 3, 0, 0), 2500);
}

TEST(CollectivePricer, FullTorusAllReduceRunsPerDimension) {
  auto ic = Interconnect::Parse("4x4");
  ASSERT_TRUE(ic.ok());
  const compiler::CostModel model = Model();
  const auto& p = model.profile();
  CollectivePricer pricer(model, &*ic, FaultPlan());
  std::vector<int> all;
  for (int c = 0; c < 16; ++c) all.push_back(c);
  const int64_t bytes = 64 << 20;
  CollectivePrice price = pricer.Price(CollectiveKind::kAllReduce, bytes, all);
  EXPECT_EQ(price.algorithm, "torus");
  // Reduce-scatter along x (4 rings, 3 steps of B/4), along y (3 steps of
  // B/16), all-gather back: each ring's hops on links of their own.
  const double step1 = p.link_latency_ns + (bytes / 4.0) / p.link_bandwidth * 1e9;
  const double step2 = p.link_latency_ns + (bytes / 16.0) / p.link_bandwidth * 1e9;
  EXPECT_NEAR(price.dur_ns, 2 * 3 * (step1 + step2), 2);
  EXPECT_EQ(price.links.size(), ic->links().size());  // every link carried traffic
  // Half the torus is not a sub-grid of whole dimensions: a ring or a tree.
  EXPECT_NE(pricer.Price(CollectiveKind::kAllReduce, bytes, {0, 1, 2, 3, 4, 5, 6, 7}).algorithm, "torus");
  // A row of the torus (a line along y): a torus ring of 4 chips.
  CollectivePrice row = pricer.Price(CollectiveKind::kAllGather, bytes, {4, 5, 6, 7});
  EXPECT_NEAR(row.dur_ns, 3 * (p.link_latency_ns + (bytes / 4.0) / p.link_bandwidth * 1e9), 2);
  EXPECT_EQ(row.links.size(), 4u);
}

TEST(CollectivePricer, CpuCollectivesTakeTheExecutorsPassThroughMemory) {
  // The cpu profile's virtual chips run a collective as one thread's copies
  // (runtime/collectives.cc): an all-reduce of 8 reads 8 buffers, writes one,
  // copies it to the other 7 — (3n-1)B at the stream bandwidth.
  auto ic = Interconnect::Parse("2x4");
  ASSERT_TRUE(ic.ok());
  const compiler::CostModel model(*compiler::FindProfile("cpu"));
  const auto& p = model.profile();
  ASSERT_TRUE(p.collectives_in_memory);
  std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const int64_t bytes = 4 << 20;
  const double expected = p.kernel_overhead_ns + 23.0 * bytes / p.hbm_bandwidth * 1e9;
  EXPECT_NEAR(model.CollectiveNs(CollectiveKind::kAllReduce, bytes, 8), expected, 1);
  EXPECT_NEAR(model.CollectiveNs(CollectiveKind::kAllGather, bytes, 8),
              p.kernel_overhead_ns + 16.0 * bytes / p.hbm_bandwidth * 1e9, 1);
  CollectivePricer healthy(model, &*ic, FaultPlan());
  CollectivePrice a = healthy.Price(CollectiveKind::kAllReduce, bytes, all);
  EXPECT_EQ(a.algorithm, "memory");
  EXPECT_NEAR(a.dur_ns, expected, 1);
  ASSERT_FALSE(a.links.empty());  // the links still show the traffic, within the collective
  for (const trace::SimLinkUse& u : a.links) EXPECT_LE(u.busy_ns, a.dur_ns);
  // Two chips, one link that every algorithm uses: at a quarter of its
  // bandwidth it takes 4x the collective's time and holds it up.
  auto pair = Interconnect::Parse("2");
  ASSERT_TRUE(pair.ok());
  auto slow = ParseFault("link:0-1:0.25");
  ASSERT_TRUE(slow.ok());
  CollectivePricer one_healthy(model, &*pair, FaultPlan());
  CollectivePricer one_faulted(model, &*pair, FaultPlan({*slow}, 0));
  CollectivePrice h = one_healthy.Price(CollectiveKind::kAllReduce, bytes, {0, 1});
  CollectivePrice f = one_faulted.Price(CollectiveKind::kAllReduce, bytes, {0, 1});
  EXPECT_NEAR(h.dur_ns, model.CollectiveNs(CollectiveKind::kAllReduce, bytes, 2), 1);
  EXPECT_NEAR(f.dur_ns, 4.0 * h.dur_ns, 4);
  ASSERT_EQ(f.links.size(), 1u);
  EXPECT_EQ(f.links[0].busy_ns, f.dur_ns);
}

TEST(CollectivePricer, TwoTransfersOnOneLinkShareItsBandwidth) {
  auto ic = Interconnect::Parse("2");  // two chips, one link
  ASSERT_TRUE(ic.ok());
  const compiler::CostModel model = Model();
  const auto& p = model.profile();
  CollectivePricer pricer(model, &*ic, FaultPlan());
  const int64_t bytes = 8 << 20;
  // An all-gather of 2: one step, both chips send B/2 over the same link at once.
  CollectivePrice price = pricer.Price(CollectiveKind::kAllGather, bytes, {0, 1});
  EXPECT_NEAR(price.dur_ns, p.link_latency_ns + 2 * (bytes / 2.0) / p.link_bandwidth * 1e9, 2);
  ASSERT_EQ(price.links.size(), 1u);
  EXPECT_EQ(price.links[0].bytes, bytes);
}

TEST(CollectivePricer, SlowLinkHoldsTheCollectiveAndShowsItsTime) {
  auto ic = Interconnect::Parse("4x4");
  ASSERT_TRUE(ic.ok());
  const compiler::CostModel model = Model();
  auto slow = ParseFault("link:5-6:0.25");
  ASSERT_TRUE(slow.ok());
  CollectivePricer healthy(model, &*ic, FaultPlan());
  CollectivePricer faulted(model, &*ic, FaultPlan({*slow}, 0));
  std::vector<int> all;
  for (int c = 0; c < 16; ++c) all.push_back(c);
  const int64_t bytes = 64 << 20;
  CollectivePrice a = healthy.Price(CollectiveKind::kAllReduce, bytes, all);
  CollectivePrice b = faulted.Price(CollectiveKind::kAllReduce, bytes, all);
  EXPECT_GT(b.dur_ns, a.dur_ns * 1.5);
  // The slow link's time per byte is 4x its peers'; the others are unchanged.
  double slow_rate = 0, peer_rate = 0;
  for (const trace::SimLinkUse& u : b.links) {
    const double rate = static_cast<double>(u.busy_ns) / u.bytes;
    if (u.a == 5 && u.b == 6) slow_rate = rate;
    else if (u.a == 4 && u.b == 5) peer_rate = rate;
  }
  ASSERT_GT(peer_rate, 0);
  EXPECT_NEAR(slow_rate / peer_rate, 4, 0.01);
}

TEST(CollectivePricer, TreeWinsSmallAllReducesAndBroadcasts) {
  auto ic = Interconnect::Parse("gpu:4x4");
  ASSERT_TRUE(ic.ok());
  const compiler::CostModel model(*compiler::FindProfile("h100"));
  CollectivePricer pricer(model, &*ic, FaultPlan());
  std::vector<int> all;
  for (int c = 0; c < 16; ++c) all.push_back(c);
  // 64 bytes over 16 chips of 4 hosts: latency-bound; a tree's 2 log2(16)
  // rounds beat the ring's 30 steps, a third of which cross hosts.
  CollectivePrice small = pricer.Price(CollectiveKind::kAllReduce, 64, all);
  EXPECT_EQ(small.algorithm, "tree");
  CollectivePrice big = pricer.Price(CollectiveKind::kAllReduce, 256 << 20, all);
  EXPECT_EQ(big.algorithm, "ring");
  EXPECT_EQ(pricer.Price(CollectiveKind::kCollectiveBroadcast, 1 << 20, all).algorithm, "tree");
}

TEST(CollectivePricer, GpuClusterCrossesTheSlowerNetwork) {
  auto ic = Interconnect::Parse("gpu:2x4");
  ASSERT_TRUE(ic.ok());
  const compiler::CostModel model(*compiler::FindProfile("h100"));
  CollectivePricer pricer(model, &*ic, FaultPlan());
  const int64_t bytes = 64 << 20;
  CollectivePrice inside = pricer.Price(CollectiveKind::kAllReduce, bytes, {0, 1, 2, 3});
  CollectivePrice across = pricer.Price(CollectiveKind::kAllReduce, bytes, {0, 4});
  // Two chips over one rail: the dcn's bandwidth; four over NVLink: the ici's.
  EXPECT_GT(across.dur_ns, inside.dur_ns);
  ASSERT_FALSE(across.links.empty());
  EXPECT_EQ(across.links[0].a, 0);
  EXPECT_EQ(across.links[0].b, 4);
}

TEST(BuildSimProgram, ChipsSharingCoresWaitAtEachCollectiveForTheSlowest) {
  // 8 chips on 2 cores (cpu, chip spread measured): each collective lasts its
  // price plus the expected wait for the slowest of its chips after the
  // modeled work since the previous collective (CostModel::ChipWaitNs).
  compiler::Module m;
  auto* x = m.Parameter(Shape(DType::kF32, {256, 256}), "x");
  std::vector<int64_t> all8 = {0, 1, 2, 3, 4, 5, 6, 7};
  auto* ar1 = m.AllReduce(m.Unary(compiler::Opcode::kExponential, m.Unary(compiler::Opcode::kTanh, x)),
                          compiler::ReduceKind::kSum, {all8});
  auto* ar2 = m.AllReduce(m.Unary(compiler::Opcode::kTanh, ar1), compiler::ReduceKind::kSum, {all8});
  m.AddOutput(ar2);
  m.set_num_partitions(8);
  auto ic = Interconnect::Parse("2x4");
  ASSERT_TRUE(ic.ok());
  compiler::ChipProfile spread = *compiler::FindProfile("cpu");
  spread.chip_spread_ns = 1e4;
  auto collective_durs = [&](const compiler::ChipProfile& profile, std::vector<double>* segments) {
    const compiler::CostModel model(profile);
    CollectivePricer pricer(model, &*ic, FaultPlan());
    auto p = BuildSimProgram(1, m, nullptr, model.ProgramCosts(m), model, 8, pricer);
    EXPECT_TRUE(p.ok()) << p.status();
    std::vector<int64_t> durs;
    double since = 0;
    for (const trace::SimOp& op : p->ops) {
      if (op.collective < 0) {
        since += static_cast<double>(op.dur_ns);
        continue;
      }
      durs.push_back(p->collectives[op.collective].group_dur_ns[0]);
      if (segments) segments->push_back(since);
      since = 0;
    }
    return durs;
  };
  std::vector<double> segments;
  const compiler::ChipProfile shared = spread.ForSharedCores(8, 2);
  ASSERT_TRUE(shared.chip_waits);
  const std::vector<int64_t> waited = collective_durs(shared, &segments);
  compiler::ChipProfile no_spread = shared;
  no_spread.chip_waits = false;
  const std::vector<int64_t> priced = collective_durs(no_spread, nullptr);
  ASSERT_EQ(waited.size(), 2u);
  ASSERT_EQ(priced.size(), 2u);
  const compiler::CostModel model(shared);
  for (int k = 0; k < 2; ++k) {
    ASSERT_GT(segments[k], 0);
    EXPECT_EQ(waited[k] - priced[k], std::llround(model.ChipWaitNs(segments[k], 8))) << "collective " << k;
    EXPECT_GT(waited[k], priced[k]);
  }
  // Two kernels before the first collective, one before the second: the first waits longer.
  EXPECT_GT(waited[0] - priced[0], waited[1] - priced[1]);
  // A chip per core: no wait.
  EXPECT_EQ(collective_durs(spread.ForSharedCores(2, 2), nullptr), priced);
}

TEST(Simulator, FaultsBecomeChipDifferencesAndPreemptions) {
  auto ic = Interconnect::Parse("2x4");
  ASSERT_TRUE(ic.ok());
  Simulator sim(8, {0, 0, 0, 0, 1, 1, 1, 1}, &*ic);
  std::vector<Fault> faults;
  for (const char* spec : {"slow-chip:3:0.5", "jitter:0.05", "host-preempt:1@2:5"}) faults.push_back(*ParseFault(spec));
  sim.SetFaults(FaultPlan(faults, 9));
  EXPECT_DOUBLE_EQ(sim.chips()[3].time_scale, 2);
  EXPECT_DOUBLE_EQ(sim.chips()[0].time_scale, 1);
  EXPECT_DOUBLE_EQ(sim.chips()[5].jitter, 0.05);
  EXPECT_EQ(sim.chips()[5].seed, 9u);
}

}  // namespace
}  // namespace shardscope::runtime
