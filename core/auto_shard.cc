#include "core/auto_shard.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/buffer_assignment.h"
#include "core/context.h"
#include "core/lazy.h"
#include "profiler/trace/recorder.h"
#include "runtime/collectives.h"
#include "runtime/interconnect.h"
#include "runtime/simulate.h"

namespace shardscope {
namespace {

std::vector<AxisSpec> SpecOf(const compiler::AxesOfDims& axes, const Mesh& mesh) {
  std::vector<AxisSpec> spec;
  for (const auto& d : axes) {
    std::vector<AxisSpec> parts;
    for (int a : d) parts.emplace_back(mesh.axis_names()[a]);
    spec.push_back(parts.empty() ? AxisSpec(none) : parts.size() == 1 ? parts[0] : AxisSpec::Tuple(parts));
  }
  return spec;
}

trace::AutoShardingCandidateRow Row(const std::string& name, const compiler::StepEstimate& e, bool chosen) {
  return {name, e.modeled_ns, e.collective_ns, e.collectives, e.peak_bytes, e.fits, e.rematerializations, chosen};
}

}  // namespace

absl::StatusOr<AutoShardingChoice> auto_shard_pending_step(
    const Mesh& mesh, const std::function<std::string(const std::string&)>& group_of,
    const std::vector<HandStrategy>& compare, const compiler::AutoShardingOptions& options) {
  const int64_t t0 = trace::HostNowNs();
  runtime::Client& client = GetClient();
  if (mesh.size() != client.num_devices())
    return absl::InvalidArgumentError(absl::StrCat("auto-sharding: the mesh has ", mesh.size(),
                                                   " devices but the runtime has ", client.num_devices()));
  auto g = pending_graph();
  if (!g.ok()) return g.status();
  const auto& params = g->module->parameters();
  if (params.empty()) return absl::FailedPreconditionError("auto-sharding: no step is pending (trace one first)");
  std::vector<compiler::AutoShardGroup> groups;
  std::map<std::string, size_t> group_index;
  for (size_t k = 0; k < params.size(); ++k) {
    params[k]->sharding.reset();  // chosen here, whatever it was
    if (params[k]->shape.rank() == 0) continue;
    const std::string name = group_of(params[k]->name);
    auto [it, fresh] = group_index.try_emplace(name, groups.size());
    if (fresh) groups.push_back({name, {}});
    groups[it->second].params.push_back(static_cast<int>(k));
  }
  const compiler::CostModel model(client.profile());
  // Which chips a step along a mesh axis crosses the data-center network
  // between: another host, except on a torus, whose ICI links join its hosts
  // (the simulator routes it so): a 2x4 torus had its 4-chip axis priced at
  // DCN speed, dp 8.1 ms modeled against 0.98 ms scheduled, and auto chose
  // the slowest layout of five.
  std::vector<int> host_of(client.num_devices());
  const runtime::Interconnect* wiring = client.topology().interconnect();
  for (int d = 0; d < client.num_devices(); ++d)
    host_of[d] = wiring && !wiring->gpu() ? 0 : client.topology().device(d).host_id();
  compiler::AutoMesh am =
      compiler::AutoMesh::Make(mesh.shape(), mesh.device_ids(), mesh.axis_names(), host_of, model);
  // A simulated pod: each candidate's collectives priced as its schedule will
  // price them (routes, ring/tree/torus, links shared within a group), the
  // slowest group of each, memoized (the search scores thousands of layouts
  // with the same few collectives). Faults are left out: a layout is chosen
  // for the pod as built.
  if (wiring && client.topology().simulated()) {
    auto pricer = std::make_shared<runtime::CollectivePricer>(model, wiring, runtime::FaultPlan());
    auto memo = std::make_shared<std::map<std::tuple<int, int64_t, std::vector<std::vector<int64_t>>>, double>>();
    const int n = client.num_devices();
    am.price_collective = [pricer, memo, n, &model](const compiler::Instruction& c) -> double {
      auto groups = runtime::ParticipantGroups(c, n);
      const compiler::CollectiveKind kind = compiler::CollectiveKindOf(c.op);
      const int64_t bytes = compiler::CollectiveBytes(c);
      if (!groups.ok())  // the partitioner's groups always parse; the model's price if not
        return model.CollectiveNs(kind, bytes, compiler::CollectiveGroupSize(c, n), model.ici());
      auto key = std::make_tuple(static_cast<int>(kind), bytes, *groups);
      if (auto it = memo->find(key); it != memo->end()) return it->second;
      double slowest = 0;
      for (const auto& g : *groups) {
        if (g.size() < 2) continue;
        slowest = std::max(slowest, static_cast<double>(pricer->Price(kind, bytes, std::vector<int>(g.begin(), g.end())).dur_ns));
      }
      return (*memo)[key] = slowest;
    };
  }
  compiler::AutoShardingOptions opts = options;
  if (opts.memory_budget == 0) opts.memory_budget = client.topology().device(0).hbm_bytes();
  auto r = compiler::AutoShard(*g->module, std::move(groups), am, model, opts);
  if (!r.ok()) return r.status();

  AutoShardingChoice c;
  c.result = *std::move(r);
  for (const HandStrategy& h : compare) {
    std::vector<Sharding> layout;
    for (const auto* p : params) {
      auto s = h.mesh.ToSharding(h.spec(p->name, p->shape.rank()), p->shape.rank());
      if (!s.ok())
        return absl::InvalidArgumentError(absl::StrCat("auto-sharding: strategy ", h.name, ", input '", p->name,
                                                       "': ", s.status().message()));
      layout.push_back(*s);
    }
    auto e = compiler::EstimateLayout(*g->module, layout, am, model, opts.memory_budget);
    if (!e.ok()) return e.status();
    c.hand.push_back({h.name, *e});
  }
  for (size_t k = 0; k < params.size(); ++k) {
    if (params[k]->shape.rank() == 0) continue;
    if (absl::Status s = apply_auto_sharding(g->inputs[k], c.result.param_shardings[k]); !s.ok()) return s;
  }
  for (size_t k = 0; k < c.result.groups.size(); ++k)
    c.spec_of_group[c.result.groups[k].name] = SpecOf(c.result.choice[k], mesh);
  c.search_ns = trace::HostNowNs() - t0;

  trace::AutoShardingRecord rec;
  rec.step = current_step();
  rec.method = c.result.method;
  rec.combinations = c.result.combinations;
  rec.evaluations = c.result.evaluations;
  rec.search_ns = c.search_ns;
  rec.profile = client.profile().name;
  rec.memory_budget = opts.memory_budget;
  rec.candidates.push_back(Row("auto", c.result.estimate, true));
  for (const auto& [name, e] : c.hand) rec.candidates.push_back(Row(name, e, false));
  for (size_t k = 0; k < c.result.groups.size(); ++k) {
    const auto& grp = c.result.groups[k];
    rec.choices.push_back({grp.name, static_cast<int>(grp.params.size()),
                           compiler::AxesToString(c.result.choice[k], am),
                           c.result.param_shardings[grp.params[0]].ToString()});
  }
  trace::recorder().Record(rec);
  return c;
}

std::string DescribeAutoSharding(const AutoShardingChoice& c, const std::string& profile) {
  const auto& r = c.result;
  std::string out = absl::StrFormat(
      "auto-sharding: %s search, %d layouts scored of %.3g, %.1f s (host clock); modeled step on the %s profile\n",
      r.method, r.evaluations, r.combinations, static_cast<double>(c.search_ns) / 1e9, profile);
  for (size_t k = 0; k < r.groups.size(); ++k) {
    std::string layout;
    for (const AxisSpec& d : c.spec_of_group.at(r.groups[k].name))
      absl::StrAppend(&layout, layout.empty() ? "" : ", ", d.ToString());
    absl::StrAppendFormat(&out, "  %-34s x%-3d %s\n", r.groups[k].name, r.groups[k].params.size(),
                          absl::StrCat("[", layout, "]"));
  }
  absl::StrAppendFormat(&out, "  %-10s %14s %22s %12s\n", "strategy", "modeled step", "collectives", "peak/chip");
  auto line = [&](const std::string& name, const compiler::StepEstimate& e, bool chosen) {
    absl::StrAppendFormat(&out, "  %-10s %11.3f ms %13.3f ms (%3d) %12s%s\n", name + (chosen ? " *" : ""),
                          e.modeled_ns / 1e6, e.collective_ns / 1e6, e.collectives,
                          compiler::FormatBytes(e.peak_bytes), e.fits ? "" : "  (does not fit)");
  };
  line("auto", r.estimate, true);
  for (const auto& [name, e] : c.hand) line(name, e, false);
  return out;
}

}  // namespace shardscope
