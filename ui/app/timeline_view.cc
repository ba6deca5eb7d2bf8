// The Timeline view; see timeline_view.h. Lanes are drawn straight into the
// window's draw list over one invisible button that owns the mouse, so zoom,
// pan and hover cost nothing per slice beyond what is on screen.
#include "ui/app/timeline_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ui/app/format.h"
#include "ui/app/lod.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

constexpr float kLabelWidth = 180;
constexpr float kRulerHeight = 26;
constexpr float kRowHeight = 20;
constexpr float kLaneMinHeight = 40;
constexpr float kLanePad = 4;
constexpr float kFoldPx = 3;  // narrower than this is folded

float LaneHeight(const Track& track) {
  float rows = static_cast<float>(std::max<size_t>(1, track.rows.size()));
  return std::max(kLaneMinHeight, rows * kRowHeight + 2 * kLanePad);
}

std::string LaneTitle(const Track& track) {
  if (track.device_id) return absl::StrCat("chip ", *track.device_id);
  std::string thread = track.thread_name.empty() ? track.name : track.thread_name;
  return absl::StrCat("host ", track.host_id, ": ", thread);
}

bool InRect(const ImVec2& p, float x0, float y0, float x1, float y1) {
  return p.x >= x0 && p.x < x1 && p.y >= y0 && p.y < y1;
}

// Diagonal hatching over [x0, x1) x [y0, y1): the mark of a chip waiting for
// the host. Lines every 8 px, so the cost follows the block's width on screen.
void DrawHatch(ImDrawList* dl, float x0, float y0, float x1, float y1) {
  constexpr float kPitch = 8;
  const float h = y1 - y0;
  dl->PushClipRect(ImVec2(x0, y0), ImVec2(x1, y1), true);
  for (float x = x0 - h; x < x1; x += kPitch)
    dl->AddLine(ImVec2(x, y1), ImVec2(x + h, y0), kHostWaitHatch.Packed(), 1.0f);
  dl->PopClipRect();
}

}  // namespace

// What the mouse is over this frame; filled while drawing, shown after.
struct TimelineView::Hover {
  const Track* track = nullptr;
  const SliceRow* row = nullptr;
  DrawBlock block;
  const Compilation* compile = nullptr;
};

TimelineView::TimelineView(const TraceModel& model) : model_(model) {
  for (const Track& t : model.tracks) {
    if (t.clock == Clock::kDevice) has_device_ = true;
    if (t.clock == Clock::kModeled) has_modeled_ = true;
  }
  // A simulated run has no measured device clock; show what there is.
  device_clock_ = has_device_ || !has_modeled_ ? Clock::kDevice : Clock::kModeled;
  for (Clock c : {Clock::kHost, Clock::kDevice, Clock::kModeled}) {
    auto extent = model.ClockExtent(c);
    origin_ns_[static_cast<int>(c)] = extent ? static_cast<double>(extent->first) : 0.0;
  }
}

double TimelineView::ClockOrigin(Clock clock) const {
  return origin_ns_[static_cast<int>(clock)];
}

void TimelineView::Fit(float area_width) {
  double span = 0;
  for (Clock c : {device_clock_, Clock::kHost}) {
    if (auto e = model_.ClockExtent(c)) span = std::max(span, double(e->second - e->first));
  }
  if (span <= 0) span = 1000;
  area_width = std::max(area_width, 50.0f);
  // A little margin on both sides so the first and last slices are not cut.
  fit_span_ns_ = span;
  fit_ns_per_px_ = span * 1.04 / area_width;
  ns_per_px_ = fit_ns_per_px_;
  offset_ns_ = -span * 0.02;
}

