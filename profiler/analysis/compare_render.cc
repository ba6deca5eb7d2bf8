// Renderers of a run comparison (compare.h): text, Markdown, JSON, HTML.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "profiler/analysis/compare.h"
#include "profiler/analysis/format.h"

namespace shardscope::analysis {

namespace {

constexpr size_t kTopOps = 20;  // ops listed by the text, Markdown and HTML forms (JSON has all)

std::string Ns(double ns) { return FormatNs(static_cast<int64_t>(std::llround(ns))); }
std::string SignedNs(double ns) { return absl::StrCat(ns < 0 ? "-" : "+", Ns(std::abs(ns))); }
std::string Rel(double diff, double base) {
  return base > 0 ? absl::StrFormat("%+.1f%%", 100 * diff / base) : std::string("-");
}

// A run that did not finish is compared on the steps it stored: said beside its name.
std::string StatusWords(const std::string& status) {
  if (status.empty() || status == "finished") return "";
  if (status == "running") return ", still running";
  if (status == "hang detected") return ", ended by the hang detector";
  return absl::StrCat(", ", Printable(status));
}

std::string RunLine(const RunHeader& h) {
  // An imported trace has no mesh or chip profile: only what it has is said.
  return absl::StrCat(Printable(h.db_path), " run ", h.run_id, " (", Printable(h.sample),
                      h.mesh.empty() ? "" : absl::StrCat(", mesh ", Printable(h.mesh)),
                      h.sharding.empty() ? "" : absl::StrCat(", ", Printable(h.sharding)),
                      h.profile.empty() || h.profile == "none" ? "" : absl::StrCat(", profile ", Printable(h.profile)),
                      h.imported ? ", imported" : "",
                      h.simulated ? ", simulated" : "",
                      // Its timeline is not the machine's own: a difference may be the faults'.
                      h.faults_injected ? ", faults injected (runs.config_json)" : "", StatusWords(h.status), ")");
}

std::string SpreadCell(const Spread& s) {
  if (s.n == 0) return "-";
  return absl::StrCat(Ns(s.median), " (", Ns(s.p10), "-", Ns(s.p90), ", ", Plural(s.n, "step", "steps"), ")");
}

std::string NoiseCell(const Delta& d) {
  if (d.change == Change::kAdded || d.change == Change::kRemoved) return "-";
  return absl::StrCat("±", Ns(d.threshold), d.noise_measured ? "" : " (fixed 10%)",
                      d.by_ranks ? absl::StrFormat(" (ranks p=%.2g)", d.rank_p) : "");
}

std::vector<std::vector<std::string>> StepRows(const RunComparison& c) {
  std::vector<std::vector<std::string>> rows = {{"clock", "A median (p10-p90)", "B median (p10-p90)", "change", "noise", "verdict"}};
  // A simulated side's host clock times the simulator, not the program: its
  // host row is not called faster or slower (a simulated B read "-94.7% faster").
  const bool simulated_side = c.a.simulated || c.b.simulated;
  for (const StepClockDelta& s : c.steps) {
    const bool both = s.a.n && s.b.n;
    const bool simulator_time = s.clock == "host" && simulated_side;
    rows.push_back({s.clock, SpreadCell(s.a), SpreadCell(s.b), both ? Rel(s.delta.diff, s.a.median) : "-",
                    both && !simulator_time ? NoiseCell(s.delta) : "-",
                    !both            ? "not on both"
                    : simulator_time ? absl::StrCat("not compared: ", c.a.simulated ? "A" : "B",
                                                    "'s host clock times the simulator")
                                     : ChangeName(s.delta.change)});
  }
  return rows;
}

std::string CompileCell(const CompileStats& s, const RunHeader& h) {
  // Another tool's trace has no lazy frontend: none recorded is not none happened.
  if (h.imported && s.count == 0) return "not recorded (an imported trace has no compilations)";
  return absl::StrCat(s.count, s.count == 1 ? " request, " : " requests, ", s.misses, s.misses == 1 ? " miss, " : " misses, ", s.recompilations, s.recompilations == 1 ? " recompilation, " : " recompilations, ",
                      FormatNs(s.total_ns));
}

std::vector<std::vector<std::string>> OpRows(const RunComparison& c, size_t limit) {
  std::vector<std::vector<std::string>> rows = {
      {"change", "op", "shape", "A", "B", "difference", "noise", "on the average step", "source"}};
  for (size_t i = 0; i < c.ops.size() && i < limit; ++i) {
    const OpDelta& o = c.ops[i];
    if (o.delta.change == Change::kUnchanged) break;
    rows.push_back({ChangeName(o.delta.change), ShortName(o.name), o.shape.empty() ? "-" : ShortName(o.shape),
                    o.a.n ? Ns(o.a.median) : "-", o.b.n ? Ns(o.b.median) : "-",
                    absl::StrCat(SignedNs(o.delta.diff), o.a.n && o.b.n ? absl::StrCat(" (", Rel(o.delta.diff, o.a.median), ")") : ""),
                    NoiseCell(o.delta), SignedNs(o.step_impact_ns), o.source.empty() ? "-" : o.source});
  }
  return rows;
}

std::vector<std::vector<std::string>> ShardingRows(const RunComparison& c) {
  std::vector<std::vector<std::string>> rows = {{"tensor", "A", "B"}};
  for (const ShardingChange& s : c.sharding) rows.push_back({s.tensor, s.a.empty() ? "-" : s.a, s.b.empty() ? "-" : s.b});
  return rows;
}

// The chips whose change stands apart, a row each, and how the rest moved.
constexpr size_t kTopChips = 16;
std::vector<std::vector<std::string>> ChipRows(const RunComparison& c) {
  std::vector<std::vector<std::string>> rows = {
      {"chip", "compute A", "compute B", "change", "collectives+transfers A", "B", "change"}};
  std::vector<const ChipDelta*> apart;
  for (const ChipDelta& d : c.chips)
    if (d.compute_apart || d.comm_apart) apart.push_back(&d);
  std::stable_sort(apart.begin(), apart.end(), [](const ChipDelta* x, const ChipDelta* y) {
    return std::max(std::abs(x->ComputeRelative()), std::abs(x->CommRelative())) >
           std::max(std::abs(y->ComputeRelative()), std::abs(y->CommRelative()));
  });
  if (apart.size() > kTopChips) apart.resize(kTopChips);
  auto cell = [](const Spread& s) { return s.n ? Ns(s.median) : std::string("-"); };
  auto change = [](const Spread& a, const Spread& b, const Delta& d, bool is_apart) {
    if (!a.n || !b.n) return std::string("-");
    return absl::StrCat(Rel(d.diff, a.median), " ", ChangeName(d.change), is_apart ? " *" : "");
  };
  for (const ChipDelta* d : apart)
    rows.push_back({absl::StrCat(d->chip), cell(d->compute_a), cell(d->compute_b),
                    change(d->compute_a, d->compute_b, d->compute, d->compute_apart), cell(d->comm_a), cell(d->comm_b),
                    change(d->comm_a, d->comm_b, d->comm, d->comm_apart)});
  return rows;
}

// "no chip's change stands apart: compute median +1.2% (-2.0% to +4.1%), ..."
// or how the chips not listed moved.
std::string ChipsLine(const RunComparison& c) {
  size_t apart = 0;
  std::vector<double> compute, comm;
  for (const ChipDelta& d : c.chips) {
    if (d.compute_apart || d.comm_apart) {
      ++apart;
      continue;
    }
    if (d.compute_a.n && d.compute_b.n) compute.push_back(d.ComputeRelative());
    if (d.comm_a.n && d.comm_b.n) comm.push_back(d.CommRelative());
  }
  auto range = [](std::vector<double> v) {
    if (v.empty()) return std::string("not on both sides");
    std::sort(v.begin(), v.end());
    return absl::StrFormat("median %+.1f%% (%+.1f%% to %+.1f%%)", 100 * v[v.size() / 2], 100 * v.front(), 100 * v.back());
  };
  const std::string moves =
      absl::StrCat("compute ", range(compute), ", collectives and transfers ", range(comm));
  if (apart == 0)
    return absl::StrCat(Plural(static_cast<int64_t>(c.chips.size()), "chip", "chips"),
                        " in both runs; no chip's change stands apart from the others': ", moves);
  return absl::StrCat(apart, " of ", c.chips.size(), " chips stand apart (* below: changed beyond their own noise and"
                      " at least 10 points and 3 robust deviations from the chips' median change); the other ",
                      c.chips.size() - apart, ": ", moves);
}

std::string CountsLine(const RunComparison& c) {
  return absl::StrCat(c.counts[static_cast<int>(Change::kSlower)], " slower, ", c.counts[static_cast<int>(Change::kFaster)],
                      " faster, ", c.counts[static_cast<int>(Change::kAdded)], " added, ",
                      c.counts[static_cast<int>(Change::kRemoved)], " removed, ",
                      c.counts[static_cast<int>(Change::kUnchanged)], " unchanged");
}

size_t Changed(const RunComparison& c) {
  return c.ops.size() - static_cast<size_t>(c.counts[static_cast<int>(Change::kUnchanged)]);
}

std::string PeakLine(const RunComparison& c) {
  if (c.peak_a == 0 && c.peak_b == 0) return "no memory plans recorded";
  return absl::StrCat("A ", c.peak_a ? FormatBytes(c.peak_a) : "-", ", B ", c.peak_b ? FormatBytes(c.peak_b) : "-",
                      c.peak_a && c.peak_b ? absl::StrCat(" (", Rel(static_cast<double>(c.peak_b - c.peak_a),
                                                                       static_cast<double>(c.peak_a)), ")")
                                           : "");
}

std::string Md(const std::string& s) { return absl::StrReplaceAll(Printable(s), {{"|", "\\|"}}); }

std::string MdTable(const std::vector<std::vector<std::string>>& rows) {
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<std::string> cells;
    for (const std::string& c : rows[r]) cells.push_back(Md(c));
    absl::StrAppend(&out, "| ", absl::StrJoin(cells, " | "), " |\n");
    if (r == 0) absl::StrAppend(&out, "|", absl::StrJoin(std::vector<std::string>(rows[r].size(), "---"), "|"), "|\n");
  }
  return out;
}

std::string Html(const std::string& s) { return HtmlText(s); }

std::string HtmlTable(const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table>";
  for (size_t r = 0; r < rows.size(); ++r) {
    out += "<tr>";
    for (const std::string& c : rows[r]) absl::StrAppend(&out, r == 0 ? "<th>" : "<td>", Html(c), r == 0 ? "</th>" : "</td>");
    out += "</tr>";
  }
  return out + "</table>\n";
}

// Step time per clock as paired horizontal bars (A above B), inline SVG.
std::string StepBarsSvg(const RunComparison& c) {
  double most = 0;
  for (const StepClockDelta& s : c.steps) most = std::max({most, s.a.median, s.b.median});
  if (most <= 0) return "";
  const int row = 44, width = 560, label = 80;
  std::string svg = absl::StrFormat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">",
                                    width + label + 90, row * static_cast<int>(c.steps.size()) + 4);
  int y = 2;
  for (const StepClockDelta& s : c.steps) {
    absl::StrAppendFormat(&svg, "<text x=\"0\" y=\"%d\" font-size=\"12\">%s</text>", y + 24, Html(s.clock));
    int k = 0;
    for (const Spread* sp : {&s.a, &s.b}) {
      const int w = static_cast<int>(width * sp->median / most);
      absl::StrAppendFormat(&svg,
                            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"16\" fill=\"%s\"/>"
                            "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s %s</text>",
                            label, y + k * 20, std::max(w, sp->n ? 1 : 0), k == 0 ? "#7a9cc6" : "#d08c60",
                            label + w + 4, y + k * 20 + 12, k == 0 ? "A" : "B", sp->n ? Ns(sp->median) : "-");
      ++k;
    }
    y += row;
  }
  return svg + "</svg>\n";
}

