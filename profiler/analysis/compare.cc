#include "profiler/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <climits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/analysis/format.h"
#include "profiler/analysis/quantile.h"
#include "store/sim_timeline.h"
#include "store/sim_walk.h"

namespace shardscope::analysis {

namespace {

using store::QueryResult;
using store::Reader;

// Per-step times of one run on each clock, by step: host from `steps`,
// device and modeled from each step's span over the chips on that clock.
using StepTimes = std::map<std::string, std::map<int64_t, double>>;
absl::Status ReadStepTimes(const Reader& rd, int64_t run, StepTimes* out) {
  const std::string id = absl::StrCat(run);
  auto host = rd.Query("SELECT step, wall_ns FROM steps WHERE run_id = ?1 ORDER BY step", {id});
  if (!host.ok()) return host.status();
  for (size_t i = 0; i < host->rows.size(); ++i)
    (*out)["host"][host->Int(i, "step")] = static_cast<double>(host->Int(i, "wall_ns"));
  auto bounds = rd.HasTable("step_bounds");
  if (!bounds.ok()) return bounds.status();
  // step_bounds (version 2 on) holds the spans; a version-1 file has them only in its slices.
  auto spans = rd.Query(*bounds ? "SELECT clock, step, end_ns - start_ns AS ns FROM step_bounds"
                                  " WHERE run_id = ?1 AND clock IN ('device', 'modeled') ORDER BY clock, step"
                                : "SELECT t.clock AS clock, s.step AS step, max(s.start_ns + s.dur_ns) - min(s.start_ns)"
                                  " AS ns FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
                                  " WHERE s.run_id = ?1 AND t.clock IN ('device', 'modeled') AND s.step IS NOT NULL"
                                  " GROUP BY t.clock, s.step ORDER BY t.clock, s.step",
                        {id});
  if (!spans.ok()) return spans.status();
  for (size_t i = 0; i < spans->rows.size(); ++i)
    (*out)[spans->Text(i, "clock")][spans->Int(i, "step")] = static_cast<double>(spans->Int(i, "ns"));
  return absl::OkStatus();
}

struct OpKey {
  std::string call_site, name, shape;
  bool operator<(const OpKey& o) const { return std::tie(call_site, name, shape) < std::tie(o.call_site, o.name, o.shape); }
};
struct OpFacts {
  std::string name;  // as the run names it (dot_general.86): shown, not matched
  std::string opcode, source;
  std::map<int64_t, double> by_step;  // step -> ns (all chips)
};

// Each op's time per step on `clock`, averaged over the chips on that clock.
// Ops of compiled programs are keyed by their graph's call site, opcode,
// shape, the user's line and which such op of its graph it is (graph and op
// ids differ between runs, and an op's number shifts with every op added
// before it: a new layer would renumber the rest); kernels of a run without
// `ops` rows (an imported trace), and every kernel when `by_trace` (one side
// is an import), by their name and the shape the trace recorded (a kernel's
// launch grid and block after its op's input dims, an op's input dims), else
// their size (a copy's or a collective's bytes).
struct ChipFacts {
  std::map<int64_t, double> compute, comm;  // step -> ns
};

// A simulated run's top-level slices summed per (step, graph, op, name, bytes)
// and per chip and step, made from its schedule in C++: through the `slices`
// view every one of a 4096-chip pod's 50M slices was a row of SQL, and a diff
// of two pods took 5-6 minutes. The same sums as the queries below.
struct SimSums {
  std::map<std::tuple<int, int64_t, int64_t, std::string, int64_t>, double> ops;
  std::map<int64_t, ChipFacts> chips;
};
absl::StatusOr<SimSums> WalkSimulated(const Reader& rd, int64_t run) {
  SimSums out;
  store::SimWalkFilter filter;
  filter.top_level_only = true;
  absl::Status st = store::ForEachSimChipRun(rd, run, filter, [&](const store::SimChipRun& r) {
    ChipFacts& chip = out.chips[r.device_id];
    for (const trace::SimSlice& s : *r.slices) {
      if (s.depth != 0 || s.kind == trace::SliceKind::kHostWait) continue;
      // As the view joins names: by name_id (a decoded transfer's own name is empty).
      const std::string& name = s.name && !s.name->empty() ? *s.name : *r.names->Of(s.name_id);
      out.ops[{r.step, r.graph_id, s.op_id < 0 ? -1 : s.op_id, name, s.bytes < 0 ? 0 : s.bytes}] +=
          static_cast<double>(s.dur_ns);
      if (s.kind == trace::SliceKind::kCompute) chip.compute[r.step] += static_cast<double>(s.dur_ns);
      else if (s.kind == trace::SliceKind::kCollective || s.kind == trace::SliceKind::kTransfer)
        chip.comm[r.step] += static_cast<double>(s.dur_ns);
    }
  });
  if (!st.ok()) return st;
  return out;
}

// Whether `run`'s timeline on `clock` is a simulated schedule (the modeled clock of a simulated run).
absl::StatusOr<bool> SimulatedOn(const Reader& rd, int64_t run, const std::string& clock) {
  if (clock != "modeled") return false;
  return store::SimTimelineReader(rd).IsSimulated(run);
}

absl::Status ReadOpTimes(const Reader& rd, int64_t run, const std::string& clock, bool by_trace,
                         std::map<OpKey, OpFacts>* out, int64_t* chips, std::map<int64_t, ChipFacts>* sim_chips) {
  const std::string id = absl::StrCat(run);
  auto n = rd.Query("SELECT count(DISTINCT device_id) AS n FROM tracks WHERE run_id = ?1 AND clock = ?2 AND device_id IS NOT NULL",
                    {id, clock});
  if (!n.ok()) return n.status();
  *chips = n->Int(0, "n");
  if (*chips == 0) return absl::OkStatus();
  auto has_ops = rd.HasTable("ops");
  if (!has_ops.ok()) return has_ops.status();
  std::map<std::pair<int64_t, int64_t>, std::pair<OpKey, OpFacts>> ops;  // (graph, op) -> key, facts
  if (*has_ops && !by_trace) {
    auto q = rd.Query(
        "SELECT o.graph_id, o.op_id, o.name, o.opcode, o.shape, o.source_file, o.source_line, g.call_site"
        " FROM ops o LEFT JOIN graphs g ON g.run_id = o.run_id AND g.graph_id = o.graph_id WHERE o.run_id = ?1"
        " ORDER BY o.graph_id, o.op_id",
        {id});
    if (!q.ok()) return q.status();
    std::map<std::tuple<int64_t, std::string, std::string, std::string>, int> seen;  // per graph
    for (size_t i = 0; i < q->rows.size(); ++i) {
      OpFacts f;
      f.name = q->Text(i, "name");
      f.opcode = q->Text(i, "opcode");
      if (!q->Text(i, "source_file").empty())
        f.source = absl::StrCat(q->Text(i, "source_file"), ":", q->Int(i, "source_line"));
      const std::string shape = q->Text(i, "shape");
      const int k = seen[{q->Int(i, "graph_id"), f.opcode, shape, f.source}]++;
      OpKey key{q->Text(i, "call_site"), absl::StrCat(f.opcode, "@", f.source, "#", k), shape};
      ops[{q->Int(i, "graph_id"), q->Int(i, "op_id")}] = {std::move(key), std::move(f)};
    }
  }
  // One (step, op) sum over the chips, as the view or the schedule gives it:
  // a compiled program's op by its key, else a kernel by its name and shape.
  const auto add = [&](int64_t step, int64_t graph_id, int64_t op_id, const std::string& name, int64_t bytes,
                       std::string shape, double total_ns) {
    const double ns = total_ns / static_cast<double>(*chips);
    auto it = ops.find({graph_id, op_id});
    if (it != ops.end()) {
      OpFacts& f = (*out)[it->second.first];
      if (f.opcode.empty()) {
        f.name = it->second.second.name;
        f.opcode = it->second.second.opcode;
        f.source = it->second.second.source;
      }
      f.by_step[step] += ns;
      return;
    }
    if (shape.empty() && ops.empty() && bytes > 0) shape = FormatBytes(bytes);
    OpFacts& f = (*out)[OpKey{"", name, std::move(shape)}];
    if (f.name.empty()) f.name = name;
    f.by_step[step] += ns;
  };
  auto simulated = SimulatedOn(rd, run, clock);
  if (!simulated.ok()) return simulated.status();
  if (*simulated) {
    auto sums = WalkSimulated(rd, run);
    if (!sums.ok()) return sums.status();
    for (const auto& [key, total] : sums->ops) {
      const auto& [step, graph_id, op_id, name, bytes] = key;
      add(step, graph_id, op_id, name, bytes, "", total);
    }
    if (sim_chips) *sim_chips = std::move(sums->chips);
    return absl::OkStatus();
  }
  auto has_shapes = rd.HasColumn("slices", "shape_id");  // a file before shapes were kept has none
  if (!has_shapes.ok()) return has_shapes.status();
  const std::string shape_id = *has_shapes ? "s.shape_id" : "NULL";
  auto q = rd.Query(
      absl::StrCat("SELECT s.step AS step, coalesce(s.graph_id, -1) AS graph_id, coalesce(s.op_id, -1) AS op_id,"
                   " n.name AS name, coalesce(s.bytes, 0) AS bytes, sh.name AS shape, sum(s.dur_ns) AS ns FROM slices s"
                   " JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
                   " LEFT JOIN names n ON n.name_id = s.name_id LEFT JOIN names sh ON sh.name_id = ", shape_id,
                   " WHERE s.run_id = ?1 AND t.clock = ?2 AND t.device_id IS NOT NULL AND s.depth = 0"
                   " AND s.step IS NOT NULL AND s.kind <> 'host_wait'"
                   " GROUP BY s.step, s.graph_id, s.op_id, s.name_id, coalesce(s.bytes, 0), ", shape_id),
      {id, clock});
  if (!q.ok()) return q.status();
  for (size_t i = 0; i < q->rows.size(); ++i)
    add(q->Int(i, "step"), q->Int(i, "graph_id"), q->Int(i, "op_id"), q->Text(i, "name"), q->Int(i, "bytes"),
        q->Text(i, "shape"), static_cast<double>(q->Int(i, "ns")));
  return absl::OkStatus();
}

// Each chip's kernels and its collectives and transfers per step on `clock`.
absl::Status ReadChipTimes(const Reader& rd, int64_t run, const std::string& clock, std::map<int64_t, ChipFacts>* out) {
  auto q = rd.Query(
      "SELECT t.device_id AS chip, s.step AS step, s.kind = 'compute' AS compute, sum(s.dur_ns) AS ns FROM slices s"
      " JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id"
      " WHERE s.run_id = ?1 AND t.clock = ?2 AND t.device_id IS NOT NULL AND s.depth = 0 AND s.step IS NOT NULL"
      " AND s.kind IN ('compute', 'collective', 'transfer') GROUP BY t.device_id, s.step, s.kind = 'compute'",
      {absl::StrCat(run), clock});
  if (!q.ok()) return q.status();
  for (size_t i = 0; i < q->rows.size(); ++i) {
    ChipFacts& f = (*out)[q->Int(i, "chip")];
    (q->Int(i, "compute") ? f.compute : f.comm)[q->Int(i, "step")] += static_cast<double>(q->Int(i, "ns"));
  }
  return absl::OkStatus();
}

// Which chips' changes stand apart from the rest: changed beyond their own
// noise, and their relative change at least 10 points and 3 robust standard
// deviations (1.4826 MAD) from the chips' median change. Needs 3 chips: with
// two, neither is "the others".
void MarkChipsApart(std::vector<ChipDelta>* chips, double* compute_median, double* comm_median) {
  if (chips->size() < 3) return;
  auto mark = [&](double (ChipDelta::*rel)() const, Delta ChipDelta::*delta, bool ChipDelta::*apart, double* median) {
    std::vector<double> r;
    for (const ChipDelta& c : *chips) r.push_back((c.*rel)());
    std::sort(r.begin(), r.end());
    *median = Quantile(r, 0.5);
    std::vector<double> dev;
    for (double x : r) dev.push_back(std::abs(x - *median));
    std::sort(dev.begin(), dev.end());
    const double spread = 1.4826 * Quantile(dev, 0.5);
    for (ChipDelta& c : *chips) {
      const double off = std::abs((c.*rel)() - *median);
      // A chip stands apart only beyond its own noise, which needs kMinSteps steps a side.
      c.*apart = (c.*delta).change != Change::kUnchanged && (c.*delta).noise_measured && off >= 0.10 &&
                 off > 3 * spread;
    }
  };
  mark(&ChipDelta::ComputeRelative, &ChipDelta::compute, &ChipDelta::compute_apart, compute_median);
  mark(&ChipDelta::CommRelative, &ChipDelta::comm, &ChipDelta::comm_apart, comm_median);
}

absl::StatusOr<int64_t> ReadPeak(const Reader& rd, int64_t run) {
  auto has = rd.HasTable("memory_plans");
  if (!has.ok()) return has.status();
  if (!*has) return 0;
  auto q = rd.Query("SELECT coalesce(max(peak_bytes), 0) AS p FROM memory_plans WHERE run_id = ?1", {absl::StrCat(run)});
  if (!q.ok()) return q.status();
  return q->Int(0, "p");
}

// Each tensor's sharding as last recorded.
absl::StatusOr<std::map<std::string, std::string>> ReadShardings(const Reader& rd, int64_t run) {
  auto q = rd.Query("SELECT name, sharding FROM tensors WHERE run_id = ?1 ORDER BY step, tensor_id", {absl::StrCat(run)});
  if (!q.ok()) return q.status();
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < q->rows.size(); ++i) out[q->Text(i, "name")] = q->Text(i, "sharding");
  return out;
}

std::vector<double> Values(const std::map<int64_t, double>& by_step) {
  std::vector<double> v;
  v.reserve(by_step.size());
  for (const auto& [step, ns] : by_step) v.push_back(ns);
  return v;
}

// A change below 0.05% (the modeled clock counts any) keeps two significant
// digits: "+0.0% slower" read as a contradiction.
std::string Percent(double r) {
  if (r != 0 && std::abs(r) < 0.0005) return absl::StrFormat("%+.2g%%", 100 * r);
  return absl::StrFormat("%+.1f%%", 100 * r);
}

// "; chip 3 stands apart: compute +43.1% against the chips' median +1.2%",
// the largest such change of each kind; "" when no chip stands apart.
std::string ChipsApartLine(const RunComparison& c) {
  std::string out;
  for (const auto& [what, apart, rel, median] :
       {std::tuple{"compute", &ChipDelta::compute_apart, &ChipDelta::ComputeRelative, c.chips_compute_median},
        std::tuple{"collectives and transfers", &ChipDelta::comm_apart, &ChipDelta::CommRelative, c.chips_comm_median}}) {
    const ChipDelta* worst = nullptr;
    int n = 0;
    for (const ChipDelta& d : c.chips)
      if (d.*apart) {
        ++n;
        if (!worst || std::abs((d.*rel)()) > std::abs((worst->*rel)())) worst = &d;
      }
    if (!worst) continue;
    absl::StrAppend(&out, "; ", n > 1 ? absl::StrCat(n, " chips stand apart, most ") : "", "chip ", worst->chip,
                    n > 1 ? ": " : " stands apart: ", what, " ", Percent((worst->*rel)()), " against the chips' median ",
                    Percent(median));
  }
  return out;
}

// Whether a side has a step on any clock.
bool HasSteps(const RunComparison& c, bool a) {
  for (const StepClockDelta& d : c.steps)
    if ((a ? d.a.n : d.b.n) > 0) return true;
  return false;
}

std::string ComparisonVerdictOfSteps(const RunComparison& c);

std::string ComparisonVerdict(const RunComparison& c) {
  // A side that did not finish is said first: its steps stop where it did,
  // and a median of the steps it has is not the run (a hung B passed a gate).
  std::string ended;
  for (const auto& [side, h] : {std::pair{"A", &c.a}, std::pair{"B", &c.b}})
    if (const std::string e = RunEndedEarly(*h); !e.empty())
      absl::StrAppend(&ended, side, " did not finish: ", e, "; ");
  std::string v = ComparisonVerdictOfSteps(c);
  if (!c.batches_differ.empty()) absl::StrAppend(&v, "; ", c.batches_differ, ": each step does different work");
  return ended.empty() ? v : absl::StrCat(ended, "in the steps recorded: ", v);
}

std::string ComparisonVerdictOfSteps(const RunComparison& c) {
  const StepClockDelta* s = c.StepsOn(c.op_clock);
  std::string ops = !c.ops_not_compared.empty()
                        ? c.ops_not_compared
                        : absl::StrCat(c.counts[static_cast<int>(Change::kSlower)], " ops slower, ",
                                       c.counts[static_cast<int>(Change::kFaster)], " faster, ",
                                       c.counts[static_cast<int>(Change::kAdded)], " added, ",
                                       c.counts[static_cast<int>(Change::kRemoved)], " removed");
  std::string clock = c.op_clock, lead;
  if (!s || s->a.n == 0 || s->b.n == 0) {
    // Which side lacks them: one with no step on any clock is named as such
    // (neither having device steps named A, when B had recorded none at all).
    const bool a_none = !HasSteps(c, true), b_none = !HasSteps(c, false);
    const std::string missing =
        a_none && b_none ? "neither run recorded a step"
        : b_none         ? "B recorded no step"
        : a_none         ? "A recorded no step"
        : absl::StrCat(s && s->a.n > 0 ? "B" : "A", " has no steps on the ", c.op_clock, " clock");
    // Two CPU traces, or a side without chips: the host clock still times
    // both runs' steps, and the verdict says which clock it is from. (Not a
    // simulated run's: its host clock times the simulator.)
    const StepClockDelta* host = c.a.simulated || c.b.simulated ? nullptr : c.StepsOn("host");
    if (!host || host->a.n == 0 || host->b.n == 0) return absl::StrCat("no verdict: ", missing, "; ", ops);
    s = host;
    clock = "host";
    lead = absl::StrCat(missing, ", so on the host clock: ");
  }
  const double a = s->a.median, b = s->b.median;
  // A change the ranks found says so: the medians' noise alone would call it none.
  const std::string how = s->delta.by_ranks ? absl::StrFormat("; beyond the noise by the steps' ranks, p = %.2g,"
                                                              " not by the medians' ±%.1f%%",
                                                              s->delta.rank_p, a > 0 ? 100 * s->delta.threshold / a : 0.0)
                                            : "";
  // Too few steps to measure the noise: the fixed rule decided, and says so.
  const std::string few =
      s->delta.noise_measured
          ? ""
          : absl::StrFormat("; by the fixed %.0f%% rule: A has %d and B %d step%s, too few to measure the noise",
                            100 * kFallbackThreshold, s->a.n, s->b.n, s->b.n == 1 ? "" : "s");
  // Two programs: one is not a slower version of the other, and no op of
  // one explains the other's step.
  if (!c.different_workloads.empty())
    return absl::StrCat("no verdict: ", c.different_workloads, ", different workloads; ", lead, clock, " step ",
                        FormatNs(static_cast<int64_t>(a)), " -> ", FormatNs(static_cast<int64_t>(b)), " (",
                        Percent(s->Relative()), "); ",
                        c.ops_not_compared.empty()
                            ? absl::StrCat(c.counts[static_cast<int>(Change::kAdded)], " ops only in B, ",
                                           c.counts[static_cast<int>(Change::kRemoved)], " only in A")
                            : c.ops_not_compared);
  std::string head;
  switch (s->delta.change) {
    case Change::kSlower:
      head = absl::StrCat(lead, "B is slower: ", clock, " step ", FormatNs(static_cast<int64_t>(a)), " -> ",
                          FormatNs(static_cast<int64_t>(b)), " (", Percent(s->Relative()), how, few, ")");
      break;
    case Change::kFaster:
      head = absl::StrCat(lead, "B is faster: ", clock, " step ", FormatNs(static_cast<int64_t>(a)), " -> ",
                          FormatNs(static_cast<int64_t>(b)), " (", Percent(s->Relative()), how, few, ")");
      break;
    default:
      if (!s->delta.noise_measured) {
        head = absl::StrCat(lead, "no change beyond the fixed ", absl::StrFormat("%.0f%%", 100 * kFallbackThreshold),
                            ": ", clock, " step ", FormatNs(static_cast<int64_t>(a)), " -> ",
                            FormatNs(static_cast<int64_t>(b)), " (", Percent(s->Relative()),
                            absl::StrFormat("; A has %d and B %d step%s, too few to measure the noise)", s->a.n,
                                            s->b.n, s->b.n == 1 ? "" : "s"));
        break;
      }
      head = absl::StrCat(lead, "no change beyond the noise: ", clock, " step ", FormatNs(static_cast<int64_t>(a)),
                          " -> ", FormatNs(static_cast<int64_t>(b)), " (", Percent(s->Relative()), ", noise ±",
                          absl::StrFormat("%.1f%%", a > 0 ? 100 * s->delta.threshold / a : 0.0), ")");
  }
  // The largest op change that goes the verdict's way (a slower step is not
  // explained by an op that got faster); none for a step that did not change.
  const bool slower = s->delta.change == Change::kSlower, faster = s->delta.change == Change::kFaster;
  std::string top;
  // Not an op that holds under 5% of the step's change: one slow chip of a
  // pod moved the step by 16 ms and its mean op by 670 ns, and "largest" named it.
  const double step_change = std::abs(b - a);
  for (const OpDelta& o : c.ops)
    if (std::abs(o.step_impact_ns) >= 0.05 * step_change &&
        ((slower && (o.delta.change == Change::kSlower || o.delta.change == Change::kAdded)) ||
         (faster && (o.delta.change == Change::kFaster || o.delta.change == Change::kRemoved)))) {
      top = absl::StrCat("; largest: ", ShortName(o.name), " ", ChangeName(o.delta.change), " (",
                         o.step_impact_ns >= 0 ? "+" : "-", FormatNs(static_cast<int64_t>(std::abs(o.step_impact_ns))),
                         " on the average step)");
      break;
    }
  return absl::StrCat(head, "; ", ops, top, ChipsApartLine(c));
}

}  // namespace

