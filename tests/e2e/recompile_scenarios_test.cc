// Recompilation scenarios, part 1: what the inputs and the reads of a training
// loop do to compilation. Each TEST is a short loop as a user writes one (an
// MLP, a small CNN, a tiny transformer), recorded into a database as
// `shardscope run` records it; the misses read back must carry the contract's
// kind, subkind, the user's line (captured with __LINE__ on that line) and
// the words of the detail. See recompile_scenarios.h.
//
// Here: first_compile, input_shape_changed (rank included), input_dtype_changed,
// input_sharding_changed (a mesh change that moves an input included),
// inlined_scalar_changed (stopped or started being inlined included),
// data_dependent_shape, value_read_cut and graph_changed/cut_on_some_steps.
#include "tests/e2e/recompile_scenarios.h"

#include <nlohmann/json.hpp>

#include "profiler/analysis/recompiles.h"
#include "store/reader.h"

namespace shardscope {
namespace {

using scen::ExpectMisses;
using scen::Ids;
using scen::MakeMesh;
using scen::Mask;
using scen::Rand;
using scen::Record;
using scen::Recorded;

const std::string kFile = scen::RepoPath(__FILE__);

// The store has the cause_subkind column every scenario reads.
TEST(RecompileScenarios, StoreHasTheCauseSubkindColumn) {
  Recorded r = Record("subkind_column", 1, [] {
    Tensor x = Tensor::from_host(Rand({2, 2}, 0), "x");
    Tensor y = exp(x);
    SS_OK(mark_step());
  });
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.has_subkind_column) << "compilations has no cause_subkind column";
}

// Source files are recorded relative to the repository root, however the
// build spells __FILE__ (e.g. ccache's CCACHE_BASEDIR makes it "../tests/...").
TEST(RecompileScenarios, SourceFilesAreRepoRelative) {
  int at_step = 0;
  Recorded r = Record("repo_relative", 1, [&] {
    Tensor x = Tensor::from_host(Rand({2, 2}, 0), "x");
    Tensor y = exp(x);
    SS_OK(mark_step()); at_step = __LINE__;
  });
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.misses.size(), 1u) << r.Dump();
  EXPECT_EQ(r.misses[0].file, "tests/e2e/recompile_scenarios_test.cc");
  EXPECT_EQ(r.misses[0].line, at_step);
}

// ---------------------------------------------------------------- first_compile

