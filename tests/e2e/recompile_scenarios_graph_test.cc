// Recompilation scenarios, part 2: structural changes of a training step
// (graph_changed and its subkinds: ops_changed, layer_added, layer_removed,
// optimizer_changed, parameter_frozen, parameter_unfrozen, constraint_changed,
// autocast_changed), and the two causes outside the graph's own code:
// mesh_changed and call_site_changed. See recompile_scenarios.h.
//
// The line of a structural change is the user's line of the first differing
// op; an op made inside a library call (opt.step(), clip_grad_norm, a layer's
// forward) is blamed on the user's line that called it.
#include "gmock/gmock.h"
#include "tests/e2e/recompile_scenarios.h"

namespace shardscope {
namespace {

using scen::ExpectMisses;
using scen::Ids;
using scen::MakeMesh;
using scen::Rand;
using scen::Record;
using scen::Recorded;
using ::testing::HasSubstr;

const std::string kFile = scen::RepoPath(__FILE__);

// ---------------------------------------------------------------- ops_changed

// A host-side branch picks the activation: relu for two steps, then tanh.
TEST(RecompileScenarios, OpsChanged_ActivationBranchInMlp) {
  int at_act = 0, at_step = 0;
  Recorded r = Record("ops_activation", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor h = step < 2 ? relu(l1(x)) : tanh(l1(x)); at_act = __LINE__;
      Tensor loss = cross_entropy(l2(h), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "graph_changed", "ops_changed", at_act}});
}

// The loss is switched from cross-entropy to a squared error on the probabilities.
TEST(RecompileScenarios, OpsChanged_LossSwitchedToMse) {
  int at_mse = 0, at_step = 0;
  Recorded r = Record("ops_loss", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::AdamW opt(parameters(l1, l2), {.lr = 1e-2});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor logits = l2(relu(l1(x)));
      Tensor loss;
      if (step < 2) loss = cross_entropy(logits, y);
      at_mse = __LINE__; if (step >= 2) loss = mse_loss(softmax(logits), one_hot(y, 4));
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "graph_changed", "ops_changed", at_mse}});
}

// A flag of a library layer changes what its forward builds: the attention
// stops being causal. Blamed on the user's line that called the layer.
TEST(RecompileScenarios, OpsChanged_AttentionMadeNonCausalInsideTheLayer) {
  int at_attn = 0, at_step = 0;
  Recorded r = Record("ops_causal", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 4; ++step) {
      attn.causal = step < 2;
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 5), "targets");
      Tensor e = tok(tokens);
      Tensor h = e + attn(e); at_attn = __LINE__;
      Tensor loss = cross_entropy(reshape(head(h), {16, 32}), targets);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "graph_changed", "ops_changed", at_attn, {"attn"}}});
}

// Gradient clipping turned on at step 2: its ops are made inside
// clip_grad_norm, blamed on the line that called it.
TEST(RecompileScenarios, OpsChanged_GradientClippingAddedByALibraryCall) {
  int at_clip = 0, at_step = 0;
  Recorded r = Record("ops_clip", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    std::vector<Tensor*> params = parameters(l1, l2);
    optim::SGD opt(params, {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      at_clip = __LINE__; if (step >= 2) optim::clip_grad_norm(params, 1.0);
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "graph_changed", "ops_changed", at_clip, {"clip_grad_norm"}}});
}

// ---------------------------------------------------------------- layer_added / layer_removed

// The network grows a hidden layer at step 2 (progressive growing).
TEST(RecompileScenarios, LayerAdded_MlpGrowsAHiddenLayer) {
  int at_mid = 0, at_step = 0;
  Recorded r = Record("layer_added_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), mid(32, 32, "mid"), head(32, 4, "head");
    optim::SGD opt(parameters(l1, mid, head), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor h = relu(l1(x));
      at_mid = __LINE__; if (step >= 2) h = relu(mid(h));
      Tensor loss = cross_entropy(head(h), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "graph_changed", "layer_added", at_mid, {"mid"}}});
}

