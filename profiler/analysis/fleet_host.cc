// Ranks compared by their host-clock collectives; see fleet_host.h.
#include "profiler/analysis/fleet_host.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "profiler/analysis/fleet_noise.h"
#include "profiler/analysis/fleet_steps.h"
#include "profiler/analysis/format.h"
#include "store/timeline.h"

namespace shardscope::analysis::internal {
namespace {

using fleet_internal::LeaveOneOutMedians;
using fleet_internal::Median;

struct Member {
  int host = 0;
  int64_t track = 0;
  int64_t arrival = 0, end = 0;
};

// One collective: a flow the import matched across ranks, one slice per rank.
struct Collective {
  int step = -1;
  std::vector<Member> members;
  int64_t first_arrival = 0, last_end = 0;
  std::set<std::string> ops;  // its slices' operations, as OpOf names them
};

// "c10d::allgather_", "gloo:all_gather", "nccl:all_gather" -> "allgather":
// one operation seen on two threads (the caller's and the backend's).
std::string OpOf(const std::string& name) {
  const size_t colon = name.rfind(':');
  std::string op;
  for (char ch : name.substr(colon == std::string::npos ? 0 : colon + 1))
    if (ch != '_' && ch != ' ') op.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  return op == "recordparamcomms" ? "" : op;  // PyTorch's wrapper around every one: says no operation
}

std::string Ms(double ns) { return absl::StrFormat("%.3f ms", ns / 1e6); }

}  // namespace

absl::StatusOr<double> MedianStepWallNs(const store::Reader& rd, int64_t run) {
  auto wall = rd.Query("SELECT wall_ns FROM steps WHERE run_id = ?1 AND wall_ns > 0", {absl::StrCat(run)});
  if (!wall.ok()) return wall.status();
  std::vector<double> w;
  for (size_t i = 0; i < wall->rows.size(); ++i) w.push_back(static_cast<double>(wall->Int(i, "wall_ns")));
  return Median(w);
}

absl::StatusOr<bool> AnalyzeHostCollectives(const store::Reader& rd, int64_t run, const FleetOptions& opt,
                                            FleetReport* r) {
  const std::string run_text = absl::StrCat(run);
  auto tracks = rd.Query("SELECT track_id, host_id FROM tracks WHERE run_id = ?1 AND clock = 'host'"
                         " AND host_id IS NOT NULL ORDER BY track_id",
                         {run_text});
  if (!tracks.ok()) return tracks.status();
  std::map<int64_t, std::string> name_of_id;  // names.name_id -> its name, read as met
  const auto name_of = [&](int32_t name_id) -> const std::string& {
    auto it = name_of_id.find(name_id);
    if (it == name_of_id.end()) {
      auto q = rd.Query("SELECT name FROM names WHERE name_id = ?1", {absl::StrCat(name_id)});
      it = name_of_id.emplace(name_id, q.ok() && !q->rows.empty() ? q->Text(0, "name") : "").first;
    }
    return it->second;
  };
  std::map<int64_t, std::string> op_of_name;  // names.name_id -> OpOf(name)
  const auto op_of = [&](int32_t name_id) -> const std::string& {
    auto it = op_of_name.find(name_id);
    if (it == op_of_name.end()) it = op_of_name.emplace(name_id, OpOf(name_of(name_id))).first;
    return it->second;
  };
  store::TimelineReader timeline(rd);
  std::map<int64_t, Collective> by_flow;
  std::map<int64_t, std::set<int>> hosts_of_flow;
  std::set<int64_t> repeated;  // a flow a rank holds twice is not one collective
  // Each rank's sends and receives (not matched across ranks: their peers are
  // not named): time blocked in them is waiting for a neighbour, not its own
  // work (a pipeline's last stage waits on the stages before it).
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> p2p;
  // Each rank's ops on its host threads (not collectives, not the profiler's
  // step spans around them): its own time with none of them running was a
  // sleep, a wait for input or the OS, not its model's work.
  // Time in its DataLoader's next() (PyTorch names it enumerate(DataLoader)#...)
  // is its input pipeline's, apart from the ops.
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> busy, input;
  enum class SpanKind : uint8_t { kOp, kStep, kInput };
  std::map<int32_t, SpanKind> span_kind;  // names.name_id -> what its slices are
  const auto kind_of_span = [&](int32_t name_id) {
    auto it = span_kind.find(name_id);
    if (it == span_kind.end()) {
      const std::string& name = name_of(name_id);
      it = span_kind
               .emplace(name_id, name.rfind("ProfilerStep#", 0) == 0           ? SpanKind::kStep
                                 : name.rfind("enumerate(DataLoader)", 0) == 0 ? SpanKind::kInput
                                                                               : SpanKind::kOp)
               .first;
    }
    return it->second;
  };
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max() / 4;
  for (size_t i = 0; i < tracks->rows.size(); ++i) {
    auto slices = timeline.Slices(run, tracks->Int(i, "track_id"), -kAll, kAll);
    if (!slices.ok()) return slices.status();
    const int host = static_cast<int>(tracks->Int(i, "host_id"));
    const int64_t track = tracks->Int(i, "track_id");
    for (const store::TimelineSlice& s : *slices) {
      if (s.kind != store::TimelineKind::kCollective && s.dur_ns > 0)
        switch (kind_of_span(s.name_id)) {
          case SpanKind::kOp: busy[host].push_back({s.start_ns, s.start_ns + s.dur_ns}); break;
          case SpanKind::kInput: input[host].push_back({s.start_ns, s.start_ns + s.dur_ns}); break;
          case SpanKind::kStep: break;
        }
      if (s.kind == store::TimelineKind::kCollective && s.flow_id < 0) {
        const std::string& op = op_of(s.name_id);
        if (op == "send" || op == "recv" || op == "isend" || op == "irecv" || op == "sendrecv")
          p2p[host].push_back({s.start_ns, s.start_ns + s.dur_ns});
      }
      if (s.kind != store::TimelineKind::kCollective || s.flow_id < 0 || s.step < 0) continue;
      Collective& c = by_flow[s.flow_id];
      c.step = s.step;
      if (const std::string& op = op_of(s.name_id); !op.empty()) c.ops.insert(op);
      const int64_t end = s.start_ns + s.dur_ns;
      if (hosts_of_flow[s.flow_id].insert(host).second) {
        c.members.push_back({host, track, s.start_ns, end});
        continue;
      }
      // The same call seen at several depths of one thread (c10d::allreduce_
      // > record_param_comms > nccl:all_reduce) is one arrival: the
      // outermost; so is the call and its run on the backend's worker thread
      // (gloo), which the import joins: the call is the arrival. Two calls
      // apart from each other on one thread are not one collective.
      Member& m = *std::find_if(c.members.begin(), c.members.end(), [&](const Member& x) { return x.host == host; });
      const bool nested = m.track != track || (s.start_ns >= m.arrival && end <= m.end) ||
                          (s.start_ns <= m.arrival && end >= m.end);
      if (!nested) {
        repeated.insert(s.flow_id);
        continue;
      }
      m.arrival = std::min(m.arrival, s.start_ns);
      m.end = std::max(m.end, end);
    }
  }
  const auto merge = [](std::vector<std::pair<int64_t, int64_t>>& spans) {
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& sp : spans)
      if (!merged.empty() && sp.first <= merged.back().second) merged.back().second = std::max(merged.back().second, sp.second);
      else merged.push_back(sp);
    spans = std::move(merged);
  };
  for (auto& [host, spans] : p2p) merge(spans);  // a call shows on its caller's thread and the backend's
  // Ops nest and run on several threads: their union, less the input
  // pipeline's time (a single-process DataLoader runs its ops inside it), with
  // sums before each span for the time they cover in any window.
  using Spans = std::map<int, std::vector<std::pair<int64_t, int64_t>>>;
  for (auto& [host, spans] : input) merge(spans);
  for (auto& [host, spans] : busy) {
    merge(spans);
    auto in = input.find(host);
    if (in == input.end()) continue;
    std::vector<std::pair<int64_t, int64_t>> out;
    size_t k = 0;
    for (auto [a, b] : spans) {
      while (k < in->second.size() && in->second[k].second <= a) ++k;
      for (size_t j = k; j < in->second.size() && in->second[j].first < b; ++j) {
        if (in->second[j].first > a) out.push_back({a, in->second[j].first});
        a = std::max(a, in->second[j].second);
      }
      if (a < b) out.push_back({a, b});
    }
    spans = std::move(out);
  }
  std::map<int, std::vector<int64_t>> busy_before, input_before;
  for (auto* which : {&busy, &input})
    for (auto& [host, spans] : *which) {
      std::vector<int64_t>& before = (which == &busy ? busy_before : input_before)[host];
      before.assign(1, 0);
      for (const auto& [a, b] : spans) before.push_back(before.back() + (b - a));
    }
  const auto covered = [&](const Spans& all, std::map<int, std::vector<int64_t>>& sums, int host, int64_t from,
                           int64_t to) -> int64_t {
    auto it = all.find(host);
    if (it == all.end() || to <= from) return 0;
    const auto& spans = it->second;
    const std::vector<int64_t>& before = sums[host];
    auto covered_to = [&](int64_t t) {  // busy time before t
      const size_t k = static_cast<size_t>(
          std::upper_bound(spans.begin(), spans.end(), std::make_pair(t, std::numeric_limits<int64_t>::max())) -
          spans.begin());
      if (k == 0) return int64_t{0};
      return before[k - 1] + std::min(t, spans[k - 1].second) - spans[k - 1].first;
    };
    return covered_to(to) - covered_to(from);
  };
  const auto busy_in = [&](int host, int64_t from, int64_t to) { return covered(busy, busy_before, host, from, to); };
  const auto input_in = [&](int host, int64_t from, int64_t to) { return covered(input, input_before, host, from, to); };
  const auto blocked_in_p2p = [&](int host, int64_t from, int64_t to) {
    int64_t ns = 0;
    auto it = p2p.find(host);
    if (it == p2p.end()) return ns;
    for (const auto& [a, b] : it->second) {
      if (a >= to) break;
      ns += std::max<int64_t>(0, std::min(b, to) - std::max(a, from));
    }
    return ns;
  };
  std::vector<Collective> colls;
  for (auto& [flow, c] : by_flow) {
    if (repeated.count(flow) || c.members.size() < 2) continue;
    c.first_arrival = c.last_end = c.members.front().arrival;
    for (const Member& m : c.members) {
      c.first_arrival = std::min(c.first_arrival, m.arrival);
      c.last_end = std::max(c.last_end, m.end);
    }
    colls.push_back(std::move(c));
  }
  if (colls.empty()) return false;

