// Tests of the IR (compiler/ir.h): the verifier, the StableHLO text printer,
// fingerprints (identity without source locations or names) and DiffModules
// (what changed between two graphs of one call site).
#include "compiler/ir.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/fingerprint.h"
#include "compiler/graph_diff.h"
#include "compiler/text.h"
#include "gtest/gtest.h"

namespace shardscope::compiler {
namespace {

const DType kF32 = DType::kF32;

SourceLoc At(int line, const char* file = "samples/model.cc") { return SourceLoc{file, line, "Fn"}; }

// A small MLP-ish program: relu(x W) summed over rows, with a scalar constant.
struct Prog {
  std::vector<int64_t> x_dims = {8, 4};
  DType dtype = kF32;
  std::optional<Sharding> x_sharding;
  double scale = 0.5;
  int line_offset = 0;
  std::string x_name = "x";
  bool extra_op = false;
};

std::unique_ptr<Module> Build(const Prog& p) {
  auto m = std::make_unique<Module>();
  int o = p.line_offset;
  Instruction* x = m->Parameter(Shape(p.dtype, p.x_dims), p.x_name, At(10 + o));
  x->sharding = p.x_sharding;
  Instruction* w = m->Parameter(Shape(p.dtype, {p.x_dims[1], 3}), "w", At(11 + o));
  Instruction* y = m->DotGeneral(x, w, {{}, {}, {1}, {0}}, At(12 + o));
  Instruction* zero = m->ScalarConstant(p.dtype, 0, At(13 + o));
  Instruction* zb = m->BroadcastInDim(zero, y->shape.dims, {}, At(13 + o));
  Instruction* r = m->Binary(Opcode::kMaximum, y, zb, At(13 + o));
  Instruction* s = m->ScalarConstant(p.dtype, p.scale, At(14 + o));
  Instruction* sb = m->BroadcastInDim(s, y->shape.dims, {}, At(14 + o));
  Instruction* scaled = m->Binary(Opcode::kMultiply, r, sb, At(14 + o));
  if (p.extra_op) scaled = m->Unary(Opcode::kNegate, scaled, At(15 + o));
  Instruction* init = m->ScalarConstant(p.dtype, 0, At(16 + o));
  Instruction* red = m->Reduce(scaled, init, {0}, ReduceKind::kSum, At(16 + o));
  m->AddOutput(red);
  return m;
}

// ---------------------------------------------------------------- verifier

TEST(VerifierTest, AcceptsAWellFormedModule) {
  auto m = Build({});
  EXPECT_TRUE(Verify(*m).ok()) << Verify(*m);
}

TEST(VerifierTest, WrongOperandTypes) {
  Module m;
  Instruction* a = m.Parameter(Shape(kF32, {2, 3}), "a");
  Instruction* b = m.Parameter(Shape(kF32, {3, 2}), "b");
  m.AddOutput(m.Binary(Opcode::kAdd, a, b, At(42)));
  absl::Status s = Verify(m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("stablehlo.add"), std::string::npos) << s;
  EXPECT_NE(s.message().find("samples/model.cc:42"), std::string::npos) << s;
  EXPECT_NE(s.message().find("f32[2,3] vs f32[3,2]"), std::string::npos) << s;

  Module m2;
  Instruction* c = m2.Parameter(Shape(kF32, {2}), "c");
  Instruction* d = m2.Parameter(Shape(DType::kF64, {2}), "d");
  m2.AddOutput(m2.Binary(Opcode::kMultiply, c, d, At(7)));
  s = Verify(m2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stablehlo.multiply"), std::string::npos) << s;

  Module m3;
  Instruction* e = m3.Parameter(Shape(kF32, {2, 3}), "e");
  Instruction* f = m3.Parameter(Shape(kF32, {4, 2}), "f");
  m3.AddOutput(m3.DotGeneral(e, f, {{}, {}, {1}, {0}}, At(9)));
  s = Verify(m3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stablehlo.dot_general"), std::string::npos) << s;
  EXPECT_NE(s.message().find("contracting"), std::string::npos) << s;
}

TEST(VerifierTest, BadTransposePermutation) {
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 0}, {1}, {0, 2}, {1, 0, 2}}) {
    Module m;
    Instruction* a = m.Parameter(Shape(kF32, {2, 3}), "a");
    m.AddOutput(m.Transpose(a, perm, At(5)));
    absl::Status s = Verify(m);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("stablehlo.transpose"), std::string::npos) << s;
    EXPECT_NE(s.message().find("permutation"), std::string::npos) << s;
    EXPECT_NE(s.message().find("samples/model.cc:5"), std::string::npos) << s;
  }
}

