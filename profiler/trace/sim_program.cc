// The simulated pods' schedule (see sim_program.h).
#include "profiler/trace/sim_program.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace shardscope::trace {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void SimProgram::BuildIndex(int num_chips) {
  group_of.assign(group_sets.size(), std::vector<int>(num_chips, -1));
  for (size_t s = 0; s < group_sets.size(); ++s)
    for (size_t g = 0; g < group_sets[s].size(); ++g)
      for (int c : group_sets[s][g])
        if (c >= 0 && c < num_chips) group_of[s][c] = static_cast<int>(g);
  std::vector<int> links(num_chips, 0);
  for (const SimOp& op : ops) {
    if (op.collective < 0 || op.collective >= static_cast<int>(collectives.size())) continue;
    for (const auto& uses : collectives[op.collective].group_links)
      for (const SimLinkUse& u : uses)
        if (u.device >= 0 && u.device < num_chips) ++links[u.device];
  }
  max_links_per_chip = links.empty() ? 0 : *std::max_element(links.begin(), links.end());
  links_by_device.assign(collectives.size(), {});
  for (size_t k = 0; k < collectives.size(); ++k) {
    const auto& groups = collectives[k].group_links;
    links_by_device[k].resize(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<uint32_t>& order = links_by_device[k][g];
      order.resize(groups[g].size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t x, uint32_t y) { return groups[g][x].device < groups[g][y].device; });
    }
  }
}

double SimJitterDraw(uint64_t seed, int step, int chip, int kernel) {
  uint64_t h = Mix(seed ^ 0x5eed5eed5eedULL);
  h = Mix(h ^ static_cast<uint64_t>(static_cast<uint32_t>(step)));
  h = Mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(chip)) << 20));
  h = Mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(kernel)) << 40));
  return static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;  // 53 bits -> [-1, 1)
}

int64_t SimOpDuration(const SimOp& op, const SimChip& chip, int step, int chip_id, int k) {
  double d = static_cast<double>(op.dur_ns) * chip.time_scale;
  if (chip.jitter > 0 && op.kind == SliceKind::kCompute) d *= 1 + chip.jitter * SimJitterDraw(chip.seed, step, chip_id, k);
  return std::max<int64_t>(0, std::llround(d));
}

absl::Status SimSchedule(const SimProgram& p, const std::vector<SimChip>& chips, SimRun* run) {
  const int n = static_cast<int>(chips.size());
  if (static_cast<int>(run->start_ns.size()) != n)
    return absl::InvalidArgumentError(
        absl::StrCat("simulated run of graph ", p.graph_id, ": ", run->start_ns.size(), " starts for ", n, " chips"));
  if (static_cast<int>(p.group_of.size()) != static_cast<int>(p.group_sets.size()) ||
      (!p.group_of.empty() && static_cast<int>(p.group_of[0].size()) != n))
    return absl::FailedPreconditionError(absl::StrCat("simulated graph ", p.graph_id, " is not indexed for ", n, " chips"));
  std::vector<int64_t> t(run->start_ns);
  const int transfers = static_cast<int>(run->transfers.size());
  for (int c = 0; c < n; ++c)
    for (int k = 0; k < transfers; ++k) t[c] += SimOpDuration(run->transfers[k], chips[c], run->step, c, k);
  run->collective_end_ns.assign(p.num_collective_ops, {});
  std::vector<int64_t> arrive;
  for (size_t k = 0; k < p.ops.size(); ++k) {
    const SimOp& op = p.ops[k];
    const int slot = transfers + static_cast<int>(k);
    if (op.collective < 0) {
      for (int c = 0; c < n; ++c) t[c] += SimOpDuration(op, chips[c], run->step, c, slot);
      continue;
    }
    if (op.collective >= static_cast<int>(p.collectives.size()) || op.coll_seq < 0 ||
        op.coll_seq >= p.num_collective_ops)
      return absl::InvalidArgumentError(absl::StrCat("simulated op ", op.name, " names collective ", op.collective,
                                                     " of ", p.collectives.size()));
    const SimCollective& col = p.collectives[op.collective];
    const auto& groups = p.group_sets[col.group_set];
    arrive.assign(groups.size(), 0);
    for (size_t g = 0; g < groups.size(); ++g)
      for (int c : groups[g]) arrive[g] = std::max(arrive[g], t[c]);
    auto& ends = run->collective_end_ns[op.coll_seq];
    ends.assign(groups.size(), 0);
    for (size_t g = 0; g < groups.size(); ++g) {
      ends[g] = arrive[g] + (g < col.group_dur_ns.size() ? col.group_dur_ns[g] : 0);
      for (int c : groups[g]) t[c] = ends[g];
    }
  }
  run->end_ns = std::move(t);
  return absl::OkStatus();
}