// A second attention block joins the residual stream at step 3.
TEST(RecompileScenarios, LayerAdded_SecondAttentionBlock) {
  int at_block2 = 0, at_step = 0;
  Recorded r = Record("layer_added_transformer", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn1(16, 2, "attn1"), attn2(16, 2, "attn2");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn1, attn2, head), {.lr = 1e-3});
    for (int step = 0; step < 5; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 1), "targets");
      Tensor h = tok(tokens);
      h = h + attn1(h);
      at_block2 = __LINE__; if (step >= 3) h = h + attn2(h);
      Tensor loss = cross_entropy(reshape(head(h), {16, 32}), targets);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {3, "graph_changed", "layer_added", at_block2, {"attn2"}}});
}

// The second convolution is dropped from step 2 on.
TEST(RecompileScenarios, LayerRemoved_CnnSkipsAConvolution) {
  int at_conv2 = 0, at_step = 0;
  Recorded r = Record("layer_removed_cnn", 1, [&] {
    nn::Conv2d conv1(3, 8, 3, 1, 1, true, "conv1"), conv2(8, 8, 3, 1, 1, true, "conv2");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv1, conv2, fc), {.lr = 0.05, .momentum = 0.9});
    for (int step = 0; step < 4; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor h = relu(conv1(images));
      at_conv2 = __LINE__; if (step < 2) h = relu(conv2(h));
      Tensor logits = fc(reshape(max_pool2d(h, 2), {4, 128}));
      SS_OK(backward(cross_entropy(logits, labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "graph_changed", "layer_removed", at_conv2, {"conv2"}}});
}

// The LayerNorm after the first layer is taken out at step 3.
TEST(RecompileScenarios, LayerRemoved_MlpDropsItsLayerNorm) {
  int at_norm = 0, at_step = 0;
  Recorded r = Record("layer_removed_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    nn::LayerNorm norm(32, "norm");
    optim::AdamW opt(parameters(l1, norm, l2), {.lr = 1e-2});
    for (int step = 0; step < 5; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor h = l1(x);
      at_norm = __LINE__; if (step < 3) h = norm(h);
      Tensor loss = cross_entropy(l2(relu(h)), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {3, "graph_changed", "layer_removed", at_norm, {"norm"}}});
}

// A dropout whose p is annealed to 0 for the last steps: at p 0 it is the
// identity and its ops leave the graph, though the program still calls it.
// Not a layer removed; and it masks again when p comes back.
TEST(RecompileScenarios, DropoutOff_AScheduleEndingAtZero) {
  int at_drop = 0, at_step = 0;
  Recorded r = Record("dropout_off", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    nn::Dropout drop(0.3, "drop");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 6; ++step) {
      drop.p = step < 2 ? 0.3 - 0.1 * step : step < 4 ? 0.0 : 0.1;  // p as data; 0 is the identity
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      at_drop = __LINE__; Tensor h = drop(relu(l1(x)));
      Tensor loss = cross_entropy(l2(h), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "graph_changed", "dropout_off", at_drop, {"dropout 'drop' is the identity now"}}});
  // Steps 4 and 5 (p 0.1) run step 0's graph again: hits, not compilations.
}

// ---------------------------------------------------------------- optimizer_changed

// Two steps of SGD to warm up, then AdamW.
TEST(RecompileScenarios, OptimizerChanged_SgdThenAdamW) {
  int at_adamw = 0, at_step = 0;
  Recorded r = Record("optimizer_swap", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD sgd(parameters(l1, l2), {.lr = 0.1});
    optim::AdamW adamw(parameters(l1, l2), {.lr = 1e-3});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      if (step < 2) SS_OK(sgd.step());
      at_adamw = __LINE__; if (step >= 2) SS_OK(adamw.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "graph_changed", "optimizer_changed", at_adamw, {"adamw"}}});
}

// The optimizer is made again with momentum on (new buffers, new ops).
TEST(RecompileScenarios, OptimizerChanged_MomentumTurnedOn) {
  int at_heavy = 0, at_step = 0;
  Recorded r = Record("optimizer_momentum", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD plain(parameters(l1, l2), {.lr = 0.05});
    optim::SGD heavy(parameters(l1, l2), {.lr = 0.05, .momentum = 0.9});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      if (step < 2) SS_OK(plain.step());
      at_heavy = __LINE__; if (step >= 2) SS_OK(heavy.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "graph_changed", "optimizer_changed", at_heavy, {"momentum"}}});
}