float TimelineView::DrawRuler(Clock clock, float y, float left, float right, float label_w) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float area_left = left + label_w;
  dl->AddRectFilled(ImVec2(left, y), ImVec2(right, y + kRulerHeight), Rgb{20, 22, 26}.Packed());
  // Which clock this section is on, said where every lane below can see it.
  std::string title = absl::StrCat(ClockLabel(clock));
  dl->AddText(ImVec2(left + 6, y + 5), kClockLabel.Packed(), title.c_str());
  const double step = NiceStep(ns_per_px_ * 90);
  const double t_left = offset_ns_;
  const double t_right = offset_ns_ + (right - area_left) * ns_per_px_;
  dl->PushClipRect(ImVec2(area_left, y), ImVec2(right, y + kRulerHeight), true);
  for (double t = std::floor(t_left / step) * step; t <= t_right; t += step) {
    float x = area_left + static_cast<float>((t - offset_ns_) / ns_per_px_);
    dl->AddLine(ImVec2(x, y + kRulerHeight - 7), ImVec2(x, y + kRulerHeight), kDimText.Packed());
    std::string label = FormatDuration(std::fabs(t) < step * 1e-6 ? 0 : t);
    dl->AddText(ImVec2(x + 3, y + 4), kDimText.Packed(), label.c_str());
  }
  dl->PopClipRect();
  dl->AddLine(ImVec2(left, y + kRulerHeight - 1), ImVec2(right, y + kRulerHeight - 1),
              Rgb{70, 74, 82}.Packed());
  return kRulerHeight;
}

void TimelineView::DrawLane(const Track& track, int lane_index, float y, float h, float left,
                            float right, float label_w, Hover& hover) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float area_left = left + label_w;
  const Rgb bg = lane_index % 2 ? kLaneOdd : kLaneEven;
  dl->AddRectFilled(ImVec2(left, y), ImVec2(right, y + h), bg.Packed());

  // Label column: the lane's name, and its clock in the line below.
  std::string title = LaneTitle(track);
  dl->AddText(ImVec2(left + 8, y + 4), kText.Packed(), title.c_str());
  std::string sub = track.device_id ? absl::StrCat(ClockLabel(track.clock), ", host ", track.host_id)
                                    : std::string(ClockLabel(track.clock));
  dl->AddText(ImVec2(left + 8, y + 4 + ImGui::GetTextLineHeight()), kDimText.Packed(),
              sub.c_str());

  LaneRect rect{track.track_id, track.device_id, track.host_id, track.clock,
                area_left, y, right - area_left, h, 0};
  const double origin = ClockOrigin(track.clock);
  TimeAxis axis{origin + offset_ns_, ns_per_px_, area_left};
  const int64_t t0 = static_cast<int64_t>(std::floor(axis.ToNs(area_left)));
  const int64_t t1 = static_cast<int64_t>(std::ceil(axis.ToNs(right))) + 1;
  const ImVec2 mouse = ImGui::GetIO().MousePos;

  dl->PushClipRect(ImVec2(area_left, y), ImVec2(right, y + h), true);
  for (size_t d = 0; d < track.rows.size(); ++d) {
    const SliceRow& row = track.rows[d];
    const float ry0 = y + kLanePad + d * kRowHeight;
    const float ry1 = ry0 + kRowHeight - 2;
    for (const DrawBlock& b : FoldRow(row, t0, t1, kFoldPx * ns_per_px_)) {
      // Clamp before converting to float: far off-screen ends would lose all
      // precision and draw garbage.
      float x0 = axis.ToX(std::max<double>(b.start_ns, t0 - ns_per_px_));
      float x1 = axis.ToX(std::min<double>(b.end_ns, t1 + ns_per_px_));
      if (x1 - x0 < 1) x1 = x0 + 1;
      Rgb color = KindColor(b.kind);
      if (b.folded()) color = color.Scaled(kFoldShade);
      // A chip waiting for the host is idle, not busy: a muted, hatched block
      // with a dim label, so it never reads as work.
      const bool waiting = !b.folded() && b.kind == SliceKind::kHostWait;
      dl->AddRectFilled(ImVec2(x0, ry0), ImVec2(x1, ry1), color.Packed());
      if (waiting) DrawHatch(dl, std::max(x0, area_left - kRowHeight), ry0, std::min(x1, right), ry1);
      const float visible_w = std::min(x1, right) - std::max(x0, area_left);
      if (visible_w > 30) {
        std::string text = b.folded() ? absl::StrCat(b.count, " slices")
                                      : model_.Name(row.slices[b.first].name);
        ImVec4 clip(std::max(x0, area_left) + 3, ry0, std::min(x1, right) - 2, ry1);
        dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(),
                    ImVec2(std::max(x0, area_left) + 4, ry0 + 2),
                    b.folded() ? kText.Packed() : waiting ? kDimText.Packed() : Rgb{15, 15, 20}.Packed(),
                    text.c_str(), nullptr, 0, &clip);
      }
      if (InRect(mouse, std::max(x0 - 1, area_left), ry0, x1 + 1, ry1)) {
        dl->AddRect(ImVec2(x0, ry0), ImVec2(x1, ry1), kText.Packed(), 0, 0, 1.5f);
        hover.track = &track;
        hover.row = &row;
        hover.block = b;
      }
      ++rect.blocks_drawn;
    }
  }
  dl->PopClipRect();
  shapes_drawn_ += rect.blocks_drawn;
  lanes_.push_back(rect);
}

