// The Graph view; see graph_view.h.
#include "ui/app/graph_view.h"

#include <imgui.h>

#include <algorithm>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

ImVec4 Vec4(Rgb c, float a = 1.f) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, a); }

std::string Flops(double f) {
  if (f <= 0) return "-";
  if (f >= 1e9) return absl::StrFormat("%.2f G", f / 1e9);
  if (f >= 1e6) return absl::StrFormat("%.2f M", f / 1e6);
  if (f >= 1e3) return absl::StrFormat("%.1f k", f / 1e3);
  return absl::StrFormat("%.0f", f);
}

// "stablehlo.dot_general" -> "dot_general".
std::string Short(const std::string& opcode) {
  const size_t dot = opcode.find('.');
  return dot == std::string::npos ? opcode : opcode.substr(dot + 1);
}

// One row drawn: an op, or a fused kernel folded into one row.
struct DrawnRow {
  int index = -1;        // into program.ops (the kernel's root when folded)
  int64_t op_id = -1;    // the op, or the kernel's root
  int distance = 0;
  bool kernel = false;   // a fusion of several ops
  bool folded = false;
  bool member = false;   // an op shown inside an expanded kernel
  int members_near = 0;  // a folded kernel's ops within the depth
};

}  // namespace

void GraphView::Load() {
  if (graph_id_ < 0) return;
  if (loaded_ == std::pair{graph_id_, partitioned_} && (graph_job_.pending() || graph_job_.result())) return;
  loaded_ = {graph_id_, partitioned_};
  const int64_t run = model_.run.run_id, graph = graph_id_;
  const bool part = partitioned_;
  graph_job_.Start(model_.path, [run, graph, part](const store::Reader& r) { return LoadGraphModel(r, run, graph, part); },
                   wake_);
}

