// The run report as one self-contained HTML file: readable offline (no
// scripts, fonts or styles from the network), charts as inline SVG drawn from
// the report's summaries (never the raw trace), so it stays small.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/heatmap.h"
#include "profiler/analysis/run_report.h"

namespace shardscope::analysis {

namespace {

constexpr int kMaxChipsDrawn = 64;  // per-chip charts; the tables list every chip
constexpr size_t kMaxShardingRows = 200;
constexpr size_t kMaxChipRows = 256;  // per-chip tables; the heatmap shows every chip
// compute, collective, transfer, host wait, idle
constexpr const char* kPartColour[] = {"#4e79a7", "#e15759", "#f28e2b", "#b07aa1", "#dddddd"};
constexpr const char* kPartName[] = {"compute", "collective", "transfer", "host wait", "idle"};

std::string H(const std::string& s) { return HtmlText(s); }

// Text kept as lines (a <pre> block): each line made printable, then escaped.
std::string Pre(const std::string& text) {
  std::string out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    absl::StrAppend(&out, H(text.substr(at, nl - at)), nl < text.size() ? "\n" : "");
    at = nl + 1;
  }
  return out;
}

std::string Table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table><tr>";
  for (const std::string& c : head) absl::StrAppend(&out, "<th>", H(c), "</th>");
  out += "</tr>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const std::string& c : row) absl::StrAppend(&out, "<td>", H(c), "</td>");
    out += "</tr>";
  }
  return out + "</table>\n";
}

std::string Legend() {
  std::string out = "<p class=\"legend\">";
  for (int p = 0; p < 5; ++p)
    absl::StrAppendFormat(&out, "<span style=\"background:%s\">&nbsp;&nbsp;&nbsp;</span> %s &nbsp; ", kPartColour[p],
                          kPartName[p]);
  return out + "</p>\n";
}

// Step time per step: host (grey) and device (blue) bars side by side.
std::string StepChart(const RunReport& r) {
  if (r.series.empty()) return "<p>No steps recorded.</p>\n";
  // A simulated run's second series is its modeled step (it has no device clock).
  const bool modeled = r.run.simulated;
  const char* second = modeled ? "modeled" : "device";
  double most = 1;
  for (const StepPoint& p : r.series)
    most = std::max({most, static_cast<double>(p.host_ns), static_cast<double>(modeled ? p.modeled_ns : p.device_ns)});
  const int n = static_cast<int>(r.series.size());
  const double w = std::max(1.0, std::min(16.0, 900.0 / n));
  const int height = 160;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-size=\"11\">"
      "<text x=\"0\" y=\"12\">%s per step (host clock grey, %s clock blue)</text>",
      static_cast<int>(60 + w * n), height + 30, H(FormatNs(static_cast<int64_t>(most))) + " max", second);
  for (int i = 0; i < n; ++i) {
    const StepPoint& p = r.series[i];
    const double x = 60 + w * i;
    for (int k = 0; k < 2; ++k) {
      const int64_t v = k == 0 ? p.host_ns : modeled ? p.modeled_ns : p.device_ns;
      if (v < 0) continue;
      const double h = height * static_cast<double>(v) / most;
      absl::StrAppendFormat(&svg,
                            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                            "<title>step %d, %s clock: %s</title></rect>",
                            x + k * w / 2, 20 + height - h, std::max(0.5, w / 2 - 0.5), h,
                            k == 0 ? "#9a9a9a" : "#4e79a7", p.step, k == 0 ? "host" : second, H(FormatNs(v)));
    }
  }
  return svg + "</svg>\n";
}

