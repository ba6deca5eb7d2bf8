// Topologies (runtime/interconnect.h) and injected faults (runtime/faults.h):
// coordinates, links and routes; fault specs; what each fault does to the
// device clock through the Scheduler (runtime_faults_test).
#include "runtime/faults.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "profiler/trace/recorder.h"
#include "runtime/interconnect.h"
#include "runtime/scheduler.h"

namespace shardscope::runtime {
namespace {

std::set<std::string> LinkIds(const Interconnect& ic) {
  std::set<std::string> ids;
  for (const Link& l : ic.links()) ids.insert(l.id());
  return ids;
}

TEST(Interconnect, TorusHasWraparoundLinksAndCoordinates) {
  auto ic = Interconnect::Parse("2x4");
  ASSERT_TRUE(ic.ok()) << ic.status();
  EXPECT_EQ(ic->num_chips(), 8);
  EXPECT_EQ(ic->num_hosts(), 2);  // hosts of 4 chips
  EXPECT_EQ(ic->CoordsText(6), "[1,2]");
  // Rows wrap (0-3, 4-7); the dimension of 2 has one link per pair, not two.
  EXPECT_EQ(LinkIds(*ic), (std::set<std::string>{"0-1", "1-2", "2-3", "0-3", "4-5", "5-6", "6-7", "4-7",
                                                 "0-4", "1-5", "2-6", "3-7"}));
  // Dimension order, the short way round: 0 -> 7 is down to 4, then back round the row to 7.
  std::vector<std::string> route;
  for (int l : ic->Route(0, 7)) route.push_back(ic->links()[l].id());
  EXPECT_EQ(route, (std::vector<std::string>{"0-4", "4-7"}));
  auto cube = Interconnect::Parse("4x4x4");
  ASSERT_TRUE(cube.ok());
  EXPECT_EQ(cube->num_chips(), 64);
  EXPECT_EQ(cube->links().size(), 64u * 3);  // 6 neighbours each, every link counted twice
  EXPECT_EQ(cube->CoordsText(63), "[3,3,3]");
}

TEST(Interconnect, GpuClusterHasNvlinkInsideHostsAndRailsBetween) {
  auto ic = Interconnect::Parse("gpu:2x4");
  ASSERT_TRUE(ic.ok()) << ic.status();
  EXPECT_EQ(ic->num_hosts(), 2);
  EXPECT_EQ(ic->CoordsText(5), "[1,1]");
  int dcn = 0;
  for (const Link& l : ic->links()) dcn += l.dcn;
  EXPECT_EQ(ic->links().size(), 2u * 6 + 4);
  EXPECT_EQ(dcn, 4);
  EXPECT_GE(ic->FindLink(1, 5), 0);
  EXPECT_TRUE(ic->links()[ic->FindLink(1, 5)].dcn);
  EXPECT_LT(ic->FindLink(1, 6), 0);
  // 1 -> 6: the rail to host 1 (1-5), then NVLink (5-6).
  std::vector<std::string> route;
  for (int l : ic->Route(1, 6)) route.push_back(ic->links()[l].id());
  EXPECT_EQ(route, (std::vector<std::string>{"1-5", "5-6"}));
}

TEST(Interconnect, BadSpecsNameThePart) {
  for (const auto& [spec, says] :
       std::vector<std::pair<std::string, std::string>>{{"", "a torus has 1 to 3 dimensions"},
                                                        {"2x2x2x2", "a torus has 1 to 3 dimensions"},
                                                        {"4xa", "dimension 2 is 'a'"},
                                                        {"gpu:0x4", "hosts is '0'"},
                                                        {"gpu:2x4x2", "gpu: takes N hosts x M chips"}}) {
    auto ic = Interconnect::Parse(spec);
    ASSERT_FALSE(ic.ok()) << spec;
    EXPECT_NE(std::string(ic.status().message()).find(says), std::string::npos) << ic.status();
  }
}

// Slips users make, each refused with the reason: the wrong case, and a GPU
// cluster whose all-pairs links would take gigabytes to build (gpu:4096x16
// built 134M links, 9 GB, for a minute before the mesh check refused it).
TEST(Interconnect, TyposAndOversizedClustersAreRefusedAtOnce) {
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"4X4", "separated by a lowercase x"},
           {"GPU:2x4", "write gpu: in lowercase"},
           {"gpu:4096x16", "it has 134676480 links, more than the 8388608"},
           {"gpu:16x4096", "links, more than the 8388608"},
           {"gpu:2048x8", "links, more than the 8388608"}}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto ic = Interconnect::Parse(spec);
    ASSERT_FALSE(ic.ok()) << spec;
    EXPECT_NE(std::string(ic.status().message()).find(says), std::string::npos) << ic.status();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1))
        << spec << ": refused before building";
  }
  // The largest tori stay within (3 links a chip).
  EXPECT_TRUE(Interconnect::Parse("16x64x64").ok());
}

