// The Recompilations and Graph views' models (ui/app/recompile_model.h,
// graph_model.h, graph_text.h) against SQL on a run the real stack records: `shardscope run mlp` on a 2x2
// mesh whose batch shrinks at step 10, so step 10 recompiles with its input x
// changed. Per call site its compilations, misses and compile time; every row's
// cause, subkind and line; the suggestions of `shardscope recompiles`; the
// recompiled graph beside the one it was compared with, aligned by the stored
// diff; a program's ops with their costs, fused kernels and measured times,
// and an op's neighbourhood; and an imported run, which has no IR, saying so.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "profiler/analysis/recompiles.h"
#include "store/reader.h"
#include "store/trace_import.h"
#include "tests/app/fixture.h"
#include "ui/app/graph_model.h"
#include "ui/app/graph_text.h"
#include "ui/app/recompile_model.h"

namespace shardscope::app {
namespace {

class RecompilesModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Once per process (ctest runs each test in its own, two at a time).
    db_ = new std::string(testing::TempPath(absl::StrCat("recompiles_mlp_", getpid(), ".db")));
    std::filesystem::remove(*db_);
    const std::string cmd = absl::StrCat(SHARDSCOPE_CLI_BINARY, " run mlp --db ", *db_,
                                         " --mesh 2x2 --steps 12 --quiet > /dev/null 2>&1");
    recorded_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { delete db_; }
  void SetUp() override {
    ASSERT_TRUE(recorded_) << "shardscope run mlp failed";
    auto r = store::Reader::Open(*db_);
    ASSERT_TRUE(r.ok()) << r.status();
    reader_ = std::make_unique<store::Reader>(*std::move(r));
  }
  store::QueryResult Q(const std::string& sql) {
    auto q = reader_->Query(sql);
    EXPECT_TRUE(q.ok()) << q.status() << "\n" << sql;
    return q.ok() ? *q : store::QueryResult{};
  }
  static std::string* db_;
  static bool recorded_;
  std::unique_ptr<store::Reader> reader_;
};
std::string* RecompilesModelTest::db_ = nullptr;
bool RecompilesModelTest::recorded_ = false;

TEST_F(RecompilesModelTest, CallSitesAndTheirCompilationsEqualTheTable) {
  auto m = LoadRecompiles(*reader_, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->no_ir.empty()) << m->no_ir;
  auto sites = Q("SELECT call_site, count(*) AS n, sum(cache = 'miss') AS misses, count(DISTINCT graph_id) AS graphs,"
                 " coalesce(sum(CASE WHEN cache = 'miss' THEN duration_ns END), 0) AS ns FROM compilations"
                 " WHERE run_id = 1 GROUP BY call_site");
  ASSERT_EQ(m->sites.size(), sites.rows.size());
  EXPECT_EQ(m->compilations, Q("SELECT count(*) AS n FROM compilations WHERE run_id = 1").Int(0, "n"));
  EXPECT_EQ(m->misses, 2);  // the first compile, and step 10's
  for (size_t i = 0; i < sites.rows.size(); ++i) {
    const std::string name = sites.Text(i, "call_site");
    auto site = std::find_if(m->sites.begin(), m->sites.end(), [&](const auto& s) { return s.call_site == name; });
    ASSERT_NE(site, m->sites.end()) << name;
    EXPECT_EQ(static_cast<int64_t>(site->compiles.size()), sites.Int(i, "n"));
    EXPECT_EQ(site->misses, sites.Int(i, "misses"));
    EXPECT_EQ(site->distinct_graphs, sites.Int(i, "graphs"));
    EXPECT_EQ(site->compile_ns, sites.Int(i, "ns"));
  }
  // Every row as stored.
  auto rows = Q("SELECT compile_id, cache, coalesce(cause_kind, '') AS kind, coalesce(cause_subkind, '') AS sub,"
                " coalesce(source_file || ':' || source_line, '') AS src, duration_ns, coalesce(prev_graph_id, -1) AS prev"
                " FROM compilations WHERE run_id = 1");
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    const CompileRow* c = m->Find(rows.Int(i, "compile_id"));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->cache, rows.Text(i, "cache"));
    EXPECT_EQ(c->cause_kind, rows.Text(i, "kind"));
    EXPECT_EQ(c->cause_subkind, rows.Text(i, "sub"));
    EXPECT_EQ(c->source, rows.Text(i, "src"));
    EXPECT_EQ(c->duration_ns, rows.Int(i, "duration_ns"));
    EXPECT_EQ(c->prev_graph_id, rows.Int(i, "prev"));
  }
  // The suggestions are the report's (shardscope recompiles).
  auto report = analysis::BuildRecompilesReport(*reader_, 1);
  ASSERT_TRUE(report.ok());
  size_t suggestions = 0, expected = 0;
  for (const auto& s : m->sites) suggestions += s.suggestions.size();
  for (const auto& s : report->sites) expected += s.suggestions.size();
  EXPECT_EQ(suggestions, expected);
  EXPECT_GT(expected, 0u);
}

