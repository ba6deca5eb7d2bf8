// `shardscope recompiles` on mlp runs whose batch shrinks from 64 to 48 at
// step 3: the call site, both compilations with their causes and lines, and a
// padding suggestion (48 -> 64) that predicts one compilation saved; running
// again with the padded batch saves exactly that many. The same for the
// recompile_storm sample's buckets, and for reading a value every N steps.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

int64_t Misses(const std::string& db) {
  return e2e::Q(db, "SELECT COUNT(*) AS n FROM compilations WHERE cache = 'miss'").Int(0, "n");
}

TEST(RecompilesE2e, PaddingSuggestionSavesWhatItPredicts) {
  const std::string churn = e2e::TempDb("recompiles_churn"), padded = e2e::TempDb("recompiles_padded");
  const std::string run = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 6 --change-step 3 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + churn + " --batch-after 48").code, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", churn));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "samples/mlp.cc:")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "2 distinct graphs, 2 compilations")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "first_compile")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "input_shape_changed  samples/mlp.cc:")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "x ([48,784], [64,784] -> [64,784])")) << o.text;
  const std::string saves = "1 compilation saved";
  ASSERT_TRUE(absl::StrContains(o.text, saves)) << o.text;
  // Apply it: the batch padded to its bucket, 64, all along.
  ASSERT_EQ(e2e::Shell(run + padded + " --batch-after 64").code, 0);
  EXPECT_EQ(Misses(churn) - Misses(padded), 1);
  e2e::Output help = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles --help"));
  EXPECT_TRUE(absl::StrContains(help.text, "usage: shardscope recompiles PATH [--run N]")) << help.text;
}

// The recompile_storm sample: a new graph per batch length; the suggestion's
// predicted saving is what --bucket (the suggestion applied) saves, and the
// losses do not change (the padding is masked out).
TEST(RecompilesE2e, StormBucketsSaveWhatTheSuggestionPredicts) {
  const std::string storm = e2e::TempDb("storm"), bucketed = e2e::TempDb("storm_bucketed");
  const std::string run = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run recompile_storm --steps 30 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + storm).code, 0);
  ASSERT_EQ(e2e::Shell(run + bucketed + " --bucket").code, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", storm));
  ASSERT_EQ(o.code, 0) << o.text;
  const size_t at = o.text.find(" compilations saved");
  ASSERT_NE(at, std::string::npos) << o.text;
  const size_t from = o.text.rfind(' ', at - 1) + 1;
  const int64_t predicted = std::stoll(o.text.substr(from, at - from));
  EXPECT_GT(Misses(storm), 10);  // a storm
  // The shapes and buckets in numeric order ([96] before [104]), not as text.
  EXPECT_TRUE(absl::StrContains(o.text, "mask ([96], [104], [112]")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "-> [8,16], [8,32], [8,64])")) << o.text;
  EXPECT_EQ(Misses(storm) - Misses(bucketed), predicted) << o.text;
  auto a = e2e::Q(storm, "SELECT loss FROM steps ORDER BY step"), b = e2e::Q(bucketed, "SELECT loss FROM steps ORDER BY step");
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t k = 0; k < a.rows.size(); ++k)  // the same up to summation order
    EXPECT_NEAR(a.Real(k, "loss"), b.Real(k, "loss"), 1e-5) << "step " << k;
  e2e::Output quiet = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", bucketed));
  EXPECT_EQ(quiet.text.find("suggestion"), std::string::npos) << quiet.text;  // nothing left to suggest
}

// Sizes that are powers of two already (a batch of 32 after 64s) bucket to
// themselves: the suggestion is to pad to the largest shape, with what it
// saves; a storm bucketed already gets none (above).
TEST(RecompilesE2e, APowerOfTwoShortBatchIsToldToPadToTheLargest) {
  const std::string db = e2e::TempDb("short_batch");
  ASSERT_EQ(e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --mesh 2x1 --steps 10 --batch 64 --batch-after 32",
                                    " --change-step 8 --quiet --db ", db))
                .code,
            0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", db));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "suggestion: pad to the largest shape seen (x -> [64,784]")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, ": 1 compilation saved")) << o.text;
  EXPECT_FALSE(absl::StrContains(o.text, "power-of-two")) << o.text;
}

