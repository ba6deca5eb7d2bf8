// The chip-to-chip spread of the `cpu` profile (see cpu_spread_benchmark.h).
#include "runtime/cpu_spread_benchmark.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "compiler/cost_model.h"
#include "compiler/fusion.h"
#include "compiler/ir.h"
#include "runtime/executor.h"
#include "runtime/intra_op.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

namespace shardscope::runtime {
namespace {

using compiler::Instruction;
using compiler::Opcode;

Literal Filled(const Shape& s, float scale) {
  Literal l(s);
  float* p = l.as<float>();
  for (int64_t i = 0; i < l.elements(); ++i) p[i] = (static_cast<float>(i % 17) * 0.1f - 0.8f) * scale;
  return l;
}

// Segments of 0, 1, 2 and 4 GEMMs (each with its tanh), each ending in an
// all-reduce over every chip, twice: segment lengths from a few us to a
// couple of milliseconds, as the samples' are between their collectives, and
// a chip's weights (1 MiB) too big for the caches to keep across chips. Each
// segment with GEMMs also streams through a buffer of the chip's own
// (stream_elements), as the samples' optimizer and elementwise kernels do:
// the chips' buffers together exceed the last-level cache, so which chip
// finds its data evicted, and which streams beside another, spreads them as
// it spreads the samples' chips (GEMMs alone measured a tenth of their spread).
void BuildProgram(compiler::Module& m, const SpreadPlan& plan) {
  const Shape act(DType::kF32, {plan.rows, plan.width});
  auto* x = m.Parameter(act, "x");
  auto* w = m.Parameter(Shape(DType::kF32, {plan.width, plan.width}), "w");
  const Shape big_shape(DType::kF32, {std::max<int64_t>(1, plan.stream_elements)});
  Instruction* big = m.Parameter(big_shape, "big");
  auto* half = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 0.5), big_shape.dims, {});
  std::vector<int64_t> everyone;
  for (int c = 0; c < plan.chips; ++c) everyone.push_back(c);
  auto* mean = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 1.0 / plan.chips), act.dims, {});
  compiler::DotDims dd;
  dd.lhs_contracting = {1};
  dd.rhs_contracting = {0};
  Instruction* h = x;
  for (int round = 0; round < 2; ++round)
    for (int gemms : {0, 1, 2, 4}) {
      if (gemms == 0) h = m.Unary(Opcode::kTanh, m.Binary(Opcode::kMultiply, h, mean));
      for (int g = 0; g < gemms; ++g) h = m.Unary(Opcode::kTanh, m.DotGeneral(h, w, dd));
      if (gemms > 0 && plan.stream_elements > 0)
        big = m.Binary(Opcode::kAdd, m.Binary(Opcode::kMultiply, big, half), half);
      h = m.Binary(Opcode::kMultiply, m.AllReduce(h, compiler::ReduceKind::kSum, {everyone}), mean);
    }
  m.AddOutput(h);
  m.AddOutput(big);
  m.set_num_partitions(plan.chips);
}

}  // namespace

