// The fleet heatmap of the HTML report (see heatmap.h).
#include "profiler/analysis/heatmap.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "profiler/analysis/format.h"

namespace shardscope::analysis {
namespace {

// "[1,0,3]" -> {1, 0, 3}; empty when it is not a list of 1 to 3 integers >= 0.
std::vector<int64_t> ParseCoords(absl::string_view text) {
  std::vector<int64_t> out;
  if (!absl::ConsumePrefix(&text, "[") || !absl::ConsumeSuffix(&text, "]")) return {};
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v) || v < 0 || v > 1'000'000) return {};
    out.push_back(v);
  }
  return out.size() <= 3 ? out : std::vector<int64_t>{};
}

// Row, column and panel of a chip.
using Place = std::tuple<int64_t, int64_t, int64_t>;

struct Block {
  double worst = 0;
  bool seen = false, flagged = false;
  int chips = 0, first = 0, last = 0;  // device ids
  std::string coords;                  // a single chip's
};

// Light grey at 0, towards red (t > 0) or blue (t < 0), |t| <= 1.
std::string Colour(double t) {
  t = std::clamp(t, -1.0, 1.0);
  const double base = 238;
  const double r = t >= 0 ? base + (214 - base) * t : base + (31 - base) * -t;
  const double g = t >= 0 ? base + (39 - base) * t : base + (119 - base) * -t;
  const double b = t >= 0 ? base + (40 - base) * t : base + (180 - base) * -t;
  return absl::StrFormat("#%02x%02x%02x", static_cast<int>(r), static_cast<int>(g), static_cast<int>(b));
}

std::string Signed(double ns) { return absl::StrCat(ns >= 0 ? "+" : "-", FormatNs(static_cast<int64_t>(std::fabs(ns)))); }

}  // namespace

