// The report commands: `report` (the run report of profiler/analysis),
// `sharding` (where each tensor's shards live) and `query` (any SQL, as CSV). Argument mistakes exit 2 with a usage hint; a bad
// or missing file exits 1 with the store's message.
#include "ui/cli/reports.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "profiler/analysis/fleet.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/metrics.h"
#include "profiler/analysis/recompiles.h"
#include "profiler/analysis/run_report.h"
#include "profiler/analysis/sharding_view.h"
#include "store/chrome_export.h"
#include "store/json_text.h"
#include "store/reader.h"
#include "store/run_state.h"
#include "store/trace_import.h"
#include "ui/cli/csv.h"
#include "ui/cli/diff.h"
#include "ui/cli/flags.h"

namespace shardscope::cli {

namespace {

// A command's error on a file it opened: damage in it (a row deep in an
// analysis knows only its table) is said with the file's name and points to
// `check`; any other error (an output that cannot be written) as it is. Exit 1.
int RunError(std::ostream& err, const store::Reader& reader, const absl::Status& st) {
  const std::string path = reader.path();
  std::string message(st.message());
  const bool damage = st.code() == absl::StatusCode::kDataLoss;
  if (damage && message.find(path) == std::string::npos) message = absl::StrCat(path, ": ", message);
  err << "error: " << message;
  if (damage && message.find("shardscope check") == std::string::npos)
    err << " (`shardscope check " << path << "` lists the file's damage)";
  err << "\n";
  return 1;
}

constexpr char kReportHelp[] =
    "usage: shardscope report PATH [--run N] [--format text|md|html|json]\n"
    "  Summarizes one stored run, in this order: what ran; the verdict (what bounds\n"
    "  the step: recompilation, host, stragglers, collectives, memory or compute, each\n"
    "  measured against a stated threshold); steps (host clock); each chip's median\n"
    "  step attributed by priority (device clock); stragglers (late arrivals at\n"
    "  collectives); top kernels with their roofline class; compilations and their\n"
    "  causes and suggestions; memory peaks; where each tensor's shards live; and\n"
    "  the metrics report (as `shardscope metrics`).\n"
    "  --run N      the run to report (default: the newest run in the file)\n"
    "  --format F   text (default), md (Markdown), html (one self-contained file of at\n"
    "               most 2 MB with charts and a fleet heatmap) or json (schema\n"
    "               shardscope.report/1, the metrics under \"metrics\")\n"
    "  Exit: 0 reported, 1 the file or run cannot be read, 2 bad arguments.\n";

constexpr char kShardingHelp[] =
    "usage: shardscope sharding PATH [--run N] [--tensor NAME] [--why NAME]\n"
    "  Where each tensor's shards live in one stored run: a table of every tensor's\n"
    "  sharding, where it came from (annotated, propagated, default) and the bytes each\n"
    "  chip holds, then a grid per layout: the tiles of the split dims (their index\n"
    "  ranges) and the chips holding each.\n"
    "  --run N        the run (default: the newest in the file)\n"
    "  --tensor NAME  only this tensor (e.g. layers.0.attn.q_proj.weight), a grid for each\n"
    "                 sharding it was seen with\n"
    "  --why NAME     the chain of ops propagation carried this value's layout through\n"
    "                 (NAME as in sharding_decisions: dot_general.12, tokens), back to\n"
    "                 the annotation, auto-sharding or default it started from\n";

constexpr char kMetricsHelp[] =
    "usage: shardscope metrics PATH [--run N] [--format text|json]\n"
    "  The metrics report of one stored run, as PyTorch/XLA's metrics_report():\n"
    "  CompileTime, ExecuteTime (device clock), LazyTracing, TransferToDeviceTime,\n"
    "  TransferFromDeviceTime, MarkStep (count, total, p50/p90/p99, max), counters\n"
    "  (MarkStep, CachedCompile, UncachedCompile, ValueRead, ...), ops traced per\n"
    "  kind, kernels run per opcode, and warnings: more than 0.5 compilations per\n"
    "  step after step 10, or a value read back every step. The figures are the\n"
    "  run's rows of the metrics table (stored when it ended), else computed.\n"
    "  --run N       the run (default: the newest in the file)\n"
    "  --format F    text (default) or json (fields documented in docs/schema.md)\n";

constexpr char kRecompilesHelp[] =
    "usage: shardscope recompiles PATH [--run N] [--format text|json]\n"
    "  Per call site (the mark_step line and the user's stack): how many distinct\n"
    "  graphs, each compilation with its cause, detail, line and time, and\n"
    "  suggestions from the whole run: padding buckets for churning input shapes\n"
    "  with the compilations they would save, and what removes value-read cuts\n"
    "  (reading every 10 steps: the program runs saved), inlined-scalar and branch\n"
    "  recompilations.\n"
    "  --run N       the run (default: the newest in the file)\n"
    "  --format F    text (default) or json (fields documented in docs/schema.md)\n";

constexpr char kFleetHelp[] =
    "usage: shardscope fleet PATH [--run N] [--format text|json] [--threshold PCT]\n"
    "  Which chip, link or host slows the steps of one stored run down, from the\n"
    "  database alone (docs/fleet.md): per collective which chip arrived last and by\n"
    "  how much, counted over steps; per link its time per byte against its peers';\n"
    "  a what-if that re-schedules the recorded steps with the suspect's kernel or\n"
    "  transfer times at its peers' median (the step time fixing it would save); and\n"
    "  a per-chip step breakdown with the chips that stand out. A suspect's score is\n"
    "  how much slower than its peers it is (a chip's kernels against the same\n"
    "  kernels elsewhere, a link's time per byte, a host's chips together). Works on\n"
    "  imported multi-rank traces. Too few steps or no collectives: it says so and\n"
    "  flags no one.\n"
    "  --run N          the run (default: the newest in the file)\n"
    "  --format F       text (default) or json: {\"suspects\": [{\"kind\", \"id\", \"score\",\n"
    "                   \"flagged\", \"evidence\"}, ...], ...}, the flagged first,\n"
    "                   each part ranked by score\n"
    "  --threshold PCT  flag suspects at least PCT% slower than their peers\n"
    "                   (0 < PCT <= 100, default 8)\n";

constexpr char kQueryHelp[] =
    "usage: shardscope query PATH \"SQL\" [--format csv|json|table]\n"
    "  Runs one read-only SQL statement on the database and prints the result.\n"
    "  Tables and views are described in docs/schema.md, e.g.\n"
    "    shardscope query run.db \"SELECT * FROM step_device_summary WHERE step = 3\"\n"
    "  --format F   csv (default: a header row, RFC 4180 quoting, NULL an empty\n"
    "               field), json ({\"columns\": [...], \"rows\": [[...], ...]}: numbers\n"
    "               as numbers, NULL as null, a blob as X'0A1B') or table (aligned\n"
    "               columns for reading, numbers right-aligned, NULL as NULL, wide\n"
    "               CJK characters counted as two columns)\n";

constexpr char kRunsHelp[] =
    "usage: shardscope runs PATH\n"
    "  Lists the runs a database holds: id, workload, mesh, steps stored, when it\n"
    "  started, whether it ended normally (finished), was ended by the hang detector\n"
    "  (a chip stopped: --fault fail-chip), ended abnormally (its writer is gone:\n"
    "  killed, crashed) with the last step that reached the file, stopped\n"
    "  incomplete (a write error, rows lost) or is still running, and whether it was\n"
    "  recorded, simulated or imported (a replay also names the run it replays).\n";

constexpr char kExportHelp[] =
    "usage: shardscope export PATH [--run N] --chrome OUT.json[.gz]\n"
    "  Writes one stored run in the Chrome trace event format, which Perfetto UI\n"
    "  (ui.perfetto.dev) and chrome://tracing open: a process per chip and clock\n"
    "  (\"chip 3 (device clock)\", sorted by chip id), a process per host with its\n"
    "  threads, every slice as a complete event, the chips of one collective linked\n"
    "  by flows, counters as counter events. OUT ending in .gz is gzip-compressed.\n"
    "  --run N           the run (default: the newest in the file)\n"
    "  --chrome OUT      the file to write\n"
    "  --chips LIST      only these chips' lanes, e.g. 0-63,1234 (host lanes are kept);\n"
    "                    all: every chip\n"
    "  --steps A[:B]     only steps A to B (slices of no step within their span stay)\n"
    "  A pod's whole timeline is more than a viewer opens (4096 chips x 20 steps:\n"
    "  50M slices): past about 5M slices, a run is exported only in part or with\n"
    "  --chips all. The selection is said in the file (otherData capture_note).\n";

constexpr char kImportHelp[] =
    "usage: shardscope import FILE|DIR... --db DB [--quiet]\n"
    "  Reads Chrome trace event JSON files (PyTorch profiler / Kineto traces, gzipped\n"
    "  or not, object or array form) and XLA's profiles (*.xplane.pb from jax.profiler,\n"
    "  TensorFlow, PyTorch/XLA) into DB as one new run: each file is one rank\n"
    "  (distributedInfo.rank, else the order given) and becomes one host; CPU threads\n"
    "  become host tracks, GPU streams device lanes. A DIR stands for the traces in it,\n"
    "  or in its one plugins/profile/RUN/. Launches and their kernels keep\n"
    "  their flows, collectives are matched across the ranks given and share a flow,\n"
    "  and each rank's clock offset is estimated from the collectives' ends.\n"
    "  Events that could not be used are counted by reason in import_stats, printed\n"
    "  at the end. Record traces with torch.profiler: docs/import.md.\n"
    "  --db DB    the database to add the run to (created when missing)\n"
    "  --quiet    no progress bar and no summary, only errors\n";

// Splits args into positionals and --flag values; only `flags` are accepted.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  std::string error;
};

Args Parse(const std::vector<std::string>& argv, const std::set<std::string>& flags) {
  Args a;
  bool options = true;  // until a lone "--": then every argument is positional
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (options && s == "--") {
      options = false;
      continue;
    }
    // An option's name has no blank: "-- a comment\nSELECT ..." is SQL.
    if (!options || s.size() < 2 || s.rfind("--", 0) != 0 ||
        s.substr(0, s.find('=')).find_first_of(" \t\r\n") != std::string::npos) {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s, value;
    bool has_value = false;
    if (size_t eq = s.find('='); eq != std::string::npos) {
      name = s.substr(0, eq);
      value = s.substr(eq + 1);
      has_value = true;
    }
    if (!flags.count(name)) {
      a.error = absl::StrCat("unknown option '", name, "'");
      return a;
    }
    if (!has_value) {
      if (i + 1 >= argv.size()) {
        a.error = absl::StrCat("option ", name, " needs a value");
        return a;
      }
      value = argv[++i];
    }
    if (a.flags.count(name)) {
      a.error = absl::StrCat("option ", name, " is given twice ('", a.flags[name], "' and '", value, "')");
      return a;
    }
    a.flags[name] = value;
  }
  return a;
}

int Usage(std::ostream& err, const std::string& problem, const char* help) {
  err << "error: " << problem << "\n" << help;
  return 2;
}

// The run ids in the file, as ranges: "1-3, 5". "none" when it holds none.
// The start every one-run command shares: PATH [--run N] plus `flags`, the
// file opened and the run picked: --run N when the file holds it, else the
// newest. Returns the exit code when it fails: 2 for bad arguments (--run
// not a number 1..2^63-1), 1 for a file that cannot be read or holds no such run.
struct OneRun {
  Args args;
  std::optional<store::Reader> reader;
  int64_t run_id = 0;
};
// `check` finds what is wrong with the command's own flags ("" when nothing),
// before the file is opened.
std::optional<int> OpenOneRun(const std::vector<std::string>& argv, std::set<std::string> flags,
                              const std::string& command, const char* help, std::ostream& err, OneRun* r,
                              const std::function<std::string(Args&)>& check = nullptr) {
  flags.insert("--run");
  r->args = Parse(argv, flags);
  if (!r->args.error.empty()) return Usage(err, r->args.error, help);
  if (check)
    if (std::string problem = check(r->args); !problem.empty()) return Usage(err, problem, help);
  if (r->args.positional.size() != 1)
    return Usage(err, r->args.positional.empty() ? command + " needs the database PATH" : command + " takes one PATH",
                 help);
  if (auto it = r->args.flags.find("--run"); it != r->args.flags.end()) {
    absl::StatusOr<int64_t> id = ParseIntFlag("--run", it->second, 1, INT64_MAX);
    if (!id.ok()) return Usage(err, std::string(id.status().message()), help);
    r->run_id = *id;
  }
  absl::StatusOr<store::Reader> reader = store::Reader::Open(r->args.positional[0]);
  if (!reader.ok()) {
    err << "error: " << reader.status().message() << "\n";
    return 1;
  }
  r->reader.emplace(std::move(*reader));
  if (r->run_id == 0) {
    absl::StatusOr<int64_t> latest = r->reader->LatestRunId();
    if (!latest.ok()) {
      err << "error: " << latest.status().message() << "\n";
      return 1;
    }
    r->run_id = *latest;
    return std::nullopt;
  }
  if (absl::Status has = r->reader->RequireRun(r->run_id); !has.ok()) {
    err << "error: " << has.message() << "\n";
    return 1;
  }
  return std::nullopt;
}

// For a run read from another tool's trace (shardscope import): the one line
// a command that needs IR prints instead of an empty report; "" for a recorded run.
std::string NeedsIrLine(const store::Reader& reader, int64_t run_id, const std::string& command) {
  auto q = reader.Query("SELECT * FROM runs WHERE run_id = ?1", {std::to_string(run_id)});
  if (!q.ok() || q->rows.empty() || q->Col("imported") < 0 || q->Int(0, "imported") == 0) return "";
  return absl::StrCat("run ", run_id, " was imported from a trace (shardscope import): it has timelines but no IR, so `",
                      command, "` has nothing to show; it needs a run recorded by shardscope (`report` and `export"
                      " --chrome` show the imported timeline)");
}

int Report(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  OneRun r;
  std::string format = "text";
  auto check_format = [&](Args& a) -> std::string {
    if (a.flags.count("--format")) format = a.flags["--format"];
    if (format == "markdown") format = "md";
    if (format != "text" && format != "md" && format != "json" && format != "html")
      return absl::StrCat("unknown format '", format, "' (use text, md, html or json)");
    return "";
  };
  if (auto code = OpenOneRun(argv, {"--format"}, "report", kReportHelp, err, &r, check_format)) return *code;
  absl::StatusOr<analysis::RunReport> report = analysis::BuildRunReport(*r.reader, r.run_id);
  if (!report.ok()) {
    return RunError(err, *r.reader, report.status());
  }
  // The metrics report closes every form (PyTorch/XLA's metrics_report(), as `shardscope metrics` prints it).
  auto metrics = analysis::BuildMetricsReport(*r.reader, r.run_id);
  const std::string metrics_text = metrics.ok() ? analysis::RenderMetricsText(*metrics)
                                                : absl::StrCat("(no metrics: ", metrics.status().message(), ")\n");
  if (format == "json") {
    nlohmann::json j = analysis::ReportToJson(*report);
    if (metrics.ok()) {
      j["metrics"] = nlohmann::json::parse(analysis::RenderMetricsJson(*metrics), nullptr, false);
    } else {
      j["metrics"] = {{"error", std::string(metrics.status().message())}};
    }
    out << store::JsonText(j, 2) << "\n";
  } else if (format == "html") {
    out << analysis::RenderHtml(*report, metrics_text);
  } else if (format == "md") {
    out << analysis::RenderMarkdown(*report) << "\n## Metrics\n\n```\n" << metrics_text << "```\n";
  } else {
    out << analysis::RenderText(*report) << "\nMetrics\n" << metrics_text;
  }
  return 0;
}

int Sharding(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  OneRun r;
  if (auto code = OpenOneRun(argv, {"--tensor", "--why"}, "sharding", kShardingHelp, err, &r)) return *code;
  if (std::string line = NeedsIrLine(*r.reader, r.run_id, "sharding"); !line.empty()) {
    out << line << "\n";
    return 0;
  }
  Args& a = r.args;
  for (const char* flag : {"--tensor", "--why"})
    if (a.flags.count(flag) && a.flags[flag].empty())
      return Usage(err, absl::StrCat(flag, " needs a name (an empty one would mean every tensor)"), kShardingHelp);
  if (a.flags.count("--why")) {
    auto chain = analysis::RenderShardingChain(*r.reader, r.run_id, a.flags["--why"]);
    if (!chain.ok()) {
      err << "error: " << chain.status().message() << "\n";
      return 1;
    }
    out << *chain;
    return 0;
  }
  const std::string tensor = a.flags.count("--tensor") ? a.flags["--tensor"] : "";
  absl::StatusOr<analysis::ShardingView> view = analysis::BuildShardingView(*r.reader, r.run_id, tensor);
  if (!view.ok()) {
    return RunError(err, *r.reader, view.status());
  }
  out << analysis::RenderShardingText(*view, /*all_grids=*/!tensor.empty());
  return 0;
}

// A command that builds one report of one run and prints it as text or,
// with --format json, in its documented JSON form.
template <typename Build, typename Render, typename RenderJson>
int OneRunReport(const std::vector<std::string>& argv, const std::string& command, const char* help,
                 std::ostream& out, std::ostream& err, Build build, Render render, RenderJson render_json) {
  OneRun r;
  if (auto code = OpenOneRun(argv, {"--format"}, command, help, err, &r)) return *code;
  const std::string format = r.args.flags.count("--format") ? r.args.flags["--format"] : "text";
  if (format != "text" && format != "json")
    return Usage(err, absl::StrCat("--format '", format, "' is not text or json"), help);
  if (std::string line = NeedsIrLine(*r.reader, r.run_id, command); !line.empty()) {
    if (format == "json")
      out << "{\"run\": " << r.run_id << ", \"imported\": true, \"message\": \""
          << absl::StrReplaceAll(line, {{"\\", "\\\\"}, {"\"", "\\\""}}) << "\"}\n";
    else
      out << line << "\n";
    return 0;
  }
  auto report = build(*r.reader, r.run_id);
  if (!report.ok()) {
    return RunError(err, *r.reader, report.status());
  }
  out << (format == "json" ? render_json(*report) : render(*report));
  return 0;
}

int Fleet(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  OneRun r;
  if (auto code = OpenOneRun(argv, {"--format", "--threshold"}, "fleet", kFleetHelp, err, &r)) return *code;
  const std::string format = r.args.flags.count("--format") ? r.args.flags["--format"] : "text";
  if (format != "text" && format != "json")
    return Usage(err, absl::StrCat("--format '", format, "' is not text or json"), kFleetHelp);
  analysis::FleetOptions opt;
  opt.run_id = r.run_id;
  if (auto it = r.args.flags.find("--threshold"); it != r.args.flags.end()) {
    auto pct = ParsePositiveRealFlag("--threshold", it->second, "PCT", 0, 100);
    if (!pct.ok()) return Usage(err, std::string(pct.status().message()), kFleetHelp);
    opt.flag_threshold = *pct / 100;
  }
  auto report = analysis::AnalyzeFleet(*r.reader, opt);
  if (!report.ok()) {
    return RunError(err, *r.reader, report.status());
  }
  out << (format == "json" ? analysis::RenderFleetJson(*report) : analysis::RenderFleetText(*report));
  return 0;
}

// A typed result as JSON: {"columns": [...], "rows": [[...], ...]}.
// One row as JSON: numbers as numbers, NULL as null, text and blobs (X'0A1B') as strings.
nlohmann::json QueryJsonRow(const std::vector<store::Cell>& cells, const std::vector<store::CellType>& types) {
  nlohmann::json row = nlohmann::json::array();
  for (size_t c = 0; c < cells.size(); ++c) {
    const store::Cell& cell = cells[c];
    int64_t n = 0;
    double d = 0;
    if (!cell) row.push_back(nullptr);
    else if (types[c] == store::CellType::kInteger && absl::SimpleAtoi(*cell, &n)) row.push_back(n);
    else if (types[c] == store::CellType::kReal && absl::SimpleAtod(*cell, &d) && std::isfinite(d)) row.push_back(d);
    else row.push_back(*cell);
  }
  return row;
}

// A typed result as aligned columns, numbers right-aligned, NULL blank.
std::string QueryTable(const store::TypedQueryResult& r) {
  std::vector<std::vector<std::string>> t = {r.columns};
  std::vector<bool> right(r.columns.size(), true);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    std::vector<std::string> row;
    for (size_t c = 0; c < r.rows[i].size(); ++c) {
      row.push_back(r.rows[i][c].value_or("NULL"));  // as DuckDB shows it: not the empty string
      const store::CellType type = r.types[i][c];
      if (type == store::CellType::kText || type == store::CellType::kBlob) right[c] = false;
    }
    t.push_back(std::move(row));
  }
  return analysis::AlignTable(t, "", right);
}

