// The StableHLO text parser: round trips (Print(Parse(Print(m))) == Print(m))
// for a module using every op, with locations, module paths, shardings and
// names; hand-written text in the forms people write; and errors that name
// the line and column.
#include "compiler/parser.h"

#include <functional>
#include <limits>

#include "compiler/fingerprint.h"
#include "compiler/text.h"
#include "gtest/gtest.h"

namespace shardscope::compiler {
namespace {

SourceLoc L(int line) { return {"samples/cnn.cc", line, "Forward"}; }

// One module that uses every op of the table (except the collectives and
// partition_id, which only the partitioner makes; they have their own test).
std::unique_ptr<Module> EveryOp() {
  auto m = std::make_unique<Module>("every_op");
  auto* x = m->Parameter(Shape(DType::kF32, {2, 4, 8, 8}), "images", L(10));
  x->sharding = *Sharding::Parse("{devices=[2,1,1,1]0,1}");
  auto* k = m->Parameter(Shape(DType::kF32, {6, 4, 3, 3}), "conv.weight", L(11));
  auto* ids = m->Parameter(Shape(DType::kI32, {2, 5}), "tokens");
  auto* table = m->Parameter(Shape(DType::kBF16, {16, 8}), "embed.weight");
  auto* state = m->Parameter(Shape(DType::kI64, {2}), "rng");
  auto* zero = m->ScalarConstant(DType::kF32, 0, L(12));
  auto* one = m->Constant(Literal::FromF32({2}, {1.5f, -0.25f}), L(12));
  ConvDims cd;
  cd.input_spatial = cd.kernel_spatial = cd.output_spatial = {2, 3};
  cd.padding = {{1, 1}, {1, 1}};
  cd.window_strides = {1, 1};
  auto* conv = m->Convolution(x, k, cd, L(13));
  conv->scope = "layers.0.conv";
  auto* pooled = m->ReduceWindow(conv, m->ScalarConstant(DType::kF32, -1e30), {{1, 1, 2, 2}, {1, 1, 2, 2}, {}, {}, {}},
                                 ReduceKind::kMax, L(14));
  auto* act = m->Unary(Opcode::kLogistic, m->Unary(Opcode::kTanh, pooled));
  auto* s = m->Unary(Opcode::kRsqrt, m->Unary(Opcode::kSqrt, m->Unary(Opcode::kAbs, act)));
  auto* e = m->Unary(Opcode::kLog, m->Unary(Opcode::kExponential, m->Unary(Opcode::kNegate, s)));
  auto* pw = m->Binary(Opcode::kPower, e, m->BroadcastInDim(zero, e->shape.dims, {}));
  auto* b = m->Binary(Opcode::kMaximum, m->Binary(Opcode::kMinimum, pw, pw), m->Binary(Opcode::kDivide, pw, pw));
  auto* c = m->Binary(Opcode::kMultiply, m->Binary(Opcode::kSubtract, b, b), m->Binary(Opcode::kAdd, b, b));
  auto* cl = m->Clamp(zero, c, zero);
  auto* cmp = m->Compare(cl, c, CompareDirection::kLT);
  auto* sel = m->Select(cmp, cl, c);
  auto* r = m->Reduce(sel, zero, {2, 3}, ReduceKind::kSum, L(20));
  auto* t = m->Transpose(r, {1, 0});
  auto* rs = m->Reshape(t, {12});
  auto* sl = m->Slice(rs, {{1}, {11}, {3}});
  auto* pd = m->Pad(sl, zero, {{2}, {-1}, {1}});
  auto* cat = m->Concatenate({pd, one, pd}, 0);
  auto* i0 = m->ScalarConstant(DType::kI32, 1);
  auto* ds = m->DynamicSlice(cat, {i0}, {4});
  auto* dus = m->DynamicUpdateSlice(cat, ds, {i0});
  auto* dot = m->DotGeneral(m->Reshape(dus, {2, cat->shape.dims[0] / 2}), m->Reshape(dus, {2, cat->shape.dims[0] / 2}),
                            {{}, {}, {1}, {1}});
  auto* emb = m->Gather(table, ids, {{2}, {0}, {0}, 2, {1, 8}, false}, L(30));
  emb->scope = "embed";
  auto* grad = m->Scatter(table, ids, emb, {{2}, {0}, {0}, 2, false, false, false}, ReduceKind::kSum, L(31));
  auto* put = m->Scatter(table, ids, emb, {{2}, {0}, {0}, 2, true, true, true}, ReduceKind::kSum);
  auto* bits = m->RngBitGenerator(state, Shape(DType::kI32, {3, 3}));
  auto* iota = m->Iota(Shape(DType::kI64, {4, 2}), 1);
  auto* conv16 = m->Convert(m->Convert(dot, DType::kF16), DType::kBF16);
  conv16->sharding = Sharding::Replicated();
  m->SetOutputs({conv16, grad, put, bits, iota});
  m->output_shardings() = {Sharding::Replicated(), Sharding::Replicated()};
  return m;
}

TEST(Parser, EveryOpRoundTrips) {
  auto m = EveryOp();
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m);
  const std::string text = PrintModule(*m);
  auto parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(PrintModule(**parsed), text);
  // Names, locations and module paths come back too.
  const Module& p = **parsed;
  EXPECT_EQ(p.parameters()[1]->name, "conv.weight");
  EXPECT_EQ(p.parameters()[0]->sharding->ToString(), "{devices=[2,1,1,1]0,1}");
  bool found = false;
  for (const auto& i : p.instructions())
    if (i->op == Opcode::kConvolution) {
      found = true;
      EXPECT_EQ(i->scope, "layers.0.conv");
      EXPECT_EQ(i->loc.file, "samples/cnn.cc");
      EXPECT_EQ(i->loc.line, 13);
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(p.output_shardings().size(), 2u);
  // Without locations it still parses (the fingerprint's form).
  std::string bare = PrintModule(*m, {.locations = false, .names = false});
  auto parsed_bare = ParseModule(bare);
  ASSERT_TRUE(parsed_bare.ok()) << parsed_bare.status();
  EXPECT_EQ(PrintModule(**parsed_bare, {.locations = false, .names = false}), bare);
}

// The fingerprint hashes fields rather than text; the printed (location-free)
// text shows every attribute, so whenever a change to one attribute shows in
// the text, it must change the fingerprint too.
TEST(Parser, FingerprintCoversEveryPrintedAttribute) {
  auto m = EveryOp();
  const PrintOptions bare{.locations = false, .names = false};
  using Mutation = std::function<bool(Instruction&)>;  // false: not applicable
  auto bump = [](std::vector<int64_t>& v) {
    if (v.empty()) return false;
    v[0] += 1;
    return true;
  };
  auto bump_pair = [](std::vector<std::pair<int64_t, int64_t>>& v) {
    if (v.empty()) return false;
    v[0].second += 1;
    return true;
  };
  std::vector<Mutation> mutations = {
      [&](Instruction& i) { return bump(i.dims); },
      [&](Instruction& i) { return bump(i.dot.lhs_contracting); },
      [&](Instruction& i) { return bump(i.dot.rhs_contracting); },
      [&](Instruction& i) { return bump(i.slice.start); },
      [&](Instruction& i) { return bump(i.slice.stride); },
      [&](Instruction& i) { return bump(i.pad.low); },
      [&](Instruction& i) { return bump(i.pad.interior); },
      [&](Instruction& i) { return bump(i.conv.window_strides); },
      [&](Instruction& i) { return bump_pair(i.conv.padding); },
      [&](Instruction& i) { return i.op == Opcode::kConvolution && (++i.conv.feature_group_count, true); },
      [&](Instruction& i) { return bump(i.window.dimensions); },
      [&](Instruction& i) { return bump(i.window.strides); },
      [&](Instruction& i) { return bump(i.gather.slice_sizes); },
      [&](Instruction& i) { return bump(i.gather.offset_dims); },
      [&](Instruction& i) { return i.op == Opcode::kGather && (i.gather.indices_are_sorted ^= true, true); },
      [&](Instruction& i) { return bump(i.scatter.update_window_dims); },
      [&](Instruction& i) { return i.op == Opcode::kScatter && (i.scatter.replace ^= true, true); },
      [&](Instruction& i) { return i.op == Opcode::kScatter && (i.scatter.unique_indices ^= true, true); },
      [&](Instruction& i) {
        if (i.op != Opcode::kReduce && i.op != Opcode::kReduceWindow && i.op != Opcode::kScatter) return false;
        i.reduce = i.reduce == ReduceKind::kSum ? ReduceKind::kMax : ReduceKind::kSum;
        return true;
      },
      [&](Instruction& i) {
        if (i.op != Opcode::kCompare) return false;
        i.compare = CompareDirection::kGE;
        return true;
      },
      [&](Instruction& i) {
        if (!i.literal || i.literal->bytes() == 0) return false;
        static_cast<unsigned char*>(i.literal->data())[0] ^= 1;
        return true;
      },
      [&](Instruction& i) {
        i.sharding = i.sharding ? std::nullopt : std::optional<Sharding>(*Sharding::Parse("{maximal device=1}"));
        return true;
      },
      [&](Instruction& i) { return bump(i.shape.dims); },
  };
  int checked = 0;
  for (const auto& ip : m->instructions()) {
    for (const Mutation& mutate : mutations) {
      auto copy = ParseModule(PrintModule(*m));
      ASSERT_TRUE(copy.ok());
      Instruction& target = *(*copy)->instructions()[&ip - &m->instructions()[0]];
      const std::string text_before = PrintModule(**copy, bare), fp_before = Fingerprint(**copy);
      if (!mutate(target)) continue;
      if (PrintModule(**copy, bare) == text_before) continue;
      ++checked;
      EXPECT_NE(Fingerprint(**copy), fp_before) << OpcodeName(target.op) << " changed to: " << PrintInstruction(target, bare);
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(Parser, HandWrittenText) {
  auto m = ParseModule(R"(
    // An MLP layer, written by hand.
    module @mlp {
      func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x3xf32> {shardscope.name = "l1.weight"}) -> tensor<4x3xf32> {
        %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
        %zero = stablehlo.constant dense<0.0> : tensor<4x3xf32>
        %r = stablehlo.maximum %y, %zero : tensor<4x3xf32> loc("model.py":7:3)
        %s = stablehlo.slice %r [0:4, 1:3] : (tensor<4x3xf32>) -> tensor<4x2xf32>
        return %r : tensor<4x3xf32>
      }
    })");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->name(), "mlp");
  EXPECT_EQ((*m)->parameters()[1]->name, "l1.weight");
  ASSERT_EQ((*m)->outputs().size(), 1u);
  EXPECT_EQ((*m)->outputs()[0]->op, Opcode::kMaximum);
  EXPECT_EQ((*m)->outputs()[0]->loc.line, 7);
  // The splat constant became a full literal; the printed form reparses.
  auto again = ParseModule(PrintModule(**m));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PrintModule(**again), PrintModule(**m));
}

TEST(Parser, GenericFormsOfRegionOps) {
  // MLIR writes special floats as hex bit patterns; -inf here.
  auto m = ParseModule(R"(module {
  func.func @main() -> tensor<f32> {
    %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
    return %init : tensor<f32>
  }
})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->outputs()[0]->literal->GetDouble(0), -std::numeric_limits<double>::infinity());

