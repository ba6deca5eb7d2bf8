// Fixture databases for the app's tests; see fixture.h. Written through
// store::Writer, as a real run is.
#include "tests/app/fixture.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "profiler/trace/records.h"
#include "store/writer.h"
#include "tests/temp_files.h"

namespace shardscope::app::testing {
namespace {

using namespace shardscope::trace;

int64_t IdBase(const FixtureRun& r) { return r.run_id * 100'000'000; }

SliceRecord MakeSlice(int64_t id, int64_t track, int64_t start, int64_t dur, int depth, const char* name,
                      SliceKind kind, int step) {
  SliceRecord s;
  s.slice_id = id;
  s.track_id = track;
  s.start_ns = start;
  s.dur_ns = dur;
  s.depth = depth;
  s.name = name;
  s.kind = kind;
  s.step = step;
  return s;
}

absl::Status WriteRun(store::Writer& w, const FixtureRun& r) {
  RunRecord run;
  run.sample = "mlp";
  run.mesh = absl::StrCat(r.num_devices, "x1");
  run.mesh_axes = "data";
  run.sharding = "data";
  run.config_json = "{}";
  run.topology = absl::StrCat(r.num_hosts, " hosts");
  run.profile = "cpu";
  run.tool_version = "test";
  run.started_at_unix_ns = 1'704'067'200'000'000'000;  // 2024-01-01
  run.num_hosts = r.num_hosts;
  run.num_devices = r.num_devices;
  auto id = w.StartRun(run);
  if (!id.ok()) return id.status();
  if (*id != r.run_id) {
    return absl::InvalidArgumentError(absl::StrCat("fixture run ", r.run_id, " was stored as run ", *id,
                                                   "; write runs in order 1, 2, ..."));
  }
  for (int h = 0; h < r.num_hosts; ++h) {
    w.Record(HostRecord{h, absl::StrCat("host", h)});
    TrackRecord t;
    t.track_id = HostTrack(h);
    t.name = absl::StrCat("host ", h, " main");
    t.clock = Clock::kHost;
    t.host_id = h;
    t.thread_name = "main";
    w.Record(t);
  }
  for (int d = 0; d < r.num_devices; ++d) {
    const int host = d * r.num_hosts / r.num_devices;
    w.Record(DeviceRecord{d, host, absl::StrCat("[", d, "]"), int64_t{1} << 30, 1e12});
    TrackRecord t;
    t.track_id = DeviceTrack(d);
    t.name = absl::StrCat("chip ", d);
    t.clock = Clock::kDevice;
    t.device_id = d;
    t.host_id = host;
    w.Record(t);
    if (r.with_modeled) {
      t.track_id = ModeledTrack(d);
      t.name = absl::StrCat("chip ", d, " (modeled)");
      t.clock = Clock::kModeled;
      w.Record(t);
    }
  }

  const int64_t base = IdBase(r);
  for (int s = 0; s < r.steps; ++s) {
    const int64_t t = s * kStepNs;
    for (int d = 0; d < r.num_devices; ++d) {
      const int64_t skew = d * 5'000;
      const int64_t late = d == r.late_device ? 30'000 : 0;
      const int64_t id = base + (int64_t{s} * r.num_devices + d) * 3;
      w.Record(MakeSlice(id + 1, DeviceTrack(d), t + skew, 300'000, 0, "fusion.3", SliceKind::kCompute, s));
      w.Record(MakeSlice(id + 2, DeviceTrack(d), t + skew + 310'000, 250'000 + late, 0, "dot.7", SliceKind::kCompute, s));
      SliceRecord ar = MakeSlice(id + 3, DeviceTrack(d), t + 600'000, 200'000 + d * 10'000, 0, "all-reduce.2",
                                 SliceKind::kCollective, s);
      ar.graph_id = 1;
      ar.op_id = 9;
      ar.flow_id = base + 90'000'000 + s;
      ar.bytes = 4096;
      if (r.with_arrivals) ar.arrival_ns = t + skew + 310'000 + 250'000 + late;
      w.Record(ar);
      if (r.with_modeled) {
        const int64_t mid = base + 80'000'000 + (int64_t{s} * r.num_devices + d) * 2;
        w.Record(MakeSlice(mid + 1, ModeledTrack(d), t / 2, 150'000, 0, "fusion.3", SliceKind::kCompute, s));
        w.Record(MakeSlice(mid + 2, ModeledTrack(d), t / 2 + 150'000, 125'000, 0, "dot.7", SliceKind::kCompute, s));
      }
    }
    for (int h = 0; h < r.num_hosts; ++h) {
      const int64_t ht = kHostClockStart + t;
      const int64_t id = base + 50'000'000 + (int64_t{s} * r.num_hosts + h) * 2;
      w.Record(MakeSlice(id + 1, HostTrack(h), ht, 400'000, 0, "mark_step", SliceKind::kHost, s));
      SliceRecord trace = MakeSlice(id + 2, HostTrack(h), ht + 20'000, 150'000, 1, "trace", SliceKind::kHost, s);
      trace.parent_id = id + 1;
      w.Record(trace);
    }
    if (r.with_dispatches) {
      ExecutionRecord e;
      e.execution_id = base + 70'000'000 + s;
      e.step = s;
      e.graph_id = 1;
      e.cache = s == 0 ? "miss" : "memory_hit";
      e.input_signature = "[]";
      e.cause = "mark_step";
      e.host_start_ns = kHostClockStart + t + kDispatchAfterNs;
      e.host_dur_ns = 20'000;
      w.Record(e);
    }
    if (r.with_counters) {
      for (int d = 0; d < r.num_devices; ++d) {
        w.Record(CounterRecord{d, "hbm_bytes_in_use", kHostClockStart + t + 500'000, (d + 1) * 1e6 + s * 1000.0});
      }
      w.Record(CounterRecord{-1, "CreateTensor", kHostClockStart + t, s * 10.0});
    }
  }
  const int64_t tiny_start = r.steps * kStepNs;
  for (int i = 0; i < r.tiny_slices; ++i) {
    w.Record(MakeSlice(base + 60'000'000 + i, DeviceTrack(0), tiny_start + 2 * i, 1, 0, "tiny", SliceKind::kCompute, -1));
  }

  if (r.with_compilations) {
    auto compile = [&](int64_t id, int step, int64_t graph, const char* cache, const char* kind, const char* detail,
                       const char* file, int line, int64_t dur, int64_t start) {
      CompilationRecord c;
      c.compile_id = id;
      c.step = step;
      c.graph_id = graph;
      c.cache = cache;
      c.cause_kind = kind;
      c.cause_detail = detail;
      c.source_file = file;
      c.source_line = line;
      c.duration_ns = dur;
      c.call_site = "samples/mlp.cc:52 mark_step";
      c.host_start_ns = start;
      w.Record(c);
    };
    compile(1, 0, 1, "miss", "first_compile", "first graph at this call site", "samples/mlp.cc", 52, 250'000,
            kHostClockStart + 180'000);
    compile(2, 2, 2, "miss", "input_shape_changed", "x f32[64,784] -> f32[48,784]", "samples/mlp.cc", 41, 180'000,
            kHostClockStart + 2 * kStepNs + 180'000);
    compile(3, 3, 1, "memory_hit", "", "", "", 0, 12'000, kHostClockStart + 3 * kStepNs + 180'000);
  }

  // Placement: x [8,4] split in four over the batch (chips 0-3 each a row
  // block), w [4,6] split in two over its rows and replicated over the rest
  // (chips 0,2 hold rows 0:2, chips 1,3 rows 2:4), and one rematerialization.
  if (r.num_devices == 4) {
    w.Record(TensorRecord{1, "x", "[8,4]", "f32", "{devices=[4,1]0,1,2,3}", "annotated", "samples/mlp.cc", 41, 0});
    w.Record(TensorRecord{2, "w", "[4,6]", "f32", "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}", "propagated",
                          "samples/mlp.cc", 30, 0});
    for (int d = 0; d < 4; ++d) {
      w.Record(ShardPlacementRecord{1, "x", d, absl::StrCat("[", 2 * d, ":", 2 * d + 2, ",0:4]"), 32});
      const int half = d % 2;
      w.Record(ShardPlacementRecord{2, "w", d, absl::StrCat("[", 2 * half, ":", 2 * half + 2, ",0:6]"), 48});
    }
    // The all-reduce (op 9 of graph 1) adds up w's gradient (global op 2).
    OpRecord op;
    op.graph_id = 1;
    op.op_id = 9;
    op.name = "all-reduce.2";
    op.opcode = "stablehlo.all_reduce";
    op.shape = "f32[2,6]";
    op.bytes_read = op.bytes_written = 48;
    op.modeled_ns = 1000;
    op.roofline = "collective";
    op.profile = "cpu";
    op.moves_op_id = 2;
    w.Record(op);
    ShardingRecord sharding;
    sharding.graph_id = 1;
    ShardingDecisionRow decision;
    decision.op_id = 2;
    decision.name = "w";
    decision.sharding = "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}";
    decision.source = "annotated";
    sharding.decisions.push_back(decision);
    RematerializationRow remat;
    remat.op_id = 17;
    remat.value = "reshape.17";
    remat.op = "stablehlo.dot_general";
    remat.bytes = 4096;
    remat.source_file = "samples/mlp.cc";
    remat.source_line = 44;
    sharding.rematerializations.push_back(remat);
    w.Record(sharding);
  }
  return w.EndRunAndCheck();
}

}  // namespace

int64_t AllReduceSliceId(const FixtureRun& run, int step, int device) {
  return IdBase(run) + (int64_t{step} * run.num_devices + device) * 3 + 3;
}

absl::Status WriteFixtureDb(const std::string& path, const std::vector<FixtureRun>& runs) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix, ec);
  auto writer = store::Writer::Open(path);
  if (!writer.ok()) return writer.status();
  for (const FixtureRun& run : runs) {
    if (absl::Status st = WriteRun(**writer, run); !st.ok()) return st;
  }
  return absl::OkStatus();  // the writer closes the file, checkpointed, as it goes
}

std::string TempPath(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string prefix = info ? absl::StrCat(info->test_suite_name(), ".", info->name()) : "app";
  for (char& c : prefix) {
    if (c == '/') c = '_';
  }
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "shardscope_app_tests";
  std::filesystem::create_directories(dir);
  return test_files::RemoveAtExit((dir / absl::StrCat(prefix, ".", name)).string());
}

}  // namespace shardscope::app::testing
