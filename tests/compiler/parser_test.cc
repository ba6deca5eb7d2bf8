// The StableHLO text parser: round trips (Print(Parse(Print(m))) == Print(m))
// for a module using every op, with locations, module paths, shardings and
// names; hand-written text in the forms people write; and errors that name
// the line and column.
#include "compiler/parser.h"

#include <functional>
#include <limits>
#include <map>

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

// Users name tensors and layers: a quote, a backslash, a newline or a byte
// that is not UTF-8 in a name, a layer path or a file name is escaped as MLIR
// escapes it, and parses back byte for byte (a stored program is replayed
// from this text).
TEST(Parser, NamesWithQuotesAndControlBytesRoundTrip) {
  const std::string name = "lin \"odd\", <mod>\\ \n\ttab \xff\xfe\x01 end";
  const std::string scope = "blocks.0 \"attn\"\n", file = "my dir/\"x\".cc";
  Module m("odd");
  auto* x = m.Parameter(Shape(DType::kF32, {2, 3}), name, {file, 7, ""});
  auto* y = m.Unary(Opcode::kNegate, x, {file, 8, ""});
  y->scope = scope;
  m.SetOutputs({y});
  const std::string text = PrintModule(m);
  EXPECT_NE(text.find("<mod>\\\\ \\0A\\09tab \\FF\\FE\\01 end"), std::string::npos) << text;
  auto parsed = ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ((*parsed)->parameters()[0]->name, name);
  EXPECT_EQ((*parsed)->parameters()[0]->loc.file, file);
  bool found = false;
  for (const auto& i : (*parsed)->instructions())
    if (i->op == Opcode::kNegate) {
      found = true;
      EXPECT_EQ(i->scope, scope);
      EXPECT_EQ(i->loc.file, file);
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(PrintModule(**parsed), text);
}

// The fingerprint hashes fields rather than text; the printed (location-free)
// text shows every attribute, so whenever a change to one attribute shows in
// the text, it must change the fingerprint too.
using Mutation = std::function<bool(Instruction&)>;  // false: not applicable

// Applies every mutation to every instruction of a fresh copy of `m`; returns
// how many changed the printed text (each of which must change the fingerprint).
int CheckFingerprintFollowsText(const Module& m, const std::vector<Mutation>& mutations) {
  const PrintOptions bare{.locations = false, .names = false};
  int checked = 0;
  for (const auto& ip : m.instructions()) {
    for (const Mutation& mutate : mutations) {
      auto copy = ParseModule(PrintModule(m));
      EXPECT_TRUE(copy.ok()) << copy.status();
      if (!copy.ok()) return checked;
      Instruction& target = *(*copy)->instructions()[&ip - &m.instructions()[0]];
      const std::string text_before = PrintModule(**copy, bare), fp_before = Fingerprint(**copy);
      if (!mutate(target)) continue;
      if (PrintModule(**copy, bare) == text_before) continue;
      ++checked;
      EXPECT_NE(Fingerprint(**copy), fp_before)
          << OpcodeName(target.op) << " changed to: " << PrintInstruction(target, bare);
    }
  }
  return checked;
}

bool Bump(std::vector<int64_t>& v) {
  if (v.empty()) return false;
  v[0] += 1;
  return true;
}
bool BumpPair(std::vector<std::pair<int64_t, int64_t>>& v) {
  if (v.empty()) return false;
  v[0].second += 1;
  return true;
}
bool ToggleReduce(Instruction& i) {
  i.reduce = i.reduce == ReduceKind::kSum ? ReduceKind::kMax : ReduceKind::kSum;
  return true;
}

TEST(Parser, FingerprintCoversEveryPrintedAttribute) {
  auto m = EveryOp();
  std::vector<Mutation> mutations = {
      [&](Instruction& i) { return Bump(i.dims); },
      [&](Instruction& i) { return Bump(i.dot.lhs_contracting); },
      [&](Instruction& i) { return Bump(i.dot.rhs_contracting); },
      [&](Instruction& i) { return Bump(i.slice.start); },
      [&](Instruction& i) { return Bump(i.slice.stride); },
      [&](Instruction& i) { return Bump(i.pad.low); },
      [&](Instruction& i) { return Bump(i.pad.interior); },
      [&](Instruction& i) { return Bump(i.conv.window_strides); },
      [&](Instruction& i) { return BumpPair(i.conv.padding); },
      [&](Instruction& i) { return i.op == Opcode::kConvolution && (++i.conv.feature_group_count, true); },
      [&](Instruction& i) { return Bump(i.window.dimensions); },
      [&](Instruction& i) { return Bump(i.window.strides); },
      [&](Instruction& i) { return Bump(i.gather.slice_sizes); },
      [&](Instruction& i) { return Bump(i.gather.offset_dims); },
      [&](Instruction& i) { return i.op == Opcode::kGather && (i.gather.indices_are_sorted ^= true, true); },
      [&](Instruction& i) { return Bump(i.scatter.update_window_dims); },
      [&](Instruction& i) { return i.op == Opcode::kScatter && (i.scatter.replace ^= true, true); },
      [&](Instruction& i) { return i.op == Opcode::kScatter && (i.scatter.unique_indices ^= true, true); },
      [&](Instruction& i) {
        if (i.op != Opcode::kReduce && i.op != Opcode::kReduceWindow && i.op != Opcode::kScatter)
          return false;
        return ToggleReduce(i);
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
      [&](Instruction& i) { return Bump(i.shape.dims); },
  };
  EXPECT_GT(CheckFingerprintFollowsText(*m, mutations), 40);
}

TEST(Parser, IotaShardingsPrintAndParseBack) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {4, 8}), "x");
  x->sharding = *Sharding::Parse("{devices=[2,4]<=[4,2]T(1,0)}");
  m.AddOutput(m.Unary(Opcode::kExponential, x));
  PrintOptions o;
  o.iota_shardings = true;
  const std::string text = PrintModule(m, o);
  EXPECT_NE(text.find("mhlo.sharding = \"{devices=[2,4]<=[4,2]T(1,0)}\""), std::string::npos) << text;
  EXPECT_NE(PrintModule(m).find("{devices=[2,4]0,2,4,6,1,3,5,7}"), std::string::npos);
  auto back = ParseModule(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Fingerprint(**back), Fingerprint(m));
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

