// The store's timeline write and read costs, side by side in one process:
//
//  1. writer: N slices over C chips through the real store::Writer (its
//     thread, chunks, summaries, final flush included): slices/s and the
//     writer thread's CPU per slice (process CPU minus the producer's own);
//  2. baseline: the same slices as one indexed row each into version 1's
//     table (prepared insert, 8192-row transactions), in the same process;
//  3. reads on the file from 1: the whole-run level-of-detail query (every
//     track, ~2000 buckets) and random windows through TimelineReader.
//
// The slices replay one device step of a recorded run (--template DB: its
// first chip's slices of its second step) on every chip with +-10% jitter on
// each duration, step after step; without a template a built-in llama-like
// step is used. The output says which. Goals (issue 14): >= 1M slices/s,
// <= 0.4 us writer CPU per slice, each query <= 50 ms.
//
//   build/bench/store_writer_bench [--slices N] [--chips C] [--template DB] [--keep PATH] [--no-baseline]
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "store/reader.h"
#include "store/timeline.h"
#include "store/writer.h"

namespace ss = shardscope;

namespace {

struct Shape {
  std::string name;
  ss::trace::SliceKind kind;
  int64_t dur_ns, gap_ns;
};

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double ThreadCpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
double ProcessCpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

std::vector<Shape> LoadTemplate(const std::string& path, std::string* said) {
  std::vector<Shape> out;
  if (!path.empty()) {
    auto r = ss::store::Reader::Open(path, ss::store::Reader::Threads::kOneThread);  // as the app's loader opens it
    if (r.ok()) {
      auto q = r->Query(
          "SELECT e.name, e.kind, e.start_ns, e.dur_ns FROM events e WHERE e.clock = 'device' AND e.depth = 0"
          " AND e.device_id = (SELECT min(device_id) FROM devices) AND e.step = (SELECT min(step) + 1 FROM steps)"
          " ORDER BY e.start_ns");
      if (q.ok()) {
        int64_t prev_end = -1;
        for (size_t i = 0; i < q->rows.size(); ++i) {
          const std::string kind = q->Text(i, "kind");
          ss::trace::SliceKind k = kind == "collective" ? ss::trace::SliceKind::kCollective
                                   : kind == "transfer" ? ss::trace::SliceKind::kTransfer
                                   : kind == "host_wait" ? ss::trace::SliceKind::kHostWait
                                                         : ss::trace::SliceKind::kCompute;
          const int64_t start = q->Int(i, "start_ns"), dur = q->Int(i, "dur_ns");
          out.push_back({q->Text(i, "name"), k, dur, prev_end < 0 ? 0 : std::max<int64_t>(0, start - prev_end)});
          prev_end = start + dur;
        }
      }
    }
    if (!out.empty()) {
      *said = absl::StrCat("replaying ", out.size(), " device slices of one step of ", path, " with +-10% jitter");
      return out;
    }
    std::fprintf(stderr, "cannot read a device step from %s; using the built-in shape\n", path.c_str());
  }
  // A llama-like step: matmuls, fused elementwise kernels, an all-reduce per layer.
  for (int layer = 0; layer < 8; ++layer) {
    for (int k = 0; k < 12; ++k)
      out.push_back({absl::StrCat(k % 3 == 0 ? "dot_general." : "fusion.", layer * 12 + k), ss::trace::SliceKind::kCompute,
                     k % 3 == 0 ? 180000 : 25000, 2000});
    out.push_back({absl::StrCat("all-reduce.", layer), ss::trace::SliceKind::kCollective, 60000, 5000});
  }
  *said = absl::StrCat("replaying a built-in llama-like step (", out.size(), " slices) with +-10% jitter (no --template)");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ss::bench::KeepFreedMemory();
  int64_t total = 2000000;
  int chips = 64;
  std::string tmpl, keep;
  bool baseline = true;
  int per_slice_records = 0;  // 1: Writer::Record per slice instead of RecordSlices per program run
  std::string reads_of;  // only the reads, of a file an earlier --keep left
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--no-baseline") { baseline = false; --i; continue; }
    if (a == "--per-slice") { per_slice_records = 1; --i; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); return 2; }
    if (a == "--reads-of") { reads_of = argv[i + 1]; continue; }
    if (a == "--slices") total = std::atoll(argv[i + 1]);
    else if (a == "--chips") chips = std::atoi(argv[i + 1]);
    else if (a == "--template") tmpl = argv[i + 1];
    else if (a == "--keep") keep = argv[i + 1];
    else { std::fprintf(stderr, "unknown flag %s\n", a.c_str()); return 2; }
  }
  std::string said;
  const std::vector<Shape> step = LoadTemplate(tmpl, &said);
  if (reads_of.empty())
    std::printf("%s; %lld slices over %d chips\n", said.c_str(), static_cast<long long>(total), chips);

  // Make every record first, so the timed part is the recording path alone.
  std::mt19937_64 rng(1);
  std::vector<ss::trace::SliceRecord> slices;
  slices.reserve(static_cast<size_t>(total));
  std::vector<int64_t> now(chips, 0);
  int64_t id = 1;
  int steps = 0;
  while (reads_of.empty() && static_cast<int64_t>(slices.size()) < total) {
    for (int c = 0; c < chips && static_cast<int64_t>(slices.size()) < total; ++c) {
      for (const Shape& s : step) {
        ss::trace::SliceRecord r;
        r.slice_id = id++;
        r.track_id = 1 + c;
        r.start_ns = now[c] + s.gap_ns;
        r.dur_ns = std::max<int64_t>(1, static_cast<int64_t>(s.dur_ns * (0.9 + 0.2 * (rng() % 1000) / 1000.0)));
        r.name = s.name;
        r.kind = s.kind;
        r.step = steps;
        r.graph_id = 1;
        r.op_id = static_cast<int64_t>(&s - step.data());
        if (s.kind == ss::trace::SliceKind::kCollective) r.arrival_ns = r.start_ns - 1000;
        now[c] = r.start_ns + r.dur_ns;
        slices.push_back(std::move(r));
      }
    }
    ++steps;
  }
  const int64_t n = static_cast<int64_t>(slices.size());

  // 1. The writer.
  const std::string path = !reads_of.empty() ? reads_of
                           : keep.empty()    ? absl::StrCat("/tmp/store_writer_bench_", getpid(), ".db")
                                             : keep;
  if (reads_of.empty()) {  // (--reads-of: reads only)
  std::remove(path.c_str());
  double writer_s = 0, writer_cpu = 0;
  {
    auto w = ss::store::Writer::Open(path);
    if (!w.ok()) { std::fprintf(stderr, "%s\n", std::string(w.status().message()).c_str()); return 1; }
    ss::trace::RunRecord run;
    run.sample = "store_writer_bench";
    run.num_devices = chips;
    (void)(*w)->StartRun(run);
    for (int c = 0; c < chips; ++c) {
      ss::trace::TrackRecord t;
      t.track_id = 1 + c;
      t.name = absl::StrCat("chip ", c);
      t.clock = ss::trace::Clock::kDevice;
      t.device_id = c;
      (*w)->Record(t);
    }
    (*w)->Flush();
    const double t0 = Seconds(), p0 = ProcessCpu(), me0 = ThreadCpu();
    int last_step = 0;
    std::vector<ss::trace::SliceRecord> program;  // one program run's slices, every chip's
    for (const auto& s : slices) {
      if (s.step != last_step) {  // a step's row, as a run writes it
        if (per_slice_records == 0) (*w)->RecordSlices(std::move(program));
        program.clear();
        ss::trace::StepRecord st;
        st.step = last_step;
        st.wall_ns = 1;
        (*w)->Record(st);
        last_step = s.step;
      }
      // The Scheduler hands over a program run's slices at once (RecordSlices);
      // --per-slice records each alone, as an importer or a custom producer may.
      if (per_slice_records) {
        (*w)->Record(s);
      } else {
        program.push_back(s);
      }
    }
    if (!program.empty()) (*w)->RecordSlices(std::move(program));
    (*w)->Flush();  // every slice committed and readable
    const double t1 = Seconds(), p1 = ProcessCpu(), me1 = ThreadCpu();
    writer_s = t1 - t0;
    writer_cpu = (p1 - p0) - (me1 - me0);
    (*w)->EndRun();  // the run's metrics report, computed over the stored run
    std::printf("run end:  %.2f s (the run's metrics, from the writer's own counts)\n", Seconds() - t1);
  }
  struct stat sb{};
  ::stat(path.c_str(), &sb);
  std::printf("writer:   %.2f M slices/s, writer thread CPU %.3f us/slice, %.1f bytes/slice on disk (%lld bytes)\n",
              n / writer_s / 1e6, writer_cpu / n * 1e6, static_cast<double>(sb.st_size) / n,
              static_cast<long long>(sb.st_size));

  // 2. Baseline: version 1's row per slice with its index.
  if (baseline) {
    const std::string base = path + ".v1";
    std::remove(base.c_str());
    sqlite3* db = nullptr;
    sqlite3_open(base.c_str(), &db);
    sqlite3_exec(db,
                 "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                 "CREATE TABLE names (name_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
                 "CREATE TABLE slices (run_id INTEGER NOT NULL, slice_id INTEGER NOT NULL, track_id INTEGER NOT NULL,"
                 " start_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL, depth INTEGER NOT NULL, parent_id INTEGER,"
                 " name_id INTEGER NOT NULL, kind TEXT NOT NULL, step INTEGER, graph_id INTEGER, op_id INTEGER,"
                 " flow_id INTEGER, bytes INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, slice_id)) WITHOUT ROWID;"
                 "CREATE INDEX slices_by_track_time ON slices(run_id, track_id, start_ns);",
                 nullptr, nullptr, nullptr);
    sqlite3_stmt* ins = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO slices VALUES (1,?1,?2,?3,?4,0,NULL,?5,?6,?7,1,?8,NULL,0)", -1, &ins, nullptr);
    std::unordered_map<std::string, int64_t> names;
    const double t0 = Seconds();
    sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
    int64_t k = 0;
    for (const auto& s : slices) {
      auto [it, fresh] = names.emplace(s.name, static_cast<int64_t>(names.size()) + 1);
      sqlite3_bind_int64(ins, 1, s.slice_id);
      sqlite3_bind_int64(ins, 2, s.track_id);
      sqlite3_bind_int64(ins, 3, s.start_ns);
      sqlite3_bind_int64(ins, 4, s.dur_ns);
      sqlite3_bind_int64(ins, 5, it->second);
      sqlite3_bind_text(ins, 6, ss::trace::SliceKindName(s.kind), -1, SQLITE_STATIC);
      sqlite3_bind_int64(ins, 7, s.step);
      sqlite3_bind_int64(ins, 8, s.op_id);
      sqlite3_step(ins);
      sqlite3_reset(ins);
      if (++k % 8192 == 0) {
        sqlite3_exec(db, "COMMIT; BEGIN", nullptr, nullptr, nullptr);
      }
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    const double t1 = Seconds();
    sqlite3_finalize(ins);
    sqlite3_close(db);
    ::stat(base.c_str(), &sb);
    std::printf("baseline: %.2f M rows/s (one indexed row per slice, same process), %.1f bytes/slice\n",
                n / (t1 - t0) / 1e6, static_cast<double>(sb.st_size) / n);
    std::printf("ratio:    writer / baseline throughput = %.2f\n", (n / writer_s) / (n / (t1 - t0)));
    std::remove(base.c_str());
    std::remove((base + "-wal").c_str());
    std::remove((base + "-shm").c_str());
  }

  }

  // 3. Reads.
  {
    auto r = ss::store::Reader::Open(path, ss::store::Reader::Threads::kOneThread);  // as the app's loader opens it
    if (!r.ok()) { std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str()); return 1; }
    ss::store::TimelineReader tl(*r);
    int64_t end = *std::max_element(now.begin(), now.end());
    if (auto e = r->Query("SELECT max(end_ns) AS e FROM slice_chunks WHERE run_id = 1"); e.ok()) end = e->Int(0, "e");
    const int level = std::max(0, ss::store::SummaryLevelFor(0, end, 2000));
    // The first query is the one a user opening the run waits for (cold
    // statement and pages); the rest show the warm cost.
    double t0 = 0;
    size_t buckets = 0;
    std::vector<double> whole;
    for (int q = 0; q < 5; ++q) {
      t0 = Seconds();
      if (auto b = tl.AllSummaries(1, level, 0, end); b.ok()) buckets = b->size();
      whole.push_back((Seconds() - t0) * 1e3);
    }
    const double first_ms = whole[0];
    std::sort(whole.begin(), whole.end());
    std::printf("whole run: level %d, %zu buckets over %d tracks: first %.1f ms, median of 5 %.1f ms\n", level,
                buckets, chips, first_ms, whole[2]);
    std::vector<double> ms;
    size_t read = 0;
    for (int q = 0; q < 20; ++q) {
      const int64_t width = end / 200;  // a window of 0.5% of the run on every chip
      const int64_t w0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, end - width)));
      const int lvl = ss::store::SummaryLevelFor(w0, w0 + width, 2000);
      t0 = Seconds();
      for (int c = 0; c < chips; ++c) {
        if (lvl < 0) {
          auto s = tl.Slices(1, 1 + c, w0, w0 + width);
          if (s.ok()) read += s->size();
        } else if (c == 0) {
          if (auto b = tl.AllSummaries(1, lvl, w0, w0 + width); b.ok()) read += b->size();
        }
      }
      ms.push_back((Seconds() - t0) * 1e3);
    }
    const double first_window_ms = ms[0];  // includes finding how far back each track's chunks reach
    std::sort(ms.begin(), ms.end());
    std::printf("random windows (0.5%% of the run, all %d chips): first %.1f ms, median %.1f ms, max %.1f ms (%zu items"
                " read)\n", chips, first_window_ms, ms[ms.size() / 2], ms.back(), read);
  }
  if (keep.empty() && reads_of.empty()) {
    std::remove(path.c_str());
  } else {
    std::printf("kept %s\n", path.c_str());
  }
  return 0;
}
