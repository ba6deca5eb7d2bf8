// Producer-consumer fusion: which ops the plan groups and why the others stay
// apart (programs written as StableHLO text), and that fused kernels compute
// what the unfused ops compute — on hand-written programs and on random
// elementwise/broadcast/reduce programs, with and without intra-op helpers —
// while taking no more memory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/buffer_assignment.h"
#include "compiler/fusion.h"
#include "compiler/parser.h"
#include "compiler/text.h"
#include "gtest/gtest.h"
#include "runtime/client.h"
#include "runtime/kernels.h"

namespace shardscope {
namespace {

using compiler::FusedKernel;
using compiler::FusionPlan;
using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;

std::unique_ptr<Module> Parse(const std::string& text) {
  auto m = compiler::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

const compiler::FusionDecision* Edge(const FusionPlan& p, const std::string& producer, const std::string& consumer) {
  for (const auto& d : p.decisions)
    if (d.producer == producer && d.consumer == consumer) return &d;
  return nullptr;
}

// A dense layer with relu, its pre-activation also kept for the backward pass.
constexpr const char* kLayer = R"(module {
  func.func @main(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> (tensor<64x16xf32>, tensor<64x16xf32>) {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xf32>) -> tensor<64x16xf32>
    %z = stablehlo.add %y, %bb : tensor<64x16xf32>
    %c = stablehlo.constant dense<0.5> : tensor<f32>
    %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<64x16xf32>
    %s = stablehlo.multiply %z, %cb : tensor<64x16xf32>
    %t = stablehlo.tanh %s : tensor<64x16xf32>
    %e = stablehlo.exponential %z : tensor<64x16xf32>
    %r = stablehlo.add %t, %e : tensor<64x16xf32>
    return %r, %z : tensor<64x16xf32>, tensor<64x16xf32>
  }
})";

TEST(FusionPlan, GroupsElementwiseChainsAndSaysWhyNot) {
  auto m = Parse(kLayer);
  ASSERT_TRUE(m);
  FusionPlan plan = compiler::PlanFusion(*m);
  // add(y, bb) is a program output: it runs as a kernel of its own, where the
  // GEMM accumulates into the broadcast bias (y has no other user);
  // multiply, tanh, exp and the final add make one kernel reading z once.
  ASSERT_EQ(plan.kernels.size(), 2u) << compiler::PrintModule(*m);
  const FusedKernel& tail = plan.kernels[0];  // planned from the end
  EXPECT_EQ(tail.root->op, Opcode::kAdd);
  EXPECT_EQ(tail.members.size(), 5u);  // cb, s, t, e, r
  EXPECT_EQ(tail.kind, FusedKernel::Kind::kLoop);
  const FusedKernel& head = plan.kernels[1];
  EXPECT_EQ(head.members.size(), 3u);  // y, bb, z
  EXPECT_EQ(head.kind, FusedKernel::Kind::kGemmBias);
  ASSERT_NE(head.gemm, nullptr);
  EXPECT_EQ(head.gemm->op, Opcode::kDotGeneral);
  EXPECT_TRUE(plan.Absorbed(head.gemm->id));
  for (const auto& d : plan.decisions) {
    if (d.fused) EXPECT_TRUE(d.reason == "fused" || d.reason.find("epilogue") != std::string::npos) << d.reason;
    else EXPECT_FALSE(d.reason.empty());
  }
  const auto* z_into_mul = Edge(plan, absl::StrCat("add.", head.root->id), absl::StrCat("multiply.", tail.members[1]->id));
  ASSERT_NE(z_into_mul, nullptr);
  EXPECT_FALSE(z_into_mul->fused);
  EXPECT_EQ(z_into_mul->reason, "is a program output (it must be written)");
  bool epilogue = false, param = false;
  for (const auto& d : plan.decisions) {
    epilogue |= d.producer_id == head.gemm->id && d.fused && d.reason.find("epilogue") != std::string::npos;
    param |= d.reason == "a parameter: read in place";
  }
  EXPECT_TRUE(epilogue);
  EXPECT_TRUE(param);
  EXPECT_EQ(plan.fused_ops(), 6);
  EXPECT_TRUE(plan.Absorbed(tail.members[0]->id));
  EXPECT_FALSE(plan.Absorbed(tail.root->id));
  EXPECT_EQ(compiler::KernelName(*tail.root, &plan), absl::StrCat("fusion.", tail.root->id));
}

TEST(FusionPlan, SharedValuesAreRecomputedOnlyWhereTheyNeedNotBeWritten) {
  // exp(x) feeds two outputs' ops: each becomes a one-op kernel that
  // recomputes exp(x) from x, and exp(x) is never written.
  auto m = Parse(R"(module {
  func.func @main(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %e = stablehlo.exponential %x : tensor<8x8xf32>
    %a = stablehlo.negate %e : tensor<8x8xf32>
    %b = stablehlo.abs %e : tensor<8x8xf32>
    return %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
  }
})");
  ASSERT_TRUE(m);
  FusionPlan plan = compiler::PlanFusion(*m);
  const Instruction* e = m->instructions()[1].get();
  ASSERT_EQ(e->op, Opcode::kExponential);
  EXPECT_EQ(plan.kernels.size(), 2u);
  EXPECT_EQ(plan.copied_into[e->id].size(), 2u);
  EXPECT_TRUE(plan.Absorbed(e->id));
  for (const auto& d : plan.decisions)
    if (d.producer_id == e->id) {
      EXPECT_TRUE(d.fused);
      EXPECT_NE(d.reason.find("recomputed"), std::string::npos) << d.reason;
    }
  // When a GEMM reads exp(x) too, it is written out for the GEMM, and the
  // elementwise user reads that rather than computing it again.
  auto g = Parse(R"(module {
  func.func @main(%x: tensor<8x8xf32>, %w: tensor<8x4xf32>) -> (tensor<8x8xf32>, tensor<8x4xf32>) {
    %e = stablehlo.exponential %x : tensor<8x8xf32>
    %a = stablehlo.negate %e : tensor<8x8xf32>
    %d = stablehlo.dot_general %e, %w, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %a, %d : tensor<8x8xf32>, tensor<8x4xf32>
  }
})");
  ASSERT_TRUE(g);
  FusionPlan gp = compiler::PlanFusion(*g);
  EXPECT_EQ(gp.fused_ops(), 0);
  bool said = false;
  for (const auto& d : gp.decisions)
    said |= !d.fused && d.reason.find("outside the kernel") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(FusionPlan, EveryCollectiveIsAKernelBoundary) {
  using Make = std::function<Instruction*(Module&, Instruction*)>;
  const std::vector<Make> collectives = {
      [](Module& m, Instruction* v) { return m.AllReduce(v, compiler::ReduceKind::kSum, {{0, 1}}); },
      [](Module& m, Instruction* v) { return m.AllGather(v, 0, {{0, 1}}); },
      [](Module& m, Instruction* v) {
        return m.ReduceScatter(v, 0, compiler::ReduceKind::kSum, {{0, 1}});
      },
      [](Module& m, Instruction* v) { return m.AllToAll(v, 0, 1, 2, {{0, 1}}); },
      [](Module& m, Instruction* v) { return m.CollectivePermute(v, {{0, 1}, {1, 0}}); },
      [](Module& m, Instruction* v) { return m.CollectiveBroadcast(v, {{0, 1}}); },
  };
  for (const Make& make : collectives) {
    // exp -> collective -> tanh -> exp: the elementwise ops on either side
    // would fuse but for the collective between them.
    Module m;
    m.set_num_partitions(2);
    Instruction* x = m.Parameter(Shape(DType::kF32, {8, 8}), "x");
    Instruction* before = m.Unary(Opcode::kExponential, x);
    Instruction* c = make(m, before);
    Instruction* after = m.Unary(Opcode::kExponential, m.Unary(Opcode::kTanh, c));
    m.AddOutput(after);
    ASSERT_TRUE(compiler::Verify(m).ok()) << compiler::Verify(m);
    FusionPlan plan = compiler::PlanFusion(m);
    SCOPED_TRACE(compiler::OpcodeName(c->op));
    EXPECT_EQ(plan.KernelOf(c->id), nullptr);
    EXPECT_FALSE(plan.Absorbed(c->id));
    ASSERT_NE(plan.KernelOf(after->id), nullptr);
    EXPECT_EQ(plan.KernelOf(after->id)->members.size(), 2u);  // tanh and exp, not the collective
    const auto* edge =
        Edge(plan, compiler::KernelName(*c, nullptr), absl::StrCat("tanh.", after->operands[0]->id));
    ASSERT_NE(edge, nullptr);
    EXPECT_FALSE(edge->fused);
    EXPECT_EQ(edge->reason, "a collective is a kernel boundary");
  }
}

