#include "profiler/analysis/verdict.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "profiler/analysis/clocks.h"
#include "profiler/analysis/fleet.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/run_report.h"

namespace shardscope::analysis {

namespace {

using store::Reader;

// Priority order of the attribution: lower wins.
enum Part { kCompute = 0, kCollective, kTransfer, kHostWait, kNumParts };

int PartOf(const std::string& kind) {
  if (kind == "compute") return kCompute;
  if (kind == "collective") return kCollective;
  if (kind == "transfer") return kTransfer;
  if (kind == "host_wait") return kHostWait;
  return -1;  // host-side kinds on a device lane do not occupy the chip
}

// Sweeps one chip's intervals over [t0, t1): each instant goes to the
// highest-priority part active then, else to idle.
StepParts Attribute(int device, const std::vector<std::tuple<int64_t, int64_t, int>>& intervals, int64_t t0,
                    int64_t t1, ThumbLane* thumb) {
  // Time per part in each thumbnail column (index kNumParts: idle).
  std::vector<std::array<int64_t, kNumParts + 1>> columns(kThumbColumns, std::array<int64_t, kNumParts + 1>{});
  const double per_column = static_cast<double>(std::max<int64_t>(1, t1 - t0)) / kThumbColumns;
  auto paint = [&](int64_t a, int64_t b, int part) {
    for (int64_t x = a; x < b;) {
      const int col = std::min(kThumbColumns - 1, static_cast<int>(static_cast<double>(x - t0) / per_column));
      const int64_t col_end = std::min<int64_t>(b, t0 + static_cast<int64_t>((col + 1) * per_column) + 1);
      columns[col][part] += std::max<int64_t>(1, col_end - x);
      x = std::max(col_end, x + 1);
    }
  };
  std::vector<std::pair<int64_t, int>> edges;  // (time, +-(part + 1))
  for (const auto& [s, e, p] : intervals) {
    const int64_t a = std::max(s, t0), b = std::min(e, t1);
    if (b <= a) continue;
    edges.push_back({a, p + 1});
    edges.push_back({b, -(p + 1)});
  }
  std::sort(edges.begin(), edges.end());
  StepParts out;
  out.device_id = device;
  int64_t active[kNumParts] = {0, 0, 0, 0};
  int64_t* sums[kNumParts] = {&out.compute_ns, &out.collective_ns, &out.transfer_ns, &out.host_wait_ns};
  int64_t at = t0;
  for (size_t i = 0; i <= edges.size(); ++i) {
    const int64_t next = i < edges.size() ? edges[i].first : t1;
    if (next > at) {
      int top = -1;
      for (int p = 0; p < kNumParts && top < 0; ++p)
        if (active[p] > 0) top = p;
      (top < 0 ? out.idle_ns : *sums[top]) += next - at;
      paint(at, next, top < 0 ? kNumParts : top);
      at = next;
    }
    if (i < edges.size()) {
      const int v = edges[i].second;
      active[std::abs(v) - 1] += v > 0 ? 1 : -1;
    }
  }
  thumb->device_id = device;
  for (const auto& c : columns) {
    const int part = static_cast<int>(std::max_element(c.begin(), c.end()) - c.begin());
    if (!thumb->runs.empty() && thumb->runs.back().second == part) ++thumb->runs.back().first;
    else thumb->runs.push_back({1, part});
  }
  return out;
}

// Files from before arrivals were recorded have slices without arrival_ns.
absl::StatusOr<bool> HasArrivals(const Reader& rd) { return rd.HasColumn("slices", "arrival_ns"); }

absl::Status AttributeMedianStep(const Reader& rd, int64_t run, int step, Verdict* v) {
  auto arrivals = HasArrivals(rd);
  if (!arrivals.ok()) return arrivals.status();
  auto q = rd.Query(
      absl::StrCat("SELECT t.device_id AS device, s.kind AS kind, s.start_ns AS start, s.start_ns + s.dur_ns AS end, ",
                   *arrivals ? "s.arrival_ns" : "NULL",
                   " AS arrival FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
                   " WHERE s.run_id = ?1 AND s.step = ?2 AND t.clock = 'device' AND t.device_id IS NOT NULL"
                   " AND s.depth = 0"),
      {absl::StrCat(run), absl::StrCat(step)});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) return absl::OkStatus();
  std::map<int, std::vector<std::tuple<int64_t, int64_t, int>>> by_chip;
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  // Times a timeline cannot hold (a damaged chunk): said, not computed with
  // (a span past int64 drew the thumbnail out of its columns).
  constexpr int64_t kMaxStepNs = int64_t{1} << 52;  // about 52 days
  auto damaged = [&](size_t i) {
    return absl::DataLossError(absl::StrCat(
        rd.path(), ": run ", run, " step ", step, " has a device slice from ", q->Text(i, "start"), " to ",
        q->Text(i, "end"), " ns: its timeline is damaged (shardscope check ", rd.path(), ")"));
  };
  for (size_t i = 0; i < q->rows.size(); ++i) {
    const int64_t s = q->Int(i, "start"), e = q->Int(i, "end");
    if (e < s || s < -kMaxStepNs * 1024 || e > kMaxStepNs * 1024) return damaged(i);
    t0 = std::min(t0, s);
    t1 = std::max(t1, e);
    if (t1 - t0 > kMaxStepNs) return damaged(i);
    const int part = PartOf(q->Text(i, "kind"));
    auto& chip = by_chip[static_cast<int>(q->Int(i, "device"))];
    if (part < 0) continue;
    // At a collective from the chip's arrival: waiting for the others is the collective's time.
    const bool arrived = part == kCollective && !q->Text(i, "arrival").empty();
    chip.push_back({arrived ? std::min(s, q->Int(i, "arrival")) : s, e, part});
  }
  v->step = step;
  v->span_ns = t1 - t0;
  for (const auto& [device, intervals] : by_chip) {
    ThumbLane lane;
    v->parts.push_back(Attribute(device, intervals, t0, t1, &lane));
    v->thumbnail.push_back(std::move(lane));
  }
  return absl::OkStatus();
}

// A simulated run's median step (by span, among the steps the diagnosis
// used) as each chip spent it on the modeled clock: the fleet's per-step rows.
// A collective's wait counts as the collective (as at a device-clock arrival);
// host-side kinds on the lane do not occupy the chip: idle.
void ModeledBreakdown(const FleetReport& f, Verdict* v) {
  std::vector<std::pair<double, size_t>> spans;
  for (size_t i = 0; i < f.per_step.size(); ++i)
    if (f.per_step[i].analysed && f.per_step[i].span_ns > 0) spans.push_back({f.per_step[i].span_ns, i});
  if (spans.empty()) return;
  std::sort(spans.begin(), spans.end());
  const FleetStep& step = f.per_step[spans[(spans.size() - 1) / 2].second];
  v->clock = f.clock;
  v->step = step.step;
  v->span_ns = static_cast<int64_t>(step.span_ns);
  auto ns = [](double x) { return static_cast<int64_t>(x + 0.5); };
  for (size_t c = 0; c < step.chips.size() && c < f.step_devices.size(); ++c) {
    const FleetChipStep& s = step.chips[c];
    StepParts p;
    p.device_id = f.step_devices[c];
    p.compute_ns = ns(s.compute_ns);
    p.collective_ns = ns(s.collective_ns + s.wait_ns);
    p.transfer_ns = ns(s.transfer_ns);
    p.host_wait_ns = ns(s.host_wait_ns);
    p.idle_ns = std::max<int64_t>(0, v->span_ns - p.compute_ns - p.collective_ns - p.transfer_ns - p.host_wait_ns);
    v->parts.push_back(p);
  }
}

absl::Status ReadLateArrivals(const Reader& rd, int64_t run, LateArrivals* out) {
  auto arrivals = HasArrivals(rd);
  if (!arrivals.ok()) return arrivals.status();
  auto lanes = HasChipLanes(rd, run, "device");
  if (!lanes.ok()) return lanes.status();
  if (!*lanes) return absl::OkStatus();
  // A chip arrives when its collective starts, unless the recorder noted the
  // arrival apart (an imported trace, or an older file, has only the start),
  // as the fleet diagnosis reads it.
  auto q = rd.Query(
      absl::StrCat("SELECT s.flow_id AS flow, t.device_id AS device, ",
                   *arrivals ? "COALESCE(s.arrival_ns, s.start_ns)" : "s.start_ns",
                   " AS arrival FROM slices s"
                   " JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
                   " WHERE s.run_id = ?1 AND t.clock = 'device' AND t.device_id IS NOT NULL AND s.kind = 'collective'"
                   " AND s.flow_id IS NOT NULL ORDER BY s.flow_id"),
      {absl::StrCat(run)});
  if (!q.ok()) return q.status();
  std::map<int, LateArrivals::Chip> chips;
  size_t i = 0;
  while (i < q->rows.size()) {
    size_t j = i;
    std::vector<std::pair<int64_t, int>> arrivals;
    while (j < q->rows.size() && q->Int(j, "flow") == q->Int(i, "flow")) {
      arrivals.push_back({q->Int(j, "arrival"), static_cast<int>(q->Int(j, "device"))});
      ++j;
    }
    i = j;
    if (arrivals.size() < 2) continue;
    std::sort(arrivals.begin(), arrivals.end());
    ++out->collectives;
    // Chips that all arrived at once have no last; chips tied for last (a
    // trace's whole microseconds) are each last.
    if (arrivals.back().first == arrivals.front().first) continue;
    // Late by how much: against the median arrival of the others.
    const size_t others = arrivals.size() - 1;
    const int64_t median_other = arrivals[(others - 1) / 2].first;
    for (size_t k = arrivals.size(); k-- > 0 && arrivals[k].first == arrivals.back().first;) {
      LateArrivals::Chip& c = chips[arrivals[k].second];
      c.device_id = arrivals[k].second;
      ++c.last;
      c.late_ns += arrivals[k].first - median_other;
    }
  }
  for (const auto& [d, c] : chips) out->chips.push_back(c);
  std::sort(out->chips.begin(), out->chips.end(), [](const auto& a, const auto& b) {
    return a.last != b.last ? a.last > b.last : a.late_ns > b.late_ns;
  });
  return absl::OkStatus();
}

std::string Pct(double v) { return absl::StrFormat("%.1f%%", v); }

// Each chip of the diagnosis as the heatmap colours it: by how late it
// arrives at its collectives where there are any, else by its step span.
FleetMap MapOfFleet(const FleetReport& f) {
  FleetMap m;
  if (f.chip_rows.size() < 2) return m;
  m.clock = f.clock;
  std::map<std::string, const FleetSuspect*> chip;
  std::map<int, bool> host_flagged;
  for (const FleetSuspect& s : f.suspects) {
    if (s.kind == "chip") chip[s.id] = &s;
    if (s.flagged && s.kind != "chip")
      m.flagged_others.push_back(absl::StrCat(s.kind, " ", s.id, " (", absl::StrFormat("%.2f", s.slowdown), "x)"));
    if (s.flagged && s.kind == "host") host_flagged[std::atoi(s.id.c_str())] = true;
  }
  for (const auto& [id, s] : chip) m.lateness = m.lateness || s->collectives > 0;
  m.metric = m.lateness ? "arrival at its collectives after its groups' median, mean per step"
                        : "the chip's step span, mean per step";
  for (const FleetChip& c : f.chip_rows) {
    FleetMap::Cell cell{c.device_id, c.host_id, c.coords, c.span_ns, host_flagged[c.host_id]};
    if (auto it = chip.find(absl::StrCat(c.device_id)); it != chip.end()) {
      if (m.lateness) cell.value_ns = it->second->late_ns_per_step;
      cell.flagged = cell.flagged || it->second->flagged;
    }
    m.cells.push_back(cell);
  }
  return m;
}

}  // namespace