TEST_F(RecompilesModelTest, TheRecompiledGraphStandsBesideTheOneItWasComparedWith) {
  auto miss = Q("SELECT compile_id, graph_id, prev_graph_id, diff_total FROM compilations WHERE run_id = 1 AND"
                " cache = 'miss' AND prev_graph_id IS NOT NULL");
  ASSERT_EQ(miss.rows.size(), 1u);
  auto pair = LoadGraphPair(*reader_, 1, miss.Int(0, "compile_id"));
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->old_graph_id, miss.Int(0, "prev_graph_id"));
  EXPECT_EQ(pair->new_graph_id, miss.Int(0, "graph_id"));
  EXPECT_TRUE(pair->alignment.from_diff) << pair->note;
  // Both programs read whole: as many instructions as the graphs say they have.
  auto counts = Q(absl::StrCat("SELECT graph_id, op_count FROM graphs WHERE run_id = 1 AND graph_id IN (",
                               pair->old_graph_id, ",", pair->new_graph_id, ")"));
  for (size_t i = 0; i < counts.rows.size(); ++i) {
    const IrProgram& p = counts.Int(i, "graph_id") == pair->new_graph_id ? pair->new_program : pair->old_program;
    EXPECT_EQ(static_cast<int64_t>(p.ops.size()), counts.Int(i, "op_count"));
  }
  // Every stored difference is a highlighted row at its op, with its opcode.
  auto diffs = Q(absl::StrCat("SELECT change, opcode, op_index FROM compile_diffs WHERE run_id = 1 AND compile_id = ",
                              pair->compile_id, " ORDER BY ordinal"));
  ASSERT_EQ(pair->diffs.size(), diffs.rows.size());
  ASSERT_GT(diffs.rows.size(), 0u);
  for (size_t i = 0; i < diffs.rows.size(); ++i) {
    const std::string change = diffs.Text(i, "change");
    const int idx = static_cast<int>(diffs.Int(i, "op_index"));
    auto row = std::find_if(pair->alignment.rows.begin(), pair->alignment.rows.end(), [&](const AlignedRow& r) {
      return (change == "removed" ? r.old_index : r.new_index) == idx && !r.change.empty();
    });
    ASSERT_NE(row, pair->alignment.rows.end()) << change << " " << idx;
    EXPECT_EQ(row->change, change);
    const IrProgram& side = change == "removed" ? pair->old_program : pair->new_program;
    const std::string opcode = diffs.Text(i, "opcode");
    EXPECT_EQ(side.ops[idx].opcode == "parameter" ? "stablehlo.parameter" : side.ops[idx].opcode, opcode);
  }
  // Pairs read the same op on both sides, and every op of each side shows once.
  std::set<int> olds, news;
  std::set<std::string> inputs;
  for (const AlignedRow& r : pair->alignment.rows) {
    if (r.old_index >= 0) EXPECT_TRUE(olds.insert(r.old_index).second);
    if (r.new_index >= 0) EXPECT_TRUE(news.insert(r.new_index).second);
    if (r.old_index >= 0 && r.new_index >= 0) {
      EXPECT_EQ(pair->old_program.ops[r.old_index].opcode, pair->new_program.ops[r.new_index].opcode)
          << pair->old_program.ops[r.old_index].text << "\n" << pair->new_program.ops[r.new_index].text;
    }
    if (r.change == "input") {
      inputs.insert(pair->new_program.ops[r.new_index].name);
      EXPECT_TRUE(absl::StrContains(r.what, "tensor<64") && absl::StrContains(r.what, "tensor<48")) << r.what;
    }
  }
  EXPECT_EQ(olds.size(), pair->old_program.ops.size());
  EXPECT_EQ(news.size(), pair->new_program.ops.size());
  EXPECT_EQ(inputs, (std::set<std::string>{"x", "y"}));  // the batch that shrank, and its labels
  ASSERT_GE(pair->first_difference, 0);
  for (int i = 0; i < pair->first_difference; ++i) EXPECT_TRUE(pair->alignment.rows[i].change.empty());
  // Each side's ops keep the user's lines.
  int with_line = 0;
  for (const IrOp& op : pair->new_program.ops) with_line += op.source_line > 0 && op.source_file == "samples/mlp.cc";
  EXPECT_GT(with_line, static_cast<int>(pair->new_program.ops.size()) / 2);
}

