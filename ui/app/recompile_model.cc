// The Recompilations view's data; see recompile_model.h.
#include "ui/app/recompile_model.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardscope::app {
namespace {

std::string Location(const store::QueryResult& q, size_t i) {
  const std::string file = q.Text(i, "source_file");
  const int64_t line = q.Int(i, "source_line");
  if (file.empty()) return "";
  return line > 0 ? absl::StrCat(file, ":", line) : file;
}

absl::StatusOr<bool> Has(const store::Reader& r, const std::string& table, const std::string& column) {
  return r.HasColumn(table, column);
}

}  // namespace

const CompileRow* RecompilesModel::Find(int64_t compile_id) const {
  for (const CallSiteRecompiles& s : sites) {
    for (const CompileRow& c : s.compiles) {
      if (c.compile_id == compile_id) return &c;
    }
  }
  return nullptr;
}

absl::StatusOr<RecompilesModel> LoadRecompiles(const store::Reader& reader, int64_t run_id) {
  RecompilesModel out;
  const std::string run = std::to_string(run_id);
  auto subkind = Has(reader, "compilations", "cause_subkind");
  auto prev = Has(reader, "compilations", "prev_graph_id");
  auto total = Has(reader, "compilations", "diff_total");
  if (!subkind.ok()) return subkind.status();
  if (!prev.ok()) return prev.status();
  if (!total.ok()) return total.status();
  auto q = reader.Query(absl::StrCat(
      "SELECT compile_id, step, graph_id, cache, cause_kind, ", *subkind ? "cause_subkind" : "NULL AS cause_subkind",
      ", cause_detail, source_file, source_line, duration_ns, ", *prev ? "prev_graph_id" : "NULL AS prev_graph_id", ", ",
      *total ? "diff_total" : "0 AS diff_total",
      ", call_site, host_start_ns FROM compilations WHERE run_id = ?1 ORDER BY compile_id"),
                        {run});
  if (!q.ok()) return q.status();
  std::map<std::string, CallSiteRecompiles> by_site;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    CompileRow c;
    c.compile_id = q->Int(i, "compile_id");
    c.step = q->Int(i, "step");
    c.graph_id = q->Int(i, "graph_id", -1);
    c.prev_graph_id = q->Int(i, "prev_graph_id", -1);
    c.duration_ns = q->Int(i, "duration_ns");
    c.diff_total = q->Int(i, "diff_total");
    c.host_start_ns = q->Int(i, "host_start_ns");
    c.cache = q->Text(i, "cache");
    c.cause_kind = q->Text(i, "cause_kind");
    c.cause_subkind = q->Text(i, "cause_subkind");
    c.cause_detail = q->Text(i, "cause_detail");
    c.source = Location(*q, i);
    c.call_site = q->Text(i, "call_site");
    CallSiteRecompiles& site = by_site[c.call_site];
    site.call_site = c.call_site;
    ++out.compilations;
    if (c.is_miss()) {
      ++site.misses;
      ++out.misses;
      site.compile_ns += c.duration_ns;
    }
    site.compiles.push_back(std::move(c));
  }
  for (auto& [name, site] : by_site) {
    std::set<int64_t> graphs;
    for (const CompileRow& c : site.compiles) graphs.insert(c.graph_id);
    site.distinct_graphs = static_cast<int64_t>(graphs.size());
  }
  // The report's order and suggestions (a site with only cache hits is not in it).
  auto report = analysis::BuildRecompilesReport(reader, run_id);
  if (!report.ok()) return report.status();
  for (const analysis::CallSiteRecompiles& r : report->sites) {
    auto it = by_site.find(r.call_site);
    if (it == by_site.end()) continue;
    it->second.suggestions = r.suggestions;
    out.sites.push_back(std::move(it->second));
    by_site.erase(it);
  }
  for (auto& [name, site] : by_site) out.sites.push_back(std::move(site));

  auto imported = reader.HasTable("trace_imports");
  if (!imported.ok()) return imported.status();
  if (*imported) {
    auto files = reader.Query("SELECT count(*) AS n, min(file) AS file FROM trace_imports WHERE run_id = ?1", {run});
    if (!files.ok()) return files.status();
    if (files->Int(0, "n") > 0) {
      out.no_ir = absl::StrCat("This run was imported from another tool's trace (", files->Text(0, "file"),
                               files->Int(0, "n") > 1 ? absl::StrCat(" and ", files->Int(0, "n") - 1, " more") : "",
                               "): it has timelines but no IR, so there are no graphs to compare.");
      return out;
    }
  }
  auto graphs = reader.Query("SELECT count(*) AS n FROM graphs WHERE run_id = ?1 AND coalesce(ir_text, '') <> ''", {run});
  if (!graphs.ok()) return graphs.status();
  if (graphs->Int(0, "n") == 0 && out.compilations > 0) {
    out.no_ir = "This run stored no graph text (IR), so its compilations have no graphs to compare.";
  }
  return out;
}