int Query(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  Args a = Parse(argv, {"--format"});
  if (!a.error.empty()) return Usage(err, a.error, kQueryHelp);
  const std::string format = a.flags.count("--format") ? a.flags["--format"] : "csv";
  if (format != "csv" && format != "json" && format != "table")
    return Usage(err, absl::StrCat("--format '", format, "' is not csv, json or table"), kQueryHelp);
  if (a.positional.size() != 2) {
    return Usage(err, "query needs the database PATH and one SQL statement (quote it)",
                 kQueryHelp);
  }
  absl::StatusOr<store::Reader> reader = store::Reader::Open(a.positional[0]);
  if (!reader.ok()) {
    err << "error: " << reader.status().message() << "\n";
    return 1;
  }
  // The file is opened read-only, but ATTACH (and VACUUM INTO, which attaches
  // its output) would create or write another file, and a pragma that sets
  // the journal or checkpoints would write this one: refused, and said
  // plainly (SQLite's own refusal of the latter reads as a disk I/O error).
  std::string refused;
  sqlite3_set_authorizer(
      reader->connection(),
      [](void* why, int action, const char* a1, const char* a2, const char*, const char*) {
        std::string& refused = *static_cast<std::string*>(why);
        if (action == SQLITE_ATTACH) {
          refused = "ATTACH and VACUUM INTO, which write another file, are refused";
          return SQLITE_DENY;
        }
        if (action != SQLITE_PRAGMA || !a1) return SQLITE_OK;
        const std::string pragma = absl::AsciiStrToLower(a1);
        static const std::set<std::string> set_writes = {"journal_mode", "locking_mode", "writable_schema",
                                                         "user_version", "application_id", "schema_version",
                                                         "auto_vacuum", "page_size"};
        static const std::set<std::string> writes = {"wal_checkpoint", "incremental_vacuum", "optimize"};
        if (writes.count(pragma) || (a2 && set_writes.count(pragma))) {
          refused = absl::StrCat("PRAGMA ", pragma, a2 ? absl::StrCat(" = ", a2) : "",
                                 " would change the file, and is refused");
          return SQLITE_DENY;
        }
        return SQLITE_OK;
      },
      &refused);
  const auto failed = [&](const absl::Status& st) {
    if (!refused.empty())
      err << "error: query only reads " << a.positional[0] << ": " << refused << "\n";
    else
      err << "error: " << st.message() << "\n";
    return 1;
  };
  // No row from step_device_summary where the file's runs are simulated:
  // that view is the device clock's, which a simulated run has none of.
  const std::string sql = absl::AsciiStrToLower(a.positional[1]);
  const auto simulated_runs = [&]() -> std::string {
    auto sim = reader->Query("SELECT group_concat(run_id, ', ') AS runs FROM runs WHERE coalesce(simulated, 0) != 0");
    return sim.ok() && !sim->rows.empty() ? sim->Text(0, "runs") : "";
  };
  const auto empty_note = [&]() {
    if (!absl::StrContains(sql, "step_device_summary")) return;
    const std::string sim = simulated_runs();
    if (sim.empty()) return;
    err << "note: no rows: step_device_summary covers the device clock, and simulated runs (here run " << sim
        << ") have only the modeled clock; their steps are in step_bounds WHERE clock = 'modeled'\n";
  };
  // The per-op views have a row per op on a simulated run too, its measured
  // columns 0: said, so that a 0 is not read as a kernel that took no time.
  const auto zeros_note = [&]() {
    std::vector<std::string> views;
    for (const char* v : {"kernel_stats", "time_by_source_line", "time_by_module_path"})
      if (absl::StrContains(sql, v)) views.push_back(v);
    if (views.empty()) return;
    const std::string sim = simulated_runs();
    if (sim.empty()) return;
    err << "note: " << absl::StrJoin(views, ", ") << " count" << (views.size() == 1 ? "s" : "")
        << " measured device-clock time, which simulated runs (here run " << sim
        << ") do not have: on them the counts and times read 0 (time_by_*'s modeled_ns too, being per kernel run);"
           " the cost model's time per op is kernel_stats.modeled_ns, and the modeled lanes' slices are in events"
           " WHERE clock = 'modeled'\n";
  };
  if (format == "table") {  // aligned columns need every row first
    absl::StatusOr<store::TypedQueryResult> t = reader->QueryTyped(a.positional[1]);
    if (!t.ok()) return failed(t.status());
    out << QueryTable(*t);
    if (t->rows.empty()) empty_note();
    zeros_note();
    return 0;
  }
  // CSV and JSON are written a row at a time: a query over a long run's
  // slices holds one row, not the result (2M rows took 0.4-1 GB).
  const bool json = format == "json";
  bool first = true;
  absl::Status st = reader->StreamTyped(
      a.positional[1],
      [&](const std::vector<std::string>& columns) {
        if (json) {
          out << "{\"columns\":" << store::JsonText(nlohmann::json(columns)) << ",\"rows\":[";
        } else {
          for (size_t c = 0; c < columns.size(); ++c) out << (c ? "," : "") << CsvField(columns[c]);
          out << "\n";
        }
      },
      [&](const std::vector<store::Cell>& row, const std::vector<store::CellType>& types) {
        if (json) {
          out << (first ? "" : ",") << store::JsonText(QueryJsonRow(row, types));
        } else {
          for (size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << (row[c] ? CsvField(*row[c]) : "");
          out << "\n";
        }
        first = false;
      });
  if (!st.ok()) {
    out.flush();
    return failed(st);
  }
  if (json) out << "]}\n";
  if (first) empty_note();
  zeros_note();
  return 0;
}

int Runs(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  Args a = Parse(argv, {});
  if (!a.error.empty()) return Usage(err, a.error, kRunsHelp);
  if (a.positional.size() != 1)
    return Usage(err, a.positional.empty() ? "runs needs the database PATH" : "runs takes one PATH", kRunsHelp);
  absl::StatusOr<store::Reader> reader = store::Reader::Open(a.positional[0]);
  if (!reader.ok()) {
    err << "error: " << reader.status().message() << "\n";
    return 1;
  }
  // r.*: files from before runs.imported list too.
  auto rows = reader->Query(
      "SELECT r.*, (SELECT COUNT(*) FROM steps s WHERE s.run_id = r.run_id) AS steps FROM runs r ORDER BY r.run_id");
  if (!rows.ok()) {
    err << "error: " << rows.status().message() << "\n";
    return 1;
  }
  auto states = store::ReadRunStates(*reader);
  if (!states.ok()) {
    err << "error: " << states.status().message() << "\n";
    return 1;
  }
  std::map<int64_t, std::string> state;
  for (const auto& s : *states) state[s.run_id] = s.Describe();
  if (rows->rows.empty()) {
    out << a.positional[0] << " holds no runs yet\n";
    return 0;
  }
  std::vector<std::vector<std::string>> t = {{"run", "workload", "mesh", "steps", "started", "kind", "status"}};
  for (size_t i = 0; i < rows->rows.size(); ++i) {
    const int64_t id = rows->Int(i, "run_id");
    std::string kind = rows->Int(i, "imported") ? "imported" : rows->Int(i, "simulated") ? "simulated" : "recorded";
    // A replay names the run it replays (config_json.replay_of).
    const auto config = nlohmann::json::parse(rows->Text(i, "config_json"), nullptr, false);
    if (config.is_object() && config.contains("replay_of") && config["replay_of"].is_number_integer())
      absl::StrAppend(&kind, ", replay of ", config["replay_of"].get<int64_t>());
    t.push_back({std::to_string(id), rows->Text(i, "sample"), rows->Text(i, "mesh"),
                 std::to_string(rows->Int(i, "steps")), rows->Text(i, "started_at"), kind,
                 state.count(id) ? state[id] : "-"});
  }
  out << analysis::AlignTable(t, "");
  return 0;
}

int Export(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  OneRun r;
  if (auto code = OpenOneRun(argv, {"--chrome", "--chips", "--steps"}, "export", kExportHelp, err, &r)) return *code;
  if (!r.args.flags.count("--chrome") || r.args.flags["--chrome"].empty())
    return Usage(err, "export needs --chrome OUT.json (the only format so far)", kExportHelp);
  const std::string path = r.args.flags["--chrome"];
  store::ChromeExportOptions options;
  std::vector<std::string> selection;
  auto info = r.reader->Query(
      "SELECT num_devices, (SELECT min(step) FROM steps WHERE run_id = ?1) AS lo,"
      " (SELECT max(step) FROM steps WHERE run_id = ?1) AS hi FROM runs WHERE run_id = ?1",
      {std::to_string(r.run_id)});
  if (!info.ok()) return RunError(err, *r.reader, info.status());
  const int64_t chips = info->rows.empty() ? 0 : info->Int(0, "num_devices");
  // `--chips all`: every chip, asked for by name (a pod past what a viewer opens is refused without it).
  const bool all_chips = r.args.flags.count("--chips") && r.args.flags["--chips"] == "all";
  if (auto it = r.args.flags.find("--chips"); it != r.args.flags.end() && !all_chips) {
    for (absl::string_view part : absl::StrSplit(it->second, ',')) {
      std::vector<std::string> ends = absl::StrSplit(part, '-');
      int64_t a = -1, b = -1;
      if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &a) || !absl::SimpleAtoi(ends.back(), &b) || a < 0 || b < a)
        return Usage(err, absl::StrCat("--chips '", it->second, "': '", part,
                                       "' is not a chip id or a range A-B (e.g. 0-63,1234)"),
                     kExportHelp);
      if (b >= chips)
        return Usage(err, absl::StrCat("--chips: run ", r.run_id, " has ", chips, " chips (0-", chips - 1,
                                       "), not chip ", b),
                     kExportHelp);
      if (b - a > 1'000'000) return Usage(err, "--chips: a range of more than a million chips", kExportHelp);
      for (int64_t c = a; c <= b; ++c) options.chips.insert(c);
    }
    // Said as ranges of the chips kept ("3,3" is chip 3; all of them is no selection).
    if (static_cast<int64_t>(options.chips.size()) == chips) {
      options.chips.clear();
    } else {
      std::vector<std::string> ranges;
      for (auto c = options.chips.begin(); c != options.chips.end();) {
        auto last = c;
        while (std::next(last) != options.chips.end() && *std::next(last) == *last + 1) ++last;
        ranges.push_back(*last == *c ? absl::StrCat(*c) : absl::StrCat(*c, "-", *last));
        c = std::next(last);
      }
      selection.push_back(absl::StrCat(options.chips.size() == 1 ? "chip " : "chips ", absl::StrJoin(ranges, ","),
                                       " of ", chips));
    }
  }
  if (auto it = r.args.flags.find("--steps"); it != r.args.flags.end()) {
    std::vector<std::string> ends = absl::StrSplit(it->second, ':');
    int64_t a = -1, b = -1;
    if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &a) || !absl::SimpleAtoi(ends.back(), &b) || a < 0 || b < a)
      return Usage(err, absl::StrCat("--steps '", it->second, "' is not a step or a range A:B (e.g. 3:5)"),
                   kExportHelp);
    const bool any = !info->rows.empty() && !info->Text(0, "lo").empty();
    if (!any || b < info->Int(0, "lo") || a > info->Int(0, "hi"))
      return Usage(err,
                   any ? absl::StrCat("--steps ", it->second, ": run ", r.run_id, " stored steps ", info->Int(0, "lo"),
                                      "-", info->Int(0, "hi"))
                       : absl::StrCat("--steps: run ", r.run_id, " stored no steps"),
                   kExportHelp);
    // Said as the stored steps it covers (4:100 of steps 0-5 is steps 4-5; all of them is no selection).
    a = std::max(a, info->Int(0, "lo"));
    b = std::min(b, info->Int(0, "hi"));
    options.first_step = a;
    options.last_step = b;
    if (a != info->Int(0, "lo") || b != info->Int(0, "hi"))
      selection.push_back(a == b ? absl::StrCat("step ", a) : absl::StrCat("steps ", a, "-", b));
  }
  options.selection = absl::StrJoin(selection, ", ");
  // A viewer in a browser tab holds about a gigabyte of trace (Perfetto UI,
  // chrome://tracing less), some 5M slices: a whole pod is weighed before a
  // byte is written (4096 chips x 20 steps wrote 2.5 GB, minutes, then said so).
  constexpr int64_t kViewerSlices = 5'000'000;
  const int64_t estimate = store::EstimateChromeSlices(*r.reader, r.run_id, options);
  // The ways to cut it, said for this run: its first 64 chips, its last two steps.
  const int64_t hi = info->Text(0, "hi").empty() ? 4 : info->Int(0, "hi");
  const std::string cut = absl::StrCat("--chips 0-", std::min<int64_t>(chips, 64) - 1, " (a few chips' lanes), --steps ",
                                       std::max<int64_t>(0, hi - 1), ":", hi, " (a few steps)");
  const bool chosen = r.args.flags.count("--chips") || r.args.flags.count("--steps");  // --chips all too
  if (estimate > kViewerSlices && !chosen) {
    err << "error: run " << r.run_id << " is about " << absl::StrFormat("%.1fM", estimate / 1e6) << " slices ("
        << chips << " chips" << (info->Text(0, "hi").empty() ? "" : absl::StrCat(", steps ", info->Text(0, "lo"), "-",
                                                                                   info->Text(0, "hi")))
        << "), more than a trace viewer opens (about " << kViewerSlices / 1'000'000
        << "M); nothing written. Export a part: " << cut << "; or the whole run: --chips all\n";
    return 2;
  }
  if (estimate > kViewerSlices)
    err << "note: about " << absl::StrFormat("%.1fM", estimate / 1e6)
        << " slices to write, more than a trace viewer opens well; a smaller part: " << cut << "\n";
  auto stats = store::ExportChromeTrace(*r.reader, r.run_id, path, options);
  if (!stats.ok()) {
    return RunError(err, *r.reader, stats.status());
  }
  out << "run " << r.run_id << " written to " << path << ": " << stats->processes << " processes, " << stats->slices
      << " slices, " << stats->flows << " flows, " << stats->counters
      << " counter samples (open it in ui.perfetto.dev or chrome://tracing)\n";
  // The estimate short (a file that could not say): said after, as before.
  if (stats->slices > kViewerSlices && estimate <= kViewerSlices && options.selection.empty())
    err << "note: " << stats->slices << " slices is more than a trace viewer opens well; export a part of the run: "
        << cut << "\n";
  if (stats->counters_unplaced > 0)
    err << "note: " << stats->counters_unplaced
        << " counter samples left out: the run stored no step bounds (no timeline), so none can be placed in the "
           "steps asked for\n";
  if (stats->counters_left_out > 0)
    err << "note: " << stats->counters_left_out << " counter sample"
        << (stats->counters_left_out == 1 ? "" : "s")
        << " left out: not a finite number (JSON has no Inf or NaN; `shardscope check` reads the file)\n";
  if (stats->slices == 0) {  // a file without a timeline is no timeline: say why it is empty
    auto note = r.reader->Query("SELECT capture_note FROM runs WHERE run_id = ?1", {std::to_string(r.run_id)});
    const std::string why = note.ok() && !note->rows.empty() ? note->Text(0, "capture_note") : "";
    err << "note: the run has no timeline slices to export"
        << (why.empty() ? "" : absl::StrCat(" (", analysis::Printable(why), ")"))
        << (stats->counters > 0 ? ": the file holds its counters only" : ": the file holds no event")
        << ", and its steps do not come back through `shardscope import`\n";
  }
  return 0;
}

