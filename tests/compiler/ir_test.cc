// Tests of the IR (compiler/ir.h): the verifier, the StableHLO text printer,
// fingerprints (identity without source locations or names) and DiffModules
// (what changed between two graphs of one call site).
#include <memory>
#include <string>
#include <vector>

#include "compiler/fingerprint.h"
#include "compiler/ir.h"
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

TEST(DiffTest, IdenticalModules) {
  ModuleDiff d = DiffModules(*Build({}), *Build({}));
  EXPECT_TRUE(d.same_structure);
  EXPECT_TRUE(d.inputs.empty());
  EXPECT_EQ(d.first_difference, -1);
  EXPECT_EQ(d.first_constant_difference, -1);
  EXPECT_EQ(d.distance, 0);
  // Locations and names are not differences.
  Prog moved;
  moved.line_offset = 3;
  moved.x_name = "y";
  EXPECT_EQ(DiffModules(*Build({}), *Build(moved)).distance, 0);
}

TEST(DiffTest, InputShapeDtypeSharding) {
  Prog shape;
  shape.x_dims = {16, 4};
  ModuleDiff d = DiffModules(*Build({}), *Build(shape));
  EXPECT_TRUE(d.same_structure);
  ASSERT_EQ(d.inputs.size(), 1u);
  EXPECT_EQ(d.inputs[0].index, 0);
  EXPECT_TRUE(d.inputs[0].shape);
  EXPECT_FALSE(d.inputs[0].dtype);
  EXPECT_FALSE(d.inputs[0].sharding);

  Prog dtype;
  dtype.dtype = DType::kF64;
  d = DiffModules(*Build({}), *Build(dtype));
  EXPECT_TRUE(d.same_structure);
  ASSERT_EQ(d.inputs.size(), 2u);  // both parameters change element type
  EXPECT_TRUE(d.inputs[0].dtype);
  EXPECT_FALSE(d.inputs[0].shape);
  EXPECT_TRUE(d.inputs[1].dtype);

  Prog sharded;
  sharded.x_sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  d = DiffModules(*Build({}), *Build(sharded));
  EXPECT_TRUE(d.same_structure);
  ASSERT_EQ(d.inputs.size(), 1u);
  EXPECT_TRUE(d.inputs[0].sharding);
  EXPECT_FALSE(d.inputs[0].shape);
  // An explicit {replicated} equals no annotation.
  Prog repl;
  repl.x_sharding = Sharding::Replicated();
  EXPECT_TRUE(DiffModules(*Build({}), *Build(repl)).inputs.empty());
}

TEST(DiffTest, StructureDifference) {
  Prog extra;
  extra.extra_op = true;
  auto old_m = Build({});
  auto new_m = Build(extra);
  ModuleDiff d = DiffModules(*old_m, *new_m);
  EXPECT_FALSE(d.same_structure);
  ASSERT_GE(d.first_difference, 0);
  EXPECT_EQ(new_m->instructions()[d.first_difference]->op, Opcode::kNegate);
  EXPECT_GT(d.distance, 0);
  EXPECT_EQ(d.parameter_count_old, 2);
  EXPECT_EQ(d.parameter_count_new, 2);

  // A different contraction is structure too.
  auto a = Build({});
  Module b;
  Instruction* x = b.Parameter(Shape(kF32, {4, 4}), "x");
  Instruction* w = b.Parameter(Shape(kF32, {4, 4}), "w");
  b.AddOutput(b.DotGeneral(x, w, {{}, {}, {0}, {0}}));
  Module c;
  Instruction* x2 = c.Parameter(Shape(kF32, {4, 4}), "x");
  Instruction* w2 = c.Parameter(Shape(kF32, {4, 4}), "w");
  c.AddOutput(c.DotGeneral(x2, w2, {{}, {}, {1}, {0}}));
  ModuleDiff dc = DiffModules(b, c);
  EXPECT_FALSE(dc.same_structure);
  EXPECT_EQ(dc.first_difference, 2);
}

TEST(DiffTest, ConstantOnlyDifference) {
  Prog constant;
  constant.scale = 0.25;
  auto new_m = Build(constant);
  ModuleDiff d = DiffModules(*Build({}), *new_m);
  EXPECT_TRUE(d.same_structure);
  EXPECT_TRUE(d.inputs.empty());
  EXPECT_EQ(d.first_difference, -1);
  ASSERT_GE(d.first_constant_difference, 0);
  EXPECT_EQ(new_m->instructions()[d.first_constant_difference]->op, Opcode::kConstant);
  EXPECT_DOUBLE_EQ(d.old_constant, 0.5);
  EXPECT_DOUBLE_EQ(d.new_constant, 0.25);
  EXPECT_GT(d.distance, 0);
}

}  // namespace
}  // namespace shardscope::compiler
