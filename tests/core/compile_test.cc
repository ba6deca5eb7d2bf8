// host_call runs C++ on host values between graphs, naming its line when the
// function fails; compile() refuses a step function that produces more
// distinct graphs than allowed, saying how the newest one differs.
#include "core/compile.h"

#include "absl/strings/match.h"
#include "core/context.h"
#include "core/lazy.h"
#include "core/ops.h"
#include "gtest/gtest.h"

namespace shardscope {
namespace {

Literal F32(std::vector<int64_t> dims, std::vector<float> v) { return Literal::FromF32(std::move(dims), v); }

class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1}).ok()); }
  void TearDown() override { Shutdown(); }
};

TEST_F(CompileTest, HostCallRunsCppOnValuesBetweenGraphs) {
  Tensor x = Tensor::from_host(F32({4}, {3, 1, 4, 1}), "x");
  Tensor doubled = x * x;
  // A sort: no op for it, so it runs on the host.
  auto sorted = host_call(
      [](const std::vector<Literal>& in) -> absl::StatusOr<std::vector<Literal>> {
        std::vector<float> v = in[0].ToF32Vector();
        std::sort(v.begin(), v.end());
        return std::vector<Literal>{Literal::FromF32({4}, v)};
      },
      {doubled});
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  Tensor y = add((*sorted)[0], 1.0);
  auto v = y.to_host();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->ToF32Vector(), (std::vector<float>{2, 2, 10, 17}));
  const int line = __LINE__ + 1;
  auto failed = host_call([](const std::vector<Literal>&) -> absl::StatusOr<std::vector<Literal>> {
    return absl::InvalidArgumentError("no can do"); }, {x});
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::StrContains(failed.status().message(), absl::StrCat("compile_test.cc:", line, ": no can do")))
      << failed.status();
}

TEST_F(CompileTest, GuardRefusesTooManyDistinctGraphs) {
  int64_t rows = 4;
  Tensor out;
  auto step = compile(
      [&]() -> absl::Status {
        Tensor x = Tensor::from_host(Literal::FromF32({rows, 2}, std::vector<float>(rows * 2, 1.f)), "x");
        out = sum(x * x);
        return absl::OkStatus();
      },
      {.name = "train_step", .max_different_graphs = 2});
  ASSERT_TRUE(step().ok());
  ASSERT_TRUE(step().ok());  // the same graph again
  EXPECT_EQ(step.distinct_graphs(), 1);
  rows = 6;
  ASSERT_TRUE(step().ok());  // a second graph: allowed
  rows = 8;
  absl::Status third = step();
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(third.message(), "'train_step' produced 3 distinct graphs, more than "
                                                 "max_different_graphs = 2"))
      << third;
  EXPECT_TRUE(absl::StrContains(third.message(), "input_shape_changed")) << third;
  EXPECT_TRUE(absl::StrContains(third.message(), "-> f32[8,2]")) << third;  // against the nearest earlier graph
}

// With room for one program, alternating two graphs evicts each: the third
// step recompiles the first graph, and says it was evicted.
TEST(CacheEvictionTest, RecompilingAnEvictedGraphSaysSo) {
  ASSERT_TRUE(Init({.num_hosts = 1, .chips_per_host = 1, .cache_capacity = 1}).ok());
  std::vector<std::string> causes;
  for (int64_t rows : {4, 6, 4}) {  // one call site: the same line and stack each time
    Tensor x = Tensor::from_host(Literal::FromF32({rows, 2}, std::vector<float>(rows * 2, 1.f)), "x");
    Tensor y = sum(x * x);
    ASSERT_TRUE(mark_step().ok());
    causes.push_back(internal::Ctx().last_cut.cause_kind);
  }
  EXPECT_EQ(causes, (std::vector<std::string>{"first_compile", "input_shape_changed", "cache_evicted"}));
  EXPECT_TRUE(internal::Ctx().last_cut.compiled);
  EXPECT_EQ(internal::Ctx().last_cut.cause_kind, "cache_evicted");
  EXPECT_TRUE(absl::StrContains(internal::Ctx().last_cut.cause_detail, "keeps 1 program)")) << internal::Ctx().last_cut.cause_detail;
  EXPECT_EQ(GetClient().cache_size(), 1u);
  Shutdown();
}

}  // namespace
}  // namespace shardscope