SpreadFigures MeasureChipSpread(const SpreadPlan& plan, std::vector<std::string>* rows) {
  SpreadFigures f;
  if (!plan.measure || plan.chips < 2) return f;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  rows->push_back(absl::StrFormat(
      "chip spread (%d chips on %d cores through the executor, device time per segment between all-reduces)",
      plan.chips, cores));
  TopologyOptions opts;
  opts.num_hosts = 1;
  opts.chips_per_host = plan.chips;
  auto topology = Topology::Create(opts);
  if (!topology.ok()) {
    rows->push_back(absl::StrFormat("  (no topology: %s; not measured)", topology.status().message()));
    return f;
  }
  compiler::Module m;
  BuildProgram(m, plan);
  const compiler::FusionPlan fusion = compiler::PlanFusion(m);
  ThreadPool pool(std::min(plan.chips, cores));  // as Client::Create sizes it
  // Each chip its own operands, as each holds its own shard and weights.
  std::vector<Literal> xs, ws, bigs;
  for (int c = 0; c < plan.chips; ++c) {
    xs.push_back(Filled(Shape(DType::kF32, {plan.rows, plan.width}), 1.0f));
    ws.push_back(Filled(Shape(DType::kF32, {plan.width, plan.width}), 1.0f / static_cast<float>(plan.width)));
    bigs.push_back(Filled(Shape(DType::kF32, {std::max<int64_t>(1, plan.stream_elements)}), 1.0f));
  }
  std::vector<std::vector<const Literal*>> args;
  for (int c = 0; c < plan.chips; ++c) args.push_back({&xs[c], &ws[c], &bigs[c]});
  const double e = compiler::ExpectedMaxOfNormals(plan.chips);
  // Per segment, z = (slowest - mean) / (e(n) sqrt(mean)), an estimate of sqrt(v).
  std::vector<double> estimates;
  double short_wait = 0, long_wait = 0, short_mean = 0, long_mean = 0;
  int shorts = 0, longs = 0;
  for (int run = 0; run <= plan.runs; ++run) {
    ScheduleInput timing;
    auto out = ExecuteProgram(m, **topology, pool, args, &timing, nullptr, &fusion);
    if (!out.ok()) {
      rows->push_back(absl::StrFormat("  (the program failed: %s; not measured)", out.status().message()));
      return SpreadFigures{};
    }
    if (run == 0) continue;  // warm-up: first touches, the GEMM backend's buffers
    // Each chip's device time per segment (its kernels since the last collective).
    std::vector<std::vector<double>> seg(plan.chips);
    for (int c = 0; c < plan.chips; ++c) {
      double t = 0;
      for (const DeviceOp& op : timing.per_device[c]) {
        if (op.collective >= 0) {
          seg[c].push_back(t);
          t = 0;
        } else {
          t += static_cast<double>(op.dur_ns);
        }
      }
    }
    for (size_t s = 0; s < seg[0].size(); ++s) {
      double sum = 0, mx = 0;
      for (int c = 0; c < plan.chips; ++c) {
        sum += seg[c][s];
        mx = std::max(mx, seg[c][s]);
      }
      const double mean_t = sum / plan.chips;
      if (mean_t > 0) estimates.push_back((mx - mean_t) / (e * std::sqrt(mean_t)));
      ++f.segments;
      if (s % 4 == 0) short_wait += mx - mean_t, short_mean += mean_t, ++shorts;
      if (s % 4 == 3) long_wait += mx - mean_t, long_mean += mean_t, ++longs;
    }
  }
  if (estimates.empty()) return f;
  // The mean of the middle 80%: a chip that lost its core to another process
  // for a moment must not set the figure, nor a segment timed too short to
  // show any spread. v is its square.
  std::sort(estimates.begin(), estimates.end());
  const size_t cut = estimates.size() / 10;
  double z = 0;
  for (size_t k = cut; k < estimates.size() - cut; ++k) z += estimates[k];
  z /= static_cast<double>(estimates.size() - 2 * cut);
  f.variance_ns = z * z;
  f.chips = plan.chips;
  if (shorts > 0 && longs > 0)
    for (auto [label, wait, mean_t, k] : {std::tuple<const char*, double, double, int>{"shortest", short_wait, short_mean, shorts},
                                         {"longest", long_wait, long_mean, longs}})
      rows->push_back(absl::StrFormat("  %-8s segments: mean %9.1f us, slowest chip %7.1f us later (%4.1f%%)", label,
                                      mean_t / k / 1e3, wait / k / 1e3, 100 * wait / std::max(mean_t, 1.0)));
  rows->push_back(absl::StrFormat(
      "  variance rate v = %.0f ns (sd of a segment of T: sqrt(v T); %d segments, the middle 80%%)", f.variance_ns,
      f.segments));
  return f;
}

HostStalls MeasureHostStalls(double seconds, std::vector<std::string>* rows) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  struct Core {
    int64_t work_ns = 0, stall_ns = 0;
    long stalls = 0;
  };
  std::vector<Core> out(cores);
  std::vector<std::thread> threads;
  for (int c = 0; c < cores; ++c)
    threads.emplace_back([&, c] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(c, &set);
      pthread_setaffinity_np(pthread_self(), sizeof set, &set);
      // Units of about 10 us on a 64 KiB buffer: short beside a stall, long
      // beside the clock's reads.
      std::vector<float> buffer(16384, 1.0f);
      std::vector<int64_t> units;
      units.reserve(static_cast<size_t>(seconds * 2e5) + 16);
      const int64_t end = ThreadCpuNs() + static_cast<int64_t>(seconds * 1e9);
      float carry = 0;
      for (int64_t t = ThreadCpuNs(); t < end;) {
        for (float& x : buffer) x = x * 0.999f + carry;
        carry = buffer[c] * 1e-9f;
        const int64_t now = ThreadCpuNs();
        units.push_back(now - t);
        t = now;
      }
      if (units.empty()) return;
      std::vector<int64_t> sorted = units;
      std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
      const int64_t median = sorted[sorted.size() / 2];
      Core& r = out[c];
      for (int64_t u : units) {
        r.work_ns += u;
        if (u - median >= kStallNs) ++r.stalls, r.stall_ns += u - median;
      }
      if (carry == 12345) r.work_ns += 1;  // keeps the loop's work
    });
  for (auto& t : threads) t.join();
  int64_t work = 0, stall = 0;
  long stalls = 0;
  for (const Core& r : out) work += r.work_ns, stall += r.stall_ns, stalls += r.stalls;
  HostStalls h;
  if (work <= 0) return h;
  h.per_s = stalls / (work / 1e9);
  h.mean_ns = stalls > 0 ? static_cast<double>(stall) / stalls : 0;
  if (rows)
    rows->push_back(absl::StrFormat(
        "host stalls (every core working %.1f s, units of about 10 us): %ld of %d us or more, %.2f a core-second, "
        "mean %.2f ms (%.2f%% of the time)",
        seconds, stalls, kStallNs / 1000, h.per_s, h.mean_ns / 1e6, 100.0 * stall / work));
  return h;
}

}  // namespace shardscope::runtime
