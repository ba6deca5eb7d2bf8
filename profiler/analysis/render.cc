// Renderers for the run report: plain text (the headless report of UX.md),
// Markdown (for pasting into issues) and JSON (for scripts). Every duration
// carries its clock, and an empty table says so instead of printing zeros.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/run_report.h"
#include "store/json_text.h"

namespace shardscope::analysis {

namespace {

std::string MeshText(const RunHeader& h) {
  std::string axes = Printable(absl::StrReplaceAll(h.mesh_axes, {{",", ", "}}));
  return axes.empty() ? Printable(h.mesh) : absl::StrCat(Printable(h.mesh), " (", axes, ")");
}

std::string Title(const RunReport& r) {
  const RunHeader& h = r.run;
  std::string mesh = h.mesh.empty() ? "" : absl::StrCat(", mesh ", MeshText(h));
  return absl::StrCat("run ", h.run_id, ": ", Printable(h.sample), ", ", Plural(r.steps.count, "step", "steps"),
                      mesh, ", ", Plural(h.num_devices, "chip", "chips"), " on ",
                      Plural(h.num_hosts, "host", "hosts"), ", profile ", Printable(h.profile),
                      h.simulated ? ", simulated" : "", h.imported ? ", imported trace" : "");
}

std::string StatusText(const RunHeader& h) {
  std::string s = absl::StrCat("started ", Printable(h.started_at), ", ",
                               Printable(h.status_detail.empty() ? h.status : h.status_detail));
  if (h.duration_ns)  // an early end's text already says after which step
    absl::StrAppend(&s, h.status == "finished" || h.status == "incomplete" ? " after " : ", ran for ",
                    FormatNs(*h.duration_ns), " (host)");
  if (!h.sharding.empty()) absl::StrAppend(&s, ", sharding ", Printable(h.sharding));
  if (h.imported)
    absl::StrAppend(&s, "; imported from another tool's trace (shardscope import): timelines and steps only, no IR,"
                        " so compilations, sharding and kernels are empty");
  // What the timeline leaves out, right under the title: no view of it reads as complete when it is not.
  if (!h.capture_note.empty()) absl::StrAppend(&s, "\ncapture: ", Printable(h.capture_note));
  if (!h.import_losses.empty())
    absl::StrAppend(&s, "\nthe import lost or could not trust data (import_stats; what follows is read from what ",
                    "remained): ", Printable(JoinFirst(h.import_losses, 4)));
  if (!h.uneven_steps.empty()) absl::StrAppend(&s, "\nranks' steps differ: ", Printable(h.uneven_steps));
  if (h.faults_injected)  // a simulated run has no device clock: its faults are on the modeled one
    absl::StrAppend(&s, "\nfaults injected on the ", h.simulated ? "modeled" : "device", " clock: ",
                    Printable(JoinFirst(h.faults, 8)), " (runs.config_json \"faults\"; docs/fleet.md)");
  if (!h.mesh_map.empty()) absl::StrAppend(&s, "\nmesh axes on the topology ", Printable(h.mesh_map));
  if (!h.profile_values.empty()) absl::StrAppend(&s, "\nmodeled clock: ", Printable(h.profile_values));
  if (const auto& c = h.calibration) absl::StrAppend(&s, "\n", DescribeCalibration(*c));
  return s;
}


std::string Loss(std::optional<double> v) {
  if (!v) return "-";
  if (std::isnan(*v)) return "NaN";
  if (std::isinf(*v)) return *v > 0 ? "Inf" : "-Inf";
  return absl::StrFormat("%.4g", *v);
}

std::string CauseText(const CompileMiss& m) {
  std::string s = Printable(Humanize(m.cause_kind.empty() ? "unknown_cause" : m.cause_kind));
  if (!m.cause_subkind.empty()) absl::StrAppend(&s, " (", Printable(Humanize(m.cause_subkind)), ")");
  // Reports show at most 200 characters of a detail; the database keeps it whole.
  if (!m.cause_detail.empty())
    absl::StrAppend(&s, ": ",
                    Printable(m.cause_detail.size() <= 200 ? m.cause_detail : m.cause_detail.substr(0, 197) + "..."));
  return s;
}

std::string Where(const std::string& file, int line) {
  if (file.empty()) return "";
  return line > 0 ? absl::StrCat(Printable(file), ":", line) : Printable(file);
}

std::string PerChipBytes(const ShardingRow& s) {
  if (s.devices == 0) return "not placed";
  if (s.min_bytes == s.max_bytes) return absl::StrCat(FormatBytes(s.max_bytes), "/chip");
  return absl::StrCat(FormatBytes(s.min_bytes), "-", FormatBytes(s.max_bytes), "/chip");
}

// The involuntary full rematerializations in one line (the largest named):
// `shardscope sharding` lists them all.
// Each auto-sharding search in one line: its modeled step against the best
// hand-written strategy's.
std::string AutoShardingLines(const RunReport& r, const char* indent) {
  std::string out;
  for (const AutoShardingSummary& a : r.auto_sharding) {
    std::string best;
    const double ratio = a.RatioToBestHand(&best);
    const AutoShardingSummary::Candidate& chosen = a.candidates.empty() ? AutoShardingSummary::Candidate{}
                                                                         : a.candidates[0];
    absl::StrAppend(&out, indent,
                    absl::StrFormat("Auto-sharding (step %d, %s search, %d layouts scored): modeled step %.3f ms "
                                    "on %s",
                                    a.step, Printable(a.method), a.evaluations, chosen.modeled_ns / 1e6,
                                    Printable(a.profile)),
                    ratio > 0 ? absl::StrFormat(", %.2fx the best hand-written strategy (%s)", ratio, Printable(best))
                              : "",
                    "; `shardscope sharding` lists the layouts.\n");
  }
  return out;
}

std::string RematLine(const RunReport& r) {
  if (r.rematerializations.empty()) return "No involuntary full rematerializations.";
  const RematRow* big = &r.rematerializations[0];
  int64_t total = 0;
  for (const RematRow& m : r.rematerializations) {
    total += m.bytes;
    if (m.bytes > big->bytes) big = &m;
  }
  return absl::StrCat(r.rematerializations.size(), " involuntary full rematerializations (", FormatBytes(total),
                      " gathered whole); the largest: ", Printable(big->value), " (", FormatBytes(big->bytes), ") for ",
                      Printable(big->op),
                      " at ", Where(big->source_file, big->source_line), " — see `shardscope sharding`");
}

std::string ChipName(const DeviceRow& d) {
  return absl::StrCat("chip ", d.device_id, " (host ", d.host_id, ")");
}

std::string StepLine(const StepStats& s) {
  // A simulated run's host clock times the simulator: its step is the modeled one.
  if (s.simulated)
    return absl::StrCat("median ", FormatNs(s.modeled_median_ns), " (modeled clock)   the host's wall time is the "
                        "simulator's own: median ", FormatNs(s.median_wall_ns), ", p90 ", FormatNs(s.p90_wall_ns),
                        "   ", LossText(s));
  return absl::StrCat("median ", FormatNs(s.median_wall_ns), "   p90 ", FormatNs(s.p90_wall_ns),
                      s.dispatched_ahead ? " (host: its dispatch only; the devices ran each step after it, as "
                                           "asynchronous dispatch does: their times are the device clock's below)   "
                                         : " (host)   ",
                      LossText(s));
}

std::string CompileLine(const CompileStats& c) {
  return absl::StrCat(FormatNs(c.total_ns), " total (host)   ", c.misses, " miss",
                      c.misses == 1 ? "" : "es", ", ", c.memory_hits + c.disk_hits,
                      " cache hit", c.memory_hits + c.disk_hits == 1 ? "" : "s", ", ",
                      Plural(c.recompilations, "recompilation", "recompilations"));
}

std::string MdCell(const std::string& s) { return absl::StrReplaceAll(Printable(s), {{"|", "\\|"}}); }

std::string MdTable(const std::vector<std::string>& head,
                    const std::vector<std::vector<std::string>>& rows) {
  std::string out = absl::StrCat("| ", absl::StrJoin(head, " | "), " |\n|");
  for (size_t i = 0; i < head.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const auto& c : row) cells.push_back(MdCell(c));
    absl::StrAppend(&out, "| ", absl::StrJoin(cells, " | "), " |\n");
  }
  return out;
}

// The "host wait" column is shown only when some chip waited for the host, so
// runs where the host kept up read as before.
bool HasHostWait(const DeviceBreakdown& d) { return d.total_host_wait_ns > 0; }

// With --trace steps a chip's busy time is whole programs: collectives and
// transfers inside them are not known, so "?" rather than 0.
std::vector<std::string> TimesCells(const DeviceTimes& t, bool host_wait, bool programs_only) {
  std::vector<std::string> cells = {FormatNs(t.compute_ns), programs_only ? "?" : FormatNs(t.collective_ns),
                                    programs_only ? "?" : FormatNs(t.transfer_ns), FormatNs(t.idle_ns)};
  if (host_wait) cells.push_back(FormatNs(t.host_wait_ns));
  cells.push_back(t.bottleneck.empty() ? "-" : t.bottleneck);
  return cells;
}

std::vector<std::string> TimesHead(const std::string& first, bool host_wait, bool programs_only) {
  std::vector<std::string> head = {first, programs_only ? "programs" : "compute", "collective", "transfer",
                                   "idle"};
  if (host_wait) head.push_back("host wait");
  head.push_back("bottleneck");
  return head;
}

// One sentence on chips waiting for the host (device clock, chip average).
// An imported trace's waits were worked out from its launches (the importer's
// DeriveHostWaits), so they speak of kernels, not of programs.
std::string HostWaitLine(const DeviceBreakdown& d, bool imported) {
  if (imported && d.host_wait_unknown)
    return "Waiting for host: not measurable (the trace records no launch (or XLA dispatch) of its device ops, so a wait for the "
           "host cannot be told from idle time)";
  if (!HasHostWait(d))
    return imported ? "Waiting for host: none found (no kernel in the trace was launched after its GPU had gone idle)"
                    : "Waiting for host: none recorded (every program was enqueued before the chips were free)";
  double share = d.median_span_ns > 0 ? 100.0 * d.median_host_wait_ns / d.median_span_ns : 0;
  const std::string head = absl::StrFormat("Waiting for host: %s of the median step's %s (%.0f%%), %s over all steps "
                                           "(device clock, chip average): ",
                                           FormatNs(d.median_host_wait_ns), FormatNs(d.median_span_ns), share,
                                           FormatNs(d.total_host_wait_ns));
  if (imported)
    return head +
           "the devices sat idle until the host launched their next op (from the trace's launches or "
           "dispatches): what the host does between launches (Python and launch overhead, the profiler's too, a "
           "gloo collective, a data loader, a sync) is slower than they are; the host tracks show which";
  return head +
         "the chips finished and sat idle until the host enqueued the next program, so tracing, compiling or a value "
         "read on the host is slower than the chips";
}

std::string ChipHeading(const DeviceBreakdown& d) {
  // With an even count no step is the median: the faster middle one is shown,
  // beside the median diff and fleet print (it read "the median of 6 steps, span 7.4 ms" against diff's 9.6 ms).
  const std::string which =
      d.steps_covered % 2 == 1
          ? absl::StrCat("the median of ", Plural(d.steps_covered, "step", "steps"))
          : absl::StrCat("the faster of the ", d.steps_covered == 2 ? "" : "2 middle steps of ", d.steps_covered,
                         " steps, whose median is ", FormatNs(d.spans_median_ns));
  return absl::StrCat("Per chip (step ", d.median_step, ", ", which, ", span ", FormatNs(d.median_span_ns),
                      ", device clock",
                      d.programs_only ? "; --trace steps: whole programs, collectives inside them" : "", ")");
}

std::string FormatFlops(double f) {
  if (f >= 1e12) return absl::StrFormat("%.1f TFLOP/s", f / 1e12);
  if (f >= 1e9) return absl::StrFormat("%.1f GFLOP/s", f / 1e9);
  if (f >= 1e6) return absl::StrFormat("%.1f MFLOP/s", f / 1e6);
  return absl::StrFormat("%.0f FLOP/s", f);
}

// Time by slice name, for a run without per-op statistics (an imported trace).
std::string NamesHeading(const NameTimes& n) {
  return absl::StrCat(
      "Top names by self time (", n.clock, " clock, ", n.slices, " slices on ", n.tracks,
      n.tracks == 1 ? " lane" : " lanes",
      n.tracks_in_run > n.tracks ? absl::StrCat(" of ", n.tracks_in_run, " (an even sample)") : "",
      AnnotationLanesLeftOut(n), ", ", n.names, n.names == 1 ? " name" : " names",
      "; from the timeline: no per-op statistics)");
}
const std::vector<std::string> kNamesHead = {"name", "kind", "count", "self", "share", "total", "longest"};
std::vector<std::vector<std::string>> NamesRows(const NameTimes& n) {
  std::vector<std::vector<std::string>> rows;
  for (const NameTime& t : n.top)
    rows.push_back({ShortName(t.name), t.kind, absl::StrCat(t.count), FormatNs(t.self_ns),
                    n.self_ns > 0 ? absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(t.self_ns) /
                                                                  static_cast<double>(n.self_ns))
                                  : "-",
                    FormatNs(t.total_ns), FormatNs(t.max_ns)});
  return rows;
}

