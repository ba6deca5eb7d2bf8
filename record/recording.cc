#include "record/recording.h"

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/cost_model.h"
#include "core/context.h"
#include "profiler/trace/recorder.h"
#include "runtime/cpu_calibration.h"
#include "runtime/faults.h"
#include "runtime/simulate.h"
#include "store/json_text.h"
#include "store/sim_timeline.h"
#include "store/writer.h"

#ifndef SHARDSCOPE_VERSION
#define SHARDSCOPE_VERSION "dev"
#endif

namespace shardscope {
namespace {

// One recording at a time: the recorder and the runtime are process-wide.
std::atomic<bool> g_recording{false};

std::vector<std::string> DefaultAxes(size_t rank) {
  if (rank == 1) return {"data"};
  if (rank == 2) return {"data", "model"};
  std::vector<std::string> axes;
  for (size_t k = 0; k < rank; ++k) axes.push_back(absl::StrCat("axis", k));
  return axes;
}

// The checks that need no file: a bad option writes nothing.
absl::Status Validate(const RecordingOptions& o, int64_t* chips) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat("Recording: ", parts...)); };
  if (o.db.empty()) return bad("no database path (set RecordingOptions::db, e.g. \"run.db\")");
  if (o.workload.empty()) return bad("no workload name (set RecordingOptions::workload)");
  if (o.mesh.empty()) return bad("the mesh has no axes (e.g. .mesh = {2, 2})");
  *chips = 1;
  for (int64_t d : o.mesh) {
    if (d < 1) return bad("mesh axis of size ", d, " in [", absl::StrJoin(o.mesh, ","), "]: sizes must be >= 1");
    *chips *= d;
  }
  if (!o.mesh_axes.empty() && o.mesh_axes.size() != o.mesh.size())
    return bad(o.mesh_axes.size(), " axis names (", absl::StrJoin(o.mesh_axes, ", "), ") for a mesh of ",
               o.mesh.size(), " axes");
  if (!o.mesh_device_ids.empty()) {
    if (static_cast<int64_t>(o.mesh_device_ids.size()) != *chips)
      return bad("mesh_device_ids has ", o.mesh_device_ids.size(), " chips but the mesh [", absl::StrJoin(o.mesh, ","),
                 "] has ", *chips);
    std::vector<bool> seen(*chips, false);
    for (int64_t id : o.mesh_device_ids) {
      if (id < 0 || id >= *chips) return bad("mesh_device_ids names chip ", id, ": the chips are 0 to ", *chips - 1);
      if (seen[id]) return bad("mesh_device_ids names chip ", id, " twice");
      seen[id] = true;
    }
  }
  if (o.hosts < 1) return bad("hosts is ", o.hosts, ": needs at least 1");
  if (*chips % o.hosts != 0) return bad(*chips, " chips do not split evenly over ", o.hosts, " hosts");
  if (auto p = compiler::FindProfile(o.profile); !p.ok()) return bad(p.status().message());
  if (o.simulate && o.topology.empty())
    return bad("a simulated run needs a topology (e.g. .topology = \"16x16x16\")");
  if (o.simulate && (o.trace != trace::SliceDetail::kKernels || o.trace_first_step != 0 || o.trace_last_step != -1 ||
                     o.trace_ring_steps != 0 || o.trace_max_bytes != 0))
    return bad("timeline capture options do not apply to a simulated run (it stores schedules, not slices)");
  if (!o.topology.empty()) {
    auto ic = runtime::Interconnect::Parse(o.topology);
    if (!ic.ok()) return bad(ic.status().message());
    if (ic->num_chips() != *chips)
      return bad(
          "topology ", o.topology, " has ", ic->num_chips(), " chips but the mesh [",
          absl::StrJoin(o.mesh, ","), "] has ", *chips,
          o.simulate ? ": the mesh must cover the simulated topology exactly"
                     : ": a real run computes every chip of its topology, so the mesh must cover it exactly",
          ic->num_chips() > *chips && !o.simulate ? " (larger pods need simulated mode: .simulate = true)"
                                                  : "");
    if (o.hosts != 1 && o.hosts != ic->num_hosts())
      return bad("hosts ", o.hosts, " disagrees with topology ", o.topology, ", which has ", ic->num_hosts(),
                 " host", ic->num_hosts() == 1 ? "" : "s", " (leave --hosts out: the topology decides)");
  }
  for (const std::string& spec : o.faults)
    if (auto f = runtime::ParseFault(spec); !f.ok()) return bad(f.status().message());
  if (o.trace_first_step < 0) return bad("trace_first_step is ", o.trace_first_step, ": steps start at 0");
  if (o.trace_last_step < -1 || (o.trace_last_step >= 0 && o.trace_last_step < o.trace_first_step))
    return bad("trace_last_step ", o.trace_last_step, " is before trace_first_step ", o.trace_first_step,
               " (-1 for no end)");
  if (o.trace_ring_steps < 0) return bad("trace_ring_steps is ", o.trace_ring_steps, ": 0 keeps every step");
  if (o.trace_max_bytes < 0) return bad("trace_max_bytes is ", o.trace_max_bytes, ": 0 for no cap");
  if (!o.config_json.empty()) {
    auto j = nlohmann::json::parse(o.config_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return bad("config_json is not a JSON object: ", o.config_json);
  }
  return absl::OkStatus();
}