// A chip or link slowed past 1/1000 (1e-300 overflowed the scaled durations:
// the "slow" chip's kernels took no time), a fault at a step the run never
// reaches, and two faults setting the same thing are refused, not ignored.
TEST(Faults, RefusesWhatWouldBeSilentlyWrong) {
  for (const std::string spec : {"slow-chip:3:1e-300", "slow-chip:3:0.0009", "link:0-1:1e-9"}) {
    auto f = ParseFault(spec);
    ASSERT_FALSE(f.ok()) << spec;
    EXPECT_NE(std::string(f.status().message()).find("is below 0.001"), std::string::npos) << f.status();
  }
  EXPECT_TRUE(ParseFault("slow-chip:3:0.001").ok());

  absl::Status late = CheckFaultStep(*ParseFault("fail-chip:3@100"), 2, "--steps 2");
  EXPECT_NE(std::string(late.message())
                .find("step 100 is not a step of this run (its steps are 0 to 1, --steps 2)"),
            std::string::npos)
      << late;
  EXPECT_FALSE(CheckFaultStep(*ParseFault("host-preempt:1@2"), 2, "--steps 2").ok());
  EXPECT_TRUE(CheckFaultStep(*ParseFault("host-preempt:1@1"), 2, "--steps 2").ok());
  EXPECT_TRUE(CheckFaultStep(*ParseFault("slow-chip:1:0.5"), 2, "--steps 2").ok());

  auto set = [](std::vector<std::string> specs) {
    std::vector<Fault> faults;
    for (const std::string& s : specs) faults.push_back(*ParseFault(s));
    return CheckFaultSet(faults);
  };
  for (const auto& [specs, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"slow-chip:3:0.5", "slow-chip:3:0.8"}, "both set chip 3's speed"},
           {{"link:0-1:0.5", "jitter:0.1", "link:0-1:0.5"}, "both set link 0-1's bandwidth"},
           {{"jitter:0.1", "jitter:0.2"}, "both set every kernel's jitter"},
           {{"fail-chip:3@1", "fail-chip:3@4"}, "both set when chip 3 fails"},
           {{"host-preempt:1@1", "host-preempt:1@1:30"}, "both set host 1's pause at step 1"},
           // The first chip to fail ends the run: nothing after it happens.
           {{"fail-chip:3@4", "fail-chip:5@2"}, "'fail-chip:3@4': the run ends at step 2, when chip 5 fails"},
           {{"fail-chip:3@2", "host-preempt:1@3"}, "'host-preempt:1@3': the run ends at step 2"},
           // The failing step is never stored: a pause in it would be unseen.
           {{"fail-chip:3@2", "host-preempt:1@2"}, "'host-preempt:1@2': step 2 is where chip 3 fails"}}) {
    absl::Status s = set(specs);
    EXPECT_NE(std::string(s.message()).find(says), std::string::npos) << s;
  }
  EXPECT_TRUE(set({"slow-chip:3:0.5", "slow-chip:4:0.5", "fail-chip:3@2", "fail-chip:5@2", "host-preempt:1@1",
                   "host-preempt:1@0", "link:0-1:0.5", "link:1-2:0.5", "jitter:0.1"})
                  .ok());
}

