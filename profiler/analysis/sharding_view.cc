#include "profiler/analysis/sharding_view.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "profiler/analysis/format.h"
#include "store/index_ranges.h"

namespace shardscope::analysis {
namespace {

struct Range {
  int64_t begin = 0, end = 0;
  bool operator<(const Range& o) const { return begin != o.begin ? begin < o.begin : end < o.end; }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
  std::string ToString() const { return absl::StrCat(begin, ":", end); }
};

// "[0:128,0:256]" -> {{0,128},{0,256}}; "[]" (a scalar) -> {}.
absl::StatusOr<std::vector<Range>> ParseRanges(const std::string& text) {
  auto parsed = store::ParseIndexRanges(text);
  if (!parsed.ok()) return parsed.status();
  std::vector<Range> out;
  for (const auto& [b, e] : *parsed) out.push_back({b, e});
  return out;
}

// An annotation's row carries the mark_sharding line; the others where the
// tensor was made.
std::string Source(const ShardingRow& t) {
  if (t.source_file.empty()) return t.source;
  return absl::StrCat(t.source, t.source == "annotated" ? " at " : " (made at ", t.source_file, ":", t.source_line,
                      t.source == "annotated" ? "" : ")");
}

std::string PerChip(const TensorTiles& tt) {
  const ShardingRow& t = tt.tensor;
  if (t.devices == 0) return "not placed";
  std::string bytes = t.min_bytes == t.max_bytes ? FormatBytes(t.max_bytes)
                                                 : absl::StrCat(FormatBytes(t.min_bytes), "-", FormatBytes(t.max_bytes));
  return absl::StrCat(bytes, "/chip on ", t.devices, " (of ", FormatBytes(tt.global_bytes), ")");
}

// The grid: rows are the first split dim's ranges, columns the second's (one
// row when one dim is split); more split dims list their tiles instead.
std::string Grid(const TensorTiles& t, const std::string& indent) {
  if (t.split_dims.empty()) return absl::StrCat(indent, "whole on ", ChipsText(t.tile_chips.empty() ? std::vector<int64_t>{} : t.tile_chips[0]), "\n");
  if (t.split_dims.size() > 2) {
    std::vector<std::vector<std::string>> rows = {{absl::StrCat("tile (", absl::StrJoin(t.split_dims, ","), ")"),
                                                   "held by"}};
    std::vector<size_t> idx(t.split_dims.size(), 0);
    for (const auto& chips : t.tile_chips) {
      std::vector<std::string> parts;
      for (size_t k = 0; k < idx.size(); ++k) parts.push_back(t.ranges[k][idx[k]]);
      rows.push_back({absl::StrCat("[", absl::StrJoin(parts, ","), "]"), ChipsText(chips)});
      for (int k = static_cast<int>(idx.size()) - 1; k >= 0; --k) {
        if (++idx[k] < t.ranges[k].size()) break;
        idx[k] = 0;
      }
    }
    return AlignTable(rows, indent);
  }
  const bool two = t.split_dims.size() == 2;
  const size_t nrows = two ? t.ranges[0].size() : 1, ncols = two ? t.ranges[1].size() : t.ranges[0].size();
  std::vector<std::string> cells(t.tile_chips.size());
  size_t width = 0;
  for (size_t k = 0; k < cells.size(); ++k) width = std::max(width, (cells[k] = ChipsText(t.tile_chips[k])).size());
  for (const auto& dim : t.ranges)
    for (const std::string& r : dim) width = std::max(width, r.size());
  std::string label_pad(two ? 4 + t.ranges[0].back().size() + 7 : 0, ' ');
  auto pad = [&](const std::string& s) { return s + std::string(width - s.size(), ' '); };
  std::string rule = label_pad + "+";
  for (size_t c = 0; c < ncols; ++c) rule += std::string(width + 2, '-') + "+";
  std::string out = indent + label_pad + " ";
  const std::vector<std::string>& cols = t.ranges[two ? 1 : 0];
  for (size_t c = 0; c < ncols; ++c) absl::StrAppend(&out, " ", pad(cols[c]), "  ");
  absl::StrAppend(&out, " (dim ", t.split_dims[two ? 1 : 0], ")\n", indent, rule, "\n");
  for (size_t r = 0; r < nrows; ++r) {
    std::string label = two ? absl::StrCat("dim ", t.split_dims[0], " ", t.ranges[0][r]) : "";
    out += indent + label + std::string(label_pad.size() - label.size(), ' ') + "|";
    for (size_t c = 0; c < ncols; ++c) absl::StrAppend(&out, " ", pad(cells[r * ncols + c]), " |");
    out += "\n" + indent + rule + "\n";
  }
  return out;
}

}  // namespace

std::string ChipsText(const std::vector<int64_t>& chips) {
  if (chips.empty()) return "-";
  return absl::StrCat(chips.size() == 1 ? "chip " : "chips ", absl::StrJoin(chips, ","));
}

absl::StatusOr<ShardingView> BuildShardingView(const store::Reader& rd, int64_t run_id, const std::string& tensor) {
  const std::string run = std::to_string(run_id);
  ShardingView v;
  v.run_id = run_id;
  auto head = rd.Query("SELECT sample, mesh, mesh_axes, sharding, num_devices FROM runs WHERE run_id = ?1", {run});
  if (!head.ok()) return head.status();
  if (head->rows.empty()) return absl::NotFoundError(absl::StrCat("no run ", run_id, " in ", rd.path()));
  v.sample = head->Text(0, "sample");
  v.mesh = head->Text(0, "mesh");
  v.mesh_axes = head->Text(0, "mesh_axes");
  v.strategy = head->Text(0, "sharding");
  const int64_t run_chips = head->Int(0, "num_devices");
  // The tensors, then their placements on their own: a pod of thousands of
  // chips has hundreds of thousands of placements, and joining them to the
  // tensors repeated each tensor's text columns on every one (10 s of the
  // app's opening on a 4096-chip pod under load; half a second now).
  auto q = rd.Query(
      "SELECT t.tensor_id, t.name, t.dtype, t.shape, t.sharding, t.sharding_source, t.source_file,"
      " t.source_line FROM tensors t WHERE t.run_id = ?1 AND (?2 = '' OR t.name = ?2) ORDER BY t.step, t.tensor_id",
      {run, tensor});
  if (!q.ok()) return q.status();
  std::map<int64_t, size_t> at;                           // tensor id -> index in v.tensors
  std::vector<std::vector<std::pair<int64_t, std::vector<Range>>>> shards;  // per tensor: (chip, ranges)
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const int64_t id = q->Int(i, "tensor_id");
    auto [it, fresh] = at.emplace(id, v.tensors.size());
    if (!fresh) continue;
    TensorTiles fresh_tensor;
    fresh_tensor.tensor = TensorColumns(*q, i);
    v.tensors.push_back(std::move(fresh_tensor));
    shards.emplace_back();
  }
  // A damaged placement is left out and said; the other tensors still show.
  constexpr size_t kDamagedShown = 8;
  auto damaged = [&](const std::string& what, int64_t chips) {
    if (v.damaged.size() < kDamagedShown) {
      v.damaged.push_back(what);
      v.damaged_shown += chips;
    }
    v.damaged_rows += chips;
  };
  auto spans = store::PlacementSpansSql(rd);
  if (!spans.ok()) return spans.status();
  absl::Status read = rd.ForEachRow(
      absl::StrCat("SELECT tensor_id, first_device, last_device, index_ranges, bytes FROM ", *spans,
                   " WHERE run_id = ?1 ORDER BY tensor_id, first_device"),
      {run}, [&](const std::vector<store::Cell>& row) {
        int64_t id = 0, first = 0, last = 0, bytes = 0;
        if (!row[0] || !absl::SimpleAtoi(*row[0], &id)) return;  // no tensor to put it under
        auto it = at.find(id);
        if (it == at.end()) return;  // another tensor than the one asked for
        const std::string where =
            absl::StrCat("tensor '", Printable(v.tensors[it->second].tensor.name), "' (tensor_id ", id, ")");
        if (!row[1] || !absl::SimpleAtoi(*row[1], &first) || !row[2] || !absl::SimpleAtoi(*row[2], &last) ||
            !row[4] || !absl::SimpleAtoi(*row[4], &bytes) || bytes < 0) {
          damaged(absl::StrCat(where, ": device_id or bytes is not a number"), 1);
          return;
        }
        const std::string on = first == last ? absl::StrCat("chip ", first) : absl::StrCat("chips ", first, "-", last);
        if (last < first || first < 0 || (run_chips > 0 && last >= run_chips)) {
          damaged(absl::StrCat(where, ", ", on, ": not chips of the run (it has ", run_chips, ")"),
                  std::max<int64_t>(1, std::min(last, std::max<int64_t>(run_chips - 1, first)) - first + 1));
          return;
        }
        const int64_t chips = last - first + 1;
        auto ranges = ParseRanges(row[3].value_or(""));
        if (!ranges.ok()) {
          damaged(absl::StrCat(where, ", ", on, ": ", Printable(std::string(ranges.status().message()))), chips);
          return;
        }
        // Every shard has its tensor's rank (tensors.shape), else the first one's.
        const int rank = store::ShapeRank(v.tensors[it->second].tensor.shape);
        const size_t want = rank >= 0                    ? static_cast<size_t>(rank)
                            : shards[it->second].empty() ? ranges->size()
                                                         : shards[it->second][0].second.size();
        if (ranges->size() != want) {
          damaged(absl::StrCat(where, ", ", on, ": ", ranges->size(), " dimensions where the tensor has ", want),
                  chips);
          return;
        }
        ShardingRow& t = v.tensors[it->second].tensor;
        t.min_bytes = t.devices == 0 ? bytes : std::min(t.min_bytes, bytes);
        t.max_bytes = std::max(t.max_bytes, bytes);
        t.devices += chips;
        for (int64_t chip = first; chip <= last; ++chip) shards[it->second].push_back({chip, *ranges});
      });
  if (!read.ok()) return read;
  if (v.tensors.empty() && !tensor.empty()) {
    auto names = rd.Query("SELECT DISTINCT name FROM tensors WHERE run_id = ?1 ORDER BY name", {run});
    std::vector<std::string> all;
    if (names.ok())
      for (size_t i = 0; i < names->rows.size(); ++i) all.push_back(names->Text(i, "name"));
    return absl::NotFoundError(absl::StrCat("run ", run_id, " has no tensor '", tensor, "'; it has: ",
                                            all.empty() ? "none" : absl::StrJoin(all, ", ")));
  }
  if (absl::Status st = ReadRematerializations(rd, run_id, &v.rematerializations); !st.ok()) return st;
  if (absl::Status st = ReadAutoSharding(rd, run_id, &v.auto_sharding); !st.ok()) return st;
  for (size_t k = 0; k < v.tensors.size(); ++k) {
    TensorTiles& t = v.tensors[k];
    const auto& s = shards[k];
    if (s.empty()) continue;
    const size_t rank = s[0].second.size();
    int64_t elements = 1;
    std::vector<std::vector<Range>> distinct(rank);
    for (size_t d = 0; d < rank; ++d) {
      std::set<Range> seen;
      for (const auto& [chip, ranges] : s) seen.insert(ranges[d]);
      distinct[d].assign(seen.begin(), seen.end());
      elements *= distinct[d].back().end;
      if (distinct[d].size() > 1) t.split_dims.push_back(static_cast<int>(d));
    }
    // Whole bytes: the shard bytes scaled by the elements it covers.
    int64_t first_elements = 1;
    for (const Range& r : s[0].second) first_elements *= r.end - r.begin;
    t.global_bytes = first_elements > 0 ? t.tensor.max_bytes / first_elements * elements : 0;
    size_t tiles = 1;
    for (int d : t.split_dims) {
      std::vector<std::string> names;
      for (const Range& r : distinct[d]) names.push_back(r.ToString());
      t.ranges.push_back(names);
      tiles *= names.size();
    }
    t.tile_chips.assign(tiles, {});
    for (const auto& [chip, ranges] : s) {
      size_t tile = 0;
      for (int d : t.split_dims) {
        const auto& dr = distinct[d];
        tile = tile * dr.size() + (std::find(dr.begin(), dr.end(), ranges[d]) - dr.begin());
      }
      t.tile_chips[tile].push_back(chip);
    }
  }
  return v;
}