std::string Directory(const char* file) {
  std::string f = file;
  size_t slash = f.rfind('/');
  return slash == std::string::npos ? "" : f.substr(0, slash + 1);
}

}  // namespace

Recording::Recording(RecordingOptions options, Mesh mesh) : options_(std::move(options)), mesh_(std::move(mesh)) {}

absl::StatusOr<std::unique_ptr<Recording>> Recording::Start(RecordingOptions o, std::source_location caller) {
  int64_t chips = 0;
  if (absl::Status s = Validate(o, &chips); !s.ok()) return s;
  // Stored in one spelling each, as the CLI stores them ("004x4" is 4x4).
  if (!o.topology.empty()) o.topology = runtime::Interconnect::Parse(o.topology)->spec();
  for (std::string& spec : o.faults) spec = runtime::ParseFault(spec)->spec;
  if (o.mesh_axes.empty()) o.mesh_axes = DefaultAxes(o.mesh.size());
  std::vector<int64_t> ids = o.mesh_device_ids;
  if (ids.empty())
    for (int64_t d = 0; d < chips; ++d) ids.push_back(d);
  auto mesh = Mesh::Create(ids, o.mesh, o.mesh_axes);
  if (!mesh.ok()) return absl::InvalidArgumentError(absl::StrCat("Recording: ", mesh.status().message()));
  // A database that cannot be written fails now, not after the calibration below.
  if (absl::Status s = store::CheckWritableDbPath(o.db); !s.ok()) return s;
  // The modeled clock's chip, resolved before anything is written: `cpu` is
  // measured here the first time on this machine, and a pinned profile file
  // that cannot be read fails the run before it starts.
  std::string profile_values;
  if (auto p = runtime::ResolveProfile(o.profile, &profile_values); !p.ok())
    return absl::Status(p.status().code(), absl::StrCat("Recording: ", p.status().message()));
  if (g_recording.exchange(true))
    return absl::FailedPreconditionError("Recording: another recording is still open; Finish() it first");

  store::WriterOptions writer_options;
  writer_options.ring_steps = o.trace_ring_steps;
  writer_options.max_capture_bytes = o.trace_max_bytes;
  auto writer = store::Writer::Open(o.db, writer_options);
  if (!writer.ok()) {
    g_recording = false;
    return writer.status();
  }
  std::unique_ptr<Recording> rec(new Recording(std::move(o), std::move(*mesh)));
  const RecordingOptions& opt = rec->options_;
  std::optional<runtime::Interconnect> wiring;
  if (!opt.topology.empty()) wiring = *runtime::Interconnect::Parse(opt.topology);  // checked in Validate
  const int hosts = wiring ? wiring->num_hosts() : opt.hosts;
  const std::string mesh_text = absl::StrJoin(opt.mesh, "x");
  rec->topology_ = wiring ? wiring->Describe()
                          : absl::StrCat(hosts, hosts == 1 ? " host x " : " hosts x ", chips / hosts, " chips");
  rec->previous_source_root_ = SourceRoot();
  SetSourceRoot(opt.source_root.empty() ? Directory(caller.file_name()) : opt.source_root);

  trace::ResetHostClock();
  const trace::CaptureSettings capture{opt.trace, opt.trace_first_step,
                                       opt.trace_last_step < 0 ? INT_MAX : opt.trace_last_step};
  // The default keeps everything: records go straight to the writer, no filter in between.
  if (!capture.keeps_everything()) rec->capture_ = std::make_unique<trace::CaptureFilter>(writer->get(), capture);
  trace::SetRecorder(rec->capture_ ? static_cast<trace::Recorder*>(rec->capture_.get()) : writer->get());
  trace::RunRecord run;
  run.sample = opt.workload;
  run.mesh = mesh_text;
  run.mesh_axes = absl::StrJoin(opt.mesh_axes, ",");
  run.sharding = opt.sharding;
  // The persistent compile cache: the option, else $SHARDSCOPE_CACHE_DIR. The
  // config names it (`cache_dir`): the metrics report counts disk hits by it.
  std::string cache_dir = opt.cache_dir;
  if (cache_dir.empty())
    if (const char* env = std::getenv("SHARDSCOPE_CACHE_DIR")) cache_dir = env;
  if (opt.config_json.empty()) {
    nlohmann::json j = {{"workload", opt.workload},   {"mesh", mesh_text},
                                     {"mesh_axes", opt.mesh_axes}, {"hosts", hosts},
                                     {"profile", opt.profile},     {"sharding", opt.sharding},
                                     {"fusion", opt.fusion},       {"cache_dir", cache_dir},
                                     {"cache_capacity", opt.cache_capacity}};
    if (!opt.topology.empty()) j["topology"] = opt.topology;
    if (!opt.faults.empty()) j["faults"] = opt.faults;
    j["profile_values"] = nlohmann::json::parse(profile_values);
    run.config_json = store::JsonText(j);
  } else if (auto j = nlohmann::json::parse(opt.config_json); !j.contains("cache_dir") || !j.contains("profile_values")) {
    if (!j.contains("cache_dir")) j["cache_dir"] = cache_dir;
    // Which values the modeled clock used (measured when, cached where): the VM's speed varies by the day.
    if (!j.contains("profile_values")) j["profile_values"] = nlohmann::json::parse(profile_values);
    run.config_json = store::JsonText(j);
  } else {
    run.config_json = opt.config_json;  // as given, byte for byte
  }
  run.topology = rec->topology_;
  run.tool_version = SHARDSCOPE_VERSION;
  run.started_at_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  run.num_hosts = hosts;
  run.num_devices = static_cast<int>(chips);
  run.profile = opt.profile;
  run.clock_kinds = opt.simulate ? "host,modeled" : "host,device,modeled";
  run.simulated = opt.simulate;
  // From here a failure leaves the run's row 'running', as a process that
  // died would: what was written stays readable.
  auto fail = [&](absl::Status s) {
    rec->finished_ = true;  // not by the destructor: the run did not start
    if (Initialized()) Shutdown();
    trace::SetRecorder(nullptr);
    SetSourceRoot(rec->previous_source_root_);
    g_recording = false;
    return s;
  };
  auto run_id = (*writer)->StartRun(run);
  if (!run_id.ok()) return fail(run_id.status());
  rec->run_id_ = *run_id;
  rec->writer_ = std::move(*writer);
  // Said now, not at the end: a run killed half way shows no silent gap either.
  if (rec->capture_)
    for (std::string& note : rec->capture_->NotesAtStart()) rec->writer_->AddCaptureNote(std::move(note));
  // A simulated chip has the profile's memory; a real one this machine's budget.
  const int64_t hbm = opt.simulate ? compiler::FindProfile(opt.profile)->hbm_bytes : int64_t{16} << 30;
  // A new run compares its graphs with its own only: the graphs an earlier
  // recording's runtime kept (for mesh_changed after a bare Shutdown and
  // Init) belong to another run, whose graph ids this run's rows cannot name.
  internal::Previous() = {};
  if (absl::Status s = Init({.num_hosts = hosts,
                             .chips_per_host = static_cast<int>(chips / hosts),
                             .hbm_bytes = hbm,
                             .cache_dir = cache_dir,
                             .cache_capacity = opt.cache_capacity,
                             .topology = opt.topology,
                             .recompile_notices = opt.recompile_notices,
                             .simulate = opt.simulate,
                             .profile = opt.profile});
      !s.ok())
    return fail(s);
  if (!opt.faults.empty()) {
    std::vector<runtime::Fault> faults;
    for (const std::string& spec : opt.faults) faults.push_back(*runtime::ParseFault(spec));  // parsed in Validate
    if (absl::Status s = GetClient().SetFaults(runtime::FaultPlan(std::move(faults), opt.fault_seed)); !s.ok())
      return fail(absl::InvalidArgumentError(absl::StrCat("Recording: ", s.message())));
  }
  // A simulated run stores its schedule step by step as it goes (a run killed
  // part way keeps what it laid out); an error there ends the run at Finish.
  if (runtime::Simulator* sim = GetClient().simulator())
    sim->SetOnStepsDone([r = rec.get()](const runtime::Simulator& s) { r->StoreSimulatedSoFar(s).IgnoreError(); });
  // The modeled clock's chip, before anything compiles (ops record their cost on it).
  if (absl::Status s = GetClient().SetProfile(opt.profile); !s.ok()) return fail(s);
  GetClient().set_fusion(opt.fusion);
  // Device rows: each chip's host and coordinates in the mesh (where the mesh's order puts it).
  const std::vector<int64_t>& order = rec->mesh_.device_ids();
  std::vector<int64_t> position(chips);
  for (int64_t p = 0; p < chips; ++p) position[order[p]] = p;
  // Each chip's links, gathered in one pass: a GPU cluster of 1024 hosts has
  // 4.2M links, and a pass over all of them per chip took a minute and a half.
  std::vector<std::vector<const runtime::Link*>> links_of(wiring ? chips : 0);
  if (wiring)
    for (const runtime::Link& l : wiring->links())
      for (int64_t end : {l.a, l.b})
        if (end >= 0 && end < chips) links_of[end].push_back(&l);
  // A chip's links of one kind share every field but the peer, so each kind
  // is one object with its peers listed: a chip of a GPU cluster of 512 hosts
  // has 511 rail links, and an object per link made its device row 46 KB,
  // 2.5 KB of file per chip-step over 20 steps. Each kind's text is made once
  // for the run (as nlohmann writes it, keys sorted) and the peers appended.
  std::string heads[2];
  if (wiring) {
    const compiler::ChipProfile& p = GetClient().profile();
    for (bool dcn : {false, true}) {
      std::string t = nlohmann::json({{"bandwidth", dcn ? p.dcn_bandwidth : p.link_bandwidth},
                                      {"kind", dcn ? "dcn" : "ici"},
                                      {"latency_ns", dcn ? p.dcn_latency_ns : p.link_latency_ns},
                                      {"peers", nlohmann::json::array()}})
                          .dump();
      heads[dcn] = t.substr(0, t.size() - 2);  // without "]}"
    }
  }
  for (int64_t d = 0; d < chips; ++d) {
    trace::DeviceRecord dr;
    dr.device_id = static_cast<int>(d);
    dr.host_id = static_cast<int>(d / (chips / hosts));
    std::vector<int64_t> coords(opt.mesh.size());
    for (int64_t k = static_cast<int64_t>(opt.mesh.size()) - 1, rest = position[d]; k >= 0; --k) {
      coords[k] = rest % opt.mesh[k];
      rest /= opt.mesh[k];
    }
    dr.coords = absl::StrCat("[", absl::StrJoin(coords, ","), "]");
    dr.hbm_bytes = GetClient().topology().device(static_cast<int>(d)).hbm_bytes();
    dr.peak_flops = GetClient().profile().peak_flops;
    if (wiring) {
      dr.topology_coords = wiring->CoordsText(static_cast<int>(d));
      std::string& text = dr.links_json;
      text.reserve(2 + heads[0].size() + heads[1].size() + 8 * links_of[d].size());
      text = "[";
      for (bool dcn : {false, true}) {
        std::string peers;
        for (const runtime::Link* l : links_of[d])
          if (l->dcn == dcn) absl::StrAppend(&peers, peers.empty() ? "" : ",", l->a == d ? l->b : l->a);
        if (!peers.empty()) absl::StrAppend(&text, text.size() > 1 ? "," : "", heads[dcn], peers, "]}");
      }
      text += "]";
      text.shrink_to_fit();  // a pod's device rows wait in the recorder's queue
    }
    trace::recorder().Record(dr);
  }
  trace::recorder().Record(trace::MeshRecord{0, absl::StrCat("[", absl::StrJoin(opt.mesh, ","), "]"),
                                             run.mesh_axes, absl::StrJoin(order, ",")});
  return rec;
}

