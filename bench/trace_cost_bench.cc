// What full timeline capture costs a training run: the llama sample's step on
// a 2x2 mesh (dp), recorded through Recording into a real store::Writer (its
// thread writing as the run goes; the final flush and the run's end
// included), with --trace kernels against --trace off, in interleaved pairs
// (each pair's order alternates, so drift hits both modes alike). Each run is
// a fresh recording of --steps steps; the time counted runs from the moment
// step 0's loss is read (the first compile behind it, the same in both modes)
// to Finish returning. A pair is four runs, ABBA (BAAB every other pair), so
// the machine's drift within a pair cancels. Reports each pair's ratio kernels/off of wall time
// and of process CPU time (every thread: the chips, the host, the writer),
// their means with a 95% confidence interval (Student's t), and the slices
// and file bytes of a kernels run. Goal (issue 14): the wall ratio's upper
// bound at most 1.03.
//
//   build/bench/trace_cost_bench [--pairs 20] [--steps 6] [--mesh 2x2] [--dir /tmp] [--sink writer|discard]
//
// --sink discard hands the records to a recorder that keeps none instead of
// the store's writer: the cost left is what recording costs the stack's own
// threads (building and handing over records), apart from the writer's.
//
// OPENBLAS_CORETYPE, set on these machines, halves OpenBLAS: the program
// re-executes itself without it (MACHINE-NOTES, "Two traps").
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
#include "runtime/scheduler.h"
#include "samples/samples.h"
#include "store/reader.h"
#include "store/writer.h"

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
  double finish_wall = 0;     // of which Finish (the writer's final flush, the run's end, closing the file)
  double whole_wall = 0;      // from Start to Finish
  int64_t slices = 0, file_bytes = 0;
};

struct Options {
  int pairs = 20, steps = 6;
  std::vector<int64_t> mesh = {2, 2};
  std::string dir = "/tmp";
  // writer: a real database (the goal's setting); discard: records built and
  // handed to a recorder that drops them, which isolates the cost on the
  // stack's own threads from the store writer's (a diagnostic).
  bool discard = false;
};

// A recorder that takes every record and keeps none (--sink discard).
class Discard : public ss::trace::Recorder {
 public:
  void Record(const ss::trace::SliceRecord&) override { ++slices; }
  using ss::trace::Recorder::Record;
  std::atomic<int64_t> slices{0};
};

void RemoveDb(const std::string& db) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
}

ss::samples::SampleConfig Config(const Options& o, double* start_wall, double* start_cpu) {
  ss::samples::SampleConfig cfg;
  cfg.mesh = o.mesh;
  cfg.steps = o.steps;
  cfg.eval_every = 0;
  cfg.on_step = [=](int step, double) {
    if (step == 0) {
      *start_wall = Now();
      *start_cpu = ProcessCpu();
    }
  };
  return cfg;
}

[[noreturn]] void Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
  std::exit(1);
}

// The same run with records handed to a Discard recorder, through the capture filter.
Measured RunDiscarded(const Options& o, ss::trace::SliceDetail detail) {
  Measured m;
  Discard discard;
  ss::trace::CaptureFilter filter(&discard, {detail});
  const double t0 = Now();
  ss::trace::ResetHostClock();
  ss::trace::SetRecorder(&filter);
  if (absl::Status s = ss::Init({.num_hosts = 1,
                                 .chips_per_host = static_cast<int>(o.mesh[0] * o.mesh[1]),
                                 .cache_dir = "",
                                 .recompile_notices = false});
      !s.ok())
    Fail(s);
  double start_wall = 0, start_cpu = 0;
  auto result = ss::samples::Find("llama")->run(Config(o, &start_wall, &start_cpu));
  if (!result.ok()) Fail(result.status());
  const double finish = Now();
  ss::Shutdown();
  ss::trace::SetRecorder(nullptr);
  const double end = Now();
  m.wall = end - start_wall;
  m.cpu = ProcessCpu() - start_cpu;
  m.finish_wall = end - finish;
  m.whole_wall = end - t0;
  m.slices = discard.slices.load();
  return m;
}

// One fresh recorded run of the llama sample under `detail`.
Measured RunOnce(const Options& o, ss::trace::SliceDetail detail, int k) {
  if (o.discard) return RunDiscarded(o, detail);
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
  if (!rec.ok()) Fail(rec.status());
  double start_wall = 0, start_cpu = 0;
  auto result = ss::samples::Find("llama")->run(Config(o, &start_wall, &start_cpu));
  if (!result.ok()) Fail(result.status());
  const double finish = Now();
  if (absl::Status s = (*rec)->Finish(); !s.ok()) Fail(s);
  const double end = Now();
  m.wall = end - start_wall;
  m.cpu = ProcessCpu() - start_cpu;
  m.finish_wall = end - finish;
  m.whole_wall = end - t0;
  rec->reset();
  struct stat st {};
  if (stat(db.c_str(), &st) == 0) m.file_bytes = st.st_size;
  if (auto r = ss::store::Reader::Open(db); r.ok())
    if (auto q = r->Query("SELECT COUNT(*) AS n FROM slices"); q.ok()) m.slices = q->Int(0, "n");
  RemoveDb(db);
  return m;
}

