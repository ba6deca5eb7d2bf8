// What full timeline capture costs a training run: the llama sample's step on
// a 2x2 mesh (dp), recorded through Recording into a real store::Writer (its
// thread writing as the run goes; the final flush and the run's end
// included), with --trace kernels against --trace off, in interleaved pairs
// (each pair's order alternates, so drift hits both modes alike). Each run is
// a fresh recording of --steps steps; the time counted runs from the moment
// step 0's loss is read (the first compile behind it, the same in both modes)
// to Finish returning. Reports each pair's ratio kernels/off of wall time
// and of process CPU time (every thread: the chips, the host, the writer),
// their means with a 95% confidence interval (Student's t), and the slices
// and file bytes of a kernels run. Goal (issue 14): the wall ratio's upper
// bound at most 1.03.
//
//   build/bench/trace_cost_bench [--pairs 20] [--steps 6] [--mesh 2x2] [--dir /tmp]
//
// OPENBLAS_CORETYPE, set on these machines, halves OpenBLAS: the program
// re-executes itself without it (MACHINE-NOTES, "Two traps").
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_main.h"
#include "core/shardscope.h"
#include "profiler/trace/capture.h"
#include "record/recording.h"
#include "samples/samples.h"
#include "store/reader.h"

namespace ss = shardscope;

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU time of every thread of the process, seconds.
double ProcessCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
double T95(int df) {
  static const double kTable[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                  2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080,
                                  2.074, 2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return NAN;
  if (df <= 30) return kTable[df];
  return 1.960 + 2.4 / df;  // within 0.002 of the exact value beyond 30
}

struct Interval {
  double mean = 0, lo = 0, hi = 0;
};
Interval MeanCi(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  Interval r;
  for (double x : v) r.mean += x / n;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  const double half = T95(static_cast<int>(v.size()) - 1) * std::sqrt(ss / (n - 1) / n);
  r.lo = r.mean - half;
  r.hi = r.mean + half;
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Measured {
  double wall = 0, cpu = 0;   // from step 0's loss to Finish
  double whole_wall = 0;      // from Start to Finish
  int64_t slices = 0, file_bytes = 0;
};

struct Options {
  int pairs = 20, steps = 6;
  std::vector<int64_t> mesh = {2, 2};
  std::string dir = "/tmp";
};

void RemoveDb(const std::string& db) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

// One fresh recorded run of the llama sample under `detail`.
Measured RunOnce(const Options& o, ss::trace::SliceDetail detail, int k) {
  const std::string db = absl::StrCat(o.dir, "/trace_cost_bench_", getpid(), "_", k, ".db");
  RemoveDb(db);
  auto axes = ss::samples::LlamaMeshAxes("dp");
  Measured m;
  const double t0 = Now();
  ss::RecordingOptions ro;
  ro.db = db;
  ro.workload = "llama";
  ro.mesh = o.mesh;
  if (axes.ok()) ro.mesh_axes = *axes;
  ro.sharding = "dp";
  ro.recompile_notices = false;
  ro.trace = detail;
  auto rec = ss::Recording::Start(ro);
  if (!rec.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(rec.status().message()).c_str());
    std::exit(1);
  }
  ss::samples::SampleConfig cfg;
  cfg.mesh = o.mesh;
  cfg.steps = o.steps;
  cfg.eval_every = 0;
  double start_wall = 0, start_cpu = 0;
  cfg.on_step = [&](int step, double) {
    if (step == 0) {
      start_wall = Now();
      start_cpu = ProcessCpu();
    }
  };
  auto result = ss::samples::Find("llama")->run(cfg);
  if (!result.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(result.status().message()).c_str());
    std::exit(1);
  }
  if (absl::Status s = (*rec)->Finish(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
  const double end = Now();
  m.wall = end - start_wall;
  m.cpu = ProcessCpu() - start_cpu;
  m.whole_wall = end - t0;
  rec->reset();
  struct stat st {};
  if (stat(db.c_str(), &st) == 0) m.file_bytes = st.st_size;
  if (auto r = ss::store::Reader::Open(db); r.ok())
    if (auto q = r->Query("SELECT COUNT(*) AS n FROM slices"); q.ok()) m.slices = q->Int(0, "n");
  RemoveDb(db);
  return m;
}

int Usage(const char* why) {
  std::fprintf(stderr, "error: %s\nusage: trace_cost_bench [--pairs N>=2] [--steps N>=2] [--mesh RxC] [--dir DIR]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
    unsetenv("OPENBLAS_CORETYPE");  // read when OpenBLAS loads: only a fresh process sees it gone
    execv("/proc/self/exe", argv);
  }
  ss::bench::KeepFreedMemory();
  mallopt(M_ARENA_MAX, 1);  // as `shardscope run` does (ui/cli/drivers.cc)
  Options o;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    if (k + 1 >= argc) return Usage(("missing value after " + a).c_str());
    const std::string v = argv[++k];
    if (a == "--pairs") {
      if (!absl::SimpleAtoi(v, &o.pairs) || o.pairs < 2) return Usage("--pairs must be at least 2");
    } else if (a == "--steps") {
      if (!absl::SimpleAtoi(v, &o.steps) || o.steps < 2) return Usage("--steps must be at least 2");
    } else if (a == "--mesh") {
      std::vector<std::string> p = absl::StrSplit(v, 'x');
      if (p.size() != 2 || !absl::SimpleAtoi(p[0], &o.mesh[0]) || !absl::SimpleAtoi(p[1], &o.mesh[1]) ||
          o.mesh[0] < 1 || o.mesh[1] < 1)
        return Usage("--mesh is RxC, e.g. 2x2");
    } else if (a == "--dir") {
      o.dir = v;
    } else {
      return Usage(("unknown option " + a).c_str());
    }
  }
  std::printf("trace_cost_bench: llama dp on %lldx%lld, %d steps per run, %d interleaved pairs "
              "(--trace kernels vs --trace off), OPENBLAS_CORETYPE %s\n",
              static_cast<long long>(o.mesh[0]), static_cast<long long>(o.mesh[1]), o.steps, o.pairs,
              std::getenv("OPENBLAS_CORETYPE") ? "set" : "unset");
  RunOnce(o, ss::trace::SliceDetail::kKernels, -1);  // warm-up: caches, page faults, the GEMM choice
  std::vector<double> wall_ratio, cpu_ratio, kernels_wall, off_wall;
  Measured last_kernels;
  std::printf("%4s %12s %12s %10s %10s %10s\n", "pair", "kernels s", "off s", "wall ratio", "cpu ratio", "slices");
  for (int p = 0; p < o.pairs; ++p) {
    Measured on, off;
    if (p % 2 == 0) {
      on = RunOnce(o, ss::trace::SliceDetail::kKernels, 2 * p);
      off = RunOnce(o, ss::trace::SliceDetail::kNone, 2 * p + 1);
    } else {
      off = RunOnce(o, ss::trace::SliceDetail::kNone, 2 * p);
      on = RunOnce(o, ss::trace::SliceDetail::kKernels, 2 * p + 1);
    }
    wall_ratio.push_back(on.wall / off.wall);
    cpu_ratio.push_back(on.cpu / off.cpu);
    kernels_wall.push_back(on.wall);
    off_wall.push_back(off.wall);
    last_kernels = on;
    std::printf("%4d %12.4f %12.4f %10.4f %10.4f %10lld\n", p, on.wall, off.wall, wall_ratio.back(),
                cpu_ratio.back(), static_cast<long long>(on.slices));
    if (off.slices != 0) std::printf("  warning: the --trace off run stored %lld slices\n", static_cast<long long>(off.slices));
    std::fflush(stdout);
  }
  const Interval w = MeanCi(wall_ratio), c = MeanCi(cpu_ratio);
  const int df = o.pairs - 1;
  std::printf("\nmedian time counted: kernels %.4f s, off %.4f s (from step 0's loss through Finish)\n",
              Median(kernels_wall), Median(off_wall));
  std::printf("kernels run: %lld slices, %lld file bytes (%.1f bytes/slice, all tables)\n",
              static_cast<long long>(last_kernels.slices), static_cast<long long>(last_kernels.file_bytes),
              last_kernels.slices ? static_cast<double>(last_kernels.file_bytes) / last_kernels.slices : 0.0);
  std::printf("wall ratio kernels/off: mean %.4f, 95%% CI [%.4f, %.4f] (t, %d df)\n", w.mean, w.lo, w.hi, df);
  std::printf("cpu  ratio kernels/off: mean %.4f, 95%% CI [%.4f, %.4f] (t, %d df)\n", c.mean, c.lo, c.hi, df);
  std::printf("goal: wall ratio's upper bound <= 1.03: %s\n", w.hi <= 1.03 ? "met" : "NOT met");
  return 0;
}