// Weight decay switched on for the CNN's optimizer at step 3.
TEST(RecompileScenarios, OptimizerChanged_WeightDecayTurnedOnInCnn) {
  int at_decay = 0, at_step = 0;
  Recorded r = Record("optimizer_decay", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
    optim::SGD decayed(parameters(conv, fc), {.lr = 0.05, .weight_decay = 1e-4});
    for (int step = 0; step < 5; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {4, 128}));
      SS_OK(backward(cross_entropy(logits, labels)));
      if (step < 3) SS_OK(opt.step());
      at_decay = __LINE__; if (step >= 3) SS_OK(decayed.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {3, "graph_changed", "optimizer_changed", at_decay, {"decay"}}});
}

// Gradient accumulation over two micro-batches, the step in a helper, no
// zero_grad of the user's: every second micro-batch carries the first's
// gradients in, adds them and updates. One graph with the update and one
// without, each compiled once: optimizer_on_some_steps at the opt.step()
// line, not ops_changed (which said "a branch on the host").
TEST(RecompileScenarios, OptimizerOnSomeSteps_AccumulatingGradientsOverTwoMicroBatches) {
  for (const bool adamw : {false, true}) {
    SCOPED_TRACE(adamw ? "AdamW" : "SGD");
    int at_opt = 0;
    Recorded r = Record(adamw ? "accumulate_adamw" : "accumulate_sgd", 1, [&] {
      nn::Linear l1(8, 16, "l1"), l2(16, 3, "l2");
      optim::SGD sgd(parameters(l1, l2), {.lr = 0.1});
      optim::AdamW adam(parameters(l1, l2), {.lr = 1e-3});
      auto micro_step = [&](int micro) {
        Tensor x = Tensor::from_host(Rand({4, 8}, micro), "x");
        Tensor y = Tensor::from_host(Ids({4}, 3, micro), "y");
        SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
        if (micro % 2 == 1) SS_OK(adamw ? adam.step() : sgd.step()); at_opt = __LINE__;
        SS_OK(mark_step());
      };
      for (int micro = 0; micro < 8; ++micro) micro_step(micro);
    });
    ASSERT_EQ(r.misses.size(), 2u) << r.Dump();
    EXPECT_EQ(r.misses[1].step, 1);
    EXPECT_EQ(r.misses[1].kind, "graph_changed");
    EXPECT_EQ(r.misses[1].subkind, "optimizer_on_some_steps") << r.Dump();
    EXPECT_EQ(r.misses[1].line, at_opt) << r.Dump();
    EXPECT_TRUE(scen::ContainsNoCase(r.misses[1].detail, "earlier gradients carried in and added"))
        << r.Dump();
  }
}

// ---------------------------------------------------------------- parameter_frozen / parameter_unfrozen

// The first layer is frozen at step 2 (its parameters stop requiring gradients).
TEST(RecompileScenarios, ParameterFrozen_FirstLayerOfMlp) {
  int at_freeze = 0, at_step = 0;
  Recorded r = Record("frozen_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      at_freeze = __LINE__; if (step == 2) for (Tensor* p : l1.parameters()) p->requires_grad_(false);
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "graph_changed", "parameter_frozen", at_freeze, {"l1.weight"}}});
}

// The token embedding is frozen at step 3.
TEST(RecompileScenarios, ParameterFrozen_TransformerEmbedding) {
  int at_freeze = 0, at_step = 0;
  Recorded r = Record("frozen_embedding", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 5; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 2), "targets");
      at_freeze = __LINE__; if (step == 3) tok.weight.requires_grad_(false);
      Tensor e = tok(tokens);
      Tensor loss = cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {3, "graph_changed", "parameter_frozen", at_freeze, {"tok.weight"}}});
}

// A frozen first layer (a pretrained feature extractor) is unfrozen at step 2 to fine-tune everything.
TEST(RecompileScenarios, ParameterUnfrozen_MlpFineTunesAllLayers) {
  int at_unfreeze = 0, at_step = 0;
  Recorded r = Record("unfrozen_mlp", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    for (Tensor* p : l1.parameters()) p->requires_grad_(false);
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      at_unfreeze = __LINE__; if (step == 2) for (Tensor* p : l1.parameters()) p->requires_grad_(true);
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "graph_changed", "parameter_unfrozen", at_unfreeze, {"l1.weight"}}});
}