std::string KernelsHeading(const RunReport& r) {
  // The header's profile line gives the one-core and the gang peak; "of peak" divides by the chip's as the
  // run ran it (a gang of cores, or a core shared by several chips, slower beside them): said which, or
  // "peak 104.0" above read against "peak 95.0" here as a contradiction.
  std::string which;
  const nlohmann::json& v = r.run.profile_values_json;
  const double peak = r.kernels.peak_flops;
  const auto near = [&](double x) { return x > 0 && std::abs(x - peak) <= 0.005 * x; };
  if (v.is_object() && peak > 0) {
    const double core = v.value("peak_flops", 0.0), gang = v.value("gang_peak_flops", 0.0);
    if (near(gang) && !near(core))
      which = absl::StrCat(": a gang of ", v.value("gang_width", 1), " cores");
    else if (core > 0 && !near(core))
      which = absl::StrCat(": the profile's ", FormatFlops(core), " per core, ", r.run.num_devices,
                           " chips sharing the cores");
  }
  return absl::StrCat("Top kernels (device clock, all chips and steps; modeled on profile ", Printable(r.run.profile),
                      ", peak ", FormatFlops(peak), which, ")");
}

std::vector<std::string> KernelCells(const KernelRow& k) {
  std::string where = Where(k.source_file, k.source_line);
  if (!k.scope.empty()) where = where.empty() ? k.scope : absl::StrCat(where, " (", k.scope, ")");
  return {k.name,
          k.shape,
          k.roofline,
          absl::StrCat(k.count),
          FormatNs(k.total_ns),
          FormatNs(k.mean_ns),
          FormatNs(k.modeled_ns),
          k.flops > 0 ? FormatFlops(k.achieved_flops) : "-",
          k.flops > 0 ? absl::StrFormat("%.1f%%", 100 * k.fraction_of_peak) : "-",
          where.empty() ? "-" : where};
}