nlohmann::json SpreadJson(const Spread& s) {
  return {{"n", s.n}, {"median_ns", s.median}, {"p10_ns", s.p10}, {"p90_ns", s.p90}, {"mad_ns", s.mad}};
}

nlohmann::json DeltaJson(const Delta& d) {
  return {{"diff_ns", d.diff}, {"threshold_ns", d.threshold}, {"noise_measured", d.noise_measured},
          {"rank_p", d.rank_p < 0 ? nlohmann::json(nullptr) : nlohmann::json(d.rank_p)},
          {"by_ranks", d.by_ranks},      {"change", ChangeName(d.change)}};
}

nlohmann::json RunJson(const RunHeader& h) {
  return {{"db", h.db_path},        {"run_id", h.run_id},
          {"sample", h.sample},     {"mesh", h.mesh},
          {"sharding", h.sharding}, {"profile", h.profile},
          {"imported", h.imported}, {"simulated", h.simulated},
          {"status", h.status},     {"faults_injected", h.faults_injected}};
}

nlohmann::json CompileJson(const CompileStats& s) {
  return {{"requests", s.count}, {"misses", s.misses}, {"recompilations", s.recompilations}, {"total_ns", s.total_ns}};
}

}  // namespace

std::string RenderComparisonText(const RunComparison& c) {
  std::string out = absl::StrCat("shardscope diff\n  A  ", RunLine(c.a), "\n  B  ", RunLine(c.b), "\n\n");
  absl::StrAppend(&out, "Verdict  ", Printable(c.verdict), "\n\n");
  absl::StrAppend(&out, "Step time per clock\n", AlignTable(StepRows(c), "  "), "\n");
  absl::StrAppend(&out, "Compilations (host clock)  A: ", CompileCell(c.compiles_a, c.a), "\n", "                           B: ",
                  CompileCell(c.compiles_b, c.b), "\n");
  absl::StrAppend(&out, "Memory peak per chip       ", PeakLine(c), "\n\n");
  absl::StrAppend(&out, "Ops on the ", c.op_clock, " clock (time per step, mean over chips): ", CountsLine(c), "\n");
  if (Changed(c) > 0 && !c.different_workloads.empty()) {
    absl::StrAppend(&out, "  (not listed: different workloads; --format json lists every op)\n");
  } else if (Changed(c) > 0) {
    absl::StrAppend(&out, AlignTable(OpRows(c, kTopOps), "  "));
    if (Changed(c) > kTopOps) absl::StrAppend(&out, "  ... ", Changed(c) - kTopOps, " more changed (--format json lists every op)\n");
  }
  if (!c.chips.empty()) {
    absl::StrAppend(&out, "\nChips on the ", c.op_clock, " clock (time per step): ", ChipsLine(c), "\n");
    if (ChipRows(c).size() > 1) absl::StrAppend(&out, AlignTable(ChipRows(c), "  "));
  }
  if (!c.sharding_not_compared.empty()) {
    absl::StrAppend(&out, "\nSharding: not compared: ", c.sharding_not_compared, "\n");
  } else if (!c.sharding.empty() && !c.different_workloads.empty()) {
    absl::StrAppend(&out, "\nSharding: ", c.sharding.size(),
                    " tensors differ, not listed: different workloads (--format json lists them)\n");
  } else if (!c.sharding.empty()) {
    absl::StrAppend(&out, "\nSharding changes (", c.sharding.size(), ")\n", AlignTable(ShardingRows(c), "  "));
  } else {
    absl::StrAppend(&out, "\nSharding: no tensor's sharding differs\n");
  }
  absl::StrAppend(&out, "\nNotes\n");
  for (const std::string& n : c.notes) absl::StrAppend(&out, "  - ", Printable(n), "\n");
  return out;
}