// A step's host wall time holds its own compilations: the storm's new
// lengths compile in the step that meets them (steps.wall_ns was the next
// step's span when the loss was logged a step late).
TEST(RecompilesE2e, AStepsWallTimeHoldsItsOwnCompilations) {
  const std::string storm = e2e::TempDb("storm_wall");
  ASSERT_EQ(
      e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run recompile_storm --steps 16 --quiet --db ", storm))
          .code,
      0);
  auto q = e2e::Q(
      storm,
      "SELECT s.step, s.wall_ns, (SELECT sum(duration_ns) FROM compilations c WHERE c.run_id = s.run_id"
      " AND c.step = s.step AND c.cache = 'miss') AS compile_ns FROM steps s ORDER BY s.step");
  ASSERT_EQ(q.rows.size(), 16u);
  int compiled = 0;
  for (size_t k = 0; k < q.rows.size(); ++k) {
    const int64_t compile = q.Int(k, "compile_ns", 0);
    if (compile == 0) continue;
    ++compiled;
    EXPECT_GE(q.Int(k, "wall_ns"), compile) << "step " << q.Int(k, "step");
  }
  EXPECT_GT(compiled, 5);
}

// mlp reading its loss mid-step (a logging line before the update): each read
// cuts the graph, so every step runs two programs. The suggestion to read
// every 10 steps predicts the program runs saved and the one compilation it
// costs; running again with --read-loss-every 10 saves and costs exactly that.
TEST(RecompilesE2e, ReadingEveryNStepsSavesWhatTheSuggestionPredicts) {
  const std::string every = e2e::TempDb("reads_every_step"), tenth = e2e::TempDb("reads_every_tenth");
  const std::string run =
      absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 12 --change-step -1 --batch 16 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + every + " --read-loss-every 1").code, 0);
  ASSERT_EQ(e2e::Shell(run + tenth + " --read-loss-every 10").code, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", every));
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "value_read_cut  samples/mlp.cc:")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "cut the graph in 12 of 12 steps (24 program runs in the run)"))
      << o.text;
  const size_t at = o.text.find(" program runs saved");
  ASSERT_NE(at, std::string::npos) << o.text;
  const size_t from = o.text.rfind(' ', at - 1) + 1;
  const int64_t predicted = std::stoll(o.text.substr(from, at - from));
  EXPECT_EQ(predicted, 10);  // steps 1-9 and 11 run whole
  EXPECT_TRUE(absl::StrContains(o.text, "for 1 more compilation")) << o.text;
  auto executions = [](const std::string& db) {
    return e2e::Q(db, "SELECT COUNT(*) AS n FROM executions").Int(0, "n");
  };
  EXPECT_EQ(executions(every) - executions(tenth), predicted);
  EXPECT_EQ(Misses(tenth) - Misses(every), 1);
  // The metrics warning about reading every step gives the same number.
  e2e::Output m = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " metrics ", every));
  EXPECT_TRUE(absl::StrContains(m.text, absl::StrCat("every 10 steps, ", predicted, " program runs saved")))
      << m.text;
  // A read every 4 steps (0, 4, 8) moved to every 10 drops two cuts and adds
  // one, at step 10: one program run saved, as the run with it measures.
  const std::string fourth = e2e::TempDb("reads_every_fourth");
  ASSERT_EQ(e2e::Shell(run + fourth + " --read-loss-every 4").code, 0);
  nlohmann::json g = nlohmann::json::parse(
      e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", fourth, " --format json")).text, nullptr, false);
  int64_t saved = -1;
  for (const auto& site : g["call_sites"])
    for (const auto& sug : site["suggestions"])
      if (sug["kind"] == "read_every_n") saved = sug["program_runs_saved"].get<int64_t>();
  EXPECT_EQ(saved, executions(fourth) - executions(tenth)) << g.dump();
  EXPECT_EQ(saved, 1) << g.dump();
  // The same losses: the read changes when programs run, not what they compute.
  auto a = e2e::Q(every, "SELECT loss FROM steps ORDER BY step"),
       b = e2e::Q(tenth, "SELECT loss FROM steps ORDER BY step");
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t k = 0; k < a.rows.size(); ++k)
    EXPECT_NEAR(a.Real(k, "loss"), b.Real(k, "loss"), 1e-4) << "step " << k;
}

// The suggestions of `recompiles --format json`, by kind.
nlohmann::json Suggestion(const std::string& db, const std::string& kind) {
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", db, " --format json"));
  EXPECT_EQ(o.code, 0) << o.text;
  nlohmann::json j = nlohmann::json::parse(o.text, nullptr, false);
  EXPECT_TRUE(j.is_object()) << o.text;
  if (!j.is_object()) return {};
  EXPECT_EQ(j["schema"], "shardscope.recompiles/1");
  for (const auto& site : j["call_sites"])
    for (const auto& g : site["suggestions"])
      if (g["kind"] == kind) return g;
  ADD_FAILURE() << "no suggestion of kind " << kind << " in\n" << o.text;
  return {};
}