double Spread::StandardError() const {
  return n > 0 ? 1.2533 * 1.4826 * mad / std::sqrt(static_cast<double>(n)) : 0;
}

Spread SpreadOf(std::vector<double> v) {
  Spread s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = Quantile(v, 0.5);
  s.p10 = Quantile(v, 0.1);
  s.p90 = Quantile(v, 0.9);
  std::vector<double> dev;
  dev.reserve(v.size());
  for (double x : v) dev.push_back(std::abs(x - s.median));
  std::sort(dev.begin(), dev.end());
  s.mad = Quantile(dev, 0.5);
  s.sorted = std::move(v);
  return s;
}

const char* ChangeName(Change c) {
  switch (c) {
    case Change::kAdded: return "added";
    case Change::kRemoved: return "removed";
    case Change::kFaster: return "faster";
    case Change::kSlower: return "slower";
    case Change::kUnchanged: return "unchanged";
  }
  return "unchanged";
}

Delta Classify(const Spread& a, const Spread& b) {
  Delta d;
  if (a.n == 0 && b.n == 0) return d;
  if (a.n == 0) {
    d.change = Change::kAdded;
    d.diff = b.median;
    return d;
  }
  if (b.n == 0) {
    d.change = Change::kRemoved;
    d.diff = -a.median;
    return d;
  }
  d.diff = b.median - a.median;
  d.noise_measured = a.n >= kMinSteps && b.n >= kMinSteps;

  d.threshold = d.noise_measured ? kNoiseSigmas * std::hypot(a.StandardError(), b.StandardError())
                                 : kFallbackThreshold * a.median;
  if (std::abs(d.diff) > d.threshold && d.diff != 0) d.change = d.diff > 0 ? Change::kSlower : Change::kFaster;
  if (!d.noise_measured) return d;
  d.rank_p = RankTestP(a.sorted, b.sorted);
  // The ranks may part the sides where the medians' threshold does not; the
  // direction is the medians' (a shift the ranks find but the medians do not
  // show is not reported).
  if (d.change == Change::kUnchanged && d.rank_p < kRankAlpha && d.diff != 0) {
    d.change = d.diff > 0 ? Change::kSlower : Change::kFaster;
    d.by_ranks = true;
  }
  // Under a nanosecond on a time of a microsecond or more (an op's time
  // averaged over a pod's chips) is no change, however steady: two simulated
  // pods listed "slower +0 ±0" rows, and the verdict's largest was one.
  if (std::abs(d.diff) < 1 && a.median >= 1000) {
    d.change = Change::kUnchanged;
    d.by_ranks = false;
  }
  return d;
}

