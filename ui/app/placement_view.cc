// The Sharding view; see placement_view.h.
#include "ui/app/placement_view.h"

#include <imgui.h>

#include <algorithm>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

ImVec4 ToVec4(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

// A distinct colour per shard (tiles held by the same chips share one), dim
// enough for the chip names drawn over it.
ImU32 ShardColor(size_t k) {
  static constexpr Rgb colors[] = {{52, 92, 140}, {140, 82, 40},  {56, 120, 72},  {120, 52, 60},
                                   {96, 72, 140}, {40, 112, 120}, {130, 112, 44}, {110, 60, 110}};
  return colors[k % 8].Packed();
}

std::string Held(const analysis::TensorTiles& t) {
  const analysis::ShardingRow& r = t.tensor;
  if (r.devices == 0) return "not placed";
  return absl::StrCat(FormatBytes(r.max_bytes), "/chip on ", r.devices);
}

}  // namespace

std::string ChipsShort(const std::vector<int64_t>& chips) {
  if (chips.empty()) return "-";
  // Runs of three or more consecutive chips as ranges: a tensor replicated on a
  // 4096-chip pod was "chips 0,1,2,...,4095", 20,000 characters off the screen.
  std::string out = chips.size() == 1 ? "chip " : "chips ";
  for (size_t i = 0; i < chips.size();) {
    size_t j = i;
    while (j + 1 < chips.size() && chips[j + 1] == chips[j] + 1) ++j;
    if (i) out += ",";
    if (j - i >= 2) {
      absl::StrAppend(&out, chips[i], "-", chips[j]);
    } else {
      absl::StrAppend(&out, chips[i]);
      if (j > i) absl::StrAppend(&out, ",", chips[j]);
    }
    i = j + 1;
  }
  return out;
}

void PlacementView::SelectChip(int64_t device_id) {
  if (chip_ == device_id && chip_job_.started()) return;
  chip_ = device_id;
  chip_job_.Cancel();
  const int64_t run = model_.run.run_id;
  chip_job_.Start(model_.path, [run, device_id](const store::Reader& r) { return LoadChipShards(r, run, device_id); },
                  wake_);
}

