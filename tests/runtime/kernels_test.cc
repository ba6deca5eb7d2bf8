// Tests of the per-instruction kernels (runtime/kernels.h). Every op is checked
// against a deliberately naive reference written here (index-by-index loops in
// double precision), on random inputs and shapes chosen to hit each fast path
// and the general fallbacks: rank 0/1/3+, odd sizes, batched and permuted dots.
#include "runtime/kernels.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/reference.h"

namespace shardscope::runtime {
namespace {

using compiler::CompareDirection;
using compiler::DotDims;
using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;
using compiler::ReduceKind;

const DType kF32 = DType::kF32, kF64 = DType::kF64, kI32 = DType::kI32, kI64 = DType::kI64,
            kI1 = DType::kI1;

// ---------------------------------------------------------------- helpers

std::mt19937& Rng() {
  static std::mt19937 rng(1234);
  return rng;
}

// Floats uniform in [lo, hi]; integers in [round(lo), round(hi)]; i1 0/1.
Literal Random(DType t, std::vector<int64_t> dims, double lo = -1, double hi = 1) {
  Literal l(Shape(t, std::move(dims)));
  for (int64_t i = 0; i < l.elements(); ++i) {
    if (IsFloat(t)) {
      l.SetDouble(i, std::uniform_real_distribution<double>(lo, hi)(Rng()));
    } else if (t == kI1) {
      l.SetDouble(i, std::uniform_int_distribution<int>(0, 1)(Rng()));
    } else {
      l.SetDouble(i, std::uniform_int_distribution<int64_t>(std::llround(lo), std::llround(hi))(Rng()));
    }
  }
  return l;
}

Literal Scalar(DType t, double v) { return Literal::Scalar(t, v); }


// Runs the kernel; the result literal is allocated with the instruction's type.
absl::Status Eval(const Instruction* instr, const std::vector<const Literal*>& ops, Literal* out,
                 int64_t partition_id = 0) {
  *out = Literal(instr->shape);
  // Poison the output so a kernel that skips elements is caught.
  if (out->bytes() > 0) std::memset(out->data(), 0x7f, static_cast<size_t>(out->bytes()));
  return EvalInstruction(*instr, ops, partition_id, out);
}

double Tolerance(DType t, double scale = 1) {
  if (t == kF32) return 2e-6 * scale;
  if (t == kF64) return 1e-13 * scale;
  return 0;
}

void ExpectNear(const Literal& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.elements(), static_cast<int64_t>(want.size())) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.elements(); ++i) {
    const double g = got.GetDouble(i), w = want[i];
    const bool ok = (std::isnan(w) && std::isnan(g)) || std::abs(g - w) <= tol * (1 + std::abs(w));
    if (!ok && ++bad <= 5) ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w;
  }
  EXPECT_EQ(bad, 0) << what;
}

std::string Str(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

const compiler::SourceLoc kLoc{"samples/test_model.cc", 42, "Forward"};

// ---------------------------------------------------------------- elementwise

double RefBinary(Opcode op, DType t, double a, double b) {
  const bool integral = !IsFloat(t);
  switch (op) {
    case Opcode::kAdd: return a + b;
    case Opcode::kSubtract: return a - b;
    case Opcode::kMultiply: return a * b;
    case Opcode::kDivide: return integral ? std::trunc(a / b) : a / b;
    case Opcode::kMaximum: return std::max(a, b);
    case Opcode::kMinimum: return std::min(a, b);
    default: return 0;
  }
}

TEST(Elementwise, BinaryOpsMatchReference) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {7}, {3, 4, 5}, {2, 1, 3, 33}};
  for (DType t : {kF32, kF64, kI32, kI64}) {
    for (Opcode op : {Opcode::kAdd, Opcode::kSubtract, Opcode::kMultiply, Opcode::kDivide,
                      Opcode::kMaximum, Opcode::kMinimum}) {
      for (const auto& dims : shapes) {
        Module m;
        auto* pa = m.Parameter(Shape(t, dims), "a");
        auto* pb = m.Parameter(Shape(t, dims), "b");
        auto* instr = m.Binary(op, pa, pb);
        Literal a = Random(t, dims, -50, 50), b = Random(t, dims, 1, 9);
        // Mixed signs for b too, but never zero (division by zero is tested apart).
        for (int64_t i = 0; i < b.elements(); ++i) {
          if (i % 3 == 1) b.SetDouble(i, -b.GetDouble(i));
        }
        Literal out;
        ASSERT_TRUE(Eval(instr, {&a, &b}, &out).ok());
        std::vector<double> want(a.elements());
        for (int64_t i = 0; i < a.elements(); ++i) {
          want[i] = RefBinary(op, t, a.GetDouble(i), b.GetDouble(i));
          if (t == kF32) want[i] = static_cast<float>(want[i]);
        }
        ExpectNear(out, want, Tolerance(t), std::string(compiler::OpcodeName(op)) + " " +
                                                DTypeName(t) + Str(dims));
      }
    }
  }
}

TEST(Elementwise, ScalarOperandRepeats) {
  Module m;
  auto* pa = m.Parameter(Shape(kF32, {3, 4}), "a");
  auto* ps = m.Parameter(Shape(kF32, {}), "s");
  Literal a = Random(kF32, {3, 4}), s = Scalar(kF32, 2.5);
  Literal out;
  ASSERT_TRUE(Eval(m.Binary(Opcode::kSubtract, pa, ps), {&a, &s}, &out).ok());
  std::vector<double> want;
  for (int64_t i = 0; i < 12; ++i) want.push_back(static_cast<float>(a.GetDouble(i) - 2.5));
  ExpectNear(out, want, 1e-7, "a - scalar");
  // The scalar on the left.
  Instruction lhs_scalar = *m.Binary(Opcode::kSubtract, pa, ps);
  lhs_scalar.operands.clear();  // no IR operands: only the literals are checked
  ASSERT_TRUE(EvalInstruction(lhs_scalar, {&s, &a}, 0, &out).ok());
  for (auto& w : want) w = -w;
  ExpectNear(out, want, 1e-6, "scalar - a");
}

