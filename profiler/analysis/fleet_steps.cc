// The fleet diagnosis's step data; see fleet_steps.h.
#include "profiler/analysis/fleet_steps.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>

namespace shardscope::analysis::fleet_internal {

constexpr double kExactInDouble = 9007199254740992.0;  // 2^53: whole numbers below it are exact

Kind KindOf(const std::string& k) {
  if (k == "compute") return kCompute;
  if (k == "collective") return kCollective;
  if (k == "transfer") return kTransfer;
  if (k == "host") return kHost;
  if (k == "compile") return kCompile;
  if (k == "host_wait") return kHostWait;
  return kOther;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<double> LeaveOneOutMedians(const std::vector<double>& v) {
  const size_t n = v.size();
  std::vector<double> out(n, 0);
  if (n < 2) return out;
  // Without a value of rank r the others' k-th is sorted[k] below r and
  // sorted[k + 1] from it on, so only sorted[h - 1], sorted[h] and
  // sorted[h + 1] are ever read. Removing any copy of a value leaves the same
  // values, so its lowest rank stands for it: r > k exactly when the value is
  // above sorted[k].
  const size_t m = n - 1, h = m / 2;  // m: the others
  std::vector<double> w(v);
  std::nth_element(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(h), w.end());
  const double mid = w[h];
  const double below = h > 0 ? *std::max_element(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(h)) : 0;
  const double above = *std::min_element(w.begin() + static_cast<std::ptrdiff_t>(h) + 1, w.end());
  for (size_t j = 0; j < n; ++j) {
    const double x = v[j];
    if (m % 2)
      out[j] = x > mid ? mid : above;
    else if (x > mid)
      out[j] = (below + mid) / 2;
    else if (x > below)
      out[j] = (below + above) / 2;  // rank h itself
    else
      out[j] = (mid + above) / 2;
  }
  return out;
}

ReplayStep IndexStep(const StepData& s, const std::map<int64_t, Instance*>& instances) {
  ReplayStep r;
  for (const auto& [d, ops] : s.ops)
    if (!ops.empty()) r.devices.push_back(d);
  auto dense = [&](int d) {
    auto it = std::lower_bound(r.devices.begin(), r.devices.end(), d);
    return it != r.devices.end() && *it == d ? static_cast<int32_t>(it - r.devices.begin()) : -1;
  };
  absl::flat_hash_map<int64_t, int32_t> index_of;
  for (const auto& [flow, in] : instances) {
    index_of[flow] = static_cast<int32_t>(r.flows.size());
    r.flows.push_back(flow);
    r.proper.push_back(in->proper_ns);
    r.need.push_back(static_cast<int32_t>(in->members.size()));
    std::vector<int32_t> m;
    for (const auto& member : in->members)
      if (int32_t i = dense(member.device); i >= 0) m.push_back(i);
    r.members.push_back(std::move(m));
  }
  for (int d : r.devices) {
    const auto& ops = s.ops.at(d);
    r.first_start.push_back(ops.front().start);
    std::vector<ReplayStep::ROp> out;
    std::vector<ReplayStep::Segment> segments;
    out.reserve(ops.size());
    int64_t sum = 0;
    bool summable = true;  // durations not negative, sums exact in a double
    auto close = [&](size_t end, int32_t sync) {
      segments.push_back({summable ? sum : -1, static_cast<int32_t>(end), sync});
      sum = 0;
      summable = true;
    };
    for (const Op& op : ops) {
      ReplayStep::ROp x;
      x.dur = op.dur;
      x.collective = op.kind == kCollective;
      x.host_wait = op.kind == kHostWait;
      if (x.collective && op.flow >= 0)
        if (auto it = index_of.find(op.flow); it != index_of.end()) x.sync = it->second;
      if (x.sync >= 0) {
        close(out.size(), x.sync);
      } else if (op.dur < 0 || op.dur >= (int64_t{1} << 53) - sum) {
        summable = false;
      } else {
        sum += op.dur;
      }
      out.push_back(x);
    }
    close(out.size(), -1);
    r.ops.push_back(std::move(out));
    r.segments.push_back(std::move(segments));
  }
  return r;
}

namespace {

// Whether t + ns (ns a sum of whole, non-negative durations) equals adding
// them one by one: no partial sum is rounded when t is whole and the sum
// stays below 2^53, or when the sum stays in t's binade (every partial sum
// then lies in it, a multiple of t's ulp).
bool AddsExactly(double t, int64_t ns) {
  const double sum = t + static_cast<double>(ns);
  if (t == std::floor(t)) return std::fabs(t) < kExactInDouble && sum < kExactInDouble;
  return t > 0 && std::bit_cast<uint64_t>(t) >> 52 == std::bit_cast<uint64_t>(sum) >> 52;
}

}  // namespace

int64_t Replay(const ReplayStep& s, const Change& change) {
  const size_t n = s.devices.size();
  std::vector<double> t(n), f(n, 1.0), fw(n, 1.0);  // factors on work and on host waits
  std::vector<size_t> pos(n, 0), seg(n, 0);  // each chip's next op, and the segment it starts
  for (const auto& [factors, out] : {std::pair{&change.scale, &f}, std::pair{&change.wait_scale, &fw}})
    for (const auto& [d, x] : *factors) {
      auto it = std::lower_bound(s.devices.begin(), s.devices.end(), d);
      if (it != s.devices.end() && *it == d) (*out)[static_cast<size_t>(it - s.devices.begin())] = x;
    }
  double t0 = 1e300;
  for (size_t i = 0; i < n; ++i) {
    t[i] = static_cast<double>(s.first_start[i]);
    t0 = std::min(t0, t[i]);
  }
  std::vector<int32_t> arrived(s.flows.size(), 0);
  std::vector<int32_t> work(n);
  for (size_t i = 0; i < n; ++i) work[i] = static_cast<int32_t>(n - 1 - i);
  while (!work.empty()) {
    const int32_t i = work.back();
    work.pop_back();
    size_t& k = pos[i];
    const ReplayStep::Segment& g = s.segments[i][seg[i]];
    if (f[i] == 1.0 && fw[i] == 1.0 && g.ns >= 0 && AddsExactly(t[i], g.ns)) {
      t[i] += static_cast<double>(g.ns);
    } else {
      const auto& ops = s.ops[i];
      for (; k < static_cast<size_t>(g.end); ++k)
        t[i] += ops[k].collective ? ops[k].dur : ops[k].dur * (ops[k].host_wait ? fw[i] : f[i]);
    }
    k = static_cast<size_t>(g.end);  // the segment's wait (where adding op by op stops too), or the end
    const int32_t in = g.sync;
    if (in < 0) continue;
    if (++arrived[in] < s.need[in]) continue;
    double start = 0;
    for (int32_t m : s.members[in]) start = std::max(start, t[m]);
    const auto over = change.collective_ns.find(s.flows[in]);
    const double dur = over == change.collective_ns.end() ? s.proper[in] : over->second;
    for (int32_t m : s.members[in]) {
      t[m] = start + dur;
      ++pos[m];
      ++seg[m];
      work.push_back(m);
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (pos[i] < s.ops[i].size()) return -1;
  double end = 0;
  for (double x : t) end = std::max(end, x);
  return static_cast<int64_t>(end - t0);
}

double MedianWithout(const std::vector<double>& sorted, const std::vector<size_t>& removed) {
  const size_t m = sorted.size() - removed.size();
  if (m == 0) return 0;
  // The k-th remaining value: skip each removed rank at or below it.
  auto at = [&](size_t k) {
    size_t i = k;
    for (size_t r : removed)
      if (r <= i) ++i;
    return sorted[i];
  };
  return m % 2 ? at(m / 2) : (at(m / 2 - 1) + at(m / 2)) / 2;
}

void StepRow(const StepData& s, const std::map<int64_t, Instance*>& by_flow,
             const absl::flat_hash_map<std::pair<int32_t, int32_t>, double>& flops_of, double* span_ns,
             std::map<int, FleetChipStep>* chips) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& [d, ops] : s.ops)
    for (const Op& op : ops) {
      lo = std::min(lo, op.start);
      hi = std::max(hi, op.start + op.dur);
    }
  const double span = lo > hi ? 0 : static_cast<double>(hi - lo);
  *span_ns = span;
  for (const auto& [d, ops] : s.ops) {
    FleetChipStep& c = (*chips)[d];
    c.present = !ops.empty();
    double busy = 0;
    int64_t own_lo = INT64_MAX, own_hi = INT64_MIN;
    for (const Op& op : ops) {
      busy += AddToBreakdown(op, c);
      own_lo = std::min(own_lo, op.start);
      own_hi = std::max(own_hi, op.start + op.dur);
      if (op.kind == kCompute)
        if (auto it = flops_of.find({op.graph, op.op_id}); it != flops_of.end()) c.flops += it->second;
    }
    c.idle_ns = std::max(0.0, span - busy);
    c.own_ns = own_lo > own_hi ? 0 : static_cast<double>(own_hi - own_lo);
  }
  for (const auto& [flow, in] : by_flow) {
    std::vector<double> arrivals;
    for (const auto& m : in->members) arrivals.push_back(static_cast<double>(m.arrival));
    const double med = Median(arrivals);
    for (const auto& m : in->members) (*chips)[m.device].late_ns += m.arrival - med;
  }
}

}  // namespace shardscope::analysis::fleet_internal