TEST(RecompileScenarios, FirstCompile_MlpWithSgd) {
  int at_step = 0;
  Recorded r = Record("first_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

TEST(RecompileScenarios, FirstCompile_CnnWithMomentum) {
  int at_step = 0;
  Recorded r = Record("first_cnn", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::MaxPool2d pool(2);
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05, .momentum = 0.9});
    for (int step = 0; step < 3; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor logits = fc(reshape(pool(relu(conv(images))), {4, 128}));
      SS_OK(backward(cross_entropy(logits, labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

TEST(RecompileScenarios, FirstCompile_TransformerWithAdamWOnTwoChips) {
  int at_step = 0;
  Recorded r = Record("first_transformer", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2}, {"data"});
    nn::Embedding tok(32, 16, "tok");
    nn::LayerNorm norm(16, "norm");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, norm, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 3; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 50), "targets");
      SS_OK(mark_sharding(tokens, mesh, {"data", none}));
      Tensor e = tok(tokens);
      Tensor h = e + attn(norm(e));
      Tensor loss = cross_entropy(reshape(head(h), {16, 32}), targets);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// ---------------------------------------------------------------- input_shape_changed

// The last batch of an epoch is smaller; the next epoch's full batch hits again.
TEST(RecompileScenarios, InputShape_AutoencoderLastBatchSmaller) {
  int at_x = 0, at_step = 0;
  Recorded r = Record("shape_autoencoder", 1, [&] {
    nn::Linear enc(16, 4, "enc"), dec(4, 16, "dec");
    optim::SGD opt(parameters(enc, dec), {.lr = 0.1});
    const int64_t batch[] = {8, 8, 8, 5, 8};
    for (int step = 0; step < 5; ++step) {
      Tensor x = Tensor::from_host(Rand({batch[step], 16}, step), "x"); at_x = __LINE__;
      Tensor loss = mse_loss(dec(tanh(enc(x))), x);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {3, "input_shape_changed", "", at_x, {"x", "f32[8,16]", "f32[5,16]"}}});
}

// Images and labels both shrink (made on one line): the detail names both.
TEST(RecompileScenarios, InputShape_ClassifierBatchShrinksForImagesAndLabels) {
  int at_xy = 0, at_step = 0;
  Recorded r = Record("shape_classifier", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::AdamW opt(parameters(l1, l2), {.lr = 1e-2});
    for (int step = 0; step < 4; ++step) {
      const int64_t b = step < 2 ? 8 : 6;
      Tensor x = Tensor::from_host(Rand({b, 16}, step), "x"), y = Tensor::from_host(Ids({b}, 4, step), "y"); at_xy = __LINE__;
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_shape_changed", "", at_xy, {"x", "f32[8,16]", "f32[6,16]", "i32[6]"}}});
}

// A longer sequence: attention, RoPE and the causal mask all change shape.
TEST(RecompileScenarios, InputShape_TransformerSequenceGrows) {
  int at_tokens = 0, at_step = 0;
  Recorded r = Record("shape_transformer", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 4; ++step) {
      const int64_t t = step < 2 ? 8 : 12;
      Tensor tokens = Tensor::from_host(Ids({2, t}, 32, step), "tokens"), targets = Tensor::from_host(Ids({2 * t}, 32, step), "targets"); at_tokens = __LINE__;
      Tensor e = tok(tokens);
      Tensor h = e + attn(e);
      Tensor loss = cross_entropy(reshape(head(h), {2 * t, 32}), targets);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_shape_changed", "", at_tokens, {"tokens", "i32[2,8]", "i32[2,12]"}}});
}

// The loader starts handing out [2, 4, 16] instead of [8, 16]: a rank change
// (Linear contracts the last dimension, so the program still runs).
TEST(RecompileScenarios, InputShape_RankChangesInAutoencoder) {
  int at_x = 0, at_step = 0;
  Recorded r = Record("shape_rank", 1, [&] {
    nn::Linear enc(16, 4, "enc"), dec(4, 16, "dec");
    optim::SGD opt(parameters(enc, dec), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      std::vector<int64_t> dims = step < 2 ? std::vector<int64_t>{8, 16} : std::vector<int64_t>{2, 4, 16};
      Tensor x = Tensor::from_host(Rand(dims, step), "x"); at_x = __LINE__;
      Tensor loss = mse_loss(dec(relu(enc(x))), x);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_shape_changed", "", at_x, {"x", "f32[8,16]", "f32[2,4,16]"}}});
}

// ---------------------------------------------------------------- input_dtype_changed

// The label loader switches to int64 (as torch's default integer type).
TEST(RecompileScenarios, InputDtype_LabelsBecomeInt64) {
  int at_y = 0, at_step = 0;
  Recorded r = Record("dtype_labels", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step, step < 2 ? DType::kI32 : DType::kI64), "y"); at_y = __LINE__;
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_dtype_changed", "", at_y, {"y", "i32[8]", "i64[8]"}}});
}

// Half-precision images, converted to f32 by the model: the loader moves from f16 to bf16.
TEST(RecompileScenarios, InputDtype_CnnImagesHalfToBfloat) {
  int at_x = 0, at_step = 0;
  Recorded r = Record("dtype_images", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
    for (int step = 0; step < 4; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step, step < 2 ? DType::kF16 : DType::kBF16), "images"); at_x = __LINE__;
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor h = max_pool2d(relu(conv(convert(images, DType::kF32))), 2);
      Tensor loss = cross_entropy(fc(reshape(h, {4, 128})), labels);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_dtype_changed", "", at_x, {"images", "f16[4,3,8,8]", "bf16[4,3,8,8]"}}});
}

// ---------------------------------------------------------------- input_sharding_changed

// Data parallelism switched on at step 2: the batch is split over 'data'.
TEST(RecompileScenarios, InputSharding_DataParallelTurnedOn) {
  int at_shard = 0, at_step = 0;
  Recorded r = Record("sharding_dp_on", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2}, {"data"});
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      at_shard = __LINE__; if (step >= 2) SS_OK(mark_sharding(x, mesh, {"data", none}));
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_sharding_changed", "", at_shard, {"x", "replicated", "devices=[2,1]"}}});
}

// The user reshapes the mesh from 4x1 to 2x2: the batch, split over 'data',
// is now split two ways and replicated over 'model'. An input's layout
// differs, so this is input_sharding_changed, not mesh_changed.
TEST(RecompileScenarios, InputSharding_MeshReshapeMovesTheBatch) {
  int at_shard = 0, at_step = 0;
  Recorded r = Record("sharding_mesh_reshape", 4, [&] {
    Mesh wide = MakeMesh({0, 1, 2, 3}, {4, 1}, {"data", "model"});
    Mesh square = MakeMesh({0, 1, 2, 3}, {2, 2}, {"data", "model"});
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      const Mesh& mesh = step < 2 ? wide : square;
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(mark_sharding(x, mesh, {"data", none})); at_shard = __LINE__;
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_sharding_changed", "", at_shard, {"x", "devices=[4,1]", "devices=[2,1,2]"}}});
}

// A parameter sharded FSDP-style from step 2 on. That step hands l1.bias and
// l2.weight back split too (propagated from l1.weight), so step 3 compiles
// once more for inputs made by opt.step(); then the loop is steady. Step 3 is
// blamed on the mark_sharding whose layout propagated, not on opt.step().
TEST(RecompileScenarios, InputSharding_WeightShardedMidRun) {
  int at_shard = 0, at_opt = 0, at_step = 0;
  Recorded r = Record("sharding_weight", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2}, {"data"});
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 6; ++step) {
      at_shard = __LINE__; if (step == 2) SS_OK(mark_sharding(l1.weight, mesh, {"data", none}));
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(opt.step()); at_opt = __LINE__;
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "input_sharding_changed", "", at_shard, {"l1.weight", "replicated", "devices=[2,1]"}},
                {3, "input_sharding_changed", "", at_shard,
                 {"l1.bias", "replicated", "layout from the mark_sharding of l1.weight",
                  absl::StrCat("made at :", at_opt, " in optim::SGD::step")}}});
}

// The weight is split before the loop, so step 1's l1.bias comes back from
// opt.step() split too (blamed on that mark_sharding, made at opt.step());
// its sharding is cleared in a helper at step 2: blamed on the
// clear_sharding, never on the mark_sharding that had split it (l1.bias
// keeps its own split layout from then on: no more compilations).
TEST(RecompileScenarios, InputSharding_ClearedInAHelperIsBlamedOnTheClear) {
  int at_shard = 0, at_clear = 0, at_opt = 0, at_step = 0;
  Recorded r = Record("sharding_cleared", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2}, {"data"});
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    SS_OK(mark_sharding(l1.weight, mesh, {"data", none})); at_shard = __LINE__;
    auto unshard = [&] { SS_OK(clear_sharding(l1.weight)); }; at_clear = __LINE__;
    for (int step = 0; step < 6; ++step) {
      if (step == 2) unshard();
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step()); at_opt = __LINE__;
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {1, "input_sharding_changed", "", at_shard,
                 {"layout from the mark_sharding of l1.weight", absl::StrCat("made at :", at_opt)}},
                {2, "input_sharding_changed", "", at_clear, {"l1.weight", "replicated", "clear_sharding at"}}});
}

// A second loop over the same step first runs the graph the first loop
// compiled (cache hits), then a smaller last batch: that is the input's new
// shape at the second loop's site, not a new call site.
TEST(RecompileScenarios, InputShape_ASecondLoopThatRanTheFirstLoopsGraphThenShrinks) {
  int at_x = 0, at_first = 0;
  Recorded r = Record("shape_second_site", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    auto step = [&](int s, int64_t batch) {
      Tensor x = Tensor::from_host(Rand({batch, 8}, s), "x"); at_x = __LINE__;
      Tensor y = Tensor::from_host(Ids({batch}, 4, s), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
    };
    for (int s = 0; s < 3; ++s) { step(s, 4); SS_OK(mark_step()); at_first = __LINE__; }
    for (int s = 3; s < 7; ++s) { step(s, s < 6 ? 4 : 2); SS_OK(mark_step()); }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_first},
                {6, "input_shape_changed", "", at_x, {"x", "f32[4,8] -> f32[2,8]"}}});
  // Two programs in the run, though the second site ran both: counted once each.
  auto reader = store::Reader::Open(r.db);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto report = analysis::BuildRecompilesReport(*reader, 1);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->distinct_graphs, 2);
  EXPECT_EQ(nlohmann::json::parse(analysis::RenderRecompilesJson(*report))["distinct_graphs"], 2);
}

// ---------------------------------------------------------------- inlined_scalar_changed

// A loss scale of 1 is inlined; from step 2 it decays (0.25, 0.17, 0.125),
// which is data: one recompile where it stopped being inlined, none after.
TEST(RecompileScenarios, InlinedScalar_LossScaleStopsBeingInlined) {
  int at_scale = 0, at_step = 0;
  Recorded r = Record("scalar_loss_scale", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 5; ++step) {
      const double scale = step < 2 ? 1.0 : 0.5 / step;
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      Tensor scaled = mul(loss, scale); at_scale = __LINE__;
      SS_OK(backward(scaled));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "inlined_scalar_changed", "", at_scale}});
}