TEST(FusionPlan, ReduceEndsAKernelOverLeadingOrTrailingDims) {
  auto m = Parse(R"(module {
  func.func @main(%x: tensor<16x32xf32>) -> (tensor<16xf32>, tensor<32xf32>) {
    %e = stablehlo.exponential %x : tensor<16x32xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %rows = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<16x32xf32>, tensor<f32>) -> tensor<16xf32>
    %sq = stablehlo.multiply %x, %x : tensor<16x32xf32>
    %cols = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<16x32xf32>, tensor<f32>) -> tensor<32xf32>
    return %rows, %cols : tensor<16xf32>, tensor<32xf32>
  }
})");
  ASSERT_TRUE(m);
  FusionPlan plan = compiler::PlanFusion(*m);
  ASSERT_EQ(plan.kernels.size(), 2u);
  for (const auto& k : plan.kernels) {
    EXPECT_EQ(k.kind, FusedKernel::Kind::kReduce);
    EXPECT_EQ(k.members.size(), 2u);
  }
}

// ------------------------------------------------------------- execution

Literal RandomLiteral(const Shape& s, std::mt19937_64& rng) {
  Literal l(s);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  for (int64_t k = 0; k < l.elements(); ++k) l.as<float>()[k] = u(rng);
  return l;
}

