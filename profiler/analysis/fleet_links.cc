// Links in the fleet diagnosis (see fleet_links.h).
#include "profiler/analysis/fleet_links.h"

#include <algorithm>
#include <tuple>

namespace shardscope::analysis::fleet_internal {
namespace {

// A collective's links that play the same part in it: the same kind, and
// about the same bytes moved (within kSameBytes of the smallest in the group).
// A link's time per byte holds its hops' latencies as well as its bandwidth,
// so links moving less pay more per byte: llama's all-reduces on an 8x8x2
// torus move 0.6 MB over a z link, 3.9 MB over a y link and 31 MB over an x
// link, and compared all together the z links read 1.11x slow. The bytes a link moves are the
// algorithm's, not the link's speed, so a slow link keeps its peers.
constexpr double kSameBytes = 1.10;
std::vector<std::vector<size_t>> PeerGroups(const std::vector<const LinkUse*>& ls, const LinkKindOf& kind_of) {
  std::vector<size_t> order(ls.size());
  std::vector<int32_t> kinds(ls.size());
  for (size_t k = 0; k < ls.size(); ++k) {
    order[k] = k;
    kinds[k] = kind_of(ls[k]->link);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(kinds[a], ls[a]->bytes, a) < std::tie(kinds[b], ls[b]->bytes, b);
  });
  std::vector<std::vector<size_t>> groups;
  for (size_t k : order) {
    if (groups.empty() || kinds[groups.back().front()] != kinds[k] ||
        static_cast<double>(ls[k]->bytes) >
            kSameBytes * static_cast<double>(ls[groups.back().front()]->bytes))
      groups.emplace_back();
    groups.back().push_back(k);
  }
  return groups;
}

// Leave-one-out median time per byte over each group of `ls` (size 2 or
// more), written to rate_of(k) for each link k of them.
void PeerRates(const std::vector<const LinkUse*>& ls, const std::vector<std::vector<size_t>>& groups,
               const std::function<double&(size_t)>& rate_of) {
  for (const std::vector<size_t>& at : groups) {
    if (at.size() < 2) continue;
    std::vector<double> rates;
    for (size_t k : at) rates.push_back(static_cast<double>(ls[k]->dur) / static_cast<double>(ls[k]->bytes));
    const std::vector<double> meds = LeaveOneOutMedians(rates);
    for (size_t j = 0; j < at.size(); ++j) rate_of(at[j]) = meds[j];
  }
}

}  // namespace

std::vector<FlowLinks> StepLinks(const StepData& s, const std::map<int64_t, Instance*>& by_flow,
                                 const LinkKindOf& kind_of) {
  std::map<int64_t, std::vector<const LinkUse*>> per_flow;
  for (const LinkUse& l : s.links)
    if (l.flow >= 0 && l.bytes > 0 && l.dur > 0) per_flow[l.flow].push_back(&l);
  std::vector<FlowLinks> flows;
  flows.reserve(per_flow.size());
  for (auto& [flow, ls] : per_flow) {
    auto inst = by_flow.find(flow);
    if (inst == by_flow.end()) continue;
    FlowLinks& f = flows.emplace_back();
    f.flow = flow;
    f.dur = inst->second->proper_ns;
    f.ls = std::move(ls);
    f.peers = PeerGroups(f.ls, kind_of);
    if (s.phased_flows.count(flow)) {
      f.bounds = f.peers;
      // Phases one after another last no longer than the collective: where
      // their longest links add up past it, links of several groups worked
      // at once (a tree's round crossing an NVLink and a rail), and the
      // collective is bounded by all its links together.
      double phases = 0;
      for (const std::vector<size_t>& at : f.bounds) {
        int64_t longest = 0;
        for (size_t k : at) longest = std::max(longest, f.ls[k]->dur);
        phases += static_cast<double>(longest);
      }
      if (phases > static_cast<double>(f.dur)) f.bounds.clear();
    }
    if (f.bounds.empty()) {
      f.bounds.emplace_back(f.ls.size());
      for (size_t k = 0; k < f.ls.size(); ++k) f.bounds.back()[k] = k;
    }
    // Each link's peers' median time per byte among its group (leave-one-out
    // medians: a torus all-reduce crosses thousands of links).
    f.peer_rate.assign(f.ls.size(), 0);
    PeerRates(f.ls, f.peers, [&f](size_t k) -> double& { return f.peer_rate[k]; });
  }
  // A link alone in its part of its collective (a 2-chip group's one link:
  // tensor parallelism in pairs) is compared with the links of the same
  // collective op's other groups that play its part: never compared, a rail
  // at 30% of its bandwidth that cost 14% of the step was not ranked at all.
  std::map<int64_t, int32_t> op_of_flow;  // flow -> the collective op's name
  std::vector<std::pair<size_t, size_t>> lone;  // (flow index, link index)
  for (size_t i = 0; i < flows.size(); ++i)
    for (const std::vector<size_t>& at : flows[i].peers)
      if (at.size() == 1) lone.push_back({i, at.front()});
  if (!lone.empty()) {
    // Each such flow's op from one member's ops (not every chip's: a pod's
    // step holds millions).
    for (const auto& [i, k] : lone) {
      const int64_t flow = flows[i].flow;
      if (op_of_flow.count(flow)) continue;
      auto inst = by_flow.find(flow);
      if (inst == by_flow.end() || inst->second->members.empty()) continue;
      auto ops = s.ops.find(inst->second->members.front().device);
      if (ops == s.ops.end()) continue;
      for (const Op& op : ops->second)
        if (op.kind == kCollective && op.flow == flow) {
          op_of_flow.emplace(flow, op.name);
          break;
        }
    }
    std::map<int32_t, std::vector<std::pair<size_t, size_t>>> by_op;
    for (const auto& fl : lone) {
      auto it = op_of_flow.find(flows[fl.first].flow);
      if (it != op_of_flow.end()) by_op[it->second].push_back(fl);
    }
    for (const auto& [op, members] : by_op) {
      if (members.size() < 2) continue;
      std::vector<const LinkUse*> ls;
      for (const auto& [i, k] : members) ls.push_back(flows[i].ls[k]);
      PeerRates(ls, PeerGroups(ls, kind_of), [&](size_t j) -> double& {
        return flows[members[j].first].peer_rate[members[j].second];
      });
    }
  }
  return flows;
}