// Every collective, with and without replica groups.
std::unique_ptr<Module> EveryCollective() {
  auto m = std::make_unique<Module>("local");
  m->set_num_partitions(4);
  auto* a = m->Parameter(Shape(DType::kF32, {4, 6}), "a");
  auto* ar = m->AllReduce(a, ReduceKind::kSum, {{0, 1}, {2, 3}});
  auto* ag = m->AllGather(ar, 0, {{0, 1, 2, 3}});
  auto* rs = m->ReduceScatter(ag, 1, ReduceKind::kMax, {{0, 2}, {1, 3}}, L(40));
  rs->scope = "layers.1.mlp";
  auto* rs_all = m->ReduceScatter(rs, 0, ReduceKind::kProd, {});
  auto* a2a = m->AllToAll(rs_all, 1, 0, 3, {{0, 1, 2}, {3, 4, 5}}, L(41));
  auto* a2a_all = m->AllToAll(a2a, 0, 0, 4, {});
  auto* ring = m->CollectivePermute(a2a_all, {{0, 1}, {1, 2}, {2, 3}, {3, 0}}, L(42));
  auto* none = m->CollectivePermute(ring, {});
  auto* bc = m->CollectiveBroadcast(none, {{3, 2}, {1, 0}}, L(43));
  auto* bc_all = m->CollectiveBroadcast(bc, {});
  auto* pid = m->PartitionId();
  m->SetOutputs({bc_all, pid});
  return m;
}