const std::vector<std::string> kKernelHead = {"kernel", "shape",   "bound by", "count",    "total",
                                              "mean",   "modeled", "achieved", "of peak", "source"};

const std::vector<std::string> kEvidenceHead = {"", "bound", "measured", "value", "threshold", "numbers"};

std::vector<std::vector<std::string>> EvidenceRows(const Verdict& v) {
  std::vector<std::vector<std::string>> rows;
  for (const Evidence& e : v.evidence) {
    const bool measurable = e.Measurable();
    rows.push_back({e.passed ? "!" : e.flagged_not_bound ? "~" : measurable ? "-" : "?", e.bound, e.what,
                    measurable ? absl::StrFormat("%.1f%%", e.value) : "-", absl::StrFormat(">= %.0f%%", e.threshold),
                    e.detail});
  }
  return rows;
}

// The host-wait column only where a chip waited (as the per-chip table).
bool PartsWait(const Verdict& v) {
  for (const StepParts& p : v.parts)
    if (p.host_wait_ns > 0) return true;
  return false;
}

std::vector<std::string> PartsHead(const Verdict& v) {
  const char* busy = v.programs_only ? "programs" : "compute";
  if (PartsWait(v)) return {"chip", busy, "collective", "transfer", "host wait", "idle", "step"};
  return {"chip", busy, "collective", "transfer", "idle", "step"};
}

