// The fleet diagnosis's step data; see fleet_steps.h.
#include "profiler/analysis/fleet_steps.h"

#include <algorithm>
#include <set>

namespace shardscope::analysis::fleet_internal {

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
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> sorted(n);
  for (size_t k = 0; k < n; ++k) sorted[k] = v[order[k]];
  const size_t m = n - 1;  // the others
  for (size_t r = 0; r < n; ++r) {
    // The k-th of the others is sorted[k] below the removed rank r, sorted[k + 1] from it on.
    auto at = [&](size_t k) { return sorted[k < r ? k : k + 1]; };
    out[order[r]] = m % 2 ? at(m / 2) : (at(m / 2 - 1) + at(m / 2)) / 2;
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
    out.reserve(ops.size());
    for (const Op& op : ops) {
      ReplayStep::ROp x;
      x.dur = op.dur;
      x.collective = op.kind == kCollective;
      if (x.collective && op.flow >= 0)
        if (auto it = index_of.find(op.flow); it != index_of.end()) x.sync = it->second;
      out.push_back(x);
    }
    r.ops.push_back(std::move(out));
  }
  return r;
}

int64_t Replay(const ReplayStep& s, const Change& change) {
  const size_t n = s.devices.size();
  std::vector<double> t(n), f(n, 1.0);
  std::vector<size_t> pos(n, 0);
  for (const auto& [d, x] : change.scale) {
    auto it = std::lower_bound(s.devices.begin(), s.devices.end(), d);
    if (it != s.devices.end() && *it == d) f[static_cast<size_t>(it - s.devices.begin())] = x;
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
    const auto& ops = s.ops[i];
    size_t& k = pos[i];
    while (k < ops.size() && ops[k].sync < 0) {
      t[i] += ops[k].collective ? ops[k].dur : ops[k].dur * f[i];
      ++k;
    }
    if (k == ops.size()) continue;
    const int32_t in = ops[k].sync;
    if (++arrived[in] < s.need[in]) continue;
    double start = 0;
    for (int32_t m : s.members[in]) start = std::max(start, t[m]);
    const auto over = change.collective_ns.find(s.flows[in]);
    const double dur = over == change.collective_ns.end() ? s.proper[in] : over->second;
    for (int32_t m : s.members[in]) {
      t[m] = start + dur;
      ++pos[m];
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
