#include "profiler/analysis/recompiles.h"

#include <algorithm>
#include <list>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "profiler/analysis/format.h"
#include "store/json_text.h"

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

// A field of one input of a stored signature, as text: "" when the input is
// not an object or lacks it; a shape stored as a list of dims reads "[64,784]".
// Whatever another tool or version stored, reading it never throws.
std::string SignatureText(const nlohmann::json& input, const char* key) {
  if (!input.is_object()) return "";
  auto it = input.find(key);
  if (it == input.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::vector<int64_t> dims;
    for (const auto& d : *it) {
      if (!d.is_number_integer()) return "";
      dims.push_back(d.get<int64_t>());
    }
    return DimsText(dims);
  }
  return "";
}

}  // namespace

absl::StatusOr<std::vector<ValueReadCuts>> FindValueReadCuts(const store::Reader& rd, int64_t run_id,
                                                             int every) {
  const std::string run = std::to_string(run_id);
  auto all = rd.Query(
      "SELECT COUNT(*) AS runs, COUNT(DISTINCT step) AS steps, MIN(step) AS first, MAX(step) AS last"
      " FROM executions WHERE run_id = ?1",
      {run});
  if (!all.ok()) return all.status();
  const int64_t runs = all->Int(0, "runs"), steps = all->Int(0, "steps"), first = all->Int(0, "first");
  const int64_t last = all->Int(0, "last");
  // A read's cut is one more program run only when a program ran after it in
  // that step (the rest of the step); a read after everything of its step was
  // traced merely runs the step early, and not reading saves nothing. A line
  // may cut a step several times (a loss read on every micro-batch of an
  // accumulation): each cut that went on is one program run.
  auto cuts = rd.Query(
      "SELECT COALESCE(source_file, '') AS file, COALESCE(source_line, 0) AS line, step,"
      " COUNT(*) AS cuts, SUM(EXISTS (SELECT 1 FROM executions l WHERE l.run_id = e.run_id"
      "             AND l.step = e.step AND l.execution_id > e.execution_id)) AS followed"
      " FROM executions e WHERE run_id = ?1 AND cause = 'value_read' GROUP BY file, line, step"
      " ORDER BY file, line, step",
      {run});
  if (!cuts.ok()) return cuts.status();
  std::vector<ValueReadCuts> out;
  std::vector<std::set<int64_t>> cut_steps;  // per read site
  std::vector<int64_t> most_followed;        // the most cuts that went on in one step, per site
  for (size_t i = 0; i < cuts->rows.size(); ++i) {
    const std::string at = absl::StrCat(cuts->Text(i, "file"), ":", cuts->Int(i, "line"));
    if (out.empty() || out.back().at != at) {
      out.push_back({at, steps, 0, runs, every});
      cut_steps.emplace_back();
      most_followed.push_back(0);
    }
    ValueReadCuts& c = out.back();
    ++c.steps_cut;
    c.cuts += cuts->Int(i, "cuts");
    const int64_t step = cuts->Int(i, "step"), followed = cuts->Int(i, "followed");
    cut_steps.back().insert(step);
    most_followed.back() = std::max(most_followed.back(), followed);
    if ((step - first) % every != 0) c.executions_saved += followed;
  }
  for (size_t k = 0; k < out.size(); ++k) {
    ValueReadCuts& c = out[k];
    // Reading every N steps also reads at the steps of that grid this read
    // skipped (a read every 4 steps, moved to every 10, reads at step 10):
    // each such step is cut as this line cut its steps, counted at the most
    // (the saving is never overstated).
    for (int64_t step = first; step <= last; step += every)
      if (!cut_steps[k].count(step)) c.executions_saved -= most_followed[k];
    c.compilations_added = c.steps_cut == c.steps && c.executions_saved > 0 ? 1 : 0;
  }
  return out;
}

