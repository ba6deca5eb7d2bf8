// The Overview; see overview_view.h.
#include "ui/app/overview_view.h"

#include <imgui.h>

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/metrics.h"
#include "profiler/analysis/quantile.h"
#include "profiler/analysis/slice_names.h"
#include "ui/app/format.h"
#include "ui/app/trace_model.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"
#include "ui/app/workstation.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

// As the report's (analysis/quantile.h); -1 when there are none.
int64_t Median(const std::vector<int64_t>& v) { return v.empty() ? -1 : analysis::QuantileOf(v, 0.5); }

ImVec4 Color(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

// A view that is not built yet sends its links to one that is.
ViewId Built(ViewId want, ViewId fallback) { return Workstation::Builds(want) ? want : fallback; }

// One line of the overview: its text, the stored row it shows, and, when
// another view explains it, a link there. Returns true when the link was clicked.
bool Line(UiState& ui, const std::string& text, const json& ref, std::optional<ViewId> link,
          const ImVec4* color = nullptr, const char* role = "line") {
  ImGui::PushID(text.c_str());
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const std::string button = link ? absl::StrCat("-> ", ViewInfoOf(*link).title) : "";
  // A verdict or a note can be wider than the window: wrapped, with its link
  // kept beside it, it is never cut off at the window's edge.
  const float button_w =
      link ? 16 + ImGui::CalcTextSize(button.c_str()).x + 2 * ImGui::GetStyle().FramePadding.x : 0;
  ImGui::PushTextWrapPos(std::max(ImGui::GetContentRegionMax().x - button_w, ImGui::GetCursorPosX() + 200));
  if (color) {
    ImGui::TextColored(*color, "%s", text.c_str());
  } else {
    ImGui::TextUnformatted(text.c_str());
  }
  ImGui::PopTextWrapPos();
  ImVec2 size = ImGui::GetItemRectSize();
  bool clicked = false;
  if (link) {
    ImGui::SameLine(0, 16);
    clicked = ImGui::SmallButton(button.c_str());
    size.x = ImGui::GetItemRectMax().x - p.x;
    if (clicked) ui.bring_to_front = *link;
  }
  if (ui.layout) {
    auto& item = ui.layout->Add(role, text, ref, p.x, p.y, size.x, size.y);
    item["link"] = link ? ViewName(*link) : "";
  }
  ImGui::PopID();
  return clicked;
}

void Heading(UiState& ui, const char* title) {
  ImGui::Spacing();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::TextColored(Color(kClockLabel), "%s", title);
  if (ui.layout) {
    const ImVec2 s = ImGui::GetItemRectSize();
    ui.layout->Add("heading", title, json{{"table", "runs"}}, p.x, p.y, s.x, s.y);
  }
  ImGui::Separator();
}

std::string Pct(double v) { return absl::StrFormat("%.1f%%", v); }

}  // namespace

ViewId ViewForBound(const std::string& bound, const std::string& what) {
  if (bound == "recompilation") return ViewId::kRecompilations;
  if (bound == "stragglers") return ViewId::kFleet;
  if (bound == "host" || bound == "collectives") return ViewId::kTimeline;
  if (bound == "memory") return absl::StrContains(what, "kernels") ? ViewId::kOps : ViewId::kMemory;
  if (bound == "compute") return ViewId::kOps;
  return ViewId::kMetrics;
}

