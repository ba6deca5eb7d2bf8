// Fleet diagnosis (see fleet.h).
#include "profiler/analysis/fleet.h"
#include "profiler/analysis/fleet_steps.h"

#include "profiler/analysis/fleet_host.h"

#include "store/sim_timeline.h"
#include "store/timeline.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace shardscope::analysis {

using namespace fleet_internal;  // the step data and its helpers (fleet_steps.h)

namespace {

std::string Ms(double ns) { return absl::StrFormat("%.3f ms", ns / 1e6); }
std::string Pct(double f) { return absl::StrFormat("%.1f%%", f * 100); }

}  // namespace

absl::StatusOr<FleetReport> AnalyzeFleet(const store::Reader& rd, const FleetOptions& opt) {
  FleetReport r;
  r.threshold = opt.flag_threshold;
  int64_t run = opt.run_id;
  if (run < 0) {
    auto latest = rd.LatestRunId();
    if (!latest.ok()) return latest.status();
    run = *latest;
  }
  r.run_id = run;
  const std::string run_text = absl::StrCat(run);
  auto info = rd.Query(
      "SELECT * FROM runs WHERE run_id = ?1", {run_text});  // * : files before runs.imported lack it
  if (!info.ok()) return info.status();
  if (info->rows.empty()) return absl::NotFoundError(absl::StrCat("no run ", run, " in ", rd.path()));
  r.sample = info->Text(0, "sample");
  r.topology = info->Text(0, "topology");
  r.imported = info->Col("imported") >= 0 && info->Int(0, "imported") != 0;
  r.simulated = info->Col("simulated") >= 0 && info->Int(0, "simulated") != 0;
  r.clock = r.simulated ? "modeled" : "device";

  // Chips and hosts; coordinates in the topology when recorded (older files lack the column).
  auto has_column = [&](const char* table, const char* column) {
    auto has = rd.HasColumn(table, column);
    return has.ok() && *has;
  };
  const bool topo_coords = has_column("devices", "topology_coords");
  auto devs = rd.Query(absl::StrCat("SELECT device_id, host_id, coords",
                                    topo_coords ? ", topology_coords" : ", NULL AS topology_coords",
                                    " FROM devices WHERE run_id = ?1 ORDER BY device_id"),
                       {run_text});
  if (!devs.ok()) return devs.status();
  std::map<int, int> host_of;
  std::map<int, std::string> coords_of;
  for (size_t i = 0; i < devs->rows.size(); ++i) {
    const int d = static_cast<int>(devs->Int(i, "device_id"));
    host_of[d] = static_cast<int>(devs->Int(i, "host_id"));
    coords_of[d] = devs->Text(i, "topology_coords", devs->Text(i, "coords"));
  }
  // Link kinds (ici, dcn), so a link is compared with links of its kind.
  std::map<std::string, std::string> link_kind;
  std::map<std::string, double> link_bandwidth;
  if (has_column("devices", "links")) {
    auto links = rd.Query("SELECT link_id, kind, bandwidth FROM links WHERE run_id = ?1", {run_text});
    if (links.ok())
      for (size_t i = 0; i < links->rows.size(); ++i) {
        link_kind[links->Text(i, "link_id")] = links->Text(i, "kind");
        link_bandwidth[links->Text(i, "link_id")] = links->Real(i, "bandwidth");
      }
  }

  // The device-clock slices of every step.
  auto progress = [&](double fraction, const std::string& phase) {
    if (opt.progress) opt.progress(fraction, phase);
  };
  progress(-1, "reading the slices");
  const bool has_arrival = has_column("slices", "arrival_ns");
  std::map<int, StepData> steps;
  absl::flat_hash_map<int64_t, int64_t> flow_of_slice;  // collective slice id -> its flow
  Names names;
  std::vector<int32_t> link_of_name;  // Names id -> the Names id of its "A-B", -1: not a link slice
  auto link_of = [&](int32_t name) {
    if (static_cast<size_t>(name) >= link_of_name.size()) link_of_name.resize(names.size(), -2);
    int32_t& l = link_of_name[static_cast<size_t>(name)];
    if (l == -2) {
      const std::string& text = names.Text(name);
      l = text.rfind("link ", 0) == 0 ? names.Id(text.substr(5)) : -1;
    }
    return l;
  };
  // One slice as the analysis keeps it (from SQL rows, or made from a simulated run's schedule).
  struct Raw {
    int64_t id, parent, start, dur, flow, arrival, bytes, graph, op_id;
    int depth, device;
    Kind kind;
    int32_t name;
  };
  auto add = [&](const Raw& x, int step) {
    StepData& s = steps[step];
    s.step = step;
    if (x.depth == 0) {
      if (x.kind == kCollective && x.flow >= 0) flow_of_slice[x.id] = x.flow;
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
      s.ops[x.device].push_back(op);
    } else if (x.kind == kTransfer) {
      if (const int32_t link = link_of(x.name); link >= 0)
        s.links.push_back({link, x.parent, x.bytes, x.dur});  // flow filled below
    }
  };
  absl::Status st;
  if (r.simulated) {
    // A simulated run's slices are made from its schedule: in C++, not row by row through SQL.
    int last_step = INT32_MIN;
    st = store::SimTimelineReader(rd).ForEachSlice(run, [&](const store::SimTimelineReader::Row& row) {
      const trace::SimSlice& x = row.slice;
      if (row.step != last_step) {
        last_step = row.step;
        progress(-1, absl::StrCat("reading the slices: step ", row.step));
      }
      add({x.slice_id, x.parent_id, x.start_ns, x.dur_ns, x.flow_id, x.arrival_ns, x.bytes, row.graph_id, x.op_id,
           x.depth, row.device_id, KindOf(trace::SliceKindName(x.kind)), names.Id(row.name)},
          row.step);
    });
  } else {
    // Stored slices, decoded natively a track at a time (a row per slice
    // through SQL, its numbers made text and back, took 53 s of a 10M-slice
    // run's report).
    std::vector<int32_t> name_ids;  // names.name_id -> Names id
    st = rd.ForEachRow("SELECT name_id, name FROM names", {}, [&](const std::vector<store::Cell>& c) {
      int64_t id = -1;
      if (!c[0] || !absl::SimpleAtoi(*c[0], &id) || id < 0 || id > INT32_MAX) return;
      if (static_cast<size_t>(id) >= name_ids.size()) name_ids.resize(static_cast<size_t>(id) + 1, -1);
      name_ids[static_cast<size_t>(id)] = names.Id(c[1].value_or(""));
    });
    const int32_t unnamed = names.Id(std::string());
    auto tracks = rd.Query("SELECT track_id, device_id FROM tracks WHERE run_id = ?1 AND clock = ?2"
                           " AND device_id IS NOT NULL ORDER BY track_id",
                           {run_text, r.clock});
    if (!tracks.ok()) return tracks.status();
    store::TimelineReader tl(rd);
    for (size_t i = 0; st.ok() && i < tracks->rows.size(); ++i) {
      progress(0.5 * i / tracks->rows.size(), "reading the slices");
      auto slices = tl.Slices(run, tracks->Int(i, "track_id"), INT64_MIN / 4, INT64_MAX / 4);
      if (!slices.ok()) return slices.status();
      const int device = static_cast<int>(tracks->Int(i, "device_id"));
      for (const store::TimelineSlice& x : *slices) {
        if (x.step < 0) continue;
        const bool named = x.name_id >= 0 && static_cast<size_t>(x.name_id) < name_ids.size() &&
                           name_ids[static_cast<size_t>(x.name_id)] >= 0;
        add({x.slice_id, x.parent_id, x.start_ns, x.dur_ns, x.flow_id, has_arrival ? x.arrival_ns : -1, x.bytes,
             x.graph_id, x.op_id, x.depth, device, KindOf(store::TimelineKindName(x.kind)),
             named ? name_ids[static_cast<size_t>(x.name_id)] : unnamed},
            x.step);
      }
    }
  }
  if (!st.ok()) return st;
  for (auto& [n, s] : steps) {
    for (auto& [d, ops] : s.ops)
      std::sort(ops.begin(), ops.end(),
                [](const Op& a, const Op& b) { return std::tie(a.start, a.id) < std::tie(b.start, b.id); });
    for (LinkUse& l : s.links) {
      auto it = flow_of_slice.find(l.flow);
      l.flow = it == flow_of_slice.end() ? -1 : it->second;
    }
  }
  r.chips = static_cast<int>(host_of.size());
  std::set<int> hosts;
  for (const auto& [d, h] : host_of) hosts.insert(h);
  r.hosts = static_cast<int>(hosts.size());

  // Collective instances: one per flow with at least two chips.
  std::map<int64_t, Instance> instances;
  std::map<int, std::map<int64_t, Instance*>> by_step;
  for (const auto& [n, s] : steps)
    for (const auto& [d, ops] : s.ops)
      for (const Op& op : ops) {
        if (op.kind != kCollective || op.flow < 0) continue;
        Instance& in = instances[op.flow];
        in.step = n;
        in.flow = op.flow;
        in.members.push_back({d, op.arrival >= 0 ? op.arrival : op.start, op.start, op.dur});
      }
  for (auto it = instances.begin(); it != instances.end();) {
    Instance& in = it->second;
    std::set<int> devices;
    for (const auto& m : in.members) devices.insert(m.device);
    if (devices.size() < 2 || devices.size() != in.members.size()) {
      it = instances.erase(it);  // one chip (nothing to wait for), or a flow a chip holds twice
      continue;
    }
    int64_t last = 0;
    for (const auto& m : in.members) last = std::max(last, m.arrival);
    int64_t proper = INT64_MAX;
    for (const auto& m : in.members) proper = std::min(proper, m.start + m.dur - std::max(last, m.start));
    in.proper_ns = std::max<int64_t>(0, proper);
    by_step[in.step][in.flow] = &in;
    ++it;
  }
  // The steps to analyse: those with collectives; the first is left out when
  // there are enough (it holds the warm-up: weights moved onto the chips).
  std::vector<int> used;
  for (const auto& [n, m] : by_step) used.push_back(n);
  if (static_cast<int>(used.size()) > opt.min_steps + 1) {
    r.notes.push_back(absl::StrCat("step ", used.front(), " left out (warm-up)"));
    used.erase(used.begin());
  }
  r.steps = static_cast<int>(used.size());
  for (int n : used) r.collectives += static_cast<int64_t>(by_step[n].size());

  if (opt.per_step) {
    // MFU needs each kernel's FLOPs (`ops`, per chip and execution).
    absl::flat_hash_map<std::pair<int32_t, int32_t>, double> flops_of;
    if (auto has = rd.HasTable("ops"); has.ok() && *has) {
      auto st_ops = rd.ForEachRow("SELECT graph_id, op_id, flops FROM ops WHERE run_id = ?1 AND flops > 0", {run_text},
                                  [&](const std::vector<store::Cell>& c) {
                                    int64_t g = 0, o = 0;
                                    double f = 0;
                                    if (c[0] && c[1] && c[2] && absl::SimpleAtoi(*c[0], &g) &&
                                        absl::SimpleAtoi(*c[1], &o) && absl::SimpleAtod(*c[2], &f))
                                      flops_of[{static_cast<int32_t>(g), static_cast<int32_t>(o)}] = f;
                                  });
      if (!st_ops.ok()) return st_ops;
    }
    PerStepRows(steps, by_step, used, host_of, flops_of, &r);
  }

  // Step spans and the per-chip breakdown.
  std::vector<double> spans;
  std::map<int, FleetChip> rows;
  std::vector<int> all_steps;
  for (const auto& [n, s] : steps) all_steps.push_back(n);
  const std::vector<int>& breakdown_steps = used.empty() ? all_steps : used;
  for (int n : breakdown_steps) {
    const StepData& s = steps[n];
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& [d, ops] : s.ops)
      for (const Op& op : ops) {
        lo = std::min(lo, op.start);
        hi = std::max(hi, op.start + op.dur);
      }
    if (lo > hi) continue;
    const double span = static_cast<double>(hi - lo);
    spans.push_back(span);
    for (const auto& [d, ops] : s.ops) {
      FleetChip& c = rows[d];
      double busy = 0;
      for (const Op& op : ops) busy += AddToBreakdown(op, c);
      c.idle_ns += std::max(0.0, span - busy);
      c.span_ns += span;
    }
  }
  r.median_step_ns = Median(spans);
  const double nsteps = std::max<size_t>(1, spans.size());
  for (auto& [d, c] : rows) {
    c.device_id = d;
    c.host_id = host_of.count(d) ? host_of[d] : d;
    c.coords = coords_of[d];
    for (double* v : {&c.compute_ns, &c.collective_ns, &c.wait_ns, &c.transfer_ns, &c.host_wait_ns,
                      &c.idle_ns, &c.span_ns})
      *v /= nsteps;
  }
  // Chips that stand out: above their peers' median by more than 4 median
  // absolute deviations and 5% of the step.
  constexpr double kStandOutShare = 0.05;
  if (rows.size() >= 3) {
    struct Cat {
      const char* name;
      double FleetChip::*field;
    };
    for (const Cat& cat : {Cat{"compute", &FleetChip::compute_ns}, Cat{"transfer", &FleetChip::transfer_ns},
                           Cat{"host wait", &FleetChip::host_wait_ns}}) {
      // Each chip's peers' median, and their median absolute deviation from
      // it: leave-one-out medians, as a pod of 4096 chips makes all-pairs
      // comparisons slow. The peers' median takes a few values only, so the
      // deviations are made once per value.
      std::vector<double> values;
      for (const auto& [d, c] : rows) values.push_back(c.*cat.field);
      const std::vector<double> meds = LeaveOneOutMedians(values);
      std::map<double, std::vector<double>> mads;  // peers' median -> each chip's peers' deviation
      for (double med : meds) {
        if (mads.count(med)) continue;
        std::vector<double> dev;
        for (double v : values) dev.push_back(std::fabs(v - med));
        mads[med] = LeaveOneOutMedians(dev);
      }
      size_t k = 0;
      for (auto& [d, c] : rows) {
        const double med = meds[k], mad = mads[med][k];
        ++k;
        if (c.*cat.field > med + std::max(4 * mad, kStandOutShare * r.median_step_ns))
          c.stands_out.push_back(absl::StrCat(cat.name, " ", Ms(c.*cat.field), "/step vs peers' ", Ms(med)));
      }
    }
  }
  for (auto& [d, c] : rows) r.chip_rows.push_back(c);

  // Can the data support an answer?
  if (instances.empty()) {
    r.supported = false;
    // A CPU-only trace (gloo) has its collectives on host threads.
    auto host_side = rd.Query(
        "SELECT COUNT(*) AS n FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
        " WHERE s.run_id = ?1 AND t.clock = 'host' AND s.kind = 'collective' AND s.flow_id IS NOT NULL",
        {run_text});
    const bool on_host = host_side.ok() && host_side->Int(0, "n") > 0;
    if (on_host) {
      auto done = internal::AnalyzeHostCollectives(rd, run, opt, &r);
      if (!done.ok()) return done.status();
      if (*done) return r;
    }
    r.verdict = absl::StrCat(
        "cannot rank suspects: run ", run, " has no collective across chips on the ", r.clock, " clock (",
        on_host ? "its host-thread collectives were not matched across ranks"
                : "one chip, or no timeline",
        "), so no chip can be late for its peers; no one is flagged");
    return r;
  }
  if (r.steps < opt.min_steps) {
    r.supported = false;
    r.verdict = absl::StrCat("cannot rank suspects: only ", r.steps, " step", r.steps == 1 ? "" : "s",
                             " with collectives (need ", opt.min_steps,
                             ") — too few to tell a slow chip from noise; no one is flagged");
    return r;
  }

  // Baseline replays, and whether the replay follows the recording at all.
  progress(-1, "re-scheduling the steps (what-if)");
  std::map<int, ReplayStep> replay_steps;
  for (int n : used) replay_steps[n] = IndexStep(steps[n], by_step[n]);
  std::map<int, int64_t> base;
  double base_total = 0;
  int replay_failed = 0;
  for (int n : used) {
    const int64_t b = Replay(replay_steps[n], {});
    if (b < 0) {
      ++replay_failed;
      continue;
    }
    base[n] = b;
    base_total += b;
  }
  const bool whatif = replay_failed * 2 < static_cast<int>(used.size()) && base_total > 0;
  if (replay_failed > 0)
    r.notes.push_back(absl::StrCat(replay_failed,
                                   " step(s) could not be re-scheduled (their chips' collectives do not "
                                   "line up, as in overlapping streams)",
                                   whatif ? "; left out of the what-if" : ""));
  auto saved_share = [&](const std::function<Change(int)>& change_of) {
    double saved = 0;
    for (const auto& [n, b] : base) {
      const int64_t w = Replay(replay_steps[n], change_of(n));
      if (w >= 0) saved += static_cast<double>(b - w);
    }
    return std::make_pair(saved / base_total, saved / std::max<size_t>(1, base.size()));
  };
  // Per step, each chip's time outside collectives (compute, transfers, host waits).
  std::map<int, std::map<int, double>> own_times;
  auto own_time = [&](int n) -> const std::map<int, double>& {
    auto [it, added] = own_times.try_emplace(n);
    if (added)
      for (const auto& [d, ops] : steps[n].ops)
        for (const Op& op : ops)
          if (op.kind != kCollective) it->second[d] += op.dur;
    return it->second;
  };
  auto time_of = [](const std::map<int, double>& t, int d) {
    auto it = t.find(d);
    return it == t.end() ? 0.0 : it->second;
  };

  // Each chip's kernels against the same kernels of its peers: per (step,
  // kernel name, occurrence), its time over the peers' median, and the median
  // of those ratios weighted by the kernel's time. One kernel slowed by the
  // machine (another process, a cache flushed) moves it little; a chip slower
  // at everything moves it by as much.
  std::map<int, std::vector<std::pair<double, double>>> ratios;  // chip -> (ratio, weight)
  for (int n : used) {
    // (name, occurrence) -> (chip, ns), chips ascending
    absl::flat_hash_map<std::pair<int32_t, int>, std::vector<std::pair<int, int64_t>>> same;
    std::vector<int> seen(names.size(), 0);
    std::vector<int32_t> touched;
    for (const auto& [d, ops] : steps[n].ops) {
      for (int32_t name : touched) seen[static_cast<size_t>(name)] = 0;
      touched.clear();
      for (const Op& op : ops)
        if (op.kind == kCompute || op.kind == kTransfer) {
          int& k = seen[static_cast<size_t>(op.name)];
          if (k == 0) touched.push_back(op.name);
          same[{op.name, k++}].push_back({d, op.dur});
        }
    }
    for (const auto& [key, by_chip] : same) {
      if (by_chip.size() < 2) continue;
      std::vector<double> all;
      for (const auto& [d, ns] : by_chip) all.push_back(static_cast<double>(ns));
      const std::vector<double> peers_median = LeaveOneOutMedians(all);
      size_t k = 0;
      for (const auto& [d, ns] : by_chip) {
        const double med = peers_median[k++];
        if (med > 0) ratios[d].push_back({ns / med, med});
      }
    }
  }
  auto weighted_median = [](std::vector<std::pair<double, double>> v) {
    if (v.empty()) return 1.0;
    std::sort(v.begin(), v.end());
    double total = 0, acc = 0;
    for (const auto& [x, w] : v) total += w;
    for (const auto& [x, w] : v)
      if ((acc += w) >= total / 2) return x;
    return v.back().first;
  };

  // Late arrival per chip.
  std::map<int, FleetSuspect> chips;
  std::map<int, std::vector<double>> margins;
  std::map<int, double> late_sum;
  for (int n : used)
    for (const auto& [flow, in] : by_step[n]) {
      std::vector<double> arrivals;
      for (const auto& m : in->members) arrivals.push_back(static_cast<double>(m.arrival));
      const double med = Median(arrivals);
      const auto last = std::max_element(in->members.begin(), in->members.end(),
                                         [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
      double second = -1e300;
      for (const auto& m : in->members)
        if (&m != &*last) second = std::max(second, static_cast<double>(m.arrival));
      for (const auto& m : in->members) {
        chips[m.device].collectives++;
        late_sum[m.device] += m.arrival - med;
      }
      // A tie (a simulated pod without faults arrives all at once) has no last chip.
      if (last->arrival > second) {
        chips[last->device].last_arrivals++;
        margins[last->device].push_back(last->arrival - second);
      }
    }
  // Every candidate, with what fixing it changes in the what-if.
  struct Candidate {
    FleetSuspect s;
    std::function<Change(int)> change;
  };
  std::vector<Candidate> cands;
  for (auto& [d, s] : chips) {
    s.kind = "chip";
    s.id = absl::StrCat(d);
    s.late_ns_per_step = late_sum[d] / r.steps;
    s.slowdown = weighted_median(ratios[d]);
    s.score = std::max(0.0, s.slowdown - 1);
    s.evidence.push_back(absl::StrCat("its kernels take ", absl::StrFormat("%.3f", s.slowdown),
                                      "x its peers' time for the same kernels (weighted median over ",
                                      ratios[d].size(), ")"));
    const double share = static_cast<double>(s.last_arrivals) / std::max(1, s.collectives);
    s.evidence.push_back(absl::StrCat(
        "arrived last at ", s.last_arrivals, " of ", s.collectives, " collectives (", Pct(share), ")",
        s.last_arrivals ? absl::StrCat(", by ", Ms(Median(margins[d])), " (median) over the next latest")
                        : ""));
    s.evidence.push_back(absl::StrCat("arrives ", Ms(std::fabs(s.late_ns_per_step)), " per step ",
                                      s.late_ns_per_step >= 0 ? "after" : "before",
                                      " its groups' median arrival"));
    if (host_of.count(d) && r.hosts > 1)
      s.evidence.push_back(absl::StrCat("on host ", host_of[d], ", at ", coords_of[d]));
    cands.push_back({s, [&, d = d](int n) {
                       // Its kernels and transfers at its peers' median each (as a whole: one factor per
                       // step).
                       Change c;
                       const auto& t = own_time(n);
                       std::vector<double> peers;
                       for (const auto& [e, v] : t)
                         if (e != d) peers.push_back(v);
                       const double med = Median(peers), own = time_of(t, d);
                       if (own > med && own > 0) c.scale[d] = med / own;
                       return c;
                     }});
  }

  // Hosts of several chips: what their chips share (all late together, as a
  // preempted or slow host makes them). One slow chip does not make its host
  // a suspect: the host's other chips are on time.
  std::map<int, std::vector<int>> chips_of_host;
  for (const auto& [d, h] : host_of) chips_of_host[h].push_back(d);
  const bool host_suspects = r.hosts > 1 && std::all_of(chips_of_host.begin(), chips_of_host.end(),
                                                        [](const auto& h) { return h.second.size() > 1; });
  // Per step, the chips' own times sorted, and each chip's rank there: a
  // host's peers are all chips but its own.
  struct OwnRanks {
    std::vector<double> values;
    absl::flat_hash_map<int, size_t> rank;
  };
  std::map<int, OwnRanks> own_sorted;
  auto own_ranks = [&](int n) -> const OwnRanks& {
    auto [it, added] = own_sorted.try_emplace(n);
    if (added) {
      std::vector<std::pair<double, int>> v;
      for (const auto& [d, x] : own_time(n)) v.push_back({x, d});
      std::sort(v.begin(), v.end());
      for (size_t k = 0; k < v.size(); ++k) {
        it->second.values.push_back(v[k].first);
        it->second.rank[v[k].second] = k;
      }
    }
    return it->second;
  };
  if (host_suspects) {
    for (const auto& [h, members] : chips_of_host) {
      FleetSuspect s;
      s.kind = "host";
      s.id = absl::StrCat(h);
      // Per step, what all its chips spend beyond the other hosts' chips' median outside collectives.
      auto common_of = [&, members = members](int n, double* peer_median) {
        const auto& t = own_time(n);
        const OwnRanks& sorted = own_ranks(n);
        std::vector<size_t> removed;  // the host's own chips
        for (int d : members)
          if (auto it = sorted.rank.find(d); it != sorted.rank.end()) removed.push_back(it->second);
        std::sort(removed.begin(), removed.end());
        *peer_median = MedianWithout(sorted.values, removed);
        double common = 1e300;
        for (int d : members) common = std::min(common, t.count(d) ? time_of(t, d) - *peer_median : 0.0);
        return std::max(0.0, common);
      };
      double common_sum = 0, peer_sum = 0;
      int hit = 0;
      for (int n : used) {
        double med = 0;
        const double c = common_of(n, &med);
        common_sum += c;
        peer_sum += med;
        hit += c > 0.1 * med;
      }
      s.slowdown = peer_sum > 0 ? 1 + common_sum / peer_sum : 1;
      s.score = s.slowdown - 1;
      s.evidence.push_back(
          absl::StrCat("its ", members.size(), " chips together spend ", Ms(common_sum / r.steps),
                       " per step more outside collectives than the other hosts' chips (", Pct(s.score),
                       " of their time; in ", hit, " of ", r.steps, " steps by more than 10%)"));
      cands.push_back({s, [&, members = members, common_of](int n) {
                         Change c;
                         double med = 0;
                         const double common = common_of(n, &med);
                         const auto& t = own_time(n);
                         if (common > 0)
                           for (int d : members)
                             if (time_of(t, d) > 0) c.scale[d] = (time_of(t, d) - common) / time_of(t, d);
                         return c;
                       }});
    }
  } else if (r.hosts > 1) {
    r.notes.push_back("hosts of one chip each (imported ranks): a host's evidence is its chip's");
  }

  // Links: time per byte against the other links of the same kind in the same collective.
  // Gathered per link (Names id), then keyed by its "A-B" for the ranking's order.
  struct LinkChange {
    int step;
    int64_t flow;
    int64_t new_ns;
  };
  struct LinkStats {
    std::vector<double> slowdowns;
    int uses = 0;
    std::pair<double, double> moved;  // (bytes, ns) over the steps
    std::vector<LinkChange> changes;
    bool seen = false;
  };
  absl::flat_hash_map<int32_t, LinkStats> link_stats;
  std::map<std::string, int32_t> kind_ids;
  absl::flat_hash_map<int32_t, int32_t> kind_of_link;  // Names id -> kind_ids value
  auto kind_of = [&](int32_t link) {
    auto it = kind_of_link.find(link);
    if (it != kind_of_link.end()) return it->second;
    const std::string& kind = link_kind[names.Text(link)];  // "" when not in the links view
    const int32_t k = kind_ids.try_emplace(kind, static_cast<int32_t>(kind_ids.size())).first->second;
    kind_of_link[link] = k;
    return k;
  };
  for (int n : used) {
    std::map<int64_t, std::vector<const LinkUse*>> per_flow;
    for (const LinkUse& l : steps[n].links)
      if (l.flow >= 0 && l.bytes > 0 && l.dur > 0) per_flow[l.flow].push_back(&l);
    for (const auto& [flow, ls] : per_flow) {
      auto inst = by_step[n].find(flow);
      if (inst == by_step[n].end()) continue;
      const int64_t D = inst->second->proper_ns;
      // The longest other link of any kind (the two longest), and each link's
      // peers' median time per byte among its kind (leave-one-out medians: a
      // torus all-reduce crosses thousands of links).
      size_t first = 0;
      for (size_t k = 1; k < ls.size(); ++k)
        if (ls[k]->dur > ls[first]->dur) first = k;
      int64_t second = 0;
      for (size_t k = 0; k < ls.size(); ++k)
        if (k != first) second = std::max(second, ls[k]->dur);
      std::map<int32_t, std::vector<size_t>> by_kind;
      for (size_t k = 0; k < ls.size(); ++k) by_kind[kind_of(ls[k]->link)].push_back(k);
      std::vector<double> peer_median(ls.size(), 0);
      std::vector<bool> has_peers(ls.size(), false);
      for (const auto& [kind, at] : by_kind) {
        if (at.size() < 2) continue;
        std::vector<double> rates;
        for (size_t k : at) rates.push_back(static_cast<double>(ls[k]->dur) / ls[k]->bytes);
        const std::vector<double> meds = LeaveOneOutMedians(rates);
        for (size_t j = 0; j < at.size(); ++j) {
          peer_median[at[j]] = meds[j];
          has_peers[at[j]] = true;
        }
      }
      for (size_t k = 0; k < ls.size(); ++k) {
        const LinkUse* l = ls[k];
        LinkStats& stats = link_stats[l->link];
        stats.seen = true;
        if (!has_peers[k]) continue;
        const int64_t max_other = k == first ? second : ls[first]->dur;
        const double med = peer_median[k];
        const double rate = static_cast<double>(l->dur) / l->bytes;
        stats.slowdowns.push_back(rate / med);
        stats.uses++;
        stats.moved.first += l->bytes;
        stats.moved.second += l->dur;
        const double replaced = med * l->bytes;
        const double freed = std::min<double>(l->dur, D) - std::max<double>(replaced, max_other);
        if (freed > 0) stats.changes.push_back({n, flow, static_cast<int64_t>(D - freed)});
      }
    }
  }
  std::set<std::string> seen_links;
  std::map<std::string, std::vector<double>> slowdowns;
  std::map<std::string, int> uses;
  std::map<std::string, std::pair<double, double>> moved;
  std::map<std::string, std::vector<LinkChange>> link_changes;
  for (auto& [id, stats] : link_stats) {
    const std::string& link = names.Text(id);
    if (stats.seen) seen_links.insert(link);
    if (stats.slowdowns.empty()) continue;
    slowdowns[link] = std::move(stats.slowdowns);
    uses[link] = stats.uses;
    moved[link] = stats.moved;
    if (!stats.changes.empty()) link_changes[link] = std::move(stats.changes);
  }
  r.links = static_cast<int>(seen_links.size());
  for (const auto& [link, sl] : slowdowns) {
    FleetSuspect s;
    s.kind = "link";
    s.id = link;
    s.collectives = uses[link];
    s.slowdown = Median(sl);
    s.score = std::max(0.0, s.slowdown - 1);
    const std::string kind = link_kind.count(link) ? link_kind[link] : "";
    s.evidence.push_back(absl::StrCat("takes ", absl::StrFormat("%.2f", s.slowdown),
                                      "x its peers' time per byte",
                                      kind.empty() ? "" : absl::StrCat(" (", kind, " links)"),
                                      ", median over ", s.collectives, " collectives"));
    if (moved[link].second > 0)
      s.evidence.push_back(absl::StrCat("moved ", absl::StrFormat("%.1f", moved[link].first / 1e6), " MB in ",
                                        Ms(moved[link].second), " on the ", r.clock, " clock (",
                                        absl::StrFormat("%.2f", moved[link].first / moved[link].second),
                                        r.simulated ? " GB/s, simulated)" : " GB/s as this machine's in-memory collectives go)"));
    if (link_bandwidth.count(link) && link_bandwidth[link] > 0)
      s.evidence.push_back(absl::StrCat("nominal bandwidth ",
                                        absl::StrFormat("%.1f", link_bandwidth[link] / 1e9),
                                        " GB/s on the run's profile; it moves its bytes at ",
                                        Pct(1 / std::max(1e-9, s.slowdown)), " of its peers' rate"));
    cands.push_back({s, [&, link = link](int n) {
                       Change c;
                       for (const LinkChange& lc : link_changes[link])
                         if (lc.step == n) c.collective_ns[lc.flow] = lc.new_ns;
                       return c;
                     }});
  }

  // Ranked by how much slower than its peers each suspect is; flagged at the
  // threshold. The what-if says what fixing each would save: the flagged ones
  // in rank order, each with those above it fixed too (two slow chips: fixing
  // the slower alone leaves the other slow), the rest alone.
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Candidate& a, const Candidate& b) { return a.s.score > b.s.score; });
  auto merged = [&](const std::vector<size_t>& which, int n) {
    Change c;
    for (size_t i : which) {
      Change x = cands[i].change(n);
      for (const auto& [d, f] : x.scale) c.scale[d] = c.scale.count(d) ? c.scale[d] * f : f;
      for (const auto& [flow, ns] : x.collective_ns)
        c.collective_ns[flow] = c.collective_ns.count(flow) ? std::min(c.collective_ns[flow], ns) : ns;
    }
    return c;
  };
  std::vector<size_t> fixed;
  std::vector<std::string> fixed_names;
  double saved_before = 0, saved_before_ns = 0;
  // Each what-if re-schedules every step of every chip: on a pod of thousands
  // of chips (a simulated run) it is done for the flagged suspects and the
  // highest-ranked others only.
  constexpr int kWhatIfOthers = 32;
  int others = 0;
  bool cut = false;
  for (size_t i = 0; i < cands.size(); ++i) {
    FleetSuspect& s = cands[i].s;
    s.flagged = s.score >= opt.flag_threshold;
    if (!whatif) {
      s.evidence.push_back("what-if not estimated (see notes)");
      continue;
    }
    if (!s.flagged && others++ >= kWhatIfOthers) {
      s.evidence.push_back("what-if not estimated (ranked below the suspects re-scheduled, see notes)");
      cut = true;
      continue;
    }
    progress(0.5 + 0.5 * i / cands.size(), absl::StrCat("what-if: re-scheduling the steps with ", s.kind, " ", s.id, " fixed"));
    std::vector<size_t> with = s.flagged ? fixed : std::vector<size_t>{};
    with.push_back(i);
    auto [share, per_step] = saved_share([&](int n) { return merged(with, n); });
    const double base_share = s.flagged ? saved_before : 0, base_ns = s.flagged ? saved_before_ns : 0;
    s.saved_ns_per_step = per_step - base_ns;
    s.evidence.push_back(
        absl::StrCat("what-if: fixed",
                     s.flagged && !fixed_names.empty()
                         ? absl::StrCat(" (", absl::StrJoin(fixed_names, ", "), " fixed too)")
                         : "",
                     ", the step would take ", Ms(std::max(0.0, s.saved_ns_per_step)), " less (",
                     Pct(std::max(0.0, share - base_share)), " of the step)"));
    if (s.flagged) {
      fixed.push_back(i);
      fixed_names.push_back(absl::StrCat(s.kind, " ", s.id));
      saved_before = share;
      saved_before_ns = per_step;
    }
  }
  if (cut)
    r.notes.push_back(absl::StrCat("what-if estimated for the flagged suspects and the ", kWhatIfOthers,
                                   " highest-ranked others only (", cands.size(), " suspects)"));
  for (const Candidate& c : cands) r.suspects.push_back(c.s);
  std::vector<std::string> flagged;
  for (const FleetSuspect& s : r.suspects)
    if (s.flagged)
      flagged.push_back(absl::StrCat(s.kind, " ", s.id, " (", absl::StrFormat("%.2f", s.slowdown), "x)"));
  if (flagged.empty()) {
    r.verdict = absl::StrCat(
        "no chip, link or host stands out: none is ", Pct(opt.flag_threshold),
        " or more slower than its peers",
        r.suspects.empty() ? ""
                           : absl::StrCat(" (the most: ", r.suspects.front().kind, " ", r.suspects.front().id,
                                          ", ", Pct(r.suspects.front().score), ")"));
  } else {
    r.verdict = absl::StrCat(flagged.size() == 1 ? "suspect: " : "suspects: ", absl::StrJoin(flagged, ", "),
                             " — slower than its peers by at least ", Pct(opt.flag_threshold));
    if (whatif && saved_before > 0)
      absl::StrAppend(&r.verdict, "; fixing ", flagged.size() == 1 ? "it" : "them", " would save ",
                      Ms(saved_before_ns), " per step (", Pct(saved_before), ")");
  }
  return r;
}

