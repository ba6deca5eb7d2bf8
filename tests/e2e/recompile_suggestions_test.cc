// Suggestions applied: each training loop is recorded as written, then as the
// suggestion of `recompiles` says to write it; the compilations and program
// runs it saves must be what the suggestion predicted (from the first run's
// store alone). The samples' cases (padding, reading every N steps or after
// mark_step, the cache capacity) are in recompiles_test.cc; these are loops
// written here, as users write them.
#include <memory>
#include <string>

#include "profiler/analysis/recompiles.h"
#include "store/reader.h"
#include "tests/e2e/recompile_scenarios.h"

namespace shardscope {
namespace {

using scen::Ids;
using scen::Rand;
using scen::Record;
using scen::Recorded;

// The suggestion of `kind` in the run's recompiles report (the first one).
analysis::Suggestion SuggestionOf(const Recorded& r, const std::string& kind) {
  auto reader = store::Reader::Open(r.db);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  auto run = reader->LatestRunId();
  auto report = analysis::BuildRecompilesReport(*reader, *run);
  EXPECT_TRUE(report.ok()) << report.status();
  if (!report.ok()) return {};
  for (const auto& site : report->sites)
    for (const auto& g : site.suggestions)
      if (g.kind == kind) return g;
  ADD_FAILURE() << "no " << kind << " suggestion in\n" << analysis::RenderRecompilesText(*report);
  return {};
}

int64_t Executions(const Recorded& r) {
  auto reader = store::Reader::Open(r.db);
  auto q = reader->Query("SELECT COUNT(*) AS n FROM executions");
  return q.ok() ? q->Int(0, "n") : -1;
}

// A penalty weight annealed 0.5, 0, 1, 0.25, 0: the scalar rule inlines 0 and
// 1, so the graph changes as the weight crosses it. As a tensor its value is
// data: one graph.
TEST(RecompileSuggestions, ScalarAsTensorSavesWhatItPredicts) {
  const double weights[] = {0.5, 0.0, 1.0, 0.25, 0.0, 1.0};
  auto loop = [&](bool as_tensor) {
    return Record(as_tensor ? "suggest_scalar_tensor" : "suggest_scalar_inline", 1, [&] {
      nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
      optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
      for (int step = 0; step < 6; ++step) {
        Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
        Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
        Tensor h = relu(l1(x));
        Tensor penalty = sum(mul(h, h));
        Tensor w = as_tensor ? Tensor::from_host(Literal::Scalar(DType::kF32, weights[step]), "penalty_weight")
                             : Tensor::scalar(weights[step]);
        Tensor loss = cross_entropy(l2(h), y) + mul(penalty, w);
        ASSERT_TRUE(backward(loss).ok());
        ASSERT_TRUE(opt.step().ok());
        ASSERT_TRUE(mark_step().ok());
      }
    });
  };
  Recorded inline_run = loop(false), tensor_run = loop(true);
  ASSERT_TRUE(inline_run.ok && tensor_run.ok);
  analysis::Suggestion g = SuggestionOf(inline_run, "scalar_as_tensor");
  EXPECT_GT(g.compilations_saved, 0) << g.text;
  EXPECT_EQ(static_cast<int64_t>(inline_run.misses.size() - tensor_run.misses.size()), g.compilations_saved)
      << g.text << "\n" << inline_run.Dump() << tensor_run.Dump();
  EXPECT_EQ(Executions(inline_run) - Executions(tensor_run), g.executions_saved);
}

// A CNN fed the last, smaller batches of its epochs (8, 6, 5, 8, 3, 6 images):
// the suggestion pads each batch to its power-of-two bucket (3 -> 4, the rest
// -> 8); applied, the loop compiles once per bucket.
TEST(RecompileSuggestions, PaddingACnnsBatchSavesWhatItPredicts) {
  const int64_t batches[] = {8, 6, 5, 8, 3, 6};
  auto loop = [&](bool padded) {
    return Record(padded ? "suggest_pad_cnn_padded" : "suggest_pad_cnn", 1, [&] {
      nn::Conv2d conv(3, 4, 3, 1, 1, true, "conv");
      nn::Linear fc(4 * 4 * 4, 4, "fc");
      optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
      for (int step = 0; step < 6; ++step) {
        const int64_t n = padded ? analysis::PowerOfTwoBucket(batches[step]) : batches[step];
        Tensor images = Tensor::from_host(Rand({n, 3, 8, 8}, step), "images");
        Tensor labels = Tensor::from_host(Ids({n}, 4, step), "labels");
        Tensor logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {n, 64}));
        ASSERT_TRUE(backward(cross_entropy(logits, labels)).ok());
        ASSERT_TRUE(opt.step().ok());
        ASSERT_TRUE(mark_step().ok());
      }
    });
  };
  Recorded churn = loop(false), padded = loop(true);
  ASSERT_TRUE(churn.ok && padded.ok);
  analysis::Suggestion g = SuggestionOf(churn, "pad_shapes");
  EXPECT_GT(g.compilations_saved, 0) << g.text;
  EXPECT_EQ(static_cast<int64_t>(churn.misses.size() - padded.misses.size()), g.compilations_saved)
      << g.text << "\n" << churn.Dump() << padded.Dump();
  EXPECT_EQ(Executions(churn) - Executions(padded), g.executions_saved);
}

