// The analysis views' fixture; see profile_fixture.h.
#include "tests/app/profile_fixture.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "profiler/trace/records.h"
#include "store/writer.h"

namespace shardscope::app::testing {
namespace {

using namespace shardscope::trace;

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1000 * kUs;
constexpr int64_t kStep = 10 * kMs;
constexpr double kPeakFlops = 1e12;
constexpr int64_t kMiB = int64_t{1} << 20;

int64_t Jitter(int s, int d) { return ((s * 7 + d * 13) % 11) * 10 * kUs; }

struct Op {
  int64_t op_id;
  const char* name;
  const char* opcode;
  double flops;
  int64_t bytes;
  const char* roofline;
  int line;
  const char* scope;
};

// modeled = max(flops / peak, bytes / 100 GB/s) + 2 us (docs/cost_model.md's form).
int64_t Modeled(const Op& op) {
  if (std::string(op.roofline) == "collective") return 350 * kUs;
  return static_cast<int64_t>(std::max(op.flops / kPeakFlops * 1e9, double(op.bytes) / 100.0)) + 2 * kUs;
}

std::vector<Op> OpsOf(int64_t graph, const ProfileRun& r) {
  std::vector<Op> ops = {
      {3, "fusion.3", "fusion", graph == 1 ? 2e9 : 1.5e9, 8'000'000, "compute", 74, "l1"},
      {7, "dot.7", "stablehlo.dot_general", 1e9, 12'000'000, "compute", 74, "l2"},
      {2, "all-reduce.2", "stablehlo.all_reduce", 1e6, 8'000'000, "collective", 74, ""},
  };
  if (!r.without_add) {
    ops.push_back({5, "add.5", "stablehlo.add", 1e6, graph == 1 ? 30'000'000 : 24'000'000, "memory", 80, ""});
  }
  if (r.with_extra_op) ops.push_back({9, "multiply.9", "stablehlo.multiply", 5e5, 12'000'000, "memory", 81, "l2"});
  return ops;
}

SliceRecord Slice(int64_t id, int64_t track, int64_t start, int64_t dur, const std::string& name, SliceKind kind,
                  int step, int64_t graph = -1, int64_t op = -1) {
  SliceRecord s;
  s.slice_id = id;
  s.track_id = track;
  s.start_ns = start;
  s.dur_ns = dur;
  s.name = name;
  s.kind = kind;
  s.step = step;
  s.graph_id = graph;
  s.op_id = op;
  return s;
}

absl::Status WriteRun(store::Writer& w, const ProfileRun& r, int64_t expected_id) {
  RunRecord run;
  run.sample = "mlp";
  run.mesh = absl::StrCat(r.devices, "x1");
  run.mesh_axes = "data";
  run.sharding = "dp";
  run.config_json = "{}";
  run.topology = "2 hosts";
  run.profile = "cpu";
  run.clock_kinds = r.imported ? "host,device" : "host,device,modeled";
  run.tool_version = "test";
  run.started_at_unix_ns = 1'704'067'200'000'000'000;
  run.num_hosts = 2;
  run.num_devices = r.devices;
  run.imported = r.imported;
  auto id = w.StartRun(run);
  if (!id.ok()) return id.status();
  if (*id != expected_id) return absl::InternalError(absl::StrCat("run stored as ", *id, ", not ", expected_id));
  for (int h = 0; h < 2; ++h) {
    w.Record(HostRecord{h, absl::StrCat("host", h)});
    w.Record(TrackRecord{1000 + h, absl::StrCat("host ", h, " main"), Clock::kHost, -1, h, "main"});
  }
  for (int d = 0; d < r.devices; ++d) {
    const int host = d * 2 / r.devices;
    w.Record(DeviceRecord{d, host, absl::StrCat("[", d, "]"), kProfileHbm, kPeakFlops});
    w.Record(TrackRecord{d + 1, absl::StrCat("chip ", d), Clock::kDevice, d, host, ""});
    if (!r.imported) w.Record(TrackRecord{500 + d, absl::StrCat("chip ", d, " (modeled)"), Clock::kModeled, d, host, ""});
  }
  if (!r.imported) {
    for (int64_t g : {1, 2}) {
      GraphRecord graph;
      graph.graph_id = g;
      graph.fingerprint = absl::StrCat("f", g);
      graph.call_site = "samples/mlp.cc:82 mark_step";
      graph.ir_text = "func.func @main() { }";
      graph.ir_text_after = graph.ir_text;
      graph.op_count = 5;
      w.Record(graph);
      for (const Op& op : OpsOf(g, r)) {
        OpRecord o;
        o.graph_id = g;
        o.op_id = op.op_id;
        o.name = op.name;
        o.opcode = op.opcode;
        o.shape = "f32[64,1024]";
        o.flops = op.flops;
        o.bytes_read = op.bytes / 2;
        o.bytes_written = op.bytes - op.bytes / 2;
        o.modeled_ns = Modeled(op);
        o.roofline = op.roofline;
        o.profile = "cpu";
        o.source_file = "samples/mlp.cc";
        o.source_line = op.line;
        o.scope = op.scope;
        w.Record(o);
      }
      MemoryPlanRecord plan;
      plan.graph_id = g;
      plan.peak_bytes = (g == 1 ? 300 : 250) * kMiB;
      plan.parameter_bytes = 100 * kMiB;
      plan.arena_bytes = plan.peak_bytes - plan.parameter_bytes;
      plan.unshared_bytes = plan.arena_bytes + 60 * kMiB;
      plan.peak_op = "dot.7";
      plan.live_at_peak = {
          {0, 7, "dot.7", (g == 1 ? 120 : 90) * kMiB, false, "samples/mlp.cc", 74, "l2"},
          {1, 1, "w", 100 * kMiB, true, "samples/mlp.cc", 30, ""},
          {2, 3, "fusion.3", 80 * kMiB, false, "samples/mlp.cc", 74, "l1"},
      };
      w.Record(plan);
    }
  }

  int64_t id_next = expected_id * 10'000'000;
  for (int s = 0; s < r.steps; ++s) {
    const int64_t T = s * kStep;
    const int64_t graph = s < kProfileRecompileStep ? 1 : 2;
    const std::vector<Op> ops = OpsOf(graph, r);
    for (int d = 0; d < r.devices; ++d) {
      int64_t t = T;
      if (d == 0 && s == 5) {
        w.Record(Slice(++id_next, d + 1, t, 500 * kUs, "host_wait", SliceKind::kHostWait, s));
        t += 500 * kUs;
      }
      SliceRecord tr = Slice(++id_next, d + 1, t, 100 * kUs + 10 * kUs * d, "transfer.h2d", SliceKind::kTransfer, s);
      tr.bytes = 1 * kMiB;
      w.Record(tr);
      t += tr.dur_ns;
      for (const Op& op : ops) {
        if (std::string(op.roofline) == "collective") continue;
        int64_t dur = 0;
        if (op.op_id == 3) dur = 2 * kMs + Jitter(s, d);
        if (op.op_id == 7) dur = static_cast<int64_t>((1500 * kUs + Jitter(s, d)) * r.dot_scale);
        if (op.op_id == 5) dur = 300 * kUs + Jitter(s, d) / 2;
        if (op.op_id == 9) dur = 200 * kUs;
        w.Record(Slice(++id_next, d + 1, t, dur, r.imported ? op.name : op.name, SliceKind::kCompute, s,
                       r.imported ? -1 : graph, r.imported ? -1 : op.op_id));
        t += dur;
      }
      SliceRecord ar = Slice(++id_next, d + 1, T + 7 * kMs, 400 * kUs + 20 * kUs * d, "all-reduce.2",
                             SliceKind::kCollective, s, r.imported ? -1 : graph, r.imported ? -1 : 2);
      ar.flow_id = expected_id * 1000 + s;
      ar.bytes = 8'000'000;
      ar.arrival_ns = t;
      w.Record(ar);
      if (!r.imported) {
        int64_t mt = T;
        for (const Op& op : ops) {
          w.Record(Slice(++id_next, 500 + d, mt, Modeled(op), op.name,
                         std::string(op.roofline) == "collective" ? SliceKind::kCollective : SliceKind::kCompute, s,
                         graph, op.op_id));
          mt += Modeled(op);
        }
      }
      w.Record(CounterRecord{d, "hbm_bytes_in_use", 5'000'000'000 + T + kMs, double((200 + 10 * d + s) * kMiB)});
    }
    w.Record(CounterRecord{-1, "CreateTensor", 5'000'000'000 + T, double(40 * (s + 1))});
    for (int h = 0; h < 2; ++h) {
      w.Record(Slice(++id_next, 1000 + h, 5'000'000'000 + T, 2 * kMs, "mark_step", SliceKind::kHost, s));
    }
    ExecutionRecord e;
    e.execution_id = expected_id * 1000 + s;
    e.step = s;
    e.graph_id = graph;
    e.cache = s == 0 || s == kProfileRecompileStep ? "miss" : "memory_hit";
    e.input_signature = "[]";
    e.cause = "mark_step";
    e.host_start_ns = 5'000'000'000 + T - kMs;
    e.host_dur_ns = 20 * kUs;
    w.Record(e);
    StepRecord step;
    step.step = s;
    step.loss = 2.3 - 0.2 * s;
    step.wall_ns = kStep + Jitter(s, 0);
    step.has_eval_loss = s % 4 == 3;
    step.eval_loss = 2.4 - 0.2 * s;
    w.Record(step);
    if (!r.imported) {
      CompilationRecord c;
      c.compile_id = s + 1;
      c.step = s;
      c.graph_id = graph;
      c.call_site = "samples/mlp.cc:82 mark_step";
      c.host_start_ns = 5'000'000'000 + T;
      if (s == 0) {
        c.cache = "miss";
        c.cause_kind = "first_compile";
        c.cause_detail = "first graph at this call site";
        c.source_file = "samples/mlp.cc";
        c.source_line = 82;
        c.duration_ns = 40 * kMs;
      } else if (s == kProfileRecompileStep) {
        c.cache = "miss";
        c.cause_kind = "input_shape_changed";
        c.cause_detail = "x f32[64,784] -> f32[48,784]";
        c.source_file = "samples/mlp.cc";
        c.source_line = 41;
        c.duration_ns = 30 * kMs;
        c.prev_graph_id = 1;
      } else {
        c.cache = "memory_hit";
        c.duration_ns = 50 * kUs;
      }
      w.Record(c);
    }
  }
  return w.EndRunAndCheck();
}

}  // namespace

absl::Status WriteProfileDb(const std::string& path, const std::vector<ProfileRun>& runs) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix, ec);
  auto writer = store::Writer::Open(path);
  if (!writer.ok()) return writer.status();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (absl::Status st = WriteRun(**writer, runs[i], static_cast<int64_t>(i + 1)); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace shardscope::app::testing