TEST(VerifierTest, ReduceDimensionOutOfRange) {
  for (int64_t dim : {2, -1, 7}) {
    Module m;
    Instruction* a = m.Parameter(Shape(kF32, {2, 3}), "a");
    Instruction* init = m.ScalarConstant(kF32, 0);
    m.AddOutput(m.Reduce(a, init, {dim}, ReduceKind::kSum, At(8)));
    absl::Status s = Verify(m);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("stablehlo.reduce"), std::string::npos) << s;
    EXPECT_NE(s.message().find("reduce dimension out of range"), std::string::npos) << s;
  }
  Module m;
  Instruction* a = m.Parameter(Shape(kF32, {2, 3}), "a");
  Instruction* init = m.Parameter(Shape(kF32, {2}), "init");
  m.AddOutput(m.Reduce(a, init, {1}, ReduceKind::kSum, At(8)));
  EXPECT_NE(Verify(m).message().find("init value must be a scalar"), std::string::npos);
}

TEST(VerifierTest, OtherMistakes) {
  {
    Module m;
    Instruction* a = m.Parameter(Shape(kF32, {2, 3}), "a");
    m.AddOutput(m.Reshape(a, {4, 2}, At(3)));
    absl::Status s = Verify(m);
    EXPECT_NE(s.message().find("stablehlo.reshape"), std::string::npos) << s;
    EXPECT_NE(s.message().find("element count"), std::string::npos) << s;
  }
  {
    Module m;
    Instruction* a = m.Parameter(Shape(kF32, {2, 3}), "a");
    m.AddOutput(m.BroadcastInDim(a, {2, 4}, {0, 1}, At(3)));
    absl::Status s = Verify(m);
    EXPECT_NE(s.message().find("stablehlo.broadcast_in_dim"), std::string::npos) << s;
  }
  {
    // An instruction whose operand is defined later (not topological).
    Module m;
    Instruction* a = m.Parameter(Shape(kF32, {2}), "a");
    Instruction* n = m.Unary(Opcode::kNegate, a);
    Instruction* e = m.Unary(Opcode::kExponential, a);
    n->operands[0] = e;
    m.AddOutput(n);
    EXPECT_NE(Verify(m).message().find("not topological"), std::string::npos);
  }
  {
    // Arity.
    Module m;
    Instruction* a = m.Parameter(Shape(kF32, {2}), "a");
    Instruction* n = m.Unary(Opcode::kNegate, a);
    n->operands.push_back(a);
    m.AddOutput(n);
    EXPECT_NE(Verify(m).message().find("expects 1 operands, has 2"), std::string::npos);
  }
}

TEST(VerifierTest, NewCollectivesResultTypes) {
  Module m;
  m.set_num_partitions(4);
  Instruction* a = m.Parameter(Shape(kF32, {8, 6}), "a");
  EXPECT_EQ(m.ReduceScatter(a, 0, ReduceKind::kSum, {{0, 1, 2, 3}})->shape, Shape(kF32, {2, 6}));
  EXPECT_EQ(m.ReduceScatter(a, 1, ReduceKind::kMax, {{0, 2}, {1, 3}})->shape, Shape(kF32, {8, 3}));
  // Empty groups: every one of num_partitions devices.
  EXPECT_EQ(m.ReduceScatter(a, 0, ReduceKind::kSum, {})->shape, Shape(kF32, {2, 6}));
  EXPECT_EQ(m.AllToAll(a, 1, 0, 2, {{0, 1}, {2, 3}})->shape, Shape(kF32, {16, 3}));
  EXPECT_EQ(m.AllToAll(a, 0, 0, 4, {})->shape, Shape(kF32, {8, 6}));
  EXPECT_EQ(m.CollectivePermute(a, {{0, 1}, {1, 0}})->shape, a->shape);
  EXPECT_EQ(m.CollectiveBroadcast(a, {{3, 2, 1, 0}})->shape, a->shape);
  EXPECT_TRUE(Verify(m).ok()) << Verify(m);
  for (const auto& i : m.instructions()) EXPECT_EQ(IsCollective(i->op), i->op != Opcode::kParameter);
}