// A pod's table of every chip was 4096 lines of the text report: the first
// kPartsRows chips, then a line of how many more (JSON and HTML's chart keep all).
constexpr size_t kPartsRows = 64;
std::string PartsMoreLine(const Verdict& v) {
  return v.parts.size() > kPartsRows
             ? absl::StrCat("... ", v.parts.size() - kPartsRows, " more chips (--format json lists every chip)")
             : "";
}

std::vector<std::vector<std::string>> PartsRows(const Verdict& v) {
  std::vector<std::vector<std::string>> rows;
  for (const StepParts& p : v.parts) {
    if (rows.size() == kPartsRows) break;
    rows.push_back({absl::StrCat("chip ", p.device_id), FormatNs(p.compute_ns),
                    v.programs_only ? "?" : FormatNs(p.collective_ns),
                    v.programs_only ? "?" : FormatNs(p.transfer_ns)});
    if (PartsWait(v)) rows.back().push_back(FormatNs(p.host_wait_ns));
    rows.back().push_back(FormatNs(p.idle_ns));
    rows.back().push_back(FormatNs(p.compute_ns + p.collective_ns + p.transfer_ns + p.host_wait_ns + p.idle_ns));
  }
  return rows;
}

std::string PartsHeading(const Verdict& v) {
  return absl::StrCat(
      "Step breakdown by priority (median step ", v.step, ", ", FormatNs(v.span_ns), ", ", v.clock,
      " clock: ", v.programs_only ? "programs (--trace steps)" : "compute over collective over transfer",
      " over ", PartsWait(v) ? "host wait over " : "", "idle, so each row adds up to the step)");
}

std::string LateLine(const RunReport& r) {
  const Verdict& v = r.verdict;
  if (v.late.collectives == 0 && r.run.simulated)
    return "Late arrivals: a simulated run has no device clock; the stragglers row above and `shardscope fleet` "
           "rank the last arrivals on the modeled clock";
  // Ranks on CPUs (an imported gloo job) call their collectives on host
  // threads: fleet ranks them by those calls, which the chips' view has none of.
  if (v.late.collectives == 0 && r.run.imported && r.run.num_devices == 0 && r.run.num_hosts > 1)
    return "Late arrivals: its ranks ran on CPUs and called their collectives on host threads; the stragglers row "
           "above and `shardscope fleet` rank who called each last (host clock)";
  if (v.late.collectives == 0) return "Late arrivals: no collective with arrivals recorded on two or more chips";
  std::string out = absl::StrCat("Late arrivals (device clock, ", v.late.collectives, " collectives): ",
                                 v.late.chips.empty() ? "none, the chips arrived together at each" : "last to arrive");
  for (size_t i = 0; i < v.late.chips.size() && i < 4; ++i)
    absl::StrAppend(&out, i ? ", " : " ", "chip ", v.late.chips[i].device_id, " ", v.late.chips[i].last, "x (",
                    FormatNs(v.late.chips[i].late_ns), " late in all)");
  return out;
}

}  // namespace

std::string MemoryHeading(const MemoryStats& m) {
  return absl::StrCat("Memory: planned peak per chip, the largest of ", m.programs,
                      m.programs == 1 ? " program" : " programs",
                      m.hbm_bytes > 0 ? absl::StrCat(" (HBM ", FormatBytes(m.hbm_bytes), " per chip)") : "");
}
const std::vector<std::string>& MemoryHead() {
  static const std::vector<std::string> head = {"graph", "peak", "of HBM", "inputs", "intermediates", "peak at"};
  return head;
}

std::vector<std::vector<std::string>> MemoryRows(const MemoryStats& m) {
  std::vector<std::vector<std::string>> rows;
  for (const MemoryPeak& p : m.top)
    rows.push_back({absl::StrCat(p.graph_id), FormatBytes(p.peak_bytes),
                    m.hbm_bytes > 0 ? absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(p.peak_bytes) /
                                                                    static_cast<double>(m.hbm_bytes))
                                    : "-",
                    FormatBytes(p.parameter_bytes), FormatBytes(p.arena_bytes), p.peak_op});
  return rows;
}

// The sections a damaged part of the file kept out (RunReport::unreadable).
std::string NotReadText(const RunReport& r, const char* bullet) {
  if (r.unreadable.empty()) return "";
  std::string out = absl::StrCat("Not read (part of the file is damaged; `shardscope check ", r.run.db_path,
                                 "` says what):\n");
  for (const std::string& u : r.unreadable) absl::StrAppend(&out, bullet, Printable(u), "\n");
  return out + "\n";
}

