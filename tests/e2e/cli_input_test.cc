// `shardscope run` on bad input, through the real binary: refusals exit 2
// before a database is written; a FIFO or device given as a file fails at
// once instead of hanging (every command runs under `timeout`); a damaged
// checkpoint is an error naming the file; config_json records only the flags
// the sample reads.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/e2e/shell.h"
#include "tests/temp_files.h"

namespace shardscope {
namespace {

using e2e::Output;
using e2e::Shell;

// The binary under `timeout`: a command that hangs exits 124.
Output RunCli(const std::string& args) {
  return Shell(absl::StrCat("timeout 60 ", SHARDSCOPE_CLI_BINARY, " run ", args));
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(CliInput, RefusalsExitTwoAndWriteNoDatabase) {
  const std::string db = e2e::TempDb("refused");
  const std::string fifo = absl::StrCat(::testing::TempDir(), "/cli_input_", getpid(), ".fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"mlp --steps 2147483648", "--steps '2147483648' is out of range (allowed 1..10000000)"},
      {"mlp --steps 4294967297", "--steps '4294967297' is out of range"},
      {"mlp --steps -1", "--steps '-1' is out of range"},
      {"mlp --mesh 4294967297x1", "--mesh 4294967297x1: R '4294967297' is out of range (allowed 1..64)"},
      {"mlp --mesh 8x16", "--mesh 8x16 is 128 chips"},
      {"mlp --batch 2147483648", "--batch '2147483648' is out of range (allowed 1..16384)"},
      {"llama --batch 2147483648", "--batch '2147483648' is out of range (allowed 1..256)"},
      {"mlp --lr nan", "--lr 'nan' is not a finite number"},
      {"mlp --lr inf", "--lr 'inf' is not a finite number"},
      {"mlp --lr -0.5", "--lr '-0.5' is out of range"},
      {"mlp --batch-after 8 --bucket", "mlp does not use --bucket (only recompile_storm does)"},
      {"recompile_storm --batch-after 8", "recompile_storm does not use --batch-after (only mlp does)"},
      {"cnn --checkpoint", "cnn does not use --checkpoint (only llama does)"},
      {"mlp --data /etc/hostname", "mlp does not use --data (only llama does)"},
      {"llama --data /dev/zero", "--data /dev/zero is a character device, not a regular file"},
      {"llama --data " + fifo, "--data " + fifo + " is a FIFO, not a regular file"},
      {"llama --init " + fifo, "--init " + fifo + " is a FIFO, not a regular file"},
      {"cnn --init /dev/zero", "--init /dev/zero is a character device, not a regular file"},
  };
  for (const auto& [args, message] : cases) {
    Output o = RunCli(absl::StrCat(args, " --db ", db, " --quiet"));
    EXPECT_EQ(o.code, 2) << args << "\n" << o.text;
    EXPECT_NE(o.text.find("error: run: " + message), std::string::npos) << args << "\n" << o.text;
    EXPECT_FALSE(Exists(db)) << args << " wrote " << db;
  }
  std::remove(fifo.c_str());
}

TEST(CliInput, DamagedCheckpointIsAnErrorNamingTheFile) {
  const std::string db = e2e::TempDb("damaged_init");
  const std::string ckpt = absl::StrCat(::testing::TempDir(), "/cli_input_", getpid(), ".safetensors");
  {
    // A header length of 2^40: the old reader allocated that much before looking.
    std::ofstream f(ckpt, std::ios::binary | std::ios::trunc);
    const char len[8] = {0, 0, 0, 0, 0, 1, 0, 0};
    f.write(len, 8);
    f << "{}";
  }
  Output o = RunCli(absl::StrCat("mlp --steps 2 --init ", ckpt, " --db ", db, " --quiet"));
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_FALSE(Exists(db)) << "refused before anything was recorded";
  EXPECT_NE(o.text.find(ckpt + " is not a valid safetensors file: header length 1099511627776 is over the 100 MiB"),
            std::string::npos)
      << o.text;
  std::remove(ckpt.c_str());
}

// --save is written after the last step: a path it cannot write is refused
// before the run starts. --init of another sample's checkpoint, or of one
// holding tensors the run lacks, is refused instead of loaded in part.
TEST(CliInput, CheckpointPathsAndContentsAreCheckedBeforeTraining) {
  const std::string db = e2e::TempDb("ckpt_paths");
  Output dir = RunCli(absl::StrCat("mlp --steps 1 --save ", ::testing::TempDir(), " --db ", db, " --quiet"));
  EXPECT_EQ(dir.code, 2) << dir.text;
  EXPECT_NE(dir.text.find("is a directory: give a file name"), std::string::npos) << dir.text;
  Output nodir = RunCli(absl::StrCat("mlp --steps 1 --save /nonexistent/x.safetensors --db ", db, " --quiet"));
  EXPECT_EQ(nodir.code, 2) << nodir.text;
  EXPECT_NE(nodir.text.find("its directory /nonexistent cannot be written (No such file or directory)"),
            std::string::npos)
      << nodir.text;
  EXPECT_FALSE(Exists(db)) << "nothing recorded";
  const std::string cnn = test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/cli_ckpt_cnn_", getpid(), ".safetensors"));
  ASSERT_EQ(RunCli(absl::StrCat("cnn --steps 1 --save ", cnn, " --db ", db, " --quiet")).code, 0);
  const std::string fresh = e2e::TempDb("ckpt_other_sample");
  Output other = RunCli(absl::StrCat("mlp --steps 2 --init ", cnn, " --db ", fresh, " --quiet"));
  EXPECT_EQ(other.code, 1) << other.text;
  EXPECT_NE(other.text.find("was saved by the cnn sample, not mlp"), std::string::npos) << other.text;
  EXPECT_FALSE(Exists(fresh)) << "refused before anything was recorded";
}

// Two processes of one llama run (fusion on) end bit for bit alike: the fused
// kernels' scratch blocks are aligned as a Literal's storage is, so Eigen's
// scalar head (std::exp, not its vector polynomial) covers the same elements
// in every process. With malloc's alignment, the checkpoints differed in
// 104 of 108 tensors after one step.
TEST(CliInput, TwoProcessesOfOneRunAreBitForBit) {
  std::string saved[2];
  for (int k = 0; k < 2; ++k) {
    saved[k] = test_files::RemoveAtExit(absl::StrCat(::testing::TempDir(), "/cli_bitwise_", getpid(), "_", k, ".safetensors"));
    const std::string db = e2e::TempDb(absl::StrCat("bitwise_", k));
    Output o = RunCli(absl::StrCat("llama --steps 2 --mesh 2x1 --save ", saved[k], " --db ", db, " --quiet"));
    ASSERT_EQ(o.code, 0) << o.text;
  }
  std::ifstream a(saved[0], std::ios::binary), b(saved[1], std::ios::binary);
  const std::string x((std::istreambuf_iterator<char>(a)), {}), y((std::istreambuf_iterator<char>(b)), {});
  ASSERT_GT(x.size(), 1000u);
  EXPECT_TRUE(x == y) << "the two runs' checkpoints differ";
}

TEST(CliInput, ConfigRecordsOnlyTheFlagsTheSampleReads) {
  const std::string db = e2e::TempDb("config");
  Output mlp = RunCli(absl::StrCat("mlp --steps 1 --batch 8 --change-step -1 --db ", db, " --quiet"));
  ASSERT_EQ(mlp.code, 0) << mlp.text;
  Output storm = RunCli(absl::StrCat("recompile_storm --steps 1 --bucket --lr 0.1 --db ", db, " --quiet"));
  ASSERT_EQ(storm.code, 0) << storm.text;
  auto q = e2e::Q(db,
                  "SELECT sample, json_extract(config_json, '$.batch') AS batch,"
                  " json_type(config_json, '$.change_step') AS change_step,"
                  " json_type(config_json, '$.bucket') AS bucket, json_type(config_json, '$.eval_every') AS eval_every,"
                  " json_type(config_json, '$.autocast') AS autocast, json_type(config_json, '$.data') AS data,"
                  " json_extract(config_json, '$.lr') AS lr, json_extract(config_json, '$.steps') AS steps"
                  " FROM runs ORDER BY run_id");
  ASSERT_EQ(q.rows.size(), 2u);
  EXPECT_EQ(q.Text(0, "sample"), "mlp");
  EXPECT_EQ(q.Int(0, "batch"), 8);
  EXPECT_EQ(q.Text(0, "change_step"), "integer");
  for (const char* unread : {"bucket", "eval_every", "autocast", "data"})
    EXPECT_EQ(q.Text(0, unread), "") << "mlp recorded " << unread;
  EXPECT_EQ(q.Text(1, "sample"), "recompile_storm");
  EXPECT_EQ(q.Text(1, "bucket"), "true");
  EXPECT_DOUBLE_EQ(q.Real(1, "lr"), 0.1);
  EXPECT_EQ(q.Int(1, "steps"), 1);
  for (const char* unread : {"batch", "change_step", "eval_every", "autocast", "data"})
    EXPECT_EQ(q.Text(1, unread), "") << "recompile_storm recorded " << unread;
}

}  // namespace
}  // namespace shardscope
