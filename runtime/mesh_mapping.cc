// Mesh axes onto a topology (see mesh_mapping.h).
#include "runtime/mesh_mapping.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace shardscope::runtime {
namespace {

constexpr char kTorusDims[] = "xyz";

std::string DimName(const Interconnect& ic, int k) {
  if (ic.gpu()) return k == 0 ? "hosts" : "chips in a host";
  return std::string(1, kTorusDims[k]);
}

// "a 4x4x4 torus: x 4, y 4, z 4" / "gpu:4x8: 4 hosts of 8 chips", for messages.
std::string DimsText(const Interconnect& ic) {
  if (ic.gpu()) return absl::StrCat(ic.spec(), ": ", ic.dims()[0], " hosts of ", ic.dims()[1], " chips");
  std::vector<std::string> parts;
  for (size_t k = 0; k < ic.dims().size(); ++k) parts.push_back(absl::StrCat(std::string(1, kTorusDims[k]), " ", ic.dims()[k]));
  return absl::StrCat("the ", absl::StrJoin(ic.dims(), "x"), " torus: ", absl::StrJoin(parts, ", "));
}

// A part of one physical dimension that an axis takes: `count` positions,
// `stride` apart (the positions below the stride belong to other axes).
struct Piece {
  int dim = 0;
  int64_t stride = 1, count = 1;
};
// What is left of each dimension: `count` positions `stride` apart.
struct Left {
  int64_t count = 1, stride = 1;
};

int64_t Product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

// Takes f positions of dimension k (the innermost of what is left).
Piece Take(std::vector<Left>& left, int k, int64_t f) {
  Piece p{k, left[k].stride, f};
  left[k].stride *= f;
  left[k].count /= f;
  return p;
}

// The ways to make `size` of what is left, best first. Torus: whole rings
// before contiguous blocks before strided parts, fewer dimensions first, the
// minor (z) dimension first (a TPU host's chips lie along it). GPU: the
// fewest hosts first (NVLink before the data-center network).
std::vector<std::vector<int64_t>> Candidates(const Interconnect& ic, const std::vector<Left>& left, int64_t size) {
  const int nd = static_cast<int>(left.size());
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> f(nd, 1);
  std::function<void(int, int64_t)> walk = [&](int k, int64_t rest) {
    if (k == nd) {
      if (rest == 1) out.push_back(f);
      return;
    }
    for (int64_t d : Divisors(left[k].count)) {
      if (rest % d != 0) continue;
      f[k] = d;
      walk(k + 1, rest / d);
    }
    f[k] = 1;
  };
  walk(0, size);
  auto cost = [&](const std::vector<int64_t>& c) {
    int strided = 0, partial = 0, pieces = 0, major = 0;
    for (int k = 0; k < nd; ++k) {
      if (c[k] == 1) continue;
      ++pieces;
      major += nd - 1 - k;
      if (left[k].stride > 1) ++strided;
      else if (c[k] < ic.dims()[k]) ++partial;
    }
    if (ic.gpu()) return std::make_tuple(c[0], 0, 0, pieces, major);
    return std::make_tuple(int64_t{0}, strided, partial, pieces, major);
  };
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return cost(a) < cost(b); });
  return out;
}

// Places the axes of `order` (indices into shape) on what is left, the first
// best; backtracks when a later axis cannot be made.
bool Place(const Interconnect& ic, const std::vector<int64_t>& shape, const std::vector<int>& order, size_t at,
           std::vector<Left>& left, std::vector<std::vector<Piece>>& pieces) {
  if (at == order.size()) {
    for (const Left& l : left)
      if (l.count != 1) return false;
    return true;
  }
  const int a = order[at];
  for (const std::vector<int64_t>& f : Candidates(ic, left, shape[a])) {
    const std::vector<Left> saved = left;
    pieces[a].clear();
    for (int k = 0; k < static_cast<int>(f.size()); ++k)
      if (f[k] > 1) pieces[a].push_back(Take(left, k, f[k]));
    if (Place(ic, shape, order, at + 1, left, pieces)) return true;
    left = saved;
    pieces[a].clear();
  }
  return false;
}