  std::set<int> ranks;
  for (const Collective& c : colls)
    for (const Member& m : c.members) ranks.insert(m.host);
  r->hosts = static_cast<int>(ranks.size());
  // Ranks' host clocks are compared directly: each needs its offset to the
  // reference rank, which the import estimates from synchronous collectives
  // (gloo's, or collective kernels). An NCCL call on a host thread returns
  // before its GPU runs it, so it gives no offset and no arrival to compare.
  auto imported = rd.HasTable("trace_imports");
  if (!imported.ok()) return imported.status();
  if (*imported) {
    auto offsets = rd.Query("SELECT host_id FROM trace_imports WHERE run_id = ?1 AND clock_offset_ns IS NULL"
                            " ORDER BY host_id",
                            {run_text});
    if (!offsets.ok()) return offsets.status();
    std::vector<std::string> unknown;
    for (size_t i = 0; i < offsets->rows.size(); ++i)
      if (ranks.count(static_cast<int>(offsets->Int(i, "host_id"))))
        unknown.push_back(absl::StrCat(offsets->Int(i, "host_id")));
    if (!unknown.empty()) {
      r->supported = false;
      r->verdict = absl::StrCat(
          "cannot rank suspects: the clock", unknown.size() == 1 ? " of rank " : "s of ranks ",
          JoinFirst(unknown, kVerdictNames), " could not be lined up with the reference rank's",
          " (trace_imports.clock_offset_ns is NULL: the import matched no collective kernel or gloo collective",
          " to estimate it from), so when each rank called a collective cannot be compared; no one is flagged");
      r->notes.push_back(absl::StrCat(
          "the run's collectives show on host threads only",
          r->chips > 0 ? " and its GPUs show no collective kernel" : "",
          "; an NCCL call on a host thread returns before its GPU runs it, so it cannot line the clocks up",
          r->chips > 0 ? "" : ": record the GPUs' activity too (ProfilerActivity.CUDA)"));
      return true;
    }
    // Collectives the import could only pair by order, and whose order
    // paired calls of different groups: their arrivals compare nothing.
    auto has_stats = rd.HasTable("import_stats");
    if (!has_stats.ok()) return has_stats.status();
    if (*has_stats) {
      auto amb = rd.Query("SELECT count FROM import_stats WHERE run_id = ?1 AND name = 'collective_order_ambiguous'",
                          {run_text});
      if (!amb.ok()) return amb.status();
      if (!amb->rows.empty() && amb->Int(0, "count") > 0) {
        r->supported = false;
        r->verdict =
            "cannot rank suspects: the trace names no process group (older PyTorch) and the import could match "
            "the ranks' collectives only by their order, which paired calls of different groups (import_stats "
            "collective_order_ambiguous: subgroups, or ranks calling a collective a different number of times; "
            "or files of different runs given together, which such a trace's clocks, counted from each "
            "process's start, cannot tell apart), so when each rank called a collective cannot be compared; no "
            "one is flagged. A newer PyTorch's profiler (Kineto) names each call's group and its clock";
        return true;
      }
    }
  }
  r->supported = true;
  r->clock = "host";
  std::set<int> steps;
  for (const Collective& c : colls) steps.insert(c.step);
  std::vector<int> used(steps.begin(), steps.end());
  if (static_cast<int>(used.size()) > opt.min_steps + 1) {
    r->notes.push_back(absl::StrCat("step ", used.front(), " left out (warm-up)"));
    used.erase(used.begin());
  }
  const std::set<int> analysed(used.begin(), used.end());
  r->steps = static_cast<int>(used.size());
  r->notes.push_back(absl::StrCat(
      "collectives on host threads only (", r->chips > 0 ? "gloo" : "a CPU-only trace",
      "): ranks are compared by when they called each collective and by their own time since they left their "
      "previous collective, on the host clock; ",
      r->chip_rows.empty() ? "there is no per-chip breakdown"
                           : "the per-chip breakdown is the GPUs' own, on the device clock"));
  {
    auto median = MedianStepWallNs(rd, run);
    if (!median.ok()) return median.status();
    r->median_step_ns = *median;
  }
  if (r->steps < opt.min_steps) {
    r->supported = false;
    r->verdict = absl::StrCat("cannot rank suspects: only ", r->steps, " step", r->steps == 1 ? "" : "s",
                              " with collectives across ranks (need ", opt.min_steps,
                              ") — too few to tell a slow rank from noise; no one is flagged");
    return true;
  }