TEST(Elementwise, MaxMinPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {kF32, kF64}) {
    Module m;
    auto* pa = m.Parameter(Shape(t, {4}), "a");
    auto* pb = m.Parameter(Shape(t, {4}), "b");
    Literal a(Shape(t, {4})), b(Shape(t, {4}));
    const double av[] = {nan, 1, nan, 3}, bv[] = {1, nan, nan, -3};
    for (int i = 0; i < 4; ++i) { a.SetDouble(i, av[i]); b.SetDouble(i, bv[i]); }
    Literal out;
    ASSERT_TRUE(Eval(m.Binary(Opcode::kMaximum, pa, pb), {&a, &b}, &out).ok());
    ExpectNear(out, {nan, nan, nan, 3}, 0, "max NaN");
    ASSERT_TRUE(Eval(m.Binary(Opcode::kMinimum, pa, pb), {&a, &b}, &out).ok());
    ExpectNear(out, {nan, nan, nan, -3}, 0, "min NaN");
  }
}

TEST(Elementwise, IntegerEdgeCasesDoNotTrap) {
  Module m;
  auto* pa = m.Parameter(Shape(kI32, {4}), "a");
  auto* pb = m.Parameter(Shape(kI32, {4}), "b");
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  const int32_t kMax = std::numeric_limits<int32_t>::max();
  Literal a = Literal::FromI32({4}, {7, kMin, -7, kMax});
  Literal b = Literal::FromI32({4}, {0, -1, 2, 1});
  Literal out;
  ASSERT_TRUE(Eval(m.Binary(Opcode::kDivide, pa, pb), {&a, &b}, &out).ok());
  EXPECT_EQ(out.as<int32_t>()[0], -1);    // x / 0
  EXPECT_EQ(out.as<int32_t>()[1], kMin);  // INT_MIN / -1 wraps
  EXPECT_EQ(out.as<int32_t>()[2], -3);    // truncates toward zero
  ASSERT_TRUE(Eval(m.Binary(Opcode::kAdd, pa, pb), {&a, &b}, &out).ok());
  EXPECT_EQ(out.as<int32_t>()[3], kMin);  // kMax + 1 wraps
}

TEST(Elementwise, UnaryOps) {
  for (DType t : {kF32, kF64}) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {5}, {3, 7, 2}, {1000}}) {
      Module m;
      auto* p = m.Parameter(Shape(t, dims), "x");
      Literal x = Random(t, dims, 0.01, 5);
      for (Opcode op : {Opcode::kNegate, Opcode::kExponential, Opcode::kLog}) {
        Literal out;
        ASSERT_TRUE(Eval(m.Unary(op, p), {&x}, &out).ok());
        std::vector<double> want;
        for (int64_t i = 0; i < x.elements(); ++i) {
          const double v = x.GetDouble(i);
          want.push_back(op == Opcode::kNegate ? -v : op == Opcode::kExponential ? std::exp(v)
                                                                                  : std::log(v));
        }
        ExpectNear(out, want, Tolerance(t, 4), std::string(compiler::OpcodeName(op)) + Str(dims));
      }
    }
  }
  {  // negate flips the sign of zero
    Module m;
    auto* p = m.Parameter(Shape(kF32, {1}), "x");
    Literal x = Literal::FromF32({1}, {0.0f}), out;
    ASSERT_TRUE(Eval(m.Unary(Opcode::kNegate, p), {&x}, &out).ok());
    EXPECT_TRUE(std::signbit(out.as<float>()[0]));
  }
  for (DType t : {kI32, kI64}) {
    Module m;
    auto* p = m.Parameter(Shape(t, {9}), "x");
    Literal x = Random(t, {9}, -100, 100), out;
    ASSERT_TRUE(Eval(m.Unary(Opcode::kNegate, p), {&x}, &out).ok());
    for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(out.GetDouble(i), -x.GetDouble(i));
  }
}

TEST(Elementwise, CompareAllDirections) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::pair<CompareDirection, std::function<bool(double, double)>>> dirs = {
      {CompareDirection::kEQ, [](double a, double b) { return a == b; }},
      {CompareDirection::kNE, [](double a, double b) { return a != b; }},
      {CompareDirection::kLT, [](double a, double b) { return a < b; }},
      {CompareDirection::kLE, [](double a, double b) { return a <= b; }},
      {CompareDirection::kGT, [](double a, double b) { return a > b; }},
      {CompareDirection::kGE, [](double a, double b) { return a >= b; }}};
  for (DType t : {kF32, kF64, kI32, kI64, kI1}) {
    const std::vector<int64_t> dims = {4, 9};
    Module m;
    auto* pa = m.Parameter(Shape(t, dims), "a");
    auto* pb = m.Parameter(Shape(t, dims), "b");
    // Small integer range so that equality happens often.
    Literal a = Random(t, dims, -2, 2), b = Random(t, dims, -2, 2);
    if (IsFloat(t)) {
      for (int64_t i = 0; i < a.elements(); i += 5) b.SetDouble(i, a.GetDouble(i));
      a.SetDouble(1, nan);
      b.SetDouble(2, nan);
    }
    for (const auto& [dir, ref] : dirs) {
      Literal out;
      ASSERT_TRUE(Eval(m.Compare(pa, pb, dir), {&a, &b}, &out).ok());
      ASSERT_EQ(out.shape().dtype, kI1);
      for (int64_t i = 0; i < a.elements(); ++i) {
        EXPECT_EQ(out.as<uint8_t>()[i], ref(a.GetDouble(i), b.GetDouble(i)) ? 1 : 0)
            << DTypeName(t) << " dir " << static_cast<int>(dir) << " at " << i;
      }
    }
  }
}

