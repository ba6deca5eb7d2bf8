// Recompilation scenarios, part 3: the loops that must NOT recompile (new data
// every step, a changing learning rate, code moved to other lines, the same
// step built in another order, train/eval alternation, gradient accumulation,
// changing scalars, dropout), and the causes that come from the caches and the
// compiler's options rather than the program: cache_evicted,
// disk_cache_unreadable, options_changed. See recompile_scenarios.h.
#include "tests/e2e/recompile_scenarios.h"

namespace shardscope {
namespace {

using scen::ExpectMissCount;
using scen::ExpectMisses;
using scen::Ids;
using scen::kAny;
using scen::MakeMesh;
using scen::Rand;
using scen::Record;
using scen::Recorded;

const std::string kFile = scen::RepoPath(__FILE__);

// ---------------------------------------------------------------- must not recompile

TEST(RecompileScenarios, Negative_NewDataEveryStep) {
  int at_step = 0;
  Recorded r = Record("neg_new_data", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 6; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, 1000 + step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, 1000 + step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// Four chips, images and labels split over 'data', new ones every step.
TEST(RecompileScenarios, Negative_NewShardedDataEveryStepOnFourChips) {
  int at_step = 0;
  Recorded r = Record("neg_new_sharded_data", 4, [&] {
    Mesh mesh = MakeMesh({0, 1, 2, 3}, {4}, {"data"});
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05, .momentum = 0.9});
    for (int step = 0; step < 5; ++step) {
      Tensor images = Tensor::from_host(Rand({8, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({8}, 4, step), "labels");
      SS_OK(mark_sharding(images, mesh, {"data", none, none, none}));
      SS_OK(mark_sharding(labels, mesh, {"data"}));
      Tensor logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {8, 128}));
      SS_OK(backward(cross_entropy(logits, labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// The learning rate changes every step and passes through 0 and 1, the two
// values Tensor::scalar would inline: the optimizer passes it as data.
TEST(RecompileScenarios, Negative_SgdLearningRateThroughZeroAndOne) {
  int at_step = 0;
  Recorded r = Record("neg_lr_sgd", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    const double lr[] = {0.0, 1.0, 0.5, 0.1, 0.0, 1.0};
    for (int step = 0; step < 6; ++step) {
      opt.set_lr(lr[step]);
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// AdamW under warmup and cosine decay: rate and bias corrections change every step.
TEST(RecompileScenarios, Negative_AdamWWarmupCosineInTransformer) {
  int at_step = 0;
  Recorded r = Record("neg_lr_adamw", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 0});
    optim::WarmupCosine schedule{.peak = 1e-3, .warmup_steps = 2, .total_steps = 6};
    for (int step = 0; step < 6; ++step) {
      opt.set_lr(schedule.at(step));
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 8), "targets");
      Tensor e = tok(tokens);
      SS_OK(backward(cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// The same loop written twice, laid out on other lines (the second as the
// user reformatted it): the second loop hits the cache from its first step.
TEST(RecompileScenarios, Negative_CodeMovedToOtherLines) {
  int at_step = 0;
  Recorded r = Record("neg_moved_lines", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 3; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x"), y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss)); SS_OK(opt.step()); SS_OK(mark_step()); at_step = __LINE__;
    }

    // Reformatted: one call per line, comments, blank lines.
    for (int step = 3; step < 6; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step),
                                   "x");

      Tensor y = Tensor::from_host(Ids({8}, 4, step),
                                   "y");
      // The model.
      Tensor loss = cross_entropy(
          l2(
              relu(
                  l1(x))),
          y);

      SS_OK(backward(loss));

      SS_OK(opt.step());

      SS_OK(mark_step());
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// One step written in two functions at different lines, called in turn.
TEST(RecompileScenarios, Negative_SameStepInTwoFunctions) {
  int at_step_a = 0;
  Recorded r = Record("neg_two_functions", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    auto step_a = [&](int step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step), "targets");
      Tensor e = tok(tokens);
      EXPECT_TRUE(backward(cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets)).ok());
      EXPECT_TRUE(opt.step().ok());
      EXPECT_TRUE(mark_step().ok()); at_step_a = __LINE__;
    };
    auto step_b = [&](int step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step), "targets");
      Tensor e = tok(tokens);
      {
        Tensor logits = reshape(head(e + attn(e)), {16, 32});
        EXPECT_TRUE(backward(cross_entropy(logits, targets)).ok());
      }
      EXPECT_TRUE(opt.step().ok());
      EXPECT_TRUE(mark_step().ok());
    };
    for (int step = 0; step < 6; ++step) step % 2 == 0 ? step_a(step) : step_b(step);
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step_a}});
}

// Two towers computed in one order on even steps, the other on odd steps.
TEST(RecompileScenarios, Negative_TowersBuiltInAnotherOrder) {
  int at_step = 0;
  Recorded r = Record("neg_order_towers", 1, [&] {
    nn::Linear tower_a(16, 8, "tower_a"), tower_b(16, 8, "tower_b"), head(16, 4, "head");
    optim::SGD opt(parameters(tower_a, tower_b, head), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor a, b;
      if (step % 2 == 0) {
        a = relu(tower_a(x));
        b = tanh(tower_b(x));
      } else {
        b = tanh(tower_b(x));
        a = relu(tower_a(x));
      }
      SS_OK(backward(cross_entropy(head(concatenate({a, b}, 1)), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// The loss terms (cross-entropy and a z-loss) computed in either order.
TEST(RecompileScenarios, Negative_LossTermsInAnotherOrderInTransformer) {
  int at_step = 0;
  Recorded r = Record("neg_order_losses", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 4; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 11), "targets");
      Tensor e = tok(tokens);
      Tensor logits = reshape(head(e + attn(e)), {16, 32});
      Tensor ce, z;
      if (step % 2 == 0) {
        ce = cross_entropy(logits, targets);
        z = mean(mul(logits, logits));
      } else {
        z = mean(mul(logits, logits));
        ce = cross_entropy(logits, targets);
      }
      SS_OK(backward(ce + mul(z, 1e-4)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// A train step and an evaluation step in turn: two graphs, each compiled once.
TEST(RecompileScenarios, Negative_TrainEvalAlternationInMlp) {
  int at_train = 0, at_eval = 0;
  Recorded r = Record("neg_train_eval_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int epoch = 0; epoch < 4; ++epoch) {
      Tensor x = Tensor::from_host(Rand({8, 16}, epoch), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, epoch), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_train = __LINE__;

      NoGradGuard no_grad;
      Tensor xe = Tensor::from_host(Rand({8, 16}, 500 + epoch), "x_eval");
      Tensor ye = Tensor::from_host(Ids({8}, 4, 500 + epoch), "y_eval");
      Tensor eval_loss = cross_entropy(l2(relu(l1(xe))), ye);
      SS_OK(mark_step()); at_eval = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_train}, {1, kAny, "", at_eval}});
}

// The CNN with BatchNorm and dropout switched between training and evaluation modes.
TEST(RecompileScenarios, Negative_TrainEvalAlternationInCnnWithBatchNormAndDropout) {
  int at_train = 0, at_eval = 0;
  Recorded r = Record("neg_train_eval_cnn", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, false, "conv");
    nn::BatchNorm2d bn(8, "bn");
    nn::Dropout drop(0.25, "drop");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, bn, fc), {.lr = 0.05, .momentum = 0.9});
    auto forward = [&](const Tensor& images, bool training) {
      bn.training = drop.training = training;
      Tensor h = max_pool2d(relu(bn(conv(images))), 2);
      return fc(drop(reshape(h, {4, 128})));
    };
    for (int epoch = 0; epoch < 3; ++epoch) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, epoch), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, epoch), "labels");
      SS_OK(backward(cross_entropy(forward(images, true), labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_train = __LINE__;

      NoGradGuard no_grad;
      Tensor eval_images = Tensor::from_host(Rand({4, 3, 8, 8}, 900 + epoch), "eval_images");
      Tensor eval_labels = Tensor::from_host(Ids({4}, 4, 900 + epoch), "eval_labels");
      Tensor eval_loss = cross_entropy(forward(eval_images, false), eval_labels);
      SS_OK(mark_step()); at_eval = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_train}, {1, kAny, "", at_eval}});
}

// Gradients accumulated over two micro-batches, one update per pair: the
// first cycle compiles its two graphs, every later cycle hits them.
TEST(RecompileScenarios, Negative_GradientAccumulationEveryTwoMicroBatches) {
  Recorded r = Record("neg_accumulate_two", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int micro = 0; micro < 8; ++micro) {
      Tensor x = Tensor::from_host(Rand({8, 16}, micro), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, micro), "y");
      SS_OK(backward(mul(cross_entropy(l2(relu(l1(x))), y), 0.5)));
      if (micro % 2 == 1) SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  scen::ExpectMissCount(r, 2, 1);
}

// AdamW over three micro-batches per update in the transformer: three graphs.
TEST(RecompileScenarios, Negative_GradientAccumulationEveryThreeWithAdamW) {
  Recorded r = Record("neg_accumulate_three", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int micro = 0; micro < 9; ++micro) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, micro), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, micro + 20), "targets");
      Tensor e = tok(tokens);
      Tensor loss = cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets);
      SS_OK(backward(mul(loss, 1.0 / 3)));
      if (micro % 3 == 2) SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  scen::ExpectMissCount(r, 3, 2);
}

// A loss scale that changes every step, never 0 or 1: always data.
TEST(RecompileScenarios, Negative_ChangingScalarsAreData) {
  int at_step = 0;
  Recorded r = Record("neg_scalars", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    const double scale[] = {0.5, 2.0, 0.25, 8.0, 3.0};
    for (int step = 0; step < 5; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor s = Tensor::scalar(scale[step]);
      SS_OK(backward(mul(cross_entropy(l2(relu(l1(x))), y), s)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// Dropout draws a new mask every step on the devices.
TEST(RecompileScenarios, Negative_DropoutNewMaskEveryStep) {
  int at_step = 0;
  Recorded r = Record("neg_dropout", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    nn::Dropout drop(0.2, "drop");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 5; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(drop(relu(l1(x)))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// ---------------------------------------------------------------- cache_evicted

// Train and eval graphs with room for one program: each evicts the other.
TEST(RecompileScenarios, CacheEvicted_TrainEvalWithCapacityOne) {
  int at_train = 0, at_eval = 0;
  InitOptions opts;
  opts.cache_capacity = 1;
  Recorded r = Record("evicted_train_eval", opts, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int epoch = 0; epoch < 3; ++epoch) {
      Tensor x = Tensor::from_host(Rand({8, 16}, epoch), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, epoch), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_train = __LINE__;

      NoGradGuard no_grad;
      Tensor xe = Tensor::from_host(Rand({8, 16}, 700 + epoch), "x_eval");
      Tensor eval_logits = l2(relu(l1(xe)));
      SS_OK(mark_step()); at_eval = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_train},
                {1, kAny, "", at_eval},
                {2, "cache_evicted", "", at_train},
                {3, "cache_evicted", "", at_eval},
                {4, "cache_evicted", "", at_train},
                {5, "cache_evicted", "", at_eval}});
}

// Batches of 8, 6, 4 in a cycle with room for two programs.
TEST(RecompileScenarios, CacheEvicted_CyclingBatchSizesWithCapacityTwo) {
  int at_x = 0, at_step = 0;
  InitOptions opts;
  opts.cache_capacity = 2;
  Recorded r = Record("evicted_cycle", opts, [&] {
    nn::Linear enc(16, 4, "enc"), dec(4, 16, "dec");
    optim::SGD opt(parameters(enc, dec), {.lr = 0.1});
    const int64_t batch[] = {8, 6, 4, 8, 6, 4};
    for (int step = 0; step < 6; ++step) {
      Tensor x = Tensor::from_host(Rand({batch[step], 16}, step), "x"); at_x = __LINE__;
      SS_OK(backward(mse_loss(dec(tanh(enc(x))), x)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {1, "input_shape_changed", "", at_x, {"x", "f32[8,16]", "f32[6,16]"}},
                {2, "input_shape_changed", "", at_x, {"x", "f32[4,16]"}},
                {3, "cache_evicted", "", at_step},
                {4, "cache_evicted", "", at_step},
                {5, "cache_evicted", "", at_step}});
}

// ---------------------------------------------------------------- disk_cache_unreadable

// Damages every entry of a compile-cache directory.
void DamageEntries(const std::string& dir) {
  int damaged = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ofstream(e.path(), std::ios::trunc) << "{\"version\": 7";
    ++damaged;
  }
  EXPECT_GT(damaged, 0) << "nothing stored in " << dir;
}

std::string FreshDir(const std::string& name) {
  std::string dir = scen::TempPath(name, "_cache");
  std::filesystem::remove_all(dir);
  return dir;
}

// A second process finds the first one's stored program damaged.
TEST(RecompileScenarios, DiskCacheUnreadable_MlpSecondRun) {
  int at_step = 0;
  const std::string dir = FreshDir("disk_mlp");
  InitOptions opts;
  opts.cache_dir = dir;
  auto program = [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 3; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  };
  Recorded fill = Record("disk_mlp_fill", opts, program);
  ExpectMisses(fill, kFile, {{0, "first_compile", "", at_step}});
  DamageEntries(dir);
  Recorded r = Record("disk_mlp", opts, program);
  ExpectMisses(r, kFile, {{0, "disk_cache_unreadable", "", at_step, {dir}}});
  std::filesystem::remove_all(dir);
}

// Both programs of a train/eval loop stored, both damaged.
TEST(RecompileScenarios, DiskCacheUnreadable_CnnTrainAndEval) {
  int at_train = 0, at_eval = 0;
  const std::string dir = FreshDir("disk_cnn");
  InitOptions opts;
  opts.cache_dir = dir;
  auto program = [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
    for (int epoch = 0; epoch < 2; ++epoch) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, epoch), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, epoch), "labels");
      SS_OK(backward(cross_entropy(fc(reshape(max_pool2d(relu(conv(images)), 2), {4, 128})), labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_train = __LINE__;
      NoGradGuard no_grad;
      Tensor eval_images = Tensor::from_host(Rand({4, 3, 8, 8}, 40 + epoch), "eval_images");
      Tensor eval_logits = fc(reshape(max_pool2d(relu(conv(eval_images)), 2), {4, 128}));
      SS_OK(mark_step()); at_eval = __LINE__;
    }
  };
  Recorded fill = Record("disk_cnn_fill", opts, program);
  ExpectMisses(fill, kFile, {{0, "first_compile", "", at_train}, {1, kAny, "", at_eval}});
  DamageEntries(dir);
  Recorded r = Record("disk_cnn", opts, program);
  ExpectMisses(r, kFile,
               {{0, "disk_cache_unreadable", "", at_train, {dir}}, {1, "disk_cache_unreadable", "", at_eval, {dir}}});
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------- options_changed

// Fusion turned off for two steps (to compare kernels), then on again (a hit).
TEST(RecompileScenarios, OptionsChanged_FusionTurnedOffInMlp) {
  int at_step = 0;
  Recorded r = Record("options_fusion_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 5; ++step) {
      if (step == 2) GetClient().set_fusion(false);
      if (step == 4) GetClient().set_fusion(true);
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "options_changed", "", at_step, {"fusion"}}});
}

// The same in the transformer, from step 3 on.
TEST(RecompileScenarios, OptionsChanged_FusionTurnedOffInTransformer) {
  int at_step = 0;
  Recorded r = Record("options_fusion_transformer", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 5; ++step) {
      if (step == 3) GetClient().set_fusion(false);
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 12), "targets");
      Tensor e = tok(tokens);
      SS_OK(backward(cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {3, "options_changed", "", at_step, {"fusion"}}});
}

}  // namespace
}  // namespace shardscope
