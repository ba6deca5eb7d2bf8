// The Fleet view; see fleet_view.h.
#include "ui/app/fleet_view.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "profiler/analysis/format.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

constexpr float kPanelGap = 12;
constexpr float kPanelLabel = 15;
// Suspects outlined beyond the flagged ones: among the ten highest-ranked,
// those over the threshold yet not flagged (within the run's noise, or below
// what a recorded run's links resolve: their evidence says why). At 1% and
// up, a healthy recorded run had three chips and links outlined in amber.
constexpr size_t kOutlined = 10;
constexpr Rgb kNoValue{70, 72, 80};
constexpr Rgb kFlagged{255, 70, 70};
constexpr Rgb kRanked{240, 190, 80};

// "44.4%", or "stopped" for a chip the hang detector found stopped.
std::string ScoreText(const analysis::FleetSuspect& s) {
  return s.stopped ? "stopped" : absl::StrFormat("%.1f%%", s.score * 100);
}

// Whether the k-th ranked suspect is outlined (and amber in the list): the list's
// colours must say what the heatmap outlines, not rank a 0.0% chip as one.
bool Outlined(const analysis::FleetSuspect& s, size_t k, double threshold) {
  return s.flagged || (k < kOutlined && s.score >= threshold);
}

// A suspect's rank and figures on its --dump-layout item.
void AddSuspectFields(json& item, const analysis::FleetSuspect& s, size_t k) {
  item["rank"] = k + 1;
  item["kind"] = s.kind;
  item["id"] = s.id;
  item["score"] = s.stopped ? json() : json(s.score);
  item["flagged"] = s.flagged;
  if (s.stopped) item["stopped"] = true;
}