// The CNN's stem starts frozen and is unfrozen at step 3.
TEST(RecompileScenarios, ParameterUnfrozen_CnnStem) {
  int at_unfreeze = 0, at_step = 0;
  Recorded r = Record("unfrozen_cnn", 1, [&] {
    nn::Conv2d stem(3, 8, 3, 1, 1, true, "stem");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    stem.weight.requires_grad_(false);
    stem.bias.requires_grad_(false);
    optim::SGD opt(parameters(stem, fc), {.lr = 0.05, .momentum = 0.9});
    for (int step = 0; step < 5; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      at_unfreeze = __LINE__; if (step == 3) stem.weight.requires_grad_(true), stem.bias.requires_grad_(true);
      Tensor logits = fc(reshape(max_pool2d(relu(stem(images)), 2), {4, 128}));
      SS_OK(backward(cross_entropy(logits, labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {3, "graph_changed", "parameter_unfrozen", at_unfreeze, {"stem.weight"}}});
}

// ---------------------------------------------------------------- constraint_changed

// A sharding constraint on the hidden activation is added at step 2.
TEST(RecompileScenarios, Constraint_ActivationConstraintAdded) {
  int at_constraint = 0, at_step = 0;
  Recorded r = Record("constraint_added", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2}, {"data"});
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(mark_sharding(x, mesh, {"data", none}));
      Tensor h = relu(l1(x));
      at_constraint = __LINE__; if (step >= 2) SS_OK(mark_sharding(h, mesh, {"data", none}));
      SS_OK(backward(cross_entropy(l2(h), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {2, "graph_changed", "constraint_changed", at_constraint}});
}

// On a 2x2 mesh the hidden activation's constraint goes from batch-split to
// batch- and feature-split at step 2. That step hands l2.weight back split
// over 'model' (propagated from the constraint), so step 3 compiles once more
// for the new layout of an input made by opt.step(); step 3 in turn hands
// l1's parameters back split, and step 4 compiles again; then it is steady.
// Steps 3 and 4 are blamed on the constraint whose layout propagated (step 4
// through l2.weight's layout, carried over a step), not on opt.step().
TEST(RecompileScenarios, Constraint_ActivationConstraintChangedOnTwoByTwoMesh) {
  int at_constraint = 0, at_opt = 0, at_step = 0;
  Recorded r = Record("constraint_changed", 4, [&] {
    Mesh mesh = MakeMesh({0, 1, 2, 3}, {2, 2}, {"data", "model"});
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 6; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(mark_sharding(x, mesh, {"data", none}));
      Tensor h = relu(l1(x));
      std::vector<AxisSpec> spec = step < 2 ? std::vector<AxisSpec>{"data", none} : std::vector<AxisSpec>{"data", "model"};
      SS_OK(mark_sharding(h, mesh, spec)); at_constraint = __LINE__;
      SS_OK(backward(cross_entropy(l2(h), y)));
      SS_OK(opt.step()); at_opt = __LINE__;
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step},
                {2, "graph_changed", "constraint_changed", at_constraint},
                {3, "input_sharding_changed", "", at_constraint,
                 {"l2.weight", "replicated", "layout from the mark_sharding at", absl::StrCat("made at :", at_opt)}},
                {4, "input_sharding_changed", "", at_constraint,
                 {"l1.weight", "replicated", "layout from the mark_sharding at", "also l1.bias"}}});
}

// The constraint on the attention output is removed at step 3.
TEST(RecompileScenarios, Constraint_AttentionOutputConstraintRemoved) {
  int at_constraint = 0, at_step = 0;
  Recorded r = Record("constraint_removed", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2}, {"data"});
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 5; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 4), "targets");
      SS_OK(mark_sharding(tokens, mesh, {"data", none}));
      Tensor e = tok(tokens);
      Tensor a = attn(e);
      at_constraint = __LINE__; if (step < 3) SS_OK(mark_sharding(a, mesh, {"data", none, none}));
      Tensor loss = cross_entropy(reshape(head(e + a), {16, 32}), targets);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_step}, {3, "graph_changed", "constraint_changed", at_constraint}});
}

