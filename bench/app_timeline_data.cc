// Writes a large run for the desktop app's timeline bench (issue 14, "Level
// of detail"): through the real store::Writer, C chips on H hosts (default
// 64 on 8), about N slices in all (default 10M). It is SYNTHETIC and says so
// in runs.sample: one llama-like training step (per layer a forward fusion,
// attention, an all-gather of the layer's weights, a backward pair and a
// reduce-scatter; then the optimizer) replayed step after step with +-10%
// jitter on every duration, each chip arriving at every collective at its
// own time and the collective starting when the last arrives (as the
// runtime's Scheduler does). Each host has a main thread (mark_step with its
// trace, compile and dispatch), every step's program launch is an
// executions row, and every chip samples hbm_bytes_in_use and
// collective_bytes_sent counters.
//
//   build/bench/app_timeline_data --out PATH [--slices N] [--chips C] [--hosts H]
//
// bench/app_timeline_bench.sh then opens the file in build/shardscope-ui
// under Xvfb and reports open time, memory, frame times and idle CPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <malloc.h>

#include "absl/strings/str_cat.h"
#include "store/writer.h"

namespace ss = shardscope;
using namespace ss::trace;

namespace {

struct Op {
  std::string name;
  SliceKind kind;
  int64_t dur_ns;
  int64_t bytes = 0;
};

// One chip's step: kLayers layers forward and backward, then the optimizer.
std::vector<Op> LlamaLikeStep() {
  constexpr int kLayers = 16;
  std::vector<Op> ops;
  for (int l = 0; l < kLayers; ++l) {
    ops.push_back({absl::StrCat("all-gather.w", l), SliceKind::kCollective, 180'000, 8 << 20});
    ops.push_back({absl::StrCat("fusion.rmsnorm.", l), SliceKind::kCompute, 40'000});
    ops.push_back({absl::StrCat("dot.qkv.", l), SliceKind::kCompute, 260'000});
    ops.push_back({absl::StrCat("fusion.attention.", l), SliceKind::kCompute, 420'000});
    ops.push_back({absl::StrCat("dot.mlp.", l), SliceKind::kCompute, 520'000});
  }
  for (int l = kLayers - 1; l >= 0; --l) {
    ops.push_back({absl::StrCat("dot.mlp.grad.", l), SliceKind::kCompute, 900'000});
    ops.push_back({absl::StrCat("fusion.attention.grad.", l), SliceKind::kCompute, 700'000});
    ops.push_back({absl::StrCat("reduce-scatter.g", l), SliceKind::kCollective, 200'000, 8 << 20});
    ops.push_back({absl::StrCat("copy.", l), SliceKind::kTransfer, 30'000, 1 << 20});
  }
  for (int i = 0; i < 8; ++i) ops.push_back({absl::StrCat("fusion.adamw.", i), SliceKind::kCompute, 90'000});
  return ops;
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory in the heap (MACHINE-NOTES, "Two traps").
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  std::string out;
  int64_t total = 10'000'000;
  int chips = 64, hosts = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--out") out = argv[i + 1];
    else if (a == "--slices") total = std::atoll(argv[i + 1]);
    else if (a == "--chips") chips = std::atoi(argv[i + 1]);
    else if (a == "--hosts") hosts = std::atoi(argv[i + 1]);
  }
  if (out.empty() || chips <= 0 || hosts <= 0 || chips % hosts != 0) {
    std::fprintf(stderr, "usage: app_timeline_data --out PATH [--slices N] [--chips C] [--hosts H (divides C)]\n");
    return 64;
  }
  const std::vector<Op> step = LlamaLikeStep();
  const int64_t per_step = static_cast<int64_t>(step.size()) * chips + 4 * hosts;
  const int steps = static_cast<int>(std::max<int64_t>(1, total / per_step));
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((out + suffix).c_str());
  auto w = ss::store::Writer::Open(out);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", std::string(w.status().message()).c_str());
    return 1;
  }
  RunRecord run;
  run.sample = "app_timeline_data (synthetic: a llama-like step replayed with +-10% jitter)";
  run.mesh = absl::StrCat(chips, "x1");
  run.mesh_axes = "data";
  run.sharding = "fsdp";
  run.config_json = absl::StrCat(R"({"synthetic":true,"steps":)", steps, "}");
  run.topology = absl::StrCat(hosts, " hosts x ", chips / hosts, " chips");
  run.num_hosts = hosts;
  run.num_devices = chips;
  auto run_id = (*w)->StartRun(run);
  if (!run_id.ok()) {
    std::fprintf(stderr, "%s\n", std::string(run_id.status().message()).c_str());
    return 1;
  }
  for (int h = 0; h < hosts; ++h) {
    (*w)->Record(HostRecord{h, absl::StrCat("host", h)});
    TrackRecord t;
    t.track_id = 100'000 + h;
    t.name = absl::StrCat("host ", h, " / main");
    t.clock = Clock::kHost;
    t.host_id = h;
    t.thread_name = "main";
    (*w)->Record(t);
  }
  for (int c = 0; c < chips; ++c) {
    const int host = c / (chips / hosts);
    (*w)->Record(DeviceRecord{c, host, absl::StrCat("[", c, "]"), int64_t{32} << 30, 275e12});
    TrackRecord t;
    t.track_id = 1 + c;
    t.name = absl::StrCat("chip ", c);
    t.clock = Clock::kDevice;
    t.device_id = c;
    t.host_id = host;
    (*w)->Record(t);
  }

  std::mt19937_64 rng(14);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  auto jittered = [&](int64_t ns) { return static_cast<int64_t>(ns * jitter(rng)); };
  const auto started = std::chrono::steady_clock::now();
  int64_t slice_id = 1, flow_id = 1, written = 0;
  std::vector<int64_t> free_at(chips, 0), arrive(chips);
  int64_t host_t = 2'000'000;  // the host's clock: tracing starts after setup
  for (int s = 0; s < steps; ++s) {
    // The host traces and launches the step on every host thread alike.
    const int64_t trace_ns = jittered(6'000'000), compile_ns = s == 0 ? 250'000'000 : jittered(40'000);
    const int64_t launch = host_t + trace_ns + compile_ns;
    for (int h = 0; h < hosts; ++h) {
      const int64_t track = 100'000 + h;
      auto host_slice = [&](const char* name, SliceKind kind, int64_t start, int64_t dur, int depth, int64_t parent) {
        SliceRecord r;
        r.slice_id = slice_id++;
        r.track_id = track;
        r.start_ns = start;
        r.dur_ns = dur;
        r.depth = depth;
        r.parent_id = parent;
        r.name = name;
        r.kind = kind;
        r.step = s;
        r.graph_id = 1;
        (*w)->Record(r);
        ++written;
        return r.slice_id;
      };
      const int64_t root = host_slice("mark_step", SliceKind::kHost, host_t, trace_ns + compile_ns + 30'000, 0, -1);
      host_slice("trace", SliceKind::kHost, host_t, trace_ns, 1, root);
      host_slice(s == 0 ? "compile" : "compile (cache hit)", SliceKind::kCompile, host_t + trace_ns, compile_ns, 1, root);
      host_slice("dispatch", SliceKind::kHost, launch, 30'000, 1, root);
    }
    ExecutionRecord e;
    e.execution_id = s + 1;
    e.step = s;
    e.graph_id = 1;
    e.cache = s == 0 ? "miss" : "memory_hit";
    e.input_signature = "[]";
    e.cause = "mark_step";
    e.host_start_ns = launch;
    e.host_dur_ns = 30'000;
    (*w)->Record(e);
    if (s == 0) {
      CompilationRecord c;
      c.compile_id = 1;
      c.graph_id = 1;
      c.cache = "miss";
      c.cause_kind = "first_compile";
      c.duration_ns = compile_ns;
      c.call_site = "app_timeline_data";
      c.host_start_ns = host_t + trace_ns;
      (*w)->Record(c);
    }
    // The chips: each starts when it is free and the program is launched.
    std::vector<int64_t> t(chips);
    for (int c = 0; c < chips; ++c) t[c] = std::max(free_at[c], launch);
    int64_t peak = 0;
    for (const Op& op : step) {
      if (op.kind == SliceKind::kCollective) {
        for (int c = 0; c < chips; ++c) arrive[c] = t[c];
        const int64_t start = *std::max_element(arrive.begin(), arrive.end());
        const int64_t dur = jittered(op.dur_ns);
        for (int c = 0; c < chips; ++c) {
          SliceRecord r;
          r.slice_id = slice_id++;
          r.track_id = 1 + c;
          r.start_ns = start;
          r.dur_ns = dur;
          r.name = op.name;
          r.kind = op.kind;
          r.step = s;
          r.graph_id = 1;
          r.flow_id = flow_id;
          r.bytes = op.bytes;
          r.arrival_ns = arrive[c];
          (*w)->Record(r);
          t[c] = start + dur;
        }
        ++flow_id;
        written += chips;
        continue;
      }
      for (int c = 0; c < chips; ++c) {
        SliceRecord r;
        r.slice_id = slice_id++;
        r.track_id = 1 + c;
        r.start_ns = t[c];
        r.dur_ns = jittered(op.dur_ns);
        r.name = op.name;
        r.kind = op.kind;
        r.step = s;
        r.graph_id = 1;
        r.bytes = op.bytes;
        (*w)->Record(r);
        t[c] += r.dur_ns;
        peak = std::max(peak, t[c]);
      }
      written += chips;
    }
    for (int c = 0; c < chips; ++c) {
      free_at[c] = t[c];
      // Counters on the host clock, as the executor samples them.
      (*w)->Record(CounterRecord{c, "hbm_bytes_in_use", launch, 12e9 + 1e8 * (c % 8)});
      (*w)->Record(CounterRecord{c, "hbm_bytes_in_use", (launch + t[c]) / 2, 21e9 + 1e8 * (c % 8) * jitter(rng)});
      (*w)->Record(CounterRecord{c, "collective_bytes_sent", t[c], double(s + 1) * 32 * (8 << 20)});
    }
    StepRecord st;
    st.step = s;
    st.wall_ns = peak - host_t;
    (*w)->Record(st);
    // The host traces the next step while the chips run this one, but no
    // further: it waits for this step's results (a queue one program deep).
    host_t = std::max(launch + 30'000 + jittered(1'000'000), peak - trace_ns / 2);
  }
  if (auto st = (*w)->EndRunAndCheck(); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  w->reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("wrote %s: run %lld, %d chips on %d hosts, %d steps, %lld slices (synthetic: a llama-like step "
              "replayed with +-10%% jitter) in %.1f s\n",
              out.c_str(), static_cast<long long>(*run_id), chips, hosts, steps, static_cast<long long>(written), s);
  return 0;
}