std::string RenderText(const RunReport& r) {
  std::string out = absl::StrCat("shardscope report ", Printable(r.run.db_path), " — ", Title(r), "\n",
                                 StatusText(r.run), "\n\n", NotReadText(r, "  - "));
  absl::StrAppend(&out, "Verdict: ", Printable(r.verdict.line), "\n");
  std::vector<std::vector<std::string>> ev = {kEvidenceHead};
  for (auto& row : EvidenceRows(r.verdict)) ev.push_back(row);
  const bool not_bound = std::any_of(r.verdict.evidence.begin(), r.verdict.evidence.end(),
                                     [](const Evidence& e) { return e.flagged_not_bound; });
  absl::StrAppend(&out, AlignTable(ev, "  "), "  (! passed, ",
                  not_bound ? "~ past its threshold but not what bounds the step, " : "",
                  "- below its threshold, ? not measurable)\n\n");
  std::vector<std::vector<std::string>> summary;
  summary.push_back({"Steps", absl::StrCat(r.steps.count),
                     r.steps.count ? StepLine(r.steps) : "no steps recorded"});
  summary.push_back({"Compilations", absl::StrCat(r.compiles.count),
                     r.compiles.count ? CompileLine(r.compiles) : "no compilations recorded"});
  summary.push_back({"Executions", absl::StrCat(r.executions), ""});
  out += AlignTable(summary, "", {false, true, false});

  const DeviceBreakdown& d = r.devices;
  if (d.rows.empty()) {
    absl::StrAppend(&out, "\nPer chip: ", d.empty_reason, "\n");
  } else {
    const bool waits = HasHostWait(d);
    std::vector<std::vector<std::string>> t = {TimesHead(ChipHeading(d), waits, d.programs_only)};
    for (const DeviceRow& row : d.rows) {
      std::vector<std::string> cells = {absl::StrCat("  ", ChipName(row))};
      for (auto& c : TimesCells(row.median_step, waits, d.programs_only)) cells.push_back(c);
      t.push_back(cells);
    }
    std::vector<bool> right = {false, true, true, true, true};
    if (waits) right.push_back(true);
    right.push_back(false);
    absl::StrAppend(&out, "\n", AlignTable(t, "", right));
    absl::StrAppend(&out, "  ", HostWaitLine(d, r.run.imported), "\n");
  }
  if (!r.verdict.parts.empty()) {
    std::vector<std::vector<std::string>> t = {PartsHead(r.verdict)};
    for (auto& row : PartsRows(r.verdict)) t.push_back(row);
    std::vector<bool> right(t[0].size(), true);
    right[0] = false;
    absl::StrAppend(&out, "\n", PartsHeading(r.verdict), "\n", AlignTable(t, "  ", right));
    if (!PartsMoreLine(r.verdict).empty()) absl::StrAppend(&out, "  ", PartsMoreLine(r.verdict), "\n");
  }
  absl::StrAppend(&out, LateLine(r), "\n");

  const KernelStats& k = r.kernels;
  if (k.top.empty()) {
    absl::StrAppend(&out, "\nTop kernels: ", k.empty_reason, "\n");
    for (const NameTimes& n : k.by_name) {
      std::vector<std::vector<std::string>> t = {kNamesHead};
      for (auto& row : NamesRows(n)) t.push_back(row);
      absl::StrAppend(&out, "\n", NamesHeading(n), "\n", AlignTable(t, "  ", {false, false, true, true, true, true, true}));
    }
  } else {
    absl::StrAppend(&out, "\n", KernelsHeading(r), "\n");
    std::vector<std::vector<std::string>> t = {kKernelHead};
    for (const KernelRow& row : k.top) t.push_back(KernelCells(row));
    out += AlignTable(t, "  ", {false, false, false, true, true, true, true, true, true, false});
  }
  if (k.cost_error) absl::StrAppend(&out, CostModelErrorLine(*k.cost_error), "\n");

  out += "\nCompilation misses\n";
  if (r.compiles.miss_list.empty()) out += "  none recorded\n";
  for (const CompileMiss& m : r.compiles.miss_list) {
    absl::StrAppend(&out, absl::StrFormat("  step %-4d %s   %s (host)\n", m.step, CauseText(m),
                                          FormatNs(m.duration_ns)));
    std::string at = Where(m.source_file, m.source_line);
    absl::StrAppend(&out, "            at ", at.empty() ? "unknown source line" : at, "\n");
  }
  for (const CompileSuggestion& sg : r.compiles.suggestions)
    absl::StrAppend(&out, "  suggestion for ", Printable(sg.call_site), ": ", Printable(sg.text), "\n");

  if (!r.memory.top.empty()) {
    std::vector<std::vector<std::string>> t = {MemoryHead()};
    for (auto& row : MemoryRows(r.memory)) t.push_back(row);
    absl::StrAppend(&out, "\n", MemoryHeading(r.memory), "\n",
                    AlignTable(t, "  ", {false, true, true, true, true, false}));
  }

  out += "\nSharding\n";
  if (r.sharding.empty()) out += "  no tensors recorded\n";
  std::vector<std::vector<std::string>> s;
  for (const ShardingRow& row : r.sharding) {
    s.push_back({row.name, row.dtype + row.shape, row.sharding, row.source, PerChipBytes(row)});
  }
  out += AlignTable(s, "  ");
  absl::StrAppend(&out, "  ", RematLine(r), "\n");
  out += AutoShardingLines(r, "  ");

  return out;
}