double RankTestP(const std::vector<double>& a, const std::vector<double>& b) {
  const int64_t m = static_cast<int64_t>(a.size()), n = static_cast<int64_t>(b.size());
  if (m == 0 || n == 0) return 1;
  // U counts the pairs (x of a, y of b) with x < y, a tie a half; ranks of
  // ties are their mean, so the tie correction needs each tie group's size.
  double u = 0;
  bool ties = false;
  for (double x : a) {
    const auto lo = std::lower_bound(b.begin(), b.end(), x), hi = std::upper_bound(b.begin(), b.end(), x);
    u += static_cast<double>(b.end() - hi) + 0.5 * static_cast<double>(hi - lo);
  }
  std::vector<double> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  double tie_term = 0;  // sum of t^3 - t over groups of t equal samples
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    const double t = static_cast<double>(j - i);
    if (t > 1) ties = true;
    tie_term += t * t * t - t;
    i = j;
  }
  const double mn = static_cast<double>(m * n), mean = mn / 2;
  const double dev = std::abs(u - mean);
  // log2 of C(m+n, m), the orderings: while under 2^53 every count below is an
  // integer a double holds exactly (beyond, the subtractions lose the tails).
  const double log2_orderings =
      (std::lgamma(static_cast<double>(m + n + 1)) - std::lgamma(static_cast<double>(m + 1)) -
       std::lgamma(static_cast<double>(n + 1))) / std::log(2.0);
  if (!ties && m * n <= 10000 && log2_orderings < 52) {
    // Exact: the number of orderings with each U is the coefficient of q^U in
    // the Gaussian binomial [m+n choose m]_q, built as the product over
    // i = 1..m of (1 - q^(n+i)) / (1 - q^i), each factor a polynomial again.
    const int64_t top = m * n;
    std::vector<double> c(static_cast<size_t>(top) + 1, 0.0);
    c[0] = 1;
    for (int64_t i = 1; i <= m; ++i) {
      for (int64_t k = top; k >= n + i; --k) c[k] -= c[k - n - i];
      for (int64_t k = i; k <= top; ++k) c[k] += c[k - i];
    }
    double total = 0, tail = 0;
    for (int64_t k = 0; k <= top; ++k) {
      const double v = std::max(0.0, c[k]);
      total += v;
      if (std::abs(static_cast<double>(k) - mean) >= dev - 1e-9) tail += v;
    }
    return total > 0 ? std::min(1.0, tail / total) : 1;
  }
  const double total_n = static_cast<double>(m + n);
  const double var = mn / 12 * ((total_n + 1) - tie_term / (total_n * (total_n - 1)));
  if (var <= 0) return 1;
  const double z = std::max(0.0, dev - 0.5) / std::sqrt(var);  // with the continuity correction
  return std::erfc(z / std::sqrt(2.0));
}

