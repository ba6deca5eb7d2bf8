// The Metrics view; see metrics_view.h.
#include "ui/app/metrics_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/timeline.h"
#include "ui/app/chart.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Points per counter chart: about one per two pixels of a wide window.
constexpr int kCounterBins = 800;
// Up to this many samples of one counter are binned here from the rows
// themselves; more are read from the store's summaries.
constexpr int64_t kRawCounterRows = 50'000;

ImVec4 Color(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

std::vector<double> AsDouble(const std::vector<int64_t>& v) {
  std::vector<double> out;
  out.reserve(v.size());
  for (int64_t x : v) out.push_back(x < 0 ? kNaN : double(x));
  return out;
}

}  // namespace

size_t MetricsModel::IndexOf(int step) const {
  auto it = std::lower_bound(steps.begin(), steps.end(), step);
  return it != steps.end() && *it == step ? size_t(it - steps.begin()) : steps.size();
}

absl::StatusOr<MetricsModel> BuildMetricsModel(const store::Reader& reader, int64_t run_id) {
  MetricsModel m;
  auto report = analysis::BuildMetricsReport(reader, run_id);
  if (!report.ok()) return report.status();
  m.report = *std::move(report);
  const std::string run = absl::StrCat(run_id);

  auto steps = reader.Query("SELECT step, wall_ns, loss, eval_loss FROM steps WHERE run_id = ?1 ORDER BY step", {run});
  if (!steps.ok()) return steps.status();
  // Schema version 1 files have no step_bounds: no device or modeled step series then.
  auto has_bounds = reader.HasTable("step_bounds");
  if (!has_bounds.ok()) return has_bounds.status();
  absl::StatusOr<store::QueryResult> bounds = store::QueryResult{};
  if (*has_bounds)
    bounds = reader.Query("SELECT clock, step, end_ns - start_ns AS span FROM step_bounds WHERE run_id = ?1", {run});
  if (!bounds.ok()) return bounds.status();
  auto compiles = reader.Query(
      "SELECT step, count(*) AS n, sum(cache = 'miss') AS misses, sum(duration_ns) AS ns FROM compilations"
      " WHERE run_id = ?1 GROUP BY step",
      {run});
  if (!compiles.ok()) return compiles.status();

  // The steps any of them has.
  std::set<int> all;
  for (size_t i = 0; i < steps->rows.size(); ++i) all.insert(int(steps->Int(i, "step")));
  for (size_t i = 0; i < bounds->rows.size(); ++i) all.insert(int(bounds->Int(i, "step")));
  for (size_t i = 0; i < compiles->rows.size(); ++i) all.insert(int(compiles->Int(i, "step")));
  m.steps.assign(all.begin(), all.end());
  const size_t n = m.steps.size();
  m.host_ns.assign(n, -1);
  m.device_ns.assign(n, -1);
  m.modeled_ns.assign(n, -1);
  m.loss.assign(n, kNaN);
  m.eval_loss.assign(n, kNaN);
  m.compile_ns.assign(n, 0);
  m.compiles.assign(n, 0);
  m.compile_misses.assign(n, 0);
  for (auto* v : {&m.compute_ns, &m.collective_ns, &m.transfer_ns, &m.host_wait_ns, &m.transfer_bytes}) v->assign(n, 0);
  for (size_t i = 0; i < steps->rows.size(); ++i) {
    const size_t at = m.IndexOf(int(steps->Int(i, "step")));
    m.host_ns[at] = steps->Int(i, "wall_ns");
    if (steps->rows[i][steps->Col("loss")]) {
      const double loss = steps->Real(i, "loss", kNaN);
      // A diverged step's NaN or Inf is said, not drawn: Inf would stretch the axis to nothing.
      if (std::isfinite(loss))
        m.loss[at] = loss;
      else if (m.loss_not_finite_from < 0)
        m.loss_not_finite_from = m.steps[at];
    }
    if (steps->Col("eval_loss") >= 0 && steps->rows[i][steps->Col("eval_loss")]) {
      m.eval_loss[at] = steps->Real(i, "eval_loss");
    }
  }
  for (size_t i = 0; i < bounds->rows.size(); ++i) {
    const size_t at = m.IndexOf(int(bounds->Int(i, "step")));
    const std::string clock = bounds->Text(i, "clock");
    if (clock == "device") m.device_ns[at] = bounds->Int(i, "span");
    if (clock == "modeled") m.modeled_ns[at] = bounds->Int(i, "span");
  }
  for (size_t i = 0; i < compiles->rows.size(); ++i) {
    const size_t at = m.IndexOf(int(compiles->Int(i, "step")));
    m.compile_ns[at] = compiles->Int(i, "ns");
    m.compiles[at] = compiles->Int(i, "n");
    m.compile_misses[at] = compiles->Int(i, "misses");
  }

  // Device time per step and kind: one pass over the device lanes.
  auto tracks = reader.Query(
      "SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = 'device' AND device_id IS NOT NULL ORDER BY track_id",
      {run});
  if (!tracks.ok()) return tracks.status();
  store::TimelineReader tl(reader);
  for (size_t i = 0; i < tracks->rows.size(); ++i) {
    auto slices = tl.Slices(run_id, tracks->Int(i, "track_id"), -(int64_t{1} << 60), int64_t{1} << 61);
    if (!slices.ok()) return slices.status();
    if (!slices->empty()) ++m.devices;
    for (const store::TimelineSlice& s : *slices) {
      if (s.depth != 0 || s.step < 0) continue;
      const size_t at = m.IndexOf(s.step);
      if (at == n) continue;
      switch (s.kind) {
        case store::TimelineKind::kCompute: m.compute_ns[at] += s.dur_ns; break;
        case store::TimelineKind::kCollective: m.collective_ns[at] += s.dur_ns; break;
        case store::TimelineKind::kTransfer:
          m.transfer_ns[at] += s.dur_ns;
          m.transfer_bytes[at] += s.bytes;
          break;
        case store::TimelineKind::kHostWait: m.host_wait_ns[at] += s.dur_ns; break;
        default: break;
      }
    }
  }

  // Counters: each name over time, the smallest and largest over its chips.
  auto names = reader.Query(
      "SELECT name, count(DISTINCT device_id) AS devices, count(*) AS rows, min(ts_ns) AS t0, max(ts_ns) AS t1,"
      " min(value) AS lo, max(value) AS hi FROM counters WHERE run_id = ?1 GROUP BY name ORDER BY name",
      {run});
  if (!names.ok()) return names.status();
  for (size_t i = 0; i < names->rows.size(); ++i) {
    MetricsModel::Counter c;
    c.name = names->Text(i, "name");
    c.devices = names->Int(i, "devices");
    c.lowest = names->Real(i, "lo");
    c.highest = names->Real(i, "hi");
    const int64_t t0 = names->Int(i, "t0"), t1 = names->Int(i, "t1");
    std::map<int64_t, std::pair<double, double>> bins;  // start -> (min, max)
    auto add = [&](int64_t start, double lo, double hi) {
      auto [it, fresh] = bins.try_emplace(start, lo, hi);
      if (!fresh) {
        it->second.first = std::min(it->second.first, lo);
        it->second.second = std::max(it->second.second, hi);
      }
    };
    if (names->Int(i, "rows") <= kRawCounterRows) {
      const int64_t width = std::max<int64_t>(1, (t1 - t0) / kCounterBins + 1);
      auto rows = reader.Query("SELECT ts_ns, value FROM counters WHERE run_id = ?1 AND name = ?2", {run, c.name});
      if (!rows.ok()) return rows.status();
      for (size_t r = 0; r < rows->rows.size(); ++r) {
        const double v = rows->Real(r, "value");
        add(t0 + (rows->Int(r, "ts_ns") - t0) / width * width, v, v);
      }
    } else {
      const int level = std::max(0, store::SummaryLevelFor(t0, t1 + 1, kCounterBins));
      auto devs = reader.Query("SELECT DISTINCT device_id FROM counters WHERE run_id = ?1 AND name = ?2", {run, c.name});
      if (!devs.ok()) return devs.status();
      for (size_t d = 0; d < devs->rows.size(); ++d) {
        const int device = devs->rows[d][0] ? int(devs->Int(d, "device_id")) : -1;
        auto buckets = tl.CounterSummaries(run_id, device, c.name, level, t0, t1 + 1);
        if (!buckets.ok()) return buckets.status();
        for (const store::CounterBucket& b : *buckets) add(b.start_ns, b.min, b.max);
      }
    }
    for (const auto& [start, mm] : bins) {
      c.t_ns.push_back(double(start));
      c.min.push_back(mm.first);
      c.max.push_back(mm.second);
    }
    m.counters.push_back(std::move(c));
  }
  return m;
}