TEST(Faults, ParseAndCheck) {
  auto f = ParseFault("slow-chip:3:0.6");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, Fault::kSlowChip);
  EXPECT_EQ(f->chip, 3);
  EXPECT_DOUBLE_EQ(f->factor, 0.6);
  auto p = ParseFault("host-preempt:1@4");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->host, 1);
  EXPECT_EQ(p->step, 4);
  EXPECT_EQ(p->pause_ns, 200'000'000);
  auto link = ParseFault("link:0-5:0.25");
  ASSERT_TRUE(link.ok());
  auto ic = Interconnect::Parse("2x4");
  absl::Status s = CheckFault(*link, 8, 2, &*ic);
  EXPECT_NE(std::string(s.message()).find("not linked"), std::string::npos) << s;
  EXPECT_TRUE(CheckFault(*ParseFault("link:0-4:0.25"), 8, 2, &*ic).ok());
  EXPECT_FALSE(ParseFault("fail-chip:1@x").ok());
  EXPECT_FALSE(ParseFault("jitter:0").ok());
  EXPECT_FALSE(ParseFault("link:3-3:0.5").ok());
}

// Two spellings of one fault or topology are stored as one ("0005" is 5), so
// runs compare as equal; a fraction keeps its digits as written.
TEST(Faults, SpecsAreStoredInOneSpelling) {
  EXPECT_EQ(ParseFault("slow-chip:0005:0.50")->spec, "slow-chip:5:0.50");
  EXPECT_EQ(ParseFault("link:01-002:.25")->spec, "link:1-2:.25");
  EXPECT_EQ(ParseFault("jitter:0.05")->spec, "jitter:0.05");
  EXPECT_EQ(ParseFault("fail-chip:07@012")->spec, "fail-chip:7@12");
  EXPECT_EQ(ParseFault("host-preempt:01@02")->spec, "host-preempt:1@2");
  EXPECT_EQ(ParseFault("host-preempt:1@2:0050")->spec, "host-preempt:1@2:50");
  EXPECT_EQ(Interconnect::Parse("004x4")->spec(), "4x4");
  EXPECT_EQ(Interconnect::Parse("gpu:02x08")->spec(), "gpu:2x8");
  EXPECT_EQ(Interconnect::Parse("2x2x02")->spec(), "2x2x2");
}

// The number fields are written as typed, not as strtod reads them: a space,
// a sign or hex was taken and stored so, as the whole-number fields are not.
TEST(Faults, NumbersAreRefusedUnlessPlainlyWritten) {
  for (const std::string spec : {"slow-chip:1:0.5 ", "slow-chip:1: 0.5", "jitter:0.05 ", "link:0-1:0.5 ",
                                 "slow-chip:1:+0.5", "slow-chip:1:0x1p-1", "jitter:.", "jitter:0.5e",
                                 "jitter:5e-1x", "link:0-1:-0.5", "jitter:nan", "jitter:0.1.2"}) {
    auto f = ParseFault(spec);
    ASSERT_FALSE(f.ok()) << "'" << spec << "'";
    EXPECT_NE(std::string(f.status().message()).find("is not a number written plainly"), std::string::npos)
        << f.status();
  }
  for (const std::string spec : {"slow-chip:1:0.5", "slow-chip:1:.5", "jitter:5e-2", "link:0-1:1E-1",
                                 "slow-chip:3:0.001", "jitter:0.05"})
    EXPECT_TRUE(ParseFault(spec).ok()) << spec << ": " << ParseFault(spec).status();
  EXPECT_DOUBLE_EQ(ParseFault("jitter:5e-2")->factor, 0.05);
  // Two chips that are one, and a run of one host or chip, said as such.
  absl::Status same = ParseFault("link:0-0:0.5").status();
  EXPECT_NE(std::string(same.message()).find("link '0-0' joins chip 0 to itself: the two chips must differ"),
            std::string::npos)
      << same;
  EXPECT_EQ(std::string(same.message()).find("lower chip first"), std::string::npos) << same;
  absl::Status one_host = CheckFault(*ParseFault("host-preempt:1@2"), 4, 1, nullptr);
  EXPECT_NE(std::string(one_host.message()).find("host 1 does not exist: the run has one host (host 0)"),
            std::string::npos)
      << one_host;
  absl::Status one_chip = CheckFault(*ParseFault("slow-chip:1:0.5"), 1, 1, nullptr);
  EXPECT_NE(std::string(one_chip.message()).find("chip 1 does not exist: the run has one chip (chip 0)"),
            std::string::npos)
      << one_chip;
  EXPECT_NE(std::string(CheckFault(*ParseFault("host-preempt:5@2"), 8, 2, nullptr).message())
                .find("the run has hosts 0 to 1"),
            std::string::npos);
}

