// Checkpoints: safetensors written and read back bit for bit, clear errors on
// damaged files, and a training run resumed from a checkpoint that continues
// exactly as the uninterrupted run did.
#include "core/checkpoint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

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
