#include "compiler/auto_sharding.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/buffer_assignment.h"
#include "compiler/fusion.h"
#include "compiler/passes.h"
#include "compiler/spmd.h"

namespace shardscope::compiler {

int64_t AutoMesh::size() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

namespace {

// Mesh coordinates of every device id (empty for ids not in the mesh).
std::map<int64_t, std::vector<int64_t>> CoordsOf(const AutoMesh& mesh) {
  std::map<int64_t, std::vector<int64_t>> out;
  for (size_t k = 0; k < mesh.device_ids.size(); ++k)
    out[mesh.device_ids[k]] = Unravel(static_cast<int64_t>(k), mesh.shape);
  return out;
}

}  // namespace

AutoMesh AutoMesh::Make(std::vector<int64_t> shape, std::vector<int64_t> device_ids,
                        std::vector<std::string> axis_names, const std::vector<int>& host_of_device,
                        const CostModel& model) {
  AutoMesh m{std::move(shape), std::move(device_ids), std::move(axis_names), {}, {}};
  const auto coords = CoordsOf(m);
  std::map<std::vector<int64_t>, int64_t> at;
  for (const auto& [id, c] : coords) at[c] = id;
  auto host = [&](int64_t id) { return id < static_cast<int64_t>(host_of_device.size()) ? host_of_device[id] : 0; };
  for (size_t a = 0; a < m.shape.size(); ++a) {
    bool crosses = false;
    for (const auto& [id, c] : coords) {
      if (c[a] + 1 >= m.shape[a]) continue;
      std::vector<int64_t> next = c;
      ++next[a];
      crosses |= host(at[next]) != host(id);
    }
    m.links.push_back(crosses ? model.dcn() : model.ici());
  }
  return m;
}

std::string AxesToString(const AxesOfDims& axes, const AutoMesh& mesh) {
  std::vector<std::string> dims;
  for (const auto& d : axes) {
    std::vector<std::string> names;
    for (int a : d) names.push_back(a < static_cast<int>(mesh.axis_names.size()) ? mesh.axis_names[a] : "?");
    if (names.empty()) dims.push_back("none");
    else if (names.size() == 1) dims.push_back(names[0]);
    else dims.push_back(absl::StrCat("(", absl::StrJoin(names, ", "), ")"));
  }
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

namespace {

// The slowest link among the mesh axes a collective's groups span (members
// differing in that coordinate); the chip-to-chip link when none do.
Link LinkOf(const Instruction& c, const AutoMesh& mesh, const std::map<int64_t, std::vector<int64_t>>& coords,
            const CostModel& model) {
  std::set<int> axes;
  auto span = [&](int64_t a, int64_t b) {
    auto ia = coords.find(a), ib = coords.find(b);
    if (ia == coords.end() || ib == coords.end()) return;
    for (size_t k = 0; k < mesh.shape.size(); ++k)
      if (ia->second[k] != ib->second[k]) axes.insert(static_cast<int>(k));
  };
  if (c.op == Opcode::kCollectivePermute) {
    for (const auto& [s, t] : c.source_target_pairs) span(s, t);
  } else if (c.replica_groups.empty()) {
    for (size_t k = 0; k < mesh.shape.size(); ++k)
      if (mesh.shape[k] > 1) axes.insert(static_cast<int>(k));
  } else {
    for (const auto& g : c.replica_groups)
      for (size_t k = 1; k < g.size(); ++k) span(g[0], g[k]);
  }
  Link slowest = model.ici();
  bool first = true;
  for (int a : axes) {
    const Link& l = mesh.links[a];
    if (first || l.bandwidth < slowest.bandwidth) slowest = l;
    first = false;
  }
  return slowest;
}

}  // namespace

absl::StatusOr<StepEstimate> EstimateStep(const Module& global, const AutoMesh& mesh, const CostModel& model,
                                          int64_t memory_budget) {
  auto spmd = SpmdPartition(global, static_cast<int>(mesh.size()));
  if (!spmd.ok()) return spmd.status();
  const Module& local = *spmd->local;
  const FusionPlan fusion = PlanFusion(local);
  const std::vector<OpCost> costs = model.ProgramCosts(local, &fusion);
  const auto coords = CoordsOf(mesh);
  StepEstimate e;
  for (const auto& i : local.instructions()) {
    if (!IsCollective(i->op)) {
      e.modeled_ns += static_cast<double>(costs[i->id].modeled_ns);
      continue;
    }
    const double t = mesh.price_collective
                         ? mesh.price_collective(*i)
                         : model.CollectiveNs(CollectiveKindOf(i->op), CollectiveBytes(*i),
                                              CollectiveGroupSize(*i, static_cast<int>(mesh.size())),
                                              LinkOf(*i, mesh, coords, model));
    e.modeled_ns += t;
    e.collective_ns += t;
    ++e.collectives;
  }
  e.peak_bytes = PlanMemory(local, &fusion).peak_bytes;
  e.rematerializations = static_cast<int>(spmd->rematerializations.size());
  e.fits = memory_budget <= 0 || e.peak_bytes <= memory_budget;
  return e;
}

absl::StatusOr<StepEstimate> EstimateLayout(const Module& global, const std::vector<Sharding>& params,
                                            const AutoMesh& mesh, const CostModel& model, int64_t memory_budget) {
  std::unique_ptr<Module> work = Simplify(global);
  if (params.size() != work->parameters().size())
    return absl::InvalidArgumentError(absl::StrCat("EstimateLayout: ", params.size(), " layouts for ",
                                                   work->parameters().size(), " parameters"));
  for (size_t k = 0; k < params.size(); ++k) work->parameters()[k]->sharding = params[k];
  return EstimateStep(*work, mesh, model, memory_budget);
}

namespace {

// Every way to give a tensor of `dims` mesh axes: each axis unused or on one
// dim (axes on one dim in mesh order), at most one tile per element. The
// first is the replicated layout.
std::vector<AxesOfDims> Candidates(const std::vector<int64_t>& dims, const AutoMesh& mesh) {
  const int rank = static_cast<int>(dims.size());
  const int axes = static_cast<int>(mesh.shape.size());
  std::vector<AxesOfDims> out;
  std::vector<int> at(axes, -1);  // dim of each axis, -1 unused
  while (true) {
    AxesOfDims c(rank);
    std::vector<int64_t> tiles(rank, 1);
    for (int a = 0; a < axes; ++a)
      if (at[a] >= 0) {
        c[at[a]].push_back(a);
        tiles[at[a]] *= mesh.shape[a];
      }
    bool ok = true;
    for (int d = 0; d < rank; ++d) ok &= tiles[d] <= dims[d];
    if (ok) out.push_back(std::move(c));
    int a = axes - 1;
    for (; a >= 0; --a) {
      if (++at[a] < rank) break;
      at[a] = -1;
    }
    if (a < 0) break;
  }
  return out;
}

// Feasible before infeasible; then the faster, or (both infeasible) the smaller.
bool Better(const StepEstimate& a, const StepEstimate& b) {
  if (a.fits != b.fits) return a.fits;
  if (!a.fits) return a.peak_bytes < b.peak_bytes;
  return a.modeled_ns < b.modeled_ns * (1 - 1e-9);
}

class Search {
 public:
  Search(Module& work, std::vector<AutoShardGroup> groups, const AutoMesh& mesh, const CostModel& model,
         const AutoShardingOptions& options)
      : work_(work), groups_(std::move(groups)), mesh_(mesh), model_(model), options_(options) {
    for (const auto& g : groups_) {
      std::vector<int64_t> dims = work_.parameters()[g.params[0]]->shape.dims;
      for (int p : g.params)
        for (size_t d = 0; d < dims.size(); ++d)
          dims[d] = std::min(dims[d], work_.parameters()[p]->shape.dims[d]);
      candidates_.push_back(Candidates(dims, mesh_));
    }
  }

  absl::StatusOr<AutoShardingResult> Run() {
    AutoShardingResult r;
    r.combinations = 1;
    for (const auto& c : candidates_) r.combinations *= static_cast<double>(c.size());
    std::vector<int> best;
    if (r.combinations <= static_cast<double>(options_.exact_limit)) {
      r.method = "exact";
      std::vector<int> pick(groups_.size(), 0);
      while (true) {
        if (absl::Status s = Consider(pick, &best); !s.ok()) return s;
        size_t g = 0;
        for (; g < pick.size(); ++g) {
          if (++pick[g] < static_cast<int>(candidates_[g].size())) break;
          pick[g] = 0;
        }
        if (g == pick.size()) break;
      }
    } else {
      r.method = "heuristic";
      for (const auto& [seed, held] : Seeds()) {
        std::vector<int> pick = seed;
        if (absl::Status s = Descend(&pick, held); !s.ok()) return s;
        if (absl::Status s = Consider(pick, &best); !s.ok()) return s;
      }
      // Then the largest groups two at a time, every pair of layouts, from
      // the best so far: moves descent cannot make one group at a time.
      const std::vector<size_t> order = Order();
      const size_t top = std::min<size_t>(order.size(), 3);
      for (int round = 0; round < 2; ++round) {
        const std::vector<int> start = best;
        for (size_t i = 0; i < top; ++i)
          for (size_t j = i + 1; j < top; ++j)
            for (int a = 0; a < static_cast<int>(candidates_[order[i]].size()); ++a)
              for (int b = 0; b < static_cast<int>(candidates_[order[j]].size()); ++b) {
                std::vector<int> pick = start;
                pick[order[i]] = a;
                pick[order[j]] = b;
                if (absl::Status s = Consider(pick, &best); !s.ok()) return s;
              }
        if (best == start) break;
        if (absl::Status s = Descend(&best, -1); !s.ok()) return s;
      }
      // Last, iterated local search: the best with three groups (of the
      // largest six) moved at random, descended again; fixed seed, so the
      // same program gets the same answer.
      std::mt19937 rng(1);
      const size_t pool = std::min<size_t>(order.size(), 6);
      for (int kick = 0; kick < options_.kicks && pool > 1; ++kick) {
        std::vector<int> pick = best;
        for (int k = 0; k < 3; ++k) {
          const size_t g = order[std::uniform_int_distribution<size_t>(0, pool - 1)(rng)];
          pick[g] = std::uniform_int_distribution<int>(0, static_cast<int>(candidates_[g].size()) - 1)(rng);
        }
        if (absl::Status s = Descend(&pick, -1); !s.ok()) return s;
        if (absl::Status s = Consider(pick, &best); !s.ok()) return s;
      }
    }
    auto e = Evaluate(best);
    if (!e.ok()) return e.status();
    if (!e->fits)
      return absl::ResourceExhaustedError(absl::StrCat(
          "auto-sharding: no layout fits ", FormatBytes(options_.memory_budget), " per chip; the smallest found needs ",
          FormatBytes(e->peak_bytes), " (", mesh_.size(), " chips)"));
    r.estimate = *e;
    r.evaluations = static_cast<int>(memo_.size());
    for (size_t g = 0; g < groups_.size(); ++g) r.choice.push_back(candidates_[g][best[g]]);
    Apply(best);
    for (const Instruction* p : work_.parameters()) r.param_shardings.push_back(p->sharding.value_or(Sharding()));
    r.groups = groups_;
    return r;
  }

 private:
  // Each layout of the largest group with the rest replicated (descent
  // alone cannot leave a layout whose neighbours are all worse, such as
  // "batch split" when "weight columns split, batch whole" is best); and
  // every tensor split on its leading dim over as many mesh axes as it has
  // room for (ZeRO-3 over the whole mesh).
  // Each seed with the group its first pass leaves alone (-1: none).
  std::vector<std::pair<std::vector<int>, int>> Seeds() const {
    std::vector<std::pair<std::vector<int>, int>> seeds;
    if (!groups_.empty()) {
      const size_t largest = Order()[0];
      for (size_t c = 0; c < candidates_[largest].size(); ++c) {
        seeds.push_back({std::vector<int>(groups_.size(), 0), static_cast<int>(largest)});
        seeds.back().first[largest] = static_cast<int>(c);
      }
    }
    std::vector<int> leading(groups_.size(), 0);
    for (size_t g = 0; g < groups_.size(); ++g) {
      size_t best_axes = 0;
      for (size_t c = 0; c < candidates_[g].size(); ++c) {
        const AxesOfDims& a = candidates_[g][c];
        size_t used = 0;
        for (const auto& d : a) used += d.size();
        if (!a.empty() && a[0].size() == used && used > best_axes) {
          best_axes = used;
          leading[g] = static_cast<int>(c);
        }
      }
    }
    seeds.push_back({leading, -1});
    return seeds;
  }

  // Coordinate descent: each group in turn takes its best layout, the others
  // fixed, until a pass changes nothing (at most max_passes). `held` (a
  // seed's group) sits out the first pass.
  absl::Status Descend(std::vector<int>* pick, int held) {
    for (int pass = 0; pass < options_.max_passes; ++pass) {
      bool moved = false;
      for (size_t g : Order()) {
        if (pass == 0 && static_cast<int>(g) == held) continue;
        const int was = (*pick)[g];
        auto kept = Evaluate(*pick);
        if (!kept.ok()) return kept.status();
        int keep = was;
        for (int c = 0; c < static_cast<int>(candidates_[g].size()); ++c) {
          (*pick)[g] = c;
          auto e = Evaluate(*pick);
          if (!e.ok()) return e.status();
          if (Better(*e, *kept)) {
            kept = e;
            keep = c;
          }
        }
        (*pick)[g] = keep;
        moved |= keep != was;
      }
      if (!moved) break;
    }
    return absl::OkStatus();
  }

  // Groups by bytes, largest first: the big decisions settle the small ones.
  std::vector<size_t> Order() const {
    std::vector<int64_t> bytes(groups_.size(), 0);
    for (size_t g = 0; g < groups_.size(); ++g)
      for (int p : groups_[g].params) bytes[g] += work_.parameters()[p]->shape.bytes();
    std::vector<size_t> order(groups_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
    return order;
  }

  void Apply(const std::vector<int>& pick) {
    for (size_t g = 0; g < groups_.size(); ++g) {
      auto s = Sharding::OnMesh(mesh_.shape, mesh_.device_ids, candidates_[g][pick[g]]);
      for (int p : groups_[g].params) work_.parameters()[p]->sharding = s.ok() ? *s : Sharding();
    }
  }

  absl::StatusOr<StepEstimate> Evaluate(const std::vector<int>& pick) {
    auto it = memo_.find(pick);
    if (it != memo_.end()) return it->second;
    Apply(pick);
    auto e = EstimateStep(work_, mesh_, model_, options_.memory_budget);
    if (!e.ok()) return e.status();
    memo_[pick] = *e;
    return *e;
  }

  absl::Status Consider(const std::vector<int>& pick, std::vector<int>* best) {
    auto e = Evaluate(pick);
    if (!e.ok()) return e.status();
    if (best->empty()) {
      *best = pick;
      return absl::OkStatus();
    }
    auto b = Evaluate(*best);
    if (!b.ok()) return b.status();
    if (Better(*e, *b)) *best = pick;
    return absl::OkStatus();
  }

  Module& work_;
  std::vector<AutoShardGroup> groups_;
  const AutoMesh& mesh_;
  const CostModel& model_;
  AutoShardingOptions options_;
  std::vector<std::vector<AxesOfDims>> candidates_;
  std::map<std::vector<int>, StepEstimate> memo_;
};

}  // namespace

absl::StatusOr<AutoShardingResult> AutoShard(const Module& global, std::vector<AutoShardGroup> groups,
                                             const AutoMesh& mesh, const CostModel& model,
                                             const AutoShardingOptions& options) {
  if (mesh.device_ids.size() != static_cast<size_t>(mesh.size()) || mesh.links.size() != mesh.shape.size())
    return absl::InvalidArgumentError("auto-sharding: the mesh's device ids or links do not match its shape");
  std::unique_ptr<Module> work = Simplify(global);
  const auto& params = work->parameters();
  std::vector<bool> grouped(params.size(), false);
  for (const auto& g : groups) {
    if (g.params.empty())
      return absl::InvalidArgumentError(absl::StrCat("auto-sharding: group '", g.name, "' is empty"));
    for (int p : g.params) {
      if (p < 0 || p >= static_cast<int>(params.size()))
        return absl::InvalidArgumentError(absl::StrCat("auto-sharding: group '", g.name, "' names parameter ", p,
                                                       " of ", params.size()));
      if (grouped[p])
        return absl::InvalidArgumentError(absl::StrCat("auto-sharding: parameter '", params[p]->name,
                                                       "' is in two groups"));
      if (params[p]->shape.rank() != params[g.params[0]]->shape.rank())
        return absl::InvalidArgumentError(absl::StrCat("auto-sharding: group '", g.name, "' mixes ranks (",
                                                       params[p]->name, " ", params[p]->shape.ToString(), ")"));
      if (params[p]->sharding && !params[p]->sharding->IsReplicated())
        return absl::InvalidArgumentError(absl::StrCat("auto-sharding: parameter '", params[p]->name,
                                                       "' is annotated ", params[p]->sharding->ToString(),
                                                       "; annotated parameters are not searched"));
      grouped[p] = true;
    }
  }
  for (size_t p = 0; p < params.size(); ++p)
    if (!grouped[p] && !params[p]->sharding && params[p]->shape.rank() > 0)
      groups.push_back({params[p]->name, {static_cast<int>(p)}});
  return Search(*work, std::move(groups), mesh, model, options).Run();
}

}  // namespace shardscope::compiler
