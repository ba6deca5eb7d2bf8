// `shardscope replay DB [--run N]`: re-executes a stored run's programs on the
// current build and compares the new run with the stored one (issue 17).
//
// Each program is parsed again from graphs.ir_text and compiled anew (so its
// fingerprint is computed, never copied); the executions run in their stored
// order, step by step, on the stored mesh and hosts, with synthetic inputs
// (zeros: the run did not save its values). The new run lands in the same
// file, its config_json naming the run it replays, with its own compilations,
// executions and timelines; then the comparison (`shardscope diff`) is printed.
// With --modeled (or --topology) the run is re-simulated instead (the
// simulator of runtime/simulate.h, on the profile and topology chosen by
// replay_target.h): the replay is a simulated run, compared on the modeled clock.
#include "ui/cli/replay.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/cost_model.h"
#include "compiler/literal.h"
#include "compiler/parser.h"
#include "compiler/remesh.h"
#include "core/context.h"
#include "core/lazy.h"
#include "nlohmann/json.hpp"
#include "profiler/analysis/compare.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/run_report.h"
#include "profiler/trace/recorder.h"
#include "record/recording.h"
#include "runtime/client.h"
#include "runtime/interconnect.h"
#include "store/json_text.h"
#include "store/reader.h"
#include "ui/cli/replay_map.h"
#include "ui/cli/replay_target.h"
#include "ui/cli/terminal.h"