TEST(Elementwise, Select) {
  for (DType t : {kF32, kF64, kI32, kI64, kI1}) {
    for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {6}, {2, 3, 5}}) {
      Module m;
      auto* pp = m.Parameter(Shape(kI1, dims), "p");
      auto* pt = m.Parameter(Shape(t, dims), "t");
      auto* pf = m.Parameter(Shape(t, dims), "f");
      Literal p = Random(kI1, dims), x = Random(t, dims, -9, 9), y = Random(t, dims, -9, 9), out;
      ASSERT_TRUE(Eval(m.Select(pp, pt, pf), {&p, &x, &y}, &out).ok());
      std::vector<double> want;
      for (int64_t i = 0; i < p.elements(); ++i) {
        want.push_back(p.GetDouble(i) != 0 ? x.GetDouble(i) : y.GetDouble(i));
      }
      ExpectNear(out, want, 0, std::string("select ") + DTypeName(t) + Str(dims));
      // A scalar predicate picks a whole operand.
      auto* ps = m.Parameter(Shape(kI1, {}), "ps");
      for (int pv : {0, 1}) {
        Literal sp = Scalar(kI1, pv);
        ASSERT_TRUE(Eval(m.Select(ps, pt, pf), {&sp, &x, &y}, &out).ok());
        for (int64_t i = 0; i < x.elements(); ++i) {
          EXPECT_EQ(out.GetDouble(i), pv ? x.GetDouble(i) : y.GetDouble(i));
        }
      }
    }
  }
}

TEST(Elementwise, Convert) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {0, 1, -1, 2.7, -2.7, 0.5, -0.5, 1e10, -1e10, nan, 123456};
  const int64_t n = static_cast<int64_t>(values.size());
  auto ref = [](DType from, DType to, double v) -> double {
    if (to == kI1) return v != 0 ? 1 : 0;  // NaN != 0
    if (to == kI32 || to == kI64) {
      if (std::isnan(v)) return 0;
      const double lo = to == kI32 ? -2147483648.0 : -9223372036854775808.0;
      if (v <= lo) return lo;
      if (v >= -lo) return to == kI32 ? 2147483647.0 : 9223372036854775807.0;
      return std::trunc(v);
    }
    if (to == kF32) return static_cast<float>(v);
    return v;
  };
  for (DType from : {kF32, kF64, kI32, kI64, kI1}) {
    for (DType to : {kF32, kF64, kI32, kI64, kI1}) {
      Module m;
      auto* p = m.Parameter(Shape(from, {n}), "x");
      Literal x(Shape(from, {n}));
      std::vector<double> src(n);
      for (int64_t i = 0; i < n; ++i) {
        double v = values[i];
        if (!IsFloat(from)) v = std::isnan(v) ? 3 : std::clamp(std::trunc(v), -1e9, 1e9);
        if (from == kI1) v = v != 0;
        x.SetDouble(i, v);
        src[i] = x.GetDouble(i);
      }
      Literal out;
      ASSERT_TRUE(Eval(m.Convert(p, to), {&x}, &out).ok()) << DTypeName(from) << "->" << DTypeName(to);
      std::vector<double> want;
      for (double v : src) want.push_back(ref(from, to, v));
      ExpectNear(out, want, 1e-15, std::string("convert ") + DTypeName(from) + "->" + DTypeName(to));
    }
  }
}

// ---------------------------------------------------------------- sources