int64_t PowerOfTwoBucket(int64_t size) {
  int64_t b = 1;
  while (b < size) b *= 2;
  return b;
}

namespace {

// The run's cuts in the order they ran: which program each asked for, where,
// with which inputs, and how the compile cache answered. Compilations and
// executions are recorded together at every cut (compile before execute), so
// the k-th of each belong together.
struct Cut {
  int64_t step = 0;
  std::string site, fingerprint, signature, cache, kind, subkind, cause;
  bool read_followed = false;  // a value read with a later program in its step
};

// Replays keys through an LRU compile cache of `capacity` programs (0: no
// limit), as runtime::Client does: the compilations it takes.
int64_t SimulateMisses(const std::vector<std::string>& keys, int64_t capacity) {
  std::list<std::string> lru;
  std::map<std::string, std::list<std::string>::iterator> where;
  int64_t misses = 0;
  for (const std::string& k : keys) {
    auto it = where.find(k);
    if (it != where.end()) {
      lru.splice(lru.begin(), lru, it->second);
      continue;
    }
    ++misses;
    lru.push_front(k);
    where[k] = lru.begin();
    if (capacity > 0 && static_cast<int64_t>(lru.size()) > capacity) {
      where.erase(lru.back());
      lru.pop_back();
    }
  }
  return misses;
}

// The signature with the named dims padded: the input shapes a padded program sees.
// `largest`, when given: each varying dim padded to the largest it takes
// (a short last batch padded to the others), not to a power of two.
std::string PaddedSignature(const std::string& text, const std::map<std::string, std::vector<bool>>& varies,
                            const std::map<std::string, std::vector<int64_t>>* largest = nullptr) {
  nlohmann::json sig = nlohmann::json::parse(text, nullptr, false);
  if (!sig.is_array()) return text;
  std::string out;
  for (const auto& in : sig) {
    const std::string name = SignatureText(in, "name");
    std::vector<int64_t> d = DimsOf(SignatureText(in, "shape"));
    auto it = varies.find(name);
    const std::vector<int64_t>* most = nullptr;
    if (largest)
      if (auto m = largest->find(name); m != largest->end()) most = &m->second;
    if (it != varies.end())
      for (size_t k = 0; k < d.size() && k < it->second.size(); ++k)
        if (it->second[k]) d[k] = most && k < most->size() ? (*most)[k] : PowerOfTwoBucket(d[k]);
    absl::StrAppend(&out, name, ":", SignatureText(in, "dtype"), DimsText(d), SignatureText(in, "sharding"), ";");
  }
  return out;
}

std::string Clip(const std::string& s, size_t n = kMaxDetail) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

}  // namespace

