// Recompilation scenarios, part 4: loops as an outside tester wrote them
// against the installed library, where the cause or its line was wrong: a
// step helper called from two lines, gradient clipping on some steps only, a
// checkpoint saved mid-step and a sharded weight loaded from one.
#include "core/checkpoint.h"
#include "tests/e2e/recompile_scenarios.h"
#include "absl/strings/match.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/shell.h"

namespace shardscope {
namespace {

using scen::ExpectMisses;
using scen::Ids;
using scen::MakeMesh;
using scen::Rand;
using scen::Record;
using scen::Recorded;

const std::string kFile = scen::RepoPath(__FILE__);

int g_at_x = 0, g_at_step = 0;

// A user's step helper with its mark_step inside.
void TrainStep(nn::Linear& l1, nn::Linear& l2, optim::SGD& opt, int64_t batch, uint64_t seed) {
  Tensor x = Tensor::from_host(Rand({batch, 8}, seed), "x"); g_at_x = __LINE__;
  Tensor y = Tensor::from_host(Ids({batch}, 4, seed), "y");
  SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
  SS_OK(opt.step());
  SS_OK(mark_step()); g_at_step = __LINE__;
}

// The epoch's short last batch goes through the same helper from another
// line: one call site (the stack reads the same), so the short batch is a
// shape change at x's line, not a first compile of a new site.
TEST(RecompileScenarios, User_AStepHelperCalledFromTwoLinesIsOneCallSite) {
  Recorded r = Record("user_helper_two_lines", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 3; ++step) TrainStep(l1, l2, opt, 16, step);
    TrainStep(l1, l2, opt, 8, 3);  // the short last batch
    TrainStep(l1, l2, opt, 16, 4);  // the next epoch: a hit
  });
  ExpectMisses(r, kFile,
               {{0, "first_compile", "", g_at_step}, {3, "input_shape_changed", "", g_at_x, {"f32[16,8] -> f32[8,8]"}}});
}

// Clipping only while warming up: the ops taken out are the clip's, so the
// cause is the clip's line, not the update's whose operands they fed.
TEST(RecompileScenarios, User_ClippingOnWarmupStepsOnlyPointsAtTheClip) {
  int at_clip = 0, at_step = 0;
  Recorded r = Record("user_warmup_clip", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 8}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      at_clip = __LINE__; if (step < 2) optim::clip_grad_norm(parameters(l1, l2), 1.0);
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}, {2, "graph_changed", "ops_changed", at_clip}});
}

// Gradient accumulation with the usual clip before the update: the update
// (its clip with it) runs on some steps only.
TEST(RecompileScenarios, User_AccumulationWithClippingIsAnUpdateOnSomeSteps) {
  int at_opt = 0;
  Recorded r = Record("user_accum_clip", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 3, "l2");
    optim::AdamW opt(parameters(l1, l2), {.lr = 1e-3});
    for (int micro = 0; micro < 8; ++micro) {
      Tensor x = Tensor::from_host(Rand({4, 8}, micro), "x");
      Tensor y = Tensor::from_host(Ids({4}, 3, micro), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      if (micro % 2 == 1) {
        optim::clip_grad_norm(parameters(l1, l2), 1.0);
        SS_OK(opt.step()); at_opt = __LINE__;
      }
      SS_OK(mark_step());
    }
  });
  ASSERT_EQ(r.misses.size(), 2u) << r.Dump();
  EXPECT_EQ(r.misses[1].subkind, "optimizer_on_some_steps") << r.Dump();
  EXPECT_EQ(r.misses[1].line, at_opt) << r.Dump();
}