void PlacementView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("sharding");
  layout_ = ui.layout;
  if (!chips_job_.started()) {
    const int64_t run = model_.run.run_id;
    chips_job_.Start(model_.path, [run](const store::Reader& r) { return LoadShardingChips(r, run); }, wake_);
  }
  const analysis::ShardingView& v = model_.sharding;
  auto said = [&](const char* type, const std::string& text) {
    ImGui::TextColored(ToVec4(kWarning), "%s", text.c_str());
    if (ui.layout)
      ui.layout->Add(type, text, nlohmann::json{{"table", "shard_placements"}}, ImGui::GetItemRectMin().x,
                     ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
  };
  if (!model_.sharding_error.empty()) {
    said("error", absl::StrCat("The run's tensors could not be read: ", model_.sharding_error,
                               " (`shardscope check` names the damage)"));
    ui.DataError(model_.sharding_error);
    return;
  }
  if (v.damaged_rows > 0) said("warning", analysis::DamagedPlacementsText(v).substr(1));
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
  if (ImGui::BeginTable("##tensors", 5, flags, ImVec2(0, avail * 0.32f))) {
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
  DrawChips(ui);
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
    drawn_cells_.push_back(ChipsShort(t.tile_chips.empty() ? std::vector<int64_t>{} : t.tile_chips[0]));
    ImGui::TextWrapped("whole on %s", drawn_cells_.back().c_str());
    if (layout_) {
      const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
      auto& item = layout_->Add("cell", drawn_cells_.back(),
                                nlohmann::json{{"table", "shard_placements"}, {"tensor_name", r.name}}, p.x, p.y, sz.x, sz.y);
      item["shard"] = 0;  // one shard: the whole tensor
      item["axes"] = nlohmann::json::array();
    }
    return;
  }
  const bool grid = t.split_dims.size() <= 2;
  // Each split dim named by the mesh axis that splits it, once the mesh is read.
  std::vector<std::string> axes(t.split_dims.size());
  if (const ShardingChips* c = chips_job_.get()) axes = SplitAxisNames(t, c->mesh);
  auto dim = [&](size_t j) {
    return axes[j].empty() ? absl::StrCat("dim ", t.split_dims[j]) : absl::StrCat("dim ", t.split_dims[j], " (", axes[j], ")");
  };
  // One colour per distinct set of chips: replicas of a shard share it.
  std::vector<std::vector<int64_t>> shards;
  auto shard_of = [&](const std::vector<int64_t>& chips) {
    auto it = std::find(shards.begin(), shards.end(), chips);
    if (it != shards.end()) return static_cast<size_t>(it - shards.begin());
    shards.push_back(chips);
    return shards.size() - 1;
  };
  if (grid) {
    DrawScaledTiles(t, axes, dim, shard_of);
    return;
  }
  // More than two split dims: a list of the tiles.
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##tiles", 2, flags)) return;
  ImGui::TableSetupColumn("tile");
  ImGui::TableSetupColumn("held by");
  ImGui::TableHeadersRow();
  for (size_t row = 0; row < t.tile_chips.size(); ++row) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(absl::StrCat("tile ", row).c_str());
    ImGui::TableNextColumn();
    const std::vector<int64_t>& chips = t.tile_chips[row];
    const size_t shard = shard_of(chips);
    ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, ShardColor(shard));
    drawn_cells_.push_back(ChipsShort(chips));
    ImGui::TextUnformatted(drawn_cells_.back().c_str());
    if (layout_) {
      const ImVec2 p = ImGui::GetItemRectMin(), sz = ImGui::GetItemRectSize();
      auto& item = layout_->Add("cell", drawn_cells_.back(),
                                nlohmann::json{{"table", "shard_placements"}, {"tensor_name", r.name}}, p.x, p.y, sz.x, sz.y);
      item["row"] = row;
      item["column"] = 0;
      item["shard"] = shard;
      item["axes"] = axes;
    }
  }
  ImGui::EndTable();
}