// An auxiliary loss switched on by its weight going from 0 to 1 (both inlined).
TEST(RecompileScenarios, InlinedScalar_AuxLossWeightZeroToOneInTransformer) {
  int at_w = 0, at_step = 0;
  Recorded r = Record("scalar_aux_weight", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 4; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 9), "targets");
      Tensor e = tok(tokens);
      Tensor h = e + attn(e);
      Tensor ce = cross_entropy(reshape(head(h), {16, 32}), targets);
      Tensor w = Tensor::scalar(step < 2 ? 0.0 : 1.0); at_w = __LINE__;
      Tensor loss = ce + mul(w, mean(mul(h, h)));
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "inlined_scalar_changed", "", at_w}});
}

// A weight penalty annealed 0.3, 0.2, then 0: at 0 it starts being inlined.
TEST(RecompileScenarios, InlinedScalar_PenaltyAnnealedToZeroStartsBeingInlinedInCnn) {
  int at_penalty = 0, at_step = 0;
  Recorded r = Record("scalar_penalty_zero", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
    const double penalty[] = {0.3, 0.2, 0.0, 0.0};
    for (int step = 0; step < 4; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {4, 128}));
      Tensor l2 = sum(mul(conv.weight, conv.weight));
      Tensor loss = cross_entropy(logits, labels) + mul(l2, penalty[step]); at_penalty = __LINE__;
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "inlined_scalar_changed", "", at_penalty}});
}

