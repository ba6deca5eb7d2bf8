// Frontend overheads on the host clock: the cost of recording one lazy op,
// of a cut whose graph is already compiled (lowering, fingerprint, cache hit,
// dispatch) for the mlp and llama training steps, each part of the llama cut
// on its own, and the compile time of the llama training graph (a cache miss)
// on a 1x1 and a 2x2 mesh.
//   build/bench/lazy_bench [--benchmark_filter=Llama]
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "bench/bench_main.h"
#include "compiler/buffer_assignment.h"
#include "compiler/cost_model.h"
#include "compiler/fingerprint.h"
#include "compiler/fusion.h"
#include "compiler/parser.h"
#include "compiler/passes.h"
#include "compiler/spmd.h"
#include "compiler/text.h"
#include "core/shardscope.h"
#include "profiler/trace/recorder.h"
#include "runtime/client.h"
#include "samples/samples.h"

namespace ss = shardscope;

namespace {

// This thread's CPU time in seconds: robust to other processes sharing the
// cores, where wall time is not (the host work timed here is single-threaded).
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Which Init the frontend is on: tensors made before another Init are stale.
int g_chips = 0;
int g_generation = 0;

// (Re)initialises the frontend on `chips` chips of one host when it is not
// already on that many (or always, when `fresh`); false on failure.
bool InitChips(int chips, bool fresh = false) {
  static bool once = [] {
    shardscope::bench::KeepFreedMemory();
    return true;
  }();
  (void)once;
  if (!fresh && g_chips == chips && ss::Initialized()) return true;
  g_chips = 0;
  ++g_generation;
  if (!ss::Init({.num_hosts = 1, .chips_per_host = chips}).ok()) return false;
  g_chips = chips;
  return true;
}

void Setup() { InitChips(1); }

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

// ---------------------------------------------------------------------------
// The llama training graph: the one samples/llama.cc cuts every step (2
// layers, d_model 256, seq 128, batch 8; forward, backward, clipping, AdamW),
// traced by the sample's own code (samples::LlamaTrainingStep).

// Keeps what the benchmarks read back from a cut: the graphs compiled (IR
// text and fingerprint) and the cut's host slices summed by name ("trace" is
// collecting the pending tensors, capturing the call site and lowering to IR;
// "compile (cache hit)" is the fingerprint plus the cache lookup). Device
// slices are dropped on arrival.
class CutRecorder : public ss::trace::Recorder {
 public:
  using Recorder::Record;
  void Record(const ss::trace::GraphRecord& g) override {
    std::lock_guard<std::mutex> l(mu_);
    graphs_.push_back(g);
  }
  void Record(const ss::trace::SliceRecord& s) override {
    if (s.kind != ss::trace::SliceKind::kHost && s.kind != ss::trace::SliceKind::kCompile) return;
    std::lock_guard<std::mutex> l(mu_);
    ns_[s.name] += s.dur_ns;
  }
  std::vector<ss::trace::GraphRecord> graphs() {
    std::lock_guard<std::mutex> l(mu_);
    return graphs_;
  }
  // Host time under `name` since the last Reset, in ns.
  int64_t ns(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return ns_[name];
  }
  void Reset() {
    std::lock_guard<std::mutex> l(mu_);
    ns_.clear();
  }