absl::Status Recording::StoreSimulatedSoFar(const runtime::Simulator& sim) {
  std::lock_guard<std::mutex> l(sim_mu_);
  if (!sim_status_.ok()) return sim_status_;  // said once; the rest is written at the end or lost with it
  if (sim_runs_stored_ == sim.runs().size() && sim_chips_stored_) return absl::OkStatus();
  writer_->Flush();  // the names, tracks and steps first; then the schedules, over a connection of their own
  sim_status_ = store::WriteSimTimeline(options_.db, {.run_id = run_id_,
                                                      .programs = &sim.programs(),
                                                      .chips = &sim.chips(),
                                                      .track_ids = &GetClient().modeled_tracks(),
                                                      .runs = &sim.runs(),
                                                      .first_run = sim_runs_stored_,
                                                      .stored_programs = &sim_programs_stored_,
                                                      .write_chips = !sim_chips_stored_});
  if (sim_status_.ok()) {
    sim_runs_stored_ = sim.runs().size();
    sim_chips_stored_ = true;
  }
  return sim_status_;
}

absl::Status Recording::StoreSimulation() {
  if (!options_.simulate || !Initialized()) return absl::OkStatus();
  runtime::Client& client = GetClient();
  client.Synchronize();
  runtime::Simulator* sim = client.simulator();
  if (!sim) return absl::OkStatus();
  sim->SetOnStepsDone(nullptr);  // nothing runs now: the rest is stored here
  return StoreSimulatedSoFar(*sim);
}