const StepClockDelta* RunComparison::StepsOn(const std::string& clock) const {
  for (const StepClockDelta& s : steps)
    if (s.clock == clock) return &s;
  return nullptr;
}

absl::StatusOr<RunComparison> CompareRuns(const Reader& ra, int64_t run_a, const Reader& rb, int64_t run_b,
                                          const CompareOptions& options) {
  if (options.clock != "device" && options.clock != "modeled" && options.clock != "auto")
    return absl::InvalidArgumentError(
        absl::StrCat("the comparison clock is device, modeled or auto, not '", options.clock, "'"));
  RunComparison c;
  c.op_clock = options.clock == "modeled" ? "modeled" : "device";
  auto ha = ReadRunHeader(ra, run_a);
  if (!ha.ok()) return ha.status();
  auto hb = ReadRunHeader(rb, run_b);
  if (!hb.ok()) return hb.status();
  c.a = *std::move(ha);
  c.b = *std::move(hb);
  const auto real = [](const std::string& p) {
    char buf[PATH_MAX];
    return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
  };
  if (run_a == run_b && (&ra == &rb || real(ra.path()) == real(rb.path())))
    c.notes.push_back(absl::StrCat("A and B are the same run (run ", run_a, " of ", ra.path(),
                                   "): it is compared with itself"));
  auto context = [](const Reader& rd, const char* what, absl::Status st) {
    return absl::Status(st.code(), absl::StrCat(rd.path(), ": reading ", what, ": ", st.message()));
  };

  StepTimes sa, sb;
  if (auto st = ReadStepTimes(ra, run_a, &sa); !st.ok()) return context(ra, "step times", st);
  if (auto st = ReadStepTimes(rb, run_b, &sb); !st.ok()) return context(rb, "step times", st);
  // A side that captured its timeline for some steps only (--trace-steps,
  // --trace-ring, --trace-max-mb): its chips' steps and ops are compared with
  // the other side's same steps, not with all of them (a window that skips
  // the first step would read as faster, its ops as removed).
  const auto windowed = [](const RunHeader& h) {
    for (const char* part : {"timeline only for steps", "not captured", "timeline kept for the last",
                             "timeline capture stopped"})
      if (h.capture_note.find(part) != std::string::npos) return true;
    return false;
  };
  std::set<int64_t> common_steps;
  const bool restrict_steps = windowed(c.a) || windowed(c.b);
  if (restrict_steps) {
    for (const char* clock : {"device", "modeled"})
      for (const auto& [step, ns] : sa[clock])
        if (sb[clock].count(step)) common_steps.insert(step);
    for (const char* clock : {"device", "modeled"})
      for (StepTimes* side : {&sa, &sb})
        for (auto it = (*side)[clock].begin(); it != (*side)[clock].end();)
          it = common_steps.count(it->first) ? std::next(it) : (*side)[clock].erase(it);
    c.notes.push_back(absl::StrCat(
        windowed(c.a) && windowed(c.b) ? "both runs" : windowed(c.a) ? "A" : "B",
        " captured a timeline for part of the run (",
        windowed(c.a) ? c.a.capture_note : "", windowed(c.a) && windowed(c.b) ? "; " : "",
        windowed(c.b) ? c.b.capture_note : "", "): chips' steps and ops are compared over the ",
        common_steps.size(), " step", common_steps.size() == 1 ? "" : "s", " both captured",
        common_steps.empty() ? "" : absl::StrCat(" (", *common_steps.begin(), "-", *common_steps.rbegin(), ")")));
  }
  const auto values = [](std::map<int64_t, double>& by_step) { return Values(by_step); };
  for (const char* clock : {"host", "device", "modeled"}) {
    if (!sa.count(clock) && !sb.count(clock)) continue;
    StepClockDelta d;
    d.clock = clock;
    d.a = SpreadOf(values(sa[clock]));
    d.b = SpreadOf(values(sb[clock]));
    d.delta = Classify(d.a, d.b);
    c.steps.push_back(d);
  }
  if (options.clock == "auto" && (sa["device"].empty() || sb["device"].empty()) && !sa["modeled"].empty() &&
      !sb["modeled"].empty()) {
    c.op_clock = "modeled";
    c.notes.push_back(
        absl::StrCat(sa["device"].empty() && sb["device"].empty() ? "neither run has"
                     : sa["device"].empty()                       ? "A has no"
                                                                  : "B has no",
                     " steps on the device clock (a simulated run measures none): compared on the "
                     "modeled clock, the cost model's estimate"));
  }
  // A calibrated simulated side's modeled clock holds a recorded run's device
  // times, not the cost model's: said, with its source (diff called it the
  // cost model's estimate, and compared it with the other side's model).
  for (const auto& [side, h] : {std::pair<const char*, const RunHeader*>{"A", &c.a}, {"B", &c.b}})
    if (h->calibration)
      c.notes.push_back(absl::StrCat(side, "'s modeled clock is calibrated: its kernels and collectives take the "
                                           "device times of ",
                                     h->calibration->source_db, " run ", h->calibration->source_run,
                                     " where they match (", h->calibration->kernels_by_op, " kernels by op, ",
                                     h->calibration->kernels_by_signature, " by signature, ",
                                     h->calibration->kernels_modeled, " modeled), not the cost model's alone"));

  auto ca = ReadCompileStats(ra, run_a);
  if (!ca.ok()) return ca.status();
  auto cb = ReadCompileStats(rb, run_b);
  if (!cb.ok()) return cb.status();
  c.compiles_a = *std::move(ca);
  c.compiles_b = *std::move(cb);
  auto pa = ReadPeak(ra, run_a);
  if (!pa.ok()) return context(ra, "memory plans", pa.status());
  auto pb = ReadPeak(rb, run_b);
  if (!pb.ok()) return context(rb, "memory plans", pb.status());
  c.peak_a = *pa;
  c.peak_b = *pb;

  std::map<OpKey, OpFacts> oa, ob;
  int64_t chips_a = 0, chips_b = 0;
  // A recorded run against an imported trace (its own export read back):
  // both sides' kernels matched as the trace names them.
  const bool by_trace = c.a.imported != c.b.imported;
  // A damaged chunk of a side's timeline (SQLITE_CORRUPT, a chunk that does
  // not decode) leaves that side's ops untimed and says so, as the report
  // does; the steps, compilations and sharding are still compared.
  bool damaged_a = false, damaged_b = false;
  std::map<int64_t, ChipFacts> sim_chips_a, sim_chips_b;  // filled for a simulated side (WalkSimulated)
  for (auto [side, rd, run, ops, chips, damaged, sim_chips] :
       {std::tuple{"A", &ra, run_a, &oa, &chips_a, &damaged_a, &sim_chips_a},
        std::tuple{"B", &rb, run_b, &ob, &chips_b, &damaged_b, &sim_chips_b}}) {
    absl::Status st = ReadOpTimes(*rd, run, c.op_clock, by_trace, ops, chips, sim_chips);
    if (st.ok()) continue;
    if (!absl::IsDataLoss(st)) return context(*rd, "op times", st);
    ops->clear();
    *damaged = true;
    c.notes.push_back(absl::StrCat(side, "'s timeline could not be read, so its ops and chips are not timed: ",
                                   context(*rd, "op times", st).message()));
  }
  // --trace steps keeps one slice per program run on each chip: programs, not kernels.
  const auto programs_only = [](const RunHeader& h) { return h.capture_note.find("--trace steps") != std::string::npos; };
  if (programs_only(c.a)) oa.clear();
  if (programs_only(c.b)) ob.clear();
  if (restrict_steps)
    for (auto* side : {&oa, &ob})
      for (auto it = side->begin(); it != side->end();) {
        for (auto s = it->second.by_step.begin(); s != it->second.by_step.end();)
          s = common_steps.count(s->first) ? std::next(s) : it->second.by_step.erase(s);
        it = it->second.by_step.empty() ? side->erase(it) : std::next(it);
      }
  // A side with no kernels on the clock (no such timeline, or captured with
  // --trace off or steps) can time no op, nor say one was added or removed.
  const bool timed_a = !oa.empty(), timed_b = !ob.empty();
  for (const auto& [side, timed, chips, h] :
       {std::tuple{"A", timed_a, chips_a, &c.a}, std::tuple{"B", timed_b, chips_b, &c.b}}) {
    if (!timed && c.ops_not_compared.empty())
      c.ops_not_compared = absl::StrCat(
          "ops not compared: ", side, (side[0] == 'A' ? damaged_a : damaged_b) ? "'s timeline is damaged"
                                      : chips == 0                             ? absl::StrCat(" has no ", c.op_clock, "-clock timeline")
                                                                               : absl::StrCat(" recorded no kernels on the ", c.op_clock, " clock"));
    if (timed || (side[0] == 'A' ? damaged_a : damaged_b)) continue;
    if (chips == 0)
      c.notes.push_back(absl::StrCat(side, " has no ", c.op_clock, "-clock timeline: its ops cannot be timed",
                                     c.op_clock == "modeled" ? " (a run records the modeled clock; an import does not)"
                                                             : ""));
    else
      c.notes.push_back(absl::StrCat(side, " recorded no kernels on the ", c.op_clock, " clock: its ops cannot be timed",
                                     h->capture_note.empty() ? "" : absl::StrCat(" (", h->capture_note, ")")));
  }
  // Two workloads: every op differs by design, and a step time against
  // another program's says nothing about a change to either. (An imported
  // run's "sample" is its file's name, which says nothing of its workload.)
  if (!c.a.imported && !c.b.imported && !c.a.sample.empty() && !c.b.sample.empty() && c.a.sample != c.b.sample) {
    c.different_workloads = absl::StrCat("A runs ", c.a.sample, " and B runs ", c.b.sample);
    c.notes.push_back(absl::StrCat(c.different_workloads,
                                   ": different workloads, so their ops are added and removed rather than compared,"
                                   " and the step times are two programs'"));
  }
  // The global batch: a simulated run defaults to one example per
  // data-parallel chip, a recorded one to the sample's, so two runs "with the
  // same flags" can step over 2 and 64 examples (read as B 33% faster).
  {
    const auto batch_of = [](const Reader& rd, int64_t run) -> std::string {
      auto q = rd.Query("SELECT json_extract(config_json, '$.batch') AS b FROM runs WHERE run_id = ?1 AND "
                        "json_valid(config_json)",
                        {absl::StrCat(run)});
      return q.ok() && !q->rows.empty() ? q->Text(0, "b") : "";
    };
    const std::string ba = batch_of(ra, run_a), bb = batch_of(rb, run_b);
    if (c.different_workloads.empty() && !ba.empty() && !bb.empty() && ba != bb) {
      c.batches_differ = absl::StrCat("A's global batch is ", ba, " and B's ", bb);
      c.notes.push_back(absl::StrCat(c.batches_differ, " (runs.config_json \"batch\"): each step does different "
                                     "work, so a step time compares the batches as much as the runs"));
    }
  }
  // Each run's modeled clock is laid out for its own chip profile: a modeled
  // difference between two profiles is the chips', not the program's.
  const auto known = [](const std::string& p) { return !p.empty() && p != "none"; };
  if (known(c.a.profile) && known(c.b.profile) && c.a.profile != c.b.profile)
    c.notes.push_back(absl::StrCat("A is modeled for the ", c.a.profile, " profile and B for ", c.b.profile,
                                   ": the modeled clock compares the two chips as much as the two runs"));
  if (timed_a && timed_b && chips_a != chips_b)
    c.notes.push_back(absl::StrCat("A has ", chips_a, " chips on the ", c.op_clock, " clock and B ", chips_b,
                                   ": each op's time is its mean over its own run's chips (per-chip work, which "
                                   "the sharding splits differently), and chips are not compared one by one"));
  // The modeled clock is the cost model's over the profile's values: the
  // cpu profile is measured on the machine, so two runs modeled from
  // different measurements differ by them too (a recalibration between a
  // baseline and a candidate moves every modeled op).
  if (known(c.a.profile) && c.a.profile == c.b.profile && !c.a.profile_values_json.is_null() &&
      !c.b.profile_values_json.is_null()) {
    nlohmann::json va = c.a.profile_values_json, vb = c.b.profile_values_json;
    for (nlohmann::json* v : {&va, &vb})
      if (v->is_object())
        for (const char* k : {"source", "measured_at", "path", "machine"}) v->erase(k);
    const auto where = [](const nlohmann::json& v) {
      const std::string source = v.is_object() ? v.value("source", "") : "";
      const std::string at = v.is_object() ? v.value("measured_at", "") : "";
      return absl::StrCat(source.empty() ? "built in" : source, at.empty() ? "" : absl::StrCat(", measured ", at),
                          absl::StrFormat(", peak %.1f GFLOP/s", v.is_object() ? v.value("peak_flops", 0.0) / 1e9 : 0));
    };
    if (va != vb)
      c.notes.push_back(absl::StrCat(
          "A and B were modeled with different values of the ", c.a.profile, " profile (A: ",
          where(c.a.profile_values_json), "; B: ", where(c.b.profile_values_json),
          "): the modeled clock differs by the profiles as much as by the runs; to gate on it, pin the "
          "values on both runs (SHARDSCOPE_CPU_PROFILE=fixed or a FILE)"));
  }
  // Per chip, when both runs have the same chips on the clock.
  if (timed_a && timed_b && chips_a == chips_b) {
    std::map<int64_t, ChipFacts> ca_times = std::move(sim_chips_a), cb_times = std::move(sim_chips_b);
    if (ca_times.empty())
      if (auto st = ReadChipTimes(ra, run_a, c.op_clock, &ca_times); !st.ok()) return context(ra, "chip times", st);
    if (cb_times.empty())
      if (auto st = ReadChipTimes(rb, run_b, c.op_clock, &cb_times); !st.ok()) return context(rb, "chip times", st);
    if (restrict_steps)
      for (auto* side : {&ca_times, &cb_times})
        for (auto& [chip, f] : *side)
          for (auto* m : {&f.compute, &f.comm})
            for (auto it = m->begin(); it != m->end();) it = common_steps.count(it->first) ? std::next(it) : m->erase(it);
    for (const auto& [chip, fa] : ca_times) {
      auto it = cb_times.find(chip);
      if (it == cb_times.end()) continue;
      ChipDelta d;
      d.chip = chip;
      d.compute_a = SpreadOf(Values(fa.compute));
      d.compute_b = SpreadOf(Values(it->second.compute));
      d.comm_a = SpreadOf(Values(fa.comm));
      d.comm_b = SpreadOf(Values(it->second.comm));
      d.compute = Classify(d.compute_a, d.compute_b);
      d.comm = Classify(d.comm_a, d.comm_b);
      c.chips.push_back(std::move(d));
    }
    MarkChipsApart(&c.chips, &c.chips_compute_median, &c.chips_comm_median);
  }
  std::map<OpKey, std::pair<const OpFacts*, const OpFacts*>> all;
  for (const auto& [k, f] : oa) all[k].first = &f;
  for (const auto& [k, f] : ob) all[k].second = &f;
  int64_t few_steps = 0;
  for (const auto& [k, pair] : all) {
    OpDelta d;
    const OpFacts* f = pair.second ? pair.second : pair.first;  // B's name: the build now
    d.name = f->name.empty() ? k.name : f->name;
    d.shape = k.shape;
    d.opcode = f->opcode;
    d.source = f->source;
    if (pair.first) d.a = SpreadOf(Values(pair.first->by_step));
    if (pair.second) d.b = SpreadOf(Values(pair.second->by_step));
    // A side without a timeline on this clock cannot say an op was added or removed.
    if (!timed_a || !timed_b) continue;
    d.delta = Classify(d.a, d.b);
    // An op of fewer than kMinSteps steps a side (a weight's transfer in the
    // first step, with its first touches) has no noise to measure: a fixed
    // rule would call one cold step against another a change. Not classed.
    if (d.a.n > 0 && d.b.n > 0 && !d.delta.noise_measured) {
      ++few_steps;
      d.delta.change = Change::kUnchanged;
    }
    auto share = [](const Spread& s, size_t steps) {
      return steps > 0 ? std::min(1.0, static_cast<double>(s.n) / static_cast<double>(steps)) : 1.0;
    };
    // Sign as the class: a slower op adds to the step even where it runs less often in B.
    d.step_impact_ns = d.b.n == 0   ? -d.a.median * share(d.a, sa[c.op_clock].size())
                       : d.a.n == 0 ? d.b.median * share(d.b, sb[c.op_clock].size())
                                    : d.delta.diff * share(d.b, sb[c.op_clock].size());
    ++c.counts[static_cast<int>(d.delta.change)];
    c.ops.push_back(std::move(d));
  }
  std::stable_sort(c.ops.begin(), c.ops.end(), [](const OpDelta& x, const OpDelta& y) {
    const bool cx = x.delta.change != Change::kUnchanged, cy = y.delta.change != Change::kUnchanged;
    if (cx != cy) return cx;
    return std::abs(x.step_impact_ns) > std::abs(y.step_impact_ns);
  });
  c.notes.push_back(absl::StrCat(
      "an op or a step counts as faster or slower when its median per-step time moved by more than ",
      absl::StrFormat("%.0f", kNoiseSigmas),
      " standard errors of the difference, measured from each run's own steps (median absolute deviation),"
      " or when a rank test of the steps (Mann-Whitney) parts the two sides at the same confidence (p < ",
      absl::StrFormat("%.4g", kRankAlpha), ")"));
  // The steps themselves, on a clock where a side has too few of them.
  for (const StepClockDelta& d : c.steps)
    if (!d.delta.noise_measured && d.a.n > 0 && d.b.n > 0) {
      c.notes.push_back(absl::StrCat("a side has fewer than ", kMinSteps, " steps on the ", d.clock,
                                     " clock: the step time's noise cannot be measured, and a change beyond ",
                                     absl::StrFormat("%.0f%%", 100 * kFallbackThreshold), " counts instead"));
      break;
    }
  if (few_steps > 0)
    c.notes.push_back(absl::StrCat(few_steps, few_steps == 1 ? " op" : " ops", " ran in fewer than ", kMinSteps,
                                   " steps on a side (e.g. a weight's transfer in the first step): their noise "
                                   "cannot be measured, so they are not classed faster or slower"));
  if (c.a.imported || c.b.imported)
    c.notes.push_back("an imported trace has no compiled ops: its kernels are matched by name and the shape the trace"
                      " recorded (a kernel's launch grid and block, after its op's input dims when recorded with"
                      " record_shapes), else by size (copies, collectives)");

  // An imported trace records no tensors: every tensor of the other side would
  // read as added or removed, which says nothing about either run.
  if (c.a.imported || c.b.imported) {
    c.sharding_not_compared = absl::StrCat(c.a.imported && c.b.imported ? "both are" : c.a.imported ? "A is" : "B is",
                                           " an imported trace, which records no sharding");
  } else {
    auto sha = ReadShardings(ra, run_a);
    if (!sha.ok()) return context(ra, "tensors", sha.status());
    auto shb = ReadShardings(rb, run_b);
    if (!shb.ok()) return context(rb, "tensors", shb.status());
    for (const auto& [name, s] : *sha) {
      auto it = shb->find(name);
      if (it == shb->end()) c.sharding.push_back({name, s, ""});
      else if (it->second != s) c.sharding.push_back({name, s, it->second});
    }
    for (const auto& [name, s] : *shb)
      if (!sha->count(name)) c.sharding.push_back({name, "", s});
  }

  c.verdict = ComparisonVerdict(c);
  return c;
}

}  // namespace shardscope::analysis