namespace {
// One value's chain: its layout walked back through the ops propagation
// carried it through, to the annotation, auto-sharding or default it started from.
std::string ChainTable(const store::Reader& rd, const std::string& run, const store::QueryResult& all_rows,
                       const std::map<int64_t, size_t>& row_of, int64_t at);
}  // namespace

absl::StatusOr<std::string> RenderShardingChain(const store::Reader& rd, int64_t run_id, const std::string& name) {
  const std::string run = std::to_string(run_id);
  auto graph = rd.Query("SELECT MAX(graph_id) AS g FROM sharding_decisions WHERE run_id = ?1 AND name = ?2", {run, name});
  if (!graph.ok()) return graph.status();
  if (graph->rows.empty() || graph->Text(0, "g").empty()) {
    auto some = rd.Query("SELECT DISTINCT name FROM sharding_decisions WHERE run_id = ?1 ORDER BY op_id LIMIT 12", {run});
    std::vector<std::string> names;
    if (some.ok())
      for (size_t i = 0; i < some->rows.size(); ++i) names.push_back(some->Text(i, "name"));
    return absl::NotFoundError(absl::StrCat("run ", run_id, " decided no sharding for '", name, "'",
                                            names.empty() ? " (it has no sharding decisions)"
                                                          : absl::StrCat("; names look like: ", absl::StrJoin(names, ", "))));
  }
  const std::string g = graph->Text(0, "g");
  auto all = rd.Query("SELECT op_id, name, sharding, source, via, source_file, source_line, from_op_id"
                      " FROM sharding_decisions WHERE run_id = ?1 AND graph_id = ?2",
                      {run, g});
  if (!all.ok()) return all.status();
  std::map<int64_t, size_t> row_of;
  std::vector<int64_t> named;  // every value of the graph with this name (two tensors may share one)
  for (size_t i = 0; i < all->rows.size(); ++i) {
    row_of[all->Int(i, "op_id")] = i;
    if (all->Text(i, "name") == name) named.push_back(all->Int(i, "op_id"));
  }
  std::string out =
      absl::StrCat("run ", run_id, ", graph ", g, ": where the layout of ", Printable(name), " came from",
                   named.size() > 1 ? absl::StrCat(" (", named.size(), " values of the graph have this name: each "
                                                   "one's chain, in op order)")
                                    : "",
                   "\n");
  for (size_t k = 0; k < named.size(); ++k) {
    if (k > 0) out += "\n";
    out += ChainTable(rd, run, *all, row_of, named[k]);
  }
  return out;
}