// Gradient accumulation over 3 micro-batches, the loss read after each one's
// backward: 3 cuts a step, each one more program run. Read only on steps 0
// and 10 (every micro-batch), as the suggestion says, the loop saves 3 runs a
// step on the other 10 steps, and the suggestion predicts that, not 1 a step.
TEST(RecompileSuggestions, ReadingEveryMicroBatchEveryNStepsSavesWhatItPredicts) {
  auto loop = [&](bool every_step) {
    return Record(every_step ? "suggest_micro_read_all" : "suggest_micro_read_tenth", 1, [&] {
      nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
      optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
      for (int step = 0; step < 12; ++step) {
        for (int m = 0; m < 3; ++m) {
          Tensor x = Tensor::from_host(Rand({4, 8}, step * 3 + m), "x");
          Tensor y = Tensor::from_host(Ids({4}, 4, step * 3 + m), "y");
          Tensor loss = cross_entropy(l2(relu(l1(x))), y);
          ASSERT_TRUE(backward(loss).ok());
          if (every_step || step % 10 == 0) ASSERT_TRUE(loss.item().ok());
        }
        ASSERT_TRUE(opt.step().ok());
        ASSERT_TRUE(mark_step().ok());
      }
    });
  };
  Recorded all = loop(true), tenth = loop(false);
  ASSERT_TRUE(all.ok && tenth.ok);
  analysis::Suggestion g = SuggestionOf(all, "read_every_n");
  EXPECT_EQ(g.executions_saved, 30) << g.text;
  EXPECT_EQ(Executions(all) - Executions(tenth), g.executions_saved) << g.text;
  EXPECT_NE(g.text.find("cut the graph 36 times in 12 of 12 steps"), std::string::npos) << g.text;
}

// A model resized by its config at step 3 (a new layer of another width):
// nothing to pad, and the advice says so instead of saying nothing; a
// bucketed batch (data) gets none (RecompilesE2e.StormBucketsSaveWhatTheSuggestionPredicts).
TEST(RecompileSuggestions, AResizedModelGetsAdviceButNoSaving) {
  Recorded r = Record("suggest_resized", 1, [&] {
    auto l1 = std::make_unique<nn::Linear>(8, 16, "l1");
    auto l2 = std::make_unique<nn::Linear>(16, 1, "l2");
    for (int step = 0; step < 5; ++step) {
      if (step == 3) {
        l1 = std::make_unique<nn::Linear>(8, 32, "l1");
        l2 = std::make_unique<nn::Linear>(32, 1, "l2");
      }
      optim::SGD opt(parameters(*l1, *l2), {.lr = 0.1});
      Tensor x = Tensor::from_host(Rand({4, 8}, step), "x");
      ASSERT_TRUE(backward(mse_loss((*l2)(relu((*l1)(x))), Tensor::from_host(Rand({4, 1}, step + 3), "y"))).ok());
      ASSERT_TRUE(opt.step().ok());
      ASSERT_TRUE(mark_step().ok());
    }
  });
  ASSERT_TRUE(r.ok);
  analysis::Suggestion g = SuggestionOf(r, "input_shape_changed");
  EXPECT_NE(g.text.find("a trained parameter's shape changed"), std::string::npos) << g.text;
  EXPECT_EQ(g.compilations_saved, -1) << g.text;
}

}  // namespace
}  // namespace shardscope