void TimelineView::DrawCompileLane(float y, float h, float left, float right, float label_w,
                                   Hover& hover) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float area_left = left + label_w;
  dl->AddRectFilled(ImVec2(left, y), ImVec2(right, y + h), Rgb{44, 36, 38}.Packed());
  dl->AddText(ImVec2(left + 8, y + 4), kText.Packed(), "compilations");
  dl->AddText(ImVec2(left + 8, y + 4 + ImGui::GetTextLineHeight()), kDimText.Packed(),
              "host clock");
  TimeAxis axis{ClockOrigin(Clock::kHost) + offset_ns_, ns_per_px_, area_left};
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const float my0 = y + kLanePad, my1 = y + h - kLanePad;
  dl->PushClipRect(ImVec2(area_left, y), ImVec2(right, y + h), true);
  const auto& compiles = model_.compilations;
  for (size_t i = 0; i < compiles.size(); ++i) {
    const Compilation& c = compiles[i];
    float x0 = axis.ToX(static_cast<double>(c.host_start_ns));
    float x1 = axis.ToX(static_cast<double>(c.host_start_ns + c.duration_ns));
    if (x1 < area_left - 400 || x0 > right) continue;
    // A marker stays at least a few pixels wide: compilations are rare and
    // each one matters, so none may vanish at any zoom.
    if (x1 - x0 < 4) x1 = x0 + 4;
    Rgb color = CompileColor(c.is_miss());
    dl->AddRectFilled(ImVec2(x0, my0), ImVec2(x1, my1), color.Packed());
    std::string text = c.is_miss() ? absl::StrCat("compile #", c.compile_id, ": ",
                                                  c.cause_kind.empty() ? "miss" : c.cause_kind)
                                   : absl::StrCat("#", c.compile_id, " ", c.cache);
    if (!c.SourceLocation().empty() && c.is_miss()) absl::StrAppend(&text, " at ", c.SourceLocation());
    // The label starts on the marker and may run on to the right until the
    // next marker, so short markers still say what they are.
    float next_x = right;
    if (i + 1 < compiles.size()) {
      next_x = std::min(next_x, axis.ToX(static_cast<double>(compiles[i + 1].host_start_ns)) - 4);
    }
    ImVec4 clip(x0 + 2, my0, std::max(x1, next_x), my1);
    const bool inside = x1 - x0 > ImGui::CalcTextSize(text.c_str()).x + 8;
    dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(),
                ImVec2(inside ? x0 + 4 : x1 + 4, my0 + 4),
                inside ? Rgb{15, 15, 20}.Packed() : color.Scaled(1.2f).Packed(), text.c_str(),
                nullptr, 0, &clip);
    if (InRect(mouse, x0 - 2, my0, x1 + 2, my1)) hover.compile = &c;
  }
  dl->PopClipRect();
}