 private:
  std::mutex mu_;
  std::vector<ss::trace::GraphRecord> graphs_;
  std::map<std::string, int64_t> ns_;
};

// Installs a recorder for the length of a scope.
struct Recording {
  explicit Recording(ss::trace::Recorder* r) { ss::trace::SetRecorder(r); }
  ~Recording() { ss::trace::SetRecorder(nullptr); }
};

ss::samples::SampleConfig LlamaConfig(int rows, int cols) {
  ss::samples::SampleConfig cfg;
  cfg.mesh = {rows, cols};
  // Data parallel over the whole mesh: at least one sequence per chip (64 on 8x8).
  cfg.llama_batch = std::max<int64_t>(cfg.llama_batch, int64_t{rows} * cols);
  cfg.steps = 1000000;  // the schedule's horizon only; rates are data, not graph
  return cfg;
}

// The frontend on rows*cols chips with a llama trainer whose graph is already
// compiled (its first cut done), so every later cut hits the cache.
struct LlamaSession {
  int rows = 0, cols = 0, generation = -1;
  std::unique_ptr<ss::samples::LlamaTrainingStep> trainer;
  int step = 0;
};

LlamaSession* WarmLlama(int rows, int cols, benchmark::State& state) {
  static LlamaSession session;
  if (session.trainer && session.rows == rows && session.cols == cols && session.generation == g_generation &&
      ss::Initialized())
    return &session;
  session = {};
  if (!InitChips(rows * cols)) {
    state.SkipWithError("Init failed");
    return nullptr;
  }
  auto t = ss::samples::LlamaTrainingStep::Create(LlamaConfig(rows, cols));
  if (!t.ok()) {
    state.SkipWithError(std::string(t.status().message()).c_str());
    return nullptr;
  }
  session.trainer = std::move(*t);
  session.rows = rows;
  session.cols = cols;
  session.generation = g_generation;
  if (auto s = session.trainer->Trace(session.step++); !s.ok() || !(s = ss::mark_step()).ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    session = {};
    return nullptr;
  }
  ss::GetClient().Synchronize();
  return &session;
}

// The llama training graph as the cut lowers it (parameters with their
// shardings), read back from the IR text the cut recorded on its compile.
struct LlamaGraph {
  std::unique_ptr<ss::compiler::Module> module;
  std::string fingerprint;
};

const LlamaGraph* CaptureLlamaGraph(int rows, int cols, benchmark::State& state) {
  static std::map<std::pair<int, int>, LlamaGraph> graphs;
  if (auto it = graphs.find({rows, cols}); it != graphs.end()) return &it->second;
  CutRecorder rec;
  {
    Recording on(&rec);
    if (!InitChips(rows * cols, /*fresh=*/true)) {
      state.SkipWithError("Init failed");
      return nullptr;
    }
    auto t = ss::samples::LlamaTrainingStep::Create(LlamaConfig(rows, cols));
    absl::Status s = t.ok() ? (*t)->Trace(0) : t.status();
    if (s.ok()) s = ss::mark_step();
    ss::GetClient().Synchronize();
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return nullptr;
    }
  }
  auto recorded = rec.graphs();
  if (recorded.size() != 1) {
    state.SkipWithError("expected one compiled graph from the llama step");
    return nullptr;
  }
  auto parsed = ss::compiler::ParseModule(recorded[0].ir_text);
  if (!parsed.ok()) {
    state.SkipWithError(std::string(parsed.status().message()).c_str());
    return nullptr;
  }
  LlamaGraph g;
  g.module = std::move(*parsed);
  g.fingerprint = ss::compiler::Fingerprint(*g.module);
  if (g.fingerprint != recorded[0].fingerprint) {
    state.SkipWithError("the parsed llama graph does not fingerprint as the traced one");
    return nullptr;
  }
  return &(graphs[{rows, cols}] = std::move(g));
}

// Host overhead of one cached llama step, recorder off (as in a run without
// a database): recording its ops (trace_ms) plus the cut (cut_ms: lowering,
// transfer of the batch, fingerprint + cache hit, dispatch); wall time, and
// the host thread's CPU time (*_cpu_ms). Device time is not counted: each
// step is waited for outside the timed region.
void BM_LlamaStepHostOverhead(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  LlamaSession* s = WarmLlama(rows, cols, state);
  if (!s) return;
  double trace_s = 0, cut_s = 0, trace_cpu = 0, cut_cpu = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = ThreadCpuSeconds();
    absl::Status st = s->trainer->Trace(s->step++);
    auto t1 = std::chrono::steady_clock::now();
    double c1 = ThreadCpuSeconds();
    if (st.ok()) st = ss::mark_step();
    auto t2 = std::chrono::steady_clock::now();
    double c2 = ThreadCpuSeconds();
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
    ss::GetClient().Synchronize();  // device time is not host overhead
    trace_s += std::chrono::duration<double>(t1 - t0).count();
    cut_s += std::chrono::duration<double>(t2 - t1).count();
    trace_cpu += c1 - c0;
    cut_cpu += c2 - c1;
    state.SetIterationTime(std::chrono::duration<double>(t2 - t0).count());
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["trace_ms"] = 1e3 * trace_s / n;
  state.counters["cut_ms"] = 1e3 * cut_s / n;
  state.counters["trace_cpu_ms"] = 1e3 * trace_cpu / n;
  state.counters["cut_cpu_ms"] = 1e3 * cut_cpu / n;
}
BENCHMARK(BM_LlamaStepHostOverhead)->ArgNames({"rows", "cols"})->Args({1, 1})->Args({2, 2})
    ->UseManualTime()->Unit(benchmark::kMillisecond);