TEST_F(RecompilesModelTest, AFirstCompileHasOneSideAndSaysWhy) {
  auto first = Q("SELECT compile_id FROM compilations WHERE run_id = 1 AND cause_kind = 'first_compile'");
  ASSERT_FALSE(first.rows.empty());
  auto pair = LoadGraphPair(*reader_, 1, first.Int(0, "compile_id"));
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->old_graph_id, -1);
  EXPECT_EQ(pair->alignment.differences, 0);
  EXPECT_FALSE(pair->new_program.ops.empty());
  EXPECT_TRUE(absl::StrContains(pair->note, "first graph")) << pair->note;
}

TEST_F(RecompilesModelTest, AProgramsOpsCarryTheirCostsKernelsAndMeasuredTimes) {
  const int64_t graph = Q("SELECT graph_id FROM compilations WHERE run_id = 1 AND cause_kind = 'first_compile'")
                            .Int(0, "graph_id");
  auto g = LoadGraphModel(*reader_, 1, graph, /*partitioned=*/true, /*measure_steps=*/4);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->partitioned);
  // Every op of the per-chip program is read, the costed ones with their row of `ops`.
  auto ops = Q(absl::StrCat("SELECT op_id, flops, modeled_ns, shape FROM ops WHERE run_id = 1 AND graph_id = ", graph));
  ASSERT_EQ(g->costs.size(), ops.rows.size());
  for (size_t i = 0; i < ops.rows.size(); ++i) {
    const int64_t id = ops.Int(i, "op_id");
    ASSERT_TRUE(g->costs.contains(id)) << id;
    EXPECT_DOUBLE_EQ(g->costs.at(id).flops, ops.Real(i, "flops"));
    EXPECT_EQ(g->costs.at(id).modeled_ns, ops.Int(i, "modeled_ns"));
    EXPECT_EQ(g->costs.at(id).shape, ops.Text(i, "shape"));
    EXPECT_GE(g->program.Find(id), 0) << "op " << id << " of `ops` is not in the program's text";
  }
  // Fused kernels hold what fusion_decisions fused into them.
  auto fused = Q(absl::StrCat("SELECT producer_op_id AS p, kernel FROM fusion_decisions WHERE run_id = 1 AND graph_id = ",
                              graph, " AND fused AND kernel LIKE 'fusion.%'"));
  ASSERT_GT(fused.rows.size(), 0u);
  for (size_t i = 0; i < fused.rows.size(); ++i) {
    const std::string kernel = fused.Text(i, "kernel");
    const int64_t root = std::stoll(kernel.substr(kernel.find('.') + 1));
    const auto kernels = g->KernelsOf(fused.Int(i, "p"));
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), root), kernels.end()) << kernel;
    const auto& members = g->members.at(root);
    EXPECT_NE(std::find(members.begin(), members.end(), fused.Int(i, "p")), members.end()) << kernel;
    EXPECT_TRUE(g->costs.contains(root)) << kernel << " has no row in ops";
  }
  // Measured: each kernel's device-clock slices over the steps read.
  ASSERT_EQ(g->measured_steps.size(), 4u);
  std::string steps;
  for (int32_t s : g->measured_steps) absl::StrAppend(&steps, steps.empty() ? "" : ",", s);
  auto m = Q(absl::StrCat("SELECT op_id, count(*) AS n, sum(dur_ns) AS t FROM events WHERE run_id = 1 AND clock = "
                          "'device' AND graph_id = ", graph, " AND op_id IS NOT NULL AND step IN (", steps,
                          ") GROUP BY op_id"));
  ASSERT_EQ(g->measured.size(), m.rows.size());
  for (size_t i = 0; i < m.rows.size(); ++i) {
    const OpMeasured& got = g->measured.at(m.Int(i, "op_id"));
    EXPECT_EQ(got.count, m.Int(i, "n"));
    EXPECT_EQ(got.total_ns, m.Int(i, "t"));
  }
  // As traced: the same graph before partitioning, no per-chip costs.
  auto traced = LoadGraphModel(*reader_, 1, graph, /*partitioned=*/false);
  ASSERT_TRUE(traced.ok());
  EXPECT_FALSE(traced->partitioned);
  EXPECT_TRUE(traced->costs.empty());
  EXPECT_EQ(static_cast<int64_t>(traced->program.ops.size()),
            Q(absl::StrCat("SELECT op_count FROM graphs WHERE run_id = 1 AND graph_id = ", graph)).Int(0, "op_count"));
}