absl::StatusOr<GraphPair> LoadGraphPair(const store::Reader& reader, int64_t run_id, int64_t compile_id) {
  GraphPair out;
  out.compile_id = compile_id;
  const std::string run = std::to_string(run_id);
  auto prev = reader.HasColumn("compilations", "prev_graph_id");
  if (!prev.ok()) return prev.status();
  auto c = reader.Query(absl::StrCat("SELECT graph_id, cache, cause_kind, ",
                                     *prev ? "prev_graph_id, diff_total" : "NULL AS prev_graph_id, 0 AS diff_total",
                                     " FROM compilations WHERE run_id = ?1 AND compile_id = ?2"),
                        {run, std::to_string(compile_id)});
  if (!c.ok()) return c.status();
  if (c->rows.empty()) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, " has no compilation ", compile_id));
  }
  out.new_graph_id = c->Int(0, "graph_id", -1);
  out.old_graph_id = c->Int(0, "prev_graph_id", -1);
  out.diff_total = c->Int(0, "diff_total");
  auto text = [&](int64_t graph_id) -> absl::StatusOr<std::string> {
    auto g = reader.Query("SELECT ir_text FROM graphs WHERE run_id = ?1 AND graph_id = ?2",
                          {run, std::to_string(graph_id)});
    if (!g.ok()) return g.status();
    return g->rows.empty() ? std::string() : g->Text(0, "ir_text");
  };
  auto new_text = text(out.new_graph_id);
  if (!new_text.ok()) return new_text.status();
  if (new_text->empty()) {
    out.note = absl::StrCat("graph ", out.new_graph_id, " has no stored IR text");
    return out;
  }
  out.new_program = ParseIr(*new_text);
  if (out.old_graph_id < 0) {
    const std::string cache = c->Text(0, "cache"), cause = c->Text(0, "cause_kind");
    out.note = cache != "miss" ? absl::StrCat("a cache hit (", cache, "): graph ", out.new_graph_id,
                                              " ran as compiled before, so there is nothing to compare")
               : cause == "first_compile" || cause == "value_read_cut" || cause.empty()
                   ? "the first graph of its call site: nothing earlier to compare it with"
                   : absl::StrCat(cause, ": the same graph as before (no earlier graph differs)");
    out.alignment = AlignGraphs(IrProgram{}, out.new_program, {});
    for (AlignedRow& row : out.alignment.rows) row.change.clear();  // nothing to differ from
    out.alignment.differences = 0;
    return out;
  }
  auto old_text = text(out.old_graph_id);
  if (!old_text.ok()) return old_text.status();
  out.old_program = ParseIr(*old_text);
  auto has_diffs = reader.HasTable("compile_diffs");
  if (!has_diffs.ok()) return has_diffs.status();
  if (*has_diffs) {
    auto d = reader.Query(
        "SELECT change, opcode, op_index, what, source_file, source_line, via FROM compile_diffs"
        " WHERE run_id = ?1 AND compile_id = ?2 ORDER BY ordinal",
        {run, std::to_string(compile_id)});
    if (!d.ok()) return d.status();
    for (size_t i = 0; i < d->rows.size(); ++i) {
      DiffRow r;
      r.change = d->Text(i, "change");
      r.opcode = d->Text(i, "opcode");
      r.op_index = d->Int(i, "op_index", -1);
      r.what = d->Text(i, "what");
      r.source_file = d->Text(i, "source_file");
      r.source_line = d->Int(i, "source_line");
      r.via = d->Text(i, "via");
      out.diffs.push_back(std::move(r));
    }
  }
  out.alignment = AlignGraphs(out.old_program, out.new_program, out.diffs);
  if (static_cast<int64_t>(out.diffs.size()) < out.diff_total) {
    out.alignment.from_diff = false;
    out.note = absl::StrFormat("the stored diff keeps %d of its %d differences: ops past them pair by order only",
                               out.diffs.size(), out.diff_total);
  }
  for (size_t i = 0; i < out.alignment.rows.size(); ++i) {
    if (!out.alignment.rows[i].change.empty()) {
      out.first_difference = static_cast<int>(i);
      break;
    }
  }
  return out;
}

}  // namespace shardscope::app
