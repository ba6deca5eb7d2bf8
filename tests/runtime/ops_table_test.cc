// The ops table: every op x every element type, fast kernel vs reference
// interpreter on random inputs (fixed seeds), compared with a normalised error
// bound per element type (ggml's test-backend-ops, in spirit). Each case is
// one small module; it is also printed, parsed back and printed again, which
// must give the same text. The test prints the coverage table (pass /
// unsupported by the fast kernels / - where the op does not take the type).
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "compiler/parser.h"
#include "compiler/text.h"
#include "gtest/gtest.h"
#include "runtime/kernels.h"
#include "runtime/reference.h"

namespace shardscope::runtime {
namespace {

using compiler::CompareDirection;
using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;
using compiler::ReduceKind;

constexpr DType kTypes[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kI1};

bool Int(DType t) { return t == DType::kI32 || t == DType::kI64; }

// A case builds the op under test on parameters of element type `t`, or
// returns nullptr when the op does not take that type. Parameter names choose
// the random values: "pos" (0.1..4), "idx:LO:HI" (integers in [LO, HI)),
// anything else the type's default range.
struct Case {
  std::string name;
  std::function<Instruction*(Module&, DType)> build;
};

Instruction* P(Module& m, DType t, std::vector<int64_t> dims, std::string name = "x") {
  return m.Parameter(Shape(t, std::move(dims)), std::move(name));
}
Instruction* Idx(Module& m, std::vector<int64_t> dims, int lo, int hi) {
  return m.Parameter(Shape(DType::kI32, std::move(dims)), "idx:" + std::to_string(lo) + ":" + std::to_string(hi));
}

Literal Random(const Shape& s, const std::string& name, std::mt19937& rng) {
  Literal l(s);
  double lo = -3, hi = 3;
  if (name == "pos") lo = 0.1, hi = 4;
  bool integer = Int(s.dtype);
  if (name.rfind("idx:", 0) == 0) {
    size_t c = name.find(':', 4);
    lo = std::stoi(name.substr(4, c - 4));
    hi = std::stoi(name.substr(c + 1));
    integer = true;
  } else if (Int(s.dtype)) {
    lo = -9, hi = 10;
  }
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t k = 0; k < l.elements(); ++k) {
    double v = u(rng);
    if (s.dtype == DType::kI1) v = v > 0;
    else if (integer) v = std::floor(v);
    l.SetDouble(k, v);
  }
  return l;
}

std::vector<Case> Cases() {
  std::vector<Case> c;
  auto numeric = [](DType t) { return t != DType::kI1; };
  c.push_back({"constant", [](Module& m, DType t) {
                 std::mt19937 rng(7);
                 return m.Constant(Random(Shape(t, {2, 3}), "", rng));
               }});
  c.push_back({"iota", [&](Module& m, DType t) { return numeric(t) ? m.Iota(Shape(t, {3, 4}), 1) : nullptr; }});
  c.push_back({"partition_id", [](Module& m, DType t) { return t == DType::kI32 ? m.PartitionId() : nullptr; }});
  for (auto [op, name] : {std::pair{Opcode::kAdd, "add"}, {Opcode::kSubtract, "subtract"},
                          {Opcode::kMultiply, "multiply"}, {Opcode::kDivide, "divide"}, {Opcode::kMaximum, "maximum"},
                          {Opcode::kMinimum, "minimum"}, {Opcode::kPower, "power"}}) {
    c.push_back({name, [op](Module& m, DType t) -> Instruction* {
                   bool logical = op == Opcode::kAdd || op == Opcode::kMultiply || op == Opcode::kMaximum ||
                                  op == Opcode::kMinimum;
                   if (t == DType::kI1 && !logical) return nullptr;
                   std::string base = op == Opcode::kPower && !Int(t) ? "pos" : "x";
                   return m.Binary(op, P(m, t, {3, 5}, base), P(m, t, {3, 5}, "y"));
                 }});
  }
  for (auto [op, name, pos] : {std::tuple{Opcode::kNegate, "negate", false}, {Opcode::kAbs, "abs", false},
                               {Opcode::kExponential, "exponential", false}, {Opcode::kLog, "log", true},
                               {Opcode::kLogistic, "logistic", false}, {Opcode::kTanh, "tanh", false},
                               {Opcode::kSqrt, "sqrt", true}, {Opcode::kRsqrt, "rsqrt", true}}) {
    c.push_back({name, [op, pos](Module& m, DType t) -> Instruction* {
                   if (t == DType::kI1 || (!IsFloat(t) && op != Opcode::kNegate && op != Opcode::kAbs)) return nullptr;
                   return m.Unary(op, P(m, t, {4, 6}, pos ? "pos" : "x"));
                 }});
  }
  for (auto [d, name] : {std::pair{CompareDirection::kLT, "compare LT"}, {CompareDirection::kEQ, "compare EQ"},
                         {CompareDirection::kGE, "compare GE"}}) {
    c.push_back({name, [d](Module& m, DType t) { return m.Compare(P(m, t, {3, 5}), P(m, t, {3, 5}, "y"), d); }});
  }
  c.push_back({"select", [](Module& m, DType t) {
                 return m.Select(P(m, DType::kI1, {3, 5}, "p"), P(m, t, {3, 5}), P(m, t, {3, 5}, "y"));
               }});
  c.push_back({"convert to f32", [](Module& m, DType t) { return m.Convert(P(m, t, {3, 5}), DType::kF32); }});
  c.push_back({"convert from f32", [](Module& m, DType t) { return m.Convert(P(m, DType::kF32, {3, 5}), t); }});
  c.push_back({"convert to i32", [](Module& m, DType t) { return m.Convert(P(m, t, {3, 5}), DType::kI32); }});
  c.push_back({"clamp", [](Module& m, DType t) -> Instruction* {
                 if (t == DType::kI1) return nullptr;
                 return m.Clamp(P(m, t, {}, "lo"), P(m, t, {3, 5}), P(m, t, {}, "hi"));
               }});
  c.push_back({"broadcast_in_dim", [](Module& m, DType t) { return m.BroadcastInDim(P(m, t, {3, 1}), {2, 3, 4}, {1, 2}); }});
  c.push_back({"reshape", [](Module& m, DType t) { return m.Reshape(P(m, t, {3, 4}), {2, 6}); }});
  c.push_back({"transpose", [](Module& m, DType t) { return m.Transpose(P(m, t, {2, 3, 4}), {2, 0, 1}); }});
  c.push_back({"slice", [](Module& m, DType t) { return m.Slice(P(m, t, {6, 7}), {{1, 0}, {5, 7}, {2, 3}}); }});
  c.push_back({"dynamic_slice", [](Module& m, DType t) {
                 return m.DynamicSlice(P(m, t, {6, 7}), {Idx(m, {}, -2, 8), Idx(m, {}, -2, 8)}, {3, 4});
               }});
  c.push_back({"dynamic_update_slice", [](Module& m, DType t) {
                 return m.DynamicUpdateSlice(P(m, t, {6, 7}), P(m, t, {2, 3}, "u"),
                                             {Idx(m, {}, -2, 8), Idx(m, {}, -2, 8)});
               }});
  c.push_back({"pad", [](Module& m, DType t) {
                 return m.Pad(P(m, t, {3, 4}), P(m, t, {}, "v"), {{1, -1}, {2, 1}, {1, 0}});
               }});
  c.push_back({"concatenate", [](Module& m, DType t) {
                 return m.Concatenate({P(m, t, {2, 3}), P(m, t, {2, 1}, "y"), P(m, t, {2, 2}, "z")}, 1);
               }});
  c.push_back({"dot_general matmul", [&](Module& m, DType t) -> Instruction* {
                 if (!numeric(t)) return nullptr;
                 return m.DotGeneral(P(m, t, {4, 5}), P(m, t, {5, 3}, "y"), {{}, {}, {1}, {0}});
               }});
  c.push_back({"dot_general batched", [&](Module& m, DType t) -> Instruction* {
                 if (!numeric(t)) return nullptr;
                 return m.DotGeneral(P(m, t, {2, 5, 4}), P(m, t, {3, 2, 5}, "y"), {{0}, {1}, {1}, {2}});
               }});
  // Mixed precision: 16-bit float operands, f32 result (accumulated in f32, not rounded back).
  c.push_back({"dot_general half -> f32", [&](Module& m, DType t) -> Instruction* {
                 if (t != DType::kBF16 && t != DType::kF16) return nullptr;
                 return m.DotGeneral(P(m, t, {2, 4, 9}), P(m, t, {2, 9, 3}, "y"), {{0}, {0}, {2}, {1}}, {},
                                     DType::kF32);
               }});
  c.push_back({"convolution half -> f32", [&](Module& m, DType t) -> Instruction* {
                 if (t != DType::kBF16 && t != DType::kF16) return nullptr;
                 compiler::ConvDims d;
                 d.input_spatial = d.kernel_spatial = d.output_spatial = {2, 3};
                 d.padding = {{1, 1}, {1, 1}};
                 return m.Convolution(P(m, t, {2, 3, 5, 5}), P(m, t, {4, 3, 3, 3}, "k"), d, {}, DType::kF32);
               }});
  c.push_back({"convolution NCHW groups", [&](Module& m, DType t) -> Instruction* {
                 if (!numeric(t)) return nullptr;
                 compiler::ConvDims d;
                 d.input_spatial = d.kernel_spatial = d.output_spatial = {2, 3};
                 d.window_strides = {2, 1};
                 d.padding = {{1, 1}, {0, 2}};
                 d.lhs_dilation = {1, 2};
                 d.rhs_dilation = {2, 1};
                 d.feature_group_count = 2;
                 return m.Convolution(P(m, t, {2, 4, 7, 6}), P(m, t, {6, 2, 3, 3}, "k"), d);
               }});
  c.push_back({"convolution NHWC", [&](Module& m, DType t) -> Instruction* {
                 if (!numeric(t)) return nullptr;
                 compiler::ConvDims d;  // input NHWC, kernel HWIO, output NHWC
                 d.input_batch = 0, d.input_feature = 3, d.input_spatial = {1, 2};
                 d.kernel_input_feature = 2, d.kernel_output_feature = 3, d.kernel_spatial = {0, 1};
                 d.output_batch = 0, d.output_feature = 3, d.output_spatial = {1, 2};
                 d.padding = {{1, 1}, {1, 1}};
                 return m.Convolution(P(m, t, {2, 6, 5, 3}), P(m, t, {3, 3, 3, 4}, "k"), d);
               }});
  c.push_back({"convolution batch groups", [&](Module& m, DType t) -> Instruction* {
                 if (!numeric(t)) return nullptr;
                 compiler::ConvDims d;
                 d.input_spatial = d.kernel_spatial = d.output_spatial = {2, 3};
                 d.batch_group_count = 2;
                 return m.Convolution(P(m, t, {4, 3, 5, 5}), P(m, t, {4, 3, 2, 2}, "k"), d);
               }});
  c.push_back({"reduce sum", [](Module& m, DType t) {
                 return m.Reduce(P(m, t, {3, 4, 5}), P(m, t, {}, "init"), {0, 2}, ReduceKind::kSum);
               }});
  c.push_back({"reduce max", [](Module& m, DType t) {
                 return m.Reduce(P(m, t, {3, 4, 5}), P(m, t, {}, "init"), {1}, ReduceKind::kMax);
               }});
  c.push_back({"reduce_window max", [](Module& m, DType t) {
                 compiler::WindowDims w{{1, 3, 2}, {1, 2, 2}, {}, {}, {{0, 0}, {1, 1}, {0, 1}}};
                 return m.ReduceWindow(P(m, t, {2, 7, 6}), P(m, t, {}, "init"), w, ReduceKind::kMax);
               }});
  c.push_back({"reduce_window sum dilated", [](Module& m, DType t) {
                 compiler::WindowDims w{{2, 2}, {1, 2}, {2, 1}, {1, 2}, {{1, 0}, {0, 1}}};
                 return m.ReduceWindow(P(m, t, {4, 6}), P(m, t, {}, "init"), w, ReduceKind::kSum);
               }});
  c.push_back({"gather embedding", [](Module& m, DType t) {
                 compiler::GatherDims g{{2}, {0}, {0}, 2, {1, 4}, false};
                 return m.Gather(P(m, t, {10, 4}), Idx(m, {2, 3}, -2, 12), g);
               }});
  c.push_back({"gather general", [](Module& m, DType t) {
                 compiler::GatherDims g{{1, 2}, {0}, {2, 0}, 1, {1, 3, 2}, false};
                 return m.Gather(P(m, t, {5, 6, 7}), Idx(m, {4, 2}, 0, 7), g);
               }});
  c.push_back({"scatter add", [](Module& m, DType t) {
                 compiler::ScatterDims s{{2}, {0}, {0}, 2, false, false, false};
                 return m.Scatter(P(m, t, {10, 4}), Idx(m, {2, 3}, -1, 11), P(m, t, {2, 3, 4}, "u"), s, ReduceKind::kSum);
               }});
  c.push_back({"scatter replace", [](Module& m, DType t) {
                 compiler::ScatterDims s{{1}, {0}, {0}, 1, false, false, true};
                 return m.Scatter(P(m, t, {6, 3}), Idx(m, {4, 1}, 0, 6), P(m, t, {4, 3}, "u"), s, ReduceKind::kSum);
               }});
  c.push_back({"optimization_barrier", [](Module& m, DType t) {
                 return m.OptimizationBarrier(P(m, t, {3, 5}), {P(m, DType::kF32, {2}, "after")});
               }});
  c.push_back({"rng_bit_generator", [](Module& m, DType t) -> Instruction* {
                 if (!Int(t)) return nullptr;
                 return m.RngBitGenerator(P(m, DType::kI64, {2}, "state"), Shape(t, {4, 5}));
               }});
  return c;
}

// |fast - ref| <= tol * (|ref| + scale), scale the largest |ref| of the result:
// relative for single values, absolute relative to the output's size for sums
// with cancellation. Integers and i1 must be equal.
double Tolerance(DType t) {
  switch (t) {
    case DType::kF64: return 1e-12;
    case DType::kF32: return 2e-5;
    case DType::kF16: return 4e-3;
    case DType::kBF16: return 2e-2;
    default: return 0;
  }
}

std::string Compare(const Literal& fast, const Literal& ref) {
  double scale = 0;
  for (int64_t k = 0; k < ref.elements(); ++k)
    if (std::isfinite(ref.GetDouble(k))) scale = std::max(scale, std::fabs(ref.GetDouble(k)));
  const double tol = Tolerance(ref.shape().dtype);
  for (int64_t k = 0; k < ref.elements(); ++k) {
    double f = fast.GetDouble(k), r = ref.GetDouble(k);
    if (std::isnan(f) && std::isnan(r)) continue;
    if (f == r) continue;
    if (std::fabs(f - r) <= tol * (std::fabs(r) + scale)) continue;
    return "element " + std::to_string(k) + ": fast " + std::to_string(f) + " vs reference " + std::to_string(r);
  }
  return "";
}

TEST(OpsTable, EveryOpEveryTypeMatchesTheReference) {
  std::map<std::string, std::map<DType, std::string>> table;
  std::vector<std::string> order;
  int failures = 0;
  for (const Case& c : Cases()) {
    order.push_back(c.name);
    for (DType t : kTypes) {
      std::string& cell = table[c.name][t];
      Module m;
      Instruction* op = c.build(m, t);
      if (op == nullptr) { cell = "-"; continue; }
      m.AddOutput(op);
      if (!compiler::Verify(m).ok()) { cell = "-"; continue; }
      SCOPED_TRACE(c.name + " " + DTypeName(t));
      // The text form must round-trip.
      std::string text = compiler::PrintModule(m);
      auto parsed = compiler::ParseModule(text);
      ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
      EXPECT_EQ(compiler::PrintModule(**parsed), text);

      std::mt19937 rng(1234 + static_cast<int>(t));
      std::vector<Literal> args;
      for (const Instruction* p : m.parameters()) args.push_back(Random(p->shape, p->name, rng));
      std::vector<const Literal*> ops;
      for (const Instruction* o : op->operands) ops.push_back(&args[o->param_index]);
      Literal fast(op->shape), ref(op->shape);
      absl::Status fs = EvalInstruction(*op, ops, 3, &fast);
      absl::Status rs = EvalReference(*op, ops, 3, &ref);
      ASSERT_TRUE(rs.ok()) << rs;
      if (fs.code() == absl::StatusCode::kUnimplemented) { cell = "unsup"; continue; }
      ASSERT_TRUE(fs.ok()) << fs;
      std::string diff = Compare(fast, ref);
      EXPECT_EQ(diff, "");
      cell = diff.empty() ? "pass" : "FAIL";
      failures += !diff.empty();
    }
  }
  std::printf("%-28s", "op");
  for (DType t : kTypes) std::printf("%7s", DTypeName(t));
  std::printf("\n");
  for (const std::string& name : order) {
    std::printf("%-28s", name.c_str());
    for (DType t : kTypes) std::printf("%7s", table[name][t].c_str());
    std::printf("\n");
  }
  EXPECT_EQ(failures, 0);
}

// The fast convolution against the reference at a ResNet-like size, where the
// batch is chunked and im2col takes its fast paths.
TEST(OpsTable, ConvolutionAtResNetSize) {
  Module m;
  compiler::ConvDims d;
  d.input_spatial = d.kernel_spatial = d.output_spatial = {2, 3};
  d.padding = {{1, 1}, {1, 1}};
  d.window_strides = {2, 2};
  auto* x = P(m, DType::kF32, {4, 8, 16, 16});
  auto* k = P(m, DType::kF32, {16, 8, 3, 3}, "k");
  auto* c = m.Convolution(x, k, d);
  ASSERT_TRUE(compiler::Verify(m).ok());
  std::mt19937 rng(5);
  Literal a = Random(x->shape, "x", rng), b = Random(k->shape, "k", rng);
  Literal fast(c->shape), ref(c->shape);
  ASSERT_TRUE(EvalInstruction(*c, {&a, &b}, 0, &fast).ok());
  ASSERT_TRUE(EvalReference(*c, {&a, &b}, 0, &ref).ok());
  EXPECT_EQ(Compare(fast, ref), "");
}

}  // namespace
}  // namespace shardscope::runtime
