// `--mesh-map auto` measured on the compiled step (see mesh_ranking.h).
#include "runtime/mesh_ranking.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/collectives.h"
#include "runtime/simulate.h"

namespace shardscope::runtime {
namespace {

std::string BytesText(double b) {
  if (b >= 1 << 20) return absl::StrFormat("%.1f MiB", b / (1 << 20));
  if (b >= 1 << 10) return absl::StrFormat("%.1f KiB", b / (1 << 10));
  return absl::StrFormat("%.0f B", b);
}

// The bytes one chip of a group of n puts on its links, as a ring moves them.
double RingBytesPerChip(compiler::CollectiveKind kind, int64_t bytes, int64_t n) {
  if (n <= 1) return 0;
  const double b = static_cast<double>(bytes);
  switch (kind) {
    case compiler::CollectiveKind::kAllReduce: return 2.0 * b * static_cast<double>(n - 1) / n;
    case compiler::CollectiveKind::kCollectivePermute:
    case compiler::CollectiveKind::kCollectiveBroadcast: return b;
    default: return b * static_cast<double>(n - 1) / n;
  }
}

}  // namespace

absl::StatusOr<std::vector<StepCollective>> StepCollectivesOf(const compiler::Module& program,
                                                              const std::vector<int64_t>& device_ids) {
  const int n = static_cast<int>(device_ids.size());
  std::vector<int> position(n, -1);
  for (int p = 0; p < n; ++p)
    if (device_ids[p] >= 0 && device_ids[p] < n) position[device_ids[p]] = p;
  std::vector<StepCollective> out;
  for (const auto& ip : program.instructions()) {
    const compiler::Instruction& i = *ip;
    if (!compiler::IsCollective(i.op)) continue;
    const std::string name = compiler::KernelName(i, nullptr);
    auto groups = ParticipantGroups(i, program.num_partitions() > 1 ? program.num_partitions() : n);
    if (!groups.ok()) return absl::Status(groups.status().code(), absl::StrCat(name, ": ", groups.status().message()));
    StepCollective c;
    c.name = name;
    c.kind = compiler::CollectiveKindOf(i.op);
    c.bytes = compiler::CollectiveBytes(i);
    for (const auto& g : *groups) {
      std::vector<int> members;
      for (int64_t d : g) {
        if (d < 0 || d >= n || position[d] < 0)
          return absl::InvalidArgumentError(absl::StrCat(name, ": its group names chip ", d, ", which the mesh of ", n,
                                                         " chips does not hold"));
        members.push_back(position[d]);
      }
      c.groups.push_back(std::move(members));
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<AxisTraffic> TrafficPerAxis(const std::vector<StepCollective>& step, const std::vector<int64_t>& shape,
                                        const std::vector<std::string>& names) {
  const int na = static_cast<int>(shape.size());
  std::vector<AxisTraffic> out(na);
  for (int a = 0; a < na; ++a) out[a].axis = names[a];
  auto coord = [&](int pos, int a) {  // row-major over shape
    int64_t inner = 1;
    for (int k = a + 1; k < na; ++k) inner *= shape[k];
    return (pos / inner) % shape[a];
  };
  for (const StepCollective& c : step) {
    std::vector<bool> along(na, false);
    size_t n = 0;
    for (const auto& g : c.groups) {
      n = std::max(n, g.size());
      for (int a = 0; a < na; ++a)
        for (int pos : g)
          if (coord(pos, a) != coord(g[0], a)) along[a] = true;
    }
    const double per_chip = RingBytesPerChip(c.kind, c.bytes, static_cast<int64_t>(n)) * static_cast<double>(c.runs);
    for (int a = 0; a < na; ++a)
      if (along[a]) out[a].bytes += per_chip;
  }
  std::stable_sort(out.begin(), out.end(), [](const AxisTraffic& x, const AxisTraffic& y) { return x.bytes > y.bytes; });
  return out;
}

std::string MeshMapChoice::Describe() const {
  std::vector<std::string> t, p;
  for (const AxisTraffic& a : traffic) t.push_back(absl::StrCat(a.axis, " ", BytesText(a.bytes)));
  for (size_t k = 0; k < tried.size(); ++k)
    p.push_back(absl::StrCat(tried[k].label, " ", absl::StrFormat("%.3f ms", tried[k].collective_ns / 1e6),
                             static_cast<int>(k) == chosen ? " (chosen)" : ""));
  return absl::StrCat("ranked by ", source, ": ", absl::StrJoin(t, ", "), " ", per, "; their modeled time: ",
                      absl::StrJoin(p, ", "));
}

absl::StatusOr<MeshMapChoice> ChooseMeshMap(const Interconnect& ic, const compiler::CostModel& model,
                                            const std::vector<int64_t>& shape, const std::vector<std::string>& names,
                                            const std::vector<StepCollective>& step,
                                            const std::vector<std::string>& fallback,
                                            const std::vector<int64_t>& keep) {
  const int na = static_cast<int>(shape.size());
  // The rule's order first (as MapMesh completes it: the last axis first).
  std::vector<int> first;
  for (const std::string& f : fallback)
    for (int a = 0; a < na; ++a)
      if (names[a] == f && shape[a] > 1 && std::find(first.begin(), first.end(), a) == first.end()) first.push_back(a);
  for (int a = na - 1; a >= 0; --a)
    if (shape[a] > 1 && std::find(first.begin(), first.end(), a) == first.end()) first.push_back(a);
  std::vector<std::vector<int>> orders = {first};
  std::vector<int> perm = first;
  std::sort(perm.begin(), perm.end());
  do {
    if (perm != first) orders.push_back(perm);
  } while (std::next_permutation(perm.begin(), perm.end()));

  MeshMapChoice choice;
  choice.traffic = TrafficPerAxis(step, shape, names);
  absl::Status first_error;
  auto price = [&](const MeshMapping& m) {
    CollectivePricer pricer(model, &ic, FaultPlan());
    std::map<std::tuple<int, int64_t, std::vector<int>>, int64_t> seen;  // one group priced once
    int64_t total = 0;
    for (const StepCollective& c : step) {
      int64_t slowest = 0;
      for (const auto& g : c.groups) {
        std::vector<int> chips;
        for (int pos : g) chips.push_back(static_cast<int>(m.device_ids[pos]));
        auto key = std::make_tuple(static_cast<int>(c.kind), c.bytes, chips);
        auto it = seen.find(key);
        if (it == seen.end()) it = seen.emplace(key, pricer.Price(c.kind, c.bytes, chips).dur_ns).first;
        slowest = std::max(slowest, it->second);
      }
      total += slowest * c.runs;
    }
    return total;
  };
  if (!keep.empty()) {
    PricedMap pm;
    pm.label = "as stored";
    pm.mapping.mode = "auto";
    pm.mapping.device_ids = keep;
    pm.mapping.axes = DescribeMeshAxes(ic, shape, names, keep);
    pm.collective_ns = price(pm.mapping);
    choice.tried.push_back(std::move(pm));
  }
  for (const std::vector<int>& order : orders) {
    MeshMapRequest r;
    r.mode = MeshMapRequest::kAuto;
    for (int a : order) r.priority.push_back(names[a]);
    auto m = MapMesh(ic, shape, names, r);
    if (!m.ok()) {
      if (first_error.ok()) first_error = m.status();
      continue;
    }
    PricedMap pm;
    if (order.size() <= 1) pm.label = "auto";
    else if (order.size() == 2) pm.label = absl::StrCat(names[order[0]], " first");
    else pm.label = absl::StrJoin(r.priority, " > ");
    pm.mapping = *std::move(m);
    pm.collective_ns = price(pm.mapping);
    choice.tried.push_back(std::move(pm));
  }
  if (choice.tried.empty()) return first_error;
  {
    MeshMapRequest r;
    r.mode = MeshMapRequest::kRowMajor;
    auto m = MapMesh(ic, shape, names, r);
    if (!m.ok()) return m.status();
    PricedMap pm{"row-major", 0, *std::move(m)};
    pm.collective_ns = price(pm.mapping);
    choice.tried.push_back(std::move(pm));
  }
  for (size_t k = 1; k < choice.tried.size(); ++k)
    if (choice.tried[k].collective_ns < choice.tried[choice.chosen].collective_ns) choice.chosen = static_cast<int>(k);
  choice.mapping = choice.tried[choice.chosen].mapping;
  choice.mapping.mode = "auto";
  return choice;
}

}  // namespace shardscope::runtime