absl::StatusOr<OverviewModel> BuildOverviewModel(const store::Reader& reader, int64_t run_id) {
  OverviewModel m;
  auto header = analysis::ReadRunHeader(reader, run_id);
  if (!header.ok()) return header.status();
  m.run = *std::move(header);
  auto compiles = analysis::ReadCompileStats(reader, run_id);
  if (!compiles.ok()) return compiles.status();
  m.compiles = *std::move(compiles);
  const std::string run = absl::StrCat(run_id);
  // Steps on the host clock, as the report reads them.
  auto steps = reader.Query("SELECT step, loss, wall_ns FROM steps WHERE run_id = ?1 ORDER BY step", {run});
  if (!steps.ok()) return steps.status();
  analysis::FillStepStats(*steps, &m.steps);
  m.steps.dispatched_ahead = analysis::StepsDispatchedAhead(reader, run);

  m.host_step_ns = m.steps.count > 0 ? m.steps.median_wall_ns : -1;
  // Schema version 1 files have no step_bounds: no step span on any clock then.
  auto has_bounds = reader.HasTable("step_bounds");
  if (!has_bounds.ok()) return has_bounds.status();
  absl::StatusOr<store::QueryResult> bounds = store::QueryResult{};
  if (*has_bounds) bounds = reader.Query("SELECT clock, end_ns - start_ns AS span FROM step_bounds WHERE run_id = ?1", {run});
  if (!bounds.ok()) return bounds.status();
  std::map<std::string, std::vector<int64_t>> spans;
  for (size_t i = 0; i < bounds->rows.size(); ++i) spans[bounds->Text(i, "clock")].push_back(bounds->Int(i, "span"));
  m.device_step_ns = Median(spans["device"]);
  m.modeled_step_ns = Median(spans["modeled"]);
  m.device_steps = static_cast<int64_t>(spans["device"].size());
  m.modeled_steps = static_cast<int64_t>(spans["modeled"].size());

  // IR: a graph with its text (an imported trace has none).
  auto ir = reader.Query("SELECT count(*) AS n FROM graphs WHERE run_id = ?1 AND ir_text <> ''", {run});
  if (!ir.ok()) return ir.status();
  m.has_ir = ir->Int(0, "n") > 0;
  if (!m.has_ir) m.no_ir_why = NoProgramsWhy(reader, run_id);

  // Memory: the largest plan, its top buffer at the peak, and a chip's HBM.
  auto has_plans = reader.HasTable("memory_plans");
  if (!has_plans.ok()) return has_plans.status();
  if (*has_plans) {
    auto plan = reader.Query(
        "SELECT p.graph_id, p.peak_bytes, p.peak_op, b.op, b.bytes, b.source_file, b.source_line, b.scope,"
        " (SELECT max(hbm_bytes) FROM devices d WHERE d.run_id = p.run_id) AS hbm"
        " FROM memory_plans p LEFT JOIN peak_buffers b"
        "   ON b.run_id = p.run_id AND b.graph_id = p.graph_id AND b.rank = 0"
        " WHERE p.run_id = ?1 ORDER BY p.peak_bytes DESC, p.graph_id LIMIT 1",
        {run});
    if (!plan.ok()) return plan.status();
    if (!plan->rows.empty()) {
      m.memory.graph_id = plan->Int(0, "graph_id");
      m.memory.peak_bytes = plan->Int(0, "peak_bytes");
      m.memory.hbm_bytes = plan->Int(0, "hbm");
      m.memory.peak_op = plan->Text(0, "peak_op");
      m.memory.top_buffer = plan->Text(0, "op");
      m.memory.top_bytes = plan->Int(0, "bytes");
      if (!plan->Text(0, "source_file").empty()) {
        m.memory.top_source = absl::StrCat(plan->Text(0, "source_file"), ":", plan->Int(0, "source_line"));
      }
      if (!plan->Text(0, "scope").empty()) absl::StrAppend(&m.memory.top_source, " (", plan->Text(0, "scope"), ")");
    }
  }

  // Warnings, most basic first.
  const analysis::RunHeader& h = m.run;
  if (h.status != "finished" && !h.status_detail.empty()) m.warnings.push_back(h.status_detail);
  if (!h.capture_note.empty()) m.warnings.push_back(absl::StrCat("capture: ", h.capture_note));
  // A simulated run has no device clock: its faults and its chips' times are on the modeled clock.
  if (h.faults_injected) {
    m.warnings.push_back(h.simulated
                             ? "faults were injected on the modeled clock: the simulated timeline has them (--fault)"
                             : "faults were injected on the device clock: its timeline is not the machine's own");
  }
  if (h.simulated) {
    m.warnings.push_back("simulated: compiled and modeled, no numerics; no device clock, the chips' times are modeled");
  }
  auto has_import = reader.HasTable("import_stats");
  if (!has_import.ok()) return has_import.status();
  if (*has_import) {
    auto lost = reader.Query(
        "SELECT name, count, description FROM import_stats WHERE run_id = ?1 AND severity <> 'info' ORDER BY name",
        {run});
    if (!lost.ok()) return lost.status();
    for (size_t i = 0; i < lost->rows.size(); ++i) {
      m.warnings.push_back(absl::StrCat("import: ", lost->Text(i, "name"), " x", lost->Int(i, "count"), ": ",
                                        lost->Text(i, "description")));
    }
  }
  return m;
}