TEST(VerifierTest, NewCollectivesMistakes) {
  using Make = std::function<void(Module&, Instruction*)>;
  struct Case {
    Make make;
    const char* want;
  } cases[] = {
      {[](Module& m, Instruction* a) {
         m.ReduceScatter(a, 2, ReduceKind::kSum, {{0, 1}});
       },
       "stablehlo.reduce_scatter (%1): scatter_dimension [2] is out of range for rank 2"},
      {[](Module& m, Instruction* a) {
         m.ReduceScatter(a, 1, ReduceKind::kSum, {{0, 1, 2, 3}});
       },
       "scatter dimension 1 (size 6) is not divisible by the replica group size 4"},
      {[](Module& m, Instruction* a) {
         m.ReduceScatter(a, 0, ReduceKind::kSum, {{0, 1}, {2}});
       },
       "replica groups differ in size (2 and 1 members)"},
      {[](Module& m, Instruction* a) { m.AllToAll(a, 0, 1, 0, {}); }, "split_count 0 must be positive"},
      {[](Module& m, Instruction* a) { m.AllToAll(a, 0, 5, 2, {}); },
       "concat_dimension 5 is out of range for rank 2"},
      {[](Module& m, Instruction* a) { m.AllToAll(a, -1, 0, 2, {}); }, "split_dimension -1 is out of range"},
      {[](Module& m, Instruction* a) { m.AllToAll(a, 1, 0, 4, {}); },
       "split dimension 1 (size 6) is not divisible by split_count 4"},
      {[](Module& m, Instruction* a) {
         m.CollectiveBroadcast(a, {{0, -1}});
       },
       "negative device id -1 in replica_groups"},
      {[](Module& m, Instruction* a) { m.CollectiveBroadcast(a, {{}}); }, "a replica group is empty"},
      {[](Module& m, Instruction* a) {
         m.AllGather(a, 0, {{0, 1}, {1, 2}});
       },
       "a device appears in two replica groups"},
      {[](Module& m, Instruction* a) {
         m.CollectivePermute(a, {{0, -2}});
       },
       "negative device id in source_target_pairs [0, -2]"},
      {[](Module& m, Instruction* a) {
         m.CollectivePermute(a, {{0, 1}, {1, 2}, {3, 2}});
       },
       "stablehlo.collective_permute (%1): device 2 is the target of two source_target_pairs"},
      {[](Module& m, Instruction* a) {
         m.CollectivePermute(a, {{3, 1}, {3, 0}});
       },
       "device 3 is the source of two source_target_pairs"},
      {[](Module& m, Instruction* a) {
         // A declared result that implies no whole group (as a parsed module could have).
         m.ReduceScatter(a, 0, ReduceKind::kSum, {})->shape = Shape(kF32, {3, 6});
       },
       "with empty replica_groups the result's scatter dimension (3) must divide the operand's (8)"},
  };
  for (const Case& c : cases) {
    Module m;
    m.set_num_partitions(2);
    c.make(m, m.Parameter(Shape(kF32, {8, 6}), "a"));
    absl::Status s = Verify(m);
    EXPECT_FALSE(s.ok()) << c.want;
    EXPECT_NE(s.message().find(c.want), std::string::npos) << s << "\nwanted: " << c.want;
  }
}

// ---------------------------------------------------------------- printer