std::unique_ptr<runtime::Client> NewClient(bool fusion) {
  runtime::TopologyOptions o;
  o.num_hosts = 1;
  o.chips_per_host = 1;
  auto c = runtime::Client::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  (*c)->set_fusion(fusion);
  return std::move(*c);
}

absl::StatusOr<std::vector<Literal>> RunOn(runtime::Client& c, const Module& m, const std::vector<Literal>& in,
                                         std::shared_ptr<const runtime::Executable>* exe = nullptr) {
  auto compiled = c.Compile(m);
  if (!compiled.ok()) return compiled.status();
  if (exe) *exe = compiled->executable;
  std::vector<runtime::DeviceArray> args;
  for (size_t k = 0; k < in.size(); ++k) {
    auto a = c.TransferToDevices(in[k], Sharding::Replicated(), absl::StrCat("p", k));
    if (!a.ok()) return a.status();
    args.push_back(std::move(*a));
  }
  std::vector<const runtime::DeviceArray*> ptrs;
  for (const auto& a : args) ptrs.push_back(&a);
  auto outs = c.Execute(*compiled->executable, ptrs, {});
  if (!outs.ok()) return outs.status();
  std::vector<Literal> host;
  for (const auto& o : *outs) {
    auto h = c.TransferToHost(o);
    if (!h.ok()) return h.status();
    host.push_back(std::move(*h));
  }
  return host;
}

// |got - want| within a few ulps of the values' scale (fused kernels may take
// a vectorised path for elements the unfused kernel took a scalar path for).
std::string Diff(const Literal& got, const Literal& want) {
  if (got.shape() != want.shape()) return absl::StrCat("shape ", got.shape().ToString(), " vs ", want.shape().ToString());
  for (int64_t k = 0; k < want.elements(); ++k) {
    const double g = got.GetDouble(k), w = want.GetDouble(k);
    if (std::isnan(g) != std::isnan(w) || (!std::isnan(w) && std::abs(g - w) > 1e-5 * std::max(1.0, std::abs(w))))
      return absl::StrCat("element ", k, ": fused ", g, ", unfused ", w);
  }
  return "";
}