std::string RenderMarkdown(const RunReport& r) {
  std::string out = absl::StrCat("# shardscope report: ", Printable(r.run.db_path), "\n\n", Title(r), "  \n",
                                 StatusText(r.run), "\n\n", NotReadText(r, "- "));
  absl::StrAppend(&out, "**Verdict:** ", MdCell(r.verdict.line), "\n\n",
                  MdTable(kEvidenceHead, EvidenceRows(r.verdict)), "\n");
  out += MdTable({"", "count", "summary"},
                 {{"Steps", absl::StrCat(r.steps.count),
                   r.steps.count ? StepLine(r.steps) : "no steps recorded"},
                  {"Compilations", absl::StrCat(r.compiles.count),
                   r.compiles.count ? CompileLine(r.compiles) : "no compilations recorded"},
                  {"Executions", absl::StrCat(r.executions), ""}});

  const DeviceBreakdown& d = r.devices;
  absl::StrAppend(&out, "\n## ", d.rows.empty() ? std::string("Per chip") : ChipHeading(d), "\n\n");
  if (d.rows.empty()) {
    absl::StrAppend(&out, "No breakdown: ", d.empty_reason, ".\n");
  } else {
    const bool waits = HasHostWait(d);
    std::vector<std::vector<std::string>> rows;
    for (const DeviceRow& row : d.rows) {
      std::vector<std::string> cells = {ChipName(row)};
      for (auto& c : TimesCells(row.median_step, waits, d.programs_only)) cells.push_back(c);
      rows.push_back(cells);
    }
    out += MdTable(TimesHead("chip", waits, d.programs_only), rows);
    absl::StrAppend(&out, "\n", HostWaitLine(d, r.run.imported), ".\n");
  }
  if (!r.verdict.parts.empty())
    absl::StrAppend(&out, "\n## ", PartsHeading(r.verdict), "\n\n", MdTable(PartsHead(r.verdict), PartsRows(r.verdict)));
    if (!PartsMoreLine(r.verdict).empty()) absl::StrAppend(&out, "\n", PartsMoreLine(r.verdict), "\n");
  absl::StrAppend(&out, "\n", LateLine(r), "\n");

  const KernelStats& k = r.kernels;
  absl::StrAppend(&out, "\n## ", k.top.empty() ? std::string("Top kernels") : KernelsHeading(r), "\n\n");
  if (k.top.empty()) {
    absl::StrAppend(&out, "None: ", k.empty_reason, ".\n");
    for (const NameTimes& n : k.by_name)
      absl::StrAppend(&out, "\n## ", NamesHeading(n), "\n\n", MdTable(kNamesHead, NamesRows(n)));
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const KernelRow& row : k.top) rows.push_back(KernelCells(row));
    out += MdTable(kKernelHead, rows);
  }
  if (k.cost_error) absl::StrAppend(&out, "\n", CostModelErrorLine(*k.cost_error), "\n");

  out += "\n## Compilation misses\n\n";
  if (r.compiles.miss_list.empty()) {
    out += "None recorded.\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const CompileMiss& m : r.compiles.miss_list) {
      std::string at = Where(m.source_file, m.source_line);
      rows.push_back({absl::StrCat(m.step), CauseText(m), at.empty() ? "-" : "`" + at + "`",
                      FormatNs(m.duration_ns)});
    }
    out += MdTable({"step", "cause", "source", "duration (host)"}, rows);
  }
  for (const CompileSuggestion& sg : r.compiles.suggestions)
    absl::StrAppend(&out, "\n- suggestion for `", Printable(sg.call_site), "`: ", MdCell(sg.text));
  if (!r.compiles.suggestions.empty()) out += "\n";

  if (!r.memory.top.empty())
    absl::StrAppend(&out, "\n## ", MemoryHeading(r.memory), "\n\n", MdTable(MemoryHead(), MemoryRows(r.memory)));

  out += "\n## Sharding\n\n";
  if (r.sharding.empty()) {
    out += "No tensors recorded.\n";
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const ShardingRow& s : r.sharding) {
      rows.push_back({"`" + s.name + "`", s.dtype + s.shape, "`" + s.sharding + "`", s.source,
                      PerChipBytes(s)});
    }
    out += MdTable({"tensor", "type", "sharding", "source", "bytes per chip"}, rows);
  }
  absl::StrAppend(&out, "\n", RematLine(r), "\n");
  if (!r.auto_sharding.empty()) absl::StrAppend(&out, "\n", AutoShardingLines(r, ""));

  return MarkdownWithoutHtml(out);
}

