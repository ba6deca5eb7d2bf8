// `shardscope sharding` on stored llama runs under fsdp_tp: run 1 on a 2x2
// mesh (axes fsdp x model; no involuntary full rematerialization), run 2 on
// 3x2, where fsdp splits 256 unevenly in three and a reshape cannot keep
// that split: the table of every tensor, the grid of a weight split both
// ways naming the chip of each tile, the involuntary full rematerializations
// (also in `shardscope report`), the propagation chain of a value, and clear
// errors for an unknown tensor or run.
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

using e2e::Output;
using e2e::Shell;

class ShardingCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = new std::string(e2e::TempDb("sharding_cli"));
    run_ = new Output(Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run llama --db ", *db_,
                                         " --mesh 2x2 --sharding fsdp_tp --steps 1 --eval-every 0 --quiet && ",
                                         SHARDSCOPE_CLI_BINARY, " run llama --db ", *db_,
                                         " --mesh 3x2 --sharding fsdp_tp --steps 1 --eval-every 0 --quiet")));
  }
  static Output Sharding(const std::string& args) {
    return Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " sharding ", *db_, " ", args));
  }
  static std::string* db_;
  static Output* run_;
};
std::string* ShardingCliTest::db_;
Output* ShardingCliTest::run_;

TEST_F(ShardingCliTest, TableOfEveryTensorAndOneGridPerLayout) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  Output o = Sharding("--run 1");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "on mesh 2x2 (axes fsdp,model), sharding fsdp_tp")) << o.text;
  // The tokens: the batch over fsdp, replicated over model; a quarter of a weight per chip.
  EXPECT_TRUE(absl::StrContains(o.text, "tokens")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "64 KiB/chip on 4 (of 256 KiB)")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "more with this layout")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "annotated at samples/llama.cc:")) << o.text;  // the mark_sharding line
  EXPECT_TRUE(absl::StrContains(o.text, "No involuntary full rematerializations.")) << o.text;
  // On 3x2 an unevenly split activation meets a reshape that cannot keep the split.
  Output uneven = Sharding("--run 2");
  ASSERT_EQ(uneven.code, 0) << uneven.text;
  EXPECT_TRUE(absl::StrContains(uneven.text, "involuntary full rematerializations (a split value gathered whole"))
      << uneven.text;
  EXPECT_TRUE(absl::StrContains(uneven.text, "needed whole by")) << uneven.text;
  auto rows = e2e::Q(*db_, "SELECT COUNT(*) AS n FROM rematerializations WHERE run_id = 2");
  auto decided = e2e::Q(*db_,
                        "SELECT SUM(source = 'annotated') AS annotated, SUM(source = 'propagated') AS propagated "
                        "FROM sharding_decisions");
  ASSERT_EQ(rows.rows.size(), 1u);
  EXPECT_GT(rows.Int(0, "n"), 0);
  EXPECT_GT(decided.Int(0, "annotated"), 0);
  EXPECT_GT(decided.Int(0, "propagated"), 0);
  // The optimizer's moments are made inside AdamW's constructor: attributed
  // to the sample's line that made the optimizer, never to core/optim.cc.
  EXPECT_TRUE(absl::StrContains(o.text, "default (made at samples/llama.cc:")) << o.text;
  EXPECT_FALSE(absl::StrContains(o.text, "core/optim.cc")) << o.text;
}

// q_proj.weight [out, in] is column parallel: out over model, in over fsdp.
// Chip (f, m) of the mesh is f * 2 + m, so the tile of out block m and in
// block f is chip f * 2 + m.
TEST_F(ShardingCliTest, GridOfAWeightSplitBothWays) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  Output o = Sharding("--run 1 --tensor layers.0.attn.q_proj.weight");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "{devices=[2,2]0,2,1,3}")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "0:128     128:256   (dim 1)")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "dim 0 0:128       | chip 0  | chip 2  |")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "dim 0 128:256     | chip 1  | chip 3  |")) << o.text;
}

