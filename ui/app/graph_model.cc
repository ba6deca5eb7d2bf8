// The Graph view's data; see graph_model.h.
#include "ui/app/graph_model.h"

#include <algorithm>
#include <deque>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardscope::app {

absl::StatusOr<std::vector<GraphSummary>> ListGraphs(const store::Reader& reader, int64_t run_id) {
  auto q = reader.Query(
      "SELECT graph_id, op_count, coalesce(call_site, '') AS call_site FROM graphs WHERE run_id = ?1"
      " AND coalesce(ir_text, '') <> '' ORDER BY graph_id",
      {std::to_string(run_id)});
  if (!q.ok()) return q.status();
  std::vector<GraphSummary> out;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    out.push_back(GraphSummary{q->Int(i, "graph_id"), q->Int(i, "op_count"), q->Text(i, "call_site")});
  }
  return out;
}

absl::StatusOr<GraphModel> LoadGraphModel(const store::Reader& reader, int64_t run_id, int64_t graph_id,
                                          bool partitioned, int measure_steps) {
  GraphModel out;
  out.graph_id = graph_id;
  out.partitioned = partitioned;
  const std::string run = std::to_string(run_id), graph = std::to_string(graph_id);
  auto g = reader.Query("SELECT coalesce(ir_text, '') AS traced, coalesce(ir_text_after, '') AS after FROM graphs"
                        " WHERE run_id = ?1 AND graph_id = ?2",
                        {run, graph});
  if (!g.ok()) return g.status();
  if (g->rows.empty()) return absl::NotFoundError(absl::StrCat("run ", run_id, " has no graph ", graph_id));
  std::string text = g->Text(0, partitioned ? "after" : "traced");
  if (text.empty() && partitioned) {
    out.note = "no text after partitioning was stored: the program as traced";
    out.partitioned = partitioned = false;
    text = g->Text(0, "traced");
  }
  if (text.empty()) {
    out.note = absl::StrCat("graph ", graph_id, " has no stored IR text");
    return out;
  }
  out.program = ParseIr(text);
  if (!partitioned) {
    if (out.note.empty()) {
      out.note = "as traced (one program for all chips): costs and times are the partitioned program's";
    }
    return out;
  }

  // Costs per op of the per-device program, and what each fused kernel holds.
  auto has_ops = reader.HasTable("ops");
  if (!has_ops.ok()) return has_ops.status();
  if (*has_ops) {
    auto ops = reader.Query(
        "SELECT op_id, name, opcode, shape, roofline, flops, bytes_read, bytes_written, modeled_ns FROM ops"
        " WHERE run_id = ?1 AND graph_id = ?2",
        {run, graph});
    if (!ops.ok()) return ops.status();
    for (size_t i = 0; i < ops->rows.size(); ++i) {
      OpCost c;
      c.name = ops->Text(i, "name");
      c.opcode = ops->Text(i, "opcode");
      c.shape = ops->Text(i, "shape");
      c.roofline = ops->Text(i, "roofline");
      c.flops = ops->Real(i, "flops");
      c.bytes_read = ops->Int(i, "bytes_read");
      c.bytes_written = ops->Int(i, "bytes_written");
      c.modeled_ns = ops->Int(i, "modeled_ns", -1);
      out.costs[ops->Int(i, "op_id")] = std::move(c);
    }
  }
  auto has_fusion = reader.HasTable("fusion_decisions");
  if (!has_fusion.ok()) return has_fusion.status();
  if (*has_fusion) {
    // A fused producer runs inside its consumer's kernel, `fusion.<root id>`.
    auto f = reader.Query(
        "SELECT consumer_op_id, producer_op_id, kernel FROM fusion_decisions WHERE run_id = ?1 AND graph_id = ?2"
        " AND fused AND kernel LIKE 'fusion.%'",
        {run, graph});
    if (!f.ok()) return f.status();
    for (size_t i = 0; i < f->rows.size(); ++i) {
      int64_t root = -1;
      const std::string kernel = f->Text(i, "kernel");
      if (!absl::SimpleAtoi(kernel.substr(kernel.find('.') + 1), &root)) continue;
      for (const char* col : {"consumer_op_id", "producer_op_id"}) {
        const int64_t id = f->Int(i, col);
        if (id != root) out.kernels_of[id].push_back(root);
      }
      out.members[root].push_back(root);
    }
    for (auto& [op, roots] : out.kernels_of) {
      std::sort(roots.begin(), roots.end());
      roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
      for (int64_t root : roots) out.members[root].push_back(op);
    }
    for (auto& [root, ops] : out.members) {
      std::sort(ops.begin(), ops.end());
      ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    }
  }

  // Measured: each kernel's slices on the device clock over the first steps
  // that ran this program (found through the chunks' graph and step).
  auto steps = reader.Query(absl::StrCat("SELECT DISTINCT step FROM executions WHERE run_id = ?1 AND graph_id = ?2"
                                         " ORDER BY step LIMIT ",
                                         std::max(1, measure_steps)),
                            {run, graph});
  if (!steps.ok()) return steps.status();
  auto tracks = reader.Query("SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = 'device'", {run});
  if (!tracks.ok()) return tracks.status();
  std::vector<std::string> step_list, track_list;
  for (size_t i = 0; i < steps->rows.size(); ++i) {
    step_list.push_back(std::to_string(steps->Int(i, "step")));
    out.measured_steps.push_back(static_cast<int32_t>(steps->Int(i, "step")));
  }
  for (size_t i = 0; i < tracks->rows.size(); ++i) track_list.push_back(std::to_string(tracks->Int(i, "track_id")));
  if (!step_list.empty() && !track_list.empty()) {
    auto m = reader.Query(absl::StrCat("SELECT op_id, count(*) AS n, sum(dur_ns) AS total FROM slices WHERE run_id = ?1"
                                       " AND graph_id = ?2 AND op_id IS NOT NULL AND step IN (",
                                       absl::StrJoin(step_list, ","), ") AND track_id IN (",
                                       absl::StrJoin(track_list, ","), ") GROUP BY op_id"),
                          {run, graph});
    if (!m.ok()) return m.status();
    for (size_t i = 0; i < m->rows.size(); ++i) {
      out.measured[m->Int(i, "op_id")] = OpMeasured{m->Int(i, "n"), m->Int(i, "total")};
    }
  } else {
    out.note = "no device-clock runs of this program were recorded: measured times are unknown";
  }
  return out;
}

