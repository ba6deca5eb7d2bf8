// stablehlo.while from the IR to the chips: the builder and verifier, the
// StableHLO text both ways, identity (fingerprint, diff), passes, the cost
// model's trip count, SPMD partitioning (carried layouts, collectives inside
// the body, a split accumulator) and the runtime's loop, checked against
// values computed here by hand. The random sharded-equals-unsharded test
// (spmd_test.cc) draws loops too.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "compiler/cost_model.h"
#include "compiler/fingerprint.h"
#include "compiler/graph_diff.h"
#include "compiler/ir.h"
#include "compiler/parser.h"
#include "compiler/passes.h"
#include "compiler/spmd.h"
#include "compiler/text.h"
#include "gtest/gtest.h"
#include "runtime/client.h"
#include "runtime/executor.h"
#include "runtime/modeled_clock.h"
#include "tests/compiler/run_on_chips.h"

namespace shardscope {
namespace {

using compiler::CompareDirection;
using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;
using compiler::ReduceKind;

// for (i = 0; i < trips; ++i) x = tanh(x . w) + x, with w carried unchanged.
// Returns the module with outputs (x, i).
std::unique_ptr<Module> MatmulLoop(int trips, int64_t rows = 4, int64_t cols = 6) {
  auto m = std::make_unique<Module>("loop");
  const Shape xs(DType::kF32, {rows, cols}), ws(DType::kF32, {cols, cols}), is(DType::kI32, {});
  Instruction* x = m->Parameter(xs, "x", {"tests/compiler/while_test.cc", 40, ""});
  Instruction* w = m->Parameter(ws, "w");
  auto cond = std::make_shared<Module>("cond");
  auto body = std::make_shared<Module>("body");
  for (Module* r : {cond.get(), body.get()}) {
    r->Parameter(is, "i");
    r->Parameter(xs, "x");
    r->Parameter(ws, "w");
  }
  cond->AddOutput(cond->Compare(cond->parameters()[0], cond->ScalarConstant(DType::kI32, trips),
                                CompareDirection::kLT));
  Instruction* bi = body->parameters()[0];
  Instruction* bx = body->parameters()[1];
  Instruction* bw = body->parameters()[2];
  compiler::DotDims dd;
  dd.lhs_contracting = {1};
  dd.rhs_contracting = {0};
  body->AddOutput(body->Binary(Opcode::kAdd, bi, body->ScalarConstant(DType::kI32, 1)));
  body->AddOutput(body->Binary(Opcode::kAdd, body->Unary(Opcode::kTanh, body->DotGeneral(bx, bw, dd)), bx));
  body->AddOutput(bw);
  auto out = m->While({m->ScalarConstant(DType::kI32, 0), x, w}, cond, body,
                      {"tests/compiler/while_test.cc", 55, "MatmulLoop"});
  m->AddOutput(out[1]);
  m->AddOutput(out[0]);
  return m;
}

Literal Values(const Shape& s, double scale) {
  Literal l(s);
  for (int64_t k = 0; k < l.elements(); ++k) l.as<float>()[k] = static_cast<float>(std::sin(0.7 * k + 0.3) * scale);
  return l;
}

// The loop above, by hand in double.
std::vector<double> Expected(const Literal& x0, const Literal& w, int trips) {
  const int64_t rows = x0.shape().dims[0], cols = x0.shape().dims[1];
  std::vector<double> x(x0.elements());
  for (int64_t k = 0; k < x0.elements(); ++k) x[k] = x0.as<float>()[k];
  for (int t = 0; t < trips; ++t) {
    std::vector<double> next(x.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        double dot = 0;
        for (int64_t k = 0; k < cols; ++k) dot += x[r * cols + k] * w.as<float>()[k * cols + c];
        next[r * cols + c] = std::tanh(dot) + x[r * cols + c];
      }
    x = next;
  }
  return x;
}

struct Ran {
  std::vector<Literal> outputs;
  std::shared_ptr<const runtime::Executable> exe;
};

absl::StatusOr<Ran> RunOn(int n, const Module& m, const std::vector<Sharding>& shardings,
                          const std::vector<Literal>& inputs) {
  Ran r;
  auto outs = RunProgram(ClientFor(n), m, shardings, inputs, &r.exe);
  if (!outs.ok()) return outs.status();
  r.outputs = *std::move(outs);
  return r;
}

// A bare topology of `chips` for running programs with ExecuteProgram directly.
std::unique_ptr<runtime::Topology> Chips(int chips) {
  runtime::TopologyOptions o;
  o.num_hosts = 1;
  o.chips_per_host = chips;
  auto topo = runtime::Topology::Create(o);
  EXPECT_TRUE(topo.ok()) << topo.status();
  return topo.ok() ? *std::move(topo) : nullptr;
}

void ExpectNear(const Literal& got, const std::vector<double>& want) {
  ASSERT_EQ(got.elements(), static_cast<int64_t>(want.size()));
  for (int64_t k = 0; k < got.elements(); ++k) EXPECT_NEAR(got.GetDouble(k), want[k], 1e-4) << "element " << k;
}

int Count(const Module& m, Opcode op) {
  int c = 0;
  for (const auto& i : m.instructions()) c += i->op == op;
  return c;
}

// ---------------------------------------------------------------- IR and text

TEST(WhileTest, BuilderGivesOneResultPerCarriedValue) {
  auto m = MatmulLoop(3);
  ASSERT_TRUE(compiler::Verify(*m).ok()) << compiler::Verify(*m);
  const Instruction* w = m->outputs()[0]->operands[0];
  EXPECT_EQ(w->op, Opcode::kWhile);
  EXPECT_EQ(w->shape, compiler::WhilePlaceholderShape());
  EXPECT_EQ(m->outputs()[0]->shape, Shape(DType::kF32, {4, 6}));
  EXPECT_EQ(m->outputs()[1]->shape, Shape(DType::kI32, {}));
  EXPECT_EQ(compiler::StaticTripCount(*w), 3);
  EXPECT_EQ(compiler::StaticTripCount(*MatmulLoop(0)->outputs()[0]->operands[0]), 0);
}

TEST(WhileTest, VerifierNamesTheMismatch) {
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(DType::kF32, {4}), "x");
  auto cond = std::make_shared<Module>();
  cond->AddOutput(cond->Compare(cond->Parameter(Shape(DType::kF32, {4}), "x"),
                                cond->Parameter(Shape(DType::kF32, {4}), "x"), CompareDirection::kLT));
  auto body = std::make_shared<Module>();
  body->AddOutput(body->Parameter(Shape(DType::kF32, {4}), "x"));
  m->While({x}, cond, body, {"model.cc", 12, ""});
  absl::Status s = compiler::Verify(*m);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "model.cc:12")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "cond takes 2 values, the loop carries 1")) << s;
}