// One or two split dims: the tensor as a rectangle in proportion to those
// dims (rows: the first split dim, columns: the second; one split dim is a
// row of tiles), each tile as wide and tall as its index range, coloured by
// its shard and named by its chips where it has room. Very thin tensors are
// kept at least 1:12 so that every tile can be seen.
void PlacementView::DrawScaledTiles(const analysis::TensorTiles& t, const std::vector<std::string>& axes,
                                    const std::function<std::string(size_t)>& dim,
                                    const std::function<size_t(const std::vector<int64_t>&)>& shard_of) {
  const analysis::ShardingRow& r = t.tensor;
  const bool two = t.split_dims.size() == 2;
  auto lengths = [](const std::vector<std::string>& ranges) {
    std::vector<double> out;
    for (const std::string& range : ranges) {
      std::pair<std::string, std::string> ab = absl::StrSplit(range, ':');
      int64_t a = 0, b = 0;
      out.push_back(absl::SimpleAtoi(ab.first, &a) && absl::SimpleAtoi(ab.second, &b) && b > a ? double(b - a) : 1.0);
    }
    return out;
  };
  const std::vector<double> row_len = two ? lengths(t.ranges[0]) : std::vector<double>{1.0};
  const std::vector<double> col_len = lengths(t.ranges[two ? 1 : 0]);
  double rows_total = 0, cols_total = 0;
  for (double v : row_len) rows_total += v;
  for (double v : col_len) cols_total += v;
  // The box: as wide as the view allows (at most 720 px) and tall in proportion.
  const float max_w = std::min(720.0f, ImGui::GetContentRegionAvail().x - 100), max_h = 320;
  double aspect = two ? rows_total / cols_total : 1.0 / std::max(1.0, double(col_len.size()) * 1.5);
  aspect = std::clamp(aspect, 1.0 / 12, 12.0);
  float w = max_w, h = float(w * aspect);
  if (h > max_h) h = max_h, w = float(h / aspect);
  h = std::max(h, 24.0f);
  ImGui::TextDisabled("%s%s, drawn to scale", two ? "rows: " : "columns: ", dim(0).c_str());
  if (two) {
    ImGui::SameLine();
    ImGui::TextDisabled("   columns: %s", dim(1).c_str());
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(w + 2, h + 2));
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  float y = o.y;
  for (size_t row = 0; row < row_len.size(); ++row) {
    const float th = float(h * row_len[row] / rows_total);
    float x = o.x;
    for (size_t c = 0; c < col_len.size(); ++c) {
      const float tw = float(w * col_len[c] / cols_total);
      const std::vector<int64_t>& chips = t.tile_chips[row * col_len.size() + c];
      const size_t shard = shard_of(chips);
      drawn_cells_.push_back(ChipsShort(chips));
      dl->AddRectFilled(ImVec2(x, y), ImVec2(x + tw, y + th), ShardColor(shard));
      dl->AddRect(ImVec2(x, y), ImVec2(x + tw + 1, y + th + 1), kBackground.Packed());
      const std::string& label = drawn_cells_.back();
      const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
      if (ts.x + 4 <= tw && ts.y + 2 <= th) {
        dl->AddText(ImVec2(x + (tw - ts.x) / 2, y + (th - ts.y) / 2), kText.Packed(), label.c_str());
      }
      if (ImGui::IsWindowHovered() && mouse.x >= x && mouse.x < x + tw && mouse.y >= y && mouse.y < y + th) {
        ImGui::BeginTooltip();
        ImGui::Text("%s", label.c_str());
        if (two) ImGui::Text("%s: %s", dim(0).c_str(), t.ranges[0][row].c_str());
        ImGui::Text("%s: %s", dim(two ? 1 : 0).c_str(), t.ranges[two ? 1 : 0][c].c_str());
        ImGui::EndTooltip();
      }
      if (layout_) {
        auto& item = layout_->Add("cell", label, nlohmann::json{{"table", "shard_placements"}, {"tensor_name", r.name}},
                                  x, y, tw, th);
        item["row"] = row;
        item["column"] = c;
        item["shard"] = shard;  // cells with the same number hold the same shard (one colour)
        item["axes"] = axes;    // the mesh axis splitting each split dim ("" when unknown)
        if (two) item["row_range"] = t.ranges[0][row];
        item["column_range"] = t.ranges[two ? 1 : 0][c];
        item["scaled"] = true;  // w and h in proportion to the ranges' lengths
      }
      x += tw;
    }
    y += th;
  }
}