TEST(FusionPlan, BroadcastsAreCopiedIntoEachKernelThatReadsThem) {
  // bb feeds two kernels (exp(x)+bb is a program output, so the kernels stay
  // apart) and sb feeds a kernel and a GEMM: each kernel gets its own copy of
  // the broadcast; bb is then never written out, sb still is (for the GEMM).
  auto m = Parse(R"(module {
  func.func @main(%x: tensor<8x16xf32>, %b: tensor<16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>) {
    %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<16xf32>) -> tensor<8x16xf32>
    %e = stablehlo.exponential %x : tensor<8x16xf32>
    %p = stablehlo.add %e, %bb : tensor<8x16xf32>
    %q = stablehlo.multiply %p, %bb : tensor<8x16xf32>
    %c = stablehlo.constant dense<2.0> : tensor<f32>
    %sb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8x16xf32>
    %t = stablehlo.tanh %q : tensor<8x16xf32>
    %u = stablehlo.multiply %t, %sb : tensor<8x16xf32>
    %g = stablehlo.dot_general %sb, %w, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    return %p, %u, %g : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>
  }
})");
  ASSERT_TRUE(m);
  FusionPlan plan = compiler::PlanFusion(*m);
  const Instruction* bb = nullptr;
  const Instruction* sb = nullptr;
  for (const auto& i : m->instructions())
    if (i->op == Opcode::kBroadcastInDim) (i->operands[0]->shape.rank() == 1 ? bb : sb) = i.get();
  ASSERT_TRUE(bb && sb);
  ASSERT_EQ(plan.kernels.size(), 2u) << compiler::PrintModule(*m);
  EXPECT_EQ(plan.copied_into[bb->id].size(), 2u);
  EXPECT_EQ(plan.copied_into[sb->id].size(), 1u);
  EXPECT_TRUE(plan.Absorbed(bb->id));
  EXPECT_FALSE(plan.Absorbed(sb->id));
  EXPECT_EQ(plan.KernelOf(bb->id), nullptr);
  EXPECT_EQ(plan.EvaluatedAt(*bb).size(), 2u);  // the two kernel roots
  EXPECT_EQ(plan.EvaluatedAt(*sb).size(), 2u);  // itself, and the kernel root
  for (const auto& d : plan.decisions)
    if (d.producer_id == bb->id || d.producer_id == sb->id) {
      EXPECT_TRUE(d.fused) << d.consumer;
      EXPECT_NE(d.reason.find("a copy"), std::string::npos) << d.reason;
    }
  // And the copies compute what the unfused program computes.
  std::mt19937_64 rng(3);
  std::vector<Literal> in;
  for (const Instruction* p : m->parameters()) in.push_back(RandomLiteral(p->shape, rng));
  auto fused_client = NewClient(true);
  auto plain_client = NewClient(false);
  auto fused = RunOn(*fused_client, *m, in);
  auto plain = RunOn(*plain_client, *m, in);
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (size_t k = 0; k < plain->size(); ++k) EXPECT_EQ(Diff((*fused)[k], (*plain)[k]), "") << "output " << k;
}

// The module's outputs computed op by op through the kernels, without the
// compiler's passes or fusion.
std::vector<Literal> EvalOpByOp(const Module& m, const std::vector<Literal>& in) {
  std::vector<Literal> values;
  std::vector<const Literal*> ptr;
  for (const auto& i : m.instructions()) {
    if (i->id >= static_cast<int64_t>(values.size())) {
      values.resize(i->id + 1);
      ptr.resize(i->id + 1, nullptr);
    }
  }
  for (const Instruction* p : m.parameters()) ptr[p->id] = &in[p->param_index];
  for (const auto& i : m.instructions()) {
    if (i->op == Opcode::kParameter) continue;
    std::vector<const Literal*> ops;
    for (const Instruction* o : i->operands) ops.push_back(ptr[o->id]);
    values[i->id] = Literal(i->shape);
    absl::Status s = runtime::EvalInstruction(*i, ops, 0, &values[i->id]);
    EXPECT_TRUE(s.ok()) << s;
    ptr[i->id] = &values[i->id];
  }
  std::vector<Literal> out;
  for (const Instruction* o : m.outputs()) out.push_back(*ptr[o->id]);
  return out;
}