// The suspect list's line just drawn, for --dump-layout.
void DumpSuspectLine(UiState& ui, const std::string& label, const analysis::FleetSuspect& s, size_t k,
                     bool outlined) {
  if (!ui.layout) return;
  const char* table = s.kind == "chip" ? "devices" : s.kind == "link" ? "links" : "hosts";
  auto& item = ui.layout->Add("text", label, json{{"table", table}, {"id", s.id}}, ImGui::GetItemRectMin().x,
                              ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
  item["role"] = "suspect";
  item["outlined"] = outlined;
  AddSuspectFields(item, s, k);
}

ImVec4 Vec4(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

// Low to high: dark blue, teal, green, yellow, red.
// Which way a metric gets worse: more time, waiting, lateness or memory;
// less compute share or MFU. A NaN (no value) is never worse.
bool Worse(FleetMetric m, double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  const bool lower_is_worse = m == FleetMetric::kComputeShare || m == FleetMetric::kMfu;
  return lower_is_worse ? a < b : a > b;
}
const char* WorstWord(FleetMetric m) {
  return m == FleetMetric::kComputeShare || m == FleetMetric::kMfu ? "lowest (worst) of them" : "highest (worst) of them";
}

Rgb Ramp(double f) {
  static constexpr Rgb stops[] = {{35, 45, 110}, {35, 125, 175}, {70, 185, 130}, {235, 215, 75}, {225, 70, 50}};
  f = std::clamp(f, 0.0, 1.0) * 4;
  const int k = std::min(3, static_cast<int>(f));
  const double t = f - k;
  auto mix = [&](uint8_t a, uint8_t b) { return static_cast<uint8_t>(a + (b - a) * t); };
  return {mix(stops[k].r, stops[k + 1].r), mix(stops[k].g, stops[k + 1].g), mix(stops[k].b, stops[k + 1].b)};
}

// The breakdown's parts, bottom up, with their colours.
struct Part {
  const char* name;
  double analysis::FleetChipStep::*field;
  Rgb color;
};
const Part kParts[] = {
    {"compute", &analysis::FleetChipStep::compute_ns, KindColor(SliceKind::kCompute)},
    {"collective", &analysis::FleetChipStep::collective_ns, KindColor(SliceKind::kCollective)},
    {"collective wait", &analysis::FleetChipStep::wait_ns, {200, 60, 60}},
    {"transfer", &analysis::FleetChipStep::transfer_ns, KindColor(SliceKind::kTransfer)},
    {"host wait", &analysis::FleetChipStep::host_wait_ns, kHostWaitHatch},
    {"other", &analysis::FleetChipStep::other_ns, KindColor(SliceKind::kHost)},
    {"idle", &analysis::FleetChipStep::idle_ns, kFoldBackground},
};

json Breakdown(const analysis::FleetChipStep& c) {
  json j = json::object();
  for (const Part& p : kParts) j[absl::StrReplaceAll(p.name, {{" ", "_"}}) + std::string("_ns")] = c.*p.field;
  return j;
}

}  // namespace

FleetView::FleetView(const TraceModel& model, std::function<void()> wake) : model_(model), wake_(std::move(wake)) {}

FleetView::~FleetView() {
  job_.Cancel();
  if (textures_) {
    if (heat_texture_) textures_->Release(heat_texture_);
    if (bars_texture_) textures_->Release(bars_texture_);
  }
}

void FleetView::StartLoading() {
  if (job_.started()) return;
  const int64_t run = model_.run.run_id;
  auto progress = progress_;
  auto wake = wake_;
  job_.Start(
      model_.path,
      [run, progress, wake](const store::Reader& r) {
        auto last = std::chrono::steady_clock::now();
        return BuildFleetModel(r, run, [&](double fraction, const std::string& phase) {
          {
            std::lock_guard lock(progress->mu);
            progress->fraction = fraction;
            progress->phase = phase;
          }
          // Redraw the progress line now and then, not at every call.
          const auto now = std::chrono::steady_clock::now();
          if (wake && now - last > std::chrono::milliseconds(200)) {
            last = now;
            wake();
          }
        });
      },
      wake_);
}

void FleetView::SetStep(int step) {
  const FleetModel* m = job_.get();
  if (!m) {
    wanted_step_ = step;
    return;
  }
  wanted_step_.reset();
  const auto& steps = m->report.per_step;
  size_t best = step_index_;
  for (size_t i = 0; i < steps.size(); ++i)
    if (best >= steps.size() || std::abs(steps[i].step - step) < std::abs(steps[best].step - step)) best = i;
  step_index_ = best;
}

int FleetView::step() const {
  const FleetModel* m = job_.get();
  if (!m || step_index_ >= m->report.per_step.size()) return wanted_step_.value_or(-1);
  return m->report.per_step[step_index_].step;
}

void FleetView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("fleet");
  textures_ = ui.textures ? ui.textures : textures_;
  StartLoading();
  if (!job_.ready()) {
    std::lock_guard lock(progress_->mu);
    ImGui::Text("Diagnosing the fleet from the store (every chip's slices, then the what-if): %s...",
                progress_->phase.c_str());
    if (progress_->fraction >= 0) ImGui::ProgressBar(static_cast<float>(progress_->fraction), ImVec2(300, 0));
    drawn_ = 0;
    return;
  }
  const absl::StatusOr<FleetModel>& result = *job_.result();
  if (!result.ok()) {
    ImGui::TextColored(Vec4(kWarning), "Fleet: %s", std::string(result.status().message()).c_str());
    ui.DataError(result.status().message());
    if (ui.layout) ui.layout->Add("text", std::string(result.status().message()), json{{"table", "runs"}}, 0, 0, 0, 0)["role"] = "error";
    ++drawn_;
    return;
  }
  const FleetModel& m = *result;
  if (!step_chosen_) {
    step_chosen_ = true;
    step_index_ = m.TypicalStep();
    // The playhead starts where the view does: without it, the first "next
    // step" key went from the step shown to step 0.
    if (!wanted_step_ && !ui.playhead_step && step_index_ < m.report.per_step.size())
      ui.playhead_step = m.report.per_step[step_index_].step;
  }
  if (wanted_step_) SetStep(*wanted_step_);
  if (ui.playhead_step && *ui.playhead_step != step()) SetStep(*ui.playhead_step);
  // A playhead on a step with no chip timeline (a host-clock step after a
  // hang): the nearest is shown, and said to be (it was shown in silence).
  playhead_elsewhere_ = ui.playhead_step && *ui.playhead_step != step() ? *ui.playhead_step : -1;
  step_index_ = std::min(step_index_, m.report.per_step.empty() ? 0 : m.report.per_step.size() - 1);
  DrawHeader(m, ui);
  if (m.report.per_step.empty()) {
    ImGui::TextDisabled("This run has no chip timeline on the %s clock: nothing to lay out.", m.report.clock.c_str());
    if (!m.report.suspects.empty()) DrawSuspectsWithoutMap(m, ui);
    ++drawn_;
    return;
  }
  const float suspects_w = 330;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float w = std::max(200.0f, avail.x - suspects_w - 10);
  const float bars_h = std::max(60.0f, avail.y * 0.28f);
  const float heat_h = std::max(80.0f, avail.y - bars_h - 40);
  ImGui::BeginChild("##fleet_maps", ImVec2(w, avail.y), false, ImGuiWindowFlags_NoScrollbar);
  DrawHeatmap(m, {origin.x, origin.y, w, heat_h}, ui);
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + heat_h + 6));
  DrawBreakdownKey(ui);
  DrawBars(m, {origin.x, origin.y + heat_h + 26, w, bars_h}, ui);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("##fleet_suspects", ImVec2(0, avail.y));
  DrawSuspects(m, ui);
  ImGui::EndChild();
  ++drawn_;
}

// The stacked bars' colour key: a swatch per part, bottom up, on one line.
void FleetView::DrawBreakdownKey(UiState& ui) {
  ImGui::TextDisabled("each chip's step, stacked from the bottom:");
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (const Part& p : kParts) {
    ImGui::SameLine(0, 10);
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float side = ImGui::GetTextLineHeight() - 2;
    dl->AddRectFilled(ImVec2(at.x, at.y + 1), ImVec2(at.x + side, at.y + 1 + side), p.color.Packed());
    dl->AddRect(ImVec2(at.x, at.y + 1), ImVec2(at.x + side, at.y + 1 + side), kDimText.Packed());
    ImGui::Dummy(ImVec2(side + 3, side));
    ImGui::SameLine(0, 0);
    ImGui::TextUnformatted(p.name);
    if (ui.layout) {
      auto& item = ui.layout->Add("key", p.name, json{{"table", "slices"}}, at.x, at.y, side, side);
      item["role"] = "breakdown_key";
      item["color"] = absl::StrFormat("#%02x%02x%02x", p.color.r, p.color.g, p.color.b);
    }
  }
}