TEST(WhileTest, TextRoundTripsWithRegions) {
  auto m = MatmulLoop(3);
  const std::string text = compiler::PrintModule(*m);
  EXPECT_TRUE(absl::StrContains(text, "%3:3 = stablehlo.while(%w3_arg0 = %2, %w3_arg1 = %arg0, %w3_arg2 = %arg1)"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "cond {")) << text;
  EXPECT_TRUE(absl::StrContains(text, "} do {")) << text;
  EXPECT_TRUE(absl::StrContains(text, "return %3#1, %3#0")) << text;
  auto parsed = compiler::ParseModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(compiler::PrintModule(**parsed), text);
  EXPECT_EQ(compiler::Fingerprint(**parsed), compiler::Fingerprint(*m));
}

TEST(WhileTest, ParsesAOneValueLoopWrittenByHand) {
  const char* text = R"(module @m {
  func.func @main(%arg0: tensor<i64>) -> tensor<i64> {
    %c = stablehlo.constant dense<1> : tensor<i64>
    %0 = stablehlo.while(%it = %arg0) : tensor<i64>
     cond {
      %lim = stablehlo.constant dense<10> : tensor<i64>
      %p = stablehlo.compare  LT, %it, %lim : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i64>
      %n = stablehlo.add %it, %one : tensor<i64>
      stablehlo.return %n : tensor<i64>
    }
    %r = stablehlo.add %0, %c : tensor<i64>
    return %r : tensor<i64>
  }
})";
  auto m = compiler::ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status();
  auto ran = RunOn(1, **m, {Sharding()}, {Literal::Scalar(DType::kI64, 3)});
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->outputs[0].GetDouble(0), 11);  // counts 3 -> 10, plus 1
}