TEST(FusedKernels, DotsThatReadTransposesInPlaceComputeTheSame) {
  // The compiled program folds the transposes into the dots (compiler/passes);
  // the original runs op by op through the kernels, transposes included.
  auto m = Parse(R"(module {
  func.func @main(%g: tensor<4x8x16xf32>, %x: tensor<4x8x12xf32>, %p: tensor<6x16x16xf32>, %v: tensor<6x16x8xf32>) -> (tensor<16x12xf32>, tensor<6x16x8xf32>) {
    %gt = stablehlo.transpose %g, dims = [2, 0, 1] : (tensor<4x8x16xf32>) -> tensor<16x4x8xf32>
    %dw = stablehlo.dot_general %gt, %x, contracting_dims = [1, 2] x [0, 1] : (tensor<16x4x8xf32>, tensor<4x8x12xf32>) -> tensor<16x12xf32>
    %pt = stablehlo.transpose %p, dims = [0, 2, 1] : (tensor<6x16x16xf32>) -> tensor<6x16x16xf32>
    %dv = stablehlo.dot_general %pt, %v, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<6x16x16xf32>, tensor<6x16x8xf32>) -> tensor<6x16x8xf32>
    return %dw, %dv : tensor<16x12xf32>, tensor<6x16x8xf32>
  }
})");
  ASSERT_TRUE(m);
  std::mt19937_64 rng(11);
  std::vector<Literal> in;
  for (const Instruction* p : m->parameters()) in.push_back(RandomLiteral(p->shape, rng));
  auto client = NewClient(true);
  std::shared_ptr<const runtime::Executable> exe;
  auto got = RunOn(*client, *m, in, &exe);
  ASSERT_TRUE(got.ok()) << got.status();
  int transposes = 0;
  for (const auto& i : exe->program->instructions()) transposes += i->op == Opcode::kTranspose;
  EXPECT_EQ(transposes, 0) << compiler::PrintModule(*exe->program);
  std::vector<Literal> want = EvalOpByOp(*m, in);
  ASSERT_EQ(want.size(), got->size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(Diff((*got)[k], want[k]), "") << "output " << k;
}

TEST(FusedKernels, ReshapesOfLastUsesTakeTheBufferAndOthersCopy) {
  // %r reshapes the GEMM's result at its last use (the executor moves the
  // buffer); %s reshapes %y, which %e still reads afterwards (a copy).
  auto m = Parse(R"(module {
  func.func @main(%x: tensor<6x8xf32>, %w: tensor<8x10xf32>, %v: tensor<8x10xf32>) -> (tensor<60xf32>, tensor<2x30xf32>, tensor<6x10xf32>) {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<6x8xf32>, tensor<8x10xf32>) -> tensor<6x10xf32>
    %r = stablehlo.reshape %y : (tensor<6x10xf32>) -> tensor<60xf32>
    %z = stablehlo.dot_general %x, %v, contracting_dims = [1] x [0] : (tensor<6x8xf32>, tensor<8x10xf32>) -> tensor<6x10xf32>
    %s = stablehlo.reshape %z : (tensor<6x10xf32>) -> tensor<2x30xf32>
    %e = stablehlo.exponential %z : tensor<6x10xf32>
    return %r, %s, %e : tensor<60xf32>, tensor<2x30xf32>, tensor<6x10xf32>
  }
})");
  ASSERT_TRUE(m);
  std::mt19937_64 rng(5);
  std::vector<Literal> in;
  for (const Instruction* p : m->parameters()) in.push_back(RandomLiteral(p->shape, rng));
  for (bool fusion : {true, false}) {
    auto client = NewClient(fusion);
    auto got = RunOn(*client, *m, in);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<Literal> want = EvalOpByOp(*m, in);
    ASSERT_EQ(want.size(), got->size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(Diff((*got)[k], want[k]), "") << "fusion " << fusion << " output " << k;
  }
}