TEST(PrintTest, StableHloNamesLocationsAndShardings) {
  Prog p;
  p.x_sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  auto m = Build(p);
  m->instructions()[2]->scope = "layers.0";
  m->instructions()[2]->sharding = Sharding::Replicated();
  std::string text = PrintModule(*m);
  for (const char* want :
       {"module @main", "func.func @main(", "stablehlo.dot_general", "stablehlo.maximum", "stablehlo.constant",
        "stablehlo.broadcast_in_dim", "stablehlo.multiply", "stablehlo.reduce", "tensor<8x4xf32>",
        "loc(\"samples/model.cc\":10:0)", "loc(\"samples/model.cc\":16:0)",
        "loc(\"layers.0\"(\"samples/model.cc\":12:0))", "mhlo.sharding = \"{devices=[2,1]0,1}\"",
        "mhlo.sharding = \"{replicated}\"", "shardscope.name = \"x\"", "return %"}) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing " << want << " in\n" << text;
  }
  std::string bare = PrintModule(*m, {.locations = false, .names = false});
  EXPECT_EQ(bare.find("loc("), std::string::npos) << bare;
  EXPECT_EQ(bare.find("shardscope.name"), std::string::npos) << bare;
  EXPECT_NE(bare.find("mhlo.sharding"), std::string::npos) << bare;
}

TEST(PrintTest, Collectives) {
  Module m;
  Instruction* a = m.Parameter(Shape(kF32, {2, 3}), "a");
  Instruction* r = m.AllReduce(a, ReduceKind::kSum, {{0, 1}, {2, 3}});
  Instruction* g = m.AllGather(r, 0, {{0, 1}, {2, 3}});
  m.AddOutput(g);
  EXPECT_EQ(g->shape, Shape(kF32, {4, 3}));
  ASSERT_TRUE(Verify(m).ok());
  std::string text = PrintModule(m);
  EXPECT_NE(text.find("\"stablehlo.all_reduce\""), std::string::npos) << text;
  EXPECT_NE(text.find("replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"), std::string::npos) << text;
  EXPECT_NE(text.find("all_gather_dim = 0"), std::string::npos) << text;
}

