// Collective bandwidth between virtual chips against plain memcpy on the same
// machine, side by side: each collective runs over a group of chips holding
// one buffer of 4 MiB (f32) each, through the runtime's kernels (the code the
// executor runs); the baseline copies the same bytes with memcpy. Counters, as
// rates (B/s): "in" the bytes all chips contribute per iteration, "out" the
// bytes all chips receive. A reduction reads every input whatever it returns,
// so reduce_scatter's "out" is small next to its "in". Run with the machine idle.
//
//   ./build/bench/collective_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/bench_main.h"
#include "compiler/literal.h"
#include "runtime/collectives.h"

namespace {

using shardscope::DType;
using shardscope::Literal;
using shardscope::Shape;
using shardscope::compiler::ReduceKind;

constexpr int64_t kElements = int64_t{1} << 20;  // 4 MiB of f32 per chip

struct Group {
  std::vector<Literal> in, out;
  std::vector<const Literal*> in_ptrs;
  std::vector<Literal*> out_ptrs;
  Group(int members, std::vector<int64_t> in_dims, std::vector<int64_t> out_dims) {
    for (int k = 0; k < members; ++k) {
      in.emplace_back(Shape(DType::kF32, in_dims));
      out.emplace_back(Shape(DType::kF32, out_dims));
      for (int64_t e = 0; e < in.back().elements(); ++e) in.back().as<float>()[e] = static_cast<float>(e % 7);
    }
    for (int k = 0; k < members; ++k) {
      in_ptrs.push_back(&in[k]);
      out_ptrs.push_back(&out[k]);
    }
  }
};

void SetBytes(benchmark::State& state, const Group& g) {
  int64_t in = 0, out = 0;
  for (const Literal& l : g.in) in += l.bytes();
  for (const Literal& l : g.out) out += l.bytes();
  state.counters["in"] = benchmark::Counter(static_cast<double>(in), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["out"] = benchmark::Counter(static_cast<double>(out), benchmark::Counter::kIsIterationInvariantRate);
}

// The baseline: every chip's output bytes copied once with memcpy.
void BM_Memcpy(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  Group g(members, {kElements}, {kElements});
  for (auto _ : state) {
    for (int k = 0; k < members; ++k) std::memcpy(g.out[k].data(), g.in[k].data(), g.in[k].bytes());
    benchmark::ClobberMemory();
  }
  SetBytes(state, g);
}

// all_reduce: the executor computes the sum once and copies it to the others.
void BM_AllReduce(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  Group g(members, {kElements}, {kElements});
  for (auto _ : state) {
    if (!shardscope::runtime::AllReduce(ReduceKind::kSum, g.in_ptrs, &g.out[0]).ok()) state.SkipWithError("all_reduce");
    for (int k = 1; k < members; ++k) std::memcpy(g.out[k].data(), g.out[0].data(), g.out[0].bytes());
    benchmark::ClobberMemory();
  }
  SetBytes(state, g);
}

void BM_AllGather(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  Group g(members, {kElements / members}, {kElements});
  for (auto _ : state) {
    if (!shardscope::runtime::AllGather(0, g.in_ptrs, &g.out[0]).ok()) state.SkipWithError("all_gather");
    for (int k = 1; k < members; ++k) std::memcpy(g.out[k].data(), g.out[0].data(), g.out[0].bytes());
    benchmark::ClobberMemory();
  }
  SetBytes(state, g);
}

void BM_ReduceScatter(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  Group g(members, {kElements}, {kElements / members});
  for (auto _ : state) {
    if (!shardscope::runtime::ReduceScatter(ReduceKind::kSum, 0, g.in_ptrs, g.out_ptrs).ok())
      state.SkipWithError("reduce_scatter");
    benchmark::ClobberMemory();
  }
  SetBytes(state, g);
}

void BM_AllToAll(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  Group g(members, {kElements / 1024, 1024}, {kElements / 1024, 1024});
  for (auto _ : state) {
    if (!shardscope::runtime::AllToAll(0, 0, g.in_ptrs, g.out_ptrs).ok()) state.SkipWithError("all_to_all");
    benchmark::ClobberMemory();
  }
  SetBytes(state, g);
}

void BM_CollectivePermute(benchmark::State& state) {
  const int members = static_cast<int>(state.range(0));
  Group g(members, {kElements}, {kElements});
  std::vector<std::pair<int64_t, int64_t>> ring;
  for (int k = 0; k < members; ++k) ring.push_back({k, (k + 1) % members});
  for (auto _ : state) {
    if (!shardscope::runtime::CollectivePermute(ring, g.in_ptrs, g.out_ptrs).ok()) state.SkipWithError("permute");
    benchmark::ClobberMemory();
  }
  SetBytes(state, g);
}

// Interleaved per group size, the baseline first.
BENCHMARK(BM_Memcpy)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllReduce)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllGather)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReduceScatter)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllToAll)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CollectivePermute)->Arg(2)->Arg(8)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) { return shardscope::bench::BenchmarkMain(argc, argv); }