void MetricsView::StartLoading() {
  const int64_t run = model_.run.run_id;
  job_.Start(model_.path, [run](const store::Reader& r) { return BuildMetricsModel(r, run); }, wake_);
}

void MetricsView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("metrics");
  StartLoading();
  const auto* result = job_.result();
  if (!result) {
    ImGui::TextDisabled("Reading the metrics report and each step's figures...");
    return;
  }
  if (!result->ok()) {
    ++drawn_;
    ImGui::TextColored(Color(kWarning), "The metrics could not be read: %s",
                       std::string(result->status().message()).c_str());
    ui.DataError(result->status().message());
    return;
  }
  const MetricsModel& m = **result;
  ++drawn_;
  const analysis::MetricsReport& r = m.report;
  ImGui::BeginChild("##metrics", ImVec2(0, 0), false);
  // A warning or a run's state can be wider than the window: wrapped, not cut off at its edge.
  ImGui::PushTextWrapPos(0);
  ImGui::Text("Metrics report of run %lld: %lld steps (%s)%s", static_cast<long long>(r.run_id),
              static_cast<long long>(r.steps), r.stored ? "stored when the run ended" : "computed from its tables",
              r.run_state.empty() ? "" : absl::StrCat("; ", r.run_state).c_str());
  for (const std::string& w : r.warnings) {
    ImGui::TextColored(Color(kWarning), "! %s", w.c_str());
    if (ui.layout) {
      ui.layout->Add("warning", w, json{{"table", "metrics"}, {"run_id", r.run_id}}, ImGui::GetItemRectMin().x,
                     ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
    }
  }
  ImGui::PopTextWrapPos();

  const float chart_h = 170;
  const std::vector<double> xs(m.steps.begin(), m.steps.end());
  // The playhead's step, marked on the charts over steps.
  const std::optional<double> head = ui.playhead_step ? std::optional<double>(*ui.playhead_step) : std::nullopt;
  const std::string head_label = ui.playhead_step ? absl::StrCat("playhead: step ", *ui.playhead_step) : "";
  const json steps_ref = {{"table", "steps"}, {"run_id", r.run_id}};
  {
    std::vector<ChartSeries> series;
    if (std::any_of(m.host_ns.begin(), m.host_ns.end(), [](int64_t v) { return v >= 0; })) {
      series.push_back({"host", KindColor(SliceKind::kHost), xs, AsDouble(m.host_ns)});
    }
    if (std::any_of(m.device_ns.begin(), m.device_ns.end(), [](int64_t v) { return v >= 0; })) {
      series.push_back({"device", KindColor(SliceKind::kCompute), xs, AsDouble(m.device_ns)});
    }
    if (std::any_of(m.modeled_ns.begin(), m.modeled_ns.end(), [](int64_t v) { return v >= 0; })) {
      series.push_back({"modeled", kClockLabel, xs, AsDouble(m.modeled_ns)});
    }
    DrawChart(ui, "##step_time", {.title = "Step time on each clock (host: wall time; device, modeled: span over every chip)",
                                  .x_label = "step", .mark_x = head, .mark_label = head_label},
              series, chart_h, json{{"table", "step_bounds"}, {"run_id", r.run_id}});
  }
  if (std::any_of(m.loss.begin(), m.loss.end(), [](double v) { return !std::isnan(v); })) {
    std::vector<ChartSeries> series = {{"loss", {230, 120, 120}, xs, m.loss}};
    if (std::any_of(m.eval_loss.begin(), m.eval_loss.end(), [](double v) { return !std::isnan(v); })) {
      series.push_back({"eval loss", {200, 170, 240}, xs, m.eval_loss});
    }
    DrawChart(ui, "##loss", {.title = "Loss", .x_label = "step", .unit = ChartUnit::kNumber, .from_zero = false, .mark_x = head,
                             .mark_label = head_label}, series,
              chart_h, steps_ref);
  } else if (m.loss_not_finite_from >= 0) {
    // The warning above says where it diverged; here only why no chart.
    ImGui::TextDisabled("No finite loss to draw: NaN or Inf from step %d.", m.loss_not_finite_from);
  } else {
    ImGui::TextDisabled("No loss recorded (a simulated run, or an imported trace).");
  }
  {
    std::vector<ChartSeries> series = {
        {"compile time", CompileColor(true), xs, AsDouble(m.compile_ns), true},
    };
    DrawChart(ui, "##compile", {.title = "Compile time per step (host clock; cache hits included)", .x_label = "step",
                                .mark_x = head, .mark_label = head_label},
              series, chart_h, json{{"table", "compilations"}, {"run_id", r.run_id}});
  }
  if (m.devices > 0) {
    const double per = 1.0 / double(m.devices);
    auto avg = [&](const std::vector<int64_t>& v) {
      std::vector<double> out;
      for (int64_t x : v) out.push_back(double(x) * per);
      return out;
    };
    std::vector<ChartSeries> series = {
        {"compute", KindColor(SliceKind::kCompute), xs, avg(m.compute_ns)},
        {"collective", KindColor(SliceKind::kCollective), xs, avg(m.collective_ns)},
        {"transfer", KindColor(SliceKind::kTransfer), xs, avg(m.transfer_ns)},
        {"host wait", kHostWaitHatch, xs, avg(m.host_wait_ns)},
    };
    DrawChart(ui, "##kinds",
              {.title = absl::StrFormat("Device time per step by kind, chip average over %d chips (device clock)",
                                        m.devices),
               .x_label = "step", .mark_x = head, .mark_label = head_label},
              series, chart_h, json{{"table", "slices"}, {"run_id", r.run_id}, {"clock", "device"}});
    std::vector<ChartSeries> bytes = {{"bytes moved", KindColor(SliceKind::kTransfer), xs, AsDouble(m.transfer_bytes), true}};
    DrawChart(ui, "##transfers",
              {.title = "Host-device transfers per step, every chip (device clock)", .x_label = "step",
               .unit = ChartUnit::kBytes, .mark_x = head, .mark_label = head_label},
              bytes, chart_h * 0.8f, json{{"table", "slices"}, {"run_id", r.run_id}, {"kind", "transfer"}});
  } else {
    // A --trace off run has chips and a device clock, only no slices: say that, not "no device timeline".
    const bool trace_off = std::any_of(r.metrics.begin(), r.metrics.end(),
                                       [](const store::TimingMetric& t) { return t.count < 0; });
    const char* why = trace_off ? "No device-clock slices: the run was recorded with --trace off."
                                : "No device timeline in this run.";
    ImGui::TextDisabled("%s", why);
    if (ui.layout)
      ui.layout->Add("note", why, json{{"table", "slices"}, {"run_id", r.run_id}}, ImGui::GetItemRectMin().x,
                     ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
  }
  for (const MetricsModel::Counter& c : m.counters) {
    const bool bytes = c.name.find("bytes") != std::string::npos;
    ChartSeries s{c.devices > 1 ? "largest over chips" : c.name, kCounterLine, c.t_ns, c.max};
    if (c.devices > 1) s.y_min = c.min;
    DrawChart(ui, absl::StrCat("##counter_", c.name).c_str(),
              {.title = absl::StrFormat("%s (%s; host clock)", c.name,
                                        c.devices == 0 ? "process-wide" : absl::StrCat(c.devices, " chips")),
               .x_label = "host clock",
               .unit = bytes ? ChartUnit::kBytes : ChartUnit::kNumber,
               .x_unit = ChartUnit::kNs},
              {s}, chart_h * 0.8f, json{{"table", "counters"}, {"run_id", r.run_id}, {"name", c.name}});
  }

  // The report's figures as tables.
  ImGui::Spacing();
  ImGui::TextColored(Color(kClockLabel), "Timing metrics");
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit;
  if (ImGui::BeginTable("##timings", 8, flags)) {
    for (const char* h : {"metric", "clock", "count", "total", "p50", "p90", "p99", "max"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const auto& t : r.metrics) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(t.name.c_str());
      if (ui.layout) {
        auto& item = ui.layout->Add("row", t.name, json{{"table", "metrics"}, {"kind", "metric"}, {"name", t.name}},
                                    ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x,
                                    ImGui::GetItemRectSize().y);
        item["count"] = t.count;
        item["total_ns"] = t.total_ns;
      }
      if (ImGui::IsItemHovered() && !t.what.empty()) ImGui::SetTooltip("%s", t.what.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(t.clock.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(t.count));
      for (int64_t v : {t.total_ns, t.p50_ns, t.p90_ns, t.p99_ns, t.max_ns}) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(FormatDuration(double(v)).c_str());
      }
    }
    ImGui::EndTable();
  }
  ImGui::TextColored(Color(kClockLabel), "Counters");
  if (ImGui::BeginTable("##counters", 3, flags)) {
    for (const char* h : {"counter", "value", "what it counts"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const auto& c : r.counters) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(c.name.c_str());
      if (ui.layout) {
        auto& item = ui.layout->Add("row", c.name, json{{"table", "metrics"}, {"kind", "counter"}, {"name", c.name}},
                                    ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x,
                                    ImGui::GetItemRectSize().y);
        item["value"] = c.value ? json(*c.value) : json();
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(c.value ? absl::StrCat(*c.value).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(c.note.c_str());
    }
    ImGui::EndTable();
  }
  ImGui::EndChild();
}

}  // namespace shardscope::app