// ---------------------------------------------------------------- autocast_changed

// Mixed precision switched on at step 2 by the run's flag.
TEST(RecompileScenarios, Autocast_EnteredAtStepTwoInMlp) {
  int at_amp = 0, at_step = 0;
  Recorded r = Record("autocast_on", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss;
      {
        AutocastGuard amp(step >= 2 ? std::optional<DType>(DType::kBF16) : std::nullopt); at_amp = __LINE__;
        loss = cross_entropy(l2(relu(l1(x))), y);
      }
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "graph_changed", "autocast_changed", at_amp}});
}

// The CNN trains in bf16 for three steps, then leaves autocast (written as two branches).
TEST(RecompileScenarios, Autocast_LeftAtStepThreeInCnn) {
  int at_amp = 0, at_step = 0;
  Recorded r = Record("autocast_off", 1, [&] {
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
    for (int step = 0; step < 5; ++step) {
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor logits;
      if (step < 3) {
        AutocastGuard amp; at_amp = __LINE__;
        logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {4, 128}));
      } else {
        logits = fc(reshape(max_pool2d(relu(conv(images)), 2), {4, 128}));
      }
      SS_OK(backward(cross_entropy(logits, labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {3, "graph_changed", "autocast_changed", at_amp}});
}

// The autocast type goes from bf16 to f16 at step 2.
TEST(RecompileScenarios, Autocast_Bf16ToF16InTransformer) {
  int at_amp = 0, at_step = 0;
  Recorded r = Record("autocast_type", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    for (int step = 0; step < 4; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 7), "targets");
      Tensor loss;
      {
        AutocastGuard amp(step < 2 ? DType::kBF16 : DType::kF16); at_amp = __LINE__;
        Tensor e = tok(tokens);
        loss = cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets);
      }
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "graph_changed", "autocast_changed", at_amp}});
}

// The whole step is under one guard; from step 2 an inner
// AutocastGuard(std::nullopt) keeps the head in f32. The change is the inner
// guard's, not the outer one's, which still converts in both graphs.
TEST(RecompileScenarios, Autocast_InnerGuardTurnsItOffForTheHead) {
  int at_outer = 0, at_inner = 0, at_step = 0;
  Recorded r = Record("autocast_inner_off", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss;
      {
        AutocastGuard amp; at_outer = __LINE__;
        Tensor h = relu(l1(x));
        if (step >= 2) {
          AutocastGuard f32(std::nullopt); at_inner = __LINE__;
          loss = cross_entropy(l2(h), y);
        } else {
          loss = cross_entropy(l2(h), y);
        }
      }
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "graph_changed", "autocast_changed", at_inner}});
  ASSERT_EQ(r.misses.size(), 2u);
  EXPECT_THAT(r.misses[1].detail, HasSubstr("autocast was turned off (AutocastGuard(std::nullopt) at ")) << r.Dump();
  EXPECT_NE(at_outer, at_inner);
}

// The reverse: the inner AutocastGuard(std::nullopt) is dropped at step 2, so
// the head is cast again; the inner guard's line is where that changed.
TEST(RecompileScenarios, Autocast_InnerOffGuardDroppedCastsTheHeadAgain) {
  int at_inner = 0, at_step = 0;
  Recorded r = Record("autocast_inner_on", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss;
      {
        AutocastGuard amp;
        Tensor h = relu(l1(x));
        if (step < 2) {
          AutocastGuard f32(std::nullopt); at_inner = __LINE__;
          loss = cross_entropy(l2(h), y);
        } else {
          loss = cross_entropy(l2(h), y);
        }
      }
      SS_OK(backward(loss));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "graph_changed", "autocast_changed", at_inner}});
  ASSERT_EQ(r.misses.size(), 2u);
  EXPECT_THAT(r.misses[1].detail, HasSubstr("autocast is on again (the AutocastGuard(std::nullopt) at "))
      << r.Dump();
}