// Each chip's median step as a stacked bar of its priority-attributed parts.
std::string PartsChart(const Verdict& v) {
  if (v.parts.empty() || v.span_ns <= 0) return "";
  const int rows = std::min<int>(kMaxChipsDrawn, static_cast<int>(v.parts.size()));
  const int bar = 14, width = 700, label = 70;
  std::string svg = absl::StrFormat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-size=\"11\">",
                                    label + width + 10, rows * (bar + 3) + 4);
  for (int i = 0; i < rows; ++i) {
    const StepParts& p = v.parts[i];
    const int64_t parts[5] = {p.compute_ns, p.collective_ns, p.transfer_ns, p.host_wait_ns, p.idle_ns};
    const double y = 2 + i * (bar + 3);
    absl::StrAppendFormat(&svg, "<text x=\"0\" y=\"%.0f\">chip %d</text>", y + 11, p.device_id);
    double x = label;
    for (int k = 0; k < 5; ++k) {
      const double w = width * static_cast<double>(parts[k]) / static_cast<double>(v.span_ns);
      if (w <= 0) continue;
      absl::StrAppendFormat(&svg,
                            "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                            "<title>chip %d %s: %s</title></rect>",
                            x, y, w, bar, kPartColour[k], p.device_id, kPartName[k], H(FormatNs(parts[k])));
      x += w;
    }
  }
  return svg + "</svg>\n";
}

// The median step drawn small, one lane per chip.
std::string Thumbnail(const Verdict& v) {
  if (v.thumbnail.empty()) return "";
  const int rows = std::min<int>(kMaxChipsDrawn, static_cast<int>(v.thumbnail.size()));
  const int lane = 10, label = 70;
  std::string svg = absl::StrFormat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-size=\"10\">",
                                    label + kThumbColumns + 10, rows * (lane + 2) + 4);
  for (int i = 0; i < rows; ++i) {
    const ThumbLane& t = v.thumbnail[i];
    const int y = 2 + i * (lane + 2);
    absl::StrAppendFormat(&svg, "<text x=\"0\" y=\"%d\">chip %d</text>", y + 9, t.device_id);
    int x = label;
    for (const auto& [columns, part] : t.runs) {
      if (part != 4)
        absl::StrAppendFormat(&svg, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>", x, y, columns,
                              lane, kPartColour[std::clamp(part, 0, 4)]);
      x += columns;
    }
  }
  return svg + "</svg>\n";
}

std::string Where(const std::string& file, int line) { return file.empty() ? "-" : absl::StrCat(file, ":", line); }

}  // namespace