TEST(Parser, CollectivesRoundTrip) {
  auto m = EveryCollective();
  ASSERT_TRUE(Verify(*m).ok()) << Verify(*m);
  std::string text = PrintModule(*m);
  auto p = ParseModule(text);
  ASSERT_TRUE(p.ok()) << p.status() << "\n" << text;
  EXPECT_EQ(PrintModule(**p), text);
  EXPECT_EQ((*p)->num_partitions(), 4);
  EXPECT_EQ(Fingerprint(**p), Fingerprint(*m));
  // The attributes themselves, not only their printed form, come back.
  const auto& in = m->instructions();
  const auto& out = (*p)->instructions();
  ASSERT_EQ(in.size(), out.size());
  for (size_t k = 0; k < in.size(); ++k) {
    EXPECT_EQ(out[k]->op, in[k]->op);
    EXPECT_EQ(out[k]->dims, in[k]->dims) << OpcodeName(in[k]->op);
    EXPECT_EQ(out[k]->replica_groups, in[k]->replica_groups) << OpcodeName(in[k]->op);
    EXPECT_EQ(out[k]->source_target_pairs, in[k]->source_target_pairs) << OpcodeName(in[k]->op);
    EXPECT_EQ(out[k]->shape, in[k]->shape) << OpcodeName(in[k]->op);
    if (in[k]->op == Opcode::kReduceScatter) { EXPECT_EQ(out[k]->reduce, in[k]->reduce); }
  }
}

TEST(Parser, FingerprintCoversEveryCollectiveAttribute) {
  auto m = EveryCollective();
  std::vector<Mutation> mutations = {
      [](Instruction& i) { return Bump(i.dims); },
      [](Instruction& i) {  // the last of several dims (all_to_all's split_count)
        if (i.dims.size() < 3) return false;
        i.dims[2] += 1;
        return true;
      },
      [](Instruction& i) {
        if (i.replica_groups.empty()) return false;
        i.replica_groups[0].back() += 10;
        return true;
      },
      [](Instruction& i) {
        if (i.replica_groups.size() < 2) return false;
        std::swap(i.replica_groups[0], i.replica_groups[1]);
        return true;
      },
      [](Instruction& i) { return BumpPair(i.source_target_pairs); },
      [](Instruction& i) {
        if (i.source_target_pairs.empty()) return false;
        i.source_target_pairs.pop_back();
        return true;
      },
      [](Instruction& i) {
        return (i.op == Opcode::kAllReduce || i.op == Opcode::kReduceScatter) && ToggleReduce(i);
      },
      [](Instruction& i) { return Bump(i.shape.dims); },
  };
  // Each new op's attributes are among those checked.
  EXPECT_GE(CheckFingerprintFollowsText(*m, mutations), 20);
}

TEST(Parser, CollectivesInStableHloSpecText) {
  // The spec's examples' forms: channel_handle is read and ignored.
  auto m = ParseModule(R"(module @spec attributes {mhlo.num_partitions = 2 : i32} {
  func.func @main(%operand: tensor<2x4xi64>) -> tensor<2x2xi64> {
    %rs = "stablehlo.reduce_scatter"(%operand) ({
      ^bb0(%arg0: tensor<i64>, %arg1: tensor<i64>):
        %0 = stablehlo.add %arg0, %arg1 : tensor<i64>
        stablehlo.return %0 : tensor<i64>
    }) {
      scatter_dimension = 1 : i64,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 0, type = 0>
    } : (tensor<2x4xi64>) -> tensor<2x2xi64>
    %a2a = "stablehlo.all_to_all"(%operand) {
      split_dimension = 1 : i64,
      concat_dimension = 0 : i64,
      split_count = 2 : i64,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
    } : (tensor<2x4xi64>) -> tensor<4x2xi64>
    %cp = "stablehlo.collective_permute"(%operand) {
      source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 0, type = 0>
    } : (tensor<2x4xi64>) -> tensor<2x4xi64>
    %cb = "stablehlo.collective_broadcast"(%operand) {
      replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 0, type = 0>
    } : (tensor<2x4xi64>) -> tensor<2x4xi64>
    return %rs : tensor<2x2xi64>
  }
})");
  ASSERT_TRUE(m.ok()) << m.status();
  std::map<Opcode, const Instruction*> by_op;
  for (const auto& i : (*m)->instructions()) by_op[i->op] = i.get();
  const Instruction* rs = by_op.at(Opcode::kReduceScatter);
  EXPECT_EQ(rs->dims, (std::vector<int64_t>{1}));
  EXPECT_EQ(rs->reduce, ReduceKind::kSum);
  EXPECT_EQ(rs->replica_groups, (std::vector<std::vector<int64_t>>{{0, 1}}));
  EXPECT_EQ(by_op.at(Opcode::kAllToAll)->dims, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(by_op.at(Opcode::kCollectivePermute)->source_target_pairs,
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}}));
  EXPECT_EQ(by_op.at(Opcode::kCollectiveBroadcast)->replica_groups,
            (std::vector<std::vector<int64_t>>{{1, 0}}));
}