TEST(WhileTest, ParseErrorsNameTheProblem) {
  // A region reading a value of the function (our regions are closed).
  const char* captured = R"(module @m {
  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {
    %c = stablehlo.constant dense<1.0> : tensor<f32>
    %0 = stablehlo.while(%it = %arg0) : tensor<f32>
     cond {
      %p = stablehlo.compare  LT, %it, %c : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      stablehlo.return %it : tensor<f32>
    }
    return %0 : tensor<f32>
  }
})";
  auto m = compiler::ParseModule(captured);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "line 6")) << m.status();
  EXPECT_TRUE(absl::StrContains(m.status().message(), "%c is defined outside this while region")) << m.status();

  std::string text = compiler::PrintModule(*MatmulLoop(2));
  std::string wrong_count = text;
  wrong_count.replace(wrong_count.find("%3:3"), 4, "%3:2");
  auto w = compiler::ParseModule(wrong_count);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(absl::StrContains(w.status().message(), "stablehlo.while gives 3 results, the name says 2"))
      << w.status();

  std::string bare_use = text;
  bare_use.replace(bare_use.find("return %3#1"), 11, "return %3");
  auto b = compiler::ParseModule(bare_use);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::StrContains(b.status().message(), "read one as %3#k")) << b.status();
}

TEST(WhileTest, TripCountIsPartOfTheGraphIdentity) {
  auto a = MatmulLoop(2), b = MatmulLoop(3);
  EXPECT_NE(compiler::Fingerprint(*a), compiler::Fingerprint(*b));
  EXPECT_EQ(compiler::Fingerprint(*a), compiler::Fingerprint(*MatmulLoop(2)));
  compiler::GraphDiff d = compiler::DiffGraphs(*a, *b);
  ASSERT_FALSE(d.changes.empty());
  EXPECT_EQ(b->instructions()[d.changes.front().new_index]->op, Opcode::kWhile);
}

TEST(WhileTest, SimplifyWorksInsideTheRegions) {
  auto m = MatmulLoop(2);
  // A body with x * 1 and a dead value: both go; the loop stays.
  const Instruction* w = m->outputs()[0]->operands[0];
  auto body = std::make_shared<Module>("body");
  for (const Instruction* p : w->body->parameters()) body->Parameter(p->shape, p->name);
  Instruction* one = body->BroadcastInDim(body->ScalarConstant(DType::kF32, 1), {4, 6}, {});
  body->Unary(Opcode::kExponential, body->parameters()[1]);  // unused
  body->AddOutput(body->Binary(Opcode::kAdd, body->parameters()[0], body->ScalarConstant(DType::kI32, 1)));
  body->AddOutput(body->Binary(Opcode::kMultiply, body->parameters()[1], one));
  body->AddOutput(body->parameters()[2]);
  const_cast<Instruction*>(w)->body = body;
  ASSERT_TRUE(compiler::Verify(*m).ok());
  compiler::PassStats st;
  auto s = compiler::Simplify(*m, &st);
  ASSERT_TRUE(compiler::Verify(*s).ok()) << compiler::Verify(*s);
  const Instruction* sw = s->outputs()[0]->operands[0];
  ASSERT_EQ(sw->op, Opcode::kWhile);
  EXPECT_EQ(Count(*sw->body, Opcode::kMultiply), 0) << compiler::PrintModule(*s);
  EXPECT_EQ(Count(*sw->body, Opcode::kExponential), 0) << compiler::PrintModule(*s);
  EXPECT_GE(st.algebraic_simplified, 1);
  EXPECT_GE(st.dce_removed, 1);
}

TEST(WhileTest, CostIsTheBodyTimesItsTripCount) {
  auto profile = compiler::FindProfile("cpu");
  ASSERT_TRUE(profile.ok());
  compiler::CostModel cm(*profile);
  auto m2 = MatmulLoop(2), m4 = MatmulLoop(4);
  const Instruction* w2 = m2->outputs()[0]->operands[0];
  const Instruction* w4 = m4->outputs()[0]->operands[0];
  compiler::OpCost c2 = cm.InstructionCost(*w2), c4 = cm.InstructionCost(*w4);
  // Per trip: a 4x6x6 dot (288 FLOPs), tanh and add (24 each), the counter's
  // add; the condition's compare runs once more than the body.
  EXPECT_DOUBLE_EQ(c2.flops, 2 * (288 + 24 + 24 + 1) + 3 * 1);
  EXPECT_DOUBLE_EQ(c4.flops, 4 * (288 + 24 + 24 + 1) + 5 * 1);
  EXPECT_GT(c4.modeled_ns, c2.modeled_ns);
}

