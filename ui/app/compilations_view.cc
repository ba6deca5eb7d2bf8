// The Recompilations view; see compilations_view.h.
#include "ui/app/compilations_view.h"

#include <imgui.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/analysis/format.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

ImVec4 ToVec4(Rgb c, float a = 1.f) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, a); }

// Row tints of the aligned graphs.
Rgb ChangeColor(const std::string& change) {
  if (change == "added") return Rgb{60, 150, 90};
  if (change == "removed") return Rgb{190, 70, 70};
  if (change == "input") return Rgb{80, 130, 200};
  return Rgb{200, 160, 60};  // changed
}

void DumpText(UiState& ui, const std::string& role, const std::string& text, json ref) {
  if (!ui.layout) return;
  const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
  auto& item = ui.layout->Add("text", text, std::move(ref), p.x, p.y, sz.x, sz.y);
  item["role"] = role;
}

}  // namespace

void CompilationsView::Start() {
  if (started_) return;
  started_ = true;
  const int64_t run = model_.run.run_id;
  model_job_.Start(model_.path, [run](const store::Reader& r) { return LoadRecompiles(r, run); }, wake_);
}

const RecompilesModel* CompilationsView::recompiles() const {
  const auto& r = model_job_.result();
  return r && r->ok() ? &**r : nullptr;
}

const GraphPair* CompilationsView::pair() const {
  const auto& r = pair_job_.result();
  return r && r->ok() ? &**r : nullptr;
}

void CompilationsView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("recompilations");
  Start();
  model_job_.Poll();
  if (settle_frames_ > 0) --settle_frames_;
  if (pair_job_.Poll()) scroll_to_difference_ = true;
  // A compilation picked here or elsewhere (a timeline marker): load its graphs.
  if (ui.selected_compile_id && ui.selected_compile_id != pair_for_) {
    pair_for_ = ui.selected_compile_id;
    const int64_t run = model_.run.run_id, id = *ui.selected_compile_id;
    pair_job_.Start(model_.path, [run, id](const store::Reader& r) { return LoadGraphPair(r, run, id); }, wake_);
  }
  const auto& loaded = model_job_.result();
  if (!loaded) {
    ImGui::TextDisabled("reading the run's compilations and the recompiles report...");
    return;
  }
  if (!loaded->ok()) {
    ImGui::TextColored(ToVec4(kWarning), "%s", std::string(loaded->status().message()).c_str());
    ui.DataError(loaded->status().message());
    return;
  }
  const RecompilesModel& m = **loaded;
  int64_t total_ns = 0;
  for (const auto& s : m.sites) {
    for (const auto& c : s.compiles) total_ns += c.duration_ns;
  }
  // The first miss of a call site is its initial compile; every later miss
  // there is a recompilation, which is what this view is for.
  size_t sites_with_miss = 0;
  for (const auto& s : m.sites) sites_with_miss += s.misses > 0;
  using analysis::Plural;
  const std::string summary = absl::StrCat(
      Plural(m.compilations, "compilation", "compilations"), ", ", Plural(m.misses, "miss", "misses"), ", ",
      Plural(m.misses - static_cast<int64_t>(sites_with_miss), "recompilation", "recompilations"), " at ",
      Plural(static_cast<int64_t>(m.sites.size()), "call site", "call sites"), ", ",
      FormatDuration(double(total_ns)), " compiling (host clock)");
  ImGui::TextUnformatted(summary.c_str());
  DumpText(ui, "summary", summary, json{{"table", "compilations"}});
  ImGui::SameLine(0, 30);
  ImGui::Checkbox("misses only", &misses_only_);
  if (!m.no_ir.empty()) {
    ImGui::TextColored(ToVec4(kDimText), "%s", m.no_ir.c_str());
    DumpText(ui, "no_ir", m.no_ir, json{{"table", "graphs"}});
  }
  if (m.compilations == 0) {
    ImGui::TextDisabled("This run recorded no compilations.");
    return;
  }
  const float avail = ImGui::GetContentRegionAvail().y;
  ImGui::BeginChild("##sites", ImVec2(0, ui.selected_compile_id ? avail * 0.42f : 0), false);
  DrawSites(ui);
  ImGui::EndChild();
  if (ui.selected_compile_id) {
    ImGui::Separator();
    ImGui::BeginChild("##pair", ImVec2(0, 0), false);
    if (m.no_ir.empty()) DrawPair(ui);
    ImGui::EndChild();
  }
}