// The snake: the reflected mixed-radix digits of `c` over `counts` (major
// first), so consecutive values differ by one step of one digit.
void SnakeDigits(int64_t c, const std::vector<Piece>& ps, std::vector<int64_t>* digits) {
  digits->assign(ps.size(), 0);
  int64_t block = 1;
  for (const Piece& p : ps) block *= p.count;
  for (size_t i = 0; i < ps.size(); ++i) {
    block /= ps[i].count;
    const int64_t d = c / block;
    int64_t r = c % block;
    if (d % 2 == 1) r = block - 1 - r;
    (*digits)[i] = d;
    c = r;
  }
}

std::vector<int64_t> DeviceOrder(const Interconnect& ic, const std::vector<int64_t>& shape,
                                 const std::vector<std::vector<Piece>>& pieces) {
  const int64_t n = Product(shape);
  std::vector<int64_t> ids(n), pos(shape.size(), 0), x(ic.dims().size()), digits;
  for (int64_t at = 0; at < n; ++at) {
    std::fill(x.begin(), x.end(), 0);
    for (size_t a = 0; a < shape.size(); ++a) {
      SnakeDigits(pos[a], pieces[a], &digits);
      for (size_t i = 0; i < digits.size(); ++i) x[pieces[a][i].dim] += digits[i] * pieces[a][i].stride;
    }
    int64_t id = 0;
    for (size_t k = 0; k < x.size(); ++k) id = id * ic.dims()[k] + x[k];
    ids[at] = id;
    for (int a = static_cast<int>(shape.size()) - 1; a >= 0; --a) {
      if (++pos[a] < shape[a]) break;
      pos[a] = 0;
    }
  }
  return ids;
}

absl::Status Refuse(const std::string& flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why));
}

}  // namespace

absl::StatusOr<MeshMapRequest> ParseMeshMap(const std::string& text) {
  MeshMapRequest r;
  r.text = text;
  if (text == "auto") return r;
  if (text == "row-major") {
    r.mode = MeshMapRequest::kRowMajor;
    return r;
  }
  r.mode = MeshMapRequest::kExplicit;
  const std::string forms = " (forms: auto, row-major, or AXIS=DIMS,... naming torus dimensions x, y, z, e.g. "
                            "model=x,data=yz)";
  if (text.empty()) return Refuse("--mesh-map ''", absl::StrCat("empty", forms));
  std::set<std::string> axes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty())
      return Refuse(absl::StrCat("--mesh-map '", text, "'"),
                    absl::StrCat("'", std::string(part), "' is not AXIS=DIMS", forms));
    for (char c : kv[1])
      if (c != 'x' && c != 'y' && c != 'z')
        return Refuse(absl::StrCat("--mesh-map '", text, "'"),
                      absl::StrCat("axis '", kv[0], "' names dimension '", std::string(1, c),
                                   "'; a torus's dimensions are x, y, z"));
    if (!axes.insert(kv[0]).second)
      return Refuse(absl::StrCat("--mesh-map '", text, "'"), absl::StrCat("axis '", kv[0], "' is named twice"));
    r.dims.push_back({kv[0], kv[1]});
  }
  return r;
}

absl::StatusOr<MeshMapRequest> ParseDcnMesh(const std::string& text) {
  MeshMapRequest r;
  r.mode = MeshMapRequest::kDcn;
  r.text = text;
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1 || v > 65536)
      return Refuse(absl::StrCat("--dcn-mesh '", text, "'"),
                    absl::StrCat("'", std::string(part),
                                 "' is not a whole number of hosts from 1 to 65536 (form: one factor per mesh axis, "
                                 "e.g. 4x1: data across 4 hosts, model within one)"));
    r.dcn.push_back(v);
  }
  return r;
}