std::string RenderFleetText(const FleetReport& r) {
  std::string out = absl::StrCat("fleet diagnosis — run ", r.run_id, " (", r.sample,
                                 r.imported ? ", imported" : "", r.simulated ? ", simulated" : "", "; ", r.topology, "), ", r.chips,
                                 " chips on ", r.hosts, r.hosts == 1 ? " host" : " hosts", "\n");
  absl::StrAppend(&out, "  ", r.steps, " steps analysed, ", r.collectives, " collectives",
                  r.links ? absl::StrCat(", ", r.links, " links with traffic") : "", ", median step ",
                  Ms(r.median_step_ns), " (", r.clock, " clock)\n");
  absl::StrAppend(&out, "verdict: ", r.verdict, "\n");
  for (const std::string& n : r.notes) absl::StrAppend(&out, "note: ", n, "\n");
  if (!r.suspects.empty()) {
    absl::StrAppend(&out, "\nsuspects, ranked by how much slower than their peers they are (flagged at >= ",
                    Pct(r.threshold), "):\n");
    int rank = 0;
    for (const FleetSuspect& s : r.suspects) {
      if (++rank > 12 && !s.flagged) {
        absl::StrAppend(&out, "  ... ", r.suspects.size() - rank + 1,
                        " more below (--format json lists all)\n");
        break;
      }
      absl::StrAppend(&out, absl::StrFormat("  %2d. %-5s %-6s %6s%s\n", rank, s.kind, s.id, Pct(s.score),
                                            s.flagged ? "  FLAGGED" : ""));
      if (rank <= 5 || s.flagged)
        for (const std::string& e : s.evidence) absl::StrAppend(&out, "        ", e, "\n");
    }
  }
  if (!r.chip_rows.empty()) {
    absl::StrAppend(&out, absl::StrCat("\nper-chip step breakdown (mean per step, ms, ", r.clock, " clock):\n"));
    absl::StrAppend(&out,
                    absl::StrFormat("  %-5s %-5s %-10s %9s %10s %9s %9s %9s %9s\n", "chip", "host", "coords",
                                    "compute", "collective", "wait", "transfer", "host wait", "idle"));
    std::vector<std::string> standing;
    for (const FleetChip& c : r.chip_rows) {
      absl::StrAppend(
          &out, absl::StrFormat("  %-5d %-5d %-10s %9.3f %10.3f %9.3f %9.3f %9.3f %9.3f\n", c.device_id,
                                c.host_id, c.coords, c.compute_ns / 1e6, c.collective_ns / 1e6,
                                c.wait_ns / 1e6, c.transfer_ns / 1e6, c.host_wait_ns / 1e6, c.idle_ns / 1e6));
      for (const std::string& w : c.stands_out)
        standing.push_back(absl::StrCat("chip ", c.device_id, ": ", w));
    }
    if (standing.empty()) absl::StrAppend(&out, "  no chip stands out from its peers\n");
    for (const std::string& w : standing) absl::StrAppend(&out, "  stands out — ", w, "\n");
  }
  return out;
}