// ---------------------------------------------------------------- data_dependent_shape

// A masked loss over the valid rows, picked with nonzero: 5, 5, 3, 5, 3 valid.
TEST(RecompileScenarios, DataDependent_MaskedLossInMlp) {
  int at_nonzero = 0, at_step = 0;
  Recorded r = Record("nonzero_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    const int64_t valid[] = {5, 5, 3, 5, 3};
    for (int step = 0; step < 5; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor mask = Tensor::from_host(Mask(8, valid[step]), "mask");
      Tensor per_example = neg(sum(mul(log_softmax(l2(relu(l1(x)))), one_hot(y, 4)), {1}, true));
      auto keep = nonzero(mask); at_nonzero = __LINE__;
      ASSERT_TRUE(keep.ok()) << keep.status();
      Tensor loss = mean(embedding_lookup(per_example, reshape(*keep, {keep->dim(0)})));
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "data_dependent_shape", "", at_nonzero, {"[5,1]", "[3,1]"}}});
}

// Images marked invalid by the loader are dropped with nonzero before the loss.
TEST(RecompileScenarios, DataDependent_ValidImagesInCnn) {
  int at_nonzero = 0, at_step = 0;
  Recorded r = Record("nonzero_cnn", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
    const int64_t valid[] = {4, 4, 2, 4, 2};
    for (int step = 0; step < 5; ++step) {
      Tensor ok = Tensor::from_host(Mask(4, valid[step]), "valid");
      auto keep = nonzero(ok); at_nonzero = __LINE__;
      ASSERT_TRUE(keep.ok()) << keep.status();
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {4, 128}));
      Tensor per_image = neg(sum(mul(log_softmax(logits), one_hot(labels, 4)), {1}, true));
      Tensor loss = mean(embedding_lookup(per_image, reshape(*keep, {keep->dim(0)})));
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "data_dependent_shape", "", at_nonzero, {"[4,1]", "[2,1]"}}});
}