void TimelineView::Draw(UiState& ui) {
  lanes_.clear();
  shapes_drawn_ = 0;

  // Toolbar: which clock the device lanes use, fit, and how to move.
  if (has_device_ && has_modeled_) {
    ImGui::TextUnformatted("device lanes:");
    ImGui::SameLine();
    if (ImGui::RadioButton("measured (device clock)", device_clock_ == Clock::kDevice)) {
      device_clock_ = Clock::kDevice;
      ns_per_px_ = 0;
    }
    ImGui::SameLine();
    if (ImGui::RadioButton("modeled clock", device_clock_ == Clock::kModeled)) {
      device_clock_ = Clock::kModeled;
      ns_per_px_ = 0;
    }
    ImGui::SameLine();
  }
  if (ImGui::Button("Fit")) ns_per_px_ = 0;
  ImGui::SameLine();
  ImGui::TextDisabled(
      "wheel: zoom at mouse   drag: pan   shift+wheel: scroll lanes   double-click: fit   "
      "(each section's time is from its clock's first event)");

  const float status_h = ImGui::GetFrameHeightWithSpacing();
  ImGui::BeginChild("##timeline", ImVec2(0, -status_h), false,
                    ImGuiWindowFlags_NoScrollWithMouse);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(ImGui::GetContentRegionAvail().x, kLabelWidth + 50);
  const float left = origin.x, right = origin.x + width;
  if (ns_per_px_ <= 0) Fit(width - kLabelWidth);

  std::vector<const Track*> device_lanes, host_lanes;
  for (const Track& t : model_.tracks) {
    if (t.clock == device_clock_) device_lanes.push_back(&t);
    else if (t.clock == Clock::kHost) host_lanes.push_back(&t);
  }
  const bool show_compiles = !model_.compilations.empty();
  float total_h = 0;
  if (!device_lanes.empty()) total_h += kRulerHeight;
  for (const Track* t : device_lanes) total_h += LaneHeight(*t);
  if (!host_lanes.empty() || show_compiles) total_h += kRulerHeight + 6;
  if (show_compiles) total_h += kLaneMinHeight;
  for (const Track* t : host_lanes) total_h += LaneHeight(*t);
  total_h = std::max(total_h, 40.0f);

  // One item owns the mouse over all lanes: hover, click, drag and wheel.
  ImGui::InvisibleButton("##lanes", ImVec2(width, total_h));
  const bool hovered = ImGui::IsItemHovered();
  const bool active = ImGui::IsItemActive();
  ImGuiIO& io = ImGui::GetIO();
  const float area_left = left + kLabelWidth;
  if (hovered && io.MouseWheel != 0 && !ui.headless) {
    if (io.KeyShift) {
      ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * 3 * kRowHeight);
    } else {
      TimeAxis axis{offset_ns_, ns_per_px_, area_left};
      ZoomAround(axis, std::max(io.MousePos.x, area_left), std::pow(1.25, io.MouseWheel), 0.01,
                 fit_ns_per_px_ * 8);
      offset_ns_ = axis.origin_ns;
      ns_per_px_ = axis.ns_per_px;
    }
  }
  if (active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2)) {
    offset_ns_ -= io.MouseDelta.x * ns_per_px_;
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    ns_per_px_ = 0;
    Fit(width - kLabelWidth);
  }
  // Keep part of the run on screen: panning off into empty time helps no one,
  // and far-off times would overflow the integer window below.
  const double view_ns = (width - kLabelWidth) * ns_per_px_;
  const double lowest = -0.9 * view_ns;
  offset_ns_ = std::clamp(offset_ns_, lowest, std::max(lowest, fit_span_ns_ - 0.1 * view_ns));
  const bool clicked = hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                       io.MouseDragMaxDistanceSqr[0] < 9;

  const float win_top = ImGui::GetWindowPos().y;
  const float win_bottom = win_top + ImGui::GetWindowSize().y;
  Hover hover;
  float y = origin.y;
  if (!device_lanes.empty()) {
    y += DrawRuler(device_clock_, y, left, right, kLabelWidth);
    int i = 0;
    for (const Track* t : device_lanes) {
      float h = LaneHeight(*t);
      // Lanes scrolled out of the child are skipped entirely.
      if (y + h >= win_top && y <= win_bottom) DrawLane(*t, i, y, h, left, right, kLabelWidth, hover);
      y += h;
      ++i;
    }
  }
  if (!host_lanes.empty() || show_compiles) {
    y += 6;
    y += DrawRuler(Clock::kHost, y, left, right, kLabelWidth);
    if (show_compiles) {
      DrawCompileLane(y, kLaneMinHeight, left, right, kLabelWidth, hover);
      y += kLaneMinHeight;
    }
    int i = 0;
    for (const Track* t : host_lanes) {
      float h = LaneHeight(*t);
      if (y + h >= win_top && y <= win_bottom) DrawLane(*t, i, y, h, left, right, kLabelWidth, hover);
      y += h;
      ++i;
    }
  }
  if (device_lanes.empty() && host_lanes.empty()) {
    ImGui::GetWindowDrawList()->AddText(ImVec2(left + 8, origin.y + 8), kDimText.Packed(),
                                        "This run has no timeline tracks.");
  }

  // Tooltip and click for what is under the mouse.
  if (hovered && !ui.headless && !active) {
    if (hover.compile) {
      const Compilation& c = *hover.compile;
      ImGui::BeginTooltip();
      ImGui::Text("compile #%lld, step %lld: %s", static_cast<long long>(c.compile_id),
                  static_cast<long long>(c.step), c.cache.c_str());
      if (!c.cause_kind.empty()) ImGui::Text("cause: %s", c.cause_kind.c_str());
      if (!c.cause_detail.empty()) ImGui::TextWrapped("%s", c.cause_detail.c_str());
      if (!c.SourceLocation().empty()) ImGui::Text("at %s", c.SourceLocation().c_str());
      ImGui::Text("duration %s (host clock)", FormatDuration(double(c.duration_ns)).c_str());
      ImGui::TextDisabled("click: open in Recompilations");
      ImGui::EndTooltip();
    } else if (hover.track) {
      const Track& t = *hover.track;
      const double origin_ns = ClockOrigin(t.clock);
      ImGui::BeginTooltip();
      if (hover.block.folded()) {
        ImGui::Text("%zu slices folded here (each under %.0f px)", hover.block.count, kFoldPx);
        ImGui::Text("%s, %s", LaneTitle(t).c_str(), ClockLabel(t.clock));
        ImGui::Text("from %s for %s (%s)",
                    FormatDuration(double(hover.block.start_ns) - origin_ns).c_str(),
                    FormatDuration(double(hover.block.end_ns - hover.block.start_ns)).c_str(),
                    ClockLabel(t.clock));
        ImGui::TextDisabled("zoom in (wheel) to see them one by one");
      } else {
        const Slice& s = hover.row->slices[hover.block.first];
        ImGui::TextUnformatted(model_.Name(s.name).c_str());
        ImGui::Separator();
        ImGui::Text("kind: %s", SliceKindName(s.kind));
        if (s.kind == SliceKind::kHostWait)
          ImGui::TextWrapped("the chip had finished its last program and sat idle until the host enqueued this "
                             "step's: the host (tracing, compiling, reading values) was slower than the chips");
        ImGui::Text("%s", t.device_id ? absl::StrCat("device: chip ", *t.device_id, " (host ",
                                                     t.host_id, ")").c_str()
                                      : absl::StrCat("thread: ", LaneTitle(t)).c_str());
        ImGui::Text("start %s, duration %s (%s)",
                    FormatDuration(double(s.start_ns) - origin_ns).c_str(),
                    FormatDuration(double(s.dur_ns)).c_str(), ClockLabel(t.clock));
        if (s.step >= 0) ImGui::Text("step %d", s.step);
        if (s.bytes > 0) ImGui::Text("bytes: %s", FormatBytes(s.bytes).c_str());
        if (s.moves >= 0) {
          ImGui::Text("moves: %s", model_.Name(s.moves).c_str());
          ImGui::TextDisabled("click: open its layout in Sharding");
        }
      }
      ImGui::EndTooltip();
    }
  }
  if (clicked) {
    if (hover.compile) {
      ui.selected_compile_id = hover.compile->compile_id;
      ui.bring_to_front = ViewId::kRecompilations;
      ui.scroll_to_selected_compile = true;
    } else if (hover.track && !hover.block.folded()) {
      const Track& t = *hover.track;
      const Slice& s = hover.row->slices[hover.block.first];
      ui.selection_text = absl::StrFormat(
          "selection: %s, %s, %s, %s (%s)%s", model_.Name(s.name), SliceKindName(s.kind),
          LaneTitle(t), FormatDuration(double(s.dur_ns)), ClockLabel(t.clock),
          s.step >= 0 ? absl::StrCat(", step ", s.step) : std::string());
      if (s.moves >= 0) {  // a collective: show the tensor it moves where its layout is drawn
        ui.show_value = model_.Name(s.moves);
        ui.bring_to_front = ViewId::kSharding;
      }
    } else if (hover.track) {
      ui.selection_text = absl::StrFormat("selection: %zu folded slices on %s; zoom in to pick one",
                                          hover.block.count, LaneTitle(*hover.track));
    }
  }
  ImGui::EndChild();

  // Status bar: the selection, or what is on screen.
  if (!ui.selection_text.empty()) {
    ImGui::TextUnformatted(ui.selection_text.c_str());
  } else {
    ImGui::TextDisabled("%zu slices on %zu tracks; %zu shapes drawn (runs narrower than %.0f px "
                        "are folded); click a slice to select it",
                        model_.num_slices, model_.tracks.size(), shapes_drawn_, kFoldPx);
  }
}

}  // namespace shardscope::app