std::string RenderHtml(const RunReport& r, const std::string& metrics_text) {
  const RunHeader& h = r.run;
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>shardscope report</title>\n<style>"
      "body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:.5em 0}"
      "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:13px;overflow-wrap:anywhere}th{background:#eee}"
      ".verdict{font-size:1.1em;padding:.5em;background:#f4f4e8;border-left:4px solid #b90}"
      ".legend span{display:inline-block}pre{background:#f6f6f6;padding:.5em;font-size:12px;overflow-x:auto}"
      "</style></head><body>\n";
  absl::StrAppend(&out, "<h1>shardscope report</h1>\n<p>", H(h.db_path), " — run ", h.run_id, ": <b>", H(h.sample),
                  "</b>, mesh ", H(h.mesh), " (", H(h.mesh_axes), "), ", h.num_devices, " chips on ", h.num_hosts,
                  h.num_hosts == 1 ? " host" : " hosts", ", sharding ", H(h.sharding.empty() ? "-" : h.sharding),
                  ", profile ", H(h.profile), ", clocks ", H(h.clock_kinds), h.imported ? ", <b>imported</b>" : "",
                  h.simulated ? ", <b>simulated</b>" : "", "<br>", H(h.status_detail.empty() ? h.status : h.status_detail),
                  "</p>\n");
  if (!h.capture_note.empty()) absl::StrAppend(&out, "<p><b>Capture:</b> ", H(h.capture_note), "</p>\n");
  if (h.calibration) absl::StrAppend(&out, "<p><b>Calibrated:</b> ", H(DescribeCalibration(*h.calibration)), "</p>\n");
  if (!h.import_losses.empty())
    absl::StrAppend(&out, "<p><b>Import lost or could not trust:</b> ", H(absl::StrJoin(h.import_losses, "; ")),
                    "</p>\n");
  if (!h.uneven_steps.empty()) absl::StrAppend(&out, "<p><b>Ranks' steps differ:</b> ", H(h.uneven_steps), "</p>\n");
  if (!r.unreadable.empty()) {
    absl::StrAppend(&out, "<p><b>Not read</b> (part of the file is damaged; <code>shardscope check</code> says what):</p><ul>");
    for (const std::string& u : r.unreadable) absl::StrAppend(&out, "<li>", H(u), "</li>");
    out += "</ul>\n";
  }

  absl::StrAppend(&out, "<h2>Verdict</h2>\n<p class=\"verdict\">", H(r.verdict.line), "</p>\n");
  std::vector<std::vector<std::string>> ev;
  for (const Evidence& e : r.verdict.evidence) {
    const bool measurable = e.Measurable();
    ev.push_back({e.passed ? "passed" : e.flagged_not_bound ? "not the bound" : measurable ? "below" : "not measurable",
                  e.bound, e.what,
                  measurable ? absl::StrFormat("%.1f%%", e.value) : "-", absl::StrFormat(">= %.0f%%", e.threshold),
                  e.detail});
  }
  out += Table({"", "bound", "measured", "value", "threshold", "numbers"}, ev);

  absl::StrAppend(&out, "<h2>Steps</h2>\n<p>", r.steps.count, " steps; median ",
                  r.steps.simulated ? absl::StrCat(H(FormatNs(r.steps.modeled_median_ns)),
                                                   " (modeled clock); the host's wall time, the simulator's own: median ")
                                    : "",
                  H(FormatNs(r.steps.median_wall_ns)), ", p90 ", H(FormatNs(r.steps.p90_wall_ns)), " (host clock",
                  r.steps.dispatched_ahead ? ": its dispatch only; the devices ran each step after it, as "
                                             "asynchronous dispatch does"
                                           : "",
                  ")</p>\n", StepChart(r));

  if (!r.verdict.parts.empty()) {
    absl::StrAppend(&out, "<h2>Step breakdown per chip</h2>\n<p>Median step ", r.verdict.step, ", ",
                    H(FormatNs(r.verdict.span_ns)), " on the ", r.verdict.clock,
                    " clock, attributed by priority (compute over collective over transfer over host "
                    "wait over idle), so each bar is the whole step.</p>\n",
                    Legend(), PartsChart(r.verdict),
                    r.verdict.thumbnail.empty() ? "" : "<h3>The median step, drawn small</h3>\n", Thumbnail(r.verdict));
    if (static_cast<int>(r.verdict.parts.size()) > kMaxChipsDrawn)
      absl::StrAppend(&out, "<p>The first ", kMaxChipsDrawn, " of ", r.verdict.parts.size(), " chips are drawn.</p>\n");
    std::vector<std::vector<std::string>> rows;
    const bool programs = r.devices.programs_only;  // --trace steps: collectives inside the programs
    for (size_t i = 0; i < r.verdict.parts.size() && i < kMaxChipRows; ++i) {
      const StepParts& p = r.verdict.parts[i];
      rows.push_back({absl::StrCat("chip ", p.device_id), FormatNs(p.compute_ns),
                      programs ? "?" : FormatNs(p.collective_ns), programs ? "?" : FormatNs(p.transfer_ns),
                      FormatNs(p.host_wait_ns), FormatNs(p.idle_ns)});
    }
    out += Table({"chip", programs ? "programs" : "compute", "collective", "transfer", "host wait", "idle"},
                 rows);
    if (r.verdict.parts.size() > kMaxChipRows)
      absl::StrAppend(&out, "<p>The first ", kMaxChipRows, " of ", r.verdict.parts.size(),
                      " chips are listed (`shardscope report --format json` has them all).</p>\n");
  } else {
    absl::StrAppend(&out, "<h2>Step breakdown per chip</h2><p>", H(r.devices.empty_reason), "</p>\n");
  }
  if (r.verdict.late.collectives > 0 && r.verdict.late.chips.empty()) {
    absl::StrAppend(&out, "<h2>Stragglers</h2>\n<p>None: at each of ", r.verdict.late.collectives,
                    " collectives (device clock) the chips arrived together.</p>\n");
  } else if (r.verdict.late.collectives > 0) {
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < r.verdict.late.chips.size() && i < kMaxChipRows; ++i) {
      const auto& c = r.verdict.late.chips[i];
      rows.push_back({absl::StrCat("chip ", c.device_id), absl::StrCat(c.last), FormatNs(c.late_ns)});
    }
    absl::StrAppend(&out, "<h2>Stragglers</h2>\n<p>Who arrived last at each of ", r.verdict.late.collectives,
                    " collectives (device clock), and by how much against the others' median arrival.</p>\n",
                    Table({"chip", "last at", "late in all"}, rows));
    if (r.verdict.late.chips.size() > kMaxChipRows)
      absl::StrAppend(&out, "<p>The ", kMaxChipRows, " chips most often last of ", r.verdict.late.chips.size(),
                      " are listed.</p>\n");
  }
  out += FleetHeatmapHtml(r.verdict.fleet_map);

  if (!r.kernels.top.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const KernelRow& k : r.kernels.top)
      rows.push_back({k.name, k.shape, k.roofline, absl::StrCat(k.count), FormatNs(k.total_ns), FormatNs(k.modeled_ns),
                      k.flops > 0 ? absl::StrFormat("%.1f%%", 100 * k.fraction_of_peak) : "-",
                      Where(k.source_file, k.source_line)});
    absl::StrAppend(&out, "<h2>Top ops</h2>\n",
                    Table({"op", "shape", "roofline", "count", "total (device)", "modeled", "of peak", "source"}, rows));
  }

  for (const NameTimes& n : r.kernels.by_name) {
    std::vector<std::vector<std::string>> rows;
    for (const NameTime& t : n.top)
      rows.push_back({t.name, t.kind, absl::StrCat(t.count), FormatNs(t.self_ns), FormatNs(t.total_ns)});
    absl::StrAppend(
        &out, "<h2>Top names by self time (", H(n.clock), " clock)</h2>\n<p>From the timeline: ", n.slices,
        " slices on ", n.tracks, " lanes",
        n.tracks_in_run > n.tracks ? absl::StrCat(" of ", n.tracks_in_run, " (an even sample)") : "",
        H(AnnotationLanesLeftOut(n)), "; the run has no per-op statistics.</p>\n",
        Table({"name", "kind", "count", "self", "total"}, rows));
  }

  out += "<h2>Compilations</h2>\n";
  absl::StrAppend(&out, "<p>", r.compiles.count, " requests, ", r.compiles.misses, " misses, ",
                  r.compiles.recompilations, " recompilations, ", H(FormatNs(r.compiles.total_ns)), " (host clock)</p>\n");
  if (!r.compiles.miss_list.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const CompileMiss& m : r.compiles.miss_list)
      rows.push_back({absl::StrCat(m.step), Humanize(m.cause_kind), m.cause_detail, Where(m.source_file, m.source_line),
                      FormatNs(m.duration_ns)});
    out += Table({"step", "cause", "detail", "source", "time (host)"}, rows);
  }
  if (!r.compiles.suggestions.empty()) {
    out += "<ul>";
    for (const CompileSuggestion& sg : r.compiles.suggestions)
      absl::StrAppend(&out, "<li>suggestion for <code>", H(sg.call_site), "</code>: ", H(sg.text), "</li>");
    out += "</ul>\n";
  }

  if (!r.memory.top.empty())
    absl::StrAppend(&out, "<h2>Memory</h2>\n<p>", H(MemoryHeading(r.memory)), ".</p>\n",
                    Table(MemoryHead(), MemoryRows(r.memory)));
  if (!r.sharding.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < r.sharding.size() && i < kMaxShardingRows; ++i) {
      const ShardingRow& s = r.sharding[i];
      rows.push_back({s.name, s.dtype + s.shape, s.sharding, s.source, FormatBytes(s.max_bytes)});
    }
    absl::StrAppend(&out, "<h2>Sharding</h2>\n", Table({"tensor", "type", "sharding", "source", "bytes per chip"}, rows));
    if (r.sharding.size() > kMaxShardingRows)
      absl::StrAppend(&out, "<p>", r.sharding.size() - kMaxShardingRows, " more tensors: `shardscope sharding`.</p>\n");
  }
  if (!metrics_text.empty()) absl::StrAppend(&out, "<h2>Metrics</h2>\n<pre>", Pre(metrics_text), "</pre>\n");
  return out + "</body></html>\n";
}

}  // namespace shardscope::analysis
