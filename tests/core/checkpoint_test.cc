// Checkpoints: safetensors written and read back bit for bit, clear errors on
// damaged files, and a training run resumed from a checkpoint that continues
// exactly as the uninterrupted run did.
#include "core/checkpoint.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/shardscope.h"
#include "samples/samples.h"

namespace shardscope {
namespace {

std::string Temp(const std::string& name) { return absl::StrCat(::testing::TempDir(), "/", name, "_", getpid()); }

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok()); }
  void TearDown() override { Shutdown(); }
};

TEST_F(CheckpointTest, RoundTripIsBitExact) {
  Literal w(Shape(DType::kF32, {3, 5}));
  for (int k = 0; k < 15; ++k) w.as<float>()[k] = 0.1f * k - 0.37f;
  Tensor a = Tensor::from_host(w, "layer.weight");
  Tensor b = Tensor::from_host(Literal::FromI32({4}, {1, -2, 3, 1 << 30}), "ids");
  Tensor c = add(a, a);  // pending: saving forces it
  c.set_name("twice");
  std::string path = Temp("rt.safetensors");
  ASSERT_TRUE(save_checkpoint(path, {&a, &b, &c}, {{"step", "7"}}).ok());
  auto ck = load_checkpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ(ck->metadata.at("step"), "7");
  ASSERT_EQ(ck->tensors.size(), 3u);
  const Literal& w2 = ck->tensors.at("layer.weight");
  ASSERT_EQ(w2.shape(), w.shape());
  EXPECT_EQ(std::memcmp(w2.data(), w.data(), w.bytes()), 0);
  EXPECT_EQ(ck->tensors.at("ids").as<int32_t>()[3], 1 << 30);
  EXPECT_FLOAT_EQ(ck->tensors.at("twice").as<float>()[1], 2 * (0.1f - 0.37f));

  // Loading into tensors of the same names and shapes.
  Tensor a2 = Tensor::from_host(Literal(Shape(DType::kF32, {3, 5})), "layer.weight");
  ASSERT_TRUE(load_into(*ck, {&a2}, path).ok());
  auto v = a2.to_host();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(std::memcmp(v->data(), w.data(), w.bytes()), 0);
  std::remove(path.c_str());
}

TEST_F(CheckpointTest, ClearErrors) {
  std::string path = Temp("err.safetensors");
  Tensor a = Tensor::from_host(Literal(Shape(DType::kF32, {2, 2})), "w");
  ASSERT_TRUE(save_checkpoint(path, {&a}).ok());
  auto ck = load_checkpoint(path);
  ASSERT_TRUE(ck.ok());
  Tensor other = Tensor::from_host(Literal(Shape(DType::kF32, {3})), "w");
  absl::Status s = load_into(*ck, {&other}, path);
  EXPECT_NE(s.message().find("f32[2,2] in the file but f32[3] in the model"), std::string::npos) << s;
  Tensor missing = Tensor::from_host(Literal(Shape(DType::kF32, {3})), "nope");
  s = load_into(*ck, {&missing}, path);
  EXPECT_NE(s.message().find("has no tensor 'nope'"), std::string::npos) << s;

  // A truncated file and a garbage file.
  std::string cut = Temp("cut.safetensors");
  {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(cut, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 4));
  }
  auto t = load_checkpoint(cut);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(cut), std::string::npos) << t.status();
  {
    std::ofstream out(cut, std::ios::binary | std::ios::trunc);
    out << "definitely not a checkpoint";
  }
  EXPECT_FALSE(load_checkpoint(cut).ok());
  EXPECT_EQ(load_checkpoint(Temp("absent")).status().code(), absl::StatusCode::kNotFound);
  // Unnamed or duplicate names are refused before anything is written.
  Tensor unnamed = Tensor::from_host(Literal(Shape(DType::kF32, {1})));
  EXPECT_FALSE(save_checkpoint(Temp("x"), {&unnamed}).ok());
  EXPECT_FALSE(save_checkpoint(Temp("x"), {&a, &a}).ok());
  std::remove(path.c_str());
  std::remove(cut.c_str());
}

