// The fleet diagnosis's slices, a step at a time (see fleet_source.h).
#include "profiler/analysis/fleet_source.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "store/sim_walk.h"
#include "store/timeline.h"

namespace shardscope::analysis::fleet_internal {
namespace {

Kind KindOfSlice(trace::SliceKind k) {
  switch (k) {
    case trace::SliceKind::kCompute: return kCompute;
    case trace::SliceKind::kCollective: return kCollective;
    case trace::SliceKind::kTransfer: return kTransfer;
    case trace::SliceKind::kHost: return kHost;
    case trace::SliceKind::kCompile: return kCompile;
    case trace::SliceKind::kHostWait: return kHostWait;
  }
  return kOther;
}

// One slice as the analysis keeps it (from SQL rows, or made from a simulated run's schedule).
struct Raw {
  int64_t id, parent, start, dur, flow, arrival, bytes, graph, op_id;
  int depth, device;
  Kind kind;
  int32_t name;
  bool phased = false;  // a collective whose links work in phases (StepData::phased_flows)
};

// Collects slices into steps; a link slice's flow is its parent collective's.
class Collector {
 public:
  // `links`: whether link slices come (their parents' flows are kept for them).
  Collector(Names& names, bool links) : names_(names), links_(links) {}

  void Add(const Raw& x, StepData& s) {
    if (x.depth == 0) {
      if (links_ && x.kind == kCollective && x.flow >= 0) {
        flow_of_slice_[x.id] = x.flow;
        if (x.phased) s.phased_flows.insert(x.flow);
      }
      Op op;
      op.id = x.id;
      op.kind = x.kind;
      op.start = x.start;
      op.dur = x.dur;
      op.flow = x.flow;
      op.arrival = x.arrival;
      op.name = x.name;
      op.graph = static_cast<int32_t>(x.graph);
      op.op_id = static_cast<int32_t>(x.op_id);
      // Consecutive slices are mostly one chip's: its list looked up once for them.
      if (x.device != last_device_ || last_step_ != &s) {
        last_ops_ = &s.ops[x.device];
        last_device_ = x.device;
        last_step_ = &s;
      }
      // Out of order (a recorded track's slices by depth first): sorted in Finish.
      if (!last_ops_->empty() &&
          std::tie(op.start, op.id) < std::tie(last_ops_->back().start, last_ops_->back().id))
        unsorted_.insert(x.device);
      last_ops_->push_back(op);
    } else if (x.kind == kTransfer) {
      if (const int32_t link = LinkOf(x.name); link >= 0)
        s.links.push_back({link, x.parent, x.bytes, x.dur});  // the parent's flow, in Finish
    }
  }

  // Ops by start; each link slice's parent slice replaced by its flow.
  void Finish(StepData& s) {
    // Only the chips whose ops came out of order (a simulated chip's come in order).
    for (int d : unsorted_) {
      auto it = s.ops.find(d);
      if (it != s.ops.end())
        std::sort(it->second.begin(), it->second.end(),
                  [](const Op& a, const Op& b) { return std::tie(a.start, a.id) < std::tie(b.start, b.id); });
    }
    for (LinkUse& l : s.links) {
      auto it = flow_of_slice_.find(l.flow);
      l.flow = it == flow_of_slice_.end() ? -1 : it->second;
    }
  }

  // The slices of a step are all in: their parents are no longer needed.
  void Forget() {
    flow_of_slice_.clear();
    unsorted_.clear();
    last_step_ = nullptr;
  }

 private:
  int32_t LinkOf(int32_t name) {
    if (static_cast<size_t>(name) >= link_of_name_.size()) link_of_name_.resize(names_.size(), -2);
    int32_t& l = link_of_name_[static_cast<size_t>(name)];
    if (l == -2) {
      const std::string& text = names_.Text(name);
      l = text.rfind("link ", 0) == 0 ? names_.Id(text.substr(5)) : -1;
    }
    return l;
  }

