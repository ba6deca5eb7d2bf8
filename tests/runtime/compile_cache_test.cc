// The persistent compile cache (runtime/compile_cache.h): a second client
// with the same directory compiles nothing and runs the same program; a
// different option misses; a damaged entry is reported, removed and
// recompiled; an unwritable directory is a clear error.
#include "runtime/compile_cache.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "compiler/text.h"
#include "gtest/gtest.h"

namespace shardscope::runtime {
namespace {

using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/compile_cache_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

std::unique_ptr<Client> MakeClient(const std::string& dir) {
  auto c = Client::Create({.num_hosts = 1, .chips_per_host = 2});
  EXPECT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->SetCacheDir(dir).ok());
  return std::move(*c);
}

// x [4, 3] split over two chips, summed over its rows: an all-reduce.
std::unique_ptr<Module> RowSum() {
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(DType::kF32, {4, 3}), "x");
  x->sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  m->AddOutput(m->Reduce(m->Unary(Opcode::kExponential, x), m->ScalarConstant(DType::kF32, 0), {0},
                         compiler::ReduceKind::kSum));
  return m;
}

std::vector<float> RunOnce(Client& c, const CompileResult& r) {
  auto x = c.TransferToDevices(Literal::FromF32({4, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
                               *Sharding::Parse("{devices=[2,1]0,1}"), "x");
  EXPECT_TRUE(x.ok()) << x.status();
  auto out = c.Execute(*r.executable, {&*x}, {});
  EXPECT_TRUE(out.ok()) << out.status();
  auto host = c.TransferToHost((*out)[0]);
  EXPECT_TRUE(host.ok()) << host.status();
  return host->ToF32Vector();
}

TEST(CompileCacheTest, ASecondClientCompilesNothing) {
  const std::string dir = FreshDir("second");
  auto first = MakeClient(dir);
  auto a = first->Compile(*RowSum());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->cache, CacheOutcome::kMiss);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  auto second = MakeClient(dir);
  auto b = second->Compile(*RowSum());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->cache, CacheOutcome::kDiskHit);
  EXPECT_EQ(second->disk_cache()->hits(), 1);
  EXPECT_EQ(compiler::PrintModule(*b->executable->program), compiler::PrintModule(*a->executable->program));
  EXPECT_EQ(b->executable->param_shardings, a->executable->param_shardings);
  EXPECT_EQ(b->executable->sharding.decisions.size(), a->executable->sharding.decisions.size());
  EXPECT_EQ(RunOnce(*second, *b), RunOnce(*first, *a));
  // Within the process, the memory cache answers first.
  auto again = second->Compile(*RowSum());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cache, CacheOutcome::kMemoryHit);
}

TEST(CompileCacheTest, AnotherOptionIsAMissNeverAStaleHit) {
  const std::string dir = FreshDir("options");
  auto fused = MakeClient(dir);
  ASSERT_TRUE(fused->Compile(*RowSum()).ok());
  auto unfused = MakeClient(dir);
  unfused->set_fusion(false);
  auto r = unfused->Compile(*RowSum());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cache, CacheOutcome::kMiss);
  auto profiled = MakeClient(dir);  // another target profile
  ASSERT_TRUE(profiled->SetProfile("tpu-v4").ok());
  auto p = profiled->Compile(*RowSum());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->cache, CacheOutcome::kMiss);
  auto four = Client::Create({.num_hosts = 2, .chips_per_host = 1});  // two chips, on two hosts
  ASSERT_TRUE(four.ok());
  ASSERT_TRUE((*four)->SetCacheDir(dir).ok());
  auto h = (*four)->Compile(*RowSum());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->cache, CacheOutcome::kMiss);
}

TEST(CompileCacheTest, DamagedEntryIsRemovedAndRecompiled) {
  const std::string dir = FreshDir("damaged");
  auto first = MakeClient(dir);
  auto a = first->Compile(*RowSum());
  ASSERT_TRUE(a.ok());
  const auto entry = std::filesystem::directory_iterator(dir)->path();
  {
    std::ofstream out(entry, std::ios::trunc);
    out << "{\"version\": \"not json";
  }
  auto second = MakeClient(dir);
  auto b = second->Compile(*RowSum());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->cache, CacheOutcome::kMiss);
  EXPECT_TRUE(absl::StrContains(b->disk_error, "is unreadable")) << b->disk_error;
  EXPECT_EQ(second->disk_cache()->unreadable(), 1);
  EXPECT_EQ(RunOnce(*second, *b), RunOnce(*first, *a));
  auto third = MakeClient(dir);  // the entry was written again, whole
  auto c = third->Compile(*RowSum());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cache, CacheOutcome::kDiskHit);
}

TEST(CompileCacheTest, UnusableDirectoryIsAClearError) {
  const std::string file = FreshDir("file");
  { std::ofstream(file) << "x"; }
  auto c = Client::Create({.num_hosts = 1, .chips_per_host = 1});
  ASSERT_TRUE(c.ok());
  absl::Status s = (*c)->SetCacheDir(file);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "cannot be created")) << s;
}

}  // namespace
}  // namespace shardscope::runtime