TEST_F(RecompilesModelTest, ANeighbourhoodHoldsExactlyTheOpsWithinItsDepth) {
  const int64_t graph = Q("SELECT graph_id FROM graphs WHERE run_id = 1 ORDER BY graph_id LIMIT 1").Int(0, "graph_id");
  auto g = LoadGraphModel(*reader_, 1, graph, true);
  ASSERT_TRUE(g.ok());
  const IrProgram& p = g->program;
  // A dot: it has operands and users.
  int center = -1;
  for (size_t i = 0; i < p.ops.size() && center < 0; ++i) {
    if (p.ops[i].opcode == "stablehlo.dot_general") center = static_cast<int>(i);
  }
  ASSERT_GE(center, 0);
  auto one = Neighbourhood(p, center, 1);
  std::set<int> expect{center};
  for (int64_t operand : p.ops[center].operands) expect.insert(p.Find(operand));
  for (int u : p.Users(center)) expect.insert(u);
  std::set<int> got;
  for (const auto& [index, dist] : one) {
    got.insert(index);
    EXPECT_EQ(dist, index == center ? 0 : 1);
  }
  EXPECT_EQ(got, expect);
  EXPECT_LT(got.size(), p.ops.size());  // not the whole program
  auto two = Neighbourhood(p, center, 2);
  EXPECT_GT(two.size(), one.size());
  for (size_t i = 1; i < two.size(); ++i) EXPECT_LT(two[i - 1].first, two[i].first);  // program order
}

// An op printed in MLIR's generic form (collectives with a region) is named
// as the others are: stablehlo.all_reduce, not "stablehlo.all_reduce".
TEST(IrText, AGenericFormOpIsNamedWithoutQuotes) {
  const IrProgram p = ParseIr(
      "module @graph {\n"
      "  func.func @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {\n"
      "    %1 = stablehlo.exponential %arg0 : tensor<4xf32>\n"
      "    %2 = \"stablehlo.all_reduce\"(%1) ({\n"
      "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
      "      %w = stablehlo.add %a, %b : tensor<f32>\n"
      "      stablehlo.return %w : tensor<f32>\n"
      "    }) : (tensor<4xf32>) -> tensor<4xf32>\n"
      "    return %2 : tensor<4xf32>\n"
      "  }\n"
      "}\n");
  const int at = p.Find(2);
  ASSERT_GE(at, 0);
  EXPECT_EQ(p.ops[at].opcode, "stablehlo.all_reduce");
  ASSERT_EQ(p.ops[at].operands.size(), 1u);
  EXPECT_EQ(p.ops[at].operands[0], 1);
}

TEST(RecompilesModel, AnImportedRunSaysItHasNoIr) {
  const std::string db = testing::TempPath("recompiles_imported.db");
  std::filesystem::remove(db);
  auto imported = store::ImportChromeTraces({std::string(SHARDSCOPE_SOURCE_DIR) + "/tests/data/import/gpu_rank0.json"}, db);
  ASSERT_TRUE(imported.ok()) << imported.status();
  auto r = store::Reader::Open(db);
  ASSERT_TRUE(r.ok());
  auto m = LoadRecompiles(*r, imported->run_id);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(absl::StrContains(m->no_ir, "imported")) << m->no_ir;
  EXPECT_TRUE(absl::StrContains(m->no_ir, "no IR")) << m->no_ir;
}

}  // namespace
}  // namespace shardscope::app