// The bytes each chip holds over every tensor, as bars (a column per chip, or
// per group of chips on a pod wider than the window, showing their largest),
// against the chip's HBM; a click lists what the chip holds.
void PlacementView::DrawChips(UiState& ui) {
  const ShardingChips* c = chips_job_.get();
  if (!c) {
    ImGui::TextDisabled(chips_job_.ready() ? "Per-chip bytes: %s" : "Reading each chip's bytes...%s",
                        chips_job_.ready() ? std::string(chips_job_.result()->status().message()).c_str() : "");
    if (chips_job_.ready()) ui.DataError(chips_job_.result()->status().message());
    return;
  }
  if (c->chips.empty()) return;
  int64_t most = 1;
  for (const ChipBytes& b : c->chips) most = std::max(most, b.bytes);
  const size_t n = c->chips.size();
  ImGui::Text("Bytes each chip holds, over every tensor (largest: %s of %s HBM). Click a chip to list its shards.",
              FormatBytes(most).c_str(), c->chips[0].hbm_bytes ? FormatBytes(c->chips[0].hbm_bytes).c_str() : "?");
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float w = std::max(100.0f, ImGui::GetContentRegionAvail().x), h = 60;
  const size_t columns = std::min(n, static_cast<size_t>(w / 3));
  const float bar_w = w / static_cast<float>(columns);
  ImGui::InvisibleButton("##chip_bars", ImVec2(w, h));
  const bool hovered = ImGui::IsItemHovered() && !ui.headless;
  const bool clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (size_t col = 0; col < columns; ++col) {
    const size_t first = col * n / columns, last = std::max(first + 1, (col + 1) * n / columns);
    int64_t bytes = 0;
    for (size_t i = first; i < last; ++i) bytes = std::max(bytes, c->chips[i].bytes);
    const float x0 = origin.x + col * bar_w, x1 = x0 + std::max(1.0f, bar_w - (bar_w >= 4 ? 1 : 0));
    const float bh = h * static_cast<float>(bytes) / static_cast<float>(most);
    const bool picked = chip_ && *chip_ >= c->chips[first].device_id && *chip_ <= c->chips[last - 1].device_id;
    dl->AddRectFilled(ImVec2(x0, origin.y + h - bh), ImVec2(x1, origin.y + h),
                      picked ? kSelection.Packed() : KindColor(SliceKind::kTransfer).Packed());
    const std::string label = last - first == 1 ? absl::StrCat("chip ", c->chips[first].device_id)
                                                : absl::StrCat("chips ", c->chips[first].device_id, "-",
                                                               c->chips[last - 1].device_id);
    if (layout_) {
      auto& item = layout_->Add("bar", label,
                                nlohmann::json{{"table", "shard_placements"}, {"device_id", c->chips[first].device_id}},
                                x0, origin.y, x1 - x0, h);
      item["role"] = "chip_memory";
      item["bytes"] = bytes;
      item["last_device"] = c->chips[last - 1].device_id;
    }
    if (hovered && ImGui::GetIO().MousePos.x >= x0 && ImGui::GetIO().MousePos.x < x0 + bar_w) {
      ImGui::SetTooltip("%s: %s in %lld tensors", label.c_str(), FormatBytes(bytes).c_str(),
                        static_cast<long long>(c->chips[first].tensors));
      if (clicked) SelectChip(c->chips[first].device_id);
    }
  }
  if (!chip_) return;
  const absl::StatusOr<std::vector<ChipShard>>* shards = chip_job_.result();
  if (!shards) {
    ImGui::TextDisabled("Reading what chip %lld holds...", static_cast<long long>(*chip_));
    return;
  }
  if (!shards->ok()) {
    ImGui::TextColored(ToVec4(kWarning), "%s", std::string(shards->status().message()).c_str());
    // A chip the run lacks, asked for by --chip, is that option's error (already said), not damage.
    if (!absl::IsNotFound(shards->status()) || ui.option_errors.empty()) ui.DataError(shards->status().message());
    return;
  }
  int64_t total = 0;
  for (const ChipShard& s : **shards) total += s.bytes;
  ImGui::Text("chip %lld holds %s of %zu tensors:", static_cast<long long>(*chip_), FormatBytes(total).c_str(),
              (*shards)->size());
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("##chip_shards", 4, flags, ImVec2(0, std::max(120.0f, ImGui::GetContentRegionAvail().y))))
    return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("tensor");
  ImGui::TableSetupColumn("type");
  ImGui::TableSetupColumn("index ranges it holds", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("bytes");
  ImGui::TableHeadersRow();
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>((*shards)->size()));
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const ChipShard& s = (**shards)[static_cast<size_t>(i)];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(s.tensor.c_str());
      if (layout_) {
        auto& item = layout_->Add("row", s.tensor,
                                  nlohmann::json{{"table", "shard_placements"}, {"tensor_name", s.tensor}, {"device_id", *chip_}},
                                  ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x,
                                  ImGui::GetItemRectSize().y);
        item["role"] = "chip_shard";
        item["index_ranges"] = s.index_ranges;
        item["bytes"] = s.bytes;
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted((s.dtype + s.shape).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(s.index_ranges.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatBytes(s.bytes).c_str());
    }
  }
  ImGui::EndTable();
}

}  // namespace shardscope::app