absl::StatusOr<RecompilesReport> BuildRecompilesReport(const store::Reader& rd, int64_t run_id) {
  RecompilesReport r;
  r.run_id = run_id;
  const std::string run = std::to_string(run_id);
  // cause_subkind came with schema changes of issue 13; older files lack it.
  auto has_subkind = rd.Query("SELECT COUNT(*) AS n FROM pragma_table_info('compilations') WHERE name = 'cause_subkind'");
  if (!has_subkind.ok()) return has_subkind.status();
  const std::string subkind = has_subkind->Int(0, "n") ? "COALESCE(c.cause_subkind, '')" : "''";
  auto q = rd.Query(
      "SELECT c.compile_id, c.step, c.graph_id, c.cache, COALESCE(c.cause_kind, '') AS cause_kind, " + subkind +
          " AS cause_subkind, COALESCE(c.cause_detail, '') AS cause_detail, COALESCE(c.source_file, '') AS file,"
          " COALESCE(c.source_line, 0) AS line, c.duration_ns, c.call_site, COALESCE(g.fingerprint, '') AS fp"
          " FROM compilations c LEFT JOIN graphs g ON g.run_id = c.run_id AND g.graph_id = c.graph_id"
          " WHERE c.run_id = ?1 ORDER BY c.compile_id",
      {run});
  if (!q.ok()) return q.status();
  std::map<std::string, CallSiteRecompiles> by_site;
  std::map<std::string, std::set<std::string>> graphs;  // site -> distinct programs (fingerprints)
  std::map<std::string, std::map<std::string, std::pair<int64_t, std::string>>> causes;  // site -> kind -> (n, at)
  std::vector<Cut> cuts_in_order;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const std::string site = q->Text(i, "call_site");
    CallSiteRecompiles& s = by_site[site];
    s.call_site = site;
    const std::string fp = q->Text(i, "fp");
    graphs[site].insert(fp.empty() ? absl::StrCat("graph ", q->Int(i, "graph_id")) : fp);
    const std::string cache = q->Text(i, "cache");
    Cut cut;
    cut.step = q->Int(i, "step");
    cut.site = site;
    cut.fingerprint = fp;
    cut.cache = cache;
    cut.kind = q->Text(i, "cause_kind");
    cut.subkind = q->Text(i, "cause_subkind");
    cuts_in_order.push_back(std::move(cut));
    if (cache == "memory_hit") continue;
    CompileEvent e{q->Int(i, "compile_id"), q->Int(i, "step"), q->Int(i, "graph_id"), q->Int(i, "duration_ns"),
                   cache, q->Text(i, "cause_kind"), q->Text(i, "cause_detail"),
                   q->Text(i, "file").empty() ? "" : absl::StrCat(q->Text(i, "file"), ":", q->Int(i, "line")),
                   q->Text(i, "cause_subkind")};
    if (cache == "miss") {
      ++s.misses;
      s.compile_ns += e.duration_ns;
      const std::string key = e.cause_subkind.empty() ? e.cause_kind : absl::StrCat(e.cause_kind, "/", e.cause_subkind);
      auto& [n, at] = causes[site][key];
      ++n;
      if (at.empty()) at = e.at;
    }
    s.compiles.push_back(std::move(e));
  }
  // The executions, matched to the cuts in order.
  auto ex = rd.Query(
      "SELECT e.step, e.input_signature AS sig, e.cause,"
      " EXISTS (SELECT 1 FROM executions l WHERE l.run_id = e.run_id AND l.step = e.step"
      "         AND l.execution_id > e.execution_id) AS followed"
      " FROM executions e WHERE e.run_id = ?1 ORDER BY e.execution_id",
      {run});
  if (!ex.ok()) return ex.status();
  // Predictions need the cuts and executions to line up, and no disk cache
  // in between (a disk hit is neither a compilation nor free).
  bool provable = ex->rows.size() == cuts_in_order.size();
  for (size_t k = 0; provable && k < cuts_in_order.size(); ++k) {
    Cut& c = cuts_in_order[k];
    provable = c.step == ex->Int(k, "step") && c.cache != "disk_hit" && !c.fingerprint.empty();
    c.signature = ex->Text(k, "sig");
    c.cause = ex->Text(k, "cause");
    c.read_followed = ex->Int(k, "followed") != 0;
  }
  int64_t capacity = 0;
  if (auto cfg = rd.Query("SELECT config_json FROM runs WHERE run_id = ?1", {run}); cfg.ok() && !cfg->rows.empty()) {
    nlohmann::json j = nlohmann::json::parse(cfg->Text(0, "config_json"), nullptr, false);
    if (j.is_object() && j.contains("cache_capacity") && j["cache_capacity"].is_number_integer())
      capacity = j["cache_capacity"].get<int64_t>();
  }
  int64_t recorded_misses = 0;
  for (const Cut& c : cuts_in_order) recorded_misses += c.cache == "miss";
  std::vector<std::string> base_keys;
  for (const Cut& c : cuts_in_order) base_keys.push_back(c.fingerprint);
  // The replay must reproduce what the run compiled, or nothing is predicted.
  provable = provable && SimulateMisses(base_keys, capacity) == recorded_misses;
  const auto saved_with = [&](const std::vector<std::string>& keys, int64_t cap) {
    return recorded_misses - SimulateMisses(keys, cap);
  };

  // Per call site: whether a trained parameter (an input that requires a
  // gradient, "trained" in the signature) came in more than one shape.
  std::map<std::string, bool> trained_shape_changed;
  {
    std::map<std::string, std::map<std::string, std::set<std::string>>> shapes;  // site -> name -> shapes
    for (const Cut& k : cuts_in_order) {
      const nlohmann::json sig = nlohmann::json::parse(k.signature, nullptr, false);
      if (!sig.is_array()) continue;
      for (const auto& in : sig)
        if (in.is_object() && in.value("trained", false))
          shapes[k.site][SignatureText(in, "name")].insert(SignatureText(in, "shape"));
    }
    for (const auto& [site, by_name] : shapes)
      for (const auto& [name, seen] : by_name) trained_shape_changed[site] |= seen.size() > 1;
  }
  auto cuts = FindValueReadCuts(rd, run_id);
  if (!cuts.ok()) return cuts.status();
  std::set<std::string> all_graphs;
  for (const auto& [site, g] : graphs) all_graphs.insert(g.begin(), g.end());
  r.distinct_graphs = static_cast<int64_t>(all_graphs.size());
  std::string capacity_site;  // the call site where raising the cache's capacity is counted
  for (auto& [site, s] : by_site) {
    s.distinct_graphs = static_cast<int64_t>(graphs[site].size());
    const auto& c = causes[site];
    auto at = [&](const std::string& kind) {
      const auto& [n, where] = c.at(kind);
      return absl::StrCat(n, " compilation", n == 1 ? "" : "s", where.empty() ? "" : absl::StrCat(" (", where, ")"));
    };
    auto count = [&](const std::string& kind) { return c.count(kind) ? c.at(kind).first : 0; };
    if (c.count("input_shape_changed") || c.count("data_dependent_shape")) {
      // Which inputs' dims churn at this site, and the padded replay.
      std::map<std::string, std::set<std::string>> shapes;
      std::vector<std::string> signatures;
      for (const Cut& k : cuts_in_order) {
        if (k.site != site) continue;
        signatures.push_back(k.signature);
      }
      std::map<std::string, std::vector<bool>> varies;
      for (const std::string& text : signatures) {
        nlohmann::json sig = nlohmann::json::parse(text, nullptr, false);
        if (!sig.is_array()) continue;
        for (const auto& in : sig) shapes[SignatureText(in, "name")].insert(SignatureText(in, "shape"));
      }
      for (const auto& [name, seen] : shapes) {
        if (seen.size() < 2) continue;
        std::vector<int64_t> first = DimsOf(*seen.begin());
        std::vector<bool>& v = varies[name];
        v.assign(first.size(), false);
        for (const std::string& sh : seen) {
          std::vector<int64_t> d = DimsOf(sh);
          for (size_t k = 0; k < d.size() && k < first.size(); ++k) v[k] = v[k] || d[k] != first[k];
        }
      }
      if (!varies.empty()) {
        // The padded program is the same graph for inputs that pad alike;
        // that holds only if at this site the inputs decide the program.
        std::map<std::string, std::set<std::string>> fp_of_sig;
        std::vector<std::string> keys;
        for (const Cut& k : cuts_in_order) {
          if (k.site != site) {
            keys.push_back(k.fingerprint);
            continue;
          }
          fp_of_sig[PaddedSignature(k.signature, {})].insert(k.fingerprint);
          keys.push_back(absl::StrCat(site, "|", PaddedSignature(k.signature, varies)));
        }
        bool decided = true;
        for (const auto& [sig, fps] : fp_of_sig) decided = decided && fps.size() == 1;
        std::vector<std::string> how;
        for (const auto& [name, flags] : varies) {
          // In numeric order ([4,8] before [4,16]), not as text.
          std::set<std::vector<int64_t>> dims, buckets;
          for (const std::string& sh : shapes[name]) dims.insert(DimsOf(sh));
          std::vector<std::string> shown, padded;
          for (std::vector<int64_t> d : dims) {
            if (shown.size() < 4) shown.push_back(DimsText(d));
            for (size_t k = 0; k < d.size() && k < flags.size(); ++k)
              if (flags[k]) d[k] = PowerOfTwoBucket(d[k]);
            buckets.insert(d);
          }
          for (const std::vector<int64_t>& b : buckets) padded.push_back(DimsText(b));
          const size_t seen = shapes[name].size();
          how.push_back(absl::StrCat(name, " (", absl::StrJoin(shown, ", "), seen > shown.size() ? ", ..." : "",
                                     seen > shown.size() ? absl::StrCat(" ", seen, " shapes") : "", " -> ",
                                     absl::StrJoin(padded, ", "), ")"));
        }
        const int64_t saved = provable && decided ? saved_with(keys, capacity) : -1;
        // Sizes that are already powers of two (a last batch of 8 after 16s)
        // bucket to themselves: when buckets save nothing, padding to the
        // largest size seen is the fix (for a storm of sizes buckets are,
        // which waste less compute than padding all to the largest).
        if (saved == 0) {
          std::map<std::string, std::vector<int64_t>> largest;
          for (const auto& [name, flags] : varies)
            for (const std::string& sh : shapes[name]) {
              std::vector<int64_t> d = DimsOf(sh);
              std::vector<int64_t>& m = largest[name];
              if (m.size() < d.size()) m.resize(d.size(), 0);
              for (size_t k = 0; k < d.size(); ++k) m[k] = std::max(m[k], d[k]);
            }
          std::vector<std::string> largest_keys;
          int at_site = 0, at_largest = 0;  // the site's steps, and those already at the largest shape
          for (const Cut& k : cuts_in_order) {
            if (k.site != site) {
              largest_keys.push_back(k.fingerprint);
              continue;
            }
            const std::string padded = PaddedSignature(k.signature, varies, &largest);
            ++at_site;
            at_largest += PaddedSignature(k.signature, {}) == padded;
            largest_keys.push_back(absl::StrCat(site, "|", padded));
          }
          const int64_t saved_largest = provable && decided ? saved_with(largest_keys, capacity) : -1;
          // A short batch now and then (most steps already at the largest
          // shape), not sizes spread over buckets, whose padding would cost.
          if (saved_largest > 0 && at_largest * 5 >= at_site * 3) {
            std::vector<std::string> to;
            for (const auto& [name, flags] : varies) {
              std::vector<int64_t> d = largest[name];
              to.push_back(absl::StrCat(name, " -> ", DimsText(d)));
            }
            s.suggestions.push_back(
                {absl::StrCat("pad to the largest shape seen (", absl::StrJoin(to, ", "),
                              "), masking the padded rows out of the loss, or drop the short batch: ",
                              saved_largest, " compilation", saved_largest == 1 ? "" : "s", " saved"),
                 saved_largest, 0, "pad_to_largest"});
          }
        }
        if (saved != 0)
          s.suggestions.push_back(
              {absl::StrCat("pad to power-of-two buckets: ", absl::StrJoin(how, "; "),
                            saved > 0 ? absl::StrCat(": ", saved, " compilation", saved == 1 ? "" : "s", " saved")
                                      : " (the saving cannot be proved from this run: its graphs differ in more than "
                                        "their input shapes)"),
               saved, saved >= 0 ? 0 : -1, "pad_shapes"});
      }
    }
    if (c.count("value_read_cut")) {
      s.suggestions.push_back({absl::StrCat(at("value_read_cut"), " because a value was read mid-step: read it "
                                            "after mark_step, or only every N steps"),
                               -1, -1, "read_after_mark_step"});
      for (const ValueReadCuts& v : *cuts) {
        if (v.at != c.at("value_read_cut").second || v.executions_saved <= 0) continue;
        const std::string cost =
            v.compilations_added ? ", for 1 more compilation (the whole step's graph, compiled once)" : "";
        s.suggestions.push_back(
            {absl::StrCat("the read at ", v.at, " cut the graph ",
                          v.cuts > v.steps_cut ? absl::StrCat(v.cuts, " times ") : "", "in ", v.steps_cut, " of ",
                          v.steps, " steps (",
                          v.executions, " program runs in the run); reading it every ", v.every,
                          " steps instead: ", v.executions - v.executions_saved, " runs, ", v.executions_saved,
                          " program runs saved", cost),
             -v.compilations_added, v.executions_saved, "read_every_n"});
      }
    }
    if (count("graph_changed/cut_on_some_steps")) {
      // Reading after mark_step: every step runs whole, as the steps without the read did.
      std::string whole;
      std::set<int64_t> read_steps;
      for (const Cut& k : cuts_in_order)
        if (k.cause == "value_read") read_steps.insert(k.step);
      for (const Cut& k : cuts_in_order)
        if (k.site == site && !read_steps.count(k.step)) whole = k.fingerprint;
      std::vector<std::string> keys;
      int64_t runs_saved = 0;
      for (const Cut& k : cuts_in_order) {
        if (k.cause == "value_read") {
          runs_saved += k.read_followed;
          if (!k.read_followed) keys.push_back(whole.empty() ? site + "|whole" : whole);
          continue;
        }
        keys.push_back(read_steps.count(k.step) && k.site == site ? (whole.empty() ? site + "|whole" : whole)
                                                                   : k.fingerprint);
      }
      const int64_t saved = provable ? saved_with(keys, capacity) : -1;
      s.suggestions.push_back({absl::StrCat(at("graph_changed/cut_on_some_steps"),
                                            " because a value read cuts the step on some steps only: read it after "
                                            "mark_step (one graph for every step)",
                                            saved >= 0 ? absl::StrCat(": ", saved, " compilations and ", runs_saved,
                                                                      " program runs saved")
                                                       : ""),
                               saved, saved >= 0 ? runs_saved : -1, "read_after_mark_step"});
    }
    if (c.count("inlined_scalar_changed")) {
      // As data, the scalar no longer tells the graphs apart: merge each
      // graph whose only difference was the scalar with the one it was compared to.
      s.suggestions.push_back({absl::StrCat(at("inlined_scalar_changed"),
                                            " because a scalar crossed the scalar rule (0 and 1 are inlined): make it "
                                            "a tensor with Tensor::from_host so its value is data"),
                               count("inlined_scalar_changed"), 0, "scalar_as_tensor"});
    }
    if (c.count("cache_evicted")) {
      // Raising the capacity saves over the whole run: the saving is counted
      // at the first call site that lost programs, and the others point there
      // (each site had said the run's whole saving, so the sum was too much).
      const bool first_told = capacity_site.empty();
      if (first_told) capacity_site = Printable(s.call_site.substr(0, s.call_site.find(' ')));
      const int64_t saved = provable && first_told ? saved_with(base_keys, 0) : -1;
      const int64_t programs = [&] {
        std::set<std::string> all(base_keys.begin(), base_keys.end());
        return static_cast<int64_t>(all.size());
      }();
      s.suggestions.push_back({absl::StrCat(at("cache_evicted"), " because the in-memory cache (", capacity,
                                            capacity == 1 ? " program" : " programs",
                                            ") evicted programs used again: --cache-capacity ", programs,
                                            " (RecordingOptions::cache_capacity) keeps all of this run's programs",
                                            saved >= 0 ? absl::StrCat(" (", saved, saved == 1 ? " compilation" : " compilations",
                                                                      " saved over the run)")
                                            : !first_told ? absl::StrCat(" (its saving over the run is counted at ", capacity_site, ")")
                                                          : ""),
                               saved, saved >= 0 ? 0 : -1, "raise_cache_capacity"});
    }
    const std::map<std::string, std::string> advice = {
        {"input_dtype_changed", "an input's dtype changed: convert it once where it is made, so every step sees one dtype"},
        {"input_sharding_changed",
         "an input's layout changed: give mark_sharding one spec for it on every step (a layout propagated from "
         "another tensor's mark_sharding changes with it: set that annotation before the first step, or annotate "
         "this input too)"},
        {"graph_changed/ops_changed",
         "the computation changed (a branch on the host, an op replaced): one compilation per variant; to keep "
         "one graph, run the op on every step with a neutral value (an all-ones mask, a zero penalty as a "
         "tensor), or, for a branch on a value read back, compute both sides and select with where()"},
        {"graph_changed/optimizer_changed",
         "the optimizer changed: one compilation per optimizer (a planned switch, SGD for warm-up then AdamW, "
         "costs just that); otherwise create it once before the loop"},
        {"graph_changed/dims_changed",
         "an op's window or dims come from a host integer (a slice, reshape, pad or gather): fix it, or round it "
         "to a few sizes (one compilation each), masking what the larger size adds"},
        {"graph_changed/optimizer_on_some_steps",
         "the optimizer steps on some steps only (gradient accumulation, evaluation steps, a skipped update): "
         "one graph with its update and one without, each compiled once; nothing to fix unless more variants "
         "appear"},
        {"graph_changed/layer_added",
         "a layer joined the step (a config, a branch on the host): one compilation per set of layers (a planned "
         "variant, an early exit, costs just that); otherwise build the model once before the loop"},
        {"graph_changed/layer_removed",
         "a layer left the step (a config, a branch on the host): one compilation per set of layers (a planned "
         "variant, an early exit, costs just that); otherwise build the model once before the loop"},
        {"mesh_changed", "the mesh changed under a mark_sharding: one compilation per mesh; create the mesh once"},
        {"disk_cache_unreadable",
         "a compile cache file was damaged (it was removed and the program compiled again): nothing to change in "
         "the program; `shardscope check` does not look at cache files, so look at the disk that holds them"},
        {"graph_changed/remat_changed",
         "gradient checkpointing was switched: one compilation per setting; choose it once before the loop"},
        {"graph_changed/dropout_off",
         "a dropout became the identity (p 0, or training off), which is a graph of its own: one compilation "
         "per variant; a schedule that ends at p 0 can end at a small p (1e-6) instead to keep one graph"},
        {"graph_changed/dropout_on", "a dropout masks again: one compilation per variant (with and without it)"},
        {"graph_changed/parameter_frozen", "a parameter was frozen: one compilation per set of trained parameters; "
                                           "freeze before the first step, not during training"},
        {"graph_changed/parameter_unfrozen", "a parameter was unfrozen: one compilation per set of trained parameters"},
        {"graph_changed/constraint_changed",
         "a sharding constraint on an intermediate changed: keep one mark_sharding spec per value"},
        {"graph_changed/autocast_changed",
         "autocast was switched: keep the AutocastGuard around the same code on every step"},
        {"data_dependent_shape", "a shape follows the values (nonzero): pad the result to a fixed size"},
        {"options_changed", "compile options changed between steps (fusion, target profile): set them once"},
        {"call_site_changed", "the step is reached from another call site: call it from one place, or wrap it in "
                              "compile()"},
    };
    for (const auto& [key, text] : advice)
      if (c.count(key)) s.suggestions.push_back({absl::StrCat(at(key), ": ", text), -1, -1, key});
    // A trained parameter whose shape changed (a model resized by its config,
    // two models of different shapes through one step function): nothing to
    // pad, the cost named. (Data already in buckets gets no advice: nothing
    // is left to change.)
    if (c.count("input_shape_changed") && trained_shape_changed[site] &&
        std::none_of(s.suggestions.begin(), s.suggestions.end(), [](const Suggestion& g) {
          return g.kind == "pad_shapes" || g.kind == "pad_to_largest";
        }))
      s.suggestions.push_back(
          {absl::StrCat(at("input_shape_changed"),
                        ": a trained parameter's shape changed (a layer resized by its config, or two models of "
                        "different shapes through one step function): one compilation per model shape, nothing "
                        "to pad; give each model its own step function if its graphs should be told apart"),
           -1, -1, "input_shape_changed"});
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
    absl::StrAppend(&out, "\n", Printable(s.call_site), "\n  ", s.distinct_graphs, " distinct graph",
                    s.distinct_graphs == 1 ? "" : "s", ", ", s.misses, " compilation", s.misses == 1 ? "" : "s",
                    ", ", FormatNs(s.compile_ns), " compiling (host clock)\n");
    if (s.compiles.empty()) {  // every program it ran was compiled elsewhere first
      absl::StrAppend(&out,
                      "    every graph it ran was in the cache already (compiled at another call site)\n");
      for (const Suggestion& g : s.suggestions)
        absl::StrAppend(&out, "  suggestion: ", Printable(g.text), "\n");
      continue;
    }
    std::vector<std::vector<std::string>> t = {{"step", "cache", "cause", "at", "time", "detail"}};
    for (const CompileEvent& e : s.compiles)
      t.push_back({std::to_string(e.step), e.cache,
                   e.cause_kind.empty() ? "-" : e.cause_subkind.empty() ? e.cause_kind
                                                                        : e.cause_kind + "/" + e.cause_subkind,
                   e.at.empty() ? "-" : e.at, FormatNs(e.duration_ns), Clip(e.cause_detail)});
    out += AlignTable(t, "    ");
    for (const Suggestion& g : s.suggestions) absl::StrAppend(&out, "  suggestion: ", Printable(g.text), "\n");
  }
  return out;
}