int Import(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  std::vector<std::string> rest;
  bool quiet = false;
  for (const std::string& a : argv) {
    if (a == "--quiet") quiet = true;
    else rest.push_back(a);
  }
  Args a = Parse(rest, {"--db"});
  if (!a.error.empty()) return Usage(err, a.error, kImportHelp);
  if (!a.flags.count("--db") || a.flags["--db"].empty()) return Usage(err, "import needs --db DB", kImportHelp);
  if (a.positional.empty()) return Usage(err, "import needs at least one trace FILE", kImportHelp);
  store::ImportOptions options;
  options.progress = !quiet && isatty(STDERR_FILENO);
  absl::StatusOr<std::vector<std::string>> files = store::ExpandTraceArgs(a.positional);
  if (!files.ok()) {
    err << "error: " << files.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<store::ImportResult>> runs =
      store::ImportChromeTraceWindows(*files, a.flags["--db"], options);
  if (!runs.ok()) {
    err << "error: " << runs.status().message() << "\n";
    return 1;
  }
  if (runs->size() > 1)
    out << "the files are " << runs->size() << " profiling windows of " << runs->front().files.size()
        << " rank" << (runs->front().files.size() == 1 ? "" : "s")
        << " (distributedInfo.rank, each rank's files in the order they started): one run per window, runs "
        << runs->front().run_id << "-" << runs->back().run_id << "\n";
  for (const store::ImportResult& r : *runs) {
    if (!quiet) out << store::RenderImportSummary(r);
    for (const store::ImportedFile& f : r.files)
      if (f.truncated)
        err << "warning: " << f.path << " is cut short (" << f.truncation << "); imported what came before\n";
    // What the run lost is said even with --quiet: a number that may be wrong
    // must not pass silently.
    for (const store::ImportStat& s : r.stats) {
      if (s.severity == "error") err << "warning: " << s.description << "\n";
      if (s.severity == "data_loss") err << "warning: " << s.count << " " << s.name << ": " << s.description << "\n";
    }
  }
  return 0;
}

}  // namespace