int64_t SimSliceId(int64_t run_id, const SimProgram& p, const SimRun& run, int chip, int slot) {
  const uint64_t chips = p.group_of.empty() ? 1 : p.group_of[0].size();
  const uint64_t idx = static_cast<uint64_t>(run.seq) * std::max<uint64_t>(chips, 1) + static_cast<uint64_t>(chip);
  return static_cast<int64_t>((uint64_t{1} << 62) | ((static_cast<uint64_t>(run_id) & 0xfff) << 49) |
                              ((idx & 0xffffffffULL) << 17) | (static_cast<uint64_t>(slot) & 0x1ffff));
}

int64_t SimFlowId(int64_t run_id, const SimRun& run, int collective, int group) {  // collective: coll_seq
  return static_cast<int64_t>((uint64_t{1} << 62) | ((static_cast<uint64_t>(run_id) & 0xfff) << 49) |
                              ((static_cast<uint64_t>(run.seq) & 0xffffff) << 25) |
                              ((static_cast<uint64_t>(collective) & 0xfff) << 13) |
                              (static_cast<uint64_t>(group) & 0x1fff));
}

void SimChipSlices(int64_t run_id, const SimProgram& p, const SimChip& chip, const SimRun& run, int c,
                   std::vector<SimSlice>* out) {
  static const std::string kPreempted = "waiting for host";
  const int transfers = static_cast<int>(run.transfers.size());
  int64_t t = run.start_ns[c];
  if (!run.preempted_ns.empty() && run.preempted_ns[c] > 0) {
    SimSlice s;
    s.slice_id = SimSliceId(run_id, p, run, c, 0);
    s.start_ns = t - run.preempted_ns[c];
    s.dur_ns = run.preempted_ns[c];
    s.name = &kPreempted;
    s.name_id = p.preempted_name_id;
    s.kind = SliceKind::kHostWait;
    out->push_back(s);
  }
  for (int k = 0; k < transfers; ++k) {
    const SimOp& op = run.transfers[k];
    SimSlice s;
    s.slice_id = SimSliceId(run_id, p, run, c, 1 + k);
    s.start_ns = t;
    s.dur_ns = SimOpDuration(op, chip, run.step, c, k);
    s.name = &op.name;
    s.name_id = op.name_id;
    s.kind = SliceKind::kTransfer;
    s.bytes = op.bytes;
    t += s.dur_ns;
    out->push_back(s);
  }
  int link_slot = 1 + transfers + static_cast<int>(p.ops.size());
  for (size_t k = 0; k < p.ops.size(); ++k) {
    const SimOp& op = p.ops[k];
    const int slot = transfers + static_cast<int>(k);
    SimSlice s;
    s.slice_id = SimSliceId(run_id, p, run, c, 1 + slot);
    s.name = &op.name;
    s.name_id = op.name_id;
    s.op_id = op.op_id;
    s.bytes = op.bytes;
    s.kind = op.kind;
    if (op.collective < 0) {
      s.start_ns = t;
      s.dur_ns = SimOpDuration(op, chip, run.step, c, slot);
      t += s.dur_ns;
      out->push_back(s);
      continue;
    }
    const SimCollective& col = p.collectives[op.collective];
    const int g = p.group_of[col.group_set][c];
    if (g < 0) continue;  // not a member: nothing to wait for
    const int64_t dur = g < static_cast<int>(col.group_dur_ns.size()) ? col.group_dur_ns[g] : 0;
    const int64_t end = run.collective_end_ns[op.coll_seq][g];
    s.kind = SliceKind::kCollective;
    s.arrival_ns = t;
    s.start_ns = end - dur;
    s.dur_ns = dur;
    s.flow_id = SimFlowId(run_id, run, op.coll_seq, g);
    t = end;
    out->push_back(s);
    if (g >= static_cast<int>(col.group_links.size())) continue;
    const std::vector<SimLinkUse>& uses = col.group_links[g];
    const bool indexed = op.collective < static_cast<int>(p.links_by_device.size()) &&
                         g < static_cast<int>(p.links_by_device[op.collective].size()) &&
                         p.links_by_device[op.collective][g].size() == uses.size();
    // This chip's uses in their stored order (slice ids count them in it).
    auto each_use = [&](auto&& fn) {
      if (!indexed) {
        for (const SimLinkUse& u : uses)
          if (u.device == c) fn(u);
        return;
      }
      const std::vector<uint32_t>& order = p.links_by_device[op.collective][g];
      auto it = std::lower_bound(order.begin(), order.end(), c,
                                 [&](uint32_t i, int device) { return uses[i].device < device; });
      for (; it != order.end() && uses[*it].device == c; ++it) fn(uses[*it]);
    };
    each_use([&](const SimLinkUse& u) {
      SimSlice l;
      l.slice_id = SimSliceId(run_id, p, run, c, link_slot++);
      l.start_ns = s.start_ns;
      l.dur_ns = u.busy_ns;
      l.parent_id = s.slice_id;
      l.depth = 1;
      l.kind = SliceKind::kTransfer;
      l.bytes = u.bytes;
      l.name_id = u.name_id;
      l.op_id = op.op_id;
      out->push_back(l);
    });
  }
}

}  // namespace shardscope::trace