namespace {
std::string ChainTable(const store::Reader& rd, const std::string& run, const store::QueryResult& all_rows,
                       const std::map<int64_t, size_t>& row_of, int64_t at) {
  const store::QueryResult* all = &all_rows;
  std::vector<std::vector<std::string>> rows = {{"", "value", "sharding", "how", "made at"}};
  std::set<int64_t> seen;
  for (int step = 0; at >= 0 && seen.insert(at).second; ++step) {
    const size_t i = row_of.at(at);
    const std::string source = all->Text(i, "source"), via = all->Text(i, "via");
    std::string how = source == "propagated" ? absl::StrCat("propagated through ", via) : source;
    if (source != "propagated") {
      // An input's layout: the tensor record knows whether mark_sharding, auto-sharding or the default made it.
      // Two inputs may share a name: the record with this layout first.
      auto t = rd.Query("SELECT sharding_source, source_file, source_line FROM tensors"
                        " WHERE run_id = ?1 AND name = ?2 ORDER BY sharding = ?3 DESC, step DESC LIMIT 1",
                        {run, all->Text(i, "name"), all->Text(i, "sharding")});
      if (t.ok() && !t->rows.empty())
        how = absl::StrCat(t->Text(0, "sharding_source"), t->Text(0, "source_file").empty() ? "" : " at ",
                           t->Text(0, "source_file"),
                           t->Text(0, "source_file").empty() ? "" : absl::StrCat(":", t->Int(0, "source_line")));
    }
    const std::string file = all->Text(i, "source_file");
    // NULL: its sharding_texts row is gone (damage `shardscope check` names).
    const std::string sharding = all->Text(i, "sharding", "(text missing from the file: see `shardscope check`)");
    rows.push_back({step == 0 ? "" : "<-", all->Text(i, "name"), sharding, how,
                    file.empty() ? "" : absl::StrCat(file, ":", all->Int(i, "source_line"))});
    if (source != "propagated") break;
    const int64_t from = all->Int(i, "from_op_id", -1);
    at = row_of.count(from) ? from : -1;
  }
  return AlignTable(rows, "  ");
}
}  // namespace