  m = ParseModule(R"(module {
  func.func @main(%arg0: tensor<1x4x6x6xf32>) -> (tensor<1x4x3x3xf32>) {
    %init = stablehlo.constant dense<-inf> : tensor<f32>
    %p = "stablehlo.reduce_window"(%arg0, %init) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %m = stablehlo.maximum %a, %b : tensor<f32>
        stablehlo.return %m : tensor<f32>
    }) {window_dimensions = array<i64: 1, 1, 2, 2>, window_strides = array<i64: 1, 1, 2, 2>} : (tensor<1x4x6x6xf32>, tensor<f32>) -> tensor<1x4x3x3xf32>
    return %p : tensor<1x4x3x3xf32>
  }
})");
  ASSERT_TRUE(m.ok()) << m.status();
  const Instruction* rw = (*m)->outputs()[0];
  EXPECT_EQ(rw->op, Opcode::kReduceWindow);
  EXPECT_EQ(rw->reduce, ReduceKind::kMax);
  EXPECT_EQ(rw->window.strides, (std::vector<int64_t>{1, 1, 2, 2}));
}

TEST(Parser, ErrorsNameLineAndColumn) {
  struct Bad {
    const char* text;
    const char* want;
  } cases[] = {
      {"module {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n    %0 = stablehlo.add %a, %b : tensor<2xf32>\n",
       "line 3, column 28: use of undefined value %b"},
      {"module {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n    %0 = stablehlo.frobnicate %a : tensor<2xf32>\n",
       "line 3, column 10: unknown op 'stablehlo.frobnicate'"},
      {"module {\n  func.func @main(%a: tensor<2xf33>) -> tensor<2xf32> {\n",
       "line 2, column 32: unknown element type 'f33'"},
      {"module {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n    %0 = stablehlo.add %a, %a : tensor<3xf32>\n",
       "line 3, column 33: operand 0 is tensor<2xf32> but the type says tensor<3xf32>"},
      {"module {\n  func.func @main(%a: tensor<2x3xf32>) -> tensor<2xf32> {\n"
       "    %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>\n",
       "line 3, column 10: stablehlo.transpose: result type tensor<2x3xf32> differs from the tensor<3x2xf32>"},
      {"module {\n  func.func @main(%a: tensor<2xf32> {mhlo.sharding = \"{devices=[\"}) -> tensor<2xf32> {\n",
       "line 2, column 37: bad mhlo.sharding"},
      {"module {\n  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n    return %a : tensor<2xf32>\n  }\n",
       "line 5, column 1: expected '}'"},
  };
  for (const Bad& b : cases) {
    auto m = ParseModule(b.text);
    ASSERT_FALSE(m.ok()) << b.text;
    EXPECT_NE(m.status().message().find(b.want), std::string::npos) << m.status() << "\nwanted: " << b.want;
  }
}

TEST(Parser, CollectivesRoundTrip) {
  Module m("local");
  m.set_num_partitions(4);
  auto* a = m.Parameter(Shape(DType::kF32, {2, 3}), "a");
  auto* ar = m.AllReduce(a, ReduceKind::kSum, {{0, 1}, {2, 3}});
  auto* ag = m.AllGather(ar, 0, {{0, 1, 2, 3}});
  auto* pid = m.PartitionId();
  m.SetOutputs({ag, pid});
  std::string text = PrintModule(m);
  auto p = ParseModule(text);
  ASSERT_TRUE(p.ok()) << p.status() << "\n" << text;
  EXPECT_EQ(PrintModule(**p), text);
  EXPECT_EQ((*p)->num_partitions(), 4);
}

}  // namespace
}  // namespace shardscope::compiler