// Random programs over a [R, C] loop: unary and binary elementwise ops,
// compare/select masks, broadcasts of rows, columns and scalars, reshapes,
// reductions over either dim (whose results come back through broadcasts).
class Generator {
 public:
  Generator(uint64_t seed, Module* m) : rng_(seed), m_(*m) {}
  void Build() {
    rows_ = Pick({1, 3, 64, 300});
    cols_ = Pick({1, 7, 128, 2048});
    const Shape full(DType::kF32, {rows_, cols_});
    pool_.push_back(m_.Parameter(full, "x"));
    pool_.push_back(m_.Parameter(full, "y"));
    row_ = m_.Parameter(Shape(DType::kF32, {cols_}), "row");
    col_ = m_.Parameter(Shape(DType::kF32, {rows_}), "col");
    const int ops = U(4, 14);
    for (int k = 0; k < ops; ++k) Step();
    m_.AddOutput(pool_.back());
    if (U(0, 2) == 0) m_.AddOutput(pool_[U(2, static_cast<int>(pool_.size()) - 1)]);
    if (!reduced_.empty()) m_.AddOutput(reduced_.back());
  }

 private:
  int U(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int64_t Pick(std::initializer_list<int64_t> v) { return *(v.begin() + U(0, static_cast<int>(v.size()) - 1)); }
  Instruction* Any() { return pool_[U(0, static_cast<int>(pool_.size()) - 1)]; }
  Instruction* Bounded(Instruction* v) {  // keeps exp/pow finite
    return m_.Unary(Opcode::kTanh, v);
  }
  void Step() {
    Instruction* a = Any();
    Instruction* b = Any();
    Instruction* r = nullptr;
    switch (U(0, 11)) {
      case 0: r = m_.Binary(Opcode::kAdd, a, b); break;
      case 1: r = m_.Binary(Opcode::kMultiply, a, b); break;
      case 2: r = m_.Binary(Opcode::kSubtract, a, b); break;
      case 3: r = m_.Binary(Opcode::kMaximum, a, b); break;
      case 4: r = m_.Unary(Opcode::kExponential, Bounded(a)); break;
      case 5: r = m_.Unary(Opcode::kLogistic, a); break;
      case 6: r = m_.Select(m_.Compare(a, b, compiler::CompareDirection::kGT), a,
                            m_.Unary(Opcode::kNegate, b));
        break;
      case 7: {  // bias along rows or columns, from [C] / [R] or from [1,C] / [R,1] (keepdims)
        Instruction* bc = nullptr;
        switch (U(0, 3)) {
          case 0: bc = m_.BroadcastInDim(row_, {rows_, cols_}, {1}); break;
          case 1: bc = m_.BroadcastInDim(col_, {rows_, cols_}, {0}); break;
          case 2: bc = m_.BroadcastInDim(m_.Reshape(row_, {1, cols_}), {rows_, cols_}, {0, 1}); break;
          default: bc = m_.BroadcastInDim(m_.Reshape(col_, {rows_, 1}), {rows_, cols_}, {0, 1}); break;
        }
        r = m_.Binary(Opcode::kAdd, a, bc);
        break;
      }
      case 8: {  // scalar scale
        Instruction* s = m_.BroadcastInDim(m_.ScalarConstant(DType::kF32, 0.75), {rows_, cols_}, {});
        r = m_.Binary(Opcode::kMultiply, a, s);
        break;
      }
      case 9: {  // a reshape round trip
        Instruction* flat = m_.Reshape(a, {rows_ * cols_});
        r = m_.Reshape(m_.Unary(Opcode::kAbs, flat), {rows_, cols_});
        break;
      }
      case 10: case 11: {  // reduce over one dim, broadcast back (softmax-like)
        const int64_t dim = U(0, 1);
        const compiler::ReduceKind kind = U(0, 1) ? compiler::ReduceKind::kSum : compiler::ReduceKind::kMax;
        Instruction* init = m_.ScalarConstant(DType::kF32, kind == compiler::ReduceKind::kSum ? 0.0 : -1e30);
        Instruction* red = m_.Reduce(m_.Unary(Opcode::kExponential, Bounded(a)), init, {dim}, kind);
        reduced_.push_back(red);
        Instruction* back = m_.BroadcastInDim(red, {rows_, cols_}, {1 - dim});
        r = m_.Binary(Opcode::kDivide, a, back);
        break;
      }
    }
    pool_.push_back(r);
  }

  std::mt19937_64 rng_;
  Module& m_;
  int64_t rows_ = 1, cols_ = 1;
  Instruction* row_ = nullptr;
  Instruction* col_ = nullptr;
  std::vector<Instruction*> pool_, reduced_;
};

TEST(FusedKernels, ComputeWhatTheUnfusedOpsCompute) {
  auto fused = NewClient(true);
  auto plain = NewClient(false);
  int programs = 0, kernels = 0, reduce_kernels = 0, absorbed = 0, less_memory = 0;
  for (int seed = 0; seed < 120; ++seed) {
    Module m;
    Generator(seed, &m).Build();
    ASSERT_TRUE(compiler::Verify(m).ok()) << compiler::PrintModule(m);
    std::mt19937_64 rng(seed);
    std::vector<Literal> in;
    for (const Instruction* p : m.parameters()) in.push_back(RandomLiteral(p->shape, rng));
    std::shared_ptr<const runtime::Executable> fe, pe;
    auto got = RunOn(*fused, m, in, &fe);
    auto want = RunOn(*plain, m, in, &pe);
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << compiler::PrintModule(m);
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t k = 0; k < got->size(); ++k) {
      std::string d = Diff((*got)[k], (*want)[k]);
      EXPECT_TRUE(d.empty()) << "seed " << seed << " output " << k << ": " << d << "\n" << compiler::PrintModule(m);
    }
    ++programs;
    kernels += static_cast<int>(fe->fusion.kernels.size());
    for (const auto& k : fe->fusion.kernels) reduce_kernels += k.kind == FusedKernel::Kind::kReduce;
    absorbed += static_cast<int>(fe->fusion.fused_ops());
    EXPECT_TRUE(pe->fusion.kernels.empty());
    EXPECT_LE(fe->memory.peak_bytes, pe->memory.peak_bytes);
    less_memory += fe->memory.peak_bytes < pe->memory.peak_bytes;
  }
  std::printf("fused vs unfused: %d random programs, %d fused kernels (%d ending in a reduce), %d ops absorbed, "
              "%d programs with a lower memory peak\n",
              programs, kernels, reduce_kernels, absorbed, less_memory);
  EXPECT_GT(kernels, 100);
  EXPECT_GT(reduce_kernels, 20);
  EXPECT_GT(less_memory, 10);
}

