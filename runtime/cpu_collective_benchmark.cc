// The executor's collectives measured (see cpu_collective_benchmark.h).
#include "runtime/cpu_collective_benchmark.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "compiler/ir.h"
#include "runtime/collectives.h"
#include "runtime/cpu_op_benchmarks.h"
#include "runtime/intra_op.h"
#include "runtime/kernels.h"

namespace shardscope::runtime {
namespace {

using compiler::CollectiveKind;
using compiler::Instruction;
using compiler::Module;

constexpr CollectiveKind kKinds[compiler::kMeasuredCollectiveKinds] = {
    CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
    CollectiveKind::kAllToAll};
constexpr const char* kNames[compiler::kMeasuredCollectiveKinds] = {"all_reduce", "all_gather",
                                                                    "reduce_scatter", "all_to_all"};

// How many multiples of one member's operand a kind's traffic is for a group
// of n (InMemoryCollectiveBytes with CollectiveBytes: all_gather's is its
// result, n operands).
double TrafficPerOperandByte(CollectiveKind kind, int n) {
  return compiler::InMemoryCollectiveBytes(kind, 1, n) * (kind == CollectiveKind::kAllGather ? n : 1);
}

// One kind at one amount of traffic: its instruction, and copies of every
// member's operand and result to rotate over, each call finding them evicted.
struct Case {
  std::unique_ptr<Module> module;
  const Instruction* op = nullptr;
  double traffic = 0;                         // InMemoryCollectiveBytes of `op`, as the cost model counts it
  std::vector<std::vector<Literal>> in, out;  // [copy][member]

  Case(CollectiveKind kind, double traffic_goal, const CollectivePlan& plan)
      : module(std::make_unique<Module>()) {
    const int n = plan.members;
    // A multiple of n elements, so that reduce_scatter and all_to_all split evenly.
    const double elements = traffic_goal / TrafficPerOperandByte(kind, n) / 4;
    const int64_t e = std::max<int64_t>(1, std::llround(elements / n)) * n;
    auto* x = module->Parameter(Shape(DType::kF32, {e}), "x");
    std::vector<int64_t> everyone;
    for (int m = 0; m < n; ++m) everyone.push_back(m);
    switch (kind) {
      case CollectiveKind::kAllReduce:
        op = module->AllReduce(x, compiler::ReduceKind::kSum, {everyone});
        break;
      case CollectiveKind::kAllGather:
        op = module->AllGather(x, 0, {everyone});
        break;
      case CollectiveKind::kReduceScatter:
        op = module->ReduceScatter(x, 0, compiler::ReduceKind::kSum, {everyone});
        break;
      default:
        op = module->AllToAll(x, 0, 0, n, {everyone});
        break;
    }
    module->set_num_partitions(n);
    traffic = compiler::InMemoryCollectiveBytes(kind, compiler::CollectiveBytes(*op), n);
    const int64_t per_copy = n * (x->shape.bytes() + op->shape.bytes());
    const int64_t copies =
        std::clamp<int64_t>((plan.cold_bytes + per_copy - 1) / std::max<int64_t>(per_copy, 1), 1, 64);
    for (int64_t c = 0; c < copies; ++c) {
      in.emplace_back();
      out.emplace_back();
      for (int m = 0; m < n; ++m) {
        Literal l(x->shape);
        float* p = l.as<float>();
        for (int64_t i = 0; i < e; ++i) p[i] = static_cast<float>((i + m) % 17) * 0.1f - 0.8f;
        in.back().push_back(std::move(l));
        out.back().emplace_back(op->shape);
      }
    }
  }
  int copies() const { return static_cast<int>(in.size()); }
  double Call(int c) {
    std::vector<const Literal*> ins;
    std::vector<Literal*> outs;
    std::vector<int64_t> members;
    for (size_t m = 0; m < in[c].size(); ++m) {
      ins.push_back(&in[c][m]);
      outs.push_back(&out[c][m]);
      members.push_back(static_cast<int64_t>(m));
    }
    const int64_t t0 = ThreadCpuNs();
    (void)RunCollective(*op, members, ins, outs);  // valid by construction
    return static_cast<double>(ThreadCpuNs() - t0);
  }
};

}  // namespace

compiler::CollectiveTimes MeasureCollectives(const CollectivePlan& plan, std::vector<std::string>* rows) {
  compiler::CollectiveTimes t{};
  if (!plan.measure || plan.members < 2) return t;
  rows->push_back(absl::StrFormat(
      "collectives (%d members, f32, operands and results cold, one thread, median, kinds interleaved): "
      "time, and GB/s of the traffic the cost model counts",
      plan.members));
  const int points = std::clamp(plan.points, 1, compiler::kCollectivePoints);
  for (int p = 0; p < points; ++p) {
    // The kinds of one point interleaved: a noisy moment falls on all of them alike.
    std::vector<Case> cases;
    for (CollectiveKind kind : kKinds) cases.emplace_back(kind, compiler::kCollectiveTraffic[p], plan);
    for (Case& c : cases)  // first touch of the results' pages, untimed
      for (int k = 0; k < c.copies(); ++k) c.Call(k);
    std::vector<std::vector<double>> ns(cases.size());
    for (int r = 0; r < std::max(1, plan.rounds); ++r)
      for (size_t k = 0; k < cases.size(); ++k) ns[k].push_back(cases[k].Call(r % cases[k].copies()));
    std::string line = absl::StrFormat("  %7.2f MiB:", compiler::kCollectiveTraffic[p] / (1 << 20));
    for (size_t k = 0; k < cases.size(); ++k) {
      // At the nominal point: the case's own traffic differs by its rounding to whole elements.
      const double at_point = MedianOf(ns[k]) * compiler::kCollectiveTraffic[p] / cases[k].traffic;
      // More traffic never takes less time: a noisy point would bend the interpolation back.
      t[k][p] = p > 0 ? std::max(at_point, t[k][p - 1]) : at_point;
      line += absl::StrFormat("  %s %9.1f us %6.2f GB/s", kNames[k], t[k][p] / 1e3,
                              compiler::kCollectiveTraffic[p] / t[k][p]);
    }
    rows->push_back(line);
  }
  return t;
}

}  // namespace shardscope::runtime