// ---------------------------------------------------------------- SPMD and runtime

TEST(WhileTest, RunsAndMatchesTheLoopByHand) {
  auto m = MatmulLoop(3);
  Literal x = Values(Shape(DType::kF32, {4, 6}), 0.5), w = Values(Shape(DType::kF32, {6, 6}), 0.3);
  auto ran = RunOn(1, *m, {Sharding(), Sharding()}, {x, w});
  ASSERT_TRUE(ran.ok()) << ran.status();
  ExpectNear(ran->outputs[0], Expected(x, w, 3));
  EXPECT_EQ(ran->outputs[1].GetDouble(0), 3);
}

TEST(WhileTest, BatchSplitLoopKeepsItsSplitAndNeedsNoCollective) {
  auto m = MatmulLoop(3, 8, 6);
  auto split = Sharding::Tiled({4, 1}, {0, 1, 2, 3}, false);
  ASSERT_TRUE(split.ok());
  m->parameters()[0]->sharding = *split;
  Literal x = Values(Shape(DType::kF32, {8, 6}), 0.5), w = Values(Shape(DType::kF32, {6, 6}), 0.3);
  auto ran = RunOn(4, *m, {*split, Sharding()}, {x, w});
  ASSERT_TRUE(ran.ok()) << ran.status();
  ExpectNear(ran->outputs[0], Expected(x, w, 3));
  const Module& local = *ran->exe->program;
  const Instruction* lw = nullptr;
  for (const auto& i : local.instructions())
    if (i->op == Opcode::kWhile) lw = i.get();
  ASSERT_NE(lw, nullptr);
  EXPECT_EQ(lw->operands[1]->shape, Shape(DType::kF32, {2, 6}));  // each chip loops over its rows
  for (const Module* r : {lw->cond.get(), lw->body.get()})
    for (const auto& i : r->instructions()) EXPECT_FALSE(compiler::IsCollective(i->op)) << compiler::PrintModule(local);
}

TEST(WhileTest, ContractingSplitAllReducesInsideTheBody) {
  // w split on its rows (the contracting dim) and x on its columns: each
  // iteration's dot adds partial sums across the chips.
  auto m = MatmulLoop(2, 4, 8);
  auto cols = Sharding::Tiled({1, 2}, {0, 1}, false);
  auto rows = Sharding::Tiled({2, 1}, {0, 1}, false);
  ASSERT_TRUE(cols.ok() && rows.ok());
  m->parameters()[0]->sharding = *cols;
  m->parameters()[1]->sharding = *rows;
  Literal x = Values(Shape(DType::kF32, {4, 8}), 0.5), w = Values(Shape(DType::kF32, {8, 8}), 0.3);
  auto ran = RunOn(2, *m, {*cols, *rows}, {x, w});
  ASSERT_TRUE(ran.ok()) << ran.status();
  ExpectNear(ran->outputs[0], Expected(x, w, 2));
  int in_body = 0;
  for (const auto& i : ran->exe->program->instructions())
    if (i->op == Opcode::kWhile) in_body += Count(*i->body, Opcode::kAllReduce) + Count(*i->body, Opcode::kReduceScatter);
  EXPECT_GE(in_body, 1) << compiler::PrintModule(*ran->exe->program);
}