void GraphView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("graph");
  if (!started_) {
    started_ = true;
    const int64_t run = model_.run.run_id;
    list_job_.Start(
        model_.path,
        [run](const store::Reader& r) -> absl::StatusOr<Listing> {
          Listing out;
          auto graphs = ListGraphs(r, run);
          if (!graphs.ok()) return graphs.status();
          out.graphs = *std::move(graphs);
          if (out.graphs.empty()) {
            auto imported = r.HasTable("trace_imports");
            if (!imported.ok()) return imported.status();
            bool is_import = false;
            if (*imported) {
              auto q = r.Query("SELECT count(*) AS n FROM trace_imports WHERE run_id = ?1", {std::to_string(run)});
              if (!q.ok()) return q.status();
              is_import = q->Int(0, "n") > 0;
            }
            out.no_ir = is_import ? "This run was imported from another tool's trace: it has timelines but no IR, so "
                                    "there is no graph to show."
                                  : "This run stored no graph text (IR), so there is no graph to show.";
          }
          return out;
        },
        wake_);
  }
  // A kernel picked on the timeline (or elsewhere) opens here at its op.
  if (ui.graph_focus) {
    graph_id_ = ui.graph_focus->graph_id;
    center_id_ = ui.graph_focus->op_id;
    center_from_option_ = ui.graph_focus->from_option;
    partitioned_ = true;
    ui.graph_focus.reset();
  }
  list_job_.Poll();
  if (settle_frames_ > 0) --settle_frames_;
  if (graph_job_.Poll()) settle_frames_ = 2;
  const auto& listing = list_job_.result();
  if (!listing) {
    ImGui::TextDisabled("reading the run's graphs...");
    return;
  }
  if (!listing->ok()) {
    ImGui::TextColored(Vec4(kWarning), "%s", std::string(listing->status().message()).c_str());
    ui.DataError(listing->status().message());
    return;
  }
  if (!(*listing)->no_ir.empty()) {
    ImGui::TextColored(Vec4(kDimText), "%s", (*listing)->no_ir.c_str());
    if (ui.layout) {
      const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
      auto& item = ui.layout->Add("text", (*listing)->no_ir, json{{"table", "graphs"}}, p.x, p.y, sz.x, sz.y);
      item["role"] = "no_ir";
    }
    return;
  }
  const auto& graphs = (*listing)->graphs;
  if (graph_id_ < 0 && !graphs.empty()) graph_id_ = graphs.front().graph_id;
  Load();

  // Toolbar: which program, which form, how far around the op.
  const GraphSummary* current = nullptr;
  for (const GraphSummary& g : graphs) {
    if (g.graph_id == graph_id_) current = &g;
  }
  ImGui::SetNextItemWidth(380);
  const std::string label = current ? absl::StrFormat("graph %d (%d ops) %s", current->graph_id, current->op_count,
                                                      current->call_site)
                                    : absl::StrFormat("graph %d", graph_id_);
  if (ImGui::BeginCombo("##graph", label.c_str())) {
    for (const GraphSummary& g : graphs) {
      const std::string item = absl::StrFormat("graph %d (%d ops) %s", g.graph_id, g.op_count, g.call_site);
      if (ImGui::Selectable(item.c_str(), g.graph_id == graph_id_) && g.graph_id != graph_id_) {
        graph_id_ = g.graph_id;
        center_id_ = -1;
        expanded_.clear();
      }
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  if (ImGui::RadioButton("after partitioning", partitioned_) && !partitioned_) {
    partitioned_ = true;
    center_id_ = -1;
  }
  ImGui::SameLine();
  if (ImGui::RadioButton("as traced", !partitioned_) && partitioned_) {
    partitioned_ = false;
    center_id_ = -1;
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  ImGui::SliderInt("depth", &depth_, 1, 8);
  Load();
  const auto& loaded = graph_job_.result();
  if (graph_job_.pending() || !loaded) {
    ImGui::TextDisabled("reading graph %lld...", static_cast<long long>(graph_id_));
    return;
  }
  if (!loaded->ok()) {
    ImGui::TextColored(Vec4(kWarning), "%s", std::string(loaded->status().message()).c_str());
    // A graph the run lacks, asked for by --graph, is that option's error (already said), not damage.
    if (!absl::IsNotFound(loaded->status()) || ui.option_errors.empty()) ui.DataError(loaded->status().message());
    return;
  }
  DrawOps(ui, **loaded);
}

void GraphView::DrawOps(UiState& ui, const GraphModel& g) {
  const IrProgram& p = g.program;
  if (p.ops.empty()) {
    ImGui::TextDisabled("%s", g.note.empty() ? "this program has no ops" : g.note.c_str());
    return;
  }
  // The centre: the op asked for, else the costliest kernel (modeled, else measured).
  int center = center_id_ >= 0 ? p.Find(center_id_) : -1;
  if (center_id_ >= 0 && center < 0 && center_from_option_) {
    // An op the program lacks (`--graph G:OP`) is said, not silently swapped for another.
    const std::string missing = absl::StrFormat("--graph %d:%d: graph %d has no op %d; showing its costliest kernel",
                                                g.graph_id, center_id_, g.graph_id, center_id_);
    if (std::find(ui.option_errors.begin(), ui.option_errors.end(), missing) == ui.option_errors.end())
      ui.option_errors.push_back(missing);
  }
  if (center < 0) {
    double best = -1;
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const int64_t id = p.ops[i].id;
      double cost = 0;
      if (auto c = g.costs.find(id); c != g.costs.end()) cost = double(c->second.modeled_ns);
      if (auto m = g.measured.find(id); cost <= 0 && m != g.measured.end()) cost = double(m->second.total_ns);
      if (p.ops[i].param < 0 && cost > best) best = cost, center = static_cast<int>(i);
    }
    if (center < 0) center = 0;
  }
  center_id_ = p.ops[center].id;
  center_from_option_ = false;
  const int64_t center_kernel = g.partitioned ? g.KernelOf(center_id_) : center_id_;
  const auto near = Neighbourhood(p, center, depth_);

  // Rows in program order; a fused kernel is one row unless expanded.
  std::vector<DrawnRow> rows;
  std::map<int64_t, size_t> kernel_row;
  for (const auto& [index, dist] : near) {
    const IrOp& op = p.ops[index];
    const std::vector<int64_t> kernels = g.partitioned ? g.KernelsOf(op.id) : std::vector<int64_t>{op.id};
    bool fused = false, open = false;
    for (int64_t k : kernels) {
      if (g.members.contains(k) && g.members.at(k).size() > 1) {
        fused = true;
        open |= expanded_.contains(k);
      }
    }
    if (fused && !open) {
      // Folded into each kernel it runs in (a copy of it in each).
      for (int64_t k : kernels) {
        if (auto it = kernel_row.find(k); it != kernel_row.end()) {
          rows[it->second].distance = std::min(rows[it->second].distance, dist);
          ++rows[it->second].members_near;
          continue;
        }
        kernel_row[k] = rows.size();
        rows.push_back(DrawnRow{p.Find(k) >= 0 ? p.Find(k) : index, k, dist, true, true, false, 1});
      }
      continue;
    }
    rows.push_back(DrawnRow{index, op.id, dist, false, false, fused, 0});
  }

  const std::string head = absl::StrFormat(
      "graph %d %s: %d ops; around %%%d %s to depth %d: %d rows%s", g.graph_id,
      g.partitioned ? "after partitioning (the per-chip program)" : "as traced", p.ops.size(), center_id_,
      p.ops[center].opcode, depth_, rows.size(),
      g.measured_steps.empty() ? "" : absl::StrFormat("; measured over steps %d-%d (device clock)", g.measured_steps.front(),
                                                      g.measured_steps.back()));
  ImGui::TextColored(Vec4(kClockLabel), "%s", head.c_str());
  if (ui.layout) {
    const ImVec2 q = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
    auto& item = ui.layout->Add("text", head, json{{"table", "graphs"}, {"graph_id", g.graph_id}}, q.x, q.y, sz.x, sz.y);
    item["role"] = "graph";
    item["partitioned"] = g.partitioned;
    item["center_op_id"] = center_id_;
    item["center_kernel"] = center_kernel;
    item["depth"] = depth_;
    item["rows"] = rows.size();
    item["ops"] = p.ops.size();
    item["measured_steps"] = g.measured_steps.size();
  }
  if (!g.note.empty()) ImGui::TextDisabled("%s", g.note.c_str());
  // The centre's slices on the timeline.
  if (g.partitioned && (g.measured.contains(center_kernel) || g.costs.contains(center_kernel))) {
    const std::string show = absl::StrFormat("Mark %s's slices on the timeline",
                                             g.costs.contains(center_kernel) ? g.costs.at(center_kernel).name
                                                                             : absl::StrCat("op ", center_kernel));
    const ImVec2 q = ImGui::GetCursorScreenPos();
    if (ImGui::SmallButton(show.c_str())) {
      ui.highlight_op = GraphFocus{g.graph_id, center_kernel};
      ui.bring_to_front = ViewId::kTimeline;
    }
    if (ui.layout) {
      auto& item = ui.layout->Add("button", show, json{{"table", "slices"}, {"graph_id", g.graph_id}, {"op_id", center_kernel}},
                                  q.x, q.y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
      item["role"] = "show_on_timeline";
    }
  }

  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_ScrollX | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("##ops", 10, flags)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  // Widths fixed from the start: a table fits its columns to what it drew the
  // frame before, and the first frame's picture would have none.
  const std::pair<const char*, float> columns[] = {{"op", 300}, {"opcode", 190}, {"type", 150}, {"dist", 40},
                                                   {"FLOPs", 80}, {"bytes", 90}, {"modeled", 80},
                                                   {"measured (mean)", 130}, {"sharding", 230}, {"source", 230}};
  for (const auto& [c, w] : columns) ImGui::TableSetupColumn(c, ImGuiTableColumnFlags_WidthFixed, w);
  ImGui::TableHeadersRow();
  std::optional<int64_t> recenter;
  for (const DrawnRow& row : rows) {
    const IrOp& op = p.ops[row.index];
    ImGui::TableNextRow();
    const bool is_center = row.kernel ? row.op_id == center_kernel : row.op_id == center_id_;
    if (is_center) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, ImGui::GetColorU32(Vec4(kSelection, 0.18f)));
    ImGui::TableNextColumn();
    const OpCost* cost = g.costs.contains(row.op_id) ? &g.costs.at(row.op_id) : nullptr;
    std::string name;
    if (row.kernel) {
      const auto& members = g.members.at(row.op_id);
      std::vector<std::string> kinds;
      for (int64_t m : members) {
        const int mi = p.Find(m);
        if (mi >= 0) kinds.push_back(Short(p.ops[mi].opcode));
      }
      name = absl::StrFormat("%s fusion.%d: %d ops (%s)", row.folded ? "+" : "-", row.op_id, members.size(),
                             absl::StrJoin(kinds, ", "));
    } else {
      name = absl::StrCat(row.member ? "    " : "", op.param >= 0 ? absl::StrCat("%arg", op.param, " ", op.name)
                                                                  : absl::StrCat("%", op.id));
    }
    ImGui::PushID(static_cast<int>(row.op_id) * 2 + row.kernel);
    if (ImGui::Selectable(name.c_str(), is_center, ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap)) {
      if (row.kernel && row.folded) {
        expanded_.insert(row.op_id);  // unfold: its ops, one row each
      } else {
        recenter = row.op_id;
      }
      // Its kernel's slices are marked on the timeline when it is shown.
      if (g.partitioned) ui.highlight_op = GraphFocus{g.graph_id, g.KernelOf(row.op_id)};
    }
    ImGui::PopID();
    const int64_t kernel = g.partitioned ? g.KernelOf(row.op_id) : row.op_id;
    const OpMeasured* measured = g.measured.contains(kernel) ? &g.measured.at(kernel) : nullptr;
    if (!cost && g.costs.contains(kernel) && !row.member) cost = &g.costs.at(kernel);
    if (ui.layout) {
      const ImVec2 q = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
      auto& item = ui.layout->Add("row", row.kernel ? absl::StrCat("fusion.", row.op_id) : absl::StrCat("%", op.id),
                                  json{{"table", "ops"}, {"graph_id", g.graph_id}, {"op_id", row.op_id}}, q.x, q.y, sz.x, sz.y);
      item["role"] = "graph_op";
      item["opcode"] = row.kernel ? "fusion" : op.opcode;
      item["distance"] = row.distance;
      item["kernel"] = kernel;
      item["fused_kernel"] = row.kernel;
      item["folded"] = row.folded;
      item["member_of_kernel"] = row.member;
      item["members"] = row.kernel ? g.members.at(row.op_id).size() : 0;
      item["center"] = is_center;
      item["flops"] = cost ? cost->flops : 0.0;
      item["modeled_ns"] = cost ? cost->modeled_ns : -1;
      item["measured_count"] = measured ? measured->count : 0;
      item["measured_total_ns"] = measured ? measured->total_ns : 0;
      item["sharding"] = op.sharding;
      item["source"] = op.SourceLocation();
      item["scope"] = op.scope;
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(row.kernel ? "fusion" : op.opcode.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(cost && !cost->shape.empty() ? cost->shape.c_str() : op.type.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%d", row.distance);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(cost && !row.member ? Flops(cost->flops).c_str() : "-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(cost && !row.member ? FormatBytes(cost->bytes_read + cost->bytes_written).c_str() : "-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(cost && !row.member && cost->modeled_ns >= 0 ? FormatDuration(double(cost->modeled_ns)).c_str() : "-");
    ImGui::TableNextColumn();
    if (measured && !row.member) {
      ImGui::Text("%s x%lld", FormatDuration(measured->mean_ns()).c_str(), static_cast<long long>(measured->count));
    } else {
      ImGui::TextDisabled(row.member ? "in fusion.%lld" : "-", static_cast<long long>(kernel));
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(op.sharding.empty() ? "-" : op.sharding.c_str());
    ImGui::TableNextColumn();
    std::string src = op.SourceLocation();
    if (!op.scope.empty()) absl::StrAppend(&src, src.empty() ? "" : " ", "(", op.scope, ")");
    ImGui::TextUnformatted(src.empty() ? "-" : src.c_str());
  }
  ImGui::EndTable();
  if (recenter) center_id_ = *recenter;
}

}  // namespace shardscope::app