// A safetensors file from its parts: the 8-byte length (the header's own
// unless `length` is given), the header text and the data bytes.
std::string WriteSafetensors(const std::string& name, const std::string& header, const std::string& data,
                             std::optional<uint64_t> length = std::nullopt) {
  std::string path = Temp(name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = length.value_or(header.size());
  for (int k = 0; k < 8; ++k) f.put(static_cast<char>(n >> (8 * k)));
  f << header << data;
  return path;
}

// Every damage a checkpoint can have is an error naming the file and what is
// wrong, never a crash, a huge allocation or a wait.
TEST_F(CheckpointTest, DamagedFilesAreClearErrors) {
  const std::string eight(8, '\0');  // the data of one f32[2]
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    const char* what;
    std::string header;
    std::string data;
    std::optional<uint64_t> length;
    const char* message;
  } cases[] = {
      {"length 1", "{", "", std::nullopt, "header length 1 cannot hold a JSON object"},
      {"length past the file", "{}", "", 4096, "header length 4096 exceeds the file (10 bytes)"},
      {"length 2^64-1", "{}", "", UINT64_MAX, "header length 18446744073709551615 is over the 100 MiB"},
      {"length over 100 MiB", "{}", "", uint64_t{101} << 20, "is over the 100 MiB safetensors allows"},
      {"not JSON", "{\"w\": [", "", std::nullopt, "the header is not well-formed JSON"},
      {"not an object", "[1, 2]", "", std::nullopt, "the header is not a JSON object"},
      {"unknown dtype", R"({"w":{"dtype":"F8","shape":[2],"data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'w' has no known dtype"},
      {"entry not an object", R"({"w":3})", eight, std::nullopt, "tensor 'w' has no known dtype"},
      {"no shape", R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'w' lacks a shape or data_offsets"},
      {"negative dim", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'w' has a bad shape [-2]"},
      {"fractional dim", R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'w' has a bad shape [2.5]"},
      {"dim as text", R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'w' has a bad shape"},
      {"dim past int64", R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})", eight,
       std::nullopt, "tensor 'w' has a bad shape"},
      {"shape beyond the file",
       R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight, std::nullopt,
       "tensor 'w' F32[4294967296,4294967296] needs more bytes than the file's 8 bytes of data"},
      {"too many dims", R"({"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})",
       eight, std::nullopt, "tensor 'w' has 17 dims (at most 16)"},
      {"offsets past the file", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[1000,1008]}})", eight,
       std::nullopt, "tensor 'w' has data_offsets [1000, 1008) outside the file's 8 bytes of data"},
      {"offsets reversed", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight, std::nullopt,
       "tensor 'w' has data_offsets [8, 0) outside"},
      {"negative offset", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", eight, std::nullopt,
       "tensor 'w' has data_offsets [-8,0], not two non-negative integers"},
      {"offsets as text", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":["0","8"]}})", eight, std::nullopt,
       "not two non-negative integers"},
      {"one offset", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight, std::nullopt,
       "tensor 'w' lacks a shape or data_offsets"},
      {"offsets not the shape's bytes", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", eight,
       std::nullopt, "tensor 'w' F32[2] needs 8 bytes but its data_offsets are [0, 4)"},
      {"metadata not an object", "{" + ok_entry + R"(,"__metadata__":[1]})", eight, std::nullopt,
       "__metadata__ is not an object"},
      {"metadata not text", "{" + ok_entry + R"(,"__metadata__":{"step":5}})", eight, std::nullopt,
       "__metadata__ entry 'step' is not a string"},
      {"step negative", "{" + ok_entry + R"(,"__metadata__":{"step":"-3"}})", eight, std::nullopt,
       "__metadata__ step '-3' is not a step number (0..10000000)"},
      {"step 2^31", "{" + ok_entry + R"(,"__metadata__":{"step":"2147483648"}})", eight, std::nullopt,
       "__metadata__ step '2147483648' is not a step number"},
      {"step huge", "{" + ok_entry + R"(,"__metadata__":{"step":"99999999999999999999999"}})", eight, std::nullopt,
       "__metadata__ step '99999999999999999999999' is not a step number"},
      {"step text", "{" + ok_entry + R"(,"__metadata__":{"step":"ten"}})", eight, std::nullopt,
       "__metadata__ step 'ten' is not a step number"},
      {"step with a sign", "{" + ok_entry + R"(,"__metadata__":{"step":"+3"}})", eight, std::nullopt,
       "__metadata__ step '+3' is not a step number"},
      {"escape in a name", R"({"w\u001b[2J":{"dtype":"F8","shape":[2],"data_offsets":[0,8]}})", eight,
       std::nullopt, "tensor 'w\\x1b[2J' has no known dtype"},
      // The tensors' bytes must tile the data exactly (the format's rule):
      // a tensor reading another's bytes would train on them.
      {"overlapping tensors",
       R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight, std::nullopt, "tensors 'w' [0, 8) and 'b' [4, 8) share bytes of the data"},
      {"a gap", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight, std::nullopt,
       "bytes [0, 4) of the data belong to no tensor (before 'w')"},
      {"trailing bytes", "{" + ok_entry + "}", eight + "junk", std::nullopt,
       "the file has 4 bytes after its last tensor's data"},
      {"a key twice",
       R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       eight, std::nullopt, "the header gives the key 'w' twice"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteSafetensors("damaged.safetensors", c.header, c.data, c.length);
    auto ck = load_checkpoint(path);
    ASSERT_FALSE(ck.ok()) << c.what << ": loaded";
    EXPECT_NE(ck.status().message().find(path), std::string::npos) << c.what << ": " << ck.status();
    EXPECT_NE(ck.status().message().find(c.message), std::string::npos) << c.what << ": " << ck.status();
    std::remove(path.c_str());
  }
  // The same parts, undamaged, load.
  const std::string path =
      WriteSafetensors("whole.safetensors", "{" + ok_entry + R"(,"__metadata__":{"step":"10000000"}})", eight);
  auto ck = load_checkpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ(ck->metadata.at("step"), "10000000");
  EXPECT_EQ(ck->tensors.at("w").shape(), Shape(DType::kF32, {2}));
  std::remove(path.c_str());
}