// ---------------------------------------------------------------- value_read_cut

// Logging the loss every step before the update: two graphs per step, each compiled once.
TEST(RecompileScenarios, ValueRead_LossItemEveryStepInMlp) {
  int at_item = 0, at_step = 0;
  Recorded r = Record("read_item_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(loss.item()); at_item = __LINE__;
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "value_read_cut", "", at_item}, {0, "first_compile", "", at_step}});
}

// Accuracy computed on the host from the logits every step.
TEST(RecompileScenarios, ValueRead_LogitsToHostEveryStepInCnn) {
  int at_read = 0, at_step = 0;
  Recorded r = Record("read_to_host_cnn", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05, .momentum = 0.9});
    for (int step = 0; step < 4; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {4, 128}));
      SS_OK(backward(cross_entropy(logits, labels)));
      auto host_logits = logits.to_host(); at_read = __LINE__;
      ASSERT_TRUE(host_logits.ok()) << host_logits.status();
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "value_read_cut", "", at_read}, {0, "first_compile", "", at_step}});
}

// ---------------------------------------------------------------- graph_changed / cut_on_some_steps

// The loss is read every other step: the mark_step site alternates between
// the remainder of a cut step and the whole step, each compiled once.
TEST(RecompileScenarios, CutOnSomeSteps_LossReadEveryOtherStepInMlp) {
  int at_item = 0, at_step = 0;
  Recorded r = Record("cut_every_other", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 5; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      at_item = __LINE__; if (step % 2 == 0) SS_OK(loss.item());
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "value_read_cut", "", at_item},
                {0, "first_compile", "", at_step},
                {1, "graph_changed", "cut_on_some_steps", at_item}});
}

// An evaluation peek at the logits every third step (steps 2 and 5).
TEST(RecompileScenarios, CutOnSomeSteps_LogitsReadEveryThirdStepInTransformer) {
  int at_read = 0, at_step = 0;
  Recorded r = Record("cut_every_third", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 6; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 3), "targets");
      Tensor e = tok(tokens);
      Tensor logits = reshape(head(e + attn(e)), {16, 32});
      SS_OK(backward(cross_entropy(logits, targets)));
      at_read = __LINE__; if (step % 3 == 2) SS_OK(logits.to_host());
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "value_read_cut", "", at_read},
                {2, "graph_changed", "cut_on_some_steps", at_read}});
}

}  // namespace
}  // namespace shardscope