TEST(WhileTest, AccumulatorFromZerosStartsSplitWhenItsUserIsSplit) {
  // acc = 0; for 3 trips: acc += x; return acc * x, with x split on rows.
  Module m;
  const Shape s(DType::kF32, {8, 4}), is(DType::kI32, {});
  Instruction* x = m.Parameter(s, "x");
  auto cond = std::make_shared<Module>(), body = std::make_shared<Module>();
  for (Module* r : {cond.get(), body.get()}) {
    r->Parameter(is, "i");
    r->Parameter(s, "acc");
    r->Parameter(s, "x");
  }
  cond->AddOutput(cond->Compare(cond->parameters()[0], cond->ScalarConstant(DType::kI32, 3), CompareDirection::kLT));
  body->AddOutput(body->Binary(Opcode::kAdd, body->parameters()[0], body->ScalarConstant(DType::kI32, 1)));
  body->AddOutput(body->Binary(Opcode::kAdd, body->parameters()[1], body->parameters()[2]));
  body->AddOutput(body->parameters()[2]);
  Instruction* zeros = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 0), s.dims, {});
  auto out = m.While({m.ScalarConstant(DType::kI32, 0), zeros, x}, cond, body);
  m.AddOutput(m.Binary(Opcode::kMultiply, out[1], x));
  auto split = Sharding::Tiled({2, 1}, {0, 1}, false);
  ASSERT_TRUE(split.ok());
  m.parameters()[0]->sharding = *split;
  auto part = compiler::SpmdPartition(m, 2);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(Count(*part->local, Opcode::kAllGather), 0) << compiler::PrintModule(*part->local);
  EXPECT_EQ(Count(*part->local, Opcode::kDynamicSlice), 0) << compiler::PrintModule(*part->local);
  EXPECT_TRUE(part->rematerializations.empty());
  Literal xv = Values(s, 1.0);
  auto ran = RunOn(2, m, {*split}, {xv});
  ASSERT_TRUE(ran.ok()) << ran.status();
  std::vector<double> want;
  for (int64_t k = 0; k < xv.elements(); ++k) want.push_back(3.0 * xv.as<float>()[k] * xv.as<float>()[k]);
  ExpectNear(ran->outputs[0], want);
}

TEST(WhileTest, DevicesThatDisagreeOnTheConditionAreAnError) {
  // A local program whose condition reads the partition id: chip 0 would
  // loop once, chip 1 not at all, which a lockstep program cannot do.
  Module m;
  m.set_num_partitions(2);
  const Shape is(DType::kI32, {});
  auto cond = std::make_shared<Module>(), body = std::make_shared<Module>();
  Instruction* ci = cond->Parameter(is, "i");
  Instruction* pid = cond->Convert(cond->PartitionId(), DType::kI32);
  cond->AddOutput(cond->Compare(cond->Binary(Opcode::kAdd, ci, pid), cond->ScalarConstant(DType::kI32, 1),
                                CompareDirection::kLT));
  body->AddOutput(body->Binary(Opcode::kAdd, body->Parameter(is, "i"), body->ScalarConstant(DType::kI32, 1)));
  auto out = m.While({m.ScalarConstant(DType::kI32, 0)}, cond, body, {"loop.cc", 9, ""});
  m.AddOutput(out[0]);
  ASSERT_TRUE(compiler::Verify(m).ok()) << compiler::Verify(m);
  auto topo = Chips(2);
  ASSERT_NE(topo, nullptr);
  runtime::ThreadPool pool(2);
  runtime::ScheduleInput timing;
  auto r = runtime::ExecuteProgram(m, *topo, pool, {{}, {}}, &timing);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "loop.cc:9")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "devices disagree on its condition at iteration 0"))
      << r.status();
  for (int d = 0; d < 2; ++d) EXPECT_EQ(topo->device(d).in_use(), 0) << "device " << d;
}

TEST(WhileTest, ModeledClockPricesEachIterationsOps) {
  // The loop's kernels run 3 times (the condition 4); on the modeled clock
  // each slice is its region op's cost, so a chip's total is the loop's cost.
  auto m = MatmulLoop(3);
  auto topo = Chips(1);
  ASSERT_NE(topo, nullptr);
  runtime::ThreadPool pool(1);
  runtime::ScheduleInput timing;
  Literal x = Values(Shape(DType::kF32, {4, 6}), 0.5), w = Values(Shape(DType::kF32, {6, 6}), 0.3);
  auto r = runtime::ExecuteProgram(*m, *topo, pool, {{&x, &w}}, &timing);
  ASSERT_TRUE(r.ok()) << r.status();
  int body_dots = 0;
  for (const auto& op : timing.per_device[0]) {
    EXPECT_EQ(op.op_id, m->outputs()[0]->operands[0]->id) << op.name;
    body_dots += absl::StartsWith(op.name, "while.3/body/dot_general");
  }
  EXPECT_EQ(body_dots, 3);
  auto profile = compiler::FindProfile("cpu");
  ASSERT_TRUE(profile.ok());
  compiler::CostModel cm(*profile);
  runtime::ScheduleInput modeled = runtime::ModeledInput(timing, cm.ProgramCosts(*m), cm);
  int64_t total = 0;
  for (const auto& op : modeled.per_device[0]) total += op.dur_ns;
  EXPECT_EQ(total, cm.InstructionCost(*m->outputs()[0]->operands[0]).modeled_ns);
}

}  // namespace
}  // namespace shardscope