TEST(Sources, ConstantFullAndSplat) {
  Module m;
  Literal v = Random(kF64, {2, 3});
  Literal out;
  ASSERT_TRUE(Eval(m.Constant(v), {}, &out).ok());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.GetDouble(i), v.GetDouble(i));
  // A one-element literal fills the whole shape.
  Instruction* splat = m.ScalarConstant(kI32, 7);
  splat->shape = Shape(kI32, {3, 5});
  ASSERT_TRUE(Eval(splat, {}, &out).ok());
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(out.as<int32_t>()[i], 7);
  // Wrong element count is an error, not a crash.
  Instruction* bad = m.Constant(Random(kF32, {4}));
  bad->shape = Shape(kF32, {3});
  EXPECT_EQ(Eval(bad, {}, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Sources, Iota) {
  const std::vector<int64_t> dims = {4, 3, 5};
  for (DType t : {kF32, kF64, kI32, kI64}) {
    for (int64_t d = 0; d < 3; ++d) {
      Module m;
      Literal out;
      ASSERT_TRUE(Eval(m.Iota(Shape(t, dims), d), {}, &out).ok());
      for (int64_t i = 0; i < out.elements(); ++i) {
        ASSERT_EQ(out.GetDouble(i), Unravel(i, dims)[d]) << DTypeName(t) << " dim " << d << " at " << i;
      }
    }
  }
  Module m;
  Literal out;
  ASSERT_TRUE(Eval(m.Iota(Shape(kI32, {6}), 0), {}, &out).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.as<int32_t>()[i], i);
}

TEST(Sources, PartitionId) {
  Module m;
  Instruction* pid = m.PartitionId();
  Literal out;
  ASSERT_TRUE(Eval(pid, {}, &out, 5).ok());
  EXPECT_EQ(out.as<int32_t>()[0], 5);
  pid->shape = Shape(kI64, {});
  ASSERT_TRUE(Eval(pid, {}, &out, 63).ok());
  EXPECT_EQ(out.as<int64_t>()[0], 63);
}

// ---------------------------------------------------------------- data movement

TEST(DataMovement, BroadcastInDim) {
  struct Case {
    std::vector<int64_t> in, out, bdims;
  };
  const std::vector<Case> cases = {
      {{}, {3, 4}, {}},                  // scalar
      {{4}, {3, 4}, {1}},                // row (bias)
      {{3}, {3, 4}, {0}},                // column
      {{3, 1}, {3, 5}, {0, 1}},          // size-1 dim broadcasts
      {{2, 3}, {2, 4, 3}, {0, 2}},       // middle dim added
      {{3, 2}, {2, 3}, {1, 0}},          // unsorted broadcast dims (a transpose)
      {{5}, {5}, {0}},                   // identity
      {{1, 7}, {2, 3, 7}, {1, 2}},       // leading dims added
      {{37}, {41, 37}, {1}},             // odd sizes
      {{2, 1, 3}, {2, 4, 5, 3}, {0, 2, 3}}};
  for (DType t : {kF32, kF64, kI32, kI1, DType::kBF16}) {
    for (const Case& c : cases) {
      Module m;
      auto* p = m.Parameter(Shape(t, c.in), "x");
      Literal x = Random(t == DType::kBF16 ? kF32 : t, c.in, -9, 9);
      if (t == DType::kBF16) {  // data movement is type-agnostic: bf16 works too
        Literal y(Shape(t, c.in));
        for (int64_t i = 0; i < x.elements(); ++i) y.SetDouble(i, x.GetDouble(i));
        x = y;
      }
      Literal out;
      ASSERT_TRUE(Eval(m.BroadcastInDim(p, c.out, c.bdims), {&x}, &out).ok());
      std::vector<double> want(out.elements());
      for (int64_t i = 0; i < out.elements(); ++i) {
        std::vector<int64_t> oi = Unravel(i, c.out), ii(c.in.size());
        for (size_t k = 0; k < c.in.size(); ++k) ii[k] = c.in[k] == 1 ? 0 : oi[c.bdims[k]];
        want[i] = x.GetDouble(Ravel(ii, c.in));
      }
      ExpectNear(out, want, 0, std::string("broadcast ") + DTypeName(t) + Str(c.in) + "->" + Str(c.out));
    }
  }
}

TEST(DataMovement, Reshape) {
  Module m;
  auto* p = m.Parameter(Shape(kF32, {3, 4, 5}), "x");
  Literal x = Random(kF32, {3, 4, 5}), out;
  ASSERT_TRUE(Eval(m.Reshape(p, {12, 5}), {&x}, &out).ok());
  EXPECT_EQ(std::memcmp(out.data(), x.data(), x.bytes()), 0);
  EXPECT_EQ(Eval(m.Reshape(p, {7, 5}), {&x}, &out).code(), absl::StatusCode::kInvalidArgument);
}

void CheckTranspose(DType t, const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  Module m;
  auto* p = m.Parameter(Shape(t, dims), "x");
  Literal x = Random(t, dims, -100, 100), out;
  ASSERT_TRUE(Eval(m.Transpose(p, perm), {&x}, &out).ok());
  std::vector<int64_t> odims;
  for (int64_t q : perm) odims.push_back(dims[q]);
  std::vector<double> want(out.elements());
  for (int64_t i = 0; i < out.elements(); ++i) {
    std::vector<int64_t> oi = Unravel(i, odims), ii(dims.size());
    for (size_t k = 0; k < perm.size(); ++k) ii[perm[k]] = oi[k];
    want[i] = x.GetDouble(Ravel(ii, dims));
  }
  ExpectNear(out, want, 0, std::string("transpose ") + DTypeName(t) + Str(dims) + " perm " + Str(perm));
}

TEST(DataMovement, Transpose) {
  for (DType t : {kF32, kF64, kI1}) {
    CheckTranspose(t, {}, {});
    CheckTranspose(t, {7}, {0});
    CheckTranspose(t, {67, 45}, {1, 0});     // blocked path, ragged tiles
    CheckTranspose(t, {3, 100}, {1, 0});
    std::vector<int64_t> perm = {0, 1, 2};
    do {
      CheckTranspose(t, {4, 9, 11}, perm);
      CheckTranspose(t, {2, 1, 33}, perm);
    } while (std::next_permutation(perm.begin(), perm.end()));
    CheckTranspose(t, {2, 8, 3, 16}, {0, 2, 1, 3});  // attention head swap
    CheckTranspose(t, {2, 3, 9, 17}, {0, 1, 3, 2});  // batched 2-D transpose
    CheckTranspose(t, {3, 4, 5, 6}, {3, 1, 0, 2});
  }
}

TEST(DataMovement, DynamicSlice) {
  const std::vector<int64_t> dims = {5, 6, 7};
  for (DType it : {kI32, kI64}) {
    for (const std::vector<int64_t>& starts : std::vector<std::vector<int64_t>>{
             {0, 0, 0}, {1, 2, 3}, {3, 3, 3}, {9, -4, 5}, {-1, 100, 2}}) {
      for (const std::vector<int64_t>& sizes :
           std::vector<std::vector<int64_t>>{{2, 3, 4}, {5, 6, 7}, {1, 1, 1}, {5, 1, 7}, {0, 2, 2}}) {
        Module m;
        auto* p = m.Parameter(Shape(kF32, dims), "x");
        std::vector<Instruction*> sp;
        std::vector<Literal> sl;
        for (size_t i = 0; i < 3; ++i) {
          sp.push_back(m.Parameter(Shape(it, {}), "s"));
          sl.push_back(Scalar(it, static_cast<double>(starts[i])));
        }
        Literal x = Random(kF32, dims), out;
        ASSERT_TRUE(Eval(m.DynamicSlice(p, sp, sizes), {&x, &sl[0], &sl[1], &sl[2]}, &out).ok());
        std::vector<double> want(out.elements());
        for (int64_t i = 0; i < out.elements(); ++i) {
          std::vector<int64_t> oi = Unravel(i, sizes);
          for (int k = 0; k < 3; ++k) {
            oi[k] += std::clamp<int64_t>(starts[k], 0, dims[k] - sizes[k]);
          }
          want[i] = x.GetDouble(Ravel(oi, dims));
        }
        ExpectNear(out, want, 0, "dynamic_slice starts " + Str(starts) + " sizes " + Str(sizes));
      }
    }
  }
  // Rank 1.
  Module m;
  auto* p = m.Parameter(Shape(kI64, {10}), "x");
  auto* s = m.Parameter(Shape(kI32, {}), "s");
  Literal x = Random(kI64, {10}, 0, 1000), start = Scalar(kI32, 8), out;
  ASSERT_TRUE(Eval(m.DynamicSlice(p, {s}, {4}), {&x, &start}, &out).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.as<int64_t>()[i], x.as<int64_t>()[6 + i]);
}

// ---------------------------------------------------------------- reduce

double RefCombine(ReduceKind k, double a, double b) {
  switch (k) {
    case ReduceKind::kSum: return a + b;
    case ReduceKind::kProd: return a * b;
    case ReduceKind::kMax: return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b);
    case ReduceKind::kMin: return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b);
  }
  return 0;
}