namespace shardscope::cli {

const char kReplayHelp[] =
    "usage: shardscope replay DB [--run N] [--profile cpu|tpu-v4|h100] [--modeled]\n"
    "                         [--topology T] [--mesh-map M | --dcn-mesh AxB] [--quiet]\n"
    "  Re-executes a stored run on this build: every program is parsed again from\n"
    "  its stored IR and compiled anew (fingerprints computed again and checked\n"
    "  against the stored ones), then the run's executions run in their stored\n"
    "  order on the stored mesh, with synthetic inputs (zeros). The replay is a new\n"
    "  run in DB (config_json.replay_of names the run it replays); the comparison\n"
    "  with the stored run is printed (as `shardscope diff DB --runs N,NEW`).\n"
    "  A run imported from another tool has no IR and cannot be replayed.\n"
    "  --run N        the run to replay (default: the newest)\n"
    "  --profile P    the modeled clock's target chip for the replay (default: the\n"
    "                 stored run's): \"what would this run do on an h100\"; the\n"
    "                 comparison is then on the modeled clock\n"
    "  --modeled      re-simulate instead of executing (docs/simulate.md): nothing\n"
    "                 is computed; every chip's program is laid out on the modeled\n"
    "                 clock of --profile over the links of --topology. The replay\n"
    "                 is a simulated run; the comparison is on the modeled clock\n"
    "  --topology T   re-simulate on another topology (implies --modeled): a torus\n"
    "                 4x4x4 or a GPU cluster gpu:4x8. Default: the stored run's,\n"
    "                 else one made from its mesh (h100: GPU hosts of up to 8,\n"
    "                 others: a torus of the mesh's shape). With another number of\n"
    "                 chips the mesh's first axis (data) takes them, the others\n"
    "                 keep their size, and every program is re-partitioned for it\n"
    "  --mesh-map M   how the mesh's axes lie on the topology, as `run` takes it\n"
    "                 (auto, row-major, AXIS=DIMS; default auto: the axes ranked by\n"
    "                 the re-partitioned programs' collectives); every program is\n"
    "                 re-partitioned for that order, and the replay says which\n"
    "  --dcn-mesh AxB on gpu:NxM, the hosts each mesh axis spans (as `run`)\n"
    "  --quiet        print only the comparison\n"
    "  Exit: 0 replayed, 1 the run cannot be read or replayed (or a program's\n"
    "  fingerprint or op count differs from the stored one), 2 bad arguments\n"
    "  (an unknown profile, a topology that is malformed or does not fit the mesh).\n";

namespace {

int Usage(const std::string& problem) {
  std::cerr << "error: " << problem << "\n" << kReplayHelp;
  return 2;
}

int Fail(const std::string& problem) {
  std::cerr << "error: " << problem << "\n";
  return 1;
}

struct StoredGraph {
  int64_t graph_id = 0;
  std::string fingerprint, call_site, ir_text;
  int64_t op_count = 0;
};

// Where the stored run says a tensor's layout came from, and where it was made.
struct StoredTensor {
  std::string sharding_source;
  compiler::SourceLoc created;
};

struct StoredExecution {
  int step = 0;
  int64_t graph_id = 0;
};

struct StoredRun {
  std::string sample, sharding, profile;
  std::string topology;  // its --topology spec (config_json), "" when none
  bool simulated = false;
  std::vector<int64_t> mesh;
  std::vector<int64_t> device_ids;  // meshes.device_ids: the chip at each position (empty: 0..N-1)
  std::vector<std::string> axes;
  int hosts = 1;
  bool fusion = true;
  std::vector<StoredGraph> graphs;
  std::vector<StoredExecution> executions;
  std::map<std::string, StoredTensor> tensors;  // by name
  std::vector<std::string> faults;  // the faults injected into it (config_json.faults): the replay has none
  // A run that did not finish (the hang detector, a signal, a crash) may have
  // started a step it never completed: those executions are not replayed, so
  // the replay stops where the stored run's steps stop. "" when nothing was cut.
  std::string cut_note;
};

// What the replay needs of run `run`, or why it cannot be replayed.
absl::StatusOr<StoredRun> ReadStoredRun(const store::Reader& r, int64_t run) {
  const std::string id = absl::StrCat(run);
  auto q = r.Query("SELECT * FROM runs WHERE run_id = ?1", {id});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) return absl::NotFoundError(absl::StrCat(r.path(), " has no run ", run));
  if (q->Col("imported") >= 0 && q->Int(0, "imported") != 0)
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run, " of ", r.path(), " was imported from another tool's trace: it has timelines but no "
                     "programs (IR) to compile, so it cannot be replayed"));
  StoredRun s;
  s.sample = q->Text(0, "sample");
  s.sharding = q->Text(0, "sharding");
  s.profile = q->Text(0, "profile", "cpu");
  s.hosts = static_cast<int>(std::max<int64_t>(1, q->Int(0, "num_hosts")));
  for (absl::string_view d : absl::StrSplit(q->Text(0, "mesh"), 'x')) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(d, &n) || n < 1)
      return absl::DataLossError(absl::StrCat("run ", run, "'s mesh '", q->Text(0, "mesh"), "' is not RxC"));
    s.mesh.push_back(n);
  }
  for (absl::string_view a : absl::StrSplit(q->Text(0, "mesh_axes"), ',', absl::SkipEmpty())) s.axes.emplace_back(a);
  if (s.axes.size() != s.mesh.size()) s.axes.clear();  // Recording names them
  const nlohmann::json config = nlohmann::json::parse(q->Text(0, "config_json", "{}"), nullptr, false);
  if (config.is_object() && config.contains("fusion") && config["fusion"].is_boolean()) s.fusion = config["fusion"];
  if (config.is_object() && config.contains("topology") && config["topology"].is_string()) s.topology = config["topology"];
  auto faults = analysis::ReadRunFaults(r, run);
  if (!faults.ok()) return faults.status();
  s.faults = *std::move(faults);
  s.simulated = q->Col("simulated") >= 0 && q->Int(0, "simulated") != 0;
  // The mesh's order on its chips (run --mesh-map): the programs' shardings name these chips.
  auto mq = r.Query("SELECT device_ids FROM meshes WHERE run_id = ?1 ORDER BY mesh_id LIMIT 1", {id});
  if (!mq.ok()) return mq.status();
  if (!mq->rows.empty()) {
    int64_t chips = 1;
    for (int64_t n : s.mesh) chips *= n;
    for (absl::string_view d : absl::StrSplit(mq->Text(0, "device_ids"), ',', absl::SkipEmpty())) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &n) || n < 0 || n >= chips)
        return absl::DataLossError(absl::StrCat("run ", run, "'s meshes.device_ids '", mq->Text(0, "device_ids"),
                                                "' is not a list of its ", chips, " chips"));
      s.device_ids.push_back(n);
    }
    if (static_cast<int64_t>(s.device_ids.size()) != chips) s.device_ids.clear();
  }
  auto g = r.Query("SELECT graph_id, fingerprint, call_site, ir_text, op_count FROM graphs WHERE run_id = ?1"
                   " ORDER BY graph_id",
                   {id});
  if (!g.ok()) return g.status();
  for (size_t i = 0; i < g->rows.size(); ++i)
    s.graphs.push_back({g->Int(i, "graph_id"), g->Text(i, "fingerprint"), g->Text(i, "call_site"),
                        g->Text(i, "ir_text"), g->Int(i, "op_count")});
  if (s.graphs.empty())
    return absl::FailedPreconditionError(absl::StrCat("run ", run, " of ", r.path(), " stored no programs: nothing to replay"));
  auto t = r.Query("SELECT name, sharding_source, source_file, source_line FROM tensors WHERE run_id = ?1"
                   " ORDER BY step, tensor_id",
                   {id});
  if (!t.ok()) return t.status();
  for (size_t i = 0; i < t->rows.size(); ++i)
    s.tensors[t->Text(i, "name")] = {t->Text(i, "sharding_source"),
                                     {t->Text(i, "source_file"), static_cast<int>(t->Int(i, "source_line"))}};
  auto e = r.Query("SELECT step, graph_id FROM executions WHERE run_id = ?1 ORDER BY execution_id", {id});
  if (!e.ok()) return e.status();
  for (size_t i = 0; i < e->rows.size(); ++i)
    s.executions.push_back({static_cast<int>(e->Int(i, "step")), e->Int(i, "graph_id")});
  auto header = analysis::ReadRunHeader(r, run);
  if (!header.ok()) return header.status();
  if (header->status != "finished" && header->status != "running" && !s.executions.empty()) {
    auto last = r.Query("SELECT max(step) AS last FROM steps WHERE run_id = ?1", {id});
    if (!last.ok()) return last.status();
    const bool any = last->Col("last") >= 0 && !last->Text(0, "last").empty();
    const int64_t last_step = any ? last->Int(0, "last") : -1;
    const size_t kept = static_cast<size_t>(
        std::count_if(s.executions.begin(), s.executions.end(), [&](const StoredExecution& x) { return x.step <= last_step; }));
    const std::string how = header->status == "hang detected" ? "was ended by the hang detector"
                            : header->status == "interrupted" ? "was interrupted"
                            : header->status == "incomplete"  ? "is incomplete"
                            : header->status == "failed"      ? "failed"
                                                              : header->status;  // "ended abnormally"
    if (kept == 0)
      return absl::FailedPreconditionError(
          absl::StrCat("run ", run, " of ", r.path(), " ", how, " before its first step completed: nothing to replay",
                       header->status_detail.empty() ? "" : absl::StrCat(" (", header->status_detail, ")")));
    if (kept < s.executions.size()) {
      const int cut_step = s.executions[kept].step;
      s.cut_note = absl::StrCat("note: run ", run, " ", how, " in step ", cut_step, ", which never completed there (",
                                s.executions.size() - kept, kept + 1 == s.executions.size() ? " execution" : " executions",
                                " left out): the replay stops after step ", last_step, ", as the stored run did\n\n");
      s.executions.resize(kept);
    }
  }
  return s;
}

