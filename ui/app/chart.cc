// Charts on ImDrawList; see chart.h.
#include "ui/app/chart.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"

namespace shardscope::app {

std::string FormatChartValue(double v, ChartUnit unit) {
  if (std::isnan(v)) return "-";
  switch (unit) {
    case ChartUnit::kNs: return FormatDuration(v);
    case ChartUnit::kBytes: return FormatBytes(static_cast<int64_t>(v));
    case ChartUnit::kNumber:
      if (std::fabs(v) >= 1e6 || (v != 0 && std::fabs(v) < 1e-3)) return absl::StrFormat("%.3g", v);
      if (v == std::floor(v)) return absl::StrFormat("%.0f", v);
      return absl::StrFormat("%.4g", v);
  }
  return "";
}

std::optional<size_t> DrawChart(UiState& ui, const char* id, const ChartSpec& spec,
                                const std::vector<ChartSeries>& series, float height, const nlohmann::json& ref) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(200.0f, ImGui::GetContentRegionAvail().x);
  ImGui::InvisibleButton(id, ImVec2(width, height));
  const bool hovered = ImGui::IsItemHovered() && !ui.headless;
  // Off screen (scrolled away in its view): listed in the dump, not drawn.
  const bool visible = ImGui::IsItemVisible();
  const float left = origin.x + 78, right = origin.x + width - 12, top = origin.y + 26, bottom = origin.y + height - 18;

