// The Memory view; see memory_view.h.
#include "ui/app/memory_view.h"

#include <imgui.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/timeline.h"
#include "ui/app/chart.h"
#include "ui/app/format.h"
#include "ui/app/trace_model.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

constexpr int kBins = 800;
constexpr int64_t kRawRows = 50'000;

ImVec4 Color(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

// Each plan's liveness curve (`memory_curves`, two JSON arrays per program),
// with each op's name and line from `ops`. A file without the table keeps
// `curves_recorded` false.
absl::Status ReadCurves(const store::Reader& reader, const std::string& run, const std::map<int64_t, size_t>& at,
                        MemoryModel& m) {
  auto has = reader.HasTable("memory_curves");
  if (!has.ok()) return has.status();
  m.curves_recorded = *has;
  if (!*has) return absl::OkStatus();
  auto rows = reader.Query("SELECT graph_id, ops, op_ids, live_bytes FROM memory_curves WHERE run_id = ?1", {run});
  if (!rows.ok()) return rows.status();
  for (size_t i = 0; i < rows->rows.size(); ++i) {
    const int64_t graph = rows->Int(i, "graph_id");
    auto it = at.find(graph);
    if (it == at.end()) continue;
    json ids = json::parse(rows->Text(i, "op_ids"), nullptr, false);
    json bytes = json::parse(rows->Text(i, "live_bytes"), nullptr, false);
    if (!ids.is_array() || !bytes.is_array() || ids.size() != bytes.size() ||
        int64_t(ids.size()) != rows->Int(i, "ops")) {
      return absl::DataLossError(absl::StrCat(reader.path(), ": memory_curves of graph ", graph, " in run ", run,
                                              " is damaged (op_ids and live_bytes must be JSON arrays of `ops` numbers)"));
    }
    auto& curve = m.plans[it->second].curve;
    curve.resize(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!ids[k].is_number_integer() || !bytes[k].is_number_integer()) {
        return absl::DataLossError(absl::StrCat(reader.path(), ": memory_curves of graph ", graph, " in run ", run,
                                                ": point ", k, " is not a pair of integers"));
      }
      curve[k].op_id = ids[k].get<int64_t>();
      curve[k].live_bytes = bytes[k].get<int64_t>();
    }
    // Names and lines of the program's ops, matched by id.
    auto ops = reader.Query("SELECT op_id, name, source_file, source_line FROM ops WHERE run_id = ?1 AND graph_id = ?2",
                            {run, absl::StrCat(graph)});
    if (!ops.ok()) return ops.status();
    std::map<int64_t, size_t> row_of;
    for (size_t r = 0; r < ops->rows.size(); ++r) row_of[ops->Int(r, "op_id")] = r;
    for (auto& p : curve) {
      auto r = row_of.find(p.op_id);
      if (r == row_of.end()) continue;
      p.name = ops->Text(r->second, "name");
      if (!ops->Text(r->second, "source_file").empty()) {
        p.source = absl::StrCat(ops->Text(r->second, "source_file"), ":", ops->Int(r->second, "source_line"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t MemoryModel::HbmOf(int device) const {
  for (const auto& [d, bytes] : hbm) {
    if (d == device) return bytes;
  }
  return 0;
}

size_t MemoryModel::Plan::CurvePeak() const {
  size_t best = curve.size();
  for (size_t i = 0; i < curve.size(); ++i) {
    if (best == curve.size() || curve[i].live_bytes > curve[best].live_bytes) best = i;
  }
  return best;
}

size_t MemoryModel::LargestPlan() const {
  size_t best = plans.size();
  for (size_t i = 0; i < plans.size(); ++i) {
    if (best == plans.size() || plans[i].peak_bytes > plans[best].peak_bytes) best = i;
  }
  return best;
}

absl::StatusOr<MemoryModel> BuildMemoryModel(const store::Reader& reader, int64_t run_id) {
  MemoryModel m;
  m.run_id = run_id;
  const std::string run = absl::StrCat(run_id);
  auto devices = reader.Query("SELECT device_id, hbm_bytes FROM devices WHERE run_id = ?1 ORDER BY device_id", {run});
  if (!devices.ok()) return devices.status();
  for (size_t i = 0; i < devices->rows.size(); ++i) {
    m.hbm.push_back({int(devices->Int(i, "device_id")), devices->Int(i, "hbm_bytes")});
  }
  auto ir = reader.Query("SELECT count(*) AS n FROM graphs WHERE run_id = ?1 AND ir_text <> ''", {run});
  if (!ir.ok()) return ir.status();
  m.has_ir = ir->Int(0, "n") > 0;
  if (!m.has_ir) m.no_ir_why = NoProgramsWhy(reader, run_id);

  auto has_plans = reader.HasTable("memory_plans");
  if (!has_plans.ok()) return has_plans.status();
  if (*has_plans) {
    auto plans = reader.Query(
        "SELECT p.graph_id, p.peak_bytes, p.parameter_bytes, p.arena_bytes, p.unshared_bytes, p.peak_op,"
        " (SELECT count(*) FROM executions e WHERE e.run_id = p.run_id AND e.graph_id = p.graph_id) AS runs,"
        " (SELECT min(step) FROM executions e WHERE e.run_id = p.run_id AND e.graph_id = p.graph_id) AS first,"
        " (SELECT max(step) FROM executions e WHERE e.run_id = p.run_id AND e.graph_id = p.graph_id) AS last"
        " FROM memory_plans p WHERE p.run_id = ?1 ORDER BY p.graph_id",
        {run});
    if (!plans.ok()) return plans.status();
    std::map<int64_t, size_t> at;
    for (size_t i = 0; i < plans->rows.size(); ++i) {
      MemoryModel::Plan p;
      p.graph_id = plans->Int(i, "graph_id");
      p.peak_bytes = plans->Int(i, "peak_bytes");
      p.parameter_bytes = plans->Int(i, "parameter_bytes");
      p.arena_bytes = plans->Int(i, "arena_bytes");
      p.unshared_bytes = plans->Int(i, "unshared_bytes");
      p.peak_op = plans->Text(i, "peak_op");
      p.executions = plans->Int(i, "runs");
      p.first_step = int(plans->Int(i, "first", -1));
      p.last_step = int(plans->Int(i, "last", -1));
      at[p.graph_id] = m.plans.size();
      m.plans.push_back(std::move(p));
    }
    auto buffers = reader.Query(
        "SELECT graph_id, rank, op_id, op, bytes, is_input, source_file, source_line, scope FROM peak_buffers"
        " WHERE run_id = ?1 ORDER BY graph_id, rank",
        {run});
    if (!buffers.ok()) return buffers.status();
    for (size_t i = 0; i < buffers->rows.size(); ++i) {
      auto it = at.find(buffers->Int(i, "graph_id"));
      if (it == at.end()) continue;
      MemoryModel::Buffer b;
      b.rank = int(buffers->Int(i, "rank"));
      b.op_id = buffers->Int(i, "op_id");
      b.op = buffers->Text(i, "op");
      b.bytes = buffers->Int(i, "bytes");
      b.input = buffers->Int(i, "is_input") != 0;
      if (!buffers->Text(i, "source_file").empty()) {
        b.source = absl::StrCat(buffers->Text(i, "source_file"), ":", buffers->Int(i, "source_line"));
      }
      b.scope = buffers->Text(i, "scope");
      m.plans[it->second].live_at_peak.push_back(std::move(b));
    }
    if (absl::Status st = ReadCurves(reader, run, at, m); !st.ok()) return st;
  }

  // The HBM counter per chip: its samples binned, or its summaries when many.
  auto extent = reader.Query(
      "SELECT device_id, count(*) AS n, min(ts_ns) AS t0, max(ts_ns) AS t1 FROM counters"
      " WHERE run_id = ?1 AND name = 'hbm_bytes_in_use' AND device_id IS NOT NULL GROUP BY device_id ORDER BY device_id",
      {run});
  if (!extent.ok()) return extent.status();
  store::TimelineReader tl(reader);
  for (size_t i = 0; i < extent->rows.size(); ++i) {
    MemoryModel::Series s;
    s.device = int(extent->Int(i, "device_id"));
    const int64_t t0 = extent->Int(i, "t0"), t1 = extent->Int(i, "t1");
    std::map<int64_t, std::pair<double, double>> bins;
    auto add = [&](int64_t start, double lo, double hi) {
      auto [it, fresh] = bins.try_emplace(start, lo, hi);
      if (!fresh) {
        it->second.first = std::min(it->second.first, lo);
        it->second.second = std::max(it->second.second, hi);
      }
    };
    if (extent->Int(i, "n") <= kRawRows) {
      const int64_t width = std::max<int64_t>(1, (t1 - t0) / kBins + 1);
      auto rows = reader.Query(
          "SELECT ts_ns, value FROM counters WHERE run_id = ?1 AND name = 'hbm_bytes_in_use' AND device_id = ?2",
          {run, absl::StrCat(s.device)});
      if (!rows.ok()) return rows.status();
      for (size_t r = 0; r < rows->rows.size(); ++r) {
        const double v = rows->Real(r, "value");
        add(t0 + (rows->Int(r, "ts_ns") - t0) / width * width, v, v);
      }
    } else {
      const int level = std::max(0, store::SummaryLevelFor(t0, t1 + 1, kBins));
      auto buckets = tl.CounterSummaries(run_id, s.device, "hbm_bytes_in_use", level, t0, t1 + 1);
      if (!buckets.ok()) return buckets.status();
      for (const store::CounterBucket& b : *buckets) add(b.start_ns, b.min, b.max);
    }
    for (const auto& [start, mm] : bins) {
      s.t_ns.push_back(double(start));
      s.min.push_back(mm.first);
      s.max.push_back(mm.second);
    }
    m.in_use.push_back(std::move(s));
  }
  return m;
}

// The picked program's live bytes at each op (per chip) with the peak marked
// and the chip's budget; hovering reads an op, clicking opens it in Graph.
void MemoryView::DrawCurve(UiState& ui, const MemoryModel& m, const MemoryModel::Plan& p, int64_t hbm) {
  ImGui::Spacing();
  if (p.curve.empty()) {
    const std::string why =
        m.curves_recorded
            ? absl::StrCat("graph ", p.graph_id, ": no liveness curve was recorded for this program.")
            : "The live bytes at each op are not recorded in this file (it was written before memory_curves was "
              "added): only each plan's peak and the buffers live there.";
    ImGui::TextDisabled("%s", why.c_str());
    if (ui.layout) {
      const ImVec2 a = ImGui::GetItemRectMin(), s = ImGui::GetItemRectSize();
      auto& item = ui.layout->Add("text", why, json{{"table", "memory_curves"}, {"graph_id", p.graph_id}}, a.x, a.y,
                                  s.x, s.y);
      item["role"] = "no_curve";
    }
    return;
  }
  const size_t peak = p.CurvePeak();
  ChartSeries line{"live bytes", KindColor(SliceKind::kCompute)};
  line.x.reserve(p.curve.size());
  line.y.reserve(p.curve.size());
  for (size_t k = 0; k < p.curve.size(); ++k) {
    line.x.push_back(double(k));
    line.y.push_back(double(p.curve[k].live_bytes));
  }
  ChartSpec spec{.title = absl::StrFormat("graph %d: live bytes at each op (per chip, %zu ops that run)", p.graph_id,
                                          p.curve.size()),
                 .x_label = "op order",
                 .unit = ChartUnit::kBytes};
  if (hbm > 0) {
    spec.limit = double(hbm);
    spec.limit_label = absl::StrCat("HBM ", FormatBytes(hbm));
  }
  spec.mark_x = double(peak);
  spec.mark_label = absl::StrCat("peak ", FormatBytes(p.curve[peak].live_bytes), " at ", p.curve[peak].name);
  spec.hover_lines = [&p](size_t k) {
    const auto& pt = p.curve[k];
    ImGui::Text("%s (op %lld)", pt.name.empty() ? "?" : pt.name.c_str(), static_cast<long long>(pt.op_id));
    ImGui::Text("%s live", FormatBytes(pt.live_bytes).c_str());
    if (!pt.source.empty()) ImGui::Text("%s", pt.source.c_str());
    ImGui::TextDisabled("click: open it in Graph");
  };
  const json ref{{"table", "memory_curves"}, {"graph_id", p.graph_id}};
  const auto hovered = DrawChart(ui, "##curve", spec, {line}, 170, ref);
  if (ui.layout) {
    const ImVec2 a = ImGui::GetItemRectMin(), s = ImGui::GetItemRectSize();
    auto& item = ui.layout->Add("curve", spec.title, ref, a.x, a.y, s.x, s.y);
    item["points"] = p.curve.size();
    item["peak_index"] = peak;
    item["peak_bytes"] = p.curve[peak].live_bytes;
    item["peak_op_id"] = p.curve[peak].op_id;
    item["peak_op"] = p.curve[peak].name;
    item["plan_peak_bytes"] = p.peak_bytes;
    if (hovered) {
      const auto& pt = p.curve[*hovered];
      item["hover"] = json{{"index", *hovered}, {"op_id", pt.op_id}, {"op", pt.name}, {"live_bytes", pt.live_bytes},
                           {"source", pt.source}};
    }
  }
  if (hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
    // The op in its program: Graph centres on it (as a kernel picked on the timeline).
    const auto& pt = p.curve[*hovered];
    ui.graph_focus = GraphFocus{p.graph_id, pt.op_id};
    ui.selected_op = std::pair{p.graph_id, pt.op_id};
    ui.bring_to_front = ViewId::kGraph;
  }
}

void MemoryView::StartLoading() {
  const int64_t run = model_.run.run_id;
  job_.Start(model_.path, [run](const store::Reader& r) { return BuildMemoryModel(r, run); }, wake_);
}

void MemoryView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("memory");
  StartLoading();
  const auto* result = job_.result();
  if (!result) {
    ImGui::TextDisabled("Reading the memory plans and the HBM counter...");
    return;
  }
  if (!result->ok()) {
    ++drawn_;
    ImGui::TextColored(Color(kWarning), "The memory plans could not be read: %s",
                       std::string(result->status().message()).c_str());
    ui.DataError(result->status().message());
    return;
  }
  const MemoryModel& m = **result;
  ++drawn_;
  auto add = [&](const char* type, const std::string& label, json ref) -> json* {
    if (!ui.layout) return nullptr;
    const ImVec2 a = ImGui::GetItemRectMin(), s = ImGui::GetItemRectSize();
    return &ui.layout->Add(type, label, std::move(ref), a.x, a.y, s.x, s.y);
  };

  // The chip whose budget and counter are shown.
  ImGui::TextUnformatted("Chip:");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  if (ImGui::BeginCombo("##chip", absl::StrCat("chip ", device_).c_str())) {
    for (const auto& [d, bytes] : m.hbm) {
      if (ImGui::Selectable(absl::StrCat("chip ", d).c_str(), d == device_)) device_ = d;
    }
    ImGui::EndCombo();
  }
  const int64_t hbm = m.HbmOf(device_);
  ImGui::SameLine(0, 20);
  ImGui::Text("HBM budget %s per chip; %zu compiled programs, each chip runs the same per-device program",
              hbm ? FormatBytes(hbm).c_str() : "unknown", m.plans.size());

  ImGui::BeginChild("##memory", ImVec2(0, 0), false);
  if (m.plans.empty()) {
    const std::string why = m.has_ir ? "No memory plans recorded in this run."
                                     : absl::StrCat("This run has no IR (", m.no_ir_why,
                                                    "): no compiled programs, no memory plans.");
    ImGui::TextColored(Color(kDimText), "%s", why.c_str());
    add("text", why, json{{"table", "memory_plans"}, {"run_id", m.run_id}});
  } else {
    // Which program: the one picked elsewhere, else the largest.
    size_t picked = m.LargestPlan();
    if (ui.selected_graph) {
      for (size_t i = 0; i < m.plans.size(); ++i) {
        if (m.plans[i].graph_id == *ui.selected_graph) picked = i;
      }
    }
    const size_t largest = m.LargestPlan();
    // Each program's peak against the budget.
    ChartSeries peaks{"peak per chip", KindColor(SliceKind::kCompute), {}, {}, true};
    for (const auto& p : m.plans) {
      peaks.x.push_back(double(p.graph_id));
      peaks.y.push_back(double(p.peak_bytes));
    }
    ChartSpec spec{.title = "Each program's planned peak (per chip) against the HBM budget",
                   .x_label = "program (graph id)",
                   .unit = ChartUnit::kBytes};
    if (hbm > 0) {
      spec.limit = double(hbm);
      spec.limit_label = absl::StrCat("HBM ", FormatBytes(hbm));
    }
    spec.mark_x = double(m.plans[largest].graph_id);
    spec.mark_label = absl::StrCat("peak ", FormatBytes(m.plans[largest].peak_bytes));
    DrawChart(ui, "##peaks", spec, {peaks}, 150, json{{"table", "memory_plans"}, {"run_id", m.run_id}});

    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("##plans", 9, flags)) {
      for (const char* h : {"program", "runs (steps)", "peak", "of HBM", "parameters", "arena", "without reuse",
                            "saved by reuse", "peak at"}) {
        ImGui::TableSetupColumn(h);
      }
      ImGui::TableHeadersRow();
      for (size_t i = 0; i < m.plans.size(); ++i) {
        const MemoryModel::Plan& p = m.plans[i];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        const std::string label = absl::StrCat("graph ", p.graph_id);
        if (ImGui::Selectable(label.c_str(), i == picked, ImGuiSelectableFlags_SpanAllColumns)) {
          ui.selected_graph = p.graph_id;
        }
        if (json* item = add("program", label, json{{"table", "memory_plans"}, {"graph_id", p.graph_id}})) {
          (*item)["peak_bytes"] = p.peak_bytes;
          (*item)["selected"] = i == picked;
          (*item)["largest"] = i == largest;
        }
        ImGui::TableNextColumn();
        if (p.executions > 0) {
          ImGui::Text("%lld (%d-%d)", static_cast<long long>(p.executions), p.first_step, p.last_step);
        } else {
          ImGui::TextUnformatted("-");
        }
        ImGui::TableNextColumn();
        if (i == largest) {
          ImGui::TextColored(Color(kClockLabel), "%s", FormatBytes(p.peak_bytes).c_str());
        } else {
          ImGui::TextUnformatted(FormatBytes(p.peak_bytes).c_str());
        }
        ImGui::TableNextColumn();
        if (hbm > 0) {
          const double share = 100.0 * double(p.peak_bytes) / double(hbm);
          if (share >= 90) {
            ImGui::TextColored(Color(kWarning), "%.1f%%", share);
          } else {
            ImGui::Text("%.1f%%", share);
          }
        } else {
          ImGui::TextUnformatted("-");
        }
        for (int64_t v : {p.parameter_bytes, p.arena_bytes, p.unshared_bytes, p.unshared_bytes - p.arena_bytes}) {
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(FormatBytes(v).c_str());
        }
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(p.peak_op.c_str());
      }
      ImGui::EndTable();
    }

    // The picked program's peak: what is live there, as a bar and a table.
    const MemoryModel::Plan& p = m.plans[picked];
    DrawCurve(ui, m, p, hbm);
    ImGui::Spacing();
    ImGui::TextColored(Color(kClockLabel), "graph %lld peaks at %s at %s: the buffers live there",
                       static_cast<long long>(p.graph_id), FormatBytes(p.peak_bytes).c_str(), p.peak_op.c_str());
    {
      ImDrawList* dl = ImGui::GetWindowDrawList();
      const ImVec2 o = ImGui::GetCursorScreenPos();
      const float w = ImGui::GetContentRegionAvail().x - 10, h = 18;
      ImGui::Dummy(ImVec2(w, h + 4));
      const double scale = p.peak_bytes > 0 ? w / double(p.peak_bytes) : 0;
      float x = o.x;
      int64_t listed = 0;
      for (const MemoryModel::Buffer& b : p.live_at_peak) {
        const float bw = float(double(b.bytes) * scale);
        const Rgb c = b.input ? kCounterBand : KindColor(SliceKind::kCompute).Scaled(b.rank % 2 ? 0.8f : 1.0f);
        dl->AddRectFilled(ImVec2(x, o.y), ImVec2(x + bw, o.y + h), c.Packed());
        dl->AddRect(ImVec2(x, o.y), ImVec2(x + bw, o.y + h), kBackground.Packed());
        if (bw > 60) dl->AddText(ImVec2(x + 3, o.y + 1), kText.Packed(), b.op.c_str());
        x += bw;
        listed += b.bytes;
      }
      dl->AddRectFilled(ImVec2(x, o.y), ImVec2(o.x + w, o.y + h), kFoldBackground.Packed());
      if (p.peak_bytes > listed) {
        dl->AddText(ImVec2(x + 3, o.y + 1), kDimText.Packed(),
                    absl::StrCat(FormatBytes(p.peak_bytes - listed), " in smaller buffers").c_str());
      }
    }
    if (ImGui::BeginTable("##buffers", 6, flags)) {
      for (const char* h : {"#", "buffer", "bytes", "of peak", "kind", "source line (module)"}) ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      for (const MemoryModel::Buffer& b : p.live_at_peak) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%d", b.rank);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(b.op.c_str());
        if (json* item = add("buffer", b.op,
                             json{{"table", "peak_buffers"}, {"graph_id", p.graph_id}, {"rank", b.rank}})) {
          (*item)["bytes"] = b.bytes;
          (*item)["input"] = b.input;
          (*item)["source"] = b.source;
        }
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(FormatBytes(b.bytes).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.1f%%", p.peak_bytes > 0 ? 100.0 * double(b.bytes) / double(p.peak_bytes) : 0.0);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(b.input ? "input (resident)" : "intermediate");
        ImGui::TableNextColumn();
        const std::string where = b.source.empty() ? "-" : b.scope.empty() ? b.source : absl::StrCat(b.source, " (", b.scope, ")");
        ImGui::TextUnformatted(where.c_str());
      }
      ImGui::EndTable();
    }
  }

  // The chip's HBM in use over time, with its budget.
  ImGui::Spacing();
  const MemoryModel::Series* series = nullptr;
  for (const auto& s : m.in_use) {
    if (s.device == device_) series = &s;
  }
  if (!series) {
    ImGui::TextDisabled("chip %d recorded no hbm_bytes_in_use counter.", device_);
  } else {
    ChartSeries line{absl::StrCat("chip ", device_), kCounterLine, series->t_ns, series->max};
    line.y_min = series->min;
    ChartSpec spec{.title = absl::StrFormat("hbm_bytes_in_use of chip %d (host clock)", device_),
                   .x_label = "host clock",
                   .unit = ChartUnit::kBytes,
                   .x_unit = ChartUnit::kNs};
    if (hbm > 0) {
      spec.limit = double(hbm);
      spec.limit_label = absl::StrCat("HBM ", FormatBytes(hbm));
    }
    DrawChart(ui, "##in_use", spec, {line}, 170,
              json{{"table", "counters"}, {"name", "hbm_bytes_in_use"}, {"device_id", device_}});
  }
  ImGui::EndChild();
}

}  // namespace shardscope::app