// This thread's CPU time, seconds.
double ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// A program run as the executor hands it to the Scheduler: 4 chips, 480
// kernels each with names like the llama step's, and 24 all-reduces.
ss::runtime::ScheduleInput SyntheticRun() {
  ss::runtime::ScheduleInput in;
  in.step = 1;
  in.graph_id = 7;
  const int chips = 4;
  in.per_device.resize(chips);
  for (int c = 0; c < 24; ++c) in.collectives.push_back({{{0, 1, 2, 3}}, {20'000}});
  for (int d = 0; d < chips; ++d)
    for (int k = 0; k < 504; ++k) {
      const bool coll = k % 21 == 20;
      ss::runtime::DeviceOp op{k, coll ? absl::StrCat("all_reduce.", 1000 + k) : k % 3 ? absl::StrCat("fusion.", 1000 + k)
                                                                                     : absl::StrCat("dot_general.", 1000 + k),
                               coll ? ss::trace::SliceKind::kCollective : ss::trace::SliceKind::kCompute,
                               coll ? 0 : 10'000 + k, coll ? k / 21 : -1, 4096};
      in.per_device[d].push_back(std::move(op));
    }
  return in;
}

// What building and handing over slices costs the thread that places a run
// (the Scheduler's), per slice: with no recorder, with --trace off, with a
// recorder that discards, and into a real store::Writer (its thread's CPU
// apart: what the writer spends per slice).
void ProducerCost(const Options& o) {
  const ss::runtime::ScheduleInput in = SyntheticRun();
  const int reps = 100;
  auto time = [&](ss::trace::Recorder* r) {
    ss::trace::SetRecorder(r);
    ss::runtime::Scheduler s(ss::trace::Clock::kDevice, {1, 2, 3, 4});
    const double t0 = ThreadCpu();
    for (int k = 0; k < reps; ++k)
      if (!s.Schedule(in).ok()) std::exit(1);
    const double t = ThreadCpu() - t0;
    ss::trace::SetRecorder(nullptr);
    return t;
  };
  const double slices = 4.0 * 504 * reps;
  Discard discard;
  ss::trace::CaptureFilter off(&discard, {ss::trace::SliceDetail::kNone});
  const double none = time(nullptr), offt = time(&off), kept = time(&discard);
  const std::string db = absl::StrCat(o.dir, "/trace_cost_bench_", getpid(), "_writer.db");
  RemoveDb(db);
  auto w = ss::store::Writer::Open(db);
  if (!w.ok()) Fail(w.status());
  if (auto r = (*w)->StartRun(ss::trace::RunRecord{}); !r.ok()) Fail(r.status());
  // Twice, counting the second: the first grows the writer's queue, and
  // touching its fresh pages (MACHINE-NOTES) would be counted as Push.
  time(w->get());
  (*w)->Flush();
  const double cpu0 = ProcessCpu();
  const double into_writer = time(w->get());
  (*w)->Flush();
  const double writer_thread = ProcessCpu() - cpu0 - into_writer;
  w->reset();
  RemoveDb(db);
  std::printf("per slice, on the thread that places a run (%.0f slices, thread CPU): Scheduler alone %.0f ns; "
              "--trace off %.0f ns; building and recording into a discarding recorder +%.0f ns; "
              "into store::Writer +%.0f ns (Push), and %.2f us on the writer's thread\n",
              slices, 1e9 * none / slices, 1e9 * offt / slices, 1e9 * (kept - none) / slices,
              1e9 * (into_writer - none) / slices, 1e6 * writer_thread / slices);
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
    } else if (a == "--sink") {
      if (v != "writer" && v != "discard") return Usage("--sink is writer or discard");
      o.discard = v == "discard";
    } else {
      return Usage(("unknown option " + a).c_str());
    }
  }
  std::printf("trace_cost_bench: llama dp on %lldx%lld, %d steps per run, %d pairs of four runs (ABBA) "
              "(--trace kernels vs --trace off) into %s, OPENBLAS_CORETYPE %s\n",
              static_cast<long long>(o.mesh[0]), static_cast<long long>(o.mesh[1]), o.steps, o.pairs,
              o.discard ? "a recorder that discards every record (--sink discard)" : "a real store::Writer",
              std::getenv("OPENBLAS_CORETYPE") ? "set" : "unset");
  ProducerCost(o);
  std::fflush(stdout);
  RunOnce(o, ss::trace::SliceDetail::kKernels, -1);  // warm-up: caches, page faults, the GEMM choice
  std::vector<double> wall_ratio, cpu_ratio, kernels_wall, off_wall, kernels_cpu, off_cpu, kernels_fin, off_fin;
  Measured last_kernels;
  std::printf("%4s %12s %12s %10s %10s %10s %10s %10s\n", "pair", "kernels s", "off s", "wall ratio", "cpu ratio",
              "kern fin s", "off fin s", "slices");
  for (int p = 0; p < o.pairs; ++p) {
    // A pair is four runs, ABBA (kernels, off, off, kernels; BAAB on odd
    // pairs): a drift of the machine's speed within the pair hits both modes
    // alike, so each pair's ratio is not a coin toss of which ran second.
    auto add = [](Measured& into, const Measured& m) {
      into.wall += m.wall;
      into.cpu += m.cpu;
      into.finish_wall += m.finish_wall;
      into.whole_wall += m.whole_wall;
      into.slices = m.slices;
      into.file_bytes = m.file_bytes;
    };
    Measured on, off;
    const bool kernels_first = p % 2 == 0;
    for (int k = 0; k < 4; ++k) {
      const bool kernels = (k == 0 || k == 3) == kernels_first;
      add(kernels ? on : off, RunOnce(o, kernels ? ss::trace::SliceDetail::kKernels : ss::trace::SliceDetail::kNone,
                                      4 * p + k));
    }
    for (Measured* m : {&on, &off}) {
      m->wall /= 2;
      m->cpu /= 2;
      m->finish_wall /= 2;
      m->whole_wall /= 2;
    }
    wall_ratio.push_back(on.wall / off.wall);
    cpu_ratio.push_back(on.cpu / off.cpu);
    kernels_wall.push_back(on.wall);
    off_wall.push_back(off.wall);
    kernels_cpu.push_back(on.cpu);
    off_cpu.push_back(off.cpu);
    kernels_fin.push_back(on.finish_wall);
    off_fin.push_back(off.finish_wall);
    last_kernels = on;
    std::printf("%4d %12.4f %12.4f %10.4f %10.4f %10.4f %10.4f %10lld\n", p, on.wall, off.wall, wall_ratio.back(),
                cpu_ratio.back(), on.finish_wall, off.finish_wall, static_cast<long long>(on.slices));
    if (off.slices != 0) std::printf("  warning: the --trace off run stored %lld slices\n", static_cast<long long>(off.slices));
    std::fflush(stdout);
  }
  // The steps alone (Finish left out): what capture costs while the run trains.
  std::vector<double> steps_ratio;
  for (size_t k = 0; k < kernels_wall.size(); ++k)
    steps_ratio.push_back((kernels_wall[k] - kernels_fin[k]) / (off_wall[k] - off_fin[k]));
  const Interval w = MeanCi(wall_ratio), c = MeanCi(cpu_ratio), st = MeanCi(steps_ratio);
  const int df = o.pairs - 1;
  std::printf("\nmedian time counted: kernels %.4f s, off %.4f s (from step 0's loss through Finish); "
              "of it Finish %.4f s and %.4f s\n",
              Median(kernels_wall), Median(off_wall), Median(kernels_fin), Median(off_fin));
  std::printf("median process CPU: kernels %.4f s, off %.4f s: %.2f us more per slice of a kernels run\n",
              Median(kernels_cpu), Median(off_cpu),
              last_kernels.slices ? 1e6 * (Median(kernels_cpu) - Median(off_cpu)) / last_kernels.slices : 0.0);
  std::printf("kernels run: %lld slices, %lld file bytes (%.1f bytes/slice, all tables)\n",
              static_cast<long long>(last_kernels.slices), static_cast<long long>(last_kernels.file_bytes),
              last_kernels.slices ? static_cast<double>(last_kernels.file_bytes) / last_kernels.slices : 0.0);
  std::printf("wall ratio kernels/off: mean %.4f, 95%% CI [%.4f, %.4f] (t, %d df)\n", w.mean, w.lo, w.hi, df);
  std::printf("cpu  ratio kernels/off: mean %.4f, 95%% CI [%.4f, %.4f] (t, %d df)\n", c.mean, c.lo, c.hi, df);
  std::printf("wall ratio of the steps alone (Finish left out): mean %.4f, 95%% CI [%.4f, %.4f] (t, %d df)\n",
              st.mean, st.lo, st.hi, df);
  std::printf("goal: wall ratio's upper bound <= 1.03: %s\n", w.hi <= 1.03 ? "met" : "NOT met");
  return 0;
}
