// The machine's speed now (see cpu_speed_probe.h).
#include "runtime/cpu_speed_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <tuple>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_format.h"
#include "compiler/ir.h"
#include "runtime/intra_op.h"
#include "runtime/kernels.h"

namespace shardscope::runtime {
namespace {

using compiler::Opcode;

Literal Filled(const Shape& s) {
  Literal l(s);
  float* p = l.as<float>();
  for (int64_t i = 0; i < l.elements(); ++i) p[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  return l;
}

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

double SpeedProbe::DistanceTo(const SpeedProbe& o) const {
  if (!measured() || !o.measured()) return std::numeric_limits<double>::infinity();
  return (std::abs(std::log(gemm_flops / o.gemm_flops)) + std::abs(std::log(stream_bytes / o.stream_bytes)) +
          std::abs(std::log(exp_ns / o.exp_ns)) + std::abs(std::log(reduce_ns / o.reduce_ns))) /
         4;
}

std::string SpeedProbe::Describe() const {
  return absl::StrFormat("GEMM %.1f GFLOP/s, stream %.1f GB/s, exp %.2f ns, reduce %.3f ns per element",
                         gemm_flops / 1e9, stream_bytes / 1e9, exp_ns, reduce_ns);
}

std::string SpeedProbe::RatiosTo(const SpeedProbe& base) const {
  return absl::StrFormat("GEMM %.2fx, stream %.2fx, exp %.2fx, reduce %.2fx as fast", gemm_flops / base.gemm_flops,
                         stream_bytes / base.stream_bytes, base.exp_ns / exp_ns, base.reduce_ns / reduce_ns);
}

std::string SpeedProbe::Json() const {
  return nlohmann::json({{"gemm_flops", gemm_flops},
                         {"stream_bytes", stream_bytes},
                         {"exp_ns", exp_ns},
                         {"reduce_ns", reduce_ns},
                         {"measured_at_unix_s", measured_at_unix_s}})
      .dump();
}

bool SpeedProbe::FromJson(const std::string& text, SpeedProbe* out) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  SpeedProbe p;
  // Each figure within what any machine could read (a damaged file's 1e300
  // would print a 300-digit ratio and match nothing).
  for (auto [key, field, low, high] : {std::tuple<const char*, double*, double, double>{"gemm_flops", &p.gemm_flops, 1e6, 1e16},
                                       {"stream_bytes", &p.stream_bytes, 1e6, 1e14},
                                       {"exp_ns", &p.exp_ns, 1e-4, 1e5},
                                       {"reduce_ns", &p.reduce_ns, 1e-5, 1e5}}) {
    if (!j.contains(key) || !j[key].is_number()) return false;
    const double v = j[key].get<double>();
    if (!(v >= low && v <= high)) return false;
    *field = v;
  }
  if (j.contains("measured_at_unix_s") && j["measured_at_unix_s"].is_number_integer())
    p.measured_at_unix_s = j["measured_at_unix_s"].get<int64_t>();
  *out = p;
  return true;
}

SpeedProbe SpeedProbe::Midpoint(const SpeedProbe& a, const SpeedProbe& b) {
  if (!a.measured()) return b;
  if (!b.measured()) return a;
  SpeedProbe m;
  m.gemm_flops = std::sqrt(a.gemm_flops) * std::sqrt(b.gemm_flops);  // no overflow
  m.stream_bytes = std::sqrt(a.stream_bytes) * std::sqrt(b.stream_bytes);  // no overflow
  m.exp_ns = std::sqrt(a.exp_ns) * std::sqrt(b.exp_ns);  // no overflow
  m.reduce_ns = std::sqrt(a.reduce_ns) * std::sqrt(b.reduce_ns);  // no overflow
  m.measured_at_unix_s = std::max(a.measured_at_unix_s, b.measured_at_unix_s);
  return m;
}

SpeedProbe MeasureSpeedProbe(int rounds) {
  // Sizes: the GEMM is compute-bound on one core (0.11 GFLOP, about half a
  // millisecond); the stream's 48 MiB of traffic exceed the caches; exp and
  // the reduce run long enough (a few hundred us) to outweigh a call's overhead.
  constexpr int64_t kGemm = 384, kStream = int64_t{1} << 22, kExp = int64_t{1} << 16, kReduce = int64_t{1} << 22;
  compiler::Module m;
  compiler::DotDims dd;
  dd.lhs_contracting = {1};
  dd.rhs_contracting = {0};
  auto* ga = m.Parameter(Shape(DType::kF32, {kGemm, kGemm}), "a");
  auto* gb = m.Parameter(Shape(DType::kF32, {kGemm, kGemm}), "b");
  auto* dot = m.DotGeneral(ga, gb, dd);
  auto* sa = m.Parameter(Shape(DType::kF32, {kStream}), "x");
  auto* sb = m.Parameter(Shape(DType::kF32, {kStream}), "y");
  auto* add = m.Binary(Opcode::kAdd, sa, sb);
  auto* ea = m.Parameter(Shape(DType::kF32, {kExp}), "e");
  auto* exp = m.Unary(Opcode::kExponential, ea);
  auto* ra = m.Parameter(Shape(DType::kF32, {kReduce}), "r");
  auto* sum = m.Reduce(ra, m.ScalarConstant(DType::kF32, 0), {0}, compiler::ReduceKind::kSum);
  const Literal lga = Filled(ga->shape), lgb = Filled(gb->shape), lsa = Filled(sa->shape), lsb = Filled(sb->shape),
                lea = Filled(ea->shape), lra = Filled(ra->shape), zero = Literal::Scalar(DType::kF32, 0);
  Literal gout(dot->shape), sout(add->shape), eout(exp->shape), rout(sum->shape);
  struct Kernel {
    const compiler::Instruction* op;
    std::vector<const Literal*> operands;
    Literal* out;
    std::vector<double> ns;
  };
  std::vector<Kernel> kernels = {{dot, {&lga, &lgb}, &gout, {}},
                                 {add, {&lsa, &lsb}, &sout, {}},
                                 {exp, {&lea}, &eout, {}},
                                 {sum, {&lra, &zero}, &rout, {}}};
  for (Kernel& k : kernels) (void)EvalInstruction(*k.op, k.operands, 0, k.out);  // warm: first touch, code
  // Interleaved, one call of each per round: a noisy moment of the machine
  // falls on all four alike.
  for (int r = 0; r < std::max(1, rounds); ++r)
    for (Kernel& k : kernels) {
      const int64_t t0 = ThreadCpuNs();
      (void)EvalInstruction(*k.op, k.operands, 0, k.out);  // valid by construction
      k.ns.push_back(static_cast<double>(std::max<int64_t>(1, ThreadCpuNs() - t0)));
    }
  SpeedProbe p;
  p.gemm_flops = 2.0 * kGemm * kGemm * kGemm / Median(kernels[0].ns) * 1e9;
  p.stream_bytes = 12.0 * kStream / Median(kernels[1].ns) * 1e9;
  p.exp_ns = Median(kernels[2].ns) / kExp;
  p.reduce_ns = Median(kernels[3].ns) / kReduce;
  p.measured_at_unix_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return p;
}

}  // namespace shardscope::runtime