namespace {
nlohmann::json TimesJson(const DeviceTimes& t) {
  return {{"compute_ns", t.compute_ns},       {"collective_ns", t.collective_ns},
          {"transfer_ns", t.transfer_ns},     {"idle_ns", t.idle_ns},
          {"host_wait_ns", t.host_wait_ns},   {"bottleneck", t.bottleneck}};
}
nlohmann::json OptJson(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

std::string LossText(const StepStats& s) {
  return absl::StrCat("loss ", Loss(s.first_loss), " -> ", Loss(s.last_loss),
                      s.loss_not_finite_from
                          ? absl::StrCat(" (not finite from step ", *s.loss_not_finite_from, ": diverged)")
                          : "");
}

nlohmann::json ReportToJson(const RunReport& r) {
  using nlohmann::json;
  const RunHeader& h = r.run;
  json out;
  out["schema"] = "shardscope.report/1";
  out["db_path"] = h.db_path;
  out["verdict"] = VerdictToJson(r.verdict);
  if (!r.unreadable.empty()) out["unreadable"] = r.unreadable;  // sections left out: damage, said where
  out["run"] = {{"run_id", h.run_id},         {"sample", h.sample},
                {"mesh", h.mesh},             {"mesh_axes", h.mesh_axes},
                {"sharding", h.sharding},     {"topology", h.topology},
                {"profile", h.profile},       {"clock_kinds", h.clock_kinds},
                {"tool_version", h.tool_version}, {"started_at", h.started_at},
                {"status", h.status},         {"status_detail", h.status_detail},
                {"capture_note", h.capture_note},
                {"faults_injected", h.faults_injected},
                {"faults", h.faults},
                {"num_hosts", h.num_hosts},
                {"num_devices", h.num_devices}, {"simulated", h.simulated}, {"imported", h.imported},
                {"duration_ns", h.duration_ns ? json(*h.duration_ns) : json(nullptr)}};
  if (!h.import_losses.empty()) out["run"]["import_losses"] = h.import_losses;
  if (!h.uneven_steps.empty()) out["run"]["uneven_steps"] = h.uneven_steps;
  if (!h.profile_values_json.is_null()) out["run"]["profile_values"] = h.profile_values_json;
  if (!h.mesh_map_json.is_null()) out["run"]["mesh_map"] = h.mesh_map_json;
  if (const auto& c = h.calibration)
    out["run"]["calibration"] = {{"source_db", c->source_db},
                                 {"source_run", c->source_run},
                                 {"kernels_by_op", c->kernels_by_op},
                                 {"kernels_by_signature", c->kernels_by_signature},
                                 {"kernels_modeled", c->kernels_modeled},
                                 {"collectives_recorded", c->collectives_recorded},
                                 {"collectives_modeled", c->collectives_modeled},
                                 {"recorded_step_ns", c->recorded_step_ns},
                                 {"recorded_host_wait_ns", c->recorded_host_wait_ns},
                                 {"calibrated_step_ns", c->calibrated_step_ns},
                                 {"uncalibrated_step_ns", c->uncalibrated_step_ns},
                                 {"calibrated_error", c->CalibratedError()},
                                 {"uncalibrated_error", c->UncalibratedError()}};
  out["steps"] = {{"clock", "host"},
                  {"count", r.steps.count},
                  {"median_wall_ns", r.steps.median_wall_ns},
                  {"p90_wall_ns", r.steps.p90_wall_ns},
                  {"first_step", r.steps.first_step},
                  {"last_step", r.steps.last_step},
                  {"first_loss", OptJson(r.steps.first_loss)},
                  {"last_loss", OptJson(r.steps.last_loss)},
                  {"loss_not_finite_from_step", r.steps.loss_not_finite_from
                                                    ? nlohmann::json(*r.steps.loss_not_finite_from)
                                                    : nlohmann::json(nullptr)},
                  {"host_times_are_dispatch", r.steps.dispatched_ahead},
                  {"host_times_are_simulator", r.steps.simulated},
                  {"modeled_median_ns", r.steps.simulated ? nlohmann::json(r.steps.modeled_median_ns)
                                                          : nlohmann::json(nullptr)}};
  json misses = json::array();
  for (const CompileMiss& m : r.compiles.miss_list) {
    misses.push_back({{"compile_id", m.compile_id}, {"step", m.step}, {"graph_id", m.graph_id},
                      {"cause_kind", m.cause_kind}, {"cause_subkind", m.cause_subkind},
                      {"cause_detail", m.cause_detail},
                      {"source_file", m.source_file}, {"source_line", m.source_line},
                      {"duration_ns", m.duration_ns}});
  }
  json suggestions = json::array();
  for (const CompileSuggestion& sg : r.compiles.suggestions)
    suggestions.push_back({{"call_site", sg.call_site}, {"text", sg.text}, {"compilations_saved", sg.compilations_saved}});
  out["compilations"] = {{"clock", "host"},
                         {"count", r.compiles.count},
                         {"misses", r.compiles.misses},
                         {"memory_hits", r.compiles.memory_hits},
                         {"disk_hits", r.compiles.disk_hits},
                         {"recompilations", r.compiles.recompilations},
                         {"total_ns", r.compiles.total_ns},
                         {"miss_list", misses},
                         {"suggestions", suggestions}};
  out["executions"] = r.executions;
  json devs = json::array();
  for (const DeviceRow& d : r.devices.rows) {
    devs.push_back({{"device_id", d.device_id}, {"host_id", d.host_id}, {"coords", d.coords},
                    {"median_step", TimesJson(d.median_step)},
                    {"all_steps", TimesJson(d.all_steps)}});
  }
  out["devices"] = {{"clock", "device"},
                    {"median_step", r.devices.median_step},
                    {"median_span_ns", r.devices.median_span_ns},
                    {"steps_covered", r.devices.steps_covered},
                    {"median_host_wait_ns", r.devices.median_host_wait_ns},
                    {"total_host_wait_ns", r.devices.total_host_wait_ns},
                    {"rows", devs},
                    {"empty_reason", r.devices.empty_reason},
                    {"programs_only", r.devices.programs_only}};
  json sh = json::array();
  for (const ShardingRow& s : r.sharding) {
    sh.push_back({{"tensor_id", s.tensor_id}, {"name", s.name}, {"dtype", s.dtype},
                  {"shape", s.shape}, {"sharding", s.sharding}, {"source", s.source},
                  {"source_file", s.source_file}, {"source_line", s.source_line},
                  {"devices", s.devices}, {"min_bytes_per_device", s.min_bytes},
                  {"max_bytes_per_device", s.max_bytes}});
  }
  out["sharding"] = sh;
  json remats = json::array();
  for (const RematRow& m : r.rematerializations)
    remats.push_back({{"graph_id", m.graph_id}, {"value", m.value}, {"op", m.op}, {"bytes", m.bytes},
                      {"source_file", m.source_file}, {"source_line", m.source_line}});
  out["rematerializations"] = remats;
  json autos = json::array();
  for (const AutoShardingSummary& a : r.auto_sharding) {
    json cands = json::array();
    for (const auto& c : a.candidates)
      cands.push_back({{"strategy", c.strategy}, {"modeled_ns", c.modeled_ns}, {"collective_ns", c.collective_ns},
                       {"collectives", c.collectives}, {"peak_bytes", c.peak_bytes}, {"fits", c.fits},
                       {"rematerializations", c.rematerializations}, {"chosen", c.chosen}});
    json choices = json::array();
    for (const auto& c : a.choices)
      choices.push_back({{"group", c.group}, {"tensors", c.tensors}, {"layout", c.layout}, {"sharding", c.sharding}});
    std::string best;
    const double ratio = a.RatioToBestHand(&best);
    autos.push_back({{"step", a.step}, {"method", a.method}, {"combinations", a.combinations},
                     {"evaluations", a.evaluations}, {"search_ns", a.search_ns}, {"profile", a.profile},
                     {"memory_budget", a.memory_budget}, {"candidates", cands}, {"choices", choices},
                     {"ratio_to_best_hand", ratio}, {"best_hand", best}});
  }
  out["auto_sharding"] = autos;
  json kernels = json::array();
  for (const KernelRow& k : r.kernels.top) {
    kernels.push_back({{"graph_id", k.graph_id}, {"op_id", k.op_id}, {"name", k.name},
                       {"opcode", k.opcode}, {"shape", k.shape}, {"roofline", k.roofline},
                       {"count", k.count}, {"total_ns", k.total_ns}, {"mean_ns", k.mean_ns},
                       {"modeled_ns", k.modeled_ns}, {"flops", k.flops},
                       {"achieved_flops", k.achieved_flops}, {"fraction_of_peak", k.fraction_of_peak},
                       {"source_file", k.source_file}, {"source_line", k.source_line},
                       {"scope", k.scope}});
  }
  json err = nullptr;
  if (const auto& e = r.kernels.cost_error) {
    err = {{"profile", e->profile}, {"kernels", e->kernels}, {"zero_duration", e->zero_duration},
           {"median", e->median},   {"p90", e->p90},         {"median_ratio", e->median_ratio}};
  }
  out["kernels"] = {{"clock", "device"},
                    {"profile", h.profile},
                    {"peak_flops", r.kernels.peak_flops},
                    {"top", kernels},
                    {"cost_model_error", err},
                    {"empty_reason", r.kernels.empty_reason}};
  if (!r.kernels.by_name.empty()) {
    json by_name = json::array();
    for (const NameTimes& n : r.kernels.by_name) {
      json top = json::array();
      for (const NameTime& t : n.top)
        top.push_back({{"name", t.name}, {"kind", t.kind}, {"count", t.count}, {"self_ns", t.self_ns},
                       {"total_ns", t.total_ns}, {"max_ns", t.max_ns}});
      by_name.push_back({{"clock", n.clock},
                         {"tracks", n.tracks},
                         {"tracks_in_run", n.tracks_in_run},
                         {"annotation_tracks", n.annotation_tracks},
                         {"slices", n.slices},
                         {"names", n.names},
                         {"self_ns", n.self_ns},
                         {"top", top}});
    }
    out["kernels"]["by_name"] = by_name;
  }
  json peaks = json::array();
  for (const MemoryPeak& p : r.memory.top)
    peaks.push_back({{"graph_id", p.graph_id}, {"peak_bytes", p.peak_bytes}, {"parameter_bytes", p.parameter_bytes},
                     {"arena_bytes", p.arena_bytes}, {"peak_op", p.peak_op}});
  out["memory"] = {{"hbm_bytes", r.memory.hbm_bytes}, {"programs", r.memory.programs}, {"top", peaks}};
  return out;
}

// Replace, not throw, on bad UTF-8: a stored name may hold any bytes.
std::string RenderJson(const RunReport& r) { return store::JsonText(ReportToJson(r), 2) + "\n"; }

std::string DescribeCalibration(const store::SimCalibrationRow& c) {
  return absl::StrFormat(
      "calibrated from %s run %d: modeled step %s (error %.1f%%; the cost model alone: %s, error %.1f%%) against its "
      "device-clock step %s (host waits of %s taken out); kernels %d by program and op, %d by signature, %d modeled; "
      "collectives %d recorded, %d modeled",
      Printable(c.source_db), c.source_run, FormatNs(c.calibrated_step_ns), 100 * c.CalibratedError(),
      FormatNs(c.uncalibrated_step_ns), 100 * c.UncalibratedError(), FormatNs(c.recorded_step_ns),
      FormatNs(c.recorded_host_wait_ns), c.kernels_by_op, c.kernels_by_signature, c.kernels_modeled,
      c.collectives_recorded, c.collectives_modeled);
}

}  // namespace shardscope::analysis