void CheckReduce(DType t, const std::vector<int64_t>& dims, const std::vector<int64_t>& rdims,
                 ReduceKind k, double init_value, const Literal* input = nullptr) {
  Module m;
  auto* p = m.Parameter(Shape(t, dims), "x");
  auto* pi = m.Parameter(Shape(t, {}), "init");
  // Products stay tame with values near +-1.
  Literal x = input ? *input
                    : k == ReduceKind::kProd ? Random(t, dims, IsFloat(t) ? 0.8 : -1, IsFloat(t) ? 1.2 : 1)
                                             : Random(t, dims, -20, 20);
  Literal init = Scalar(t, init_value), out;
  auto* instr = m.Reduce(p, pi, rdims, k);
  ASSERT_TRUE(Eval(instr, {&x, &init}, &out).ok());
  std::vector<double> want(out.elements(), init.GetDouble(0));
  const std::vector<int64_t>& odims = instr->shape.dims;
  for (int64_t i = 0; i < x.elements(); ++i) {
    std::vector<int64_t> ii = Unravel(i, dims), oi;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (std::find(rdims.begin(), rdims.end(), static_cast<int64_t>(d)) == rdims.end()) {
        oi.push_back(ii[d]);
      }
    }
    double& w = want[Ravel(oi, odims)];
    w = RefCombine(k, w, x.GetDouble(i));
  }
  int64_t reduced = 1;
  for (int64_t d : rdims) reduced *= dims[d];
  ExpectNear(out, want, Tolerance(t, 4 * reduced),
             std::string("reduce ") + DTypeName(t) + Str(dims) + " dims " + Str(rdims) + " kind " +
                 std::to_string(static_cast<int>(k)));
}

TEST(Reduce, AllPatternsMatchReference) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{}, {}},                                                        // rank 0
      {{7}, {0}}, {{7}, {}},                                           // rank 1
      {{3, 4, 5}, {0}}, {{3, 4, 5}, {1}}, {{3, 4, 5}, {2}},            // leading, middle, trailing
      {{3, 4, 5}, {0, 1}}, {{3, 4, 5}, {1, 2}}, {{3, 4, 5}, {0, 2}},   // [R,K,R]: general path
      {{3, 4, 5}, {0, 1, 2}}, {{3, 4, 5}, {2, 0}},                     // all; unsorted dims
      {{2, 3, 4, 5}, {0, 2}}, {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 3}},
      {{1, 9, 1, 3}, {0, 1}}, {{4, 1, 6}, {1}},                        // size-1 dims
      {{33, 257}, {1}}, {{257, 33}, {0}}};                             // long rows/columns
  for (DType t : {kF32, kF64, kI32, kI64}) {
    for (ReduceKind k : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin, ReduceKind::kProd}) {
      for (const auto& [dims, rdims] : cases) {
        const double init = k == ReduceKind::kSum ? 3 : k == ReduceKind::kProd ? 1
                          : k == ReduceKind::kMax ? -1e9 : 1e9;
        CheckReduce(t, dims, rdims, k, init);
      }
    }
  }
}

TEST(Reduce, InitTakesPartAndEmptyReductionsGiveInit) {
  // Max with an init above every element returns the init.
  CheckReduce(kF32, {4, 6}, {1}, ReduceKind::kMax, 1e6);
  CheckReduce(kI32, {4, 6}, {0}, ReduceKind::kSum, 100);
  // Zero-sized reduced dim: every output is init.
  CheckReduce(kF32, {0, 3}, {0}, ReduceKind::kSum, 2.5);
  CheckReduce(kF32, {3, 0}, {1}, ReduceKind::kMax, -7);
}

TEST(Reduce, MaxPropagatesNaN) {
  Literal x = Random(kF32, {3, 40});
  x.SetDouble(45, NAN);  // row 1
  CheckReduce(kF32, {3, 40}, {1}, ReduceKind::kMax, -1e9, &x);
  CheckReduce(kF32, {3, 40}, {0}, ReduceKind::kMin, 1e9, &x);
}

TEST(Reduce, PredicatesAsOrAnd) {
  Literal x = Random(kI1, {5, 8});
  CheckReduce(kI1, {5, 8}, {1}, ReduceKind::kMax, 0, &x);  // any
  CheckReduce(kI1, {5, 8}, {0}, ReduceKind::kMin, 1, &x);  // all
}