std::string RenderComparisonMarkdown(const RunComparison& c) {
  std::string out = absl::StrCat("# shardscope diff\n\n- **A** ", Md(RunLine(c.a)), "\n- **B** ", Md(RunLine(c.b)),
                                 "\n\n**Verdict:** ", Md(c.verdict), "\n\n## Step time per clock\n\n", MdTable(StepRows(c)));
  absl::StrAppend(&out, "\n## Compilations (host clock)\n\n- A: ", CompileCell(c.compiles_a, c.a), "\n- B: ",
                  CompileCell(c.compiles_b, c.b), "\n\n## Memory peak per chip\n\n", PeakLine(c), "\n\n## Ops on the ",
                  c.op_clock, " clock\n\n", CountsLine(c), " (time per step, mean over chips)\n\n");
  if (Changed(c) > 0 && c.different_workloads.empty()) absl::StrAppend(&out, MdTable(OpRows(c, kTopOps)));
  if (!c.chips.empty()) {
    absl::StrAppend(&out, "\n## Chips on the ", c.op_clock, " clock\n\n", Md(ChipsLine(c)), "\n\n");
    if (ChipRows(c).size() > 1) absl::StrAppend(&out, MdTable(ChipRows(c)));
  }
  absl::StrAppend(&out, "\n## Sharding changes\n\n");
  if (!c.sharding_not_compared.empty()) {
    absl::StrAppend(&out, "Not compared: ", Md(c.sharding_not_compared), ".\n");
  } else if (c.sharding.empty()) {
    out += "No tensor's sharding differs.\n";
  } else if (!c.different_workloads.empty()) {
    absl::StrAppend(&out, c.sharding.size(), " tensors differ, not listed: different workloads.\n");
  } else {
    out += MdTable(ShardingRows(c));
  }
  absl::StrAppend(&out, "\n## Notes\n\n");
  for (const std::string& n : c.notes) absl::StrAppend(&out, "- ", Md(n), "\n");
  return MarkdownWithoutHtml(out);
}