  std::sort(colls.begin(), colls.end(),
            [](const Collective& a, const Collective& b) { return a.first_arrival < b.first_arrival; });
  // One collective can show on two threads of each rank (c10d::allreduce_ on
  // the caller, gloo:all_reduce on a worker), matched as two flows. No rank
  // leaves a collective before every rank has called it, so a flow of the
  // same operation that some rank calls before the last call of the one
  // before, among the same ranks, is that one again: counted once, at the
  // first thread's calls. (A broadcast's root does leave early: the next
  // collective, another operation, stays its own.)
  {
    std::vector<Collective> once;
    auto hosts = [](const Collective& c) {
      std::set<int> h;
      for (const Member& m : c.members) h.insert(m.host);
      return h;
    };
    for (Collective& c : colls) {
      if (!once.empty()) {
        const Collective& prev = once.back();
        int64_t last_call = prev.first_arrival;
        for (const Member& m : prev.members) last_call = std::max(last_call, m.arrival);
        const bool same_op = c.ops.empty() || prev.ops.empty() ||
                             std::any_of(c.ops.begin(), c.ops.end(), [&](const std::string& op) {
                               return prev.ops.count(op) > 0;
                             });
        if (c.first_arrival < last_call && hosts(c) == hosts(prev) && same_op) {
          once.back().last_end = std::max(once.back().last_end, c.last_end);
          once.back().ops.insert(c.ops.begin(), c.ops.end());
          for (Member& m : once.back().members)
            for (const Member& n : c.members)
              if (n.host == m.host) m.end = std::max(m.end, n.end);
          continue;
        }
      }
      once.push_back(std::move(c));
    }
    colls = std::move(once);
  }
  struct PerRank {
    int collectives = 0, last = 0;
    double late_sum = 0, margin_sum = 0;
    // Its own time before each collective and its peers' median own time:
    // the slowdown is the ratio of their sums. A rank slow before one of a
    // step's four collectives is slow by that much a step, which a median
    // over the collectives did not see (three of four on time: 1.01x for a
    // rank 1.49x slower in total, beside its own evidence of 17.3 ms against
    // 11.6 ms). Flagged only when the excess holds from step to step (below).
    double own_sum = 0, peers_sum = 0;
    double busy_sum = 0, peers_busy_sum = 0;    // the part of each with ops running
    double input_sum = 0, peers_input_sum = 0;  // and in the input pipeline
    int measured = 0;                      // collectives with both
    std::map<int, double> excess_by_step;  // own - peers' per step
    std::map<int, double> peers_by_step;   // peers' own time per step
    std::map<int, double> margin_by_step;  // what its last calls held the others, per step
  };
  std::map<int, PerRank> per;
  std::map<int, int64_t> left;  // rank -> when it left its latest collective so far
  for (size_t k = 0; k < colls.size(); ++k) {
    const Collective& c = colls[k];
    if (!analysed.count(c.step)) {
      for (const Member& m : c.members) left[m.host] = std::max(left[m.host], m.end);
      continue;
    }
    ++r->collectives;
    std::vector<double> arrivals;
    for (const Member& m : c.members) arrivals.push_back(static_cast<double>(m.arrival));
    const double med = Median(arrivals);
    const Member* last = &c.members.front();
    for (const Member& m : c.members)
      if (m.arrival > last->arrival) last = &m;
    double second = -1e300;
    for (const Member& m : c.members)
      if (&m != last) second = std::max(second, static_cast<double>(m.arrival));
    for (const Member& m : c.members) {
      ++per[m.host].collectives;
      per[m.host].late_sum += static_cast<double>(m.arrival) - med;
    }
    if (last->arrival > second) {
      ++per[last->host].last;
      per[last->host].margin_sum += static_cast<double>(last->arrival) - second;
      per[last->host].margin_by_step[c.step] += static_cast<double>(last->arrival) - second;
    }
    // Each rank's own time: from its leaving its own previous collective to
    // its call of this one, both on its own clock (so no clock offset enters
    // it, nor the order the files were given in). The time it waited inside
    // collectives is left out: with many collectives a step (a broadcast's
    // root leaving before the others), a window from the group's last
    // release spanned several, and everyone's waiting in them diluted one
    // rank's pause.
    std::vector<double> own, own_busy, own_input;
    bool all = true;
    for (const Member& m : c.members) {
      auto it = left.find(m.host);
      const bool known = it != left.end() && it->second <= m.arrival;
      all = all && known;
      own.push_back(known ? static_cast<double>(m.arrival - it->second -
                                                blocked_in_p2p(m.host, it->second, m.arrival))
                          : 0.0);
      own_busy.push_back(known ? std::min(own.back(), static_cast<double>(busy_in(m.host, it->second, m.arrival)))
                               : 0.0);
      own_input.push_back(known ? std::min(own.back() - own_busy.back(),
                                           static_cast<double>(input_in(m.host, it->second, m.arrival)))
                                : 0.0);
    }
    for (const Member& m : c.members) left[m.host] = std::max(left[m.host], m.end);
    if (!all) continue;  // a rank's first collective, or one it called before leaving its last
    const std::vector<double> peers_of = LeaveOneOutMedians(own);
    const std::vector<double> peers_busy_of = LeaveOneOutMedians(own_busy);
    const std::vector<double> peers_input_of = LeaveOneOutMedians(own_input);
    for (size_t i = 0; i < c.members.size(); ++i) {
      const double peers = peers_of[i];
      if (peers <= 0) continue;
      PerRank& p = per[c.members[i].host];
      p.own_sum += own[i];
      p.peers_sum += peers;
      p.busy_sum += own_busy[i];
      p.peers_busy_sum += peers_busy_of[i];
      p.input_sum += own_input[i];
      p.peers_input_sum += peers_input_of[i];
      ++p.measured;
      p.excess_by_step[c.step] += own[i] - peers;
      p.peers_by_step[c.step] += peers;
    }
  }
  // Each rank's file, said beside it: legacy traces carry no rank, so rank N
  // is the N-th file given, and a file left out renumbers the rest.
  std::map<int, std::string> file_of;
  if (imported.ok() && *imported)
    if (auto files = rd.Query("SELECT host_id, file FROM trace_imports WHERE run_id = ?1", {run_text}); files.ok())
      for (size_t i = 0; i < files->rows.size(); ++i) {
        const std::string& path = files->Text(i, "file");
        file_of[static_cast<int>(files->Int(i, "host_id"))] = path.substr(path.find_last_of('/') + 1);
      }
  // Each rank's excess step by step against the run's noise, as a host's on
  // the device clock (fleet_noise.h): a pause in one step (a rank stalled
  // 300 ms once in 48 ms steps) stands far above it, though not steadily.
  // Unclipped: two ranks are each other's only peer, one's excess the
  // other's shortfall, and with each counting its excess alone the other's
  // steps read 1.000 and the noise nothing (a healthy pair's one-off spikes
  // stood 6.6 standard deviations above it).
  std::map<int, fleet_internal::StepRatios> step_ratios;
  for (auto& [host, p] : per) {
    fleet_internal::StepRatios& sr = step_ratios[host];
    for (const auto& [step, e] : p.excess_by_step)
      if (const double peers = p.peers_by_step[step]; peers > 0) sr.ratios.push_back(1 + e / peers);
  }
  fleet_internal::SummarizeAndSetNoise(step_ratios);
  for (auto& [host, p] : per) {
    FleetSuspect s;
    s.kind = "host";
    s.id = absl::StrCat(host);
    s.collectives = p.collectives;
    s.last_arrivals = p.last;
    s.late_ns_per_step = p.late_sum / r->steps;
    s.saved_ns_per_step = p.margin_sum / r->steps;
    const double own_sum = p.own_sum, peers_sum = p.peers_sum;
    const bool measured = p.measured > 0 && peers_sum > 0;
    const double sum_ratio = measured ? own_sum / peers_sum : 1;
    // Its median step too: a peer's stall in a few steps swells the peers'
    // sum (with two peers their median is their mean), and hid a rank 1.15x
    // its peers in 10 of 14 steps behind a 0.94x ratio of sums, ranked last.
    const fleet_internal::StepRatios& sr = step_ratios[host];
    // (The lower median: over its peers in more than half its steps.)
    double median_ratio = 1;
    if (sr.ratios.size() >= 3) {
      std::vector<double> sorted = sr.ratios;
      std::sort(sorted.begin(), sorted.end());
      median_ratio = sorted[(sorted.size() - 1) / 2];
    }
    s.slowdown = std::max(sum_ratio, median_ratio);
    s.score = std::max(0.0, s.slowdown - 1);
    // The excess must hold across steps, not be one step's stall or noise
    // on sub-millisecond gaps: its mean over the steps at least 3 standard
    // errors above zero (two healthy ranks 0.87 against 0.80 ms a collective,
    // 1.09x, differ by less).
    double mean = 0, var = 0;
    const double n = static_cast<double>(p.excess_by_step.size());
    for (const auto& [step, e] : p.excess_by_step) mean += e / n;
    for (const auto& [step, e] : p.excess_by_step) var += (e - mean) * (e - mean) / std::max(1.0, n - 1);
    const bool steady = n >= 2 && mean > 0 && mean >= 3 * std::sqrt(var / n);
    // A saving made in a few steps (a one-off pause) is said as what it
    // saves in those steps: a mean over all of them read as every step's.
    // The fewest steps that hold 80% of it, each over a tenth of a step.
    std::vector<std::pair<double, int>> by_margin;
    for (const auto& [step, m] : p.margin_by_step) by_margin.push_back({m, step});
    std::sort(by_margin.rbegin(), by_margin.rend());
    std::vector<int> steps_of;
    double in_big = 0;
    for (const auto& [m, step] : by_margin) {
      if (in_big >= 0.8 * p.margin_sum || r->median_step_ns <= 0 || m <= 0.1 * r->median_step_ns) break;
      steps_of.push_back(step);
      in_big += m;
    }
    std::sort(steps_of.begin(), steps_of.end());
    std::vector<std::string> big;
    for (int step : steps_of) big.push_back(absl::StrCat(step));
    // A third of the steps at most: a rank slow throughout has its lateness
    // fall unevenly too (4 of 9 steps holding 80% of it), and is said per step.
    // And twice any other rank's lateness: two ranks of a healthy job on
    // shared cores each had one-off spikes, and the one flagged was no later
    // than the other.
    double others_late = 0;
    for (const auto& [other, q] : per)
      if (other != host) others_late = std::max(others_late, q.margin_sum);
    const bool few = !big.empty() && big.size() * 3 <= static_cast<size_t>(r->steps) &&
                     in_big >= 0.8 * p.margin_sum && p.margin_sum >= 2 * others_late;
    // Not steadily slow, it is flagged for a pause: beyond the run's noise,
    // and holding the others up in a few steps (a rank stalled 300 ms once).
    // Beyond the noise alone flagged a rank of a healthy job that was never
    // last at a collective, and one whose lateness spread over 4 of 9 steps.
    const bool beyond = sr.ratios.size() >= 2 && sr.BeyondNoise();
    // Slow in most steps, whatever its peers did in the others: the median
    // step's ratio past the threshold, and its lower bound (the sign test,
    // 99.5%) above 1, as a chip's on the device clock.
    const bool slow_in_most = median_ratio - 1 >= opt.flag_threshold && sr.MedianLowerBound() > 1;
    s.flagged = measured && s.score >= opt.flag_threshold &&
                (((steady || (beyond && few)) && sum_ratio - 1 >= opt.flag_threshold) || slow_in_most);
    if (s.flagged && !steady)
      s.saved_in_steps = absl::StrCat(Ms(in_big), " in ", big.size() == 1 ? "step " : "steps ",
                                      absl::StrJoin(big, ", "), big.size() == 1 ? " alone" : "");
    if (measured && s.score >= opt.flag_threshold && !s.flagged) s.not_flagged_why = "not steadily from step to step";
    if (measured && s.score >= opt.flag_threshold && !s.flagged) {
      const auto above = std::count_if(sr.ratios.begin(), sr.ratios.end(), [](double q) { return q > 1; });
      r->notes.push_back(
          median_ratio > sum_ratio
              ? absl::StrCat("rank ", host, " is ", absl::StrFormat("%.2f", median_ratio),
                             "x its peers' own time in its median step, over theirs in ", above, " of ",
                             sr.ratios.size(), " steps: not steadily enough to be told from the run's noise, not "
                             "flagged")
              : absl::StrCat("rank ", host, " is ", absl::StrFormat("%.2f", s.slowdown),
                             "x its peers' own time but not steadily from step to step (", Ms(mean),
                             " more a step on average, its steps spread by ", Ms(std::sqrt(var)), "): not flagged"));
    }
    s.evidence.push_back(absl::StrCat("rank ", host, file_of.count(host) ? absl::StrCat(" (", file_of[host], ")") : "",
                                      ": last to call ", p.last, " of ", p.collectives,
                                      " collectives, on average ", Ms(std::max(0.0, p.late_sum / p.collectives)),
                                      " after the ranks' median (host clock)"));
    if (!measured) {
      s.evidence.push_back("its own time between collectives could not be measured (no collective before the first)");
    } else {
      s.evidence.push_back(absl::StrCat("its own time from leaving its previous collective to its call: ",
                                        Ms(own_sum / p.measured), " per collective against its peers' ",
                                        Ms(peers_sum / p.measured), " (", absl::StrFormat("%.2f", sum_ratio),
                                        "x, over ", Plural(p.measured, "collective", "collectives"),
                                        median_ratio > sum_ratio
                                            ? absl::StrFormat("; %.2fx in its median step", median_ratio)
                                            : "",
                                        ")"));
      // Where its extra time went: running ops (its model's work, or more of
      // it), or with none running (a sleep, a slow input pipeline, the OS).
      // Only where its peers show ops in their own time: a trace of
      // collectives alone has no ops to tell them apart.
      const double n = p.measured;
      const double excess = (own_sum - peers_sum) / n;
      const double ops = p.busy_sum / n, peer_ops = p.peers_busy_sum / n;
      const double in_input = p.input_sum / n, peer_input = p.peers_input_sum / n;
      const double idle = own_sum / n - ops - in_input, peer_idle = peers_sum / n - peer_ops - peer_input;
      const double more_idle = idle - peer_idle, more_ops = ops - peer_ops, more_input = in_input - peer_input;
      const bool loader = p.input_sum + p.peers_input_sum > 0;
      if (excess > 0 && p.peers_busy_sum > 0 && s.score >= opt.flag_threshold)
        s.evidence.push_back(absl::StrCat(
            "its own time per collective: ", Ms(std::max(0.0, idle)), " with no op running on its threads (its peers' ",
            Ms(std::max(0.0, peer_idle)), "), ",
            loader ? absl::StrCat(Ms(in_input), " in its DataLoader (", Ms(peer_input), "), ") : "", Ms(ops),
            " running ops (", Ms(peer_ops), "): ",
            more_idle >= 0.8 * excess    ? "its extra time is idle, so look at its host (a sleep, a wait on another "
                                           "process, the OS descheduling it), not its model's work"
            : more_input >= 0.8 * excess ? "its extra time is its input pipeline (enumerate(DataLoader) spans): more "
                                           "loader workers, or a faster dataset"
            : more_ops >= 0.8 * excess   ? "its extra time is in ops, so its own work is slower (more ops, or slower "
                                           "ones: compare its ops with a peer's in the timeline)"
                                         : "its extra time is both in its work and outside it"));
      if (sr.ratios.size() >= 2)
        s.evidence.push_back(absl::StrFormat(
            "step by step %.3fx to %.3fx its peers' own time (1 + its excess over theirs; %s)", sr.lo, sr.hi,
            fleet_internal::AboveNoise(sr.noise)));
    }
    const std::string share =
        r->median_step_ns > 0
            ? absl::StrFormat("%.1f%% of the median step", 100 * s.saved_ns_per_step / r->median_step_ns)
            : "";
    s.evidence.push_back(absl::StrCat(
        "what-if: had it called with its peers, the collectives it was last at would start ",
        s.saved_in_steps.empty()
            ? absl::StrCat(Ms(s.saved_ns_per_step), " per step sooner", share.empty() ? "" : absl::StrCat(" (", share, ")"))
            : absl::StrCat("sooner by ", s.saved_in_steps, " (", Ms(s.saved_ns_per_step), " a step averaged over ",
                           r->steps, " steps", share.empty() ? "" : absl::StrCat(", ", share), ")")));
    r->suspects.push_back(std::move(s));
  }
  std::stable_sort(r->suspects.begin(), r->suspects.end(), [](const FleetSuspect& a, const FleetSuspect& b) {
    return a.flagged != b.flagged ? a.flagged : a.score > b.score;  // the flagged first
  });
  std::vector<std::string> flagged;
  for (const FleetSuspect& s : r->suspects)
    if (s.flagged)
      flagged.push_back(absl::StrCat("host ", s.id, " (", absl::StrFormat("%.2f", s.slowdown), "x",
                                     s.saved_in_steps.empty() ? "" : absl::StrCat(", late by ", s.saved_in_steps), ")"));
  const std::string pct = absl::StrFormat("%.1f%%", 100 * opt.flag_threshold);
  if (flagged.empty() && r->median_step_ns > 0) {
    // One-off holds, each rank's largest: a rank that held a step up by half
    // a step or more is named with it, though such holds on several ranks
    // (a shared machine's pauses) flag no one: "no rank stands out" alone
    // hid a rank 62 ms late in one 43 ms step.
    std::vector<std::pair<double, std::string>> holds;
    for (const auto& [host, p] : per) {
      auto big = std::max_element(p.margin_by_step.begin(), p.margin_by_step.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
      if (big != p.margin_by_step.end() && big->second >= 0.5 * r->median_step_ns)
        holds.push_back({big->second, absl::StrCat("rank ", host, " held step ", big->first, " up by ",
                                                   Ms(big->second))});
    }
    std::sort(holds.rbegin(), holds.rend());
    std::vector<std::string> said;
    for (const auto& [ns, text] : holds) said.push_back(text);
    if (!said.empty())
      r->notes.push_back(absl::StrCat(
          said.size() == 1 ? "a one-off hold of half a step or more: " : "one-off holds of half a step or more, each rank's largest: ",
          absl::StrJoin(said, "; "),
          said.size() == 1 ? " (not flagged: a pause is, when it stands beyond the run's noise and holds the others "
                             "up twice as long as any other rank does)"
                           : " (on several ranks, as a shared machine's pauses are: none flagged)"));
  }
  if (flagged.empty()) {
    const bool unsteady = !r->suspects.empty() && r->suspects.front().score >= opt.flag_threshold;
    r->verdict = absl::StrCat(
        "no rank stands out: none is ", pct, " or more slower than its peers",
        unsteady ? " steadily from step to step" : "",
        r->suspects.empty() ? ""
                            : absl::StrCat(" (the most: host ", r->suspects.front().id, ", ",
                                           absl::StrFormat("%.1f%%", 100 * r->suspects.front().score),
                                           unsteady ? ", not steadily: see the note" : "", ")"));
  } else {
    r->verdict =
        absl::StrCat(flagged.size() == 1 ? "suspect: " : "suspects: ", JoinFirst(flagged, kVerdictNames),
                     " — slower than its peers by at least ", pct, " (host clock, ranks as hosts)");
  }
  return true;
}

}  // namespace shardscope::analysis::internal