std::string DamagedPlacementsText(const ShardingView& v) {
  if (v.damaged_rows == 0) return "";
  std::string out =
      absl::StrCat("\n", v.damaged_rows, v.damaged_rows == 1 ? " placement" : " placements",
                   " left out, damaged in the file's shard_placements (`shardscope check` lists the"
                   " file's damage):\n");
  for (const std::string& d : v.damaged) absl::StrAppend(&out, "  ", d, "\n");
  if (v.damaged_rows > v.damaged_shown) absl::StrAppend(&out, "  and ", v.damaged_rows - v.damaged_shown, " more\n");
  return out;
}

std::string RenderShardingText(const ShardingView& v, bool all_grids) {
  std::string out = absl::StrCat("run ", v.run_id, ": ", Printable(v.sample), " on mesh ", Printable(v.mesh),
                                 " (axes ", Printable(v.mesh_axes), "), sharding ",
                                 v.strategy.empty() ? "-" : Printable(v.strategy), "\n\n");
  if (v.tensors.empty()) return out + "no tensors recorded\n";
  std::vector<std::vector<std::string>> table = {{"tensor", "type", "sharding", "source", "held"}};
  for (const TensorTiles& tt : v.tensors) {
    const ShardingRow& t = tt.tensor;
    table.push_back({t.name, t.dtype + t.shape, t.sharding, Source(t), PerChip(tt)});
  }
  out += AlignTable(table, "  ");
  out += DamagedPlacementsText(v);
  // One grid per layout (sharding and shape), naming the tensors that share it.
  std::map<std::string, std::vector<const TensorTiles*>> layouts;
  std::vector<std::string> order;
  for (const TensorTiles& tt : v.tensors) {
    const ShardingRow& t = tt.tensor;
    const std::string key = all_grids ? std::to_string(t.tensor_id) : t.sharding + " " + t.shape;
    if (!layouts.count(key)) order.push_back(key);
    layouts[key].push_back(&tt);
  }
  if (v.rematerializations.empty()) {
    out += "\nNo involuntary full rematerializations.\n";
  } else {
    absl::StrAppend(&out, "\n", v.rematerializations.size(),
                    " involuntary full rematerializations (a split value gathered whole on every chip):\n");
    std::vector<std::vector<std::string>> rows = {{"graph", "value", "needed whole by", "bytes", "made at"}};
    for (const RematRow& m : v.rematerializations)
      rows.push_back({std::to_string(m.graph_id), m.value, m.op, FormatBytes(m.bytes),
                      absl::StrCat(m.source_file, ":", m.source_line)});
    out += AlignTable(rows, "  ");
  }
  for (const AutoShardingSummary& a : v.auto_sharding) {
    absl::StrAppend(&out, "\nAuto-sharding at step ", a.step, ": ", Printable(a.method), " search, ", a.evaluations,
                    " layouts scored of ", absl::StrFormat("%.3g", a.combinations), " in ",
                    absl::StrFormat("%.1f", static_cast<double>(a.search_ns) / 1e9), " s (host clock), budget ",
                    a.memory_budget > 0 ? FormatBytes(a.memory_budget) : "none", " per chip\n");
    std::vector<std::vector<std::string>> rows = {{"group", "tensors", "layout", "sharding"}};
    for (const auto& c : a.choices) rows.push_back({c.group, std::to_string(c.tensors), c.layout, c.sharding});
    out += AlignTable(rows, "  ");
    absl::StrAppend(&out, "  modeled step on the ", Printable(a.profile), " profile:\n");
    std::vector<std::vector<std::string>> cost = {{"strategy", "modeled step", "collectives", "peak/chip", ""}};
    for (const auto& c : a.candidates)
      cost.push_back({c.strategy + (c.chosen ? " (chosen)" : ""), absl::StrFormat("%.3f ms", c.modeled_ns / 1e6),
                      absl::StrFormat("%.3f ms (%d)", c.collective_ns / 1e6, c.collectives), FormatBytes(c.peak_bytes),
                      c.fits ? "" : "does not fit"});
    out += AlignTable(cost, "    ");
  }
  for (const std::string& key : order) {
    const auto& ts = layouts[key];
    const ShardingRow& t = ts[0]->tensor;
    std::string names = Printable(t.name);
    if (ts.size() > 1) absl::StrAppend(&names, " and ", ts.size() - 1, " more with this layout");
    absl::StrAppend(&out, "\n", names, ": ", Printable(t.dtype + t.shape), " ", Printable(t.sharding), "\n",
                    Grid(*ts[0], "  "));
  }
  return out;
}

}  // namespace shardscope::analysis