std::string RenderRecompilesJson(const RecompilesReport& r) {
  nlohmann::json j;
  j["schema"] = "shardscope.recompiles/1";
  j["run_id"] = r.run_id;
  int64_t compilations = 0;
  j["call_sites"] = nlohmann::json::array();
  for (const CallSiteRecompiles& s : r.sites) {
    nlohmann::json site = {{"call_site", s.call_site},
                           {"distinct_graphs", s.distinct_graphs},
                           {"compilations", s.misses},
                           {"compile_ns", s.compile_ns}};
    compilations += s.misses;
    site["compiles"] = nlohmann::json::array();
    for (const CompileEvent& e : s.compiles)
      site["compiles"].push_back({{"step", e.step},
                                  {"graph_id", e.graph_id},
                                  {"cache", e.cache},
                                  {"cause_kind", e.cause_kind},
                                  {"cause_subkind", e.cause_subkind},
                                  {"at", e.at},
                                  {"duration_ns", e.duration_ns},
                                  {"detail", Clip(e.cause_detail)}});
    site["suggestions"] = nlohmann::json::array();
    for (const Suggestion& g : s.suggestions) {
      nlohmann::json sj = {{"kind", g.kind}, {"text", g.text}};
      sj["compilations_saved"] = g.compilations_saved >= 0 ? nlohmann::json(g.compilations_saved) : nlohmann::json();
      sj["program_runs_saved"] = g.executions_saved >= 0 ? nlohmann::json(g.executions_saved) : nlohmann::json();
      site["suggestions"].push_back(sj);
    }
    j["call_sites"].push_back(site);
  }
  j["distinct_graphs"] = r.distinct_graphs;
  j["compilations"] = compilations;
  return store::JsonText(j, 2) + "\n";
}

}  // namespace shardscope::analysis