// Not a regular file: refused at once, without reading (a FIFO would block).
TEST_F(CheckpointTest, OnlyRegularFilesAreRead) {
  auto dir = load_checkpoint(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory, not a regular file"), std::string::npos) << dir.status();
  auto zero = load_checkpoint("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("/dev/zero is a character device"), std::string::npos) << zero.status();
  const std::string fifo = Temp("ckpt.fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto f = load_checkpoint(fifo);  // with no writer: returns, does not wait
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(fifo + " is a FIFO, not a regular file"), std::string::npos) << f.status();
  std::remove(fifo.c_str());
}

// A checkpoint at or past the run's last step leaves nothing to train: an error, not a run of no steps.
TEST_F(CheckpointTest, ResumingPastTheEndIsAnError) {
  samples::SampleConfig cfg;
  cfg.steps = 3;
  cfg.batch = cfg.batch_after = 8;
  cfg.save_path = Temp("end.safetensors");
  ASSERT_TRUE(samples::RunMlp(cfg).ok());
  cfg.init_path = cfg.save_path;
  cfg.save_path.clear();
  auto r = samples::RunMlp(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("resumes at step 3 but the run ends before step 3 (--steps)"), std::string::npos)
      << r.status();
  cfg.steps = 10;
  cfg.stop_at = 2;
  r = samples::RunMlp(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ends before step 2 (--stop-at)"), std::string::npos) << r.status();
  cfg.stop_at = -1;
  r = samples::RunMlp(cfg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first_step, 3);
  std::remove(cfg.init_path.c_str());
}

// Training 20 steps equals training 10, saving, and resuming for 10 more.
TEST_F(CheckpointTest, ResumeIsBitForBit) {
  Shutdown();
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 2}).ok());
  samples::SampleConfig cfg;
  cfg.mesh = {2, 1};
  cfg.steps = 14;
  cfg.change_step = 10;
  cfg.batch = 16;
  cfg.batch_after = 12;
  auto full = samples::RunMlp(cfg);
  ASSERT_TRUE(full.ok()) << full.status();

  std::string path = Temp("resume.safetensors");
  samples::SampleConfig first = cfg;
  first.steps = 7;
  first.save_path = path;
  ASSERT_TRUE(samples::RunMlp(first).ok());
  samples::SampleConfig second = cfg;
  second.init_path = path;
  auto rest = samples::RunMlp(second);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->first_step, 7);
  ASSERT_EQ(rest->losses.size(), 7u);
  for (size_t k = 0; k < rest->losses.size(); ++k)
    EXPECT_EQ(rest->losses[k], full->losses[7 + k]) << "step " << 7 + k;  // exactly equal
  std::remove(path.c_str());
}

}  // namespace
}  // namespace shardscope