void CompilationsView::DrawSites(UiState& ui) {
  const RecompilesModel& m = *recompiles();
  int site_no = 0;
  for (const CallSiteRecompiles& site : m.sites) {
    ImGui::PushID(site_no++);
    const std::string head =
        absl::StrFormat("%s  \xC2\xB7  %d compilations, %d misses, %d distinct graphs, %s compiling", site.call_site,
                        site.compiles.size(), site.misses, site.distinct_graphs, FormatDuration(double(site.compile_ns)));
    const bool open = ImGui::CollapsingHeader(head.c_str(), ImGuiTreeNodeFlags_DefaultOpen);
    if (ui.layout) {
      const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
      auto& item = ui.layout->Add("group", site.call_site, json{{"table", "compilations"}, {"call_site", site.call_site}},
                                  p.x, p.y, sz.x, sz.y);
      item["compilations"] = site.compiles.size();
      item["misses"] = site.misses;
      item["distinct_graphs"] = site.distinct_graphs;
      item["compile_ns"] = site.compile_ns;
      item["collapsed"] = !open;
    }
    if (!open) {
      ImGui::PopID();
      continue;
    }
    for (const analysis::Suggestion& s : site.suggestions) {
      const std::string text = absl::StrCat("suggestion: ", s.text);  // its text states what it saves
      ImGui::PushTextWrapPos(0);
      ImGui::TextColored(ToVec4(kClockLabel), "%s", text.c_str());
      ImGui::PopTextWrapPos();
      if (ui.layout) {
        const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
        auto& item = ui.layout->Add("text", text, json{{"table", "compilations"}, {"call_site", site.call_site}}, p.x,
                                    p.y, sz.x, sz.y);
        item["role"] = "suggestion";
        item["kind"] = s.kind;
        item["compilations_saved"] = s.compilations_saved;
      }
    }
    size_t shown = 0;
    for (const CompileRow& c : site.compiles) shown += !misses_only_ || c.is_miss();
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_Resizable |
                                  ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollY;
    const float row_h = ImGui::GetTextLineHeight() + 2 * ImGui::GetStyle().CellPadding.y;
    const float table_h = std::min<float>((shown + 1) * row_h + 4, 12 * row_h);
    if (shown > 0 && ImGui::BeginTable("##compiles", 8, flags, ImVec2(0, table_h))) {
      ImGui::TableSetupScrollFreeze(0, 1);
      for (const char* name : {"#", "step", "cache", "cause", "subkind"}) ImGui::TableSetupColumn(name);
      ImGui::TableSetupColumn("detail", ImGuiTableColumnFlags_WidthStretch);
      ImGui::TableSetupColumn("source");
      ImGui::TableSetupColumn("compile time");
      ImGui::TableHeadersRow();
      for (const CompileRow& c : site.compiles) {
        if (misses_only_ && !c.is_miss()) continue;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        const bool selected = ui.selected_compile_id == c.compile_id;
        if (ImGui::Selectable(std::to_string(c.compile_id).c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
          ui.selected_compile_id = c.compile_id;
        }
        if (ui.layout) {
          const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
          auto& item = ui.layout->Add("row", c.cause_kind.empty() ? c.cache : c.cause_kind,
                                      json{{"table", "compilations"}, {"compile_id", c.compile_id}}, p.x, p.y, sz.x, sz.y);
          item["cache"] = c.cache;
          item["step"] = c.step;
          item["selected"] = selected;
          item["call_site"] = c.call_site;
          item["cause_subkind"] = c.cause_subkind;
          item["source"] = c.source;
          item["duration_ns"] = c.duration_ns;
          item["graph_id"] = c.graph_id;
          item["prev_graph_id"] = c.prev_graph_id;
        }
        // Scroll a row picked elsewhere (a timeline marker) into view once.
        if (selected && ui.scroll_to_selected_compile) {
          ImGui::SetScrollHereY();
          ui.scroll_to_selected_compile = false;
        }
        ImGui::TableNextColumn();
        ImGui::Text("%lld", static_cast<long long>(c.step));
        ImGui::TableNextColumn();
        ImGui::TextColored(ToVec4(CompileColor(c.is_miss())), "%s", c.cache.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(c.cause_kind.empty() ? "-" : c.cause_kind.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(c.cause_subkind.empty() ? "-" : c.cause_subkind.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(c.cause_detail.c_str());
        if (!c.cause_detail.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", c.cause_detail.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(c.source.empty() ? "-" : c.source.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(FormatDuration(double(c.duration_ns)).c_str());
      }
      ImGui::EndTable();
    }
    ImGui::PopID();
  }
}

void CompilationsView::DrawPair(UiState& ui) {
  const RecompilesModel& m = *recompiles();
  const CompileRow* c = m.Find(*ui.selected_compile_id);
  if (!c) {
    ImGui::TextDisabled("compilation %lld is not in this run", static_cast<long long>(*ui.selected_compile_id));
    return;
  }
  const std::string head = absl::StrFormat(
      "compile #%d at step %d: %s%s%s, graph %d, %s (host clock)%s", c->compile_id, c->step, c->cache,
      c->cause_kind.empty() ? "" : absl::StrCat(", ", c->cause_kind), c->cause_subkind.empty() ? "" : absl::StrCat(" / ", c->cause_subkind),
      c->graph_id, FormatDuration(double(c->duration_ns)), c->source.empty() ? "" : absl::StrCat(" at ", c->source));
  ImGui::TextColored(ToVec4(kClockLabel), "%s", head.c_str());
  DumpText(ui, "picked", head, json{{"table", "compilations"}, {"compile_id", c->compile_id}});
  if (!c->cause_detail.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextUnformatted(c->cause_detail.c_str());
    ImGui::PopTextWrapPos();
  }
  const auto& r = pair_job_.result();
  if (pair_job_.pending() || !r || pair_for_ != c->compile_id) {
    ImGui::TextDisabled("reading both graphs...");
    return;
  }
  if (!r->ok()) {
    ImGui::TextColored(ToVec4(kWarning), "%s", std::string(r->status().message()).c_str());
    ui.DataError(r->status().message());
    return;
  }
  const GraphPair& p = **r;
  const bool two = p.old_graph_id >= 0;
  std::string line = two ? absl::StrFormat("graph %d (compared with, left) beside graph %d (this compile, right): %d of "
                                           "%d rows differ%s",
                                           p.old_graph_id, p.new_graph_id, p.alignment.differences,
                                           p.alignment.rows.size(),
                                           p.alignment.from_diff ? ", aligned by the stored diff" : "")
                         : absl::StrFormat("graph %d", p.new_graph_id);
  if (!p.note.empty()) absl::StrAppend(&line, two ? "; " : ": ", p.note);
  ImGui::TextColored(ToVec4(kDimText), "%s", line.c_str());
  if (ui.layout) {
    const ImVec2 q = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
    auto& item = ui.layout->Add("text", line, json{{"table", "compile_diffs"}, {"compile_id", p.compile_id}}, q.x, q.y,
                                sz.x, sz.y);
    item["role"] = "diff";
    item["old_graph_id"] = p.old_graph_id;
    item["new_graph_id"] = p.new_graph_id;
    item["differences"] = p.alignment.differences;
    item["diff_rows"] = p.diffs.size();
    item["diff_total"] = p.diff_total;
    item["from_diff"] = p.alignment.from_diff;
    item["first_difference"] = p.first_difference;
    item["rows"] = p.alignment.rows.size();
  }
  if (p.alignment.rows.empty()) return;
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_ScrollX | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
  const int columns = two ? 4 : 2;
  if (!ImGui::BeginTable("##aligned", columns, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  const float text_w = two ? 560 : 1100;
  if (two) {
    ImGui::TableSetupColumn("line (compared with)");
    ImGui::TableSetupColumn(absl::StrCat("graph ", p.old_graph_id).c_str(), ImGuiTableColumnFlags_WidthFixed, text_w);
  }
  ImGui::TableSetupColumn("line (this compile)");
  ImGui::TableSetupColumn(absl::StrCat("graph ", p.new_graph_id).c_str(), ImGuiTableColumnFlags_WidthFixed, text_w);
  ImGui::TableHeadersRow();
  const float row_h = ImGui::GetTextLineHeight() + 2 * ImGui::GetStyle().CellPadding.y;
  if (scroll_to_difference_ && p.first_difference >= 0) {
    // The first difference a few rows below the top, with what leads to it above.
    ImGui::SetScrollY(std::max(0.0f, (p.first_difference - 3) * row_h));
    settle_frames_ = 2;
  }
  scroll_to_difference_ = false;
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(p.alignment.rows.size()), row_h);
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const AlignedRow& row = p.alignment.rows[i];
      ImGui::TableNextRow(ImGuiTableRowFlags_None, row_h);
      if (!row.change.empty()) {
        ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, ImGui::GetColorU32(ToVec4(ChangeColor(row.change), 0.35f)));
      }
      const IrOp* a = row.old_index >= 0 ? &p.old_program.ops[row.old_index] : nullptr;
      const IrOp* b = row.new_index >= 0 ? &p.new_program.ops[row.new_index] : nullptr;
      auto side = [&](const IrOp* op) {
        ImGui::TableNextColumn();
        if (op) ImGui::TextColored(ToVec4(kDimText), "%s", op->SourceLocation().empty() ? "-" : op->SourceLocation().c_str());
        ImGui::TableNextColumn();
        if (op) {
          ImGui::TextUnformatted(op->text.c_str());
          if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", op->text.c_str());
        }
      };
      if (two) side(a);
      side(b);
      if (ui.layout) {
        const ImVec2 q = ImGui::GetItemRectMin();
        const IrOp* any = b ? b : a;
        auto& item = ui.layout->Add("row", any ? any->opcode : "",
                                    json{{"table", "graphs"}, {"graph_id", b ? p.new_graph_id : p.old_graph_id},
                                         {"op_index", b ? row.new_index : row.old_index}},
                                    ImGui::GetWindowPos().x, q.y, ImGui::GetWindowSize().x, row_h);
        item["role"] = "diff_row";
        item["index"] = i;
        item["change"] = row.change;
        item["what"] = row.what;
        item["old_index"] = row.old_index;
        item["new_index"] = row.new_index;
        item["old_opcode"] = a ? a->opcode : "";
        item["new_opcode"] = b ? b->opcode : "";
        item["old_source"] = a ? a->SourceLocation() : "";
        item["new_source"] = b ? b->SourceLocation() : "";
      }
    }
  }
  ImGui::EndTable();
}

}  // namespace shardscope::app