nlohmann::json ComparisonToJson(const RunComparison& c) {
  nlohmann::json j;
  j["schema"] = "shardscope.diff/1";
  j["a"] = RunJson(c.a);
  j["b"] = RunJson(c.b);
  j["clock"] = c.op_clock;
  j["verdict"] = c.verdict;
  j["steps"] = nlohmann::json::array();
  for (const StepClockDelta& s : c.steps)
    j["steps"].push_back({{"clock", s.clock}, {"a", SpreadJson(s.a)}, {"b", SpreadJson(s.b)},
                          {"relative", s.Relative()}, {"delta", DeltaJson(s.delta)}});
  j["compilations"] = {{"a", CompileJson(c.compiles_a)}, {"b", CompileJson(c.compiles_b)}};
  j["memory"] = {{"a_peak_bytes", c.peak_a}, {"b_peak_bytes", c.peak_b}};
  j["counts"] = nlohmann::json::object();
  for (Change ch : {Change::kAdded, Change::kRemoved, Change::kFaster, Change::kSlower, Change::kUnchanged})
    j["counts"][ChangeName(ch)] = c.counts[static_cast<int>(ch)];
  j["ops"] = nlohmann::json::array();
  for (const OpDelta& o : c.ops)
    j["ops"].push_back({{"name", o.name}, {"shape", o.shape}, {"opcode", o.opcode}, {"source", o.source},
                        {"a", SpreadJson(o.a)}, {"b", SpreadJson(o.b)}, {"delta", DeltaJson(o.delta)},
                        {"step_impact_ns", o.step_impact_ns}});
  j["chips"] = nlohmann::json::array();
  for (const ChipDelta& d : c.chips)
    j["chips"].push_back(
        {{"chip", d.chip},
         {"compute", {{"a", SpreadJson(d.compute_a)}, {"b", SpreadJson(d.compute_b)}, {"delta", DeltaJson(d.compute)},
                      {"relative", d.ComputeRelative()}, {"stands_apart", d.compute_apart}}},
         {"communication", {{"a", SpreadJson(d.comm_a)}, {"b", SpreadJson(d.comm_b)}, {"delta", DeltaJson(d.comm)},
                            {"relative", d.CommRelative()}, {"stands_apart", d.comm_apart}}}});
  j["sharding"] = nlohmann::json::array();
  for (const ShardingChange& s : c.sharding) j["sharding"].push_back({{"tensor", s.tensor}, {"a", s.a}, {"b", s.b}});
  if (!c.sharding_not_compared.empty()) j["sharding_not_compared"] = c.sharding_not_compared;
  j["notes"] = c.notes;
  j["different_workloads"] = !c.different_workloads.empty();
  if (!c.batches_differ.empty()) j["batches_differ"] = c.batches_differ;
  return j;
}