// A bf16 round trip the user wrote (fake quantization) from step 3 is not
// autocast: no guard made those conversions. Before, it read as
// "autocast is on (AutocastGuard at <the mark_step line>)". Under a guard that
// converts in both graphs, the same: the guard's conversions did not change.
TEST(RecompileScenarios, Autocast_AUsersOwnBf16RoundTripIsNotAutocast) {
  for (bool under_guard : {false, true}) {
    int at_convert = 0, at_step = 0;
    Recorded r = Record(under_guard ? "manual_bf16_guarded" : "manual_bf16", 1, [&] {
      nn::Linear l1(8, 4, "l1");
      optim::SGD opt(parameters(l1), {.lr = 0.1});
      for (int step = 0; step < 5; ++step) {
        std::optional<AutocastGuard> amp;
        if (under_guard) amp.emplace();
        Tensor x = Tensor::from_host(Rand({16, 8}, step), "x");
        at_convert = __LINE__; if (step >= 3) x = convert(convert(x, DType::kBF16), DType::kF32);
        Tensor loss = mse_loss(l1(x), Tensor::from_host(Rand({16, 4}, step + 9), "y"));
        SS_OK(backward(loss));
        SS_OK(opt.step());
        amp.reset();
        SS_OK(mark_step()); at_step = __LINE__;
      }
    });
    ASSERT_EQ(r.misses.size(), 2u) << r.Dump();
    EXPECT_NE(r.misses[1].subkind.value_or(""), "autocast_changed") << under_guard << r.Dump();
    EXPECT_EQ(r.misses[1].line, at_convert) << under_guard << r.Dump();
  }
}

// ---------------------------------------------------------------- dims_changed

