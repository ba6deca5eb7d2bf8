#include "profiler/analysis/recompiles.h"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "profiler/analysis/format.h"

namespace shardscope::analysis {
namespace {

// "f32[64,784]" -> {64, 784}; empty for a scalar or text it cannot read.
std::vector<int64_t> DimsOf(const std::string& shape) {
  const size_t open = shape.find('['), close = shape.rfind(']');
  std::vector<int64_t> dims;
  if (open == std::string::npos || close == std::string::npos || close <= open + 1) return dims;
  for (absl::string_view part : absl::StrSplit(shape.substr(open + 1, close - open - 1), ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d)) return {};
    dims.push_back(d);
  }
  return dims;
}

std::string DimsText(const std::vector<int64_t>& dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

// One field of a stored input signature as text: "" when missing, an array
// (a shape written as [64,784]) as its JSON text. The stored text may be
// anything (another version, a damaged file), so nothing here may throw.
std::string SignatureField(const nlohmann::json& in, const char* key) {
  if (!in.is_object()) return "";
  auto it = in.find(key);
  if (it == in.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// Shape churn at one call site: the inputs whose shapes differ between its
// runs, the buckets that cover them, and how many distinct graphs the
// padded shapes would have made (the other inputs as they were).
void ShapeSuggestion(const std::vector<std::string>& signatures, CallSiteRecompiles* site) {
  std::map<std::string, std::set<std::string>> shapes;  // input -> shapes seen
  std::vector<std::map<std::string, std::string>> runs;
  for (const std::string& text : signatures) {
    nlohmann::json sig = nlohmann::json::parse(text, nullptr, false);
    if (!sig.is_array()) continue;
    runs.emplace_back();
    for (const auto& in : sig) {
      const std::string name = SignatureField(in, "name"), shape = SignatureField(in, "shape");
      shapes[name].insert(shape);
      runs.back()[name] = shape;
    }
  }
  // Only the dims that change are padded (a feature size that never changes stays).
  std::map<std::string, std::vector<bool>> varies;
  for (const auto& [name, seen] : shapes) {
    if (seen.size() < 2) continue;
    std::vector<int64_t> first = DimsOf(*seen.begin());
    std::vector<bool>& v = varies[name];
    v.assign(first.size(), false);
    for (const std::string& s : seen) {
      std::vector<int64_t> d = DimsOf(s);
      for (size_t k = 0; k < d.size() && k < first.size(); ++k) v[k] = v[k] || d[k] != first[k];
    }
  }
  auto padded = [&](const std::string& name, const std::string& shape) {
    std::vector<int64_t> d = DimsOf(shape);
    const std::vector<bool>& v = varies[name];
    for (size_t k = 0; k < d.size() && k < v.size(); ++k)
      if (v[k]) d[k] = PowerOfTwoBucket(d[k]);
    return DimsText(d);
  };
  std::vector<std::string> churning, how;
  for (const auto& [name, flags] : varies) {
    churning.push_back(name);
    std::vector<std::string> shown;
    std::set<std::string> buckets;
    for (const std::string& s : shapes[name]) {
      if (shown.size() < 4) shown.push_back(DimsText(DimsOf(s)));
      buckets.insert(padded(name, s));
    }
    const size_t seen = shapes[name].size();
    how.push_back(absl::StrCat(name, " (", absl::StrJoin(shown, ", "), seen > shown.size() ? ", ..." : "",
                               seen > shown.size() ? absl::StrCat(" ", seen, " shapes") : "", " -> ",
                               absl::StrJoin(std::vector<std::string>(buckets.begin(), buckets.end()), ", "), ")"));
  }
  if (churning.empty()) return;
  std::set<std::vector<std::string>> before, after;
  for (const auto& run : runs) {
    std::vector<std::string> b, a;
    for (const std::string& name : churning) {
      auto it = run.find(name);
      const std::string shape = it == run.end() ? "" : it->second;
      b.push_back(shape);
      a.push_back(padded(name, shape));
    }
    before.insert(b);
    after.insert(a);
  }
  const int64_t saved = static_cast<int64_t>(before.size()) - static_cast<int64_t>(after.size());
  if (saved <= 0) return;  // already bucketed, or the shapes are buckets already
  site->suggestions.push_back({absl::StrCat("pad to power-of-two buckets: ", absl::StrJoin(how, "; "), ": ",
                                            after.size(), " distinct input shapes instead of ", before.size(), ", ",
                                            saved, " compilation", saved == 1 ? "" : "s", " saved"),
                               saved});
}

}  // namespace

absl::StatusOr<std::vector<ValueReadCuts>> FindValueReadCuts(const store::Reader& rd, int64_t run_id,
                                                             int every) {
  const std::string run = std::to_string(run_id);
  auto all = rd.Query(
      "SELECT COUNT(*) AS runs, COUNT(DISTINCT step) AS steps, MIN(step) AS first FROM executions"
      " WHERE run_id = ?1",
      {run});
  if (!all.ok()) return all.status();
  const int64_t runs = all->Int(0, "runs"), steps = all->Int(0, "steps"), first = all->Int(0, "first");
  auto cuts = rd.Query(
      "SELECT COALESCE(source_file, '') AS file, COALESCE(source_line, 0) AS line, step FROM executions"
      " WHERE run_id = ?1 AND cause = 'value_read' GROUP BY file, line, step ORDER BY file, line, step",
      {run});
  if (!cuts.ok()) return cuts.status();
  std::vector<ValueReadCuts> out;
  for (size_t i = 0; i < cuts->rows.size(); ++i) {
    const std::string at = absl::StrCat(cuts->Text(i, "file"), ":", cuts->Int(i, "line"));
    if (out.empty() || out.back().at != at) out.push_back({at, steps, 0, runs, every});
    ValueReadCuts& c = out.back();
    ++c.steps_cut;
    if ((cuts->Int(i, "step") - first) % every != 0) ++c.executions_saved;
  }
  for (ValueReadCuts& c : out)
    c.compilations_added = c.steps_cut == c.steps && c.executions_saved > 0 ? 1 : 0;
  return out;
}

int64_t PowerOfTwoBucket(int64_t size) {
  int64_t b = 1;
  while (b < size) b *= 2;
  return b;
}

absl::StatusOr<RecompilesReport> BuildRecompilesReport(const store::Reader& rd, int64_t run_id) {
  RecompilesReport r;
  r.run_id = run_id;
  const std::string run = std::to_string(run_id);
  auto q = rd.Query(
      "SELECT compile_id, step, graph_id, cache, COALESCE(cause_kind, '') AS cause_kind,"
      " COALESCE(cause_detail, '') AS cause_detail, COALESCE(source_file, '') AS file,"
      " COALESCE(source_line, 0) AS line, duration_ns, call_site FROM compilations WHERE run_id = ?1"
      " ORDER BY compile_id",
      {run});
  if (!q.ok()) return q.status();
  std::map<std::string, CallSiteRecompiles> by_site;
  std::map<std::string, std::set<int64_t>> graphs;
  std::map<std::string, std::map<std::string, std::pair<int64_t, std::string>>> causes;  // site -> kind -> (n, at)
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const std::string site = q->Text(i, "call_site");
    CallSiteRecompiles& s = by_site[site];
    s.call_site = site;
    graphs[site].insert(q->Int(i, "graph_id"));
    const std::string cache = q->Text(i, "cache");
    if (cache == "memory_hit") continue;
    CompileEvent e{q->Int(i, "compile_id"), q->Int(i, "step"), q->Int(i, "graph_id"), q->Int(i, "duration_ns"),
                   cache, q->Text(i, "cause_kind"), q->Text(i, "cause_detail"),
                   q->Text(i, "file").empty() ? "" : absl::StrCat(q->Text(i, "file"), ":", q->Int(i, "line"))};
    if (cache == "miss") {
      ++s.misses;
      s.compile_ns += e.duration_ns;
      auto& [n, at] = causes[site][e.cause_kind];
      ++n;
      if (at.empty()) at = e.at;
    }
    s.compiles.push_back(std::move(e));
  }
  auto cuts = FindValueReadCuts(rd, run_id);
  if (!cuts.ok()) return cuts.status();
  for (auto& [site, s] : by_site) {
    s.distinct_graphs = static_cast<int64_t>(graphs[site].size());
    const auto& c = causes[site];
    if (c.count("input_shape_changed")) {
      std::vector<std::string> signatures;
      auto ex = rd.Query(
          "SELECT e.input_signature AS sig FROM executions e WHERE e.run_id = ?1 AND e.graph_id IN"
          " (SELECT graph_id FROM compilations WHERE run_id = ?1 AND call_site = ?2)",
          {run, site});
      if (!ex.ok()) return ex.status();
      for (size_t i = 0; i < ex->rows.size(); ++i) signatures.push_back(ex->Text(i, "sig"));
      ShapeSuggestion(signatures, &s);
    }
    auto at = [&](const std::string& kind) {
      const auto& [n, where] = c.at(kind);
      return absl::StrCat(n, " compilation", n == 1 ? "" : "s", where.empty() ? "" : absl::StrCat(" (", where, ")"));
    };
    if (c.count("value_read_cut")) {
      s.suggestions.push_back({absl::StrCat(at("value_read_cut"), " because a value was read mid-step: read it "
                                            "after mark_step, or only every N steps"), c.at("value_read_cut").first});
      for (const ValueReadCuts& v : *cuts) {
        if (v.at != c.at("value_read_cut").second || v.executions_saved <= 0) continue;
        const std::string cost =
            v.compilations_added ? ", for 1 more compilation (the whole step's graph, compiled once)" : "";
        s.suggestions.push_back(
            {absl::StrCat("the read at ", v.at, " cut the graph in ", v.steps_cut, " of ", v.steps,
                          " steps (", v.executions, " program runs in the run); reading it every ", v.every,
                          " steps instead: ", v.executions - v.executions_saved, " runs, ",
                          v.executions_saved, " program runs saved", cost),
             -1, v.executions_saved});
      }
    }
    if (c.count("inlined_scalar_changed"))
      s.suggestions.push_back({absl::StrCat(at("inlined_scalar_changed"), " because an inlined scalar (0 or 1) "
                                            "changed: pass it as a tensor so its value is data"),
                               c.at("inlined_scalar_changed").first});
    if (c.count("graph_changed"))
      s.suggestions.push_back({absl::StrCat(at("graph_changed"), " because the graph's structure changed (a branch "
                                            "on a value read back, or a loop whose trip count changed): compute both "
                                            "sides and select, or keep the trip count fixed"),
                               -1});
  }
  for (auto& [site, s] : by_site) r.sites.push_back(std::move(s));
  std::stable_sort(r.sites.begin(), r.sites.end(),
                   [](const CallSiteRecompiles& a, const CallSiteRecompiles& b) { return a.misses > b.misses; });
  return r;
}

std::string RenderRecompilesText(const RecompilesReport& r) {
  std::string out = absl::StrCat("run ", r.run_id, ": compilations by call site\n");
  if (r.sites.empty()) return out + "\nno compilations recorded\n";
  for (const CallSiteRecompiles& s : r.sites) {
    absl::StrAppend(&out, "\n", s.call_site, "\n  ", s.distinct_graphs, " distinct graph",
                    s.distinct_graphs == 1 ? "" : "s", ", ", s.misses, " compilation", s.misses == 1 ? "" : "s",
                    ", ", FormatNs(s.compile_ns), " compiling (host clock)\n");
    std::vector<std::vector<std::string>> t = {{"step", "cache", "cause", "at", "time", "detail"}};
    for (const CompileEvent& e : s.compiles)
      t.push_back({std::to_string(e.step), e.cache, e.cause_kind.empty() ? "-" : e.cause_kind,
                   e.at.empty() ? "-" : e.at, FormatNs(e.duration_ns), e.cause_detail});
    out += AlignTable(t, "    ");
    for (const Suggestion& g : s.suggestions) absl::StrAppend(&out, "  suggestion: ", g.text, "\n");
  }
  return out;
}

}  // namespace shardscope::analysis