std::string RenderComparisonHtml(const RunComparison& c) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>shardscope diff</title>\n<style>"
      "body{font-family:sans-serif;margin:2em;max-width:72em}table{border-collapse:collapse;margin:.5em 0}"
      "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:13px;overflow-wrap:anywhere}th{background:#eee}"
      ".verdict{font-size:1.1em;padding:.5em;background:#f4f4e8;border-left:4px solid #b90}"
      "</style></head><body>\n<h1>shardscope diff</h1>\n";
  absl::StrAppend(&out, "<p><b>A</b> ", Html(RunLine(c.a)), "<br><b>B</b> ", Html(RunLine(c.b)), "</p>\n");
  absl::StrAppend(&out, "<p class=\"verdict\">", Html(c.verdict), "</p>\n<h2>Step time per clock</h2>\n", StepBarsSvg(c),
                  HtmlTable(StepRows(c)));
  absl::StrAppend(&out, "<h2>Compilations (host clock)</h2><p>A: ", Html(CompileCell(c.compiles_a, c.a)), "<br>B: ",
                  Html(CompileCell(c.compiles_b, c.b)), "</p>\n<h2>Memory peak per chip</h2><p>", Html(PeakLine(c)),
                  "</p>\n<h2>Ops on the ", Html(c.op_clock), " clock</h2><p>", Html(CountsLine(c)),
                  " (time per step, mean over chips)</p>\n");
  if (Changed(c) > 0 && c.different_workloads.empty()) out += HtmlTable(OpRows(c, kTopOps));
  if (!c.chips.empty()) {
    absl::StrAppend(&out, "<h2>Chips on the ", Html(c.op_clock), " clock</h2><p>", Html(ChipsLine(c)), "</p>\n");
    if (ChipRows(c).size() > 1) out += HtmlTable(ChipRows(c));
  }
  out += "<h2>Sharding changes</h2>\n";
  if (!c.sharding_not_compared.empty()) {
    absl::StrAppend(&out, "<p>Not compared: ", Html(c.sharding_not_compared), ".</p>\n");
  } else if (c.sharding.empty()) {
    out += "<p>No tensor's sharding differs.</p>\n";
  } else if (!c.different_workloads.empty()) {
    absl::StrAppend(&out, "<p>", c.sharding.size(), " tensors differ, not listed: different workloads.</p>\n");
  } else {
    out += HtmlTable(ShardingRows(c));
  }
  out += "<h2>Notes</h2><ul>";
  for (const std::string& n : c.notes) absl::StrAppend(&out, "<li>", Html(n), "</li>");
  return out + "</ul>\n</body></html>\n";
}

}  // namespace shardscope::analysis