TEST(PrintTest, NewCollectivesInStableHloForm) {
  Module m;
  Instruction* a = m.Parameter(Shape(kF32, {4, 6}), "a");
  m.AddOutput(m.ReduceScatter(a, 1, ReduceKind::kMax, {{0, 1}, {2, 3}}));
  m.AddOutput(m.AllToAll(a, 1, 0, 2, {{0, 2}, {1, 3}}));
  m.AddOutput(m.CollectivePermute(a, {{0, 1}, {1, 0}}));
  m.AddOutput(m.CollectiveBroadcast(a, {{1, 0}}));
  ASSERT_TRUE(Verify(m).ok()) << Verify(m);
  std::string text = PrintModule(m, {.locations = false, .names = false});
  for (const char* want : {
           "%1 = \"stablehlo.reduce_scatter\"(%arg0) ({\n      ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
           "        %r = stablehlo.maximum %x, %y : tensor<f32>\n        stablehlo.return %r : tensor<f32>\n "
           "   }) "
           "{replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, scatter_dimension = 1 : i64} : "
           "(tensor<4x6xf32>) -> tensor<4x3xf32>",
           "%2 = \"stablehlo.all_to_all\"(%arg0) {concat_dimension = 0 : i64, replica_groups = dense<[[0, "
           "2], [1, 3]]> "
           ": tensor<2x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64} : (tensor<4x6xf32>) -> "
           "tensor<8x3xf32>",
           "%3 = \"stablehlo.collective_permute\"(%arg0) {source_target_pairs = dense<[[0, 1], [1, 0]]> : "
           "tensor<2x2xi64>} : (tensor<4x6xf32>) -> tensor<4x6xf32>",
           "%4 = \"stablehlo.collective_broadcast\"(%arg0) {replica_groups = dense<[[1, 0]]> : "
           "tensor<1x2xi64>} : "
           "(tensor<4x6xf32>) -> tensor<4x6xf32>",
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing\n" << want << "\nin\n" << text;
  }
}

// ---------------------------------------------------------------- fingerprint

TEST(FingerprintTest, IgnoresLocationsAndNames) {
  std::string base = Fingerprint(*Build({}));
  EXPECT_EQ(base.size(), 32u);
  EXPECT_EQ(base, Fingerprint(*Build({})));
  Prog moved;
  moved.line_offset = 100;
  EXPECT_EQ(base, Fingerprint(*Build(moved)));
  Prog renamed;
  renamed.x_name = "inputs";
  EXPECT_EQ(base, Fingerprint(*Build(renamed)));
  auto scoped = Build({});
  for (const auto& i : scoped->instructions()) i->scope = "block.1";
  EXPECT_EQ(base, Fingerprint(*scoped));
}

TEST(FingerprintTest, ChangesWithShapesDtypesShardingsAndConstants) {
  std::string base = Fingerprint(*Build({}));
  Prog shape;
  shape.x_dims = {16, 4};
  EXPECT_NE(base, Fingerprint(*Build(shape)));
  Prog dtype;
  dtype.dtype = DType::kF64;
  EXPECT_NE(base, Fingerprint(*Build(dtype)));
  Prog sharded;
  sharded.x_sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  std::string s1 = Fingerprint(*Build(sharded));
  EXPECT_NE(base, s1);
  sharded.x_sharding = *Sharding::Parse("{devices=[2,1]1,0}");
  EXPECT_NE(s1, Fingerprint(*Build(sharded)));
  Prog constant;
  constant.scale = 0.25;
  EXPECT_NE(base, Fingerprint(*Build(constant)));
  Prog extra;
  extra.extra_op = true;
  EXPECT_NE(base, Fingerprint(*Build(extra)));
}

TEST(FingerprintTest, DistinguishesCloseF64Constants) {
  Prog a, b;
  a.dtype = b.dtype = DType::kF64;
  a.scale = 0.1;
  b.scale = 0.1 + 1e-12;
  EXPECT_NE(Fingerprint(*Build(a)), Fingerprint(*Build(b)));
}

// ---------------------------------------------------------------- diffs
// (Aligned diffs of generated graphs: tests/compiler/graph_diff_test.cc.)

TEST(DiffTest, IdenticalModules) {
  GraphDiff d = DiffGraphs(*Build({}), *Build({}));
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.distance(), 0);
  // Locations are not differences; inputs pair by the keys given.
  Prog moved;
  moved.line_offset = 3;
  EXPECT_TRUE(DiffGraphs(*Build({}), *Build(moved)).empty());
  Prog renamed;
  renamed.x_name = "y";
  EXPECT_TRUE(DiffGraphs(*Build({}), *Build(renamed), {"x", "w"}, {"x", "w"}).empty());
}

TEST(DiffTest, InputShapeDtypeSharding) {
  Prog shape;
  shape.x_dims = {16, 4};
  GraphDiff d = DiffGraphs(*Build({}), *Build(shape));
  EXPECT_TRUE(d.changes.empty());
  ASSERT_EQ(d.inputs.size(), 1u);
  EXPECT_EQ(d.inputs[0].new_param, 0);
  EXPECT_TRUE(d.inputs[0].shape);
  EXPECT_FALSE(d.inputs[0].dtype);
  EXPECT_FALSE(d.inputs[0].sharding);

  Prog dtype;
  dtype.dtype = DType::kF64;
  d = DiffGraphs(*Build({}), *Build(dtype));
  ASSERT_EQ(d.inputs.size(), 2u);  // both parameters change element type
  EXPECT_TRUE(d.inputs[0].dtype);
  EXPECT_FALSE(d.inputs[0].shape);
  EXPECT_TRUE(d.inputs[1].dtype);

  Prog sharded;
  sharded.x_sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  d = DiffGraphs(*Build({}), *Build(sharded));
  EXPECT_TRUE(d.changes.empty());
  ASSERT_EQ(d.inputs.size(), 1u);
  EXPECT_TRUE(d.inputs[0].sharding);
  EXPECT_FALSE(d.inputs[0].shape);
  // An explicit {replicated} equals no annotation.
  Prog repl;
  repl.x_sharding = Sharding::Replicated();
  EXPECT_TRUE(DiffGraphs(*Build({}), *Build(repl)).empty());
}