void FleetView::DrawHeader(const FleetModel& m, UiState& ui) {
  const analysis::FleetReport& r = m.report;
  const FleetGrid& g = m.grid;
  std::string where;
  if (g.kind == "torus3d" || (g.kind == "mesh" && g.panels > 1))
    where = absl::StrFormat("%d panels (%s) of %d x %d (%s x %s)", g.panels, g.panel_label, g.rows, g.cols,
                            g.row_label, g.col_label);
  else if (g.rows_per_panel > 0)
    where = absl::StrFormat("%d x %d (%s x %s), in %d panels of %d rows", g.total_rows, g.cols, g.row_label,
                            g.col_label, g.panels, g.rows_per_panel);
  else if (g.kind == "gpu")
    where = absl::StrFormat("%d hosts (rows) of %d chips", g.rows, g.cols);
  else if (g.kind == "devices")
    where = "in device order (no coordinates stored)";
  else
    where = absl::StrFormat("%d x %d (%s x %s)", g.rows, g.cols, g.row_label, g.col_label);
  const std::string head = absl::StrFormat("%s on %s, topology %s: %s; %s clock%s",
                                           analysis::Plural(r.chips, "chip", "chips"),
                                           analysis::Plural(r.hosts, "host", "hosts"),
                                           r.topology.empty() ? "-" : r.topology, where, r.clock,
                                           r.simulated ? " (simulated)" : "");
  ImGui::TextUnformatted(head.c_str());
  // The font's glyphs are Latin-1: the report's dashes drawn as hyphens.
  const std::string verdict = absl::StrReplaceAll(r.verdict, {{"\xE2\x80\x94", "-"}});
  ImGui::TextColored(Vec4(r.supported ? kClockLabel : kDimText), "verdict: %s", verdict.c_str());
  if (ui.layout) {
    auto& item = ui.layout->Add("text", r.verdict, json{{"table", "runs"}, {"run_id", r.run_id}}, ImGui::GetItemRectMin().x,
                                ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
    item["role"] = "header";
    item["chips"] = r.chips;
    item["hosts"] = r.hosts;
    item["topology"] = r.topology;
    // The grid as the topology places chips (a cut grid's whole rows, one
    // panel), and how it is drawn: what --dump-layout always said, plus the cut.
    const bool cut = g.rows_per_panel > 0;
    item["grid"] = {{"kind", g.kind},
                    {"panels", cut ? 1 : g.panels},
                    {"rows", cut ? g.total_rows : g.rows},
                    {"cols", g.cols},
                    {"panels_drawn", g.panels},
                    {"rows_per_panel", cut ? g.rows_per_panel : g.rows}};
    item["clock"] = r.clock;
    item["simulated"] = r.simulated;
    item["supported"] = r.supported;
    item["steps_analysed"] = r.steps;
  }
  for (const std::string& n : r.notes) ImGui::TextDisabled("note: %s", n.c_str());
  // The metric and the step.
  ImGui::SetNextItemWidth(330);
  if (ImGui::BeginCombo("##metric", FleetMetricTitle(metric_))) {
    for (int k = 0; k < kNumFleetMetrics; ++k) {
      const auto mk = static_cast<FleetMetric>(k);
      if (ImGui::Selectable(FleetMetricTitle(mk), mk == metric_)) metric_ = mk;
    }
    ImGui::EndCombo();
  }
  if (r.per_step.empty()) return;
  ImGui::SameLine();
  int i = static_cast<int>(step_index_);
  const analysis::FleetStep& s = r.per_step[step_index_];
  const std::string label = absl::StrFormat("step %d of %d-%d%s", s.step, r.per_step.front().step,
                                            r.per_step.back().step, s.analysed ? "" : " (not analysed: warm-up)");
  ImGui::SetNextItemWidth(320);
  if (ImGui::SliderInt("##step", &i, 0, static_cast<int>(r.per_step.size()) - 1, label.c_str())) {
    step_index_ = static_cast<size_t>(i);
    ui.playhead_step = r.per_step[step_index_].step;  // the other views follow
  }
  ImGui::SameLine();
  ImGui::Text("step span %s", FormatDuration(s.span_ns).c_str());
  if (playhead_elsewhere_ >= 0) {
    const std::string note = absl::StrFormat("(the playhead's step %d has no chip timeline: step %d, the nearest, is shown)",
                                             playhead_elsewhere_, s.step);
    ImGui::SameLine();
    ImGui::TextDisabled("%s", note.c_str());
    if (ui.layout) ui.layout->Add("text", note, json{{"table", "step_bounds"}}, 0, 0, 0, 0)["role"] = "playhead_elsewhere";
  }
  if (metric_ == FleetMetric::kHbmPeak) {
    ImGui::SameLine();
    ImGui::TextDisabled("(%s)", m.hbm_source.empty() ? "no HBM samples or plans stored" : m.hbm_source.c_str());
  }
}

FleetView::Placement FleetView::Place(const FleetModel& m, float w, float h) const {
  const FleetGrid& g = m.grid;
  Placement best;
  best.cell = 0;
  const float label = g.panels > 1 ? kPanelLabel : 0;
  double best_px = -1;  // pixels per chip along an axis (below 1: chips share a pixel)
  for (int per_row = 1; per_row <= g.panels; ++per_row) {
    const int panel_rows = (g.panels + per_row - 1) / per_row;
    const float cw = (w - (per_row - 1) * kPanelGap) / (per_row * g.cols);
    const float ch = (h - panel_rows * label - (panel_rows - 1) * kPanelGap) / (panel_rows * g.rows);
    // Labels and gaps alone can fill the area (many panels, a small window):
    // that arrangement cannot be drawn; at worst a chip gets a ten-thousandth of a pixel.
    if (cw <= 0 || ch <= 0) continue;
    const float raw = std::min({cw, ch, 48.0f});
    const int block = raw >= 1 ? 1 : static_cast<int>(std::ceil(1 / std::max(raw, 1e-4f)));
    const float cell = raw >= 1 ? std::floor(raw) : 1.0f;
    const double px = double(cell) / block;
    if (px >= best_px) {  // a tie goes to the wider row of panels
      best_px = px;
      best.cell = cell;
      best.block = block;
      best.panels_per_row = per_row;
    }
  }
  best.cell = std::max(1.0f, best.cell);
  best.gap = best.cell >= 5 ? 1 : 0;
  best.panel_gap = kPanelGap;
  best.panel_w = best.cell * ((g.cols + best.block - 1) / best.block);
  best.panel_h = best.cell * ((g.rows + best.block - 1) / best.block) + label;
  return best;
}

void FleetView::CellRect(const FleetModel& m, const Placement& p, size_t i, float* x0, float* y0, float* x1,
                         float* y1) const {
  const FleetChipInfo& c = m.chips[i];
  const int pr = c.panel / p.panels_per_row, pc = c.panel % p.panels_per_row;
  const float label = m.grid.panels > 1 ? kPanelLabel : 0;
  *x0 = pc * (p.panel_w + p.panel_gap) + (c.col / p.block) * p.cell;
  *y0 = pr * (p.panel_h + p.panel_gap) + label + (c.row / p.block) * p.cell;
  *x1 = *x0 + p.cell - p.gap;
  *y1 = *y0 + p.cell - p.gap;
}

void FleetView::Show(UiState& ui, LaneImage& image, ImTextureID& texture, const Area& a, bool painted) {
  if (!ui.textures) return;  // no GL (tests): painted, not shown
  if (!texture || painted) {
    if (!texture) texture = ui.textures->Create();
    ui.textures->Upload(texture, image.w, image.h, image.px.data());
  }
  ImGui::GetWindowDrawList()->AddImage(texture, ImVec2(a.x, a.y), ImVec2(a.x + image.w, a.y + image.h));
}

void FleetView::DrawHeatmap(const FleetModel& m, const Area& a, UiState& ui) {
  const Placement p = Place(m, a.w - 90, a.h);  // the legend on the right
  const size_t n = m.chips.size();
  std::vector<double> values(n);
  lo_ = 1e300;
  hi_ = -1e300;
  for (size_t i = 0; i < n; ++i) {
    values[i] = m.Value(metric_, step_index_, i);
    if (!std::isnan(values[i])) lo_ = std::min(lo_, values[i]), hi_ = std::max(hi_, values[i]);
  }
  if (lo_ > hi_) lo_ = hi_ = 0;
  const double span = step_index_ < m.report.per_step.size() ? m.report.per_step[step_index_].span_ns : 0;
  widened_ = FleetModel::ColorScale(metric_, span, &lo_, &hi_);
  auto color_of = [&](double v) {
    if (std::isnan(v)) return kNoValue;
    return Ramp(hi_ > lo_ ? (v - lo_) / (hi_ - lo_) : 0.5);
  };
  const int iw = static_cast<int>(a.w - 90), ih = static_cast<int>(a.h);
  const std::string key = absl::StrCat(static_cast<int>(metric_), ":", step_index_, ":", iw, "x", ih);
  bool painted = false;
  if (key != heat_key_) {
    heat_.Resize(iw, ih);
    std::fill(heat_.px.begin(), heat_.px.end(), kBackground.Packed());
    block_worst_.assign(p.block > 1 ? size_t(std::max(0, iw)) * size_t(std::max(0, ih)) : 0, -1);
    block_count_.assign(block_worst_.size(), 0);
    for (size_t i = 0; i < n; ++i) {
      float x0, y0, x1, y1;
      CellRect(m, p, i, &x0, &y0, &x1, &y1);
      if (p.block > 1) {
        // A pixel of several chips keeps the worst: the one to look at.
        const int px = static_cast<int>(x0), py = static_cast<int>(y0);
        if (px < 0 || py < 0 || px >= iw || py >= ih) continue;
        int& w = block_worst_[size_t(py) * iw + px];
        ++block_count_[size_t(py) * iw + px];
        if (w < 0 || Worse(metric_, values[i], values[w])) w = static_cast<int>(i);
        continue;
      }
      heat_.Fill(static_cast<int>(x0), std::max(static_cast<int>(x0) + 1, static_cast<int>(x1)), static_cast<int>(y0),
                 std::max(static_cast<int>(y0) + 1, static_cast<int>(y1)), color_of(values[i]).Packed());
    }
    for (size_t k = 0; k < block_worst_.size(); ++k) {
      if (block_worst_[k] >= 0) heat_.px[k] = color_of(values[block_worst_[k]]).Packed();
    }
    heat_key_ = key;
    painted = true;
  }
  Show(ui, heat_, heat_texture_, a, painted);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  // Panel labels (z = 3), when there are several.
  if (m.grid.panels > 1 && p.cell >= 2)
    for (int k = 0; k < m.grid.panels; ++k) {
      const int pr = k / p.panels_per_row, pc = k % p.panels_per_row;
      const int h = m.grid.rows_per_panel;
      const std::string label = h > 0 ? absl::StrCat(m.grid.panel_label, " ", k * h, "-",
                                                     std::min((k + 1) * h, m.grid.total_rows) - 1)
                                      : absl::StrCat(m.grid.panel_label, " = ", k);
      dl->AddText(ImVec2(a.x + pc * (p.panel_w + p.panel_gap), a.y + pr * (p.panel_h + p.panel_gap)),
                  kDimText.Packed(), label.c_str());
    }
  // The legend: the scale of this metric at this step.
  const float lx = a.x + a.w - 80, ly = a.y + 18, lh = std::min(160.0f, a.h - 40);
  for (int k = 0; k < 16; ++k)
    dl->AddRectFilled(ImVec2(lx, ly + lh * (15 - k) / 16), ImVec2(lx + 14, ly + lh * (16 - k) / 16),
                      Ramp(k / 15.0).Packed());
  dl->AddText(ImVec2(lx + 18, ly - 4), kText.Packed(), FleetModel::Format(metric_, hi_).c_str());
  dl->AddText(ImVec2(lx + 18, ly + lh - 10), kText.Packed(), FleetModel::Format(metric_, lo_).c_str());
  if (widened_)  // the chips differ by less than the scale: said, not painted as contrast
    dl->AddText(ImVec2(lx - 6, ly + lh + 6 + (p.block > 1 ? 70 : 0)), kDimText.Packed(),
                // Lines as short as the pixel note's: the suspects' column starts beside them.
                metric_ == FleetMetric::kComputeShare || metric_ == FleetMetric::kMfu
                    ? "scale: at\nleast 2\npoints; the\nchips differ\nless"
                : metric_ == FleetMetric::kHbmPeak ? "scale: at\nleast 2% of\nthe peak;\nthe chips\ndiffer less"
                                                   : "scale: at\nleast 2% of\nthe step;\nthe chips\ndiffer less");
  if (p.block > 1) {
    // Say what a pixel is when it is not one chip.
    const std::string what = absl::StrCat("1 px: up to\n", p.block, "x", p.block, " chips,\nthe ",
                                          metric_ == FleetMetric::kComputeShare || metric_ == FleetMetric::kMfu
                                              ? "lowest\n(worst)"
                                              : "highest\n(worst)");
    dl->AddText(ImVec2(lx - 6, ly + lh + 6), kDimText.Packed(), what.c_str());
  }
  if (ui.layout) {
    auto& item = ui.layout->Add("legend", FleetMetricTitle(metric_), json{{"table", "slices"}}, lx, ly, 14, lh);
    item["metric"] = FleetMetricName(metric_);
    item["min"] = lo_;
    item["max"] = hi_;
    item["widened"] = widened_;
    item["chips_per_pixel"] = p.block * p.block;
    item["pixel_shows"] = p.block > 1 ? WorstWord(metric_) : "the chip";
  }

  // Each chip in the dump; hover and click from the mouse's cell.
  const int step = m.report.per_step[step_index_].step;
  if (ui.layout && p.block > 1) {
    // Each pixel of several chips: how many, and the worst shown.
    for (size_t k = 0; k < block_worst_.size(); ++k) {
      const int w = block_worst_[k];
      if (w < 0) continue;
      auto& item = ui.layout->Add("pixel", absl::StrCat(block_count_[k], " chips"),
                                  json{{"table", "devices"}, {"device_id", m.chips[size_t(w)].device_id}},
                                  a.x + float(k % size_t(heat_.w)), a.y + float(k / size_t(heat_.w)), 1, 1);
      item["chips"] = block_count_[k];
      item["value"] = std::isnan(values[size_t(w)]) ? json(nullptr) : json(values[size_t(w)]);
      item["shows"] = WorstWord(metric_);
    }
  }
  if (ui.layout) {
    for (size_t i = 0; i < n; ++i) {
      float x0, y0, x1, y1;
      CellRect(m, p, i, &x0, &y0, &x1, &y1);
      const FleetChipInfo& c = m.chips[i];
      auto& item = ui.layout->Add("chip", absl::StrCat("chip ", c.device_id),
                                  json{{"table", "devices"}, {"device_id", c.device_id}}, a.x + x0, a.y + y0,
                                  std::max(1.0f, x1 - x0), std::max(1.0f, y1 - y0));
      item["host_id"] = c.host_id;
      item["coords"] = c.coords;
      // The chip's place in the topology's grid (a cut grid's whole row); the
      // drawn panel beside it.
      const bool cut = m.grid.rows_per_panel > 0;
      item["panel"] = cut ? 0 : c.panel;
      item["row"] = cut ? c.panel * m.grid.rows_per_panel + c.row : c.row;
      item["col"] = c.col;
      item["panel_drawn"] = c.panel;
      item["metric"] = FleetMetricName(metric_);
      item["step"] = step;
      item["value"] = std::isnan(values[i]) ? json(nullptr) : json(values[i]);
      item["rank"] = c.rank;
      item["flagged"] = c.flagged;
      const analysis::FleetChipStep& b = m.report.per_step[step_index_].chips[i];
      item["breakdown"] = Breakdown(b);
      item["span_ns"] = m.report.per_step[step_index_].span_ns;
      item["present"] = b.present;
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(a.x, a.y));
  ImGui::InvisibleButton("##heat", ImVec2(std::max(1.0f, a.w - 90), std::max(1.0f, a.h)));
  int hovered = -1;
  std::string note;
  if (ImGui::IsItemHovered() && !ui.headless && p.block > 1) {
    // The pixel's block: its worst chip stands for it.
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const int px = static_cast<int>(mouse.x - a.x), py = static_cast<int>(mouse.y - a.y);
    if (px >= 0 && py >= 0 && px < heat_.w && py < heat_.h && size_t(py) * heat_.w + px < block_worst_.size()) {
      hovered = block_worst_[size_t(py) * heat_.w + px];
      note = absl::StrCat(block_count_[size_t(py) * heat_.w + px], " chips in this pixel; the ", WorstWord(metric_),
                          ":");
    }
  } else if (ImGui::IsItemHovered() && !ui.headless) {
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (size_t i = 0; i < n && hovered < 0; ++i) {
      float x0, y0, x1, y1;
      CellRect(m, p, i, &x0, &y0, &x1, &y1);
      if (mouse.x >= a.x + x0 && mouse.x < a.x + x0 + p.cell && mouse.y >= a.y + y0 && mouse.y < a.y + y0 + p.cell)
        hovered = static_cast<int>(i);
    }
  }
  if (hovered >= 0) {
    DrawTooltip(m, static_cast<size_t>(hovered), note);
    if (ImGui::IsItemClicked()) Open(m, static_cast<size_t>(hovered), ui);
  }

  // Suspects outlined with their rank: every flagged one and the highest-ranked others.
  auto outline = [&](size_t i, Rgb color, const std::string& text) {
    float x0, y0, x1, y1;
    CellRect(m, p, i, &x0, &y0, &x1, &y1);
    dl->AddRect(ImVec2(a.x + x0 - 2, a.y + y0 - 2), ImVec2(a.x + x1 + 2, a.y + y1 + 2), color.Packed(), 0, 0, 2);
    if (!text.empty()) dl->AddText(ImVec2(a.x + x1 + 3, a.y + y0 - 6), color.Packed(), text.c_str());
  };
  for (size_t k = 0; k < m.report.suspects.size(); ++k) {
    const analysis::FleetSuspect& s = m.report.suspects[k];
    if (!Outlined(s, k, m.report.threshold)) continue;
    const Rgb color = s.flagged ? kFlagged : kRanked;
    const std::string rank = absl::StrCat("#", k + 1);
    std::vector<size_t> cells;
    if (s.kind == "chip") {
      int d = 0;
      if (absl::SimpleAtoi(s.id, &d) && m.ChipIndex(d) >= 0) cells.push_back(static_cast<size_t>(m.ChipIndex(d)));
      for (size_t i : cells) outline(i, color, rank);
    } else if (s.kind == "host") {
      for (size_t i = 0; i < n; ++i)
        if (absl::StrCat(m.chips[i].host_id) == s.id) cells.push_back(i);
      for (size_t j = 0; j < cells.size(); ++j) outline(cells[j], color, j == 0 ? rank : "");
    } else if (s.kind == "link") {
      std::vector<std::string> ends = absl::StrSplit(s.id, '-');
      int da = 0, db = 0;
      if (ends.size() == 2 && absl::SimpleAtoi(ends[0], &da) && absl::SimpleAtoi(ends[1], &db) && m.ChipIndex(da) >= 0 &&
          m.ChipIndex(db) >= 0) {
        cells = {static_cast<size_t>(m.ChipIndex(da)), static_cast<size_t>(m.ChipIndex(db))};
        // A link between panels (a wraparound, another z) would cross the map: its two chips are outlined.
        if (m.chips[cells[0]].panel != m.chips[cells[1]].panel) {
          outline(cells[0], color, rank);
          outline(cells[1], color, "");
        }
        float ax0, ay0, ax1, ay1, bx0, by0, bx1, by1;
        CellRect(m, p, cells[0], &ax0, &ay0, &ax1, &ay1);
        CellRect(m, p, cells[1], &bx0, &by0, &bx1, &by1);
        const ImVec2 pa(a.x + (ax0 + ax1) / 2, a.y + (ay0 + ay1) / 2), pb(a.x + (bx0 + bx1) / 2, a.y + (by0 + by1) / 2);
        if (m.chips[cells[0]].panel == m.chips[cells[1]].panel) {
          dl->AddLine(pa, pb, color.Packed(), 3);
          dl->AddText(ImVec2((pa.x + pb.x) / 2 + 3, (pa.y + pb.y) / 2 - 14), color.Packed(), rank.c_str());
        }
      }
    }
    if (ui.layout && !cells.empty()) {
      float x0, y0, x1, y1;
      CellRect(m, p, cells[0], &x0, &y0, &x1, &y1);
      json ref = s.kind == "chip"   ? json{{"table", "devices"}, {"device_id", m.chips[cells[0]].device_id}}
                 : s.kind == "host" ? json{{"table", "hosts"}, {"host_id", m.chips[cells[0]].host_id}}
                                    : json{{"table", "links"}, {"link_id", s.id}};
      auto& item = ui.layout->Add("suspect", absl::StrCat("#", k + 1, " ", s.kind, " ", s.id), ref, a.x + x0, a.y + y0,
                                  x1 - x0, y1 - y0);
      AddSuspectFields(item, s, k);
      json devices = json::array();
      for (size_t i : cells) devices.push_back(m.chips[i].device_id);
      item["devices"] = devices;
    }
  }
  if (selected_ >= 0 && static_cast<size_t>(selected_) < n) outline(static_cast<size_t>(selected_), kSelection, "");
}

void FleetView::DrawBars(const FleetModel& m, const Area& a, UiState& ui) {
  const analysis::FleetStep& s = m.report.per_step[step_index_];
  const size_t n = m.chips.size();
  const int iw = std::max(1, static_cast<int>(a.w - 90)), ih = std::max(1, static_cast<int>(a.h));
  // A bar per chip when they fit (at least 1 px each), else a column per pixel holding the mean of its chips.
  const int columns = static_cast<int>(std::min<size_t>(n, static_cast<size_t>(iw)));
  const float bar_w = static_cast<float>(iw) / std::max(1, columns);
  auto chips_of = [&](int col, size_t* first, size_t* last) {
    *first = static_cast<size_t>(col) * n / columns;
    *last = std::max(*first + 1, static_cast<size_t>(col + 1) * n / columns);
  };
  auto mean_of = [&](size_t first, size_t last) {
    analysis::FleetChipStep mean;
    for (size_t i = first; i < last; ++i)
      for (const Part& p : kParts) mean.*p.field += s.chips[i].*p.field / static_cast<double>(last - first);
    return mean;
  };
  const double scale = s.span_ns > 0 ? ih / s.span_ns : 0;
  const std::string key = absl::StrCat(step_index_, ":", iw, "x", ih);
  bool painted = false;
  if (key != bars_key_) {
    bars_.Resize(iw, ih);
    std::fill(bars_.px.begin(), bars_.px.end(), kBackground.Packed());
    for (int col = 0; col < columns; ++col) {
      size_t first, last;
      chips_of(col, &first, &last);
      const analysis::FleetChipStep b = mean_of(first, last);
      const int x0 = static_cast<int>(col * bar_w);
      const int x1 = std::max(x0 + 1, static_cast<int>((col + 1) * bar_w) - (bar_w >= 4 ? 1 : 0));
      double y = ih;
      for (const Part& p : kParts) {
        const double h = b.*p.field * scale;
        bars_.Fill(x0, x1, static_cast<int>(std::lround(y - h)), static_cast<int>(std::lround(y)), p.color.Packed());
        y -= h;
      }
    }
    bars_key_ = key;
    painted = true;
  }
  Show(ui, bars_, bars_texture_, a, painted);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddText(ImVec2(a.x + iw + 6, a.y), kText.Packed(), FormatDuration(s.span_ns).c_str());
  dl->AddText(ImVec2(a.x + iw + 6, a.y + ih - 14), kDimText.Packed(), "0");
  if (columns < static_cast<int>(n))
    dl->AddText(ImVec2(a.x + iw + 6, a.y + 18), kDimText.Packed(),
                absl::StrFormat("%.1f chips\nper column\n(mean)", static_cast<double>(n) / columns).c_str());
  if (ui.layout)
    for (int col = 0; col < columns; ++col) {
      size_t first, last;
      chips_of(col, &first, &last);
      const int d0 = m.chips[first].device_id, d1 = m.chips[last - 1].device_id;
      auto& item = ui.layout->Add("bar", last - first == 1 ? absl::StrCat("chip ", d0) : absl::StrCat("chips ", d0, "-", d1),
                                  json{{"table", "devices"}, {"device_id", d0}}, a.x + col * bar_w, a.y, bar_w, a.h);
      item["first_device"] = d0;
      item["last_device"] = d1;
      item["step"] = s.step;
      item["span_ns"] = s.span_ns;
      item["breakdown"] = Breakdown(mean_of(first, last));
    }
  ImGui::SetCursorScreenPos(ImVec2(a.x, a.y));
  ImGui::InvisibleButton("##bars", ImVec2(static_cast<float>(iw), static_cast<float>(ih)));
  if (ImGui::IsItemHovered() && !ui.headless) {
    const int col = std::clamp(static_cast<int>((ImGui::GetIO().MousePos.x - a.x) / bar_w), 0, columns - 1);
    size_t first, last;
    chips_of(col, &first, &last);
    DrawTooltip(m, first);
    if (ImGui::IsItemClicked()) selected_ = static_cast<int>(first);
  }
}

void FleetView::DrawTooltip(const FleetModel& m, size_t i, const std::string& note) {
  const FleetChipInfo& c = m.chips[i];
  const analysis::FleetStep& s = m.report.per_step[step_index_];
  const analysis::FleetChipStep& b = s.chips[i];
  ImGui::BeginTooltip();
  if (!note.empty()) ImGui::TextDisabled("%s", note.c_str());
  ImGui::Text("chip %d (host %d) at %s", c.device_id, c.host_id, c.coords.c_str());
  ImGui::Text("%s: %s at step %d (%s clock)", FleetMetricTitle(metric_),
              FleetModel::Format(metric_, m.Value(metric_, step_index_, i)).c_str(), s.step, m.report.clock.c_str());
  for (const Part& p : kParts) {
    ImGui::TextColored(Vec4(p.color), "%-16s %10s  %5.1f%%", p.name, FormatDuration(b.*p.field).c_str(),
                       s.span_ns > 0 ? 100 * b.*p.field / s.span_ns : 0.0);
  }
  if (c.rank > 0) {
    const analysis::FleetSuspect& sus = m.report.suspects[static_cast<size_t>(c.rank - 1)];
    ImGui::TextColored(Vec4(c.flagged ? kFlagged : kRanked), "suspect #%d%s: %s", c.rank, c.flagged ? " (flagged)" : "",
                       sus.stopped ? "stopped responding (a hang)"
                                   : absl::StrFormat("%.1f%% slower than its peers", sus.score * 100).c_str());
    for (const std::string& e : sus.evidence) ImGui::BulletText("%s", e.c_str());
  }
  ImGui::TextDisabled("click: its lane in the timeline at step %d", s.step);
  ImGui::EndTooltip();
}

void FleetView::Open(const FleetModel& m, size_t i, UiState& ui) {
  const int step = m.report.per_step[step_index_].step;
  selected_ = static_cast<int>(i);
  ui.show_chip = ChipFocus{m.chips[i].device_id, step};
  ui.bring_to_front = ViewId::kTimeline;
  ui.selection_text = absl::StrCat("chip ", m.chips[i].device_id, " at step ", step, " (from Fleet)");
}

void FleetView::DrawSuspects(const FleetModel& m, UiState& ui) {
  ImGui::TextUnformatted("Suspects, ranked (outlined; red: flagged)");
  const auto& suspects = m.report.suspects;
  if (suspects.empty()) {  // the verdict says why, wrapped to the column
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("none: %s", absl::StrReplaceAll(m.report.verdict, {{"\xE2\x80\x94", "-"}}).c_str());
    ImGui::PopStyleColor();
  }
  for (size_t k = 0; k < suspects.size() && k < 40; ++k) {
    const analysis::FleetSuspect& s = suspects[k];
    ImGui::PushID(static_cast<int>(k));
    const std::string label = absl::StrFormat("#%d %s %s  %s%s", k + 1, s.kind, s.id, ScoreText(s),
                                              s.flagged ? "  FLAGGED" : "");
    ImGui::PushStyleColor(ImGuiCol_Text, Vec4(s.flagged ? kFlagged : Outlined(s, k, m.report.threshold) ? kRanked : kText));
    int chip = -1;
    if (s.kind == "chip") {
      int d = 0;
      if (absl::SimpleAtoi(s.id, &d)) chip = m.ChipIndex(d);
    }
    if (ImGui::Selectable(label.c_str(), chip >= 0 && chip == selected_) && chip >= 0) selected_ = chip;
    ImGui::PopStyleColor();
    DumpSuspectLine(ui, label, s, k, Outlined(s, k, m.report.threshold));
    if (ImGui::IsItemHovered() && !s.evidence.empty()) {
      ImGui::BeginTooltip();
      for (const std::string& e : s.evidence) ImGui::BulletText("%s", e.c_str());
      ImGui::EndTooltip();
    }
    ImGui::PopID();
  }
  if (selected_ >= 0 && static_cast<size_t>(selected_) < m.chips.size()) {
    const FleetChipInfo& c = m.chips[static_cast<size_t>(selected_)];
    ImGui::Separator();
    ImGui::Text("chip %d (host %d) at %s", c.device_id, c.host_id, c.coords.c_str());
    const int step = m.report.per_step[step_index_].step;
    const std::string open = absl::StrCat("Open chip ", c.device_id, "'s lane at step ", step);
    if (ImGui::Button(open.c_str())) Open(m, static_cast<size_t>(selected_), ui);
    if (ui.layout) {
      auto& item = ui.layout->Add("button", open, json{{"table", "devices"}, {"device_id", c.device_id}},
                                  ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x,
                                  ImGui::GetItemRectSize().y);
      item["role"] = "open_timeline";
      item["step"] = step;
    }
  }
}

void FleetView::DrawSuspectsWithoutMap(const FleetModel& m, UiState& ui) {
  const analysis::FleetReport& r = m.report;
  ImGui::TextUnformatted(absl::StrFormat("Suspects, the flagged first, ranked by how much slower than their peers (%s clock; flagged at "
                                         "%.0f%% and above):",
                                         r.clock, r.threshold * 100)
                             .c_str());
  for (size_t k = 0; k < r.suspects.size() && k < 40; ++k) {
    const analysis::FleetSuspect& s = r.suspects[k];
    const std::string who = r.imported && s.kind == "host" ? absl::StrCat("rank ", s.id) : absl::StrCat(s.kind, " ", s.id);
    const std::string label =
        absl::StrFormat("#%d %s  %s%s", k + 1, who,
                        s.stopped ? std::string("stopped")
                                  : absl::StrFormat("%.1f%% (%.2fx its peers)", s.score * 100, s.slowdown),
                        s.flagged ? "  FLAGGED" : "");
    ImGui::TextColored(Vec4(s.flagged ? kFlagged : kText), "%s", label.c_str());
    DumpSuspectLine(ui, label, s, k, /*outlined=*/false);  // no map to outline on
    ImGui::Indent();
    for (const std::string& e : s.evidence) ImGui::TextWrapped("%s", e.c_str());
    ImGui::Unindent();
  }
}

}  // namespace shardscope::app