// The run report flags them too, in one line, and lists them in JSON.
TEST_F(ShardingCliTest, ReportFlagsTheRematerializations) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  Output text = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", *db_, " --run 2"));
  ASSERT_EQ(text.code, 0) << text.text;
  EXPECT_TRUE(absl::StrContains(text.text, "involuntary full rematerializations (")) << text.text;
  EXPECT_TRUE(absl::StrContains(text.text, " at samples/llama.cc:")) << text.text;
  Output json = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", *db_, " --run 2 --format json"));
  ASSERT_EQ(json.code, 0) << json.text;
  EXPECT_TRUE(absl::StrContains(json.text, "\"rematerializations\": [\n    {")) << json.text.substr(0, 2000);
}

// --why walks a value's layout back through the ops propagation carried it
// through to where it started: here a dot of the step, back to an input
// (annotated at its mark_sharding line, or the optimizer's default).
TEST_F(ShardingCliTest, WhyWalksThePropagationChainBackToItsSource) {
  ASSERT_EQ(run_->code, 0) << run_->text;
  auto dots = e2e::Q(*db_,
                     "SELECT name FROM sharding_decisions WHERE run_id = 1 AND source = 'propagated'"
                     " AND name LIKE 'dot_general.%' AND graph_id = (SELECT MAX(graph_id) FROM sharding_decisions"
                     " WHERE run_id = 1) ORDER BY op_id DESC LIMIT 1");
  ASSERT_EQ(dots.rows.size(), 1u);
  const std::string dot = dots.Text(0, "name");
  Output o = Sharding("--run 1 --why " + dot);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "where the layout of " + dot + " came from")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "propagated through")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "\n  <-  ")) << o.text;
  // The last line is an input and says what laid it out.
  const std::string last = o.text.substr(o.text.rfind("\n  <-  "));
  EXPECT_TRUE(absl::StrContains(last, "annotated at samples/llama.cc:") || absl::StrContains(last, "default"))
      << o.text;
  auto from = e2e::Q(*db_, "SELECT COUNT(from_op_id) AS n FROM sharding_decisions WHERE source = 'propagated'");
  EXPECT_GT(from.Int(0, "n"), 0);
  Output bad = Sharding("--why nope.1");
  EXPECT_EQ(bad.code, 1) << bad.text;
  EXPECT_TRUE(absl::StrContains(bad.text, "decided no sharding for 'nope.1'; names look like: ")) << bad.text;
}

TEST_F(ShardingCliTest, UnknownTensorAndBadRunAreClearErrors) {
  Output o = Sharding("--tensor nope");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "has no tensor 'nope'; it has: ")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "layers.0.attn.q_proj.weight")) << o.text;
  Output bad = Sharding("--run 0");
  EXPECT_EQ(bad.code, 2) << bad.text;
  Output missing = Sharding("--run 7");
  EXPECT_EQ(missing.code, 1) << missing.text;
  EXPECT_TRUE(absl::StrContains(missing.text, "no run 7")) << missing.text;
}