// Two chips, one kernel each, then an all-reduce of both.
ScheduleInput TwoChips() {
  ScheduleInput in;
  in.step = 3;
  in.per_device.resize(2);
  for (int d = 0; d < 2; ++d) {
    in.per_device[d].push_back(
        {.op_id = 1, .name = "dot.1", .kind = trace::SliceKind::kCompute, .dur_ns = 1000});
    in.per_device[d].push_back({.op_id = 2,
                                .name = "all_reduce.2",
                                .kind = trace::SliceKind::kCollective,
                                .collective = 0,
                                .bytes = 400,
                                .sent_bytes = 400});
  }
  in.collectives.push_back({{{0, 1}}, {500}, {}});
  return in;
}

TEST(Faults, SlowChipArrivesLateAndPreemptedHostStartsLate) {
  ScheduleInput in = TwoChips();
  FaultPlan plan({*ParseFault("slow-chip:1:0.5"), *ParseFault("host-preempt:0@3:1")}, 7);
  plan.Apply(&in, {0, 1});
  EXPECT_EQ(in.per_device[0][0].dur_ns, 1000);
  EXPECT_EQ(in.per_device[1][0].dur_ns, 2000);
  Scheduler sched(trace::Clock::kDevice, {10, 11});
  auto spans = sched.Schedule(in);
  ASSERT_TRUE(spans.ok()) << spans.status();
  // Chip 0: 1 ms preempted, then 1 us of kernel; chip 1: 2 us. The all-reduce waits for chip 0.
  EXPECT_EQ((*spans)[0].host_wait_ns, 1'000'000);
  EXPECT_EQ((*spans)[0].end_ns, 1'000'000 + 1000 + 500);
  EXPECT_EQ((*spans)[1].end_ns, 1'000'000 + 1000 + 500);
  EXPECT_TRUE(plan.FailuresBy(100).empty());
}

TEST(Faults, JitterIsSeededAndBounded) {
  ScheduleInput a = TwoChips(), b = TwoChips(), c = TwoChips();
  FaultPlan(std::vector<Fault>{*ParseFault("jitter:0.1")}, 1).Apply(&a, {0, 0});
  FaultPlan(std::vector<Fault>{*ParseFault("jitter:0.1")}, 1).Apply(&b, {0, 0});
  FaultPlan(std::vector<Fault>{*ParseFault("jitter:0.1")}, 2).Apply(&c, {0, 0});
  EXPECT_EQ(a.per_device[1][0].dur_ns, b.per_device[1][0].dur_ns);
  EXPECT_NE(a.per_device[1][0].dur_ns + a.per_device[0][0].dur_ns,
            c.per_device[1][0].dur_ns + c.per_device[0][0].dur_ns);
  for (const auto& ops : a.per_device) {
    EXPECT_GE(ops[0].dur_ns, 900);
    EXPECT_LE(ops[0].dur_ns, 1100);
  }
}

TEST(Faults, SlowLinkHoldsTheCollectiveUp) {
  auto ic = Interconnect::Parse("2");  // two chips, one link
  ASSERT_TRUE(ic.ok()) << ic.status();
  ScheduleInput healthy = TwoChips(), slow = TwoChips();
  AddLinkTraffic(&healthy, *ic, FaultPlan());
  AddLinkTraffic(&slow, *ic, FaultPlan(std::vector<Fault>{*ParseFault("link:0-1:0.25")}, 0));
  ASSERT_EQ(healthy.collectives[0].group_links[0].size(), 1u);
  const LinkTransfer& h = healthy.collectives[0].group_links[0][0];
  EXPECT_EQ(h.a, 0);
  EXPECT_EQ(h.b, 1);
  EXPECT_EQ(h.dur_ns, 500);
  EXPECT_EQ(h.bytes, 400);
  EXPECT_EQ(healthy.collectives[0].group_dur_ns[0], 500);
  EXPECT_EQ(slow.collectives[0].group_links[0][0].dur_ns, 2000);
  EXPECT_EQ(slow.collectives[0].group_dur_ns[0], 2000);
}

}  // namespace
}  // namespace shardscope::runtime
