// Frontend overheads on the host clock: the cost of recording one lazy op,
// and of a cut whose graph is already compiled (lowering, fingerprint, cache
// hit, dispatch) for the mlp training step.
//   build/bench/lazy_bench
#include <benchmark/benchmark.h>
#include <malloc.h>

#include "core/shardscope.h"

namespace ss = shardscope;

namespace {

void Setup() {
  static bool once = [] {
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    return (bool)ss::Init({.num_hosts = 1, .chips_per_host = 1}).ok();
  }();
  (void)once;
}

// Recording one elementwise op: a node, a handle and a live-tensor entry.
void BM_TraceOneOp(benchmark::State& state) {
  Setup();
  ss::Tensor x = ss::Tensor::from_host(ss::Literal(ss::Shape(ss::DType::kF32, {64, 64})), "x");
  for (auto _ : state) {
    ss::Tensor y = ss::add(x, x);
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TraceOneOp);

// A whole mlp step (784-1024-1024-10, batch 64) traced and cut, compiled once
// before timing: what the host pays per step when the graph hits the cache.
void BM_MlpStepHostOverhead(benchmark::State& state) {
  Setup();
  ss::nn::Linear l1(784, 1024, "l1"), l2(1024, 1024, "l2"), l3(1024, 10, "l3");
  ss::optim::SGD opt(ss::parameters(l1, l2, l3), {.lr = 0.01});
  ss::Literal xs(ss::Shape(ss::DType::kF32, {64, 784}));
  ss::Literal ys(ss::Shape(ss::DType::kI32, {64}));
  auto step = [&] {
    ss::Tensor x = ss::Tensor::from_host(xs, "x"), y = ss::Tensor::from_host(ys, "y");
    ss::Tensor loss = ss::cross_entropy(l3(ss::relu(l2(ss::relu(l1(x))))), y);
    (void)ss::backward(loss);
    (void)opt.step();
    (void)ss::mark_step();
    return loss;
  };
  step();
  ss::GetClient().Synchronize();
  for (auto _ : state) {
    ss::Tensor loss = step();
    state.PauseTiming();
    ss::GetClient().Synchronize();  // device time is not host overhead
    state.ResumeTiming();
  }
}
BENCHMARK(BM_MlpStepHostOverhead)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