struct Replayed {
  std::shared_ptr<const runtime::Executable> exe;
  std::vector<std::string> names;  // each input's name, as the stored program names it
  bool executed = false;
};

// Which inputs the stored run moved to the chips before each program run:
// (step, graph) -> the names its transfer slices carry ("transfer tokens" ->
// "tokens"), from one chip's lanes. Empty when the run kept no transfers
// (--trace off or steps): each input is then moved once, when first needed.
absl::StatusOr<std::map<std::pair<int, int64_t>, std::set<std::string>>> ReadStoredTransfers(const store::Reader& r,
                                                                                          int64_t run) {
  std::map<std::pair<int, int64_t>, std::set<std::string>> out;
  auto first = r.Query("SELECT min(device_id) AS d FROM tracks WHERE run_id = ?1 AND device_id IS NOT NULL",
                       {absl::StrCat(run)});
  if (!first.ok()) return first.status();
  if (first->rows.empty() || first->Text(0, "d").empty()) return out;
  // The chip's tracks as a literal list: a simulated run's lanes are made on
  // demand, only for the tracks a query names.
  auto list = store::ChipTrackIdList(r, run, first->Int(0, "d"));
  if (!list.ok()) return list.status();
  auto q = r.Query(absl::StrCat("SELECT DISTINCT s.step AS step, s.graph_id AS graph, n.name AS name FROM slices s",
                                " JOIN names n ON n.name_id = s.name_id WHERE s.run_id = ?1 AND s.track_id IN ", *list,
                                " AND s.kind = 'transfer' AND s.depth = 0 AND s.step IS NOT NULL",
                                " AND s.graph_id IS NOT NULL"),
                   {absl::StrCat(run)});
  if (!q.ok()) return q.status();
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const std::string name = q->Text(i, "name");
    if (!absl::StartsWith(name, "transfer ")) continue;
    out[{static_cast<int>(q->Int(i, "step")), q->Int(i, "graph")}].insert(name.substr(9));
  }
  return out;
}

}  // namespace