std::string MeshMapping::Describe() const {
  std::vector<std::string> parts;
  for (const MeshAxisPlacement& p : axes) parts.push_back(p.Describe());
  return absl::StrJoin(parts, "; ");
}

absl::StatusOr<MeshMapping> MapMesh(const Interconnect& ic, const std::vector<int64_t>& shape,
                                    const std::vector<std::string>& names, const MeshMapRequest& request) {
  const int na = static_cast<int>(shape.size());
  if (static_cast<int>(names.size()) != na)
    return absl::InvalidArgumentError(absl::StrCat("mesh map: ", na, " axes but ", names.size(), " names"));
  std::vector<std::string> sized;
  for (int a = 0; a < na; ++a) sized.push_back(absl::StrCat(names[a], " ", shape[a]));
  const std::string mesh_text = absl::StrCat("mesh ", absl::StrJoin(shape, "x"), " (", absl::StrJoin(sized, ", "), ")");
  if (Product(shape) != ic.num_chips())
    return absl::InvalidArgumentError(absl::StrCat("mesh map: the ", mesh_text, " has ", Product(shape),
                                                   " chips but --topology ", ic.spec(), " has ", ic.num_chips()));
  auto axis_of = [&](const std::string& name) {
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  MeshMapping m;
  std::vector<std::vector<Piece>> pieces(na);
  std::vector<Left> left;
  for (int64_t d : ic.dims()) left.push_back({d, 1});

  // The axes placed automatically, most-communicating first.
  std::vector<int> order;
  for (const std::string& p : request.priority)
    if (int a = axis_of(p); a < na && std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);
  for (int a = na - 1; a >= 0; --a)
    if (std::find(order.begin(), order.end(), a) == order.end()) order.push_back(a);

  switch (request.mode) {
    case MeshMapRequest::kRowMajor: {
      m.mode = "row-major";
      m.device_ids.resize(ic.num_chips());
      std::iota(m.device_ids.begin(), m.device_ids.end(), 0);
      m.axes = DescribeMeshAxes(ic, shape, names, m.device_ids);
      return m;
    }
    case MeshMapRequest::kDcn: {
      m.mode = "dcn";
      const std::string flag = absl::StrCat("--dcn-mesh ", request.text);
      if (!ic.gpu())
        return Refuse(flag, absl::StrCat("--topology ", ic.spec(),
                                         " is a torus, all of it one fabric (ici): there is no data-center network "
                                         "to split axes over; use --mesh-map AXIS=DIMS"));
      if (static_cast<int>(request.dcn.size()) != na)
        return Refuse(flag, absl::StrCat("has ", request.dcn.size(), " factors but the ", mesh_text, " has ", na,
                                         " axes: one factor per axis"));
      const int64_t hosts = ic.dims()[0], per = ic.dims()[1];
      for (int a = 0; a < na; ++a) {
        if (hosts % request.dcn[a] != 0)
          return Refuse(flag, absl::StrCat("axis '", names[a], "' spans ", request.dcn[a], " hosts, which does not divide the ",
                                           hosts, " hosts of --topology ", ic.spec()));
        if (shape[a] % request.dcn[a] != 0)
          return Refuse(flag, absl::StrCat("axis '", names[a], "' has ", shape[a], " chips, not a multiple of its ",
                                           request.dcn[a], " hosts"));
      }
      if (Product(request.dcn) != hosts)
        return Refuse(flag, absl::StrCat("the axes span ", Product(request.dcn), " hosts in all but --topology ",
                                         ic.spec(), " has ", hosts, " (", DimsText(ic), ")"));
      std::vector<int64_t> ici(na);
      for (int a = 0; a < na; ++a) ici[a] = shape[a] / request.dcn[a];
      if (Product(ici) != per)
        return Refuse(flag, absl::StrCat("the axes' parts within a host (", absl::StrJoin(ici, "x"), ") make ",
                                         Product(ici), " chips but a host of --topology ", ic.spec(), " has ", per));
      // HybridMesh's layout: the last axis innermost, in hosts and in chips.
      for (int a = na - 1; a >= 0; --a) {
        if (request.dcn[a] > 1) pieces[a].push_back(Take(left, 0, request.dcn[a]));
        if (ici[a] > 1) pieces[a].push_back(Take(left, 1, ici[a]));
      }
      break;
    }
    case MeshMapRequest::kExplicit: {
      m.mode = "explicit";
      const std::string flag = absl::StrCat("--mesh-map ", request.text);
      if (ic.gpu())
        return Refuse(flag, absl::StrCat("names torus dimensions, but --topology ", ic.spec(),
                                         " is a GPU cluster: give --dcn-mesh (per axis the hosts it spans)"));
      std::set<int> named;
      for (const auto& [axis, dims] : request.dims) {
        const int a = axis_of(axis);
        if (a >= na)
          return Refuse(flag, absl::StrCat("axis '", axis, "' is not an axis of the ", mesh_text));
        std::vector<int64_t> used;
        for (char c : dims) {
          const int k = static_cast<int>(std::string(kTorusDims).find(c));
          if (k >= static_cast<int>(ic.dims().size()))
            return Refuse(flag, absl::StrCat("axis '", axis, "' names dimension ", std::string(1, c),
                                             ", which --topology ", ic.spec(), " does not have (", DimsText(ic), ")"));
          if (left[k].stride != 1)
            return Refuse(flag, absl::StrCat("dimension ", std::string(1, c), " is named twice (axis '", axis,
                                             "' and an axis before it): each dimension carries one axis"));
          used.push_back(ic.dims()[k]);
          pieces[a].push_back(Take(left, k, ic.dims()[k]));
        }
        if (Product(used) != shape[a])
          return Refuse(flag, absl::StrCat("axis '", axis, "' has ", shape[a], " chips but ", dims, " make ",
                                           Product(used), " (", DimsText(ic), ")"));
        std::sort(pieces[a].begin(), pieces[a].end(), [](const Piece& p, const Piece& q) { return p.dim < q.dim; });
        named.insert(a);
      }
      std::vector<int> rest;
      for (int a : order)
        if (!named.count(a)) rest.push_back(a);
      if (!Place(ic, shape, rest, 0, left, pieces)) {
        std::vector<std::string> what, ax;
        for (size_t k = 0; k < left.size(); ++k)
          if (left[k].count > 1) what.push_back(absl::StrCat(left[k].count, " of ", DimName(ic, static_cast<int>(k))));
        for (int a : rest) ax.push_back(absl::StrCat("'", names[a], "' (", shape[a], " chips)"));
        return Refuse(flag, absl::StrCat(ax.empty() ? "no axis is left" : absl::StrCat("axes ", absl::StrJoin(ax, ", ")),
                                         " cannot be made of what it leaves: ",
                                         what.empty() ? "nothing" : absl::StrJoin(what, ", "), " (", DimsText(ic),
                                         ")"));
      }
      break;
    }
    case MeshMapRequest::kAuto: {
      m.mode = "auto";
      if (!Place(ic, shape, order, 0, left, pieces))
        return absl::InvalidArgumentError(absl::StrCat("mesh map: the ", mesh_text, " cannot be laid on ",
                                                       DimsText(ic), ": give --mesh-map row-major"));
      break;
    }
  }
  m.device_ids = DeviceOrder(ic, shape, pieces);
  m.axes = DescribeMeshAxes(ic, shape, names, m.device_ids);
  return m;
}

std::vector<std::vector<int>> MeshAxisGroups(const std::vector<int64_t>& shape, const std::vector<int64_t>& device_ids,
                                             int axis) {
  const int64_t n = Product(shape);
  int64_t inner = 1;
  for (size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
  const int64_t size = shape[axis];
  std::vector<std::vector<int>> groups;
  for (int64_t outer = 0; outer < n / (size * inner); ++outer)
    for (int64_t in = 0; in < inner; ++in) {
      std::vector<int> g;
      for (int64_t k = 0; k < size; ++k) g.push_back(static_cast<int>(device_ids[(outer * size + k) * inner + in]));
      groups.push_back(std::move(g));
    }
  return groups;
}

std::vector<MeshAxisPlacement> DescribeMeshAxes(const Interconnect& ic, const std::vector<int64_t>& shape,
                                                const std::vector<std::string>& names,
                                                const std::vector<int64_t>& device_ids) {
  std::vector<MeshAxisPlacement> out;
  const int nd = static_cast<int>(ic.dims().size());
  for (size_t a = 0; a < shape.size(); ++a) {
    MeshAxisPlacement p;
    p.axis = names[a];
    p.size = shape[a];
    if (p.size == 1) {
      p.rides = "1 chip (no collectives)";
      out.push_back(p);
      continue;
    }
    int min_hosts = ic.num_chips(), inner_hop = 0, wrap_hop = 0;
    bool one_rail = true;
    std::vector<int64_t> spread(nd, 0);  // per dimension: the most positions one group spans
    for (const std::vector<int>& g : MeshAxisGroups(shape, device_ids, static_cast<int>(a))) {
      std::set<int> hosts;
      std::vector<std::set<int64_t>> seen(nd);
      for (size_t i = 0; i < g.size(); ++i) {
        hosts.insert(ic.host_of(g[i]));
        for (int k = 0; k < nd; ++k) seen[k].insert(ic.coords(g[i])[k]);
        const int hop = static_cast<int>(ic.Route(g[i], g[(i + 1) % g.size()]).size());
        (i + 1 == g.size() ? wrap_hop : inner_hop) = std::max(i + 1 == g.size() ? wrap_hop : inner_hop, hop);
        if (ic.gpu() && g[i] % ic.chips_per_host() != g[0] % ic.chips_per_host()) one_rail = false;
      }
      p.hosts_spanned = std::max(p.hosts_spanned, static_cast<int>(hosts.size()));
      min_hosts = std::min(min_hosts, static_cast<int>(hosts.size()));
      for (int k = 0; k < nd; ++k) spread[k] = std::max(spread[k], static_cast<int64_t>(seen[k].size()));
    }
    p.max_hop = std::max(inner_hop, wrap_hop);
    if (ic.gpu()) {
      const int h = p.hosts_spanned;
      if (h == 1) {
        p.rides = absl::StrCat("within a host (nvlink, ", p.size, " chips)");
      } else if (min_hosts == h && h == p.size) {
        p.rides = absl::StrCat("across ", h, " hosts (dcn", one_rail ? ", one rail" : "", ")");
      } else if (min_hosts == h && p.size % h == 0) {
        p.rides = absl::StrCat(p.size / h, " chips within a host (nvlink) x ", h, " hosts (dcn)");
      } else {
        p.rides = absl::StrCat("straddles up to ", h, " hosts unevenly (nvlink + dcn, ", p.size, " chips)");
      }
    } else {
      std::vector<std::string> dims, block;
      bool whole = true;
      for (int k = 0; k < nd; ++k) {
        if (spread[k] <= 1) continue;
        const std::string name = DimName(ic, k);
        dims.push_back(spread[k] == ic.dims()[k] ? name : absl::StrCat(spread[k], " of ", name));
        block.push_back(absl::StrCat(spread[k]));
        whole = whole && spread[k] == ic.dims()[k];
      }
      std::string shape_text;
      if (p.max_hop == 1) shape_text = whole ? "ring with wraparound" : "ring of neighbours";
      else if (inner_hop == 1) shape_text = absl::StrCat("a line; the ring closes over ", wrap_hop, " hops");
      else shape_text = absl::StrCat("ring with steps of up to ", p.max_hop, " hops");
      if (block.size() > 1) shape_text = absl::StrCat(absl::StrJoin(block, "x"), whole ? " sub-torus, " : " block, ", shape_text);
      p.rides = absl::StrCat(absl::StrJoin(dims, ","), " (ici, ", p.size, " chips, ", shape_text, ")");
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace shardscope::runtime