// A checkpoint saved after the update and before mark_step reads the
// parameters' pending values: the read is at the user's save_checkpoint line.
TEST(RecompileScenarios, User_ACheckpointSavedMidStepIsAReadAtItsLine) {
  int at_save = 0;
  const std::string ckpt = scen::TempPath("user_ckpt_mid", ".safetensors");
  Recorded r = Record("user_ckpt_mid", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 8}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor loss = cross_entropy(l2(relu(l1(x))), y);
      SS_OK(backward(loss));
      SS_OK(opt.step());
      if (step == 2) SS_OK(save_checkpoint(ckpt, parameters(l1, l2))); at_save = __LINE__;
      Tensor metric = loss * loss;  // computed after the save: what is left of the step
      SS_OK(mark_step());
    }
  });
  ASSERT_GE(r.misses.size(), 2u) << r.Dump();
  for (const scen::Miss& m : r.misses) {
    if (m.step != 2) continue;
    EXPECT_EQ(scen::Normalized(m.file), kFile) << r.Dump();
    EXPECT_EQ(m.line, at_save) << r.Dump();
  }
  EXPECT_EQ(r.misses[1].kind, "value_read_cut") << r.Dump();
}

// A weight sharded over the model axis is loaded from a checkpoint midway:
// it keeps its layout, so nothing recompiles from the load on.
TEST(RecompileScenarios, User_AShardedWeightLoadedFromACheckpointKeepsItsLayout) {
  const std::string ckpt = scen::TempPath("user_ckpt_sharded", ".safetensors");
  Recorded r = Record("user_load_sharded", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {1, 2}, {"data", "model"});
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    SS_OK(mark_sharding(l1.weight, mesh, {"model", none}));
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 6; ++step) {
      if (step == 4) {
        auto loaded = load_checkpoint(ckpt);
        SS_OK(loaded);
        SS_OK(load_into(*loaded, parameters(l1, l2), ckpt));
      }
      Tensor x = Tensor::from_host(Rand({8, 8}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step());
      if (step == 2) SS_OK(save_checkpoint(ckpt, parameters(l1, l2)));
    }
  });
  ASSERT_FALSE(r.misses.empty()) << r.Dump();
  for (const scen::Miss& m : r.misses) EXPECT_LT(m.step, 4) << "the load recompiled:\n" << r.Dump();
}