int RunReplay(const std::vector<std::string>& args) {
  std::string db;
  std::optional<int64_t> run;
  bool quiet = false, modeled = false;
  std::string profile, topology, mesh_map, dcn_mesh;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--quiet") {
      quiet = true;
    } else if (args[i] == "--modeled") {
      modeled = true;
    } else if (args[i] == "--profile") {
      if (i + 1 >= args.size()) return Usage("--profile needs a chip profile (cpu, tpu-v4 or h100)");
      profile = args[++i];
      if (auto p = compiler::FindProfile(profile); !p.ok()) return Usage(absl::StrCat("--profile: ", p.status().message()));
    } else if (args[i] == "--topology") {
      if (i + 1 >= args.size()) return Usage("--topology needs a topology (e.g. 4x4x4 or gpu:4x8)");
      topology = args[++i];
      if (auto t = runtime::Interconnect::Parse(topology); !t.ok()) return Usage(std::string(t.status().message()));
      modeled = true;
    } else if (args[i] == "--mesh-map") {
      if (i + 1 >= args.size()) return Usage("--mesh-map needs a map (auto, row-major or AXIS=DIMS, e.g. model=x)");
      mesh_map = args[++i];
      if (auto m = runtime::ParseMeshMap(mesh_map); !m.ok()) return Usage(std::string(m.status().message()));
    } else if (args[i] == "--dcn-mesh") {
      if (i + 1 >= args.size()) return Usage("--dcn-mesh needs the hosts per mesh axis (e.g. 4x1)");
      dcn_mesh = args[++i];
      if (auto m = runtime::ParseDcnMesh(dcn_mesh); !m.ok()) return Usage(std::string(m.status().message()));
    } else if (args[i] == "--run") {
      int64_t n = 0;
      if (i + 1 >= args.size() || !absl::SimpleAtoi(args[i + 1], &n) || n < 1)
        return Usage("--run takes a run id (1, 2, ...)");
      run = n;
      ++i;
    } else if (args[i].rfind("--", 0) == 0) {
      return Usage(absl::StrCat("unknown option '", args[i], "'"));
    } else if (db.empty()) {
      db = args[i];
    } else {
      return Usage("replay takes one database");
    }
  }
  if (db.empty()) return Usage("replay needs the database DB");

  StoredRun stored;
  {
    auto r = store::Reader::Open(db, store::Reader::Threads::kOneThread);
    if (!r.ok()) return Fail(std::string(r.status().message()));
    if (!run) {
      auto latest = r->LatestRunId();
      if (!latest.ok()) return Fail(std::string(latest.status().message()));
      run = *latest;
    }
    auto s = ReadStoredRun(*r, *run);
    if (!s.ok()) return Fail(std::string(s.status().message()));
    stored = *std::move(s);
  }

  const std::string stored_profile = stored.profile;
  const bool other_chip = !profile.empty() && profile != stored.profile;
  if (!profile.empty()) stored.profile = profile;
  // A simulated run computed nothing: its replay can only be simulated too.
  const bool implied = !modeled && stored.simulated;
  modeled = modeled || stored.simulated;
  std::optional<ReplayTarget> target;
  if (modeled) {
    auto t = ChooseReplayTarget(stored.mesh, stored.axes, stored.topology, stored.profile, topology);
    if (!t.ok()) return Usage(std::string(t.status().message()));
    target = *std::move(t);
  }
  const std::vector<int64_t> mesh = target ? target->mesh : stored.mesh;
  const std::string mesh_text = absl::StrJoin(mesh, "x");
  if (!target && (!mesh_map.empty() || !dcn_mesh.empty()))
    return Usage(absl::StrCat(mesh_map.empty() ? "--dcn-mesh" : "--mesh-map",
                              " lays the mesh's axes on the chips of a topology: give --topology (or --modeled)"));
  if (!dcn_mesh.empty() && !mesh_map.empty() && mesh_map != "auto")
    return Usage(absl::StrCat("--dcn-mesh ", dcn_mesh, " and --mesh-map ", mesh_map, " both place the axes: give one"));
  // The mesh on the target topology, by the same logic as `run`.
  std::optional<ReplayMeshMap> placed;
  if (target) {
    std::vector<ReplayProgram> programs;
    std::map<int64_t, int64_t> runs;
    for (const StoredExecution& e : stored.executions) ++runs[e.graph_id];
    for (const StoredGraph& g : stored.graphs)
      programs.push_back({absl::StrCat("graph ", g.graph_id, " of run ", *run), g.ir_text, runs[g.graph_id]});
    std::vector<std::string> axes = stored.axes;
    if (axes.empty()) axes = mesh.size() == 2 ? std::vector<std::string>{"data", "model"} : std::vector<std::string>{};
    auto p = axes.size() == mesh.size()
                 ? MapReplayMesh(programs, stored.mesh, stored.device_ids, mesh, axes, stored.sample,
                                 stored.sharding, target->topology, stored.profile, stored.fusion, mesh_map, dcn_mesh)
                 : absl::StatusOr<ReplayMeshMap>(absl::InvalidArgumentError(absl::StrCat(
                       "run ", *run, "'s mesh ", absl::StrJoin(stored.mesh, "x"), " names no axes to place")));
    if (!p.ok()) {
      if (p.status().code() == absl::StatusCode::kInvalidArgument)
        return Usage(absl::StrCat("--topology ", target->topology, ": ", p.status().message()));
      return Fail(absl::StrCat("run ", *run, " cannot be laid on ", target->topology, ": ", p.status().message()));
    }
    placed = *std::move(p);
  }
  // Re-partitioned when the mesh's size or its order on the chips changes.
  std::vector<int64_t> stored_order = stored.device_ids;
  if (stored_order.empty()) {
    int64_t chips = 1;
    for (int64_t n : stored.mesh) chips *= n;
    for (int64_t c = 0; c < chips; ++c) stored_order.push_back(c);
  }
  const bool relaid = target && (target->remeshed || placed->mapping.device_ids != stored_order);

  // Every program parsed (and re-partitioned for another mesh) before anything is written.
  std::vector<std::unique_ptr<compiler::Module>> modules;
  for (const StoredGraph& g : stored.graphs) {
    auto module = compiler::ParseModule(g.ir_text);
    if (!module.ok())
      return Fail(absl::StrCat("graph ", g.graph_id, " of run ", *run, ": its stored IR does not parse: ",
                               module.status().message()));
    if (relaid)
      if (absl::Status st = compiler::RemeshModule(**module, stored.mesh, stored_order, mesh,
                                                   placed->mapping.device_ids);
          !st.ok())
        return Usage(absl::StrCat("--topology ", target->topology, ": graph ", g.graph_id, " of run ", *run,
                                  " cannot be re-partitioned for a ", mesh_text, " mesh: ", st.message()));
    modules.push_back(*std::move(module));
  }

  nlohmann::json config = {{"replay_of", *run},
                           {"inputs", modeled ? "none (simulated: nothing is computed)" : "synthetic (zeros)"},
                           {"fusion", stored.fusion},
                           {"profile", stored.profile},
                           {"mesh", mesh_text}};
  if (target) {
    config["simulate"] = true;
    config["topology"] = target->topology;
    config["replay"] = {{"mode", "modeled"}, {"profile", stored.profile}, {"topology", target->topology},
                        {"mesh", mesh_text}, {"repartitioned", relaid}};
    nlohmann::json axes = nlohmann::json::array();
    for (const runtime::MeshAxisPlacement& p : placed->mapping.axes)
      axes.push_back({{"axis", p.axis}, {"size", p.size}, {"rides", p.rides}, {"hosts_spanned", p.hosts_spanned},
                      {"max_hop", p.max_hop}});
    config["mesh_map"] = {{"mode", placed->mapping.mode}, {"request", placed->request}, {"axes", axes}};
    if (placed->ranked) {
      config["mesh_map"]["ranked_by"] = placed->ranked->Describe();
      config["mesh_map"]["chosen"] = placed->ranked->tried[placed->ranked->chosen].label;
    }
  }
  // Paths are bytes, not always UTF-8: kept as U+FFFD rather than aborting the run.
  const std::string config_text = store::JsonText(config);
  auto rec = Recording::Start({.db = db,
                               .workload = stored.sample,
                               .mesh = mesh,
                               .mesh_axes = stored.axes,
                               .mesh_device_ids = placed ? placed->mapping.device_ids : std::vector<int64_t>{},
                               .hosts = target ? 1 : stored.hosts,  // a topology decides its hosts
                               .topology = target ? target->topology : "",
                               .profile = stored.profile,
                               .sharding = stored.sharding,
                               .config_json = config_text,
                               .fusion = stored.fusion,
                               .recompile_notices = false,
                               .simulate = modeled});
  if (!rec.ok()) return Fail(std::string(rec.status().message()));
  const int64_t new_run = (*rec)->run_id();
  if (!quiet) {
    std::cout << "shardscope replay — run " << *run << " of " << analysis::Printable(db) << " ("
              << analysis::Printable(stored.sample) << ", mesh "
              << absl::StrJoin(stored.mesh, "x") << ", "
              << analysis::Plural(static_cast<int64_t>(stored.graphs.size()), "program", "programs") << ", "
              << analysis::Plural(static_cast<int64_t>(stored.executions.size()), "execution", "executions") << ") "
              << (modeled ? "re-simulated" : "re-executed") << " as run " << new_run << "\n";
    if (target) {
      std::cout << "  simulated" << (implied ? " (the stored run is simulated)" : "") << ": profile "
                << stored.profile << ", topology " << target->topology << " (" << (*rec)->topology() << "), mesh "
                << mesh_text << "; nothing is computed\n";
      if (!target->topology_note.empty()) std::cout << "  " << target->topology_note << "\n";
      if (target->remeshed)
        std::cout << "  the mesh's first axis takes the topology's chips (" << absl::StrJoin(stored.mesh, "x") << " -> "
                  << mesh_text << "): every program is re-partitioned for it, the same global program (the same "
                  << "batch) over " << (*rec)->mesh().size() << " chips\n";
      std::cout << "  mesh axes on " << target->topology << " (" << placed->mapping.mode
                << (placed->request != placed->mapping.mode ? absl::StrCat(": ", placed->request) : "")
                << "): " << placed->mapping.Describe() << "\n";
      if (placed->ranked) std::cout << "    " << placed->ranked->Describe() << "\n";
    }
  }

  runtime::Client& client = GetClient();
  std::map<int64_t, Replayed> by_graph;  // stored graph id -> its replay
  std::vector<std::string> mismatches;
  absl::Status failed;
  for (size_t gi = 0; gi < stored.graphs.size(); ++gi) {
    const StoredGraph& g = stored.graphs[gi];
    std::unique_ptr<compiler::Module>& module = modules[gi];
    const int64_t t0 = trace::HostNowNs();
    auto compiled = client.Compile(*module);
    if (!compiled.ok()) {
      failed = absl::Status(compiled.status().code(), absl::StrCat("graph ", g.graph_id, " of run ", *run,
                                                                   " does not compile: ", compiled.status().message()));
      break;
    }
    const runtime::Executable& exe = *compiled->executable;
    // Re-partitioned for another mesh, a program's shardings (part of its fingerprint) differ by design.
    if (exe.fingerprint != g.fingerprint && !relaid)
      mismatches.push_back(absl::StrCat("graph ", g.graph_id, ": fingerprint ", exe.fingerprint, ", stored ", g.fingerprint));
    if (exe.op_count != g.op_count)
      mismatches.push_back(absl::StrCat("graph ", g.graph_id, ": ", exe.op_count, " ops, stored ", g.op_count));
    if (trace::enabled()) {
      if (compiled->cache != runtime::CacheOutcome::kMemoryHit) {
        trace::recorder().Record(runtime::GraphRecordOf(exe, g.call_site));
      }
      trace::CompilationRecord c;
      c.compile_id = trace::NextId();
      c.graph_id = exe.graph_id;
      c.step = stored.executions.empty() ? 0 : stored.executions.front().step;
      c.cache = runtime::CacheOutcomeName(compiled->cache);
      c.duration_ns = compiled->duration_ns;
      c.call_site = g.call_site;
      c.host_start_ns = t0;
      if (compiled->cache == runtime::CacheOutcome::kMiss) {
        c.cause_kind = "first_compile";
        c.cause_detail = absl::StrCat("replay of run ", *run, ", graph ", g.graph_id);
      }
      trace::recorder().Record(c);
    }
    Replayed& rp = by_graph[g.graph_id];
    rp.exe = compiled->executable;
    const auto& params = module->parameters();
    for (size_t p = 0; p < exe.param_shapes.size(); ++p) {
      // Named as the stored program names its inputs, so transfers match the stored run's by name.
      const std::string name = p < params.size() && !params[p]->name.empty() ? params[p]->name : absl::StrCat("input.", p);
      // Its layout as this replay lays it (re-partitioned: the new mesh's), where the stored run says it came from.
      const auto known = stored.tensors.find(name);
      internal::RecordTensor(name, exe.param_shapes[p], exe.param_shardings[p],
                             known != stored.tensors.end() ? known->second.sharding_source
                             : exe.param_shardings[p].IsReplicated() ? "default"
                                                                     : "annotated",
                             known != stored.tensors.end() ? known->second.created : compiler::SourceLoc{});
      rp.names.push_back(name);
    }
  }
  // Inputs move to the chips as the stored run moved them: before each program
  // run, the ones its transfers name (a step's tokens, the learning rate);
  // the rest stay where they are, shared by name between programs (an eval
  // program's weights are the training program's). Moved all up front, every
  // program's parameters went in step 0, and no step's data after it.
  std::map<std::pair<int, int64_t>, std::set<std::string>> moved;
  if (failed.ok()) {
    auto r = store::Reader::Open(db, store::Reader::Threads::kOneThread);
    auto m = r.ok() ? ReadStoredTransfers(*r, *run) : absl::StatusOr<decltype(moved)>(r.status());
    if (!m.ok()) failed = m.status();
    else moved = *std::move(m);
  }
  std::map<std::string, runtime::DeviceArray> on_chips;  // by name, the latest moved

  // The executions, in their stored order; a step ends where the next begins.
  int64_t step_start = trace::HostNowNs();
  ProgressBar progress(absl::StrCat(modeled ? "simulating" : "replaying", " run ", *run), ProgressWanted(quiet));
  for (size_t i = 0; failed.ok() && i < stored.executions.size(); ++i) {
    progress.Update(static_cast<int64_t>(i), static_cast<int64_t>(stored.executions.size()));
    const StoredExecution& e = stored.executions[i];
    auto it = by_graph.find(e.graph_id);
    if (it == by_graph.end()) {
      failed = absl::DataLossError(absl::StrCat("execution ", i, " of run ", *run, " ran graph ", e.graph_id,
                                                ", which the run did not store"));
      break;
    }
    Replayed& rp = it->second;
    const auto here = moved.find({e.step, e.graph_id});
    std::vector<runtime::DeviceArray> inputs;
    for (size_t p = 0; failed.ok() && p < rp.names.size(); ++p) {
      const std::string& name = rp.names[p];
      const auto& shape = rp.exe->param_shapes[p];
      const auto& sharding = rp.exe->param_shardings[p];
      auto held = on_chips.find(name);
      const bool fits = held != on_chips.end() && held->second.shape == shape && held->second.sharding == sharding;
      if (!fits || (here != moved.end() && here->second.count(name))) {
        auto a = client.TransferToDevices(Literal(shape), sharding, name);
        if (!a.ok()) {
          failed = a.status();
          break;
        }
        held = on_chips.insert_or_assign(name, *std::move(a)).first;
      }
      inputs.push_back(held->second);
    }
    if (!failed.ok()) break;
    std::vector<const runtime::DeviceArray*> in;
    for (const auto& a : inputs) in.push_back(&a);
    runtime::ExecuteOptions eo;
    eo.step = e.step;
    eo.launch_ns = trace::HostNowNs();
    auto out = client.Execute(*rp.exe, in, eo);
    const int64_t done = trace::HostNowNs();
    if (!out.ok()) {
      failed = absl::Status(out.status().code(), absl::StrCat("step ", e.step, ", graph ", e.graph_id, ": ",
                                                              out.status().message()));
      break;
    }
    if (trace::enabled()) {
      trace::ExecutionRecord x;
      x.execution_id = trace::NextId();
      x.step = e.step;
      x.graph_id = rp.exe->graph_id;
      x.cache = rp.executed ? "memory_hit" : "miss";
      x.input_signature = "[]";
      x.cause = "mark_step";
      x.host_start_ns = eo.launch_ns;
      x.host_dur_ns = done - eo.launch_ns;
      trace::recorder().Record(x);
      if (i + 1 == stored.executions.size() || stored.executions[i + 1].step != e.step) {
        trace::StepRecord st;
        st.step = e.step;
        st.has_loss = false;  // no loss: synthetic inputs
        st.wall_ns = done - step_start;
        trace::recorder().Record(st);
        step_start = done;
      }
    }
    rp.executed = true;
  }
  progress.Clear();
  // The inputs live on the chips: free them before the chips shut down.
  on_chips.clear();
  by_graph.clear();
  absl::Status finished = (*rec)->Finish();
  if (!failed.ok())
    return Fail(absl::StrCat(failed.message(), "\n(what was replayed before the error is stored as run ", new_run, ")"));
  if (!finished.ok()) return Fail(std::string(finished.message()));
  if (!quiet)
    std::cout << "recompiled " << analysis::Plural(static_cast<int64_t>(stored.graphs.size()), "program", "programs")
              << " from their stored IR: "
              << (!mismatches.empty() ? absl::StrCat(mismatches.size(), " differ")
                  : relaid
                      ? "every op count equals the stored one (fingerprints differ: the shardings are the new mesh's)"
                      : "every fingerprint and op count equals the stored one")
              << "; " << (modeled ? "simulated " : "ran ") << analysis::Plural(static_cast<int64_t>(stored.executions.size()), "execution", "executions") << "\n\n";

  auto r = store::Reader::Open(db, store::Reader::Threads::kOneThread);
  if (!r.ok()) return Fail(std::string(r.status().message()));
  // On another chip only the modeled clock answers "what would it do there".
  analysis::CompareOptions options;
  if (other_chip || modeled) options.clock = "modeled";
  auto c = analysis::CompareRuns(*r, *run, *r, new_run, options);
  if (!c.ok()) return Fail(std::string(c.status().message()));
  // The replay injects no fault: what the stored run's faults cost shows as a difference.
  // A recorded run's faults are on its device clock: compared on the modeled
  // clock, which the cost model laid out without them, neither side has them.
  const bool faults_compared = c->op_clock == "device" || c->a.simulated;
  const std::string faults_note =
      stored.faults.empty() ? std::string()
      : faults_compared
          ? absl::StrCat("note: run ", *run, " was recorded with faults injected (", absl::StrJoin(stored.faults, ", "),
                         "); run ", new_run, " replays it without them, so the difference below includes them\n\n")
          : absl::StrCat("note: run ", *run, " was recorded with faults injected (", absl::StrJoin(stored.faults, ", "),
                         ") on its device clock; the modeled clock compared below has none of them, on either side\n\n");
  // The replay runs the stored programs back to back, inputs made up front:
  // the stored run's host time between them (tracing, compiling, a read that
  // made the chips wait) is not replayed. Where it held the chips, a faster
  // replay says so, not that this build is faster.
  std::string host_note;
  if (!stored.simulated && !modeled) {
    auto waits = r->Query(
        "SELECT coalesce(sum(s.dur_ns), 0) AS ns, count(DISTINCT s.step) AS steps,"
        " (SELECT count(DISTINCT device_id) FROM tracks WHERE run_id = ?1 AND clock = 'device'"
        "  AND device_id IS NOT NULL) AS chips"
        " FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
        " WHERE s.run_id = ?1 AND t.clock = 'device' AND s.kind = 'host_wait'",
        {std::to_string(*run)});
    const int64_t steps = c->StepsOn("device") ? c->StepsOn("device")->a.n : 0;
    const double wait_per_step =
        waits.ok() && waits->Int(0, "chips") > 0 && steps > 0
            ? static_cast<double>(waits->Int(0, "ns")) / static_cast<double>(waits->Int(0, "chips") * steps)
            : 0;
    const int64_t recompiled = c->compiles_a.recompilations;
    const analysis::StepClockDelta* d = c->StepsOn("device");
    const bool held = d && d->a.median > 0 && wait_per_step > 0.05 * d->a.median;
    if (held || recompiled > 0)
      host_note = absl::StrCat(
          "note: run ", *run, "'s host time is not replayed (its programs run here back to back, inputs made up "
          "front)",
          held ? absl::StrCat(": its chips waited for the host ", analysis::FormatNs(static_cast<int64_t>(wait_per_step)),
                              " a step on the device clock")
               : "",
          recompiled > 0 ? absl::StrCat(held ? ", and it recompiled " : ": it recompiled ",
                                        analysis::Plural(recompiled, "time", "times"),
                                        " (the replay compiles each program once)")
                         : "",
          "; a faster replay says the host held run ", *run, "'s chips, not that this build is faster\n\n");
  }
  std::cout << faults_note << host_note << stored.cut_note;
  if (options.clock == "modeled" && !quiet) {
    std::cout << "Compared on the modeled clock: run " << *run << " as modeled for " << stored_profile
              << ", run " << new_run << " for " << stored.profile << (modeled ? " (simulated)" : "") << ".";
    if (!stored.simulated)
      std::cout << " Run " << *run << "'s device clock measured this machine's cores"
                << (other_chip ? absl::StrCat(", not ", stored.profile, " chips: it is not comparable across chips") : "")
                << (modeled ? absl::StrCat("; run ", new_run, " has no device clock (nothing was computed)") : "")
                << ".";
    std::cout << "\n\n";
  }
  std::cout << analysis::RenderComparisonText(*c);
  if (!mismatches.empty()) {
    for (const std::string& m : mismatches) std::cerr << "error: " << m << "\n";
    std::cerr << "error: this build compiles " << mismatches.size()
              << " of the stored programs differently from the build that recorded them\n";
    return 1;
  }
  return 0;
}

}  // namespace shardscope::cli