namespace {

// How much shorter the collective gets with the links `fixed(k)` says at
// their peers' rate: what each bounding set's longest link loses, summed
// over the phases, never more than the collective lasts.
double Freed(const FlowLinks& f, const std::function<bool(size_t)>& fixed) {
  double freed = 0;
  for (const std::vector<size_t>& at : f.bounds) {
    double before = 0, after = 0;
    for (size_t k : at) {
      const double dur = static_cast<double>(f.ls[k]->dur);
      before = std::max(before, dur);
      after = std::max(after, fixed(k) && f.peer_rate[k] > 0
                                  ? std::min(dur, f.peer_rate[k] * static_cast<double>(f.ls[k]->bytes))
                                  : dur);
    }
    freed += std::max(0.0, std::min(before, static_cast<double>(f.dur)) - after);
  }
  return std::min(freed, static_cast<double>(f.dur));
}

// Slower than its peers by less than this is rounding (a simulated link's
// nanoseconds), not a link for the what-if to fix.
constexpr double kSlowerThanPeers = 1.001;

}  // namespace

void LinkStats::Merge(LinkStats&& o) {
  slowdowns.insert(slowdowns.end(), o.slowdowns.begin(), o.slowdowns.end());
  uses += o.uses;
  moved.first += o.moved.first;
  moved.second += o.moved.second;
  dur_sum += o.dur_sum;
  expected_sum += o.expected_sum;
  by_step.merge(o.by_step);  // a step is in one tally only
  slow_steps.merge(o.slow_steps);
  seen = seen || o.seen;
}

double WeightedMedianOf(std::vector<std::pair<float, float>>& v) {
  double total = 0;
  for (const auto& [x, w] : v) total += w;
  if (v.empty() || total <= 0) return 1;
  std::sort(v.begin(), v.end());
  double below = 0;
  for (const auto& [x, w] : v) {
    below += w;
    if (below >= total / 2) return x;
  }
  return v.back().first;
}

void AddLinks(const StepData& s, const std::map<int64_t, Instance*>& by_flow, const LinkKindOf& kind_of,
              absl::flat_hash_map<int32_t, LinkStats>& stats) {
  absl::flat_hash_map<int32_t, std::vector<std::pair<float, float>>> in_step;  // this step's, per link
  for (const FlowLinks& f : StepLinks(s, by_flow, kind_of)) {
    for (size_t k = 0; k < f.ls.size(); ++k) {
      const LinkUse* l = f.ls[k];
      LinkStats& st = stats[l->link];
      st.seen = true;
      if (f.peer_rate[k] <= 0) continue;
      const double slowdown = static_cast<double>(l->dur) / static_cast<double>(l->bytes) / f.peer_rate[k];
      const double expected = f.peer_rate[k] * static_cast<double>(l->bytes);
      st.slowdowns.push_back({static_cast<float>(slowdown), static_cast<float>(expected)});
      in_step[l->link].push_back(st.slowdowns.back());
      st.uses++;
      st.moved.first += static_cast<double>(l->bytes);
      st.moved.second += static_cast<double>(l->dur);
      st.dur_sum += static_cast<double>(l->dur);
      st.expected_sum += expected;
      // Fixed alone it may free nothing (two slow links side by side), so
      // each step where it is slow at all is one the what-if fixes it in.
      if (slowdown > kSlowerThanPeers) st.slow_steps.insert(s.step);
    }
  }
  for (auto& [link, v] : in_step) stats[link].by_step[s.step] = WeightedMedianOf(v);
}

std::map<int64_t, int64_t> FixLinks(const std::vector<FlowLinks>& flows, const std::set<int32_t>& fixed) {
  std::map<int64_t, int64_t> out;
  for (const FlowLinks& f : flows) {
    const double freed = Freed(f, [&](size_t k) { return fixed.count(f.ls[k]->link) > 0; });
    if (freed > 0) out[f.flow] = f.dur - static_cast<int64_t>(freed);
  }
  return out;
}

}  // namespace shardscope::analysis::fleet_internal