  Names& names_;
  bool links_;
  int last_device_ = -1;
  const StepData* last_step_ = nullptr;
  std::vector<Op>* last_ops_ = nullptr;
  absl::flat_hash_map<int64_t, int64_t> flow_of_slice_;  // collective slice id -> its flow
  std::set<int> unsorted_;                               // chips whose ops came out of order
  std::vector<int32_t> link_of_name_;  // Names id -> the Names id of its "A-B"; -1 not a link; -2 not known yet
};

absl::Status Simulated(const store::Reader& rd, const StepSource& src, Names& names,
                       const std::function<absl::Status(StepData&)>& fn) {
  names.ForgetAddresses();  // the last walk's strings are gone
  Collector collect(names, !src.ops_only);
  StepData cur;
  bool open = false;
  int done = INT_MIN;  // the last step handed over
  absl::Status st;
  // names.name_id -> Names id (-1: not seen yet): looked up for every slice.
  std::vector<int32_t> name_ids;
  auto name_id = [&](int32_t stored, const store::SimNames& stored_names) {
    if (stored < 0 || stored > (1 << 24)) return names.Id(stored_names.Of(stored));
    if (static_cast<size_t>(stored) >= name_ids.size()) name_ids.resize(static_cast<size_t>(stored) + 1, -1);
    int32_t& id = name_ids[static_cast<size_t>(stored)];
    if (id < 0) id = names.Id(stored_names.Of(stored));
    return id;
  };
  auto hand_over = [&]() {
    if (!open) return;
    // A chip with no ops this step has no entry, as when each step was made afresh.
    for (auto it = cur.ops.begin(); it != cur.ops.end();)
      it = it->second.empty() ? cur.ops.erase(it) : std::next(it);
    collect.Finish(cur);
    done = cur.step;
    if (st.ok()) st = fn(cur);
    // The chips' lists are kept for the next step (their memory reused, not given back and faulted in again).
    for (auto& [d, ops] : cur.ops) ops.clear();
    cur.links.clear();
    cur.phased_flows.clear();
    collect.Forget();
    open = false;
  };
  // Per program, the op ids of its collectives whose algorithm works in
  // phases: a tree's rounds and a torus's dimensions run one after another.
  std::map<const trace::SimProgram*, std::set<int64_t>> phased_of;
  auto phased_ops = [&](const trace::SimProgram& p) -> const std::set<int64_t>& {
    auto [it, added] = phased_of.try_emplace(&p);
    if (added)
      for (const trace::SimOp& op : p.ops)
        if (op.collective >= 0 && static_cast<size_t>(op.collective) < p.collectives.size() &&
            (p.collectives[static_cast<size_t>(op.collective)].algorithm == "tree" ||
             p.collectives[static_cast<size_t>(op.collective)].algorithm == "torus"))
          it->second.insert(op.op_id);
    return it->second;
  };
  store::SimWalkFilter filter;
  filter.want_step = src.want_step;
  filter.top_level_only = src.ops_only;
  // A chip's slices of a program run at a time (a call per slice cost a fifth of the reading).
  absl::Status read = store::ForEachSimChipRun(rd, src.run, filter, [&](const store::SimChipRun& run) {
    if (!st.ok()) return;
    if (open && run.step != cur.step) hand_over();
    if (!open) {
      if (run.step <= done && done != INT_MIN) {
        st = absl::DataLossError(absl::StrCat("run ", src.run,
                                              ": the schedule's program runs are out of step order (step ",
                                              run.step, " after step ", done, ")"));
        return;
      }
      cur.step = run.step;
      open = true;
      if (src.progress) src.progress(-1, absl::StrCat("reading the slices: step ", run.step));
    }
    const std::set<int64_t>& phased = phased_ops(*run.program);
    for (const trace::SimSlice& x : *run.slices)
      collect.Add(
          {x.slice_id, x.parent_id, x.start_ns, x.dur_ns, x.flow_id, x.arrival_ns, x.bytes, run.graph_id,
           x.op_id, x.depth, run.device_id, KindOfSlice(x.kind), name_id(x.name_id, *run.names),
           x.depth == 0 && x.kind == trace::SliceKind::kCollective && phased.count(x.op_id) > 0},
          cur);
  });
  if (!read.ok()) return read;
  hand_over();
  return st;
}

absl::Status Recorded(const store::Reader& rd, const StepSource& src, Names& names,
                      const std::function<absl::Status(StepData&)>& fn) {
  // Stored slices, decoded natively a track at a time (a row per slice
  // through SQL, its numbers made text and back, took 53 s of a 10M-slice
  // run's report).
  Collector collect(names, true);
  std::map<int, StepData> steps;
  std::vector<int32_t> name_ids;  // names.name_id -> Names id
  absl::Status st = rd.ForEachRow("SELECT name_id, name FROM names", {}, [&](const std::vector<store::Cell>& c) {
    int64_t id = -1;
    if (!c[0] || !absl::SimpleAtoi(*c[0], &id) || id < 0 || id > INT32_MAX) return;
    if (static_cast<size_t>(id) >= name_ids.size()) name_ids.resize(static_cast<size_t>(id) + 1, -1);
    name_ids[static_cast<size_t>(id)] = names.Id(c[1].value_or(""));
  });
  if (!st.ok()) return st;
  const int32_t unnamed = names.Id(std::string());
  auto tracks = rd.Query("SELECT track_id, device_id FROM tracks WHERE run_id = ?1 AND clock = ?2"
                         " AND device_id IS NOT NULL ORDER BY track_id",
                         {absl::StrCat(src.run), src.clock});
  if (!tracks.ok()) return tracks.status();
  store::TimelineReader tl(rd);
  for (size_t i = 0; i < tracks->rows.size(); ++i) {
    if (src.progress) src.progress(0.5 * i / tracks->rows.size(), "reading the slices");
    auto slices = tl.Slices(src.run, tracks->Int(i, "track_id"), INT64_MIN / 4, INT64_MAX / 4);
    if (!slices.ok()) return slices.status();
    const int device = static_cast<int>(tracks->Int(i, "device_id"));
    for (const store::TimelineSlice& x : *slices) {
      if (x.step < 0) continue;
      const bool named = x.name_id >= 0 && static_cast<size_t>(x.name_id) < name_ids.size() &&
                         name_ids[static_cast<size_t>(x.name_id)] >= 0;
      StepData& s = steps[x.step];
      s.step = x.step;
      collect.Add({x.slice_id, x.parent_id, x.start_ns, x.dur_ns, x.flow_id, src.has_arrival ? x.arrival_ns : -1,
                   x.bytes, x.graph_id, x.op_id, x.depth, device, KindOf(store::TimelineKindName(x.kind)),
                   named ? name_ids[static_cast<size_t>(x.name_id)] : unnamed, false},
                  s);
    }
  }
  for (auto it = steps.begin(); it != steps.end(); it = steps.erase(it)) {
    collect.Finish(it->second);
    if (absl::Status s = fn(it->second); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ForEachStep(const store::Reader& rd, const StepSource& src, Names& names,
                         const std::function<absl::Status(StepData&)>& fn) {
  return src.simulated ? Simulated(rd, src, names, fn) : Recorded(rd, src, names, fn);
}

}  // namespace shardscope::analysis::fleet_internal