absl::StatusOr<Verdict> BuildVerdict(const Reader& rd, const RunReport& r) {
  Verdict v;
  const int64_t run = r.run.run_id;
  const std::string id = absl::StrCat(run);
  if (r.devices.median_step >= 0)
    if (auto st = AttributeMedianStep(rd, run, r.devices.median_step, &v); !st.ok()) return st;
  if (auto st = ReadLateArrivals(rd, run, &v.late); !st.ok()) return st;
  // The fleet diagnosis (fleet.h) gives the stragglers row, so the report and
  // `shardscope fleet` never disagree; for a simulated run, which has no
  // device clock, its per-step rows also give the breakdown on the modeled clock.
  FleetOptions fo;
  fo.run_id = run;
  fo.flag_threshold = kStragglerShare / 100;
  // A run whose chips have only modeled-clock lanes (a simulated run's export
  // read back by `shardscope import`) is broken down as a simulated one is.
  bool modeled_only = false;
  if (!r.run.simulated && v.parts.empty()) {
    auto device = HasChipLanes(rd, run, "device");
    auto modeled = HasChipLanes(rd, run, "modeled");
    modeled_only = device.ok() && !*device && modeled.ok() && *modeled;
  }
  fo.per_step = (r.run.simulated || modeled_only) && v.parts.empty();
  auto fleet = AnalyzeFleet(rd, fo);
  if (fo.per_step && fleet.ok()) ModeledBreakdown(*fleet, &v);
  const double chips = std::max<size_t>(1, v.parts.size());
  auto share = [&](int64_t StepParts::*field) {
    double sum = 0;
    for (const StepParts& p : v.parts) sum += static_cast<double>(p.*field);
    return v.span_ns > 0 ? 100 * sum / chips / static_cast<double>(v.span_ns) : 0.0;
  };
  const bool timeline = v.span_ns > 0;
  // Without a device clock (a simulated run, an imported CPU-only trace, a run
  // recorded with --trace off) the shares are not measurable, not zero.
  const std::string no_timeline =
      r.steps.count == 0 ? "not measurable: the run recorded no step"
      : r.run.simulated  ? "not measurable: a simulated run has only the modeled clock (no device timeline)"
      : modeled_only  ? "not measurable: its chips have only the modeled clock (no device timeline)"
      : absl::StartsWith(r.run.capture_note, "--trace off")
          ? "not measurable: recorded with --trace off (no timeline)"
          : "not measurable: no device-clock timeline in this run";
  // --trace steps keeps one slice per program on each chip: its kernels,
  // collectives and transfers are one busy span, so what bounds the step
  // inside it cannot be told (idle and host waits between programs can).
  const bool programs_only = timeline && r.devices.programs_only;  // set from the capture note (run_report.cc)
  v.programs_only = programs_only;
  const std::string programs_only_detail =
      "not measurable: recorded with --trace steps (one slice per program: its kernels and collectives are "
      "not "
      "told apart); rerun with --trace kernels";

  // Recompilation: compile time in the steps after warm-up, against their host time.
  {
    // A call site's first compile (an eval program first run at step 50) is not a recompilation.
    Evidence e{"recompilation", absl::StrCat("recompiling in the steps after step ", kLateCompileStep,
                                             ", share of their host time"),
               0, kRecompileShare, "%"};
    auto c = rd.Query(
        "SELECT count(*) AS n, coalesce(sum(duration_ns), 0) AS ns FROM compilations"
        " WHERE run_id = ?1 AND cache = 'miss' AND step > ?2"
        " AND coalesce(cause_kind, '') NOT IN ('first_compile', 'value_read_cut')",
        {id, absl::StrCat(kLateCompileStep)});
    auto s = rd.Query("SELECT count(*) AS n, coalesce(sum(wall_ns), 0) AS ns FROM steps WHERE run_id = ?1 AND step > ?2",
                      {id, absl::StrCat(kLateCompileStep)});
    if (!c.ok()) return c.status();
    if (!s.ok()) return s.status();
    if (r.run.imported) {
      // Another tool's trace has no lazy frontend: none recorded is not none happened.
      e.detail = "not measurable: an imported trace records no compilations (only shardscope's own frontend does)";
    } else if (s->Int(0, "n") == 0) {
      e.detail = absl::StrCat("not measurable: no steps after step ", kLateCompileStep, " (the first are warm-up)");
    } else {
      e.value = s->Int(0, "ns") > 0 ? 100.0 * static_cast<double>(c->Int(0, "ns")) / static_cast<double>(s->Int(0, "ns")) : 0;
      e.passed = c->Int(0, "n") > 0 && e.value >= e.threshold;
      e.detail = absl::StrCat(c->Int(0, "n"), c->Int(0, "n") == 1 ? " recompilation" : " recompilations",
                              " after step ", kLateCompileStep, ", ",
                              FormatNs(c->Int(0, "ns")), " of ", FormatNs(s->Int(0, "ns")), " (host clock)");
      if (e.passed && !r.compiles.suggestions.empty()) {
        const std::string& text = r.compiles.suggestions.front().text;
        absl::StrAppend(&e.detail, "; suggestion: ", text.size() > 160 ? text.substr(0, 157) + "..." : text);
      }
    }
    v.evidence.push_back(e);
  }
  // Host: chips waiting for the host to enqueue the next program.
  {
    Evidence e{"host", absl::StrCat("waiting for the host, share of the median step (chip average, ", v.clock, " clock)"),
               share(&StepParts::host_wait_ns), kHostWaitShare, "%"};
    e.passed = timeline && e.value >= e.threshold;
    e.detail = timeline ? absl::StrCat("step ", v.step, ", ", FormatNs(v.span_ns)) : no_timeline;
    if (timeline && r.devices.host_wait_unknown)
      e.detail = "not measurable: the imported trace records no launch (or XLA dispatch) of its device ops, so a wait for the host "
                 "cannot be told from idle time";
    v.evidence.push_back(e);
  }
  // Stragglers: the fleet diagnosis (fleet.h) — a chip, link or host slower
  // than its peers — so the report and `shardscope fleet` never disagree.
  {
    Evidence e{"stragglers", "the top fleet suspect (chip, link or host): how much slower than its peers", 0,
               kStragglerShare, "%"};
    if (fleet.ok()) v.fleet_map = MapOfFleet(*fleet);
    if (!fleet.ok()) {
      e.detail = absl::StrCat("not measurable: the fleet diagnosis cannot read this run: ", fleet.status().message());
    } else {
      // Chips that stopped (a hang) are what ended the run, and the verdict says
      // so first; the row is of the steps recorded before, as fleet's verdict
      // is. Counted as a 100% straggler, the row passed while fleet said no chip
      // stood out in those steps, and its breakdown said collectives bound them.
      std::vector<std::string> stopped;
      const FleetSuspect* first = nullptr;
      for (const FleetSuspect& s : fleet->suspects)
        if (s.stopped) stopped.push_back(s.id);
        else if (!first) first = &s;
      const std::string hang =
          stopped.empty() ? ""
                          : absl::StrCat(stopped.size() == 1 ? "chip " : "chips ", absl::StrJoin(stopped, ", "),
                                         " stopped responding (a hang: table hangs; what ended the run)");
      if (!fleet->supported || !first) {
        e.detail = hang.empty() ? absl::StrCat("not measurable: ", fleet->verdict)
                                : absl::StrCat("not measurable: ", hang, ", and no other suspect was ranked in the "
                                               "steps before; shardscope fleet has the evidence");
      } else {
        const FleetSuspect& top = *first;
        e.value = 100 * top.score;
        e.passed = top.flagged;
        e.detail = absl::StrCat(top.kind, " ", top.id, " at ", absl::StrFormat("%.2f", top.slowdown),
                                "x its peers' time");
        if (top.kind == "chip" && top.collectives > 0)
          absl::StrAppend(&e.detail, ", last at ", top.last_arrivals, " of ", top.collectives, " collectives");
        // A one-off pause is said as fleet says it: where the saving is, then its average.
        if (top.saved_ns_per_step > 0 && !top.saved_in_steps.empty())
          absl::StrAppend(&e.detail, "; fixing it would save ", top.saved_in_steps, " (",
                          FormatNs(static_cast<int64_t>(top.saved_ns_per_step)), " a step averaged, what-if)");
        else if (top.saved_ns_per_step > 0)
          absl::StrAppend(&e.detail, "; fixing it would save ", FormatNs(static_cast<int64_t>(top.saved_ns_per_step)),
                          " per step (what-if)");
        // Slower than its peers, but costing the step little (a slow chip in a
        // step its collectives dominate): a suspect, not what bounds the step.
        // What it costs: the what-if's saving, or for a chip its lateness (a re-schedule lays each chip's
        // work back to back, so it misses a delay before a launch); a negative what-if saves nothing.
        const double cost = std::max({0.0, top.saved_ns_per_step, top.kind == "chip" ? top.late_ns_per_step : 0.0});
        if (e.passed && top.saved_estimated && fleet->median_step_ns > 0 &&
            100 * cost / fleet->median_step_ns < kStragglerSavedShare) {
          e.passed = false;
          e.flagged_not_bound = true;
          absl::StrAppend(&e.detail, ", ", absl::StrFormat("%.1f", 100 * cost / fleet->median_step_ns),
                          "% of the median step (under ", kStragglerSavedShare,
                          "%: flagged by the fleet diagnosis, but not what bounds the step)");
        }
        // Past the threshold, yet the fleet diagnosis flags no one (an
        // unsteady excess): marked as past it but not the bound, with why.
        if (!top.flagged && e.value >= e.threshold) {
          e.flagged_not_bound = true;
          absl::StrAppend(&e.detail, "; not flagged by the fleet diagnosis",
                          top.not_flagged_why.empty() ? "" : absl::StrCat(": ", top.not_flagged_why));
        }
        absl::StrAppend(&e.detail, " (shardscope fleet has the evidence)");
        if (!hang.empty()) e.detail = absl::StrCat(hang, "; in the steps before: ", e.detail);
      }
    }
    v.evidence.push_back(e);
  }
  // Collectives.
  {
    Evidence e{"collectives", "collectives (waiting at them included), share of the median step (chip average)",
               share(&StepParts::collective_ns), kCollectiveShare, "%"};
    e.passed = timeline && !programs_only && e.value >= e.threshold;
    e.detail = programs_only ? programs_only_detail
               : timeline ? absl::StrCat("step ", v.step, ", ", FormatNs(v.span_ns), ", ", v.clock, " clock")
                          : no_timeline;
    if (programs_only) e.value = 0;
    v.evidence.push_back(e);
  }
  // Memory: the largest program against a chip's HBM, and memory-bound kernels' share.
  {
    Evidence cap{"memory", "the largest program's peak, share of a chip's HBM", 0, kHbmShare, "%"};
    auto p = rd.Query("SELECT (SELECT coalesce(max(peak_bytes), 0) FROM memory_plans WHERE run_id = ?1) AS peak,"
                      " (SELECT coalesce(min(hbm_bytes), 0) FROM devices WHERE run_id = ?1) AS hbm",
                      {id});
    if (p.ok() && p->Int(0, "hbm") > 0 && p->Int(0, "peak") > 0) {
      cap.value = 100.0 * static_cast<double>(p->Int(0, "peak")) / static_cast<double>(p->Int(0, "hbm"));
      cap.passed = cap.value >= cap.threshold;
      const int64_t peak = p->Int(0, "peak"), hbm = p->Int(0, "hbm");
      cap.detail = absl::StrCat(FormatBytes(peak), " of ", FormatBytes(hbm));
      if (FormatBytes(peak) == FormatBytes(hbm) && peak != hbm)  // "16 GiB of 16 GiB" at 102.9%: finer
        cap.detail = absl::StrFormat("%.2f GiB of %.2f GiB", static_cast<double>(peak) / (1 << 30),
                                     static_cast<double>(hbm) / (1 << 30));
    } else {
      cap.detail = "not measurable: no memory plan or HBM size recorded";
    }
    v.evidence.push_back(cap);
    Evidence bw{"memory", "memory-bound kernels (roofline), share of compute-kernel time", 0, kMemoryBoundShare, "%"};
    auto lanes = HasChipLanes(rd, run, "device");
    if (!lanes.ok()) return lanes.status();
    // Without device-clock lanes kernel_stats is empty: not asked (a simulated
    // pod's view would make every chip's slices to find that out).
    absl::StatusOr<store::QueryResult> k = store::QueryResult{};
    if (*lanes)
      k = rd.Query("SELECT roofline, sum(total_ns) AS ns FROM kernel_stats WHERE run_id = ?1"
                   " AND roofline IN ('compute', 'memory') GROUP BY roofline",
                   {id});
    int64_t mem = 0, all = 0;
    if (k.ok())
      for (size_t i = 0; i < k->rows.size(); ++i) {
        all += k->Int(i, "ns");
        if (k->Text(i, "roofline") == "memory") mem += k->Int(i, "ns");
      }
    if (all > 0) {
      bw.value = 100.0 * static_cast<double>(mem) / static_cast<double>(all);
      bw.passed = timeline && share(&StepParts::compute_ns) >= kComputeShare && bw.value >= bw.threshold;
      bw.detail = absl::StrCat(FormatNs(mem), " of ", FormatNs(all), " (device clock, all steps); counts when compute"
                               " is at least ", Pct(kComputeShare), " of the step");
    } else {
      bw.detail = !*lanes         ? no_timeline
                  : programs_only ? programs_only_detail
                  : r.run.imported
                      ? "not measurable: no kernels with a roofline class (an imported trace has none)"
                  : !timeline ? no_timeline
                              : "not measurable: no kernels with a roofline class";
    }
    v.evidence.push_back(bw);
  }
  // Compute.
  {
    Evidence e{"compute", "compute, share of the median step (chip average)", share(&StepParts::compute_ns),
               kComputeShare, "%"};
    e.passed = timeline && !programs_only && e.value >= e.threshold;
    e.detail = programs_only ? programs_only_detail
               : timeline    ? absl::StrCat("idle ", Pct(share(&StepParts::idle_ns)), ", transfers ",
                                            Pct(share(&StepParts::transfer_ns)))
                             : no_timeline;
    if (programs_only) e.value = 0;
    v.evidence.push_back(e);
  }

  const Evidence* first = nullptr;
  for (const Evidence& e : v.evidence)
    if (e.passed) {
      first = &e;
      break;
    }
  if (first) {
    v.bound = first->bound;
    v.line = absl::StrCat("bound by ", first->bound, ": ", first->what, " ", Pct(first->value), " (threshold ",
                          Pct(first->threshold), "); ", first->detail);
  } else if (!timeline) {  // the shares below are not measured, not 0
    v.bound = "unknown";
    const std::string why = r.devices.empty_reason.empty() ? "no device timeline" : r.devices.empty_reason;
    // A CPU-only trace still has its ranks compared on the host clock: that
    // answer is the verdict's, with what it cannot say.
    const Evidence* stragglers = nullptr;
    for (const Evidence& e : v.evidence)
      if (e.bound == "stragglers" && e.Measurable()) stragglers = &e;
    if (stragglers && fleet.ok() && !fleet->suspects.empty())
      v.line = absl::StrCat(fleet->verdict, " (", fleet->clock,
                            " clock); no verdict on what else bounds the step: ", why);
    else if (fleet.ok() && !fleet->supported && fleet->chips == 0 && !fleet->verdict.empty())
      // Ranks on CPUs that cannot be compared: why not is the rest of the answer.
      v.line = absl::StrCat("no verdict: ", why, "; nor are its ranks compared: ",
                            absl::StripPrefix(fleet->verdict, "cannot rank suspects: "));
    else
      v.line = absl::StrCat("no verdict: ", why);
  } else if (programs_only) {
    v.bound = "unknown";
    v.line = absl::StrCat(
        "no verdict on what bounds the step: recorded with --trace steps, so each program is one "
        "busy span (kernels and collectives together; rerun with --trace kernels); the chips ran "
        "programs ",
        Pct(share(&StepParts::compute_ns)),
        share(&StepParts::host_wait_ns) > 0
            ? absl::StrCat(", waited for the host ", Pct(share(&StepParts::host_wait_ns)))
            : "",
        ", idle ", Pct(share(&StepParts::idle_ns)), " of the median step");
  } else {
    v.bound = "none";
    v.line = absl::StrCat("no single bound passes its threshold: compute ", Pct(share(&StepParts::compute_ns)),
                          ", collectives ", Pct(share(&StepParts::collective_ns)), ", transfers ",
                          Pct(share(&StepParts::transfer_ns)),
                          share(&StepParts::host_wait_ns) > 0 ? absl::StrCat(", host wait ", Pct(share(&StepParts::host_wait_ns))) : "",
                          ", idle ", Pct(share(&StepParts::idle_ns)), " of the median step");
  }
  // A run that ended abnormally (a hang, a killed process): what ended it
  // comes first, since the steps it recorded are not the whole story.
  if (const std::string ended = RunEndedEarly(r.run); !ended.empty())
    v.line = absl::StrCat(ended,
                          r.steps.count == 0 ? std::string("; it recorded no step, so there is nothing more to weigh")
                                             : absl::StrCat("; in the steps it recorded: ", v.line));
  return v;
}