// ---------------------------------------------------------------- dot_general

void CheckDot(DType t, const std::vector<int64_t>& ld, const std::vector<int64_t>& rd,
              const DotDims& dd) {
  Module m;
  auto* pl = m.Parameter(Shape(t, ld), "lhs");
  auto* pr = m.Parameter(Shape(t, rd), "rhs");
  auto* instr = m.DotGeneral(pl, pr, dd);
  Literal l = Random(t, ld, -3, 3), r = Random(t, rd, -3, 3), out;
  const absl::Status st = Eval(instr, {&l, &r}, &out);
  ASSERT_TRUE(st.ok()) << st;
  // Naive reference: for every output index, loop over every contracting index.
  std::vector<int64_t> lfree, rfree, cdims;
  for (int64_t d = 0; d < static_cast<int64_t>(ld.size()); ++d) {
    if (std::count(dd.lhs_batch.begin(), dd.lhs_batch.end(), d) == 0 &&
        std::count(dd.lhs_contracting.begin(), dd.lhs_contracting.end(), d) == 0) lfree.push_back(d);
  }
  for (int64_t d = 0; d < static_cast<int64_t>(rd.size()); ++d) {
    if (std::count(dd.rhs_batch.begin(), dd.rhs_batch.end(), d) == 0 &&
        std::count(dd.rhs_contracting.begin(), dd.rhs_contracting.end(), d) == 0) rfree.push_back(d);
  }
  int64_t kcount = 1;
  for (int64_t d : dd.lhs_contracting) {
    cdims.push_back(ld[d]);
    kcount *= ld[d];
  }
  const std::vector<int64_t>& odims = instr->shape.dims;
  std::vector<double> want(out.elements());
  for (int64_t o = 0; o < out.elements(); ++o) {
    const std::vector<int64_t> oi = Unravel(o, odims);
    std::vector<int64_t> li(ld.size()), ri(rd.size());
    size_t pos = 0;
    for (size_t b = 0; b < dd.lhs_batch.size(); ++b, ++pos) {
      li[dd.lhs_batch[b]] = oi[pos];
      ri[dd.rhs_batch[b]] = oi[pos];
    }
    for (int64_t d : lfree) li[d] = oi[pos++];
    for (int64_t d : rfree) ri[d] = oi[pos++];
    double acc = 0;
    for (int64_t c = 0; c < kcount; ++c) {
      const std::vector<int64_t> ci = Unravel(c, cdims);
      for (size_t j = 0; j < ci.size(); ++j) {
        li[dd.lhs_contracting[j]] = ci[j];
        ri[dd.rhs_contracting[j]] = ci[j];
      }
      acc += l.GetDouble(Ravel(li, ld)) * r.GetDouble(Ravel(ri, rd));
    }
    want[o] = acc;
  }
  ExpectNear(out, want, Tolerance(t, 10 * (kcount + 1)),
             std::string("dot ") + DTypeName(t) + Str(ld) + "x" + Str(rd) + " lb" + Str(dd.lhs_batch) +
                 " lc" + Str(dd.lhs_contracting) + " rb" + Str(dd.rhs_batch) + " rc" +
                 Str(dd.rhs_contracting));
}

DotDims Dims(std::vector<int64_t> lb, std::vector<int64_t> lc, std::vector<int64_t> rb,
             std::vector<int64_t> rc) {
  DotDims d;
  d.lhs_batch = std::move(lb);
  d.lhs_contracting = std::move(lc);
  d.rhs_batch = std::move(rb);
  d.rhs_contracting = std::move(rc);
  return d;
}

TEST(DotGeneral, MatrixLayouts) {
  for (DType t : {kF32, kF64, kI32, kI64}) {
    for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{
             {1, 1, 1}, {4, 5, 6}, {37, 53, 29}, {1, 17, 9}, {9, 17, 1}, {64, 64, 64}}) {
      CheckDot(t, {M, K}, {K, N}, Dims({}, {1}, {}, {0}));  // [M,K]x[K,N]
      CheckDot(t, {M, K}, {N, K}, Dims({}, {1}, {}, {1}));  // [M,K]x[N,K]
      CheckDot(t, {K, M}, {K, N}, Dims({}, {0}, {}, {0}));  // [K,M]x[K,N]
      CheckDot(t, {K, M}, {N, K}, Dims({}, {0}, {}, {1}));  // [K,M]x[N,K]
    }
  }
}

TEST(DotGeneral, VectorsAndRank3) {
  for (DType t : {kF32, kF64, kI32}) {
    CheckDot(t, {13}, {13}, Dims({}, {0}, {}, {0}));              // inner product -> scalar
    CheckDot(t, {5, 13}, {13}, Dims({}, {1}, {}, {0}));           // matrix-vector
    CheckDot(t, {13}, {13, 6}, Dims({}, {0}, {}, {0}));           // vector-matrix
    CheckDot(t, {4}, {3}, Dims({}, {}, {}, {}));                   // outer product
    CheckDot(t, {2, 7, 5}, {5, 3}, Dims({}, {2}, {}, {0}));       // [B,S,D]x[D,F]
    CheckDot(t, {2, 7, 5}, {3, 5}, Dims({}, {2}, {}, {1}));       // x W^T
    CheckDot(t, {3, 4, 5}, {3, 4, 6}, Dims({}, {0, 1}, {}, {0, 1}));  // two contracting dims
    CheckDot(t, {3, 4, 5}, {6, 3, 4}, Dims({}, {0, 1}, {}, {1, 2}));
    CheckDot(t, {5, 3, 4}, {4, 3, 6}, Dims({}, {1, 2}, {}, {1, 0}));  // pairing not in memory order
  }
}