TEST(Parser, CollectiveErrorsNameTheOp) {
  const std::string head = "module {\n  func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n";
  struct Bad {
    const char* line;
    const char* want;
  } cases[] = {
      {"    %0 = \"stablehlo.reduce_scatter\"(%a) ({\n ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
       "  %r = stablehlo.add %x, %y : tensor<f32>\n  stablehlo.return %r : tensor<f32>\n }) "
       "{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<2xf32>\n",
       "stablehlo.reduce_scatter: missing attribute scatter_dimension"},
      {"    %0 = \"stablehlo.reduce_scatter\"(%a) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, "
       "1]]> : "
       "tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<2xf32>\n",
       "stablehlo.reduce_scatter: needs a region applying stablehlo.add/maximum/minimum/multiply"},
      {"    %0 = \"stablehlo.all_to_all\"(%a) {split_dimension = 0 : i64, concat_dimension = 0 : i64} : "
       "(tensor<4xf32>) -> tensor<4xf32>\n",
       "stablehlo.all_to_all: missing attribute split_count"},
      {"    %0 = \"stablehlo.all_to_all\"(%a) {split_dimension = [], concat_dimension = 0 : i64, split_count "
       "= 2 : i64} : "
       "(tensor<4xf32>) -> tensor<4xf32>\n",
       "stablehlo.all_to_all: split_dimension must be one integer"},
      {"    %0 = \"stablehlo.collective_permute\"(%a) {source_target_pairs = dense<[[0, 1, 2]]> : "
       "tensor<1x3xi64>} : "
       "(tensor<4xf32>) -> tensor<4xf32>\n",
       "stablehlo.collective_permute: source_target_pairs rows must be [source, target], got 3 values"},
      {"    %0 = \"stablehlo.collective_permute\"(%a) {} : (tensor<4xf32>) -> tensor<4xf32>\n",
       "stablehlo.collective_permute: missing attribute source_target_pairs"},
      {"    %p = \"stablehlo.collective_permute\"(%a) {source_target_pairs = dense<[[0, 1], [2, 1]]> : "
       "tensor<2x2xi64>} : "
       "(tensor<4xf32>) -> tensor<4xf32>\n    return %p : tensor<4xf32>\n  }\n}\n",
       "device 1 is the target of two source_target_pairs"},
      {"    %t = \"stablehlo.all_to_all\"(%a) {split_dimension = 0 : i64, concat_dimension = 0 : i64, "
       "split_count = 2 : "
       "i64} : (tensor<4xf32>) -> tensor<2xf32>\n    return %t : tensor<2xf32>\n  }\n}\n",
       "result type tensor<2xf32> differs from the tensor<4xf32> its operands imply"},
  };
  for (const Bad& b : cases) {
    auto m = ParseModule(head + b.line);
    ASSERT_FALSE(m.ok()) << b.line;
    EXPECT_NE(m.status().message().find(b.want), std::string::npos) << m.status() << "\nwanted: " << b.want;
  }
}

}  // namespace
}  // namespace shardscope::compiler