// Gradient checkpointing of the middle block turned on at step 2: backward
// recomputes its forward, a scope of the library's, not a layer added.
TEST(RecompileScenarios, User_CheckpointingSwitchedIsNotANewLayer) {
  int at_remat = 0, at_step = 0;
  Recorded r = Record("user_remat_on", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 16, "l2"), l3(16, 4, "l3");
    optim::SGD opt(parameters(l1, l2, l3), {.lr = 0.05});
    auto block = [&](const Tensor& t) { return tanh(l2(t)); };
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 8}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      Tensor h = relu(l1(x));
      at_remat = __LINE__; h = step >= 2 ? remat(block, h) : block(h);
      SS_OK(backward(cross_entropy(l3(h), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ASSERT_EQ(r.misses.size(), 2u) << r.Dump();
  EXPECT_EQ(r.misses[1].subkind, "remat_changed") << r.Dump();
  EXPECT_EQ(r.misses[1].line, at_remat) << r.Dump();
  EXPECT_TRUE(scen::ContainsNoCase(r.misses[1].detail, "gradient checkpointing turned on")) << r.Dump();
}

// BatchNorm's momentum changed between steps is data (the scalar rule, as a
// learning rate or dropout's p): no recompilation.
TEST(RecompileScenarios, User_ABatchNormMomentumScheduleDoesNotRecompile) {
  int at_step = 0;
  Recorded r = Record("user_bn_momentum", 1, [&] {
    nn::Conv2d conv(3, 4, 3, 1, 1, false, "conv");
    nn::BatchNorm2d bn(4, "bn");
    nn::Linear fc(4 * 8 * 8, 3, "fc");
    optim::SGD opt(parameters(conv, bn, fc), {.lr = 0.05});
    for (int step = 0; step < 4; ++step) {
      bn.momentum = step < 2 ? 0.1 : 0.05;
      Tensor x = Tensor::from_host(Rand({2, 3, 8, 8}, step), "x");
      Tensor y = Tensor::from_host(Ids({2}, 3, step), "y");
      Tensor h = relu(bn(conv(x)));
      SS_OK(backward(cross_entropy(fc(reshape(h, {2, 4 * 8 * 8})), y)));
      SS_OK(opt.step());
      SS_OK(mark_step()); at_step = __LINE__;
    }
  });
  ExpectMisses(r, kFile, {{0, "first_compile", "", at_step}});
}

// An activation's constraint, set every step, cleared from step 2 by
// clear_sharding: the change is the clear's line, not the mark_sharding's
// that still runs before it.
TEST(RecompileScenarios, User_AConstraintClearedIsBlamedOnTheClear) {
  int at_clear = 0;
  Recorded r = Record("user_clear_constraint", 4, [&] {
    Mesh mesh = MakeMesh({0, 1, 2, 3}, {2, 2}, {"data", "model"});
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 8}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(mark_sharding(x, mesh, {"data", none}));
      Tensor h = l1(x);
      SS_OK(mark_sharding(h, mesh, {none, "model"}));
      at_clear = __LINE__; if (step >= 2) SS_OK(clear_sharding(h));
      SS_OK(backward(cross_entropy(l2(relu(h)), y)));
      SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  // (Step 1 recompiles as the weights take the layouts propagated at step 0.)
  ASSERT_FALSE(r.misses.empty()) << r.Dump();
  const scen::Miss& m = r.misses.back();
  EXPECT_EQ(m.step, 2) << r.Dump();
  EXPECT_EQ(m.subkind, "constraint_changed") << r.Dump();
  EXPECT_EQ(m.line, at_clear) << r.Dump();
  EXPECT_TRUE(scen::ContainsNoCase(m.detail, "(clear_sharding at")) << r.Dump();
}

// mark_sharding of an activation on steps 0-1, then with its gradient on
// steps 2-3: the gradient's new constraint is the call's line, not the line
// of the op whose backward made the gradient.
TEST(RecompileScenarios, User_AGradientConstraintIsBlamedOnItsCall) {
  int at_mwg = 0;
  Recorded r = Record("user_msg_toggle", 4, [&] {
    Mesh mesh = MakeMesh({0, 1, 2, 3}, {2, 2}, {"data", "model"});
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 4; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 8}, step), "x");
      Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
      SS_OK(mark_sharding(x, mesh, {"data", none}));
      Tensor h = l1(x);
      at_mwg = __LINE__; if (step >= 2) SS_OK(mark_sharding_with_gradients(h, mesh, {"data", "model"}));
      if (step < 2) SS_OK(mark_sharding(h, mesh, {"data", "model"}));
      SS_OK(backward(cross_entropy(l2(relu(h)), y)));
      SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  ASSERT_FALSE(r.misses.empty()) << r.Dump();
  const scen::Miss& m = r.misses.back();
  EXPECT_EQ(m.step, 2) << r.Dump();
  EXPECT_EQ(m.subkind, "constraint_changed") << r.Dump();
  EXPECT_EQ(m.line, at_mwg) << r.Dump();
}

// The loss read on every micro-batch of an accumulation: each read cuts the
// graph, and the second micro-batch's graph adds the gradients carried in at
// backward's line. Not a read that cuts the step on some steps only (it read
// so, at the read's line, though the read runs on every micro-batch).
TEST(RecompileScenarios, User_AReadOnEveryMicroBatchIsNotACutOnSomeSteps) {
  int at_backward = 0;
  Recorded r = Record("user_micro_read", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 3; ++step) {
      for (int m = 0; m < 3; ++m) {
        Tensor x = Tensor::from_host(Rand({4, 8}, step * 3 + m), "x");
        Tensor y = Tensor::from_host(Ids({4}, 4, step * 3 + m), "y");
        Tensor loss = cross_entropy(l2(relu(l1(x))), y);
        at_backward = __LINE__; SS_OK(backward(loss));
        SS_OK(loss.item());
      }
      SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  ASSERT_GE(r.misses.size(), 2u) << r.Dump();
  for (const scen::Miss& m : r.misses)
    EXPECT_NE(m.subkind.value_or(""), "cut_on_some_steps") << r.Dump();
  EXPECT_EQ(r.misses[1].line, at_backward) << r.Dump();
}

// A layer added in the middle renumbers every op made after it: ops matched
// by their numbered names read as removed and added again. Matched by call
// site, opcode, shape, line and place, only the new layer's ops are added.
TEST(RecompileScenarios, User_DiffOfAnAddedLayerAddsOnlyItsOps) {
  auto loop = [&](bool extra) {
    return Record(extra ? "user_diff_extra" : "user_diff_base", 2, [&] {
      Mesh mesh = MakeMesh({0, 1}, {2, 1}, {"data", "model"});
      nn::Linear l1(8, 32, "l1"), mid(32, 32, "mid"), l2(32, 4, "l2");
      std::vector<Tensor*> ps = parameters(l1, l2);
      if (extra)
        for (Tensor* p : parameters(mid)) ps.push_back(p);
      optim::SGD opt(ps, {.lr = 0.05});
      for (int step = 0; step < 4; ++step) {
        Tensor x = Tensor::from_host(Rand({8, 8}, step), "x");
        Tensor y = Tensor::from_host(Ids({8}, 4, step), "y");
        SS_OK(mark_sharding(x, mesh, {"data", none}));
        Tensor h = relu(l1(x));
        if (extra) h = relu(mid(h));
        SS_OK(backward(cross_entropy(l2(h), y)));
        SS_OK(opt.step());
        SS_OK(mark_step());
      }
    });
  };
  Recorded base = loop(false), extra = loop(true);
  ASSERT_TRUE(base.ok && extra.ok);
  e2e::Output o = e2e::Shell(
      absl::StrCat(SHARDSCOPE_CLI_BINARY, " diff ", base.db, " ", extra.db, " --clock modeled --format json 2>/dev/null"));
  ASSERT_EQ(o.code, 0) << o.text;
  nlohmann::json j = nlohmann::json::parse(o.text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.text;
  EXPECT_EQ(j["counts"]["removed"], 0) << j["verdict"];
  EXPECT_GT(j["counts"]["added"].get<int64_t>(), 0) << j["verdict"];
  for (const auto& op : j["ops"])
    if (op["delta"]["change"] == "added" && op["opcode"] == "dot_general")
      EXPECT_NE(op["source"].get<std::string>().find("recompile_scenarios_user_test.cc"), std::string::npos) << op.dump();
}

// An evaluation step between training steps, and an update skipped on one
// step: the graph without the update also lacks the backward pass that only
// fed it. Both are the optimizer on some steps, at the update's line (they
// were blamed on the forward or the backward line, which ran on every step).
TEST(RecompileScenarios, User_EvalStepsAndASkippedUpdateAreTheUpdateOnSomeSteps) {
  for (const bool eval : {true, false}) {
    int at_update = 0;
    Recorded r = Record(eval ? "user_train_eval" : "user_skip_update", 1, [&] {
      nn::Linear l1(8, 16, "l1"), l2(16, 1, "l2");
      optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
      for (int step = 0; step < 6; ++step) {
        Tensor x = Tensor::from_host(Rand({16, 8}, step), "x");
        Tensor y = Tensor::from_host(Rand({16, 1}, step + 7), "y");
        Tensor loss;  // kept to the step's end: the eval step's value is its output
        if (eval && step % 2 == 1) {
          NoGradGuard no_grad;
          loss = mse_loss(l2(relu(l1(x))), y);
        } else {
          loss = mse_loss(l2(relu(l1(x))), y);
          SS_OK(backward(loss));
          if (!eval && step == 2) {
            for (Tensor* p : parameters(l1, l2)) p->zero_grad();
          } else {
            at_update = __LINE__; SS_OK(opt.step());
          }
        }
        SS_OK(mark_step());
      }
    });
    ASSERT_GE(r.misses.size(), 2u) << r.Dump();
    EXPECT_EQ(r.misses[1].subkind.value_or(""), "optimizer_on_some_steps") << eval << r.Dump();
    EXPECT_EQ(r.misses[1].line, at_update) << eval << r.Dump();
    EXPECT_NE(r.misses[1].detail.find("with the backward pass that only feeds it"), std::string::npos) << r.Dump();
  }
}

// Weight tying introduced at step 3: the head layer is replaced by a matmul
// with the embedding's weight, written by hand. Not "layer removed" (ops were
// added too): the change is at the replacement's line, and the detail names
// both. An early exit (a layer skipped, nothing in its place) stays
// layer_removed at the layer's call.
TEST(RecompileScenarios, User_ALayerReplacedIsBlamedOnItsReplacement) {
  int at_head = 0, at_tied = 0;
  Recorded r = Record("user_weight_tying", 1, [&] {
    nn::Embedding emb(16, 8, "emb");
    nn::Linear head(8, 16, "head");
    optim::SGD opt(parameters(emb, head), {.lr = 0.05});
    for (int step = 0; step < 5; ++step) {
      Tensor tokens = Tensor::from_host(Ids({8}, 16, step), "tokens");
      Tensor h = emb(tokens);
      Tensor logits;
      if (step < 3) {
        at_head = __LINE__; logits = head(h);
      } else {
        at_tied = __LINE__; logits = matmul(h, transpose(emb.weight, {1, 0}));
      }
      SS_OK(backward(cross_entropy(logits, Tensor::from_host(Ids({8}, 16, step + 1), "targets"))));
      SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  ASSERT_GE(r.misses.size(), 2u) << r.Dump();
  EXPECT_EQ(r.misses[1].line, at_tied) << r.Dump();
  EXPECT_EQ(r.misses[1].subkind.value_or(""), "ops_changed") << r.Dump();
  EXPECT_NE(r.misses[1].detail.find(absl::StrCat("layer 'head' (nn::Linear) removed (called before at ")),
            std::string::npos) << r.Dump();
  EXPECT_NE(r.misses[1].detail.find(absl::StrCat(":", at_head)), std::string::npos) << r.Dump();
}

// Freezing the layers below by stop_gradient from step 2: backward no longer
// reaches l1, whose gradient and update leave the graph. The change is the
// stop_gradient's line (it was blamed on the forward line, via relu's
// gradient: a line the user did not change).
TEST(RecompileScenarios, User_AStopGradientIsBlamedOnItsLine) {
  int at_stop = 0;
  Recorded r = Record("user_stop_gradient", 1, [&] {
    nn::Linear l1(8, 16, "l1"), l2(16, 1, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 5; ++step) {
      Tensor h = relu(l1(Tensor::from_host(Rand({16, 8}, step), "x")));
      at_stop = __LINE__; if (step >= 2) h = stop_gradient(h);
      SS_OK(backward(mse_loss(l2(h), Tensor::from_host(Rand({16, 1}, step + 3), "y"))));
      SS_OK(opt.step());
      SS_OK(mark_step());
    }
  });
  ASSERT_GE(r.misses.size(), 2u) << r.Dump();
  EXPECT_EQ(r.misses[1].step, 2) << r.Dump();
  EXPECT_EQ(r.misses[1].line, at_stop) << r.Dump();
  EXPECT_NE(r.misses[1].detail.find("stops gradients there"), std::string::npos) << r.Dump();
}

// An input the user did not name still has a layout on the chips: it is
// listed by where it was made, in the tensors table and `shardscope sharding`.
TEST(RecompileScenarios, User_AnUnnamedInputIsListedWithItsLayout) {
  int at_made = 0;
  Recorded r = Record("user_unnamed_input", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2, 1}, {"data", "model"});
    nn::Linear l1(8, 4, "l1");
    for (int step = 0; step < 2; ++step) {
      at_made = __LINE__; Tensor x = Tensor::from_host(Rand({6, 8}, step), "");
      SS_OK(mark_sharding(x, mesh, {"data", none}));
      Tensor y = sum(l1(x));
      SS_OK(mark_step());
    }
  });
  ASSERT_TRUE(r.ok) << r.Dump();
  auto q = e2e::Q(r.db, "SELECT name, sharding, sharding_source FROM tensors WHERE name LIKE 'tensor@%'");
  ASSERT_EQ(q.rows.size(), 1u);
  EXPECT_TRUE(absl::EndsWith(q.Text(0, "name"), absl::StrCat(":", at_made))) << q.Text(0, "name");
  EXPECT_NE(q.Text(0, "name").find("recompile_scenarios_user_test.cc"), std::string::npos) << q.Text(0, "name");
  EXPECT_EQ(q.Text(0, "sharding_source"), "annotated");
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " sharding ", r.db));
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find(absl::StrCat(":", at_made)), std::string::npos) << o.text;
}

// Two inputs share a name: `sharding --why NAME` walks back each of them,
// and says there are two, instead of one chosen silently.
TEST(RecompileScenarios, User_WhyWalksBackEveryValueOfAName) {
  Recorded r = Record("user_why_dup", 2, [&] {
    Mesh mesh = MakeMesh({0, 1}, {2, 1}, {"data", "model"});
    Tensor a = Tensor::from_host(Rand({4, 8}, 1), "dup");
    Tensor b = Tensor::from_host(Rand({4, 8}, 2), "dup");
    SS_OK(mark_sharding(a, mesh, {"data", none}));
    Tensor y = sum(a + b);
    SS_OK(mark_step());
  });
  ASSERT_TRUE(r.ok) << r.Dump();
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " sharding ", r.db, " --why dup"));
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "2 values of the graph have this name")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "annotated")) << o.text;
  EXPECT_TRUE(absl::StrContains(o.text, "default")) << o.text;
}