// mlp reading its loss mid-step on steps 0 and 10 only: the mark_step's call
// site alternates between the whole step and what is left after the read
// (graph_changed / cut_on_some_steps at the read's line); reading after
// mark_step instead saves what the suggestion predicts, compilations and
// program runs both.
TEST(RecompilesE2e, ReadingAfterMarkStepSavesWhatTheSuggestionPredicts) {
  const std::string some = e2e::TempDb("reads_some_steps"), none = e2e::TempDb("reads_none");
  const std::string run =
      absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --steps 12 --change-step -1 --batch 16 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + some + " --read-loss-every 10").code, 0);
  ASSERT_EQ(e2e::Shell(run + none).code, 0);
  auto cut = e2e::Q(some, "SELECT cause_subkind, source_file FROM compilations WHERE cause_kind = 'graph_changed'");
  ASSERT_EQ(cut.rows.size(), 1u);
  EXPECT_EQ(cut.Text(0, "cause_subkind"), "cut_on_some_steps");
  EXPECT_EQ(cut.Text(0, "source_file"), "samples/mlp.cc");
  nlohmann::json g = Suggestion(some, "read_after_mark_step");
  ASSERT_TRUE(g.is_object());
  auto executions = [](const std::string& db) {
    return e2e::Q(db, "SELECT COUNT(*) AS n FROM executions").Int(0, "n");
  };
  ASSERT_TRUE(g["compilations_saved"].is_number()) << g.dump();
  EXPECT_EQ(Misses(some) - Misses(none), g["compilations_saved"].get<int64_t>()) << g.dump();
  EXPECT_EQ(executions(some) - executions(none), g["program_runs_saved"].get<int64_t>()) << g.dump();
  EXPECT_GT(g["compilations_saved"].get<int64_t>(), 0);
}

// A capped in-memory cache evicts the storm's graphs and compiles them again
// (cache_evicted); distinct graphs are counted once however often they were
// compiled, and the capacity the suggestion names saves what it predicts.
TEST(RecompilesE2e, RaisingTheCacheCapacitySavesWhatTheSuggestionPredicts) {
  const std::string capped = e2e::TempDb("storm_capped"), open = e2e::TempDb("storm_uncapped");
  const std::string run = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run recompile_storm --steps 30 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + capped + " --cache-capacity 4").code, 0);
  ASSERT_EQ(e2e::Shell(run + open).code, 0);
  EXPECT_GT(e2e::Q(capped, "SELECT COUNT(*) AS n FROM compilations WHERE cause_kind = 'cache_evicted'").Int(0, "n"), 0);
  nlohmann::json g = Suggestion(capped, "raise_cache_capacity");
  ASSERT_TRUE(g["compilations_saved"].is_number()) << g.dump();
  EXPECT_EQ(Misses(capped) - Misses(open), g["compilations_saved"].get<int64_t>()) << g.dump();
  // Distinct graphs are programs, not compilations: the same in both runs.
  e2e::Output a = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", capped, " --format json"));
  e2e::Output b = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", open, " --format json"));
  auto ja = nlohmann::json::parse(a.text, nullptr, false), jb = nlohmann::json::parse(b.text, nullptr, false);
  ASSERT_TRUE(ja.is_object() && jb.is_object()) << a.text << b.text;
  EXPECT_EQ(ja["distinct_graphs"], jb["distinct_graphs"]);
  EXPECT_GT(ja["compilations"].get<int64_t>(), ja["distinct_graphs"].get<int64_t>());
  EXPECT_EQ(jb["compilations"], jb["distinct_graphs"]);
}

// Training and evaluation at two call sites with a cache of one program:
// both lose programs, and raising the capacity saves over the whole run. The
// saving is counted once (each site had claimed the run's whole saving).
TEST(RecompilesE2e, TheCapacitySavingIsCountedAtOneCallSite) {
  const std::string capped = e2e::TempDb("cnn_eval_capped"), open = e2e::TempDb("cnn_eval_uncapped");
  const std::string run = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run cnn --steps 4 --eval-every 1 --quiet --db ");
  ASSERT_EQ(e2e::Shell(run + capped + " --cache-capacity 1").code, 0);
  ASSERT_EQ(e2e::Shell(run + open).code, 0);
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " recompiles ", capped, " --format json"));
  auto j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.text;
  int64_t claimed = 0;
  int sites = 0;
  for (const auto& site : j["call_sites"])
    for (const auto& g : site["suggestions"])
      if (g["kind"] == "raise_cache_capacity") {
        ++sites;
        if (g["compilations_saved"].is_number()) claimed += g["compilations_saved"].get<int64_t>();
      }
  EXPECT_EQ(sites, 2) << o.text;
  EXPECT_EQ(claimed, Misses(capped) - Misses(open)) << o.text;
}

}  // namespace
}  // namespace shardscope