TEST(DotGeneral, Batched) {
  for (DType t : {kF32, kF64, kI32}) {
    CheckDot(t, {3, 5, 7}, {3, 7, 4}, Dims({0}, {2}, {0}, {1}));        // [B,M,K]x[B,K,N]
    CheckDot(t, {3, 5, 7}, {3, 4, 7}, Dims({0}, {2}, {0}, {2}));        // q k^T
    CheckDot(t, {3, 7, 5}, {3, 7, 4}, Dims({0}, {1}, {0}, {1}));        // [B,K,M]x[B,K,N]
    CheckDot(t, {2, 3, 6, 8}, {2, 3, 8, 5}, Dims({0, 1}, {3}, {0, 1}, {2}));  // two batch dims
    CheckDot(t, {2, 3, 6, 8}, {2, 3, 5, 8}, Dims({0, 1}, {3}, {0, 1}, {3}));
    // General path: batch dims not leading, or listed out of order.
    CheckDot(t, {5, 3, 7}, {7, 3, 4}, Dims({1}, {2}, {1}, {0}));
    CheckDot(t, {2, 3, 6, 8}, {3, 2, 8, 5}, Dims({1, 0}, {3}, {0, 1}, {2}));
    CheckDot(t, {6, 2, 8, 3}, {3, 8, 2, 5}, Dims({1, 3}, {2}, {2, 0}, {1}));
    CheckDot(t, {4, 2, 3}, {3, 2, 4}, Dims({1}, {0, 2}, {1}, {2, 0}));
  }
}

TEST(DotGeneral, LargeF32Gemm) {
  CheckDot(kF32, {200, 300}, {300, 150}, Dims({}, {1}, {}, {0}));
  CheckDot(kF32, {4, 64, 96}, {4, 80, 96}, Dims({0}, {2}, {0}, {2}));
}

TEST(DotGeneral, EmptyDims) {
  CheckDot(kF32, {0, 5}, {5, 3}, Dims({}, {1}, {}, {0}));
  CheckDot(kF32, {4, 0}, {0, 3}, Dims({}, {1}, {}, {0}));  // empty contraction gives zeros
}

// ---------------------------------------------------------------- convolution

// The shapes autograd gives convolution (core/ops_cnn.cc) against the
// reference: the kernel gradient (batch contracted, the output gradient as a
// stride-dilated kernel wider than the result: the transposed im2col), and
// the input gradient (lhs dilation), with padding cropped on the high side.
TEST(Convolution, GradientShapesMatchTheReference) {
  struct Case {
    std::vector<int64_t> lhs, rhs;
    bool kernel_grad;  // else input grad
    int64_t stride;
    std::vector<std::pair<int64_t, int64_t>> padding;
  };
  const std::vector<Case> cases = {
      {{4, 3, 9, 8}, {4, 5, 5, 4}, true, 2, {{1, 1}, {1, 0}}},     // 3x3 stride 2
      {{6, 2, 10, 10}, {6, 4, 10, 10}, true, 1, {{1, 1}, {1, 1}}},  // 3x3 stride 1
      {{2, 3, 4, 4}, {2, 2, 2, 2}, true, 2, {{0, -1}, {0, -1}}},    // 1x1 stride 2
      {{4, 5, 5, 4}, {5, 3, 3, 3}, false, 2, {{1, 2}, {1, 1}}},     // input grad, stride 2 (by phase)
      {{2, 2, 2, 2}, {2, 3, 1, 1}, false, 2, {{0, 1}, {0, 1}}},     // 1x1: phases with no tap
      {{1, 3, 4, 3}, {3, 2, 5, 4}, false, 3, {{4, 2}, {-1, 3}}},    // stride 3, cropped
  };
  for (DType t : {kF32, kF64}) {
    for (const Case& c : cases) {
      Module m;
      compiler::ConvDims d;
      d.input_spatial = d.kernel_spatial = d.output_spatial = {2, 3};
      if (c.kernel_grad) {
        d.input_batch = 1, d.input_feature = 0, d.kernel_input_feature = 0, d.kernel_output_feature = 1;
        d.output_batch = 1, d.output_feature = 0;
        d.rhs_dilation = {c.stride, c.stride};
      } else {
        d.kernel_input_feature = 0, d.kernel_output_feature = 1;
        d.lhs_dilation = {c.stride, c.stride};
      }
      d.padding = c.padding;
      auto* conv = m.Convolution(m.Parameter(Shape(t, c.lhs), "lhs"), m.Parameter(Shape(t, c.rhs), "rhs"), d);
      ASSERT_TRUE(compiler::Verify(m).ok()) << compiler::Verify(m);
      Literal a = Random(t, c.lhs), b = Random(t, c.rhs), fast, ref(conv->shape);
      ASSERT_TRUE(Eval(conv, {&a, &b}, &fast).ok());
      ASSERT_TRUE(EvalReference(*conv, {&a, &b}, 0, &ref).ok());
      std::vector<double> want;
      for (int64_t k = 0; k < ref.elements(); ++k) want.push_back(ref.GetDouble(k));
      ExpectNear(fast, want, Tolerance(t, 100), absl::StrCat(DTypeName(t), " ", Str(c.lhs), " x ", Str(c.rhs)));
    }
  }
}

// ---------------------------------------------------------------- errors