// The cut of a cached llama step split by its own host slices (recorder on):
// lower_us (collect pending tensors + capture the call site + lower to IR),
// transfer_us (the batch to the chips), hit_us (Client::Compile on a hit:
// fingerprint + cache lookup), dispatch_us (enqueue the run). The iteration
// time is the whole mark_step.
void BM_LlamaCutParts(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  LlamaSession* s = WarmLlama(rows, cols, state);
  if (!s) return;
  CutRecorder rec;
  Recording on(&rec);
  for (auto _ : state) {
    state.PauseTiming();
    absl::Status st = s->trainer->Trace(s->step++);
    state.ResumeTiming();
    if (st.ok()) st = ss::mark_step();
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
    state.PauseTiming();
    ss::GetClient().Synchronize();
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["lower_us"] = rec.ns("trace") / n / 1e3;
  state.counters["transfer_us"] = rec.ns("transfer to device") / n / 1e3;
  state.counters["hit_us"] = rec.ns("compile (cache hit)") / n / 1e3;
  state.counters["dispatch_us"] = rec.ns("dispatch") / n / 1e3;
}
BENCHMARK(BM_LlamaCutParts)->ArgNames({"rows", "cols"})->Args({1, 1})->Args({2, 2})->Unit(benchmark::kMicrosecond);

// The fingerprint of the llama graph alone: print it without locations or
// names, then XXH3-128 the text (what every cut pays, hit or miss).
void BM_LlamaFingerprint(benchmark::State& state) {
  const LlamaGraph* g = CaptureLlamaGraph(1, 1, state);
  if (!g) return;
  for (auto _ : state) benchmark::DoNotOptimize(ss::compiler::Fingerprint(*g->module));
  state.counters["ops"] = static_cast<double>(g->module->instructions().size());
}
BENCHMARK(BM_LlamaFingerprint)->Unit(benchmark::kMicrosecond);

// Printing the graph's location-free text, which the fingerprint once hashed
// (it now hashes the instructions' fields directly): the baseline it replaced.
void BM_LlamaFingerprintPrintOnly(benchmark::State& state) {
  const LlamaGraph* g = CaptureLlamaGraph(1, 1, state);
  if (!g) return;
  for (auto _ : state)
    benchmark::DoNotOptimize(ss::compiler::PrintModule(*g->module, {.locations = false, .names = false}));
}
BENCHMARK(BM_LlamaFingerprintPrintOnly)->Unit(benchmark::kMicrosecond);

// Client::Compile of the llama graph on a warm cache: fingerprint + lookup.
// The lookup on its own is this minus BM_LlamaFingerprint.
void BM_LlamaCacheHit(benchmark::State& state) {
  const LlamaGraph* g = CaptureLlamaGraph(1, 1, state);
  if (!g) return;
  auto client = ss::runtime::Client::Create({.num_hosts = 1, .chips_per_host = 1});
  if (!client.ok() || !(*client)->Compile(*g->module).ok()) {
    state.SkipWithError("first compile failed");
    return;
  }
  for (auto _ : state) {
    auto r = (*client)->Compile(*g->module);
    if (!r.ok() || r->cache != ss::runtime::CacheOutcome::kMemoryHit) {
      state.SkipWithError("expected a cache hit");
      break;
    }
  }
}
BENCHMARK(BM_LlamaCacheHit)->Unit(benchmark::kMicrosecond);

// Compile time of the llama training graph, a cache miss: Client::Compile on
// a fresh client each iteration (made and dropped outside the timed region),
// so nothing is cached: fingerprint, Simplify, SPMD partitioning, printing
// the IR before and after, fusion, the memory plan and the cost of every op.
void BM_LlamaCompile(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const LlamaGraph* g = CaptureLlamaGraph(rows, cols, state);
  if (!g) return;
  for (auto _ : state) {
    state.PauseTiming();
    auto client = ss::runtime::Client::Create({.num_hosts = 1, .chips_per_host = rows * cols});
    if (!client.ok()) {
      state.SkipWithError("client");
      break;
    }
    state.ResumeTiming();
    auto r = (*client)->Compile(*g->module);
    state.PauseTiming();
    if (!r.ok() || r->cache != ss::runtime::CacheOutcome::kMiss) {
      state.SkipWithError(r.ok() ? "expected a cache miss" : std::string(r.status().message()).c_str());
      break;
    }
    client->reset();
    state.ResumeTiming();
  }
  state.counters["ops"] = static_cast<double>(g->module->instructions().size());
}
// On 8 and 64 chips too (the goal: 64 at most 1.2x of 8). The batch grows with
// the mesh (a sequence per chip); the graph the partitioner works on does not.
BENCHMARK(BM_LlamaCompile)->ArgNames({"rows", "cols"})->Args({1, 1})->Args({2, 2})->Args({2, 4})->Args({8, 8})
    ->Unit(benchmark::kMillisecond);

// The same compile by phase, calling the compiler's passes as Client::Compile
// does (counters: this thread's CPU ms per phase; the iteration time is the
// wall time of them all), so the figure above can be explained. A pass
// Client::Compile gains later must be added here too.
void BM_LlamaCompilePhases(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  const LlamaGraph* g = CaptureLlamaGraph(rows, cols, state);
  if (!g) return;
  auto model = ss::compiler::FindProfile("cpu");
  if (!model.ok()) {
    state.SkipWithError("no cpu profile");
    return;
  }
  ss::compiler::CostModel cost(*model);
  std::map<std::string, double> ms;
  auto lap = [&](const char* name, double& t) {
    double now = ThreadCpuSeconds();
    ms[name] += 1e3 * (now - t);
    t = now;
  };
  for (auto _ : state) {
    auto w0 = std::chrono::steady_clock::now();
    double t = ThreadCpuSeconds();
    benchmark::DoNotOptimize(ss::compiler::Fingerprint(*g->module));
    lap("fingerprint_cpu_ms", t);
    auto simplified = ss::compiler::Simplify(*g->module);
    lap("simplify_cpu_ms", t);
    auto spmd = ss::compiler::SpmdPartition(*simplified, rows * cols);
    lap("spmd_cpu_ms", t);
    if (!spmd.ok()) {
      state.SkipWithError(std::string(spmd.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(ss::compiler::PrintModule(*g->module));
    benchmark::DoNotOptimize(ss::compiler::PrintModule(*spmd->local));
    lap("print_cpu_ms", t);
    ss::compiler::FusionPlan fusion = ss::compiler::PlanFusion(*spmd->local);
    lap("fusion_cpu_ms", t);
    benchmark::DoNotOptimize(ss::compiler::PlanMemory(*spmd->local, &fusion));
    lap("memory_plan_cpu_ms", t);
    benchmark::DoNotOptimize(cost.ProgramCosts(*spmd->local, &fusion));
    lap("cost_cpu_ms", t);
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
  }
  for (const auto& [name, v] : ms) state.counters[name] = v / static_cast<double>(state.iterations());
}
BENCHMARK(BM_LlamaCompilePhases)->ArgNames({"rows", "cols"})->Args({1, 1})->Args({2, 2})->Args({2, 4})
    ->Args({8, 8})->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
