// Is a convolution slower inside a step than the calibration's benchmark of
// it says? (docs/simulate.md, "Not yet": the cnn's slow phase.) Per round,
// the cnn's forward convolution ([4,16,32,32] x [16,16,3,3], a chip's share of
// batch 32 on 8 chips) two ways:
//   executor_8chips_conv_us: timed on the device clock inside a program run
//     through the executor on 8 chips sharing the cores, each chip its own
//     operands, six convolutions chained with a tanh and an all-reduce every
//     second one (the calibration's chip-spread benchmark's setting);
//   isolated_conv_rate_us: what the cost model prices it at from the
//     calibration's convolution figure, measured now (operands cold, one
//     thread, the four shapes' median rate).
// Run it beside real runs of the cnn and compare both with the run's own
// forward convolutions (kernel_stats, shape f32[4,16,32,32], 18.1 MFLOP):
//   bash bench/conv_in_executor.sh build 8
// Argument: rounds (default 1).
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "compiler/cost_model.h"
#include "compiler/fusion.h"
#include "compiler/ir.h"
#include "runtime/cpu_op_benchmarks.h"
#include "runtime/executor.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace shardscope;
using namespace shardscope::runtime;

int main(int argc, char** argv) {
  // The heap as `shardscope run` keeps it (ui/cli/drivers.cc). Without this
  // each 256 KiB result was a fresh mmap whose page faults fell inside the
  // convolution's device time: 1.25x the isolated figure (session of
  // 2026-11-26), 1.0-1.05x with it, which is what a run's heap sees.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  mallopt(M_ARENA_MAX, 1);
  const int iters = argc > 1 ? std::atoi(argv[1]) : 1;
  const int chips = 8, cores = std::max(1u, std::thread::hardware_concurrency());
  TopologyOptions opts;
  opts.num_hosts = 1;
  opts.chips_per_host = chips;
  auto topology = Topology::Create(opts);
  if (!topology.ok()) {
    std::printf("no topology: %s\n", std::string(topology.status().message()).c_str());
    return 1;
  }
  compiler::Module m;
  const Shape xs(DType::kF32, {4, 16, 32, 32});
  auto* x = m.Parameter(xs, "x");
  auto* k = m.Parameter(Shape(DType::kF32, {16, 16, 3, 3}), "k");
  compiler::ConvDims d;
  d.input_spatial = {2, 3};
  d.kernel_spatial = {2, 3};
  d.output_spatial = {2, 3};
  d.window_strides = {1, 1};
  d.padding = {{1, 1}, {1, 1}};
  std::vector<int64_t> conv_ids;
  compiler::Instruction* h = x;
  std::vector<int64_t> everyone;
  for (int c = 0; c < chips; ++c) everyone.push_back(c);
  for (int r = 0; r < 6; ++r) {
    auto* c = m.Convolution(h, k, d);
    conv_ids.push_back(c->id);
    h = m.Unary(compiler::Opcode::kTanh, c);
    if (r % 2 == 1) h = m.AllReduce(h, compiler::ReduceKind::kSum, {everyone});
  }
  m.AddOutput(h);
  const compiler::Instruction* conv0 = nullptr;
  for (const auto& i : m.instructions())
    if (i->id == conv_ids[0]) conv0 = i.get();
  m.set_num_partitions(chips);
  const compiler::FusionPlan fusion = compiler::PlanFusion(m);
  ThreadPool pool(std::min(chips, cores));
  std::vector<Literal> xl, kl;
  for (int c = 0; c < chips; ++c) {
    xl.emplace_back(xs);
    kl.emplace_back(Shape(DType::kF32, {16, 16, 3, 3}));
    for (int64_t i = 0; i < xl.back().elements(); ++i) xl.back().as<float>()[i] = (i % 17) * 0.01f;
    for (int64_t i = 0; i < kl.back().elements(); ++i) kl.back().as<float>()[i] = (i % 13) * 0.01f;
  }
  std::vector<std::vector<const Literal*>> args;
  for (int c = 0; c < chips; ++c) args.push_back({&xl[c], &kl[c]});
  for (int it = 0; it < iters; ++it) {
    std::vector<double> t;
    for (int run = 0; run <= 6; ++run) {
      ScheduleInput timing;
      auto out = ExecuteProgram(m, **topology, pool, args, &timing, nullptr, &fusion);
      if (!out.ok()) {
        std::printf("failed: %s\n", std::string(out.status().message()).c_str());
        return 1;
      }
      if (run == 0) continue;
      for (int c = 0; c < chips; ++c)
        for (const DeviceOp& op : timing.per_device[c])
          if (std::find(conv_ids.begin(), conv_ids.end(), op.op_id) != conv_ids.end()) t.push_back(op.dur_ns);
    }
    std::vector<std::string> rows;
    OpClassPlan plan;
    plan.beside = false;
    const OpClassFigures f = MeasureOpClasses(plan, &rows);
    std::printf("executor_8chips_conv_us %.1f  isolated_conv_rate_us %.1f\n", MedianOf(t) / 1e3,
                compiler::InstructionFlops(*conv0) / f.conv_flops * 1e6);
  }
  return 0;
}
