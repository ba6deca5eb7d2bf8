// The `ops` table and the per-kernel views: an OpRecord round-trips through the
// writer, and kernel_stats / time_by_source_line / time_by_module_path add up
// device-clock slices (never modeled ones) exactly.
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/reader.h"
#include "store/writer.h"
#include "tests/store/synthetic_run.h"

namespace shardscope::store {
namespace {

using namespace shardscope::trace;

QueryResult MustQuery(const Reader& r, const std::string& sql) {
  auto q = r.Query(sql);
  EXPECT_TRUE(q.ok()) << sql << ": " << q.status();
  return q.ok() ? *q : QueryResult{};
}

OpRecord Op(int64_t op_id, const std::string& name, const std::string& opcode, double flops, int line,
            const std::string& scope) {
  OpRecord o;
  o.graph_id = 7;
  o.op_id = op_id;
  o.name = name;
  o.opcode = opcode;
  o.shape = "f32[64,1024]";
  o.flops = flops;
  o.bytes_read = 1000 * op_id;
  o.bytes_written = 10 * op_id;
  o.modeled_ns = 100 * op_id;
  o.roofline = flops > 1e6 ? "compute" : "memory";
  o.profile = "cpu";
  o.source_file = "samples/mlp.cc";
  o.source_line = line;
  o.scope = scope;
  return o;
}

TEST(OpsTest, RoundTripAndKernelViews) {
  std::string path = shardscope::testing::TempDbPath("ops");
  {
    auto w = Writer::Open(path);
    ASSERT_TRUE(w.ok()) << w.status();
    RunRecord run;
    run.sample = "mlp";
    run.clock_kinds = "host,device,modeled";
    ASSERT_TRUE((*w)->StartRun(run).ok());
    for (int d = 0; d < 2; ++d) {
      DeviceRecord dev;
      dev.device_id = d;
      dev.peak_flops = 1e11;
      (*w)->Record(dev);
      (*w)->Record(TrackRecord{10 + d, "chip", Clock::kDevice, d, 0, ""});
      (*w)->Record(TrackRecord{20 + d, "chip (modeled)", Clock::kModeled, d, 0, ""});
    }
    (*w)->Record(Op(1, "dot_general.1", "stablehlo.dot_general", 2e8, 64, "l1"));
    (*w)->Record(Op(2, "add.2", "stablehlo.add", 1000, 64, ""));
    (*w)->Record(Op(3, "negate.3", "stablehlo.negate", 500, 70, "l1"));  // never ran: count 0
    int64_t id = 1;
    auto slice = [&](int64_t track, int64_t op, int64_t dur) {
      SliceRecord s;
      s.slice_id = id++;
      s.track_id = track;
      s.dur_ns = dur;
      s.name = absl::StrCat("op ", op);
      s.kind = SliceKind::kCompute;
      s.graph_id = 7;
      s.op_id = op;
      (*w)->Record(s);
    };
    // dot_general.1: 2 ms on chip 0, 3 ms on chip 1 (device); modeled slices must not count.
    slice(10, 1, 2'000'000);
    slice(11, 1, 3'000'000);
    slice(20, 1, 99);
    slice(21, 1, 99);
    // add.2: 10 us, 30 us.
    slice(10, 2, 10'000);
    slice(11, 2, 30'000);
    ASSERT_TRUE((*w)->EndRunAndCheck().ok()) << (*w)->status();
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();

  QueryResult ops = MustQuery(*r, "SELECT * FROM ops ORDER BY op_id");
  ASSERT_EQ(ops.rows.size(), 3u);
  EXPECT_EQ(ops.Int(0, "graph_id"), 7);
  EXPECT_EQ(ops.Text(0, "name"), "dot_general.1");
  EXPECT_EQ(ops.Text(0, "opcode"), "stablehlo.dot_general");
  EXPECT_EQ(ops.Text(0, "shape"), "f32[64,1024]");
  EXPECT_DOUBLE_EQ(ops.Real(0, "flops"), 2e8);
  EXPECT_EQ(ops.Int(0, "bytes_read"), 1000);
  EXPECT_EQ(ops.Int(0, "bytes_written"), 10);
  EXPECT_EQ(ops.Int(0, "modeled_ns"), 100);
  EXPECT_EQ(ops.Text(0, "roofline"), "compute");
  EXPECT_EQ(ops.Text(0, "profile"), "cpu");
  EXPECT_EQ(ops.Text(0, "source_file"), "samples/mlp.cc");
  EXPECT_EQ(ops.Int(0, "source_line"), 64);
  EXPECT_EQ(ops.Text(0, "scope"), "l1");
  EXPECT_FALSE(ops.rows[1][ops.Col("scope")].has_value());  // empty scope is NULL

  QueryResult k = MustQuery(*r, "SELECT * FROM kernel_stats ORDER BY op_id");
  ASSERT_EQ(k.rows.size(), 3u);
  EXPECT_EQ(k.Int(0, "count"), 2);
  EXPECT_EQ(k.Int(0, "total_ns"), 5'000'000);
  EXPECT_DOUBLE_EQ(k.Real(0, "mean_ns"), 2'500'000);
  EXPECT_EQ(k.Int(0, "bytes"), 1010);
  // 2e8 FLOPs twice in 5 ms = 80 GFLOP/s, 80% of the 100 GFLOP/s peak.
  EXPECT_NEAR(k.Real(0, "achieved_flops"), 8e10, 1);
  EXPECT_DOUBLE_EQ(k.Real(0, "peak_flops"), 1e11);
  EXPECT_NEAR(k.Real(0, "fraction_of_peak"), 0.8, 1e-9);
  EXPECT_EQ(k.Int(1, "total_ns"), 40'000);
  EXPECT_EQ(k.Int(2, "count"), 0);
  EXPECT_EQ(k.Int(2, "total_ns"), 0);
  EXPECT_FALSE(k.rows[2][k.Col("achieved_flops")].has_value());

  QueryResult lines = MustQuery(*r, "SELECT * FROM time_by_source_line ORDER BY source_line");
  ASSERT_EQ(lines.rows.size(), 2u);
  EXPECT_EQ(lines.Int(0, "source_line"), 64);
  EXPECT_EQ(lines.Int(0, "ops"), 2);
  EXPECT_EQ(lines.Int(0, "kernels"), 4);
  EXPECT_EQ(lines.Int(0, "total_ns"), 5'040'000);
  EXPECT_EQ(lines.Int(1, "total_ns"), 0);

  QueryResult mods = MustQuery(*r, "SELECT * FROM time_by_module_path ORDER BY module_path");
  ASSERT_EQ(mods.rows.size(), 2u);
  EXPECT_EQ(mods.Text(0, "module_path"), "");
  EXPECT_EQ(mods.Int(0, "total_ns"), 40'000);
  EXPECT_EQ(mods.Text(1, "module_path"), "l1");
  EXPECT_EQ(mods.Int(1, "total_ns"), 5'000'000);
  EXPECT_EQ(mods.Int(1, "ops"), 2);
}

}  // namespace
}  // namespace shardscope::store