void Recording::Abandon(const std::string& why) {
  if (finished_) return;
  if (absl::Status s = StoreSimulation(); !s.ok()) finish_status_ = s;
  finished_ = true;
  Shutdown();
  if (writer_ && !why.empty()) writer_->SetAbandonReason(why);
  trace::SetRecorder(nullptr);
  capture_.reset();
  writer_.reset();  // writes what is queued and closes the file, without EndRun
  SetSourceRoot(previous_source_root_);
  g_recording = false;
}

bool Recording::failed() const { return writer_ && writer_->failed(); }

absl::Status Recording::write_status() const { return writer_ ? writer_->status() : finish_status_; }

absl::Status Recording::Finish() { return End("finished", ""); }

absl::Status Recording::EndByHangDetector(const std::string& message) { return End("hang detected", message); }

absl::Status Recording::EndWithError(const std::string& error) { return End("failed", error); }

absl::Status Recording::End(const std::string& status, const std::string& note) {
  if (finished_) return finish_status_;
  absl::Status simulated = StoreSimulation();
  finished_ = true;
  // Which links the run's collectives crossed is known once every program has run.
  if (Initialized()) {
    GetClient().Synchronize();
    faults_without_effect_ = GetClient().FaultsWithoutEffect();
  }
  Shutdown();  // every queued program has run: the steps the run took are known
  if (capture_)
    if (std::string note = capture_->NoteAtEnd(); !note.empty()) writer_->AddCaptureNote(std::move(note));
  // The machine's speed again at the end of a real run whose `cpu` profile
  // chose its passes by the speed at its start: a simulation calibrated from
  // this run sees whether the speed held while it ran (docs/cost_model.md,
  // "The machine's speed moves").
  if (!options_.simulate && options_.profile == "cpu")
    if (auto c = runtime::CurrentCpuCalibration(); c.ok() && c->speed.measured())
      writer_->SetConfigField("speed_at_end", runtime::MeasureSpeedProbe().Json());
  if (!faults_without_effect_.empty()) {
    std::vector<std::string> stored;
    for (const auto& w : faults_without_effect_) stored.push_back(w.stored);
    writer_->SetConfigField("fault_notes", nlohmann::json(stored).dump());
  }
  // The run's metrics report is computed and stored here.
  if (status == "hang detected")
    writer_->EndRunByHangDetector(note);
  else if (status == "failed")
    writer_->EndRunFailed(note);
  else
    writer_->EndRun();
  if (absl::Status s = writer_->status(); !s.ok())
    finish_status_ = absl::Status(s.code(), absl::StrCat("writing ", options_.db, ": ", s.message()));
  else if (!simulated.ok())
    finish_status_ = simulated;
  trace::SetRecorder(nullptr);
  capture_.reset();
  writer_.reset();  // closes the file
  SetSourceRoot(previous_source_root_);
  g_recording = false;
  return finish_status_;
}

Recording::~Recording() {
  if (!finished_) Finish().IgnoreError();
}

}  // namespace shardscope
