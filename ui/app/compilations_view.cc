// The Recompilations view; see compilations_view.h.
#include "ui/app/compilations_view.h"

#include <imgui.h>

#include <algorithm>
#include <set>
#include <string>

#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

ImVec4 ToVec4(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

}  // namespace

void CompilationsView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("recompilations");
  const auto& all = model_.compilations;
  size_t misses = 0;
  int64_t total_ns = 0;
  std::set<std::string> sites;
  for (const Compilation& c : all) {
    total_ns += c.duration_ns;
    if (!c.is_miss()) continue;
    ++misses;
    sites.insert(c.call_site);
  }
  // The first miss of a call site is its initial compile; every later miss
  // there is a recompilation, which is what this view is for.
  ImGui::Text("%zu compilations, %zu misses, %zu recompilations, %s compiling (host clock)",
              all.size(), misses, misses - sites.size(), FormatDuration(double(total_ns)).c_str());
  ImGui::SameLine(0, 30);
  ImGui::Checkbox("misses only", &misses_only_);
  if (all.empty()) {
    ImGui::TextDisabled("This run recorded no compilations.");
    return;
  }

  const float detail_h = ImGui::GetTextLineHeightWithSpacing() * 6;
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingFixedFit;
  // As tall as its rows when they are few, so the details sit right below;
  // scrolling once they are many.
  size_t shown = misses_only_ ? misses : all.size();
  const float rows_h = (shown + 1) * (ImGui::GetTextLineHeight() + 2 * ImGui::GetStyle().CellPadding.y) + 4;
  const float table_h = std::min(rows_h, ImGui::GetContentRegionAvail().y - detail_h);
  if (ImGui::BeginTable("##compilations", 7, flags, ImVec2(0, table_h))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("#");
    ImGui::TableSetupColumn("step");
    ImGui::TableSetupColumn("cache");
    ImGui::TableSetupColumn("cause");
    ImGui::TableSetupColumn("detail", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("source");
    ImGui::TableSetupColumn("duration");
    ImGui::TableHeadersRow();
    for (const Compilation& c : all) {
      if (misses_only_ && !c.is_miss()) continue;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const bool selected = ui.selected_compile_id == c.compile_id;
      std::string id = std::to_string(c.compile_id);
      if (ImGui::Selectable(id.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
        ui.selected_compile_id = c.compile_id;
      }
      if (ui.layout) {
        const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
        auto& item = ui.layout->Add("row", c.cause_kind.empty() ? c.cache : c.cause_kind,
                                    nlohmann::json{{"table", "compilations"}, {"compile_id", c.compile_id}}, p.x, p.y, sz.x, sz.y);
        item["cache"] = c.cache;
        item["step"] = c.step;
        item["selected"] = selected;
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
      ImGui::TextUnformatted(c.cause_detail.c_str());
      ImGui::TableNextColumn();
      std::string loc = c.SourceLocation();
      ImGui::TextUnformatted(loc.empty() ? "-" : loc.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatDuration(double(c.duration_ns)).c_str());
    }
    ImGui::EndTable();
  }

  // The picked compilation in full: long causes do not fit a table cell.
  ImGui::Separator();
  const Compilation* picked = nullptr;
  for (const Compilation& c : all) {
    if (ui.selected_compile_id == c.compile_id) picked = &c;
  }
  if (!picked) {
    ImGui::TextDisabled("Click a row to see its cause and call site in full.");
    return;
  }
  ImGui::Text("compile #%lld at step %lld: %s, graph %lld, %s (host clock)",
              static_cast<long long>(picked->compile_id), static_cast<long long>(picked->step),
              picked->cache.c_str(), static_cast<long long>(picked->graph_id),
              FormatDuration(double(picked->duration_ns)).c_str());
  if (!picked->cause_kind.empty()) {
    ImGui::TextWrapped("cause: %s: %s", picked->cause_kind.c_str(), picked->cause_detail.c_str());
  }
  if (!picked->SourceLocation().empty()) {
    ImGui::Text("source: %s", picked->SourceLocation().c_str());
  }
  if (!picked->call_site.empty()) ImGui::TextWrapped("call site: %s", picked->call_site.c_str());
}

}  // namespace shardscope::app