  // Ranges over every value (and the limit line).
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const ChartSeries& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (std::isnan(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y_min.size() == s.y.size() && !std::isnan(s.y_min[i]) ? s.y_min[i] : s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  }
  // A limit far above every value (a 16 GiB budget over a 17 MiB plan) would
  // flatten the values onto the floor: the range stays on them and the chart
  // says where the line is instead.
  const bool limit_on_scale = spec.limit && !(y1 > 0 && *spec.limit > 4 * y1);
  if (limit_on_scale) {
    y1 = std::max(y1, *spec.limit);
    y0 = std::min(y0, *spec.limit);
  }
  dl->AddText(ImVec2(origin.x + 4, origin.y + 1), kText.Packed(), spec.title.c_str());
  dl->AddRectFilled(ImVec2(left, top), ImVec2(right, bottom), kLaneEven.Packed());
  if (ui.layout) {
    nlohmann::json& item = ui.layout->Add("chart", spec.title, ref, left, top, right - left, bottom - top);
    item["x_label"] = spec.x_label;
    nlohmann::json all = nlohmann::json::array();
    for (const ChartSeries& s : series) {
      nlohmann::json points = nlohmann::json::array();
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!std::isnan(s.y[i])) points.push_back({s.x[i], s.y[i]});
      }
      all.push_back({{"name", s.name}, {"points", std::move(points)}, {"bars", s.bars}});
    }
    item["series"] = std::move(all);
    if (spec.limit) {
      item["limit"] = *spec.limit;
      item["limit_on_scale"] = limit_on_scale;
    }
    if (spec.mark_x) item["mark_x"] = *spec.mark_x;
  }
  if (!visible) return std::nullopt;
  if (!(x1 >= x0)) {
    dl->AddText(ImVec2(left + 8, top + 6), kDimText.Packed(), "no values");
    return std::nullopt;
  }
  if (spec.from_zero) y0 = std::min(y0, 0.0);
  if (y1 <= y0) y1 = y0 + (y0 == 0 ? 1 : std::fabs(y0) * 0.1);
  y1 += (y1 - y0) * 0.06;  // headroom
  bool any_bars = false;
  for (const ChartSeries& s : series) any_bars |= s.bars;
  const double pad = any_bars ? 0.5 : 0;  // bars are centred on their x
  const double xa = x0 - pad, xb = (x1 > x0 ? x1 : x0 + 1) + pad;
  auto X = [&](double v) { return float(left + (v - xa) / (xb - xa) * (right - left)); };
  auto Y = [&](double v) { return float(bottom - (v - y0) / (y1 - y0) * (bottom - top)); };

  // Horizontal grid: 4 lines with values.
  for (int g = 0; g <= 4; ++g) {
    const double v = y0 + (y1 - y0) * g / 4;
    const float y = Y(v);
    dl->AddLine(ImVec2(left, y), ImVec2(right, y), kLaneOdd.Packed());
    const std::string label = FormatChartValue(v, spec.unit);
    dl->AddText(ImVec2(left - 6 - ImGui::CalcTextSize(label.c_str()).x, y - 7), kDimText.Packed(), label.c_str());
  }
  {
    const std::string a = FormatChartValue(x0, spec.x_unit), b = FormatChartValue(x1, spec.x_unit);
    dl->AddText(ImVec2(X(x0), bottom + 2), kDimText.Packed(), a.c_str());
    dl->AddText(ImVec2(X(x1) - ImGui::CalcTextSize(b.c_str()).x, bottom + 2), kDimText.Packed(), b.c_str());
    dl->AddText(ImVec2((left + right) / 2 - ImGui::CalcTextSize(spec.x_label.c_str()).x / 2, bottom + 2),
                kDimText.Packed(), spec.x_label.c_str());
  }
  dl->PushClipRect(ImVec2(left, top), ImVec2(right + 1, bottom + 1), true);
  const float bar_w = std::max(1.0f, float((right - left) / (xb - xa)) * 0.8f / float(std::max<size_t>(1, series.size())));
  for (size_t si = 0; si < series.size(); ++si) {
    const ChartSeries& s = series[si];
    const uint32_t color = s.color.Packed();
    const size_t n = std::min(s.x.size(), s.y.size());
    if (s.bars) {
      // Bars narrower than a few pixels: one per pixel column, its tallest,
      // so the cost follows the chart's width, not the steps.
      if (bar_w >= 3 || n < 2) {
        const float shift = (float(si) - float(series.size() - 1) / 2) * bar_w;
        for (size_t i = 0; i < n; ++i) {
          if (std::isnan(s.y[i])) continue;
          const float cx = X(s.x[i]) + shift;
          dl->AddRectFilled(ImVec2(cx - bar_w / 2, Y(s.y[i])), ImVec2(cx + bar_w / 2, Y(std::max(0.0, y0))), color);
        }
      } else {
        int column = INT32_MIN;
        double tallest = 0;
        auto flush = [&] {
          if (column != INT32_MIN) {
            dl->AddRectFilled(ImVec2(float(column), Y(tallest)), ImVec2(float(column) + 1, Y(std::max(0.0, y0))), color);
          }
        };
        for (size_t i = 0; i < n; ++i) {
          if (std::isnan(s.y[i])) continue;
          const int c = int(std::floor(X(s.x[i])));
          if (c != column) {
            flush();
            column = c;
            tallest = s.y[i];
          } else {
            tallest = std::max(tallest, s.y[i]);
          }
        }
        flush();
      }
      continue;
    }
    // Band (min..max), then the line; a NaN breaks the line.
    if (s.y_min.size() == s.y.size()) {
      const uint32_t band = s.color.Scaled(0.45f).Packed(160);
      for (size_t i = 0; i + 1 < n; ++i) {
        if (std::isnan(s.y[i]) || std::isnan(s.y_min[i])) continue;
        dl->AddRectFilled(ImVec2(X(s.x[i]), Y(s.y[i])), ImVec2(std::max(X(s.x[i + 1]), X(s.x[i]) + 1), Y(s.y_min[i])),
                          band);
      }
    }
    // One polyline per unbroken run; points closer than a pixel are folded
    // into their column's extremes (a spike narrower than a pixel still shows).
    std::vector<ImVec2> run;
    // Many points: one-pixel lines, which ImGui draws with a quarter of the
    // vertices of thicker anti-aliased ones.
    const float thickness = n > 64 ? 1.0f : 1.5f;
    auto draw_run = [&] {
      if (run.size() >= 2) dl->AddPolyline(run.data(), int(run.size()), color, ImDrawFlags_None, thickness);
      if (n <= 64) {
        for (const ImVec2& p : run) dl->AddCircleFilled(p, 2.5f, color, 8);
      }
      run.clear();
    };
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(s.y[i])) {
        draw_run();
        continue;
      }
      const ImVec2 p(X(s.x[i]), Y(s.y[i]));
      if (run.size() >= 2 && p.x - run[run.size() - 2].x < 1 && run.back().x - run[run.size() - 2].x < 1) {
        // Same column as the last two: keep the column's top and bottom.
        ImVec2& a = run[run.size() - 2];
        ImVec2& b = run.back();
        if (p.y < std::min(a.y, b.y)) (a.y <= b.y ? a : b) = ImVec2(a.x, p.y);
        else if (p.y > std::max(a.y, b.y)) (a.y >= b.y ? a : b) = ImVec2(b.x, p.y);
        continue;
      }
      run.push_back(p);
    }
    draw_run();
  }
  if (spec.limit && !limit_on_scale) {
    const std::string above = absl::StrFormat("%s: above the chart, %.0fx its top", spec.limit_label, *spec.limit / y1);
    dl->AddText(ImVec2(right - 6 - ImGui::CalcTextSize(above.c_str()).x, top + 2), kWarning.Packed(), above.c_str());
  } else if (spec.limit) {
    const float y = Y(*spec.limit);
    dl->AddLine(ImVec2(left, y), ImVec2(right, y), kWarning.Packed(), 1.5f);
    dl->AddText(ImVec2(right - 6 - ImGui::CalcTextSize(spec.limit_label.c_str()).x, y - 16 < top ? y + 2 : y - 16),
                kWarning.Packed(),
                spec.limit_label.c_str());
  }
  if (spec.mark_x) {
    const float x = X(*spec.mark_x);
    dl->AddLine(ImVec2(x, top), ImVec2(x, bottom), kClockLabel.Packed(), 1.0f);
    dl->AddText(ImVec2(x + 4, top + 2), kClockLabel.Packed(), spec.mark_label.c_str());
  }
  dl->PopClipRect();

  // Legend, top right.
  float lx = right;
  for (size_t si = series.size(); si-- > 0;) {
    const float w = ImGui::CalcTextSize(series[si].name.c_str()).x;
    lx -= w + 22;
    dl->AddRectFilled(ImVec2(lx, origin.y + 5), ImVec2(lx + 10, origin.y + 15), series[si].color.Packed());
    dl->AddText(ImVec2(lx + 14, origin.y + 1), kDimText.Packed(), series[si].name.c_str());
  }

  if (!hovered || series.empty() || series[0].x.empty()) return std::nullopt;
  // The nearest x of the first series, and every series' value there.
  const double mx = xa + (ImGui::GetIO().MousePos.x - left) / (right - left) * (xb - xa);
  const auto& xs = series[0].x;
  size_t best = 0;
  for (size_t i = 1; i < xs.size(); ++i) {
    if (std::fabs(xs[i] - mx) < std::fabs(xs[best] - mx)) best = i;
  }
  const float hx = X(xs[best]);
  dl->AddLine(ImVec2(hx, top), ImVec2(hx, bottom), kSelection.Packed(90));
  ImGui::BeginTooltip();
  ImGui::Text("%s %s", spec.x_label.c_str(), FormatChartValue(xs[best], spec.x_unit).c_str());
  if (spec.hover_lines) spec.hover_lines(best);
  nlohmann::json* hover = nullptr;
  if (ui.layout) {
    hover = &ui.layout->Add("hover", spec.title, ref, hx, top, 0, bottom - top);
    (*hover)["at"] = xs[best];
    (*hover)["values"] = nlohmann::json::object();
  }
  for (const ChartSeries& s : series) {
    // The value at the same x in each series (series may differ in length).
    double v = std::numeric_limits<double>::quiet_NaN();
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (s.x[i] == xs[best]) v = s.y[i];
    }
    if (hover && !std::isnan(v)) (*hover)["values"][s.name] = v;
    if (s.y_min.size() == s.y.size() && !std::isnan(v)) {
      double lo = std::numeric_limits<double>::quiet_NaN();
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (s.x[i] == xs[best]) lo = s.y_min[i];
      }
      ImGui::Text("%s: %s (min %s)", s.name.c_str(), FormatChartValue(v, spec.unit).c_str(),
                  FormatChartValue(lo, spec.unit).c_str());
    } else {
      ImGui::Text("%s: %s", s.name.c_str(), FormatChartValue(v, spec.unit).c_str());
    }
  }
  ImGui::EndTooltip();
  return best;
}

}  // namespace shardscope::app