TEST(Errors, UnsupportedTypesGiveClearStatus) {
  Module m;
  // bf16/f16 are storage types: arithmetic runs in f32 and rounds once.
  auto* a = m.Parameter(Shape(DType::kBF16, {4}), "a");
  auto* add = m.Binary(Opcode::kAdd, a, a, kLoc);
  Literal x(Shape(DType::kBF16, {4})), out;
  for (int k = 0; k < 4; ++k) x.SetDouble(k, 1.5 * k);
  ASSERT_TRUE(Eval(add, {&x, &x}, &out).ok());
  EXPECT_EQ(out.GetDouble(3), 9.0);

  auto* i = m.Parameter(Shape(kI32, {4}), "i");
  Literal xi(Shape(kI32, {4}));
  absl::Status st = Eval(m.Unary(Opcode::kExponential, i, kLoc), {&xi}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stablehlo.exponential"), std::string::npos) << st;
  EXPECT_NE(st.message().find("samples/test_model.cc:42"), std::string::npos) << st;

  // Integer convolution is valid StableHLO that this build does not compute.
  auto* li = m.Parameter(Shape(kI32, {1, 1, 3, 3}), "li");
  compiler::ConvDims cd;
  cd.input_spatial = cd.kernel_spatial = cd.output_spatial = {2, 3};
  Literal l3(Shape(kI32, {1, 1, 3, 3}));
  st = Eval(m.Convolution(li, li, cd, kLoc), {&l3, &l3}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
}

TEST(Errors, MalformedInstructionsAreRejected) {
  Module m;
  auto* a = m.Parameter(Shape(kF32, {2, 3}), "a");
  auto* b = m.Parameter(Shape(kF32, {4, 5}), "b");
  Literal la = Random(kF32, {2, 3}), lb = Random(kF32, {4, 5}), out;

  // Collectives are not kernels.
  auto* ar = m.AllReduce(a, ReduceKind::kSum, {{0, 1}});
  EXPECT_EQ(Eval(ar, {&la}, &out).code(), absl::StatusCode::kInvalidArgument);
  // Wrong operand count, missing operand.
  auto* add = m.Binary(Opcode::kAdd, a, a);
  EXPECT_EQ(Eval(add, {&la}, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Eval(add, {&la, nullptr}, &out).code(), absl::StatusCode::kInvalidArgument);
  // Operand literal does not match the IR operand's type.
  EXPECT_EQ(Eval(add, {&la, &lb}, &out).code(), absl::StatusCode::kInvalidArgument);
  // Output buffer of the wrong type.
  Literal wrong(Shape(kF32, {3, 2}));
  EXPECT_EQ(EvalInstruction(*add, {&la, &la}, 0, &wrong).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EvalInstruction(*add, {&la, &la}, 0, nullptr).code(), absl::StatusCode::kInvalidArgument);
  // Contracting sizes differ.
  EXPECT_EQ(Eval(m.DotGeneral(a, b, Dims({}, {1}, {}, {0})), {&la, &lb}, &out).code(),
            absl::StatusCode::kInvalidArgument);
  // Dot dims out of range.
  Instruction* bad_dot = m.DotGeneral(a, a, Dims({}, {1}, {}, {1}));
  bad_dot->dot.rhs_contracting = {5};
  EXPECT_EQ(Eval(bad_dot, {&la, &la}, &out).code(), absl::StatusCode::kInvalidArgument);
  // Broadcast with mismatched sizes / bad dims.
  EXPECT_EQ(Eval(m.BroadcastInDim(a, {2, 4}, {0, 1}), {&la}, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Eval(m.BroadcastInDim(a, {2, 3}, {0, 0}), {&la}, &out).code(),
            absl::StatusCode::kInvalidArgument);
  // Reduce over a repeated dim; non-scalar init.
  auto* init = m.Parameter(Shape(kF32, {}), "init");
  Literal li = Scalar(kF32, 0);
  Instruction* red = m.Reduce(a, init, {1}, ReduceKind::kSum);
  red->dims = {1, 1};
  EXPECT_EQ(Eval(red, {&la, &li}, &out).code(), absl::StatusCode::kInvalidArgument);
  Instruction* red2 = m.Reduce(a, a, {1}, ReduceKind::kSum);
  EXPECT_EQ(Eval(red2, {&la, &la}, &out).code(), absl::StatusCode::kInvalidArgument);
  // Dynamic slice: float index, too large a slice, missing indices.
  auto* fi = m.Parameter(Shape(kF32, {}), "f");
  Literal lf = Scalar(kF32, 1);
  EXPECT_EQ(Eval(m.DynamicSlice(a, {fi, fi}, {1, 1}), {&la, &lf, &lf}, &out).code(),
            absl::StatusCode::kInvalidArgument);
  auto* ii = m.Parameter(Shape(kI32, {}), "i");
  Literal lidx = Scalar(kI32, 0);
  EXPECT_EQ(Eval(m.DynamicSlice(a, {ii, ii}, {3, 1}), {&la, &lidx, &lidx}, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Eval(m.DynamicSlice(a, {ii}, {1, 1}), {&la, &lidx}, &out).code(),
            absl::StatusCode::kInvalidArgument);
  // Transpose with a non-permutation (built by hand: the builder cannot size it).
  Instruction tr = *m.Transpose(a, {1, 0});
  tr.dims = {1, 1};
  Literal tout(tr.shape);
  EXPECT_EQ(EvalInstruction(tr, {&la}, 0, &tout).code(), absl::StatusCode::kInvalidArgument);
  // Iota dimension out of range; partition_id of a float type.
  EXPECT_EQ(Eval(m.Iota(Shape(kF32, {3}), 1), {}, &out).code(), absl::StatusCode::kInvalidArgument);
  Instruction* pid = m.PartitionId();
  pid->shape = Shape(kF32, {});
  EXPECT_EQ(Eval(pid, {}, &out).code(), absl::StatusCode::kInvalidArgument);
  // Subtract on predicates is not defined.
  auto* p = m.Parameter(Shape(kI1, {3}), "p");
  Literal lp = Random(kI1, {3});
  EXPECT_EQ(Eval(m.Binary(Opcode::kSubtract, p, p), {&lp, &lp}, &out).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardscope::runtime