// One damaged placement row stopped every view of the app and the sharding
// table, naming no file, and `check` called the file healthy. Now `check`
// names the row, and the views leave it out, say so and show the rest.
TEST(ShardingDamage, ADamagedPlacementIsLeftOutAndNamed) {
  const std::string db = e2e::TempDb("sharding_damaged");
  ASSERT_EQ(Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --steps 1 --quiet --db ", db)).code, 0);
  e2e::Exec(db, "UPDATE shard_placements SET index_ranges = 'garbage' WHERE tensor_name = 'x' AND device_id = 1");
  e2e::Exec(db, "UPDATE shard_placements SET index_ranges = '[0:64,5:2]' WHERE tensor_name = 'x' AND device_id = 2");
  // Chip 0's row, read first, with a rank the tensor does not have: it goes, not the others.
  e2e::Exec(db, "UPDATE shard_placements SET index_ranges = '[0:32]' WHERE tensor_name = 'x' AND device_id = 0");
  Output check = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " check ", db));
  EXPECT_NE(check.code, 0) << check.text;
  EXPECT_TRUE(absl::StrContains(check.text, "chip 1: shard_placements.index_ranges 'garbage' is not [b:e,...]"))
      << check.text;
  EXPECT_TRUE(absl::StrContains(check.text, "has a range 5:2 that ends before it begins")) << check.text;
  EXPECT_TRUE(absl::StrContains(check.text, "chip 0: shard_placements.index_ranges '[0:32]' has 1 dimensions where the "
                                            "tensor's shape [64,784] has 2"))
      << check.text;
  Output view = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " sharding ", db));
  ASSERT_EQ(view.code, 0) << view.text;
  EXPECT_TRUE(absl::StrContains(view.text, "3 placements left out, damaged in the file's shard_placements"))
      << view.text;
  EXPECT_TRUE(absl::StrContains(view.text, "chip 0: 1 dimensions where the tensor has 2")) << view.text;
  EXPECT_TRUE(absl::StrContains(view.text, "tensor 'x' (tensor_id ")) << view.text;
  EXPECT_TRUE(absl::StrContains(view.text, "l1.weight")) << view.text;  // the others still shown
  EXPECT_EQ(Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db)).code, 0);
}

// A span of chips that damage made endless, or backwards: `check` names it,
// and neither the views nor a plain query of shard_placements hangs on it.
TEST(ShardingDamage, ADamagedSpanIsNamedAndEndsSomewhere) {
  const std::string db = e2e::TempDb("sharding_damaged_span");
  ASSERT_EQ(Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x2 --steps 1 --quiet --db ", db)).code, 0);
  // l1.weight is replicated: one span over chips 0-3.
  auto one = e2e::Q(db, "SELECT count(*) AS n, min(first_device) AS f, max(last_device) AS l FROM shard_placement_spans"
                        " WHERE tensor_name = 'l1.weight'");
  ASSERT_EQ(one.Int(0, "n"), 1);
  EXPECT_EQ(one.Int(0, "f"), 0);
  EXPECT_EQ(one.Int(0, "l"), 3);
  e2e::Exec(db, "UPDATE shard_placement_spans SET last_device = 9223372036854775807 WHERE tensor_name = 'l1.weight'");
  e2e::Exec(db, "UPDATE shard_placement_spans SET last_device = -5 WHERE tensor_name = 'l1.bias'");
  e2e::Exec(db, "UPDATE shard_placement_spans SET bytes = 'lots' WHERE tensor_name = 'l2.bias'");
  Output check = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " check ", db));
  EXPECT_NE(check.code, 0) << check.text;
  EXPECT_TRUE(absl::StrContains(check.text, "chips 0-9223372036854775807 are not all the run's (it has 4 chips)"))
      << check.text;
  EXPECT_TRUE(absl::StrContains(check.text, "shard_placement_spans.last_device -5 is before first_device 0"))
      << check.text;
  EXPECT_TRUE(absl::StrContains(check.text, "shard_placements.bytes 'lots' is not a count of bytes")) << check.text;
  auto rows = e2e::Q(db, "SELECT count(*) AS n FROM shard_placements WHERE tensor_name = 'l1.weight'");
  EXPECT_EQ(rows.Int(0, "n"), 1 << 20);  // stops at chip 2^20 - 1
  Output view = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " sharding ", db));
  EXPECT_EQ(view.code, 0) << view.text;
  EXPECT_TRUE(absl::StrContains(view.text, "chips 0-9223372036854775807: not chips of the run (it has 4)"))
      << view.text;
  // The report counts neither damaged span's chips.
  Output report = Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " report ", db, " --format json"));
  ASSERT_EQ(report.code, 0) << report.text;
  const auto j = nlohmann::json::parse(report.text.substr(report.text.find('{')));
  int seen = 0;
  for (const auto& t : j["sharding"])
    if (t["name"] == "l1.weight" || t["name"] == "l1.bias") {
      ++seen;
      EXPECT_EQ(t["devices"], 0) << t.dump();
    }
  EXPECT_EQ(seen, 2) << j["sharding"].dump();
}

}  // namespace
}  // namespace shardscope