// Two slices take the same host integer (a batch's valid rows): both change.
// The first in the user's code is blamed and the other named, and the detail
// no longer says the rest of the graph is unchanged op for op.
TEST(RecompileScenarios, DimsChanged_TwoSlicesOfOneHostIntegerAreBothNamed) {
  const int64_t rows[] = {16, 12, 16, 8};
  int at_x = 0, at_y = 0;
  Recorded r = Record("dims_two_slices", 1, [&] {
    nn::Linear l1(8, 1, "l1");
    optim::SGD opt(parameters(l1), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({16, 8}, step), "x");
      Tensor y = Tensor::from_host(Rand({16, 1}, step + 5), "y");
      at_x = __LINE__; Tensor xs = slice(x, 0, 0, rows[step]);
      at_y = __LINE__; Tensor ys = slice(y, 0, 0, rows[step]);
      SS_OK(backward(mse_loss(l1(xs), ys)));
      SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  ASSERT_GE(r.misses.size(), 2u) << r.Dump();
  EXPECT_EQ(r.misses[1].subkind.value_or(""), "dims_changed") << r.Dump();
  EXPECT_EQ(r.misses[1].line, at_x) << r.Dump();
  EXPECT_THAT(r.misses[1].detail, HasSubstr(absl::StrCat("also slice at ", ":", at_y).substr(0, 14))) << r.Dump();
  EXPECT_THAT(r.misses[1].detail, HasSubstr(absl::StrCat(":", at_y))) << r.Dump();
  EXPECT_THAT(r.misses[1].detail, ::testing::Not(HasSubstr("op for op"))) << r.Dump();
}

// ---------------------------------------------------------------- mesh_changed

// The mesh is reshaped from 4x1 to 2x2 at step 2. The batch stays split four
// ways (over both axes), so no input's layout changes; the activation's
// constraint, written once as "split over data", now means a 2-way split.
TEST(RecompileScenarios, MeshChanged_ReshapedMeshMovesOnlyAnActivation) {
  int at_step = 0;
  Recorded r = Record("mesh_reshaped", 4, [&] {
    Mesh wide = MakeMesh({0, 1, 2, 3}, {4, 1}, {"data", "model"});
    Mesh square = MakeMesh({0, 1, 2, 3}, {2, 2}, {"data", "model"});
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 4; ++step) {
      const bool reshaped = step >= 2;
      const Mesh& mesh = reshaped ? square : wide;
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(mark_sharding(x, mesh, {reshaped ? axes("data", "model") : AxisSpec("data"), none}));
      Tensor h = relu(l1(x));
      SS_OK(mark_sharding(h, mesh, {"data", none}));
      SS_OK(backward(cross_entropy(l2(h), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "mesh_changed", "", at_step}});
}

// The same 2-chip mesh with its devices in the other order; the CNN's inputs
// are replicated, only the feature maps' constraint follows the mesh.
TEST(RecompileScenarios, MeshChanged_DeviceOrderReversedInCnn) {
  int at_step = 0;
  Recorded r = Record("mesh_reversed", 2, [&] {
    Mesh forward = MakeMesh({0, 1}, {2}, {"data"});
    Mesh reversed = MakeMesh({1, 0}, {2}, {"data"});
    nn::Conv2d conv(3, 8, 3, 1, 1, true, "conv");
    nn::Linear fc(8 * 4 * 4, 4, "fc");
    optim::SGD opt(parameters(conv, fc), {.lr = 0.05});
    for (int step = 0; step < 4; ++step) {
      const Mesh& mesh = step < 2 ? forward : reversed;
      Tensor images = Tensor::from_host(Rand({4, 3, 8, 8}, step), "images");
      Tensor labels = Tensor::from_host(Ids({4}, 4, step), "labels");
      Tensor features = relu(conv(images));
      SS_OK(mark_sharding(features, mesh, {"data", none, none, none}));
      Tensor logits = fc(reshape(max_pool2d(features, 2), {4, 128}));
      SS_OK(backward(cross_entropy(logits, labels)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "mesh_changed", "", at_step}});
}

// ---------------------------------------------------------------- call_site_changed
// (Read here as: the first graph of a call site new to the run, whose nearest
// earlier graph was cut at another call site; the detail names that site.)

// After two steps the user moves the step into a helper that also returns
// the logits (kept for a metric): a new mark_step line, a nearly equal graph.
TEST(RecompileScenarios, CallSiteChanged_StepMovedIntoAHelper) {
  int at_inline = 0, at_helper = 0;
  Recorded r = Record("call_site_helper", 1, [&] {
    nn::Linear l1(16, 32, "l1"), l2(32, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.1});
    for (int step = 0; step < 2; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 16}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_inline = __LINE__;
    }
    auto train_step = [&](const Tensor& x, const Tensor& y) -> Tensor {
      Tensor logits = l2(relu(l1(x)));
      EXPECT_TRUE(backward(cross_entropy(logits, y)).ok());
      EXPECT_TRUE(opt.step().ok());
      EXPECT_TRUE(mark_step().ok()); at_helper = __LINE__;
      return logits;
    };
    for (int step = 2; step < 4; ++step) {
      Tensor logits = train_step(Tensor::from_host(Rand({8, 16}, step), "x"), Tensor::from_host(Ids({8}, 4, step), "y"));
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_inline},
                {2, "call_site_changed", "", at_helper, {absl::StrCat(":", at_inline)}}});
}

// The reverse, in a transformer: a helper's step is inlined into the loop at
// step 3, which now also keeps the loss alive for logging.
TEST(RecompileScenarios, CallSiteChanged_HelperInlinedIntoTheLoop) {
  int at_helper = 0, at_inline = 0;
  Recorded r = Record("call_site_inlined", 1, [&] {
    nn::Embedding tok(32, 16, "tok");
    nn::MultiHeadAttention attn(16, 2, "attn");
    nn::Linear head(16, 32, "head");
    optim::AdamW opt(parameters(tok, attn, head), {.lr = 1e-3});
    auto train_step = [&](int step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 6), "targets");
      Tensor e = tok(tokens);
      EXPECT_TRUE(backward(cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets)).ok());
      EXPECT_TRUE(opt.step().ok());
      EXPECT_TRUE(mark_step().ok()); at_helper = __LINE__;
    };
    for (int step = 0; step < 3; ++step) train_step(step);
    std::vector<Tensor> losses;
    for (int step = 3; step < 5; ++step) {
      Tensor tokens = Tensor::from_host(Ids({2, 8}, 32, step), "tokens");
      Tensor targets = Tensor::from_host(Ids({16}, 32, step + 6), "targets");
      Tensor e = tok(tokens);
      losses.push_back(cross_entropy(reshape(head(e + attn(e)), {16, 32}), targets));
      SS_OK(backward(losses.back()));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_inline = __LINE__;
    }
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", at_helper},
                {3, "call_site_changed", "", at_inline, {absl::StrCat(":", at_helper)}}});
}

}  // namespace
}  // namespace shardscope
