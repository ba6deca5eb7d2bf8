// The Sharding view; see placement_view.h.
#include "ui/app/placement_view.h"

#include <imgui.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

ImVec4 ToVec4(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

std::string Held(const analysis::TensorTiles& t) {
  const analysis::ShardingRow& r = t.tensor;
  if (r.devices == 0) return "not placed";
  return absl::StrCat(FormatBytes(r.max_bytes), "/chip on ", r.devices);
}

}  // namespace

void PlacementView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("sharding");
  layout_ = ui.layout;
  const analysis::ShardingView& v = model_.sharding;
  ImGui::Text("%zu tensors on mesh %s (axes %s), sharding %s", v.tensors.size(), v.mesh.c_str(),
              v.mesh_axes.c_str(), v.strategy.empty() ? "-" : v.strategy.c_str());
  if (!v.rematerializations.empty()) {
    ImGui::SameLine(0, 30);
    ImGui::TextColored(ToVec4(kWarning), "%zu involuntary full rematerializations", v.rematerializations.size());
  }
  drawn_cells_.clear();
  if (ui.show_value) {  // a collective picked on the timeline: the tensor it moves, if it is one
    note_.clear();
    auto it = std::find_if(v.tensors.begin(), v.tensors.end(),
                           [&](const analysis::TensorTiles& t) { return t.tensor.name == *ui.show_value; });
    if (it != v.tensors.end()) {
      selected_ = static_cast<size_t>(it - v.tensors.begin());
      scroll_to_selected_ = true;
    } else {
      note_ = absl::StrCat("The collective moves ", *ui.show_value,
                           ", a value inside the step, not a stored tensor; `shardscope sharding DB --why ",
                           *ui.show_value, "` walks its layout back to where it came from.");
    }
    ui.show_value.reset();
  }
  if (!note_.empty()) ImGui::TextWrapped("%s", note_.c_str());
  if (v.tensors.empty()) {
    ImGui::TextDisabled("This run recorded no tensors.");
    return;
  }
  selected_ = std::min(selected_, v.tensors.size() - 1);
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit;
  const float avail = ImGui::GetContentRegionAvail().y;
  if (ImGui::BeginTable("##tensors", 5, flags, ImVec2(0, avail * 0.45f))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("tensor");
    ImGui::TableSetupColumn("type");
    ImGui::TableSetupColumn("sharding", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("source");
    ImGui::TableSetupColumn("held");
    ImGui::TableHeadersRow();
    for (size_t k = 0; k < v.tensors.size(); ++k) {
      const analysis::ShardingRow& r = v.tensors[k].tensor;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(static_cast<int>(k));
      if (ImGui::Selectable(r.name.c_str(), selected_ == k, ImGuiSelectableFlags_SpanAllColumns)) {
        selected_ = k;
        note_.clear();
        ui.selection_text = absl::StrCat(r.name, " ", r.dtype, r.shape, " ", r.sharding);
      }
      if (scroll_to_selected_ && selected_ == k) {
        ImGui::SetScrollHereY();
        scroll_to_selected_ = false;
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted((r.dtype + r.shape).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.sharding.c_str());
      ImGui::TableNextColumn();
      const std::string source =
          r.source_file.empty() ? r.source : absl::StrCat(r.source, " ", r.source_file, ":", r.source_line);
      ImGui::TextUnformatted(source.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(Held(v.tensors[k]).c_str());
    }
    ImGui::EndTable();
  }
  DrawGrid(v.tensors[selected_]);
  if (!v.rematerializations.empty() &&
      ImGui::BeginTable("##remats", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("gathered whole");
    ImGui::TableSetupColumn("for");
    ImGui::TableSetupColumn("bytes");
    ImGui::TableSetupColumn("made at");
    ImGui::TableHeadersRow();
    for (const analysis::RematRow& m : v.rematerializations) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(ToVec4(kWarning), "%s", m.value.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(m.op.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatBytes(m.bytes).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%s:%d", m.source_file.c_str(), m.source_line);
    }
    ImGui::EndTable();
  }
}

// Rows: the first split dim's ranges; columns: the second's (one row when
// one dim is split). More than two split dims list their tiles.
void PlacementView::DrawGrid(const analysis::TensorTiles& t) {
  const analysis::ShardingRow& r = t.tensor;
  ImGui::Text("%s %s%s %s", r.name.c_str(), r.dtype.c_str(), r.shape.c_str(), r.sharding.c_str());
  if (t.split_dims.empty()) {
    drawn_cells_.push_back(analysis::ChipsText(t.tile_chips.empty() ? std::vector<int64_t>{} : t.tile_chips[0]));
    ImGui::Text("whole on %s", drawn_cells_.back().c_str());
    if (layout_) {
      const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
      layout_->Add("cell", drawn_cells_.back(), nlohmann::json{{"table", "shard_placements"}, {"tensor_name", r.name}}, p.x,
                   p.y, sz.x, sz.y);
    }
    return;
  }
  const bool grid = t.split_dims.size() <= 2;
  const bool two = t.split_dims.size() == 2;
  const size_t ncols = grid ? t.ranges[two ? 1 : 0].size() : 1;
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##tiles", static_cast<int>(ncols) + 1, flags)) return;
  ImGui::TableSetupColumn(two ? absl::StrCat("dim ", t.split_dims[0], " \\ dim ", t.split_dims[1]).c_str()
                              : absl::StrCat("dim ", t.split_dims[0]).c_str());
  for (size_t c = 0; c < ncols; ++c)
    ImGui::TableSetupColumn(grid ? t.ranges[two ? 1 : 0][c].c_str() : "held by");
  ImGui::TableHeadersRow();
  const size_t nrows = grid ? (two ? t.ranges[0].size() : 1) : t.tile_chips.size();
  for (size_t row = 0; row < nrows; ++row) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(grid ? (two ? t.ranges[0][row].c_str() : "") : absl::StrCat("tile ", row).c_str());
    for (size_t c = 0; c < ncols; ++c) {
      ImGui::TableNextColumn();
      drawn_cells_.push_back(analysis::ChipsText(t.tile_chips[grid ? row * ncols + c : row]));
      ImGui::TextUnformatted(drawn_cells_.back().c_str());
      if (layout_) {
        const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
        auto& item = layout_->Add("cell", drawn_cells_.back(),
                                  nlohmann::json{{"table", "shard_placements"}, {"tensor_name", r.name}}, p.x, p.y, sz.x, sz.y);
        item["row"] = row;
        item["column"] = c;
      }
    }
  }
  ImGui::EndTable();
}

}  // namespace shardscope::app