TEST(FusedKernels, GemmsAccumulatingIntoTheirBiasComputeWhatTheUnfusedOpsCompute) {
  struct Case {
    const char* text;
    int gemm_bias_kernels;
  };
  const Case cases[] = {
      {kLayer, 1},
      // Batched, with the weight read transposed, and a bias along the last dim.
      {R"(module {
  func.func @main(%x: tensor<4x40x24xf32>, %w: tensor<4x56x24xf32>, %b: tensor<56xf32>) -> tensor<4x40x56xf32> {
    %y = stablehlo.dot_general %x, %w, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<4x40x24xf32>, tensor<4x56x24xf32>) -> tensor<4x40x56xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [2] : (tensor<56xf32>) -> tensor<4x40x56xf32>
    %z = stablehlo.add %bb, %y : tensor<4x40x56xf32>
    return %z : tensor<4x40x56xf32>
  }
})", 1},
      // A scalar bias, and a GEMM big enough to be split over the chip's helpers.
      {R"(module {
  func.func @main(%x: tensor<300x64xf32>, %w: tensor<64x200xf32>, %s: tensor<f32>) -> tensor<300x200xf32> {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<300x64xf32>, tensor<64x200xf32>) -> tensor<300x200xf32>
    %sb = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<300x200xf32>
    %z = stablehlo.add %y, %sb : tensor<300x200xf32>
    return %z : tensor<300x200xf32>
  }
})", 1},
      // The GEMM's result is read twice: it must be written, so no epilogue.
      {R"(module {
  func.func @main(%x: tensor<16x8xf32>, %w: tensor<8x12xf32>, %b: tensor<12xf32>) -> (tensor<16x12xf32>, tensor<16x12xf32>) {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x8xf32>, tensor<8x12xf32>) -> tensor<16x12xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<12xf32>) -> tensor<16x12xf32>
    %z = stablehlo.add %y, %bb : tensor<16x12xf32>
    %e = stablehlo.exponential %y : tensor<16x12xf32>
    return %z, %e : tensor<16x12xf32>, tensor<16x12xf32>
  }
})", 0},
      // A bias along the first dim is not a row of the GEMM's output: no epilogue.
      {R"(module {
  func.func @main(%x: tensor<16x8xf32>, %w: tensor<8x12xf32>, %b: tensor<16xf32>) -> tensor<16x12xf32> {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x8xf32>, tensor<8x12xf32>) -> tensor<16x12xf32>
    %bb = stablehlo.broadcast_in_dim %b, dims = [0] : (tensor<16xf32>) -> tensor<16x12xf32>
    %z = stablehlo.add %y, %bb : tensor<16x12xf32>
    return %z : tensor<16x12xf32>
  }
})", 0},
  };
  auto fused = NewClient(true);
  auto plain = NewClient(false);
  for (size_t c = 0; c < std::size(cases); ++c) {
    auto m = Parse(cases[c].text);
    ASSERT_TRUE(m);
    std::mt19937_64 rng(c + 20);
    std::vector<Literal> in;
    for (const Instruction* p : m->parameters()) in.push_back(RandomLiteral(p->shape, rng));
    std::shared_ptr<const runtime::Executable> fe;
    auto got = RunOn(*fused, *m, in, &fe);
    auto want = RunOn(*plain, *m, in);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    int gemm_bias = 0;
    for (const auto& k : fe->fusion.kernels) gemm_bias += k.kind == FusedKernel::Kind::kGemmBias;
    EXPECT_EQ(gemm_bias, cases[c].gemm_bias_kernels) << "case " << c;
    for (size_t k = 0; k < got->size(); ++k) EXPECT_EQ(Diff((*got)[k], (*want)[k]), "") << "case " << c << " output " << k;
  }
}

TEST(FusedKernels, TimelineShowsOneKernelPerFusion) {
  auto m = Parse(kLayer);
  ASSERT_TRUE(m);
  auto c = NewClient(true);
  std::mt19937_64 rng(7);
  std::vector<Literal> in;
  for (const Instruction* p : m->parameters()) in.push_back(RandomLiteral(p->shape, rng));
  std::shared_ptr<const runtime::Executable> exe;
  ASSERT_TRUE(RunOn(*c, *m, in, &exe).ok());
  // Costs: a kernel's bytes are what crosses its boundary — z read once, r written.
  const FusedKernel& tail = exe->fusion.kernels[0];
  const compiler::OpCost& cost = exe->op_costs[tail.root->id];
  EXPECT_EQ(cost.bytes_written, 64 * 16 * 4);
  EXPECT_EQ(cost.bytes_read, 64 * 16 * 4 + 4);  // z, and the scalar 0.5
  for (const Instruction* member : tail.members) {
    if (member != tail.root) {
      EXPECT_EQ(exe->op_costs[member->id].modeled_ns, 0);
    }
  }
}

}  // namespace
}  // namespace shardscope