absl::StatusOr<OverviewReport> BuildOverviewReport(const store::Reader& reader, int64_t run_id) {
  OverviewReport o;
  auto report = analysis::BuildRunReport(reader, run_id);
  if (!report.ok()) return report.status();
  o.report = *std::move(report);
  if (!o.report.rematerializations.empty()) {
    o.warnings.push_back(absl::StrCat(o.report.rematerializations.size(),
                                      " involuntary full rematerialization(s): a split value gathered whole on "
                                      "every chip"));
  }
  auto metrics = analysis::BuildMetricsReport(reader, run_id);
  if (metrics.ok()) {
    for (const std::string& w : metrics->warnings) o.warnings.push_back(w);
  } else {
    o.warnings.push_back(absl::StrCat("metrics report unavailable: ", metrics.status().message()));
  }
  return o;
}

void OverviewView::StartLoading() {
  const int64_t run = model_.run.run_id;
  job_.Start(model_.path, [run](const store::Reader& r) { return BuildOverviewModel(r, run); }, wake_);
  report_job_.Start(model_.path, [run](const store::Reader& r) { return BuildOverviewReport(r, run); }, wake_);
}

void OverviewView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("overview");
  StartLoading();
  const auto* result = job_.result();
  if (!result) {
    ImGui::TextDisabled("Reading the run (steps, compilations, memory plans)...");
    return;
  }
  if (!result->ok()) {
    ++drawn_;
    ImGui::TextColored(Color(kWarning), "The overview could not be built: %s",
                       std::string(result->status().message()).c_str());
    ui.DataError(result->status().message());
    return;
  }
  const OverviewModel& m = **result;
  // The report's part comes later on a large run; until then its sections say so.
  const auto* report_result = report_job_.result();
  if (report_result) ++drawn_;
  const OverviewReport* rep = report_result && report_result->ok() ? &**report_result : nullptr;
  auto report_pending = [&](UiState& ui, const json& ref) {
    const ImVec4 dim = Color(kDimText);
    if (!report_result) {
      Line(ui, "computing (the report's analysis of every slice; minutes on a run of millions)...", ref, std::nullopt,
           &dim, "pending");
    } else {
      const ImVec4 warn = Color(kWarning);
      Line(ui, absl::StrCat("the report could not be built: ", report_result->status().message()), ref, std::nullopt,
           &warn, "warning");
    }
  };
  const analysis::RunHeader& h = m.run;
  const json run_ref = {{"table", "runs"}, {"run_id", h.run_id}};
  ImGui::BeginChild("##overview", ImVec2(0, 0), false);

  Heading(ui, "What ran");
  {
    std::string what = absl::StrFormat("run %d: %s, %d steps, mesh %s", h.run_id, h.sample, m.steps.count, h.mesh);
    if (!h.mesh_axes.empty()) absl::StrAppend(&what, " (", h.mesh_axes, ")");
    absl::StrAppend(&what, ", ", h.num_devices, " chips on ", h.num_hosts, h.num_hosts == 1 ? " host" : " hosts");
    if (!h.sharding.empty()) absl::StrAppend(&what, ", sharding ", h.sharding);
    absl::StrAppend(&what, ", profile ", h.profile);
    Line(ui, what, run_ref, Built(ViewId::kSharding, ViewId::kTimeline));
    std::string how = absl::StrCat("clocks: ", h.clock_kinds.empty() ? "host" : h.clock_kinds, "; ",
                                   h.imported ? "imported from another tool's trace (timelines, no IR)"
                                   : h.simulated ? "simulated (compile, partitioning and cost model; no numerics)"
                                                 : "recorded (every shard computed)",
                                   "; ", h.status);
    if (h.duration_ns) absl::StrAppend(&how, " after ", FormatDuration(double(*h.duration_ns)), " (host)");
    Line(ui, how, run_ref, std::nullopt);
  }
  if (rep && !rep->report.unreadable.empty()) {
    // The report's sections that met damage, as `shardscope report` lists
    // them: shown, and said on stderr (a capture then exits 1).
    Heading(ui, "Not read (the file is damaged there; shardscope check names what)");
    const ImVec4 warn = Color(kWarning);
    for (const std::string& u : rep->report.unreadable) {
      Line(ui, u, run_ref, std::nullopt, &warn, "not_read");
      ui.DataError(u);
    }
  }

  Heading(ui, "Step time");
  {
    const json steps_ref = {{"table", "steps"}, {"run_id", h.run_id}};
    const json bounds_ref = {{"table", "step_bounds"}, {"run_id", h.run_id}};
    if (m.host_step_ns >= 0) {
      std::string line = absl::StrFormat("host clock%s: median %s, p90 %s over %d steps",
                                         m.steps.dispatched_ahead ? " (its dispatch only: the devices ran each "
                                                                    "step after it, asynchronous dispatch)"
                                                                  : "",
                                         FormatDuration(double(m.host_step_ns)),
                                         FormatDuration(double(m.steps.p90_wall_ns)), m.steps.count);
      if (m.steps.first_loss || m.steps.last_loss || m.steps.loss_not_finite_from)
        absl::StrAppend(&line, "; ", analysis::LossText(m.steps));
      Line(ui, line, steps_ref, Built(ViewId::kMetrics, ViewId::kTimeline));
    } else {
      Line(ui, "host clock: no steps recorded", steps_ref, std::nullopt);
    }
    if (m.device_step_ns >= 0) {
      Line(ui,
           absl::StrFormat("device clock: median span %s over %d steps (every chip)",
                           FormatDuration(double(m.device_step_ns)), m.device_steps),
           bounds_ref, ViewId::kTimeline);
    } else {
      Line(ui, "device clock: no device timeline in this run", bounds_ref, std::nullopt);
    }
    if (m.modeled_step_ns >= 0) {
      Line(ui,
           absl::StrFormat("modeled clock (%s profile): median span %s over %d steps", h.profile,
                           FormatDuration(double(m.modeled_step_ns)), m.modeled_steps),
           bounds_ref, ViewId::kTimeline);
    }
  }

  Heading(ui, "What bounds the step");
  if (!rep) {
    report_pending(ui, json{{"table", "runs"}, {"run_id", h.run_id}});
  } else {
    const analysis::Verdict& v = rep->report.verdict;
    const json verdict_ref = {{"table", "runs"}, {"run_id", h.run_id}, {"verdict", v.bound}};
    std::string what;
    for (const auto& e : v.evidence) {
      if (e.bound == v.bound && e.passed) what = e.what;
    }
    const ImVec4 strong = Color(kClockLabel);
    Line(ui, v.line, verdict_ref, Built(ViewForBound(v.bound, what), ViewId::kTimeline), &strong, "verdict");
    for (const analysis::Evidence& e : v.evidence) {
      const bool measurable = !absl::StartsWith(e.detail, "not measurable");
      const char* mark = e.passed ? "!" : measurable ? "-" : "?";
      std::string text = absl::StrFormat("%s %-13s %s: %s (threshold %s)%s%s", mark, e.bound, e.what,
                                         measurable ? absl::StrFormat("%.1f%s", e.value, e.unit) : "-",
                                         absl::StrFormat("%.0f%s", e.threshold, e.unit), e.detail.empty() ? "" : "; ",
                                         e.detail);
      const ImVec4 dim = Color(kDimText);
      const json ref = {{"table", "runs"}, {"run_id", h.run_id}, {"evidence", e.bound}, {"passed", e.passed}};
      ImGui::Indent();
      Line(ui, text, ref, Built(ViewForBound(e.bound, e.what), ViewId::kTimeline), e.passed ? nullptr : &dim,
           "evidence");
      ImGui::Unindent();
    }
    if (!v.parts.empty()) {
      int64_t compute = 0, collective = 0, transfer = 0, wait = 0, idle = 0;
      for (const auto& p : v.parts) {
        compute += p.compute_ns;
        collective += p.collective_ns;
        transfer += p.transfer_ns;
        wait += p.host_wait_ns;
        idle += p.idle_ns;
      }
      const double total = double(compute + collective + transfer + wait + idle);
      if (total > 0 && v.programs_only) {  // --trace steps: programs are one busy span each
        Line(ui,
             absl::StrFormat(
                 "median step %d (%s, %s clock), chip average: programs %s (their compute and collectives "
                 "not told apart: --trace steps), waiting for the host %s, idle %s",
                 v.step, FormatDuration(double(v.span_ns)), v.clock, Pct(100 * compute / total),
                 Pct(100 * wait / total), Pct(100 * idle / total)),
             json{{"table", "step_bounds"}, {"run_id", h.run_id}, {"step", v.step}}, ViewId::kTimeline);
      } else if (total > 0) {
        Line(ui,
             absl::StrFormat("median step %d (%s, %s clock), chip average: compute %s, collectives %s, "
                             "transfers %s, waiting for the host %s, idle %s",
                             v.step, FormatDuration(double(v.span_ns)), v.clock, Pct(100 * compute / total),
                             Pct(100 * collective / total), Pct(100 * transfer / total), Pct(100 * wait / total),
                             Pct(100 * idle / total)),
             json{{"table", "step_bounds"}, {"run_id", h.run_id}, {"step", v.step}}, ViewId::kTimeline);
      }
    }
  }

  // Without per-op statistics (an imported trace has no IR) the report's
  // names by self time stand in, on the first clock that has slices.
  const analysis::NameTimes* names =
      rep && rep->report.kernels.top.empty() && !rep->report.kernels.by_name.empty() ? &rep->report.kernels.by_name[0]
                                                                                     : nullptr;
  Heading(ui, names ? absl::StrCat("Top names by self time (", names->clock, " clock, ",
                                   names->tracks_in_run > names->tracks
                                       ? absl::StrCat(names->tracks, " of ", names->tracks_in_run,
                                                      " lanes (an even sample)")
                                       : std::string("all lanes"),
                                   analysis::AnnotationLanesLeftOut(*names), ", all steps)")
                          .c_str()
                    : "Top ops (device clock, all chips and steps)");
  if (!rep) {
    report_pending(ui, json{{"table", "ops"}, {"run_id", h.run_id}});
  } else if (names) {
    for (const analysis::NameTime& n : names->top) {
      const std::string text = absl::StrFormat(
          "%-40s %-10s %6d x  %9s self  %9s total  %5.1f%% of the lanes' busy time", n.name, n.kind, n.count,
          FormatDuration(double(n.self_ns)), FormatDuration(double(n.total_ns)),
          names->self_ns > 0 ? 100.0 * double(n.self_ns) / double(names->self_ns) : 0.0);
      Line(ui, text, json{{"table", "slices"}, {"name", n.name}, {"clock", names->clock}},
           Built(ViewId::kOps, ViewId::kTimeline), nullptr, "op");
    }
    if (names->names > static_cast<int64_t>(names->top.size()))
      Line(ui, absl::StrFormat("... and %d more names (Op profile lists them all)", names->names - names->top.size()),
           json{{"table", "slices"}, {"run_id", h.run_id}}, Built(ViewId::kOps, ViewId::kTimeline));
  } else {
    const analysis::KernelStats& k = rep->report.kernels;
    if (k.top.empty()) {
      Line(ui, k.empty_reason.empty() ? "no per-op timings in this run" : k.empty_reason,
           json{{"table", "ops"}, {"run_id", h.run_id}}, std::nullopt);
    }
    for (const analysis::KernelRow& op : k.top) {
      std::string text = absl::StrFormat("%-18s %-16s %-10s %5d x  %9s total  %9s modeled  %5.1f%% of peak  %s",
                                         op.name, op.shape, op.roofline, op.count,
                                         FormatDuration(double(op.total_ns)), FormatDuration(double(op.modeled_ns)),
                                         100 * op.fraction_of_peak,
                                         op.source_file.empty() ? std::string("-")
                                                                : absl::StrCat(op.source_file, ":", op.source_line));
      if (!op.scope.empty()) absl::StrAppend(&text, " (", op.scope, ")");
      const json ref = {{"table", "ops"}, {"graph_id", op.graph_id}, {"op_id", op.op_id}};
      if (Line(ui, text, ref, Built(ViewId::kOps, ViewId::kTimeline), nullptr, "op")) {
        ui.selected_op = std::pair{op.graph_id, op.op_id};
        ui.scroll_to_selected_op = true;
      }
    }
    if (k.cost_error) {
      Line(ui, analysis::CostModelErrorLine(*k.cost_error), json{{"table", "ops"}, {"run_id", h.run_id}},
           Built(ViewId::kOps, ViewId::kTimeline));
    }
  }

  Heading(ui, "Compilations (host clock)");
  {
    const analysis::CompileStats& c = m.compiles;
    Line(ui,
         absl::StrFormat("%d compile requests, %s in all: %d misses (%d recompilation%s), %d memory hits, "
                         "%d disk hits",
                         c.count, FormatDuration(double(c.total_ns)), c.misses, c.recompilations, c.recompilations == 1 ? "" : "s", c.memory_hits,
                         c.disk_hits),
         json{{"table", "compilations"}, {"run_id", h.run_id}}, ViewId::kRecompilations);
    ImGui::Indent();
    for (const analysis::CompileMiss& miss : c.miss_list) {
      std::string text = absl::StrFormat("step %d  %s: %s  %s", miss.step, analysis::Humanize(miss.cause_kind),
                                         miss.cause_detail, FormatDuration(double(miss.duration_ns)));
      if (!miss.source_file.empty()) absl::StrAppend(&text, "  at ", miss.source_file, ":", miss.source_line);
      if (Line(ui, text, json{{"table", "compilations"}, {"compile_id", miss.compile_id}}, ViewId::kRecompilations,
               nullptr, "compilation")) {
        ui.selected_compile_id = miss.compile_id;
        ui.scroll_to_selected_compile = true;
      }
    }
    for (const analysis::CompileSuggestion& s : c.suggestions) {
      Line(ui, absl::StrCat("suggestion for ", s.call_site, ": ", s.text),
           json{{"table", "compilations"}, {"run_id", h.run_id}}, ViewId::kRecompilations);
    }
    ImGui::Unindent();
  }

  Heading(ui, "Memory (per chip)");
  if (m.memory.graph_id >= 0) {
    std::string text = absl::StrFormat("largest program: graph %d peaks at %s", m.memory.graph_id,
                                       FormatBytes(m.memory.peak_bytes));
    if (m.memory.hbm_bytes > 0) {
      absl::StrAppend(&text, absl::StrFormat(" of %s HBM (%.1f%%)", FormatBytes(m.memory.hbm_bytes),
                                             100.0 * double(m.memory.peak_bytes) / double(m.memory.hbm_bytes)));
    }
    absl::StrAppend(&text, " at ", m.memory.peak_op);
    if (!m.memory.top_buffer.empty()) {
      absl::StrAppend(&text, "; largest live buffer ", m.memory.top_buffer, " ", FormatBytes(m.memory.top_bytes));
      if (!m.memory.top_source.empty()) absl::StrAppend(&text, " (", m.memory.top_source, ")");
    }
    if (Line(ui, text, json{{"table", "memory_plans"}, {"graph_id", m.memory.graph_id}},
             Built(ViewId::kMemory, ViewId::kSharding))) {
      ui.selected_graph = m.memory.graph_id;
    }
  } else {
    Line(ui, m.has_ir ? "no memory plans recorded" : absl::StrCat("no memory plans: ", m.no_ir_why),
         json{{"table", "memory_plans"}, {"run_id", h.run_id}}, std::nullopt);
  }
  if (!m.has_ir) {
    Line(ui, absl::StrCat("This run has no IR (", m.no_ir_why, "): the graph, memory plans and per-op costs are not available."),
         run_ref, std::nullopt);
  }

  Heading(ui, "Warnings and capture notes");
  std::vector<std::string> warnings = m.warnings;
  if (rep) warnings.insert(warnings.end(), rep->warnings.begin(), rep->warnings.end());
  if (warnings.empty()) Line(ui, rep ? "none" : "none so far", run_ref, std::nullopt);
  const ImVec4 warn = Color(kWarning);
  for (const std::string& w : warnings) {
    const bool remat = absl::StrContains(w, "rematerialization");
    Line(ui, w, run_ref, remat ? std::optional<ViewId>(ViewId::kSharding) : Built(ViewId::kMetrics, ViewId::kTimeline),
         &warn, "warning");
  }
  ImGui::EndChild();
}

}  // namespace shardscope::app
