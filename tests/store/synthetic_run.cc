// The synthetic run used by store, analysis and CLI tests (see synthetic_run.h).
#include "tests/store/synthetic_run.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/temp_files.h"

namespace shardscope::testing {

using namespace shardscope::trace;

std::string TempDbPath(const std::string& name) {
  std::string p = absl::StrCat(::testing::TempDir(), "/shardscope_", getpid(), "_", name, ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((p + suffix).c_str());
  return test_files::RemoveAtExit(p);
}

absl::StatusOr<int64_t> WriteSyntheticRun(store::Writer& w) {
  RunRecord run;
  run.sample = "mlp";
  run.mesh = "2x2";
  run.mesh_axes = "data,model";
  run.sharding = "dp";
  run.config_json = R"({"steps":5,"mesh":"2x2"})";
  run.topology = "2 hosts x 2 chips";
  run.num_hosts = 2;
  run.num_devices = kDevices;
  run.started_at_unix_ns = 1700000000LL * 1000000000LL;  // 2023-11-14T22:13:20Z
  absl::StatusOr<int64_t> run_id = w.StartRun(run);
  if (!run_id.ok()) return run_id.status();

  for (int h = 0; h < 2; ++h) w.Record(HostRecord{h, absl::StrCat("host", h)});
  for (int d = 0; d < kDevices; ++d) {
    w.Record(DeviceRecord{d, d / 2, absl::StrCat("[", d / 2, ",", d % 2, "]"), 16LL << 30, 1e12});
    TrackRecord t;
    t.track_id = 100 + d;
    t.name = absl::StrCat("chip ", d);
    t.clock = Clock::kDevice;
    t.device_id = d;
    t.host_id = d / 2;
    w.Record(t);
  }
  w.Record(MeshRecord{0, "[2,2]", "data,model", "0,1,2,3"});
  TrackRecord host;
  host.track_id = 1;
  host.name = "host 0 / main";
  host.clock = Clock::kHost;
  host.thread_name = "main";
  w.Record(host);

  for (int g = 1; g <= 2; ++g) {
    GraphRecord gr;
    gr.graph_id = g;
    gr.fingerprint = absl::StrCat("fp", g);
    gr.call_site = "samples/mlp.cc:55";
    gr.ir_text = "func.func @main() {}";
    gr.ir_text_after = "func.func @main() {} // partitioned";
    gr.op_count = 12;
    gr.flops = 1e9;
    gr.bytes = 4096;
    w.Record(gr);
  }

  int64_t slice_id = 1;
  for (int s = 0; s < kSteps; ++s) {
    int64_t t0 = s * kStepPeriodNs;
    int64_t graph = s < 3 ? 1 : 2;
    int64_t slowest = ComputeNs(kDevices - 1);
    for (int d = 0; d < kDevices; ++d) {
      SliceRecord c;
      c.slice_id = slice_id++;
      c.track_id = 100 + d;
      c.start_ns = t0;
      c.dur_ns = ComputeNs(d);
      c.name = "fusion.3";
      c.kind = SliceKind::kCompute;
      c.step = s;
      c.graph_id = graph;
      c.op_id = 3;
      w.Record(c);
      SliceRecord inner = c;  // nested: must not count twice in summaries
      inner.slice_id = slice_id++;
      inner.depth = 1;
      inner.parent_id = c.slice_id;
      inner.dur_ns = c.dur_ns / 2;
      inner.name = "dot.7";
      w.Record(inner);
      SliceRecord ar;
      ar.slice_id = slice_id++;
      ar.track_id = 100 + d;
      ar.start_ns = t0 + slowest;  // waits for the slowest participant
      ar.dur_ns = kCollectiveNs;
      ar.name = "all-reduce.2";
      ar.kind = SliceKind::kCollective;
      ar.step = s;
      ar.graph_id = graph;
      ar.op_id = 9;
      ar.flow_id = 1000 + s;
      ar.bytes = 4 << 20;
      w.Record(ar);
    }
    SliceRecord ms;
    ms.slice_id = slice_id++;
    ms.track_id = 1;
    ms.start_ns = t0;
    ms.dur_ns = kMs / 5;
    ms.name = "mark_step";
    ms.kind = SliceKind::kHost;
    ms.step = s;
    w.Record(ms);

    CompilationRecord cr;
    cr.compile_id = s + 1;
    cr.step = s;
    cr.graph_id = graph;
    cr.call_site = "samples/mlp.cc:55";
    cr.host_start_ns = t0;
    if (s == 0 || s == 3) {
      cr.cache = "miss";
      cr.cause_kind = s == 0 ? "first_compile" : "input_shape_changed";
      cr.cause_detail = s == 0 ? "" : "x f32[64,784] -> f32[48,784]";
      cr.source_file = "samples/mlp.cc";
      cr.source_line = 41;
      cr.duration_ns = s == 0 ? 12 * kMs : 26 * kMs;
      cr.prev_graph_id = s == 0 ? -1 : 1;
    } else {
      cr.cache = "memory_hit";
      cr.duration_ns = kMs / 20;
    }
    w.Record(cr);

    ExecutionRecord ex;
    ex.execution_id = s + 1;
    ex.step = s;
    ex.graph_id = graph;
    ex.cache = cr.cache;
    ex.input_signature = R"([{"name":"x","shape":[64,784],"dtype":"f32"}])";
    ex.cause = "mark_step";
    ex.source_file = "samples/mlp.cc";
    ex.source_line = 55;
    ex.host_start_ns = t0;
    ex.host_dur_ns = 2 * kMs;
    w.Record(ex);

    // Host wall per step: 4.0, 4.1, ... ms, with compiles adding their time.
    w.Record(StepRecord{s, 2.5 - 0.25 * s, 4 * kMs + s * (kMs / 10) + (s == 0 ? 12 * kMs : 0) +
                                               (s == 3 ? 26 * kMs : 0)});
    for (int d = 0; d < kDevices; ++d) {
      w.Record(CounterRecord{d, "hbm_bytes_in_use", t0, 1e6 * (d + 1)});
    }
  }

  w.Record(TensorRecord{1, "x", "[64,784]", "f32",
                        "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}", "annotated",
                        "samples/mlp.cc", 41, 0});
  w.Record(TensorRecord{2, "l1.w", "[1024,784]", "f32", "{replicated}", "propagated",
                        "samples/mlp.cc", 30, 0});
  for (int d = 0; d < kDevices; ++d) {
    w.Record(ShardPlacementRecord{1, "x", d, d / 2 == 0 ? "[0:32,0:784]" : "[32:64,0:784]",
                                  32 * 784 * 4});
    w.Record(ShardPlacementRecord{2, "l1.w", d, "[0:1024,0:784]", 1024 * 784 * 4});
  }
  if (absl::Status st = w.EndRunAndCheck(); !st.ok()) return st;
  return *run_id;
}

}  // namespace shardscope::testing