bool IsReportCommand(const std::string& command) {
  return command == "report" || command == "sharding" || command == "metrics" || command == "recompiles" ||
         command == "query" || command == "export" || command == "runs" || command == "import" || command == "diff" ||
         command == "fleet";
}

std::string ReportCommandSummaries() {
  return "  report PATH     summary of a stored run (steps, recompilations, per chip, sharding)\n"
         "  sharding PATH   where each tensor's shards live: tiles, chips, bytes (--tensor NAME)\n"
         "  metrics PATH    compile, execute, tracing and transfer times, counters, warnings\n"
         "  recompiles PATH why each call site compiled, with suggestions and their savings\n"
         "  fleet PATH      which chip, link or host slows the steps, with evidence and a what-if\n"
         "  query PATH SQL  run SQL on a stored run's database, print CSV (--format json|table)\n"
         "  export PATH     a run as a Chrome/Perfetto trace (--chrome OUT.json[.gz])\n"
         "  runs PATH       the runs a file holds, and whether each ended normally\n"
         "  import FILE...  PyTorch profiler / Chrome traces into a database as one run (--db DB)\n"
         "  diff A [B]      run B against run A: steps, ops, compiles, memory, sharding (--fail-if-slower PCT)\n";
}

std::string ReportHelp(const std::string& command) {
  if (command == "report") return kReportHelp;
  if (command == "query") return kQueryHelp;
  if (command == "sharding") return kShardingHelp;
  if (command == "metrics") return kMetricsHelp;
  if (command == "recompiles") return kRecompilesHelp;
  if (command == "export") return kExportHelp;
  if (command == "runs") return kRunsHelp;
  if (command == "import") return kImportHelp;
  if (command == "diff") return kDiffHelp;
  if (command == "fleet") return kFleetHelp;
  return "";
}

int RunReportCommand(const std::string& command, const std::vector<std::string>& args,
                     std::ostream& out, std::ostream& err) {
  for (const std::string& s : args) {
    if (s == "--help" || s == "-h") {
      out << ReportHelp(command);
      return 0;
    }
  }
  if (command == "report") return Report(args, out, err);
  if (command == "query") return Query(args, out, err);
  if (command == "export") return Export(args, out, err);
  if (command == "runs") return Runs(args, out, err);
  if (command == "import") return Import(args, out, err);
  if (command == "diff") return RunDiffCommand(args, out, err);
  if (command == "sharding") return Sharding(args, out, err);
  if (command == "fleet") return Fleet(args, out, err);
  if (command == "metrics")
    return OneRunReport(args, command, kMetricsHelp, out, err, analysis::BuildMetricsReport, analysis::RenderMetricsText,
                        analysis::RenderMetricsJson);
  if (command == "recompiles")
    return OneRunReport(args, command, kRecompilesHelp, out, err, analysis::BuildRecompilesReport,
                        analysis::RenderRecompilesText, analysis::RenderRecompilesJson);
  err << "error: unknown report command '" << command << "'\n";
  return 2;
}

}  // namespace shardscope::cli