std::string FleetHeatmapHtml(const FleetMap& m) {
  if (m.cells.size() < 2) return "";
  // Places from the coordinates; a grid by chip id when they are missing or uneven.
  std::vector<Place> place;
  size_t dims = 0;
  bool coords_ok = true;
  for (const FleetMap::Cell& c : m.cells) {
    const std::vector<int64_t> v = ParseCoords(c.coords);
    if (v.empty() || (dims != 0 && v.size() != dims)) {
      coords_ok = false;
      break;
    }
    dims = v.size();
    place.emplace_back(v.size() == 1 ? 0 : v[0], v.size() == 1 ? v[0] : v[1], v.size() == 3 ? v[2] : 0);
  }
  if (!coords_ok) {
    place.clear();
    dims = 2;
    const int64_t cols = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(m.cells.size()))));
    for (const FleetMap::Cell& c : m.cells) place.emplace_back(c.device_id / cols, c.device_id % cols, 0);
  }
  int64_t rows = 1, cols = 1, panels = 1;
  for (const auto& [r, c, p] : place) {
    rows = std::max(rows, r + 1);
    cols = std::max(cols, c + 1);
    panels = std::max(panels, p + 1);
  }
  // Blocks of f x f (x f across panels) chips until at most kMaxHeatCells are drawn.
  int64_t f = 1;
  auto cells_at = [&](int64_t k) {
    return ((rows + k - 1) / k) * ((cols + k - 1) / k) * (panels > 1 ? (panels + k - 1) / k : 1);
  };
  while (cells_at(f) > kMaxHeatCells) f *= 2;
  const int64_t fp = panels > 1 ? f : 1;
  std::map<Place, Block> blocks;
  for (size_t i = 0; i < m.cells.size(); ++i) {
    const FleetMap::Cell& c = m.cells[i];
    const auto& [r, col, p] = place[i];
    Block& b = blocks[{r / f, col / f, p / fp}];
    if (!b.seen || c.value_ns > b.worst) b.worst = c.value_ns;
    b.first = b.seen ? std::min(b.first, c.device_id) : c.device_id;
    b.last = b.seen ? std::max(b.last, c.device_id) : c.device_id;
    b.seen = true;
    b.flagged = b.flagged || c.flagged;
    b.coords = c.coords;
    ++b.chips;
  }
  double lo = 0, hi = 0;
  bool first = true;
  for (const auto& [at, b] : blocks) {
    lo = first ? b.worst : std::min(lo, b.worst);
    hi = first ? b.worst : std::max(hi, b.worst);
    first = false;
  }
  // Lateness diverges from 0 (on time); a span runs from the fastest chip to the slowest.
  const double scale = m.lateness ? std::max(std::fabs(lo), std::fabs(hi)) : hi - lo;
  auto tone = [&](double v) { return scale <= 0 ? 0.0 : m.lateness ? v / scale : (v - lo) / scale; };

  const int64_t brows = (rows + f - 1) / f, bcols = (cols + f - 1) / f, bpanels = (panels + fp - 1) / fp;
  const int cell = static_cast<int>(std::clamp<double>(
      std::floor(std::sqrt(960.0 * 900.0 / static_cast<double>(brows * bcols * bpanels))), 3, 24));
  const int panel_w = static_cast<int>(bcols) * cell + 14, panel_h = static_cast<int>(brows) * cell + 16;
  const int per_row = static_cast<int>(std::clamp<int64_t>(960 / panel_w, 1, bpanels));
  const int panel_rows = static_cast<int>((bpanels + per_row - 1) / per_row);
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-size=\"10\">", per_row * panel_w,
      panel_rows * panel_h + 4);
  for (int64_t p = 0; p < bpanels; ++p) {
    const int px = static_cast<int>(p % per_row) * panel_w, py = static_cast<int>(p / per_row) * panel_h;
    if (bpanels > 1)
      absl::StrAppendFormat(&svg, "<text x=\"%d\" y=\"%d\">z %s</text>", px, py + 10,
                            fp == 1 ? absl::StrCat(p) : absl::StrCat(p * fp, "-", std::min(panels, (p + 1) * fp) - 1));
  }
  for (const auto& [at, b] : blocks) {
    const auto& [r, c, p] = at;
    const int x = static_cast<int>(p % per_row) * panel_w + static_cast<int>(c) * cell;
    const int y = static_cast<int>(p / per_row) * panel_h + 14 + static_cast<int>(r) * cell;
    const std::string value = m.lateness ? Signed(b.worst) : FormatNs(static_cast<int64_t>(b.worst));
    const std::string who = b.chips == 1 ? absl::StrCat("chip ", b.first, " ", b.coords)
                                         : absl::StrCat(b.chips, " chips, ids ", b.first, "-", b.last, ", worst");
    absl::StrAppendFormat(&svg, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"%s><title>%s: %s%s</title></rect>",
                          x, y, std::max(1, cell - 1), std::max(1, cell - 1), Colour(tone(b.worst)),
                          b.flagged ? " stroke=\"#000\" stroke-width=\"2\"" : "", HtmlText(who), value,
                          b.flagged ? " (flagged)" : "");
  }
  svg += "</svg>\n";

  std::string out = absl::StrCat(
      "<h2>Fleet heatmap</h2>\n<p>Every chip at its ", coords_ok ? "topology coordinates" : "chip id (no coordinates stored)",
      dims == 3 ? " (rows x, columns y, one panel per z)" : dims == 2 ? " (rows: first coordinate, columns: second)" : "",
      ", coloured by ", HtmlText(m.metric), " (", HtmlText(m.clock), " clock): ");
  if (scale <= 0)
    absl::StrAppend(&out, "every chip the same (", m.lateness ? Signed(hi) : FormatNs(static_cast<int64_t>(hi)), ")");
  else if (m.lateness)
    absl::StrAppend(&out, "grey on time, red late (up to ", Signed(hi), ")",
                    lo < 0 ? absl::StrCat(", blue early (down to ", Signed(lo), ")") : "");
  else
    absl::StrAppend(&out, "grey the shortest (", FormatNs(static_cast<int64_t>(lo)), "), red the longest (",
                    FormatNs(static_cast<int64_t>(hi)), ")");
  absl::StrAppend(&out, ". Outlined: flagged by the fleet diagnosis (<code>shardscope fleet</code>).</p>\n");
  if (f > 1)
    absl::StrAppend(&out, "<p>Aggregated: ", m.cells.size(), " chips drawn as ", blocks.size(), " blocks of up to ", f,
                    "x", f, panels > 1 ? absl::StrCat("x", f) : "", " chips, each coloured by its worst chip and outlined"
                    " when any of its chips is flagged.</p>\n");
  out += svg;
  if (!m.flagged_others.empty())
    absl::StrAppend(&out, "<p>Also flagged: ", HtmlText(absl::StrJoin(m.flagged_others, ", ")), "</p>\n");
  return out;
}

}  // namespace shardscope::analysis