std::vector<std::pair<int, int>> Neighbourhood(const IrProgram& program, int center, int depth) {
  std::vector<std::pair<int, int>> out;
  const int n = static_cast<int>(program.ops.size());
  if (center < 0 || center >= n) return out;
  // Users of each op, once.
  std::map<int64_t, int> index_of;
  for (int i = 0; i < n; ++i) index_of[program.ops[i].id] = i;
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    for (int64_t operand : program.ops[i].operands) {
      auto it = index_of.find(operand);
      if (it != index_of.end()) users[it->second].push_back(i);
    }
  }
  std::vector<int> dist(n, -1);
  std::deque<int> queue{center};
  dist[center] = 0;
  while (!queue.empty()) {
    const int at = queue.front();
    queue.pop_front();
    if (dist[at] >= depth) continue;
    auto visit = [&](int next) {
      if (dist[next] < 0) {
        dist[next] = dist[at] + 1;
        queue.push_back(next);
      }
    };
    for (int64_t operand : program.ops[at].operands) {
      auto it = index_of.find(operand);
      if (it != index_of.end()) visit(it->second);
    }
    for (int u : users[at]) visit(u);
  }
  for (int i = 0; i < n; ++i) {
    if (dist[i] >= 0) out.emplace_back(i, dist[i]);
  }
  return out;
}

}  // namespace shardscope::app