nlohmann::json VerdictToJson(const Verdict& v) {
  nlohmann::json ev = nlohmann::json::array();
  for (const Evidence& e : v.evidence)
    ev.push_back({{"bound", e.bound}, {"what", e.what},
                  {"value", e.value},  // 0 where not measurable: read "measurable" first
                  {"measurable", e.Measurable()}, {"threshold", e.threshold}, {"unit", e.unit}, {"passed", e.passed},
                  {"flagged_not_bound", e.flagged_not_bound}, {"detail", e.detail}});
  nlohmann::json parts = nlohmann::json::array();
  for (const StepParts& p : v.parts)
    parts.push_back({{"device_id", p.device_id}, {"compute_ns", p.compute_ns}, {"collective_ns", p.collective_ns},
                     {"transfer_ns", p.transfer_ns}, {"host_wait_ns", p.host_wait_ns}, {"idle_ns", p.idle_ns}});
  nlohmann::json late = nlohmann::json::array();
  for (const auto& c : v.late.chips) late.push_back({{"device_id", c.device_id}, {"last", c.last}, {"late_ns", c.late_ns}});
  return {{"bound", v.bound},
          {"line", v.line},
          {"evidence", ev},
          {"breakdown", {{"clock", v.clock}, {"step", v.step}, {"span_ns", v.span_ns}, {"chips", parts}}},
          {"late_arrivals", {{"collectives", v.late.collectives}, {"chips", late}}}};
}

}  // namespace shardscope::analysis