std::string RenderFleetJson(const FleetReport& r) {
  nlohmann::json j;
  j["run"] = r.run_id;
  j["sample"] = r.sample;
  j["topology"] = r.topology;
  j["imported"] = r.imported;
  j["simulated"] = r.simulated;
  j["clock"] = r.clock;
  j["steps"] = r.steps;
  j["collectives"] = r.collectives;
  j["median_step_ns"] = r.median_step_ns;
  j["threshold"] = r.threshold;
  j["supported"] = r.supported;
  j["verdict"] = r.verdict;
  j["notes"] = r.notes;
  j["suspects"] = nlohmann::json::array();
  for (const FleetSuspect& s : r.suspects) {
    nlohmann::json e = {{"kind", s.kind},         {"id", s.id},
                        {"score", s.score},       {"flagged", s.flagged},
                        {"evidence", s.evidence}, {"slowdown", s.slowdown},
                        {"saved_ns_per_step", s.saved_ns_per_step}};
    if (s.kind == "chip" || r.clock == "host") {
      e["last_arrivals"] = s.last_arrivals;
      e["late_ns_per_step"] = s.late_ns_per_step;
    }
    if (s.kind != "host" || r.clock == "host") e["collectives"] = s.collectives;
    j["suspects"].push_back(e);
  }
  j["chips"] = nlohmann::json::array();
  for (const FleetChip& c : r.chip_rows)
    j["chips"].push_back({{"device_id", c.device_id},
                          {"host_id", c.host_id},
                          {"coords", c.coords},
                          {"compute_ns", c.compute_ns},
                          {"collective_ns", c.collective_ns},
                          {"wait_ns", c.wait_ns},
                          {"transfer_ns", c.transfer_ns},
                          {"host_wait_ns", c.host_wait_ns},
                          {"idle_ns", c.idle_ns},
                          {"stands_out", c.stands_out}});
  return j.dump(2) + "\n";
}

}  // namespace shardscope::analysis