TEST(DiffTest, AnInsertedOpIsTheOnlyDifference) {
  Prog extra;
  extra.extra_op = true;
  auto old_m = Build({});
  auto new_m = Build(extra);
  GraphDiff d = DiffGraphs(*old_m, *new_m);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].kind, OpChange::Kind::kAdded);
  EXPECT_EQ(new_m->instructions()[d.changes[0].new_index]->op, Opcode::kNegate);
  // Removing it again is the one removal.
  GraphDiff back = DiffGraphs(*new_m, *old_m);
  ASSERT_EQ(back.changes.size(), 1u);
  EXPECT_EQ(back.changes[0].kind, OpChange::Kind::kRemoved);

  // A different contraction on the same line is the dot's attributes.
  Module b;
  Instruction* x = b.Parameter(Shape(kF32, {4, 4}), "x");
  Instruction* w = b.Parameter(Shape(kF32, {4, 4}), "w");
  b.AddOutput(b.DotGeneral(x, w, {{}, {}, {0}, {0}}, At(20)));
  Module c;
  Instruction* x2 = c.Parameter(Shape(kF32, {4, 4}), "x");
  Instruction* w2 = c.Parameter(Shape(kF32, {4, 4}), "w");
  c.AddOutput(c.DotGeneral(x2, w2, {{}, {}, {1}, {0}}, At(20)));
  GraphDiff dc = DiffGraphs(b, c);
  ASSERT_EQ(dc.changes.size(), 1u);
  EXPECT_EQ(dc.changes[0].kind, OpChange::Kind::kChanged);
  EXPECT_EQ(dc.changes[0].what, "attributes");
  EXPECT_EQ(dc.changes[0].new_index, 2);
}

TEST(DiffTest, CollectiveAttributesAreStructure) {
  auto build = [](std::vector<std::pair<int64_t, int64_t>> pairs, std::vector<std::vector<int64_t>> groups) {
    auto m = std::make_unique<Module>();
    Instruction* x = m->Parameter(Shape(kF32, {4}), "x");
    m->AddOutput(m->CollectiveBroadcast(m->CollectivePermute(x, std::move(pairs)), std::move(groups)));
    return m;
  };
  auto base = build({{0, 1}, {1, 0}}, {{0, 1}});
  EXPECT_TRUE(DiffGraphs(*base, *build({{0, 1}, {1, 0}}, {{0, 1}})).empty());
  auto other_pairs = build({{1, 0}, {0, 1}}, {{0, 1}});
  GraphDiff pairs = DiffGraphs(*base, *other_pairs);
  ASSERT_FALSE(pairs.changes.empty());
  EXPECT_EQ(other_pairs->instructions()[pairs.changes[0].new_index]->op, Opcode::kCollectivePermute);
  auto other_groups = build({{0, 1}, {1, 0}}, {{1, 0}});
  GraphDiff groups = DiffGraphs(*base, *other_groups);
  ASSERT_FALSE(groups.changes.empty());
  EXPECT_EQ(other_groups->instructions()[groups.changes[0].new_index]->op, Opcode::kCollectiveBroadcast);
}

TEST(DiffTest, ConstantOnlyDifference) {
  Prog constant;
  constant.scale = 0.25;
  auto old_m = Build({});
  auto new_m = Build(constant);
  GraphDiff d = DiffGraphs(*old_m, *new_m);
  EXPECT_TRUE(d.inputs.empty());
  ASSERT_EQ(d.changes.size(), 1u);  // the constant; its users read its counterpart
  EXPECT_EQ(d.changes[0].kind, OpChange::Kind::kChanged);
  EXPECT_EQ(d.changes[0].what, "constant");
  const Instruction& c = *new_m->instructions()[d.changes[0].new_index];
  EXPECT_EQ(c.op, Opcode::kConstant);
  EXPECT_DOUBLE_EQ(c.literal->GetDouble(0), 0.25);
  EXPECT_DOUBLE_EQ(old_m->instructions()[d.changes[0].old_index]->literal->GetDouble(0), 0.5);
}

}  // namespace
}  // namespace shardscope::compiler
