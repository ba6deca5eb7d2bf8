// The llama sample in a small configuration: it learns (the training loss
// falls), measures held-out loss on schedule, names its parameters by module
// path, and data parallel over two chips gives the single-chip losses; at
// full size through the CLI, the data-parallel program really splits the batch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "core/shardscope.h"
#include "samples/samples.h"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

samples::SampleConfig Tiny() {
  samples::SampleConfig c;
  c.layers = 1;
  c.d_model = 32;
  c.heads = 2;
  c.ffn = 64;
  c.seq = 16;
  c.llama_batch = 4;
  c.steps = 30;
  c.eval_every = 10;
  c.llama_lr = 1e-2;
  return c;
}

TEST(LlamaSample, LearnsAndEvaluates) {
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  auto r = samples::RunLlama(Tiny());
  Shutdown();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->losses.size(), 30u);
  EXPECT_LT(r->losses.back(), 0.6 * r->losses.front()) << r->losses.front() << " -> " << r->losses.back();
  ASSERT_EQ(r->eval_losses.size(), 3u);
  EXPECT_EQ(r->eval_losses[0].first, 9);
  EXPECT_LT(r->eval_losses.back().second, r->eval_losses.front().second + 0.5);
}

TEST(LlamaSample, DataParallelEqualsOneChip) {
  samples::SampleConfig c = Tiny();
  c.steps = 6;
  c.eval_every = 0;
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  auto one = samples::RunLlama(c);
  Shutdown();
  c.mesh = {2, 1};
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 2}).ok());
  auto two = samples::RunLlama(c);
  Shutdown();
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  for (size_t k = 0; k < one->losses.size(); ++k)
    EXPECT_NEAR(two->losses[k], one->losses[k], 1e-4 * std::max(1.0, one->losses[k])) << "step " << k;
}

// Equal losses alone would not show a split: a program computed whole on
// every chip gives them too. Each chip looks up only its half of the batch
// (the embedding gather), nothing is gathered whole, and the gradients are
// all-reduced.
TEST(LlamaSample, DataParallelProgramSplitsTheBatch) {
  const std::string db = e2e::TempDb("llama_dp");
  e2e::Output run = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " run llama --db ", db,
                                            " --mesh 2x1 --steps 2 --eval-every 0 --quiet"));
  ASSERT_EQ(run.code, 0) << run.text;
  auto ops = e2e::Q(db,
                    "SELECT SUM(opcode = 'stablehlo.all_gather') AS gathers_whole, "
                    "SUM(opcode = 'stablehlo.all_reduce') AS all_reduces, "
                    "MAX(CASE WHEN opcode = 'stablehlo.gather' THEN shape END) AS lookup "
                    "FROM ops WHERE graph_id = (SELECT MAX(graph_id) FROM ops)");
  ASSERT_EQ(ops.rows.size(), 1u);
  EXPECT_EQ(ops.Int(0, "gathers_whole"), 0);
  EXPECT_GT(ops.Int(0, "all_reduces"), 0);
  EXPECT_EQ(ops.Text(0, "lookup"), "f32[4,128,256]");  // batch 8 over 2 chips
}

// Weights and AdamW moments are saved, so a resumed run continues exactly.
TEST(LlamaSample, ResumeIsBitForBit) {
  samples::SampleConfig c = Tiny();
  c.steps = 6;
  c.eval_every = 0;
  std::string path = ::testing::TempDir() + "/llama_resume_" + std::to_string(getpid()) + ".safetensors";
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  auto full = samples::RunLlama(c);
  samples::SampleConfig first = c;
  first.stop_at = 3;  // interrupted: the schedule still plans for 6 steps
  first.save_path = path;
  ASSERT_TRUE(samples::RunLlama(first).ok());
  samples::SampleConfig second = c;
  second.init_path = path;
  auto rest = samples::RunLlama(second);
  Shutdown();
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->losses.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(rest->losses[k], full->losses[3 + k]) << "step " << 3 + k;
  std::remove(path.c_str());
}

TEST(LlamaSample, BadDataFileIsAClearError) {
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  samples::SampleConfig c = Tiny();
  c.data_path = "/nonexistent/corpus.txt";
  auto r = samples::RunLlama(c);
  Shutdown();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/corpus.txt"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// The goal, as a user runs it: `shardscope run llama --data GPL-3
// --steps 300` reaches a held-out loss below 2.5 nats per byte.
TEST(LlamaSample, Gpl3HeldOutLossBelow2_5) {
  const char* gpl = "/usr/share/common-licenses/GPL-3";
  if (FILE* f = std::fopen(gpl, "r")) std::fclose(f);
  else GTEST_SKIP() << gpl << " is missing (Debian's base-files ships it)";
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok());
  samples::SampleConfig c;
  c.steps = 300;
  c.eval_every = 50;
  c.data_path = gpl;
  auto r = samples::RunLlama(c);
  Shutdown();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->eval_losses.empty());
  EXPECT_LT(r->eval_losses.back().second, 2.5);
  std::printf("llama on GPL-3: held-out loss %.3f nats/byte after %d steps\n", r->eval_losses.back().second,
              r->eval_losses.back().first + 1);
}

}  // namespace
}  // namespace shardscope