// Users name tensors as they like: a quote, a newline, bytes that are not
// UTF-8. The run records (no abort in the signature's JSON), its programs are
// stored as text that parses back, so `replay` runs them; a checkpoint, whose
// header is JSON, refuses the name that is not UTF-8 by name.
TEST(RecompileScenarios, User_OddTensorNamesRecordReplayAndCheckpoint) {
  const std::string odd = "lin \"odd\", <mod>\nnext", bad = "tuple\xff\xfe";
  Recorded r = Record("user_odd_names", 1, [&] {
    nn::Linear l1(8, 16, odd), l2(16, 4, "l2");
    optim::SGD opt(parameters(l1, l2), {.lr = 0.05});
    for (int step = 0; step < 3; ++step) {
      Tensor x = Tensor::from_host(Rand({8, 8}, step), bad);
      Tensor y = Tensor::from_host(Ids({8}, 4, step), odd);
      SS_OK(backward(cross_entropy(l2(relu(l1(x))), y)));
      SS_OK(opt.step());
      SS_OK(mark_step());
    }
    Tensor named = Tensor::from_host(Rand({2, 2}, 9), bad);
    absl::Status saved = save_checkpoint(scen::TempPath("user_odd_ckpt", ".safetensors"), {&named});
    EXPECT_FALSE(saved.ok());
    EXPECT_NE(saved.message().find("not UTF-8"), std::string_view::npos) << saved;
  });
  ASSERT_TRUE(r.ok) << r.Dump();
  e2e::Output o = e2e::Shell(absl::StrCat(SHARDSCOPE_CLI_BINARY, " replay ", r.db));
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(o.text.find("does not parse"), std::string::npos) << o.text;
}

}  // namespace
}  // namespace shardscope
