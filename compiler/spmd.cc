#include "compiler/spmd.h"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace shardscope::compiler {
namespace {

// One device's tile coordinates: small, kept off the heap (made per device
// for every layout the partitioner builds).
using Coord = absl::InlinedVector<int64_t, 8>;

int64_t Product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

int64_t Linearize(absl::Span<const int64_t> coords, const std::vector<int64_t>& sizes) {
  int64_t l = 0;
  for (size_t k = 0; k < coords.size(); ++k) l = l * sizes[k] + coords[k];
  return l;
}

// A sharding in its full tile form: one tile count per tensor dimension plus a
// trailing replication dimension, and the device at every tile position. Every
// kind of sharding the partitioner handles has this form, which keeps each
// rule a small mapping from a device's old tile coordinates to its new ones.
struct Tiles {
  // Which device sits where; shared, never changed once made: a program's
  // ops copy their operands' layouts thousands of times, and copying a
  // per-device table each time made compile time grow with the device count.
  struct Assignment {
    std::vector<int64_t> devices;  // row-major over dims
    std::vector<int64_t> coords;   // device id -> coordinates, dims.size() per device, flat
  };
  std::vector<int64_t> dims;     // rank + 1
  std::shared_ptr<const Assignment> assignment;

  int rank() const { return static_cast<int>(dims.size()) - 1; }
  int64_t repl() const { return dims.back(); }
  int64_t DataTiles() const { return Product(dims) / repl(); }
  const std::vector<int64_t>& devices() const { return assignment->devices; }
  int64_t num_devices() const { return static_cast<int64_t>(assignment->devices.size()); }
  absl::Span<const int64_t> Coords(int64_t device) const {
    return absl::Span<const int64_t>(assignment->coords.data() + device * dims.size(), dims.size());
  }

  static Tiles Replicated(int rank, int n) {
    std::vector<int64_t> d(rank + 1, 1);
    d.back() = n;
    std::vector<int64_t> devs(n);
    std::iota(devs.begin(), devs.end(), 0);
    return Make(d, devs);
  }
  static Tiles Make(std::vector<int64_t> dims, std::vector<int64_t> devices) {
    auto a = std::make_shared<Assignment>();
    const size_t stride = dims.size();
    a->coords.assign(devices.size() * stride, 0);
    for (size_t lin = 0; lin < devices.size(); ++lin) {
      int64_t* c = a->coords.data() + devices[lin] * stride;
      int64_t l = static_cast<int64_t>(lin);
      for (int k = static_cast<int>(stride) - 1; k >= 0; --k) {
        c[k] = l % dims[k];
        l /= dims[k];
      }
    }
    a->devices = std::move(devices);
    return Tiles{std::move(dims), std::move(a)};
  }
  // Builds tiles of shape `new_dims` where each device sits at `place(device)`.
  template <typename F>
  static Tiles Build(std::vector<int64_t> new_dims, int n, F place) {
    auto a = std::make_shared<Assignment>();
    a->devices.assign(n, -1);
    const size_t stride = new_dims.size();
    a->coords.resize(static_cast<size_t>(n) * stride);
    for (int d = 0; d < n; ++d) {
      const auto c = place(d);
      std::copy(c.begin(), c.end(), a->coords.begin() + d * stride);
      a->devices[Linearize(c, new_dims)] = d;
    }
    return Tiles{std::move(new_dims), std::move(a)};
  }
  static absl::StatusOr<Tiles> From(const Sharding& s, int rank, int n) {
    switch (s.kind()) {
      case Sharding::Kind::kReplicated:
        return Replicated(rank, n);
      case Sharding::Kind::kTiled: {
        if (absl::Status st = s.Validate(rank, n); !st.ok()) return st;
        if (static_cast<int64_t>(s.devices().size()) != n)
          return absl::InvalidArgumentError(absl::StrCat("sharding ", s.ToString(), " covers ",
                                                         s.devices().size(), " devices, the mesh has ", n));
        std::vector<int64_t> d = s.tile_dims();
        if (!s.last_tile_dim_replicate()) d.push_back(1);
        return Make(d, s.devices());
      }
      default:
        return absl::UnimplementedError(
            absl::StrCat("sharding ", s.ToString(), " is not supported by the partitioner yet"));
    }
  }
  Sharding ToSharding() const {
    auto s = Sharding::Tiled(dims, devices(), true);
    return s.ok() ? *s : Sharding();
  }
  // The same layout with `whole` dims no longer split: their tiles join the
  // replication dimension (each device keeps its other coordinates).
  Tiles Unsplit(const std::vector<int64_t>& whole) const {
    std::vector<int64_t> nd = dims, moved_sizes;
    for (int64_t d : whole) {
      moved_sizes.push_back(dims[d]);
      nd[d] = 1;
    }
    moved_sizes.push_back(repl());
    nd.back() = Product(moved_sizes);
    std::vector<int64_t> devs(num_devices(), -1);
    for (int64_t dev = 0; dev < num_devices(); ++dev) {
      const auto old = Coords(dev);
      std::vector<int64_t> c(old.begin(), old.end()), mc;
      for (int64_t d : whole) {
        mc.push_back(c[d]);
        c[d] = 0;
      }
      mc.push_back(c.back());
      c.back() = Linearize(mc, moved_sizes);
      devs[Linearize(c, nd)] = static_cast<int64_t>(dev);
    }
    return Make(std::move(nd), std::move(devs));
  }
  // Same data on every device (replication order does not matter).
  bool SameLayout(const Tiles& o) const {
    if (rank() != o.rank()) return false;
    if (assignment == o.assignment && dims == o.dims) return true;
    for (int k = 0; k < rank(); ++k)
      if (dims[k] != o.dims[k]) return false;
    for (int64_t d = 0; d < num_devices(); ++d)
      for (int k = 0; k < rank(); ++k)
        if (Coords(d)[k] != o.Coords(d)[k]) return false;
    return true;
  }
};

// Devices grouped by their coordinates outside `varying`; within a group,
// ordered by their coordinates on `varying`.
std::vector<std::vector<int64_t>> GroupsVarying(const Tiles& t, const std::vector<int>& varying) {
  std::map<std::vector<int64_t>, std::vector<std::pair<int64_t, int64_t>>> groups;
  std::vector<int64_t> vsizes;
  for (int v : varying) vsizes.push_back(t.dims[v]);
  for (int64_t d = 0; d < t.num_devices(); ++d) {
    std::vector<int64_t> key, vc;
    for (int k = 0; k < static_cast<int>(t.dims.size()); ++k) {
      if (std::find(varying.begin(), varying.end(), k) != varying.end()) vc.push_back(t.Coords(d)[k]);
      else key.push_back(t.Coords(d)[k]);
    }
    groups[key].push_back({Linearize(vc, vsizes), d});
  }
  std::vector<std::vector<int64_t>> out;
  for (auto& [key, members] : groups) {
    std::sort(members.begin(), members.end());
    std::vector<int64_t> g;
    for (auto& m : members) g.push_back(m.second);
    out.push_back(g);
  }
  return out;
}

std::vector<int64_t> FreeDims(int rank, const std::vector<int64_t>& batch,
                              const std::vector<int64_t>& contracting) {
  std::vector<int64_t> out;
  for (int d = 0; d < rank; ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), d) == contracting.end())
      out.push_back(d);
  return out;
}

// How a dot_general is split: which operand drives, what the other must be,
// the result's tiles, and the groups that sum partial results.
struct DotPlan {
  Tiles lhs, rhs, out;
  bool partial = false;
  std::vector<std::vector<int64_t>> groups;
};

// Both operands split on free dims over different devices (the activations'
// batch over one mesh axis, a column-parallel weight's output features over
// another): each device multiplies the shards it holds and the result keeps
// both splits. Only without split contracting dims, with batch dims split
// alike in both, and when every result tile is held by equally many devices.
std::optional<DotPlan> PlanDotBothFree(const Instruction& i, const Tiles& tl, const Tiles& tr, int n) {
  const DotDims& dd = i.dot;
  const std::vector<int64_t> lfree = FreeDims(tl.rank(), dd.lhs_batch, dd.lhs_contracting);
  const std::vector<int64_t> rfree = FreeDims(tr.rank(), dd.rhs_batch, dd.rhs_contracting);
  auto split_among = [](const Tiles& t, const std::vector<int64_t>& dims) {
    for (int64_t d : dims)
      if (t.dims[d] > 1) return true;
    return false;
  };
  if (!split_among(tl, lfree) || !split_among(tr, rfree)) return std::nullopt;
  if (split_among(tl, dd.lhs_contracting) || split_among(tr, dd.rhs_contracting)) return std::nullopt;
  for (size_t k = 0; k < dd.lhs_batch.size(); ++k) {
    const int64_t a = dd.lhs_batch[k], b = dd.rhs_batch[k];
    if (tl.dims[a] != tr.dims[b]) return std::nullopt;
    for (int64_t dev = 0; dev < n; ++dev)
      if (tl.Coords(dev)[a] != tr.Coords(dev)[b]) return std::nullopt;
  }
  // Result dims: batch, lhs free, rhs free; each device's coordinates from the operand that splits them.
  const int out_rank = i.shape.rank();
  std::vector<int64_t> out_dims(out_rank + 1, 1);
  int at = 0;
  for (int64_t b : dd.lhs_batch) out_dims[at++] = tl.dims[b];
  for (int64_t f : lfree) out_dims[at++] = tl.dims[f];
  for (int64_t f : rfree) out_dims[at++] = tr.dims[f];
  int64_t data_tiles = 1;
  for (int k = 0; k < out_rank; ++k) data_tiles *= out_dims[k];
  if (n % data_tiles != 0) return std::nullopt;
  out_dims.back() = n / data_tiles;
  std::map<std::vector<int64_t>, int64_t> holders;  // result tile -> devices holding it so far
  std::vector<std::vector<int64_t>> coords(n);
  for (int64_t dev = 0; dev < n; ++dev) {
    std::vector<int64_t> c;
    for (int64_t b : dd.lhs_batch) c.push_back(tl.Coords(dev)[b]);
    for (int64_t f : lfree) c.push_back(tl.Coords(dev)[f]);
    for (int64_t f : rfree) c.push_back(tr.Coords(dev)[f]);
    const int64_t rank_in_tile = holders[c]++;
    if (rank_in_tile >= out_dims.back()) return std::nullopt;
    c.push_back(rank_in_tile);
    coords[dev] = std::move(c);
  }
  DotPlan p{tl, tr, Tiles::Build(out_dims, n, [&](int64_t dev) { return coords[dev]; }), false, {}};
  return p;
}

DotPlan PlanDot(const Instruction& i, const Tiles& tl, const Tiles& tr, int n) {
  if (auto both = PlanDotBothFree(i, tl, tr, n)) return *both;
  const DotDims& dd = i.dot;
  bool lhs_drives = tl.DataTiles() >= tr.DataTiles();
  const Tiles& drv = lhs_drives ? tl : tr;
  const auto& dbatch = lhs_drives ? dd.lhs_batch : dd.rhs_batch;
  const auto& dcontract = lhs_drives ? dd.lhs_contracting : dd.rhs_contracting;
  const auto& obatch = lhs_drives ? dd.rhs_batch : dd.lhs_batch;
  const auto& ocontract = lhs_drives ? dd.rhs_contracting : dd.lhs_contracting;
  int orank = lhs_drives ? tr.rank() : tl.rank();
  std::vector<int64_t> dfree = FreeDims(drv.rank(), dbatch, dcontract);

  // The other operand: batch and contracting split as the driver's, the rest whole.
  std::vector<int64_t> free_sizes, contract_sizes;
  for (int64_t f : dfree) free_sizes.push_back(drv.dims[f]);
  free_sizes.push_back(drv.repl());
  for (int64_t c : dcontract) contract_sizes.push_back(drv.dims[c]);
  contract_sizes.push_back(drv.repl());
  std::vector<int64_t> odims(orank + 1, 1);
  for (size_t k = 0; k < obatch.size(); ++k) odims[obatch[k]] = drv.dims[dbatch[k]];
  for (size_t k = 0; k < ocontract.size(); ++k) odims[ocontract[k]] = drv.dims[dcontract[k]];
  odims.back() = Product(free_sizes);
  Tiles other = Tiles::Build(odims, n, [&](int64_t d) {
    const auto& c = drv.Coords(d);
    Coord oc(orank + 1, 0);
    for (size_t k = 0; k < obatch.size(); ++k) oc[obatch[k]] = c[dbatch[k]];
    for (size_t k = 0; k < ocontract.size(); ++k) oc[ocontract[k]] = c[dcontract[k]];
    Coord fc;
    for (int64_t f : dfree) fc.push_back(c[f]);
    fc.push_back(c.back());
    oc.back() = Linearize(fc, free_sizes);
    return oc;
  });

  // Result dims: batch, lhs free, rhs free; the driver's free dims keep their split.
  int out_rank = i.shape.rank();
  std::vector<int64_t> out_dims(out_rank + 1, 1);
  std::vector<int> out_of_driver_free;  // result dim of each driver free dim
  int lhs_free_count = static_cast<int>(FreeDims(tl.rank(), dd.lhs_batch, dd.lhs_contracting).size());
  int batch_count = static_cast<int>(dd.lhs_batch.size());
  for (size_t k = 0; k < dfree.size(); ++k)
    out_of_driver_free.push_back(lhs_drives ? batch_count + static_cast<int>(k)
                                            : batch_count + lhs_free_count + static_cast<int>(k));
  for (int k = 0; k < batch_count; ++k) out_dims[k] = drv.dims[dbatch[k]];
  for (size_t k = 0; k < dfree.size(); ++k) out_dims[out_of_driver_free[k]] = drv.dims[dfree[k]];
  out_dims.back() = Product(contract_sizes);
  Tiles out = Tiles::Build(out_dims, n, [&](int64_t d) {
    const auto& c = drv.Coords(d);
    Coord oc(out_rank + 1, 0);
    for (int k = 0; k < batch_count; ++k) oc[k] = c[dbatch[k]];
    for (size_t k = 0; k < dfree.size(); ++k) oc[out_of_driver_free[k]] = c[dfree[k]];
    Coord cc;
    for (int64_t x : dcontract) cc.push_back(c[x]);
    cc.push_back(c.back());
    oc.back() = Linearize(cc, contract_sizes);
    return oc;
  });

  DotPlan p{lhs_drives ? tl : other, lhs_drives ? other : tr, out, false, {}};
  std::vector<int> varying;
  for (int64_t c : dcontract)
    if (drv.dims[c] > 1) varying.push_back(static_cast<int>(c));
  p.partial = !varying.empty();
  if (p.partial) p.groups = GroupsVarying(drv, varying);
  return p;
}

// Reduce: kept dims keep their split; reduced split dims become partial sums.
struct ReducePlan {
  Tiles out;
  std::vector<std::vector<int64_t>> groups;
};

ReducePlan PlanReduce(const Instruction& i, const Tiles& t, int n) {
  std::vector<int64_t> kept, reduced;
  for (int d = 0; d < t.rank(); ++d)
    (std::find(i.dims.begin(), i.dims.end(), d) != i.dims.end() ? reduced : kept).push_back(d);
  std::vector<int64_t> odims, rsizes;
  for (int64_t k : kept) odims.push_back(t.dims[k]);
  for (int64_t r : reduced) rsizes.push_back(t.dims[r]);
  rsizes.push_back(t.repl());
  odims.push_back(Product(rsizes));
  ReducePlan p;
  p.out = Tiles::Build(odims, n, [&](int64_t d) {
    const auto& c = t.Coords(d);
    Coord oc, rc;
    for (int64_t k : kept) oc.push_back(c[k]);
    for (int64_t r : reduced) rc.push_back(c[r]);
    rc.push_back(c.back());
    oc.push_back(Linearize(rc, rsizes));
    return oc;
  });
  std::vector<int> varying;
  for (int64_t r : reduced)
    if (t.dims[r] > 1) varying.push_back(static_cast<int>(r));
  if (!varying.empty()) p.groups = GroupsVarying(t, varying);
  return p;
}

// convolution (one group), split one of two ways; anything else is computed whole:
//  - by the input's batch dim, the kernel whole: each device convolves its
//    share of the batch and the result keeps the split on its batch dim
//    (the forward pass and the input gradient of data-parallel training);
//  - by the input's feature dim, the kernel split alike on its input-feature
//    dim: each device sums over its share of the features and an all-reduce
//    adds the partial results (the kernel gradient, which contracts the batch).
struct ConvPlan {
  Tiles lhs, rhs, out;
  std::vector<std::vector<int64_t>> groups;  // partial sums to add (feature split)
};

std::optional<ConvPlan> PlanConv(const Instruction& i, const Tiles& tl, int n) {
  const ConvDims& c = i.conv;
  if (c.feature_group_count != 1 || c.batch_group_count != 1) return std::nullopt;
  int split = -1;
  for (int d = 0; d < tl.rank(); ++d) {
    if (tl.dims[d] == 1) continue;
    if (split >= 0) return std::nullopt;  // split along two dims
    split = d;
  }
  if (split < 0 || (split != c.input_batch && split != c.input_feature)) return std::nullopt;
  const int rrank = i.operands[1]->shape.rank(), orank = i.shape.rank();
  ConvPlan p;
  p.lhs = tl;
  if (split == c.input_batch) {
    p.rhs = Tiles::Replicated(rrank, n);
    std::vector<int64_t> od(orank + 1, 1);
    od[c.output_batch] = tl.dims[split];
    od.back() = tl.repl();
    p.out = Tiles::Build(od, n, [&](int64_t d) {
      Coord oc(orank + 1, 0);
      oc[c.output_batch] = tl.Coords(d)[split];
      oc.back() = tl.Coords(d).back();
      return oc;
    });
    return p;
  }
  std::vector<int64_t> rd(rrank + 1, 1);
  rd[c.kernel_input_feature] = tl.dims[split];
  rd.back() = tl.repl();
  p.rhs = Tiles::Build(rd, n, [&](int64_t d) {
    Coord rc(rrank + 1, 0);
    rc[c.kernel_input_feature] = tl.Coords(d)[split];
    rc.back() = tl.Coords(d).back();
    return rc;
  });
  p.out = Tiles::Replicated(orank, n);
  p.groups = GroupsVarying(tl, {split});
  return p;
}

// pad keeps the operand's split on the dims it does not pad.
bool PadKeepsSplit(const Instruction& i, const Tiles& t) {
  for (int d = 0; d < t.rank(); ++d)
    if (t.dims[d] > 1 && (i.pad.low[d] != 0 || i.pad.high[d] != 0 || i.pad.interior[d] != 0)) return false;
  return true;
}

// reduce_window keeps the operand's split where its window is one element
// wide, unstrided and unpadded (the batch and channels of pooling).
bool WindowKeepsSplit(const Instruction& i, const Tiles& t) {
  const WindowDims& w = i.window;
  auto at = [](const std::vector<int64_t>& v, int k) { return k < static_cast<int>(v.size()) ? v[k] : 1; };
  for (int d = 0; d < t.rank(); ++d) {
    if (t.dims[d] == 1) continue;
    bool padded = d < static_cast<int>(w.padding.size()) && (w.padding[d].first != 0 || w.padding[d].second != 0);
    if (w.dimensions[d] != 1 || at(w.strides, d) != 1 || at(w.base_dilations, d) != 1 ||
        at(w.window_dilations, d) != 1 || padded)
      return false;
  }
  return true;
}

// broadcast_in_dim: operand dims keep their split where the size is kept.
Tiles BroadcastOut(const Instruction& i, const Tiles& t, int n) {
  int orank = i.shape.rank();
  std::vector<int64_t> odims(orank + 1, 1);
  std::vector<int64_t> lost_sizes;  // split operand dims that broadcast from size 1
  for (int k = 0; k < t.rank(); ++k) {
    if (i.operands[0]->shape.dims[k] == i.shape.dims[i.dims[k]]) odims[i.dims[k]] = t.dims[k];
    else lost_sizes.push_back(t.dims[k]);
  }
  lost_sizes.push_back(t.repl());
  odims.back() = Product(lost_sizes);
  return Tiles::Build(odims, n, [&](int64_t d) {
    const auto& c = t.Coords(d);
    Coord oc(orank + 1, 0), lc;
    for (int k = 0; k < t.rank(); ++k) {
      if (i.operands[0]->shape.dims[k] == i.shape.dims[i.dims[k]]) oc[i.dims[k]] = c[k];
      else lc.push_back(c[k]);
    }
    lc.push_back(c.back());
    oc.back() = Linearize(lc, lost_sizes);
    return oc;
  });
}

// The operand tiles a broadcast needs to produce `out` locally.
Tiles BroadcastOperandFor(const Instruction& i, const Tiles& out, int n) {
  const Shape& in = i.operands[0]->shape;
  std::vector<int64_t> idims(in.rank() + 1, 1);
  std::vector<int> mapped(in.rank(), -1);
  for (int k = 0; k < in.rank(); ++k)
    if (in.dims[k] == i.shape.dims[i.dims[k]]) mapped[k] = static_cast<int>(i.dims[k]);
  std::vector<int64_t> rest_sizes;
  std::vector<int> rest_dims;
  for (int od = 0; od < out.rank(); ++od) {
    bool is_mapped = std::find(mapped.begin(), mapped.end(), od) != mapped.end();
    if (!is_mapped) { rest_sizes.push_back(out.dims[od]); rest_dims.push_back(od); }
  }
  rest_sizes.push_back(out.repl());
  rest_dims.push_back(out.rank());
  for (int k = 0; k < in.rank(); ++k) if (mapped[k] >= 0) idims[k] = out.dims[mapped[k]];
  idims.back() = Product(rest_sizes);
  return Tiles::Build(idims, n, [&](int64_t d) {
    const auto& c = out.Coords(d);
    Coord ic(in.rank() + 1, 0), rc;
    for (int k = 0; k < in.rank(); ++k) if (mapped[k] >= 0) ic[k] = c[mapped[k]];
    for (int od : rest_dims) rc.push_back(c[od]);
    ic.back() = Linearize(rc, rest_sizes);
    return ic;
  });
}

Tiles TransposeOut(const Instruction& i, const Tiles& t, int n) {
  std::vector<int64_t> odims(t.dims.size());
  for (size_t k = 0; k < i.dims.size(); ++k) odims[k] = t.dims[i.dims[k]];
  odims.back() = t.repl();
  return Tiles::Build(odims, n, [&](int64_t d) {
    const auto& c = t.Coords(d);
    Coord oc(c.size());
    for (size_t k = 0; k < i.dims.size(); ++k) oc[k] = c[i.dims[k]];
    oc.back() = c.back();
    return oc;
  });
}

// Reshape keeps a split dim k when an output dim starts where it starts (the
// same number of elements before it) and either has its size, or merges it
// with the whole dims after it ([B/2, H, T] -> [B*H/2, T]), or is its major
// part, divisible by the tiles ([B/2] -> [2/2, B/2]); each device's elements
// then stay one contiguous block of that output dim.
std::optional<Tiles> ReshapeOut(const Instruction& i, const Tiles& t, int n) {
  const Shape& in = i.operands[0]->shape;
  const std::vector<int64_t>& out = i.shape.dims;
  std::vector<int> map(in.rank(), -1);
  for (int k = 0; k < in.rank(); ++k) {
    if (t.dims[k] == 1) continue;
    int64_t before = 1;
    for (int j = 0; j < k; ++j) before *= in.dims[j];
    int64_t obefore = 1;
    for (int od = 0; od < static_cast<int>(out.size()) && obefore <= before; ++od) {
      if (obefore == before && out[od] > 1) {
        if (out[od] == in.dims[k]) {
          map[k] = od;
        } else if (out[od] > in.dims[k]) {  // merged with the dims after k (a split one finds no dim of its own)
          int64_t merged = in.dims[k];
          for (int j = k + 1; j < in.rank() && merged < out[od]; ++j) merged *= in.dims[j];
          if (merged == out[od]) map[k] = od;
        } else if (in.dims[k] % out[od] == 0 && out[od] % t.dims[k] == 0) {  // k's major part
          map[k] = od;
        }
        break;
      }
      obefore *= out[od];
    }
    if (map[k] < 0) return std::nullopt;
  }
  std::vector<int64_t> odims(i.shape.rank() + 1, 1);
  for (int k = 0; k < in.rank(); ++k) if (map[k] >= 0) odims[map[k]] = t.dims[k];
  odims.back() = t.repl();
  return Tiles::Build(odims, n, [&](int64_t d) {
    const auto& c = t.Coords(d);
    Coord oc(i.shape.rank() + 1, 0);
    for (int k = 0; k < in.rank(); ++k) if (map[k] >= 0) oc[map[k]] = c[k];
    oc.back() = c.back();
    return oc;
  });
}

// Dims of `rank` other than `skip`, in order (a gather's or scatter's batch
// dims among its indices' dims: all but the index vector dim).
std::vector<int64_t> DimsExcept(int rank, int64_t skip) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (d != skip) out.push_back(d);
  return out;
}

// Dims of `rank` not in `taken`, in order.
std::vector<int64_t> DimsNotIn(int rank, const std::vector<int64_t>& taken) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(taken.begin(), taken.end(), d) == taken.end()) out.push_back(d);
  return out;
}

// Tiles of rank `rank` that take `from`'s split of dim from_dims[k] on dim
// to_dims[k], are whole elsewhere, and replicate over the rest of `from`.
Tiles MapSplit(const Tiles& from, const std::vector<int64_t>& from_dims, const std::vector<int64_t>& to_dims,
               int rank, int n) {
  std::vector<int64_t> dims(rank + 1, 1), rest_sizes;
  std::vector<int> rest;
  for (size_t k = 0; k < from_dims.size(); ++k) dims[to_dims[k]] = from.dims[from_dims[k]];
  for (int d = 0; d <= from.rank(); ++d)
    if (std::find(from_dims.begin(), from_dims.end(), d) == from_dims.end()) {
      rest.push_back(d);
      rest_sizes.push_back(from.dims[d]);
    }
  dims.back() = Product(rest_sizes);
  return Tiles::Build(dims, n, [&](int64_t dev) {
    const auto& c = from.Coords(dev);
    Coord oc(rank + 1, 0), rc;
    for (size_t k = 0; k < from_dims.size(); ++k) oc[to_dims[k]] = c[from_dims[k]];
    for (int d : rest) rc.push_back(c[d]);
    oc.back() = Linearize(rc, rest_sizes);
    return oc;
  });
}

// True when `t` splits only dims among `allowed`.
bool SplitsOnlyAmong(const Tiles& t, const std::vector<int64_t>& allowed) {
  for (int d = 0; d < t.rank(); ++d)
    if (t.dims[d] > 1 && std::find(allowed.begin(), allowed.end(), d) == allowed.end()) return false;
  return true;
}

// gather, split one of two ways (otherwise computed whole):
//  - by the indices' batch dims, the operand whole: each device looks up its
//    share of the indices (an embedding lookup of data-parallel training);
//  - by operand dims that every slice takes whole (not indexed, not
//    collapsed), the indices whole: each device gathers its columns (an
//    embedding table split on its feature dim).
struct GatherPlan {
  Tiles operand, indices, out;
};

std::optional<GatherPlan> PlanGather(const Instruction& i, const Tiles& to, const Tiles& ti, int n) {
  const GatherDims& g = i.gather;
  const Shape& os = i.operands[0]->shape;
  const int irank = ti.rank(), orank = to.rank(), rrank = i.shape.rank();
  const std::vector<int64_t> batch_in = DimsExcept(irank, g.index_vector_dim);
  const std::vector<int64_t> batch_out = DimsNotIn(rrank, g.offset_dims);
  std::vector<int64_t> pass_in, pass_out;  // operand dims every slice takes whole, and their result dims
  const std::vector<int64_t> kept = DimsNotIn(orank, g.collapsed_slice_dims);
  for (size_t k = 0; k < kept.size(); ++k) {
    const int64_t d = kept[k];
    if (g.slice_sizes[d] == os.dims[d] &&
        std::find(g.start_index_map.begin(), g.start_index_map.end(), d) == g.start_index_map.end()) {
      pass_in.push_back(d);
      pass_out.push_back(g.offset_dims[k]);
    }
  }
  const bool indices_split = ti.DataTiles() > 1 && SplitsOnlyAmong(ti, batch_in);
  const bool operand_split = to.DataTiles() > 1 && SplitsOnlyAmong(to, pass_in);
  GatherPlan p;
  if (indices_split && ti.DataTiles() >= to.DataTiles()) {
    p.indices = ti;
    p.operand = Tiles::Replicated(orank, n);
    p.out = MapSplit(ti, batch_in, batch_out, rrank, n);
    return p;
  }
  if (operand_split) {
    p.operand = to;
    p.indices = Tiles::Replicated(irank, n);
    p.out = MapSplit(to, pass_in, pass_out, rrank, n);
    return p;
  }
  return std::nullopt;
}

// scatter, split by the indices' batch dims (the updates' scatter dims alike):
// each device scatters its share of the updates, and the devices that hold
// different shares combine their results. Sums scatter into zeros, are added
// up by an all-reduce and then added to the operand once; max and min scatter
// into the operand itself (combining it twice changes nothing). Other
// combiners, and a replacing scatter, are computed whole.
struct ScatterPlan {
  Tiles indices, updates;
  std::vector<std::vector<int64_t>> groups;
};

std::optional<ScatterPlan> PlanScatter(const Instruction& i, const Tiles& ti, const Tiles& tu, int n) {
  const ScatterDims& s = i.scatter;
  if (s.replace || (i.reduce != ReduceKind::kSum && i.reduce != ReduceKind::kMax && i.reduce != ReduceKind::kMin))
    return std::nullopt;
  const std::vector<int64_t> batch_in = DimsExcept(ti.rank(), s.index_vector_dim);
  const std::vector<int64_t> batch_up = DimsNotIn(tu.rank(), s.update_window_dims);
  ScatterPlan p;
  if (ti.DataTiles() > 1 && SplitsOnlyAmong(ti, batch_in) && ti.DataTiles() >= tu.DataTiles()) {
    p.indices = ti;
    p.updates = MapSplit(ti, batch_in, batch_up, tu.rank(), n);
  } else if (tu.DataTiles() > 1 && SplitsOnlyAmong(tu, batch_up)) {
    p.updates = tu;
    p.indices = MapSplit(tu, batch_up, batch_in, ti.rank(), n);
  } else {
    return std::nullopt;
  }
  std::vector<int> varying;
  for (int64_t d : batch_in)
    if (p.indices.dims[d] > 1) varying.push_back(static_cast<int>(d));
  p.groups = GroupsVarying(p.indices, varying);
  return p;
}

// A value that is zero everywhere: a zero constant, or a broadcast of one.
bool IsZero(const Instruction* i) {
  while (i->op == Opcode::kBroadcastInDim) i = i->operands[0];
  if (i->op != Opcode::kConstant) return false;
  for (int64_t k = 0; k < i->literal->elements(); ++k)
    if (i->literal->GetDouble(k) != 0) return false;
  return true;
}

// Dims of a slice-like op that do not take the operand whole: a split there
// must be gathered first; every other split passes through.
std::vector<int64_t> PartialDims(const Instruction& i) {
  const Shape& in = i.operands[0]->shape;
  std::vector<int64_t> out;
  for (int d = 0; d < in.rank(); ++d) {
    bool whole = true;
    switch (i.op) {
      case Opcode::kSlice:
        whole = i.slice.start[d] == 0 && i.slice.limit[d] == in.dims[d] && i.slice.stride[d] == 1;
        break;
      case Opcode::kDynamicSlice:  // a full-size window can only start at 0 (starts are clamped)
        whole = i.dims[d] == in.dims[d];
        break;
      case Opcode::kDynamicUpdateSlice:
        whole = i.operands[1]->shape.dims[d] == in.dims[d];
        break;
      case Opcode::kConcatenate:
        whole = d != i.dims[0];
        break;
      default:
        break;
    }
    if (!whole) out.push_back(d);
  }
  return out;
}

// The layout a slice-like op computes in: its (most split) operand's, with
// the dims it cuts or joins along made whole.
Tiles SliceLayout(const Instruction& i, const std::vector<Tiles>& sh) {
  const Tiles* best = &sh[i.operands[0]->id];
  if (i.op == Opcode::kConcatenate)
    for (const Instruction* o : i.operands)
      if (sh[o->id].DataTiles() > best->DataTiles()) best = &sh[o->id];
  return best->Unsplit(PartialDims(i));
}

class Partitioner {
 public:
  Partitioner(const Module& g, int n) : g_(g), n_(n) {}

  absl::StatusOr<SpmdResult> Run() {
    size_t count = g_.instructions().size();
    sh_.resize(count);
    pinned_.assign(count, false);
    source_.assign(count, "propagated");
    via_.assign(count, "");
    if (absl::Status s = Forward(); !s.ok()) return s;
    Backward();
    if (absl::Status s = Forward(); !s.ok()) return s;
    result_.local = std::make_unique<Module>(g_.name());
    result_.local->set_num_partitions(n_);
    lv_.assign(count, nullptr);
    for (const auto& i : g_.instructions()) {
      if (absl::Status s = Emit(*i); !s.ok()) return s;
    }
    std::vector<Instruction*> outs;
    for (const Instruction* o : g_.outputs()) {
      outs.push_back(lv_[o->id]);
      result_.output_shardings.push_back(sh_[o->id].ToSharding());
    }
    result_.local->SetOutputs(outs);
    result_.local->output_shardings() = result_.output_shardings;
    for (const Instruction* p : g_.parameters()) result_.param_shardings.push_back(sh_[p->id].ToSharding());
    std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, Sharding> as_sharding;
    for (const auto& i : g_.instructions()) {
      // Many ops share a layout, and converting one costs a pass over the devices.
      const Tiles& t = sh_[i->id];
      auto [it, fresh] = as_sharding.try_emplace(std::make_pair(t.dims, t.devices()));
      if (fresh) it->second = t.ToSharding();
      result_.decisions.push_back({i->id, it->second, source_[i->id], via_[i->id]});
    }
    if (absl::Status s = Verify(*result_.local); !s.ok())
      return absl::InternalError(absl::StrCat("SPMD partitioner produced an invalid program: ", s.message()));
    return std::move(result_);
  }

 private:
  // Gives every instruction a sharding from its operands; pinned ones keep theirs.
  absl::Status Forward() {
    for (const auto& ip : g_.instructions()) {
      const Instruction& i = *ip;
      if (pinned_[i.id]) continue;
      int rank = i.shape.rank();
      if (i.sharding && i.op != Opcode::kParameter) {  // the user's constraint on a value: fixed
        auto t = Tiles::From(*i.sharding, rank, n_);
        if (!t.ok())
          return absl::InvalidArgumentError(absl::StrCat(OpcodeName(i.op), i.loc.known() ? " at " : "", i.loc.file,
                                                         i.loc.known() ? absl::StrCat(":", i.loc.line) : "", ": ",
                                                         t.status().message()));
        sh_[i.id] = *t;
        pinned_[i.id] = true;
        source_[i.id] = "annotated";
        continue;
      }
      switch (i.op) {
        case Opcode::kParameter: {
          auto t = Tiles::From(i.sharding.value_or(Sharding()), rank, n_);
          if (!t.ok())
            return absl::InvalidArgumentError(absl::StrCat("parameter '", i.name, "' ", i.shape.ToString(),
                                                           ": ", t.status().message()));
          sh_[i.id] = *t;
          pinned_[i.id] = true;
          source_[i.id] = i.sharding ? "annotated" : "default";
          break;
        }
        case Opcode::kBroadcastInDim:
          sh_[i.id] = BroadcastOut(i, sh_[i.operands[0]->id], n_);
          via_[i.id] = "broadcast_in_dim";
          break;
        case Opcode::kTranspose:
          sh_[i.id] = TransposeOut(i, sh_[i.operands[0]->id], n_);
          via_[i.id] = "transpose";
          break;
        case Opcode::kReshape: {
          auto t = ReshapeOut(i, sh_[i.operands[0]->id], n_);
          sh_[i.id] = t ? *t : Tiles::Replicated(rank, n_);
          via_[i.id] = "reshape";
          break;
        }
        case Opcode::kDotGeneral:
          sh_[i.id] = PlanDot(i, sh_[i.operands[0]->id], sh_[i.operands[1]->id], n_).out;
          via_[i.id] = "dot_general";
          break;
        case Opcode::kReduce:
          sh_[i.id] = PlanReduce(i, sh_[i.operands[0]->id], n_).out;
          via_[i.id] = "reduce";
          break;
        case Opcode::kConvolution: {
          auto p = PlanConv(i, sh_[i.operands[0]->id], n_);
          sh_[i.id] = p ? p->out : Tiles::Replicated(rank, n_);
          via_[i.id] = "convolution";
          break;
        }
        case Opcode::kReduceWindow: {
          const Tiles& t = sh_[i.operands[0]->id];
          sh_[i.id] = WindowKeepsSplit(i, t) ? t : Tiles::Replicated(rank, n_);
          via_[i.id] = "reduce_window";
          break;
        }
        case Opcode::kPad: {
          const Tiles& t = sh_[i.operands[0]->id];
          sh_[i.id] = PadKeepsSplit(i, t) ? t : Tiles::Replicated(rank, n_);
          via_[i.id] = "pad";
          break;
        }
        case Opcode::kSlice:
        case Opcode::kConcatenate:
        case Opcode::kDynamicSlice:
        case Opcode::kDynamicUpdateSlice:
          sh_[i.id] = SliceLayout(i, sh_);
          via_[i.id] = OpcodeName(i.op);
          break;
        case Opcode::kGather: {
          auto p = PlanGather(i, sh_[i.operands[0]->id], sh_[i.operands[1]->id], n_);
          sh_[i.id] = p ? p->out : Tiles::Replicated(rank, n_);
          via_[i.id] = "gather";
          break;
        }
        case Opcode::kOptimizationBarrier:  // the value passes through as it is laid out
          sh_[i.id] = sh_[i.operands[0]->id];
          via_[i.id] = "optimization_barrier";
          break;
        case Opcode::kAllReduce:
        case Opcode::kAllGather:
        case Opcode::kReduceScatter:
        case Opcode::kAllToAll:
        case Opcode::kCollectivePermute:
        case Opcode::kCollectiveBroadcast:
        case Opcode::kPartitionId:
          return absl::InvalidArgumentError(absl::StrCat(
              OpcodeName(i.op), " in a global program: collectives are inserted by the partitioner"));
        default:
          if (IsElementwise(i.op)) {
            const Tiles* best = nullptr;
            for (const Instruction* o : i.operands) {
              if (o->shape.rank() != rank) continue;
              const Tiles& t = sh_[o->id];
              if (!best || t.DataTiles() > best->DataTiles()) best = &t;
            }
            sh_[i.id] = best ? *best : Tiles::Replicated(rank, n_);
            via_[i.id] = OpcodeName(i.op);
          } else {
            sh_[i.id] = Tiles::Replicated(rank, n_);  // constant, iota, dynamic_slice
          }
      }
    }
    return absl::OkStatus();
  }

  // Lets values that are cheap to produce split (broadcasts, iotas, constants,
  // and elementwise ops on them) take the split of the elementwise op using
  // them, so they are made already local instead of whole then sliced. A
  // cheap value moves only when every user already has that split (or is
  // this one): a broadcast CSE shares between a split and a whole update
  // (AdamW's per-shape constants) would otherwise pull the whole one's chain
  // into the split, and the next step would gather it back. A contraction
  // made whole (a weight gradient summed over a split batch) moves whatever
  // its other users: it then combines its partial sums straight into the
  // split (a reduce_scatter), and those users work on the split value, which
  // only makes them cheaper.
  void Backward() {
    const auto& instrs = g_.instructions();
    std::vector<std::vector<const Instruction*>> users(instrs.size());
    for (const auto& i : instrs)
      for (const Instruction* o : i->operands) users[o->id].push_back(i.get());
    std::vector<bool> is_output(instrs.size(), false);
    for (const Instruction* o : g_.outputs()) is_output[o->id] = true;
    auto users_agree = [&](const Instruction& o, const Instruction& i) {
      if (is_output[o.id]) return false;
      for (const Instruction* u : users[o.id])
        if (u != &i && !(IsElementwise(u->op) && sh_[u->id].SameLayout(sh_[i.id]))) return false;
      return true;
    };
    for (auto it = instrs.rbegin(); it != instrs.rend(); ++it) {
      const Instruction& i = **it;
      if (!IsElementwise(i.op) || sh_[i.id].DataTiles() == 1) continue;
      for (const Instruction* o : i.operands) {
        if (o->op == Opcode::kParameter || pinned_[o->id]) continue;
        if (o->shape.dims != i.shape.dims || sh_[o->id].DataTiles() != 1) continue;
        const bool cheap = o->op == Opcode::kBroadcastInDim || o->op == Opcode::kIota ||
                           o->op == Opcode::kConstant || IsElementwise(o->op);
        const bool contraction = o->op == Opcode::kDotGeneral || o->op == Opcode::kReduce ||
                                 o->op == Opcode::kConvolution || o->op == Opcode::kScatter;
        if (!(cheap && users_agree(*o, i)) && !contraction) continue;
        sh_[o->id] = sh_[i.id];
        pinned_[o->id] = true;
        via_[o->id] = absl::StrCat(OpcodeName(i.op), " (backward)");
      }
    }
  }

  Instruction* Pid() {
    if (!pid_) pid_ = result_.local->PartitionId();
    return pid_;
  }

  // This device's start index along `dim` of a `to`-tiled value, as a scalar.
  // Programs ask for the same offsets many times: each table is made once.
  Instruction* StartIndex(const Tiles& to, int dim, int64_t shard_size) {
    if (to.dims[dim] == 1) return result_.local->ScalarConstant(DType::kI32, 0);
    std::vector<int32_t> table(n_);
    for (int d = 0; d < n_; ++d) table[d] = static_cast<int32_t>(to.Coords(d)[dim] * shard_size);
    Instruction*& start = starts_[table];
    if (start) return start;
    Module& m = *result_.local;
    Instruction* t = m.Constant(Literal::FromI32({n_}, table));
    Instruction* one = m.DynamicSlice(t, {Pid()}, {1});
    start = m.Reshape(one, {});
    return start;
  }

  absl::StatusOr<Shape> LocalShape(const Shape& global, const Tiles& t, const Instruction& at) {
    Shape s = global;
    for (int d = 0; d < global.rank(); ++d) {
      if (global.dims[d] % t.dims[d] != 0)
        return absl::UnimplementedError(absl::StrCat(
            OpcodeName(at.op), at.loc.known() ? absl::StrCat(" at ", at.loc.file, ":", at.loc.line) : "",
            ": dimension ", d, " of ", global.ToString(), " does not divide evenly into ", t.dims[d],
            " shards (uneven sharding needs padding, not supported yet)"));
      s.dims[d] = global.dims[d] / t.dims[d];
    }
    return s;
  }

  // Moves a local value from one layout to another: splits both layouts share
  // (same tiles, every device at the same coordinate) stay; the other split
  // dims are gathered; then each device slices out what `to` splits further.
  absl::StatusOr<Instruction*> Reshard(Instruction* v, const Instruction& global, const Tiles& from,
                                       const Tiles& to) {
    if (from.SameLayout(to)) return v;
    Module& m = *result_.local;
    // A broadcast is made again in the new layout from its (smaller) operand,
    // resharded as that layout needs: a bias split like its FSDP parameter
    // is gathered as a bias, not as the activation-sized broadcast.
    if (global.op == Opcode::kBroadcastInDim) {
      const Instruction& o = *global.operands[0];
      auto operand = Reshard(lv_[o.id], o, sh_[o.id], BroadcastOperandFor(global, to, n_));
      if (!operand.ok()) return operand.status();
      auto local = LocalShape(global.shape, to, global);
      if (!local.ok()) return local.status();
      return m.BroadcastInDim(*operand, local->dims, global.dims, global.loc);
    }
    std::vector<int64_t> kept;
    for (int d = 0; d < from.rank(); ++d) {
      if (from.dims[d] == 1 || to.dims[d] != from.dims[d]) continue;
      bool same = true;
      for (int64_t dev = 0; dev < n_ && same; ++dev) same = from.Coords(dev)[d] == to.Coords(dev)[d];
      if (same) kept.push_back(d);
    }
    if (Instruction* moved = MoveSplit(v, global, from, to, kept)) return moved;
    Tiles cur = from;
    for (int d = 0; d < from.rank(); ++d) {
      if (from.dims[d] == 1 || std::find(kept.begin(), kept.end(), d) != kept.end()) continue;
      if (global.shape.dims[d] % from.dims[d] != 0)
        return absl::UnimplementedError(absl::StrCat("uneven dimension ", d, " of ", global.shape.ToString()));
      v = m.AllGather(v, d, GroupsVarying(cur, {d}), global.loc);
      ++result_.collectives;
      cur = cur.Unsplit({d});
    }
    // Involuntary: made whole only because the op reading it has no split
    // rule, or on the way between two split layouts. A plan that wants an
    // operand whole (FSDP's weight gathers) is not recorded.
    if (from.DataTiles() > 1 && cur.DataTiles() == 1 && (emitting_whole_ || to.DataTiles() > 1)) {
      result_.rematerializations.push_back(
          {global.id, OpcodeName(emitting_ ? emitting_->op : global.op), global.shape.bytes(), global.loc});
    }
    if (cur.SameLayout(to)) return v;
    auto local = LocalShape(global.shape, to, global);
    if (!local.ok()) return local.status();
    std::vector<Instruction*> starts;
    for (int d = 0; d < to.rank(); ++d) {
      const bool kept_here = std::find(kept.begin(), kept.end(), d) != kept.end();
      starts.push_back(kept_here ? m.ScalarConstant(DType::kI32, 0) : StartIndex(to, d, local->dims[d]));
    }
    return m.DynamicSlice(v, starts, local->dims, global.loc);
  }

  // Reshards that move data without gathering it whole, or null:
  //  - the same tiles on other devices: a collective_permute sends each
  //    device the tile it needs (a device that has it sends to itself);
  //  - one split moving from dim a to dim b, each device keeping its block
  //    index: an all_to_all among the devices that differ on a.
  Instruction* MoveSplit(Instruction* v, const Instruction& global, const Tiles& from, const Tiles& to,
                         const std::vector<int64_t>& kept) {
    Module& m = *result_.local;
    auto data = [](const Tiles& t, int64_t dev) {
      const auto& c = t.Coords(dev);
      return std::vector<int64_t>(c.begin(), c.end() - 1);
    };
    if (std::equal(from.dims.begin(), from.dims.end() - 1, to.dims.begin()) && from.DataTiles() > 1) {
      std::map<std::vector<int64_t>, std::vector<int64_t>> holders;  // tile -> devices holding it, unused as sources
      for (int64_t dev = 0; dev < n_; ++dev) holders[data(from, dev)].push_back(dev);
      std::vector<std::pair<int64_t, int64_t>> pairs;
      std::vector<int64_t> unserved;
      for (int64_t dev = 0; dev < n_; ++dev) {  // devices that hold their tile keep it
        auto& h = holders[data(to, dev)];
        auto self = std::find(h.begin(), h.end(), dev);
        if (self != h.end()) {
          pairs.push_back({dev, dev});
          h.erase(self);
        } else {
          unserved.push_back(dev);
        }
      }
      for (int64_t dev : unserved) {
        auto& h = holders[data(to, dev)];
        if (h.empty()) return nullptr;
        pairs.push_back({h.front(), dev});
        h.erase(h.begin());
      }
      ++result_.collectives;
      return m.CollectivePermute(v, std::move(pairs), global.loc);
    }
    int a = -1, b = -1;
    for (int d = 0; d < from.rank(); ++d) {
      if (std::find(kept.begin(), kept.end(), d) != kept.end()) continue;
      if (from.dims[d] > 1 && to.dims[d] == 1 && a < 0) a = d;
      else if (to.dims[d] > 1 && from.dims[d] == 1 && b < 0) b = d;
      else if (from.dims[d] > 1 || to.dims[d] > 1) return nullptr;
    }
    if (a < 0 || b < 0 || from.dims[a] != to.dims[b] || global.shape.dims[b] % to.dims[b] != 0) return nullptr;
    for (int64_t dev = 0; dev < n_; ++dev)
      if (to.Coords(dev)[b] != from.Coords(dev)[a]) return nullptr;
    ++result_.collectives;
    return m.AllToAll(v, b, a, from.dims[a], GroupsVarying(from, {a}), global.loc);
  }

  absl::StatusOr<Instruction*> Operand(const Instruction& i, int k, const Tiles& want) {
    const Instruction* o = i.operands[k];
    return Reshard(lv_[o->id], *o, sh_[o->id], want);
  }

  // Combines the partial results each group of devices holds, ending in
  // `want`. When `want` splits one dim that the combined value (`natural`)
  // holds whole, and each group's members fall evenly on that dim's tiles, a
  // reduce_scatter hands each device its block (then an all-reduce adds up
  // the members that share a block): the gradient reduce-scatter of FSDP.
  // Otherwise an all-reduce, then the reshard.
  absl::Status CombinePartials(Instruction** r, const Instruction& i, ReduceKind kind,
                               const std::vector<std::vector<int64_t>>& groups, const Tiles& natural,
                               const Tiles& want) {
    Module& m = *result_.local;
    int dim = -1;
    for (int d = 0; d < want.rank(); ++d) {
      if (natural.dims[d] == want.dims[d]) {
        for (int64_t dev = 0; dev < n_ && dim != -2; ++dev)
          if (want.dims[d] > 1 && natural.Coords(dev)[d] != want.Coords(dev)[d]) dim = -2;
      } else if (natural.dims[d] == 1 && dim == -1) {
        dim = d;
      } else {
        dim = -2;
      }
      if (dim == -2) break;
    }
    std::vector<std::vector<int64_t>> scatter_groups, sum_groups;
    if (dim >= 0) {
      const int64_t tiles = want.dims[dim];
      for (const auto& g : groups) {
        std::vector<std::vector<int64_t>> by_block(tiles);
        for (int64_t dev : g) by_block[want.Coords(dev)[dim]].push_back(dev);
        const size_t per_block = g.size() / tiles;
        for (const auto& b : by_block)
          if (b.size() != per_block || per_block == 0) dim = -2;
        if (dim < 0) break;
        for (size_t j = 0; j < per_block; ++j) {
          scatter_groups.emplace_back();
          for (const auto& b : by_block) scatter_groups.back().push_back(b[j]);
        }
        if (per_block > 1)
          for (const auto& b : by_block) sum_groups.push_back(b);
      }
    }
    if (dim < 0) {
      *r = m.AllReduce(*r, kind, groups, i.loc);
      ++result_.collectives;
      return Fix(r, i, natural, want);
    }
    *r = m.ReduceScatter(*r, dim, kind, scatter_groups, i.loc);
    ++result_.collectives;
    if (!sum_groups.empty()) {
      *r = m.AllReduce(*r, kind, sum_groups, i.loc);
      ++result_.collectives;
    }
    return absl::OkStatus();
  }

  // The first want.size() operands of `i`, each in the layout wanted of it.
  absl::StatusOr<std::vector<Instruction*>> Operands(const Instruction& i, const std::vector<Tiles>& want) {
    std::vector<Instruction*> ops;
    for (size_t k = 0; k < want.size(); ++k) {
      auto v = Operand(i, static_cast<int>(k), want[k]);
      if (!v.ok()) return v.status();
      ops.push_back(*v);
    }
    return ops;
  }

  absl::Status Emit(const Instruction& i) {
    emitting_ = &i;
    Module& m = *result_.local;
    const Tiles& out = sh_[i.id];
    auto local_shape = LocalShape(i.shape, out, i);
    if (!local_shape.ok()) return local_shape.status();
    Instruction* r = nullptr;
    switch (i.op) {
      case Opcode::kParameter:
        r = m.Parameter(*local_shape, i.name, i.loc);
        r->sharding = out.ToSharding();
        break;
      case Opcode::kConstant: {
        const Literal& lit = *i.literal;
        bool splat = true;
        for (int64_t k = 1; k < lit.elements() && splat; ++k) splat = lit.GetDouble(k) == lit.GetDouble(0);
        if (out.DataTiles() == 1) {
          r = m.Constant(lit, i.loc);
        } else if (splat) {
          Literal l(*local_shape);
          for (int64_t k = 0; k < l.elements(); ++k) l.SetDouble(k, lit.GetDouble(0));
          r = m.Constant(std::move(l), i.loc);
        } else {
          auto s = Reshard(m.Constant(lit, i.loc), i, Tiles::Replicated(i.shape.rank(), n_), out);
          if (!s.ok()) return s.status();
          r = *s;
        }
        break;
      }
      case Opcode::kIota:
        if (out.dims[i.dims[0]] == 1) {
          r = m.Iota(*local_shape, i.dims[0], i.loc);
        } else {
          auto s = Reshard(m.Iota(i.shape, i.dims[0], i.loc), i, Tiles::Replicated(i.shape.rank(), n_), out);
          if (!s.ok()) return s.status();
          r = *s;
        }
        break;
      case Opcode::kBroadcastInDim: {
        auto a = Operand(i, 0, BroadcastOperandFor(i, out, n_));
        if (!a.ok()) return a.status();
        r = m.BroadcastInDim(*a, local_shape->dims, i.dims, i.loc);
        break;
      }
      case Opcode::kTranspose: {
        Tiles in = sh_[i.operands[0]->id];
        r = m.Transpose(lv_[i.operands[0]->id], i.dims, i.loc);
        if (absl::Status s = Fix(&r, i, TransposeOut(i, in, n_), out); !s.ok()) return s;
        break;
      }
      case Opcode::kReshape: {
        Tiles in = sh_[i.operands[0]->id];
        auto mapped = ReshapeOut(i, in, n_);
        if (mapped) {
          r = m.Reshape(lv_[i.operands[0]->id], local_shape->dims, i.loc);
          if (absl::Status s = Fix(&r, i, *mapped, out); !s.ok()) return s;
        } else {
          auto a = Operand(i, 0, Tiles::Replicated(in.rank(), n_));
          if (!a.ok()) return a.status();
          r = m.Reshape(*a, i.shape.dims, i.loc);
          if (absl::Status s = Fix(&r, i, Tiles::Replicated(i.shape.rank(), n_), out); !s.ok()) return s;
        }
        break;
      }
      case Opcode::kDotGeneral: {
        DotPlan p = PlanDot(i, sh_[i.operands[0]->id], sh_[i.operands[1]->id], n_);
        auto ops = Operands(i, {p.lhs, p.rhs});
        if (!ops.ok()) return ops.status();
        r = m.DotGeneral((*ops)[0], (*ops)[1], i.dot, i.loc, i.shape.dtype);
        absl::Status s = p.partial ? CombinePartials(&r, i, ReduceKind::kSum, p.groups, p.out, out)
                                   : Fix(&r, i, p.out, out);
        if (!s.ok()) return s;
        break;
      }
      case Opcode::kOptimizationBarrier: {
        // Each device holds its own shard; the values it waits for are not
        // read, so they are taken in whatever layout they have.
        std::vector<Instruction*> after;
        for (size_t k = 1; k < i.operands.size(); ++k) after.push_back(lv_[i.operands[k]->id]);
        r = m.OptimizationBarrier(lv_[i.operands[0]->id], std::move(after), i.loc);
        break;
      }
      case Opcode::kReduce: {
        ReducePlan p = PlanReduce(i, sh_[i.operands[0]->id], n_);
        Instruction* init = lv_[i.operands[1]->id];
        // Partial sums and products start from the identity, so that the
        // all-reduce counts the init once, not once per shard; it is combined
        // after. Max and min may see it on every shard.
        const bool once = !p.groups.empty() && (i.reduce == ReduceKind::kSum || i.reduce == ReduceKind::kProd);
        const double identity = i.reduce == ReduceKind::kSum ? 0 : 1;
        const bool init_is_identity = i.operands[1]->op == Opcode::kConstant &&
                                      i.operands[1]->literal->GetDouble(0) == identity;
        r = m.Reduce(lv_[i.operands[0]->id], once ? m.ScalarConstant(init->shape.dtype, identity, i.loc) : init,
                     i.dims, i.reduce, i.loc);
        absl::Status s = !p.groups.empty() ? CombinePartials(&r, i, i.reduce, p.groups, p.out, out)
                                           : Fix(&r, i, p.out, out);
        if (!s.ok()) return s;
        if (once && !init_is_identity) {
          Instruction* b = m.BroadcastInDim(init, r->shape.dims, {}, i.loc);
          r = m.Binary(i.reduce == ReduceKind::kSum ? Opcode::kAdd : Opcode::kMultiply, r, b, i.loc);
        }
        break;
      }
      case Opcode::kGather: {
        auto p = PlanGather(i, sh_[i.operands[0]->id], sh_[i.operands[1]->id], n_);
        if (!p) {
          if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
          break;
        }
        auto ops = Operands(i, {p->operand, p->indices});
        if (!ops.ok()) return ops.status();
        GatherDims g = i.gather;
        for (int d = 0; d < p->operand.rank(); ++d)  // split dims are taken whole: the local columns
          if (p->operand.dims[d] > 1) g.slice_sizes[d] = (*ops)[0]->shape.dims[d];
        r = m.Gather((*ops)[0], (*ops)[1], std::move(g), i.loc);
        if (absl::Status s = Fix(&r, i, p->out, out); !s.ok()) return s;
        break;
      }
      case Opcode::kScatter: {
        auto p = PlanScatter(i, sh_[i.operands[1]->id], sh_[i.operands[2]->id], n_);
        if (!p) {
          if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
          break;
        }
        const int rank = i.shape.rank();
        const bool sum = i.reduce == ReduceKind::kSum;
        const bool zero_base = IsZero(i.operands[0]);
        auto ops = Operands(i, {Tiles::Replicated(rank, n_), p->indices, p->updates});
        if (!ops.ok()) return ops.status();
        Instruction* into = (*ops)[0];
        if (sum && !zero_base)
          into = m.BroadcastInDim(m.ScalarConstant(i.shape.dtype, 0, i.loc), i.shape.dims, {}, i.loc);
        r = m.Scatter(into, (*ops)[1], (*ops)[2], i.scatter, i.reduce, i.loc);
        if (absl::Status s = CombinePartials(&r, i, i.reduce, p->groups, Tiles::Replicated(rank, n_), out); !s.ok())
          return s;
        if (sum && !zero_base) {
          auto base = Operand(i, 0, out);
          if (!base.ok()) return base.status();
          r = m.Binary(Opcode::kAdd, r, *base, i.loc);
        }
        break;
      }
      case Opcode::kConvolution: {
        auto p = PlanConv(i, sh_[i.operands[0]->id], n_);
        if (!p) {
          if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
          break;
        }
        auto ops = Operands(i, {p->lhs, p->rhs});
        if (!ops.ok()) return ops.status();
        r = m.Convolution((*ops)[0], (*ops)[1], i.conv, i.loc, i.shape.dtype);
        absl::Status s = !p->groups.empty() ? CombinePartials(&r, i, ReduceKind::kSum, p->groups, p->out, out)
                                            : Fix(&r, i, p->out, out);
        if (!s.ok()) return s;
        break;
      }
      case Opcode::kReduceWindow: {
        const Tiles& t = sh_[i.operands[0]->id];
        if (!WindowKeepsSplit(i, t)) {
          if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
          break;
        }
        r = m.ReduceWindow(lv_[i.operands[0]->id], lv_[i.operands[1]->id], i.window, i.reduce, i.loc);
        if (absl::Status s = Fix(&r, i, t, out); !s.ok()) return s;
        break;
      }
      case Opcode::kPad: {
        const Tiles& t = sh_[i.operands[0]->id];
        if (!PadKeepsSplit(i, t)) {
          if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
          break;
        }
        auto v = Operand(i, 1, Tiles::Replicated(0, n_));
        if (!v.ok()) return v.status();
        r = m.Pad(lv_[i.operands[0]->id], *v, i.pad, i.loc);
        if (absl::Status s = Fix(&r, i, t, out); !s.ok()) return s;
        break;
      }
      case Opcode::kSlice:
      case Opcode::kConcatenate:
      case Opcode::kDynamicSlice:
      case Opcode::kDynamicUpdateSlice: {
        // Computed in SliceLayout: the array operands taken in it, scalar
        // start indices whole; a split dim is whole in the window, so its
        // local window is the local dim (and starts at 0).
        const Tiles layout = SliceLayout(i, sh_);
        auto e = std::make_unique<Instruction>(i);
        e->sharding.reset();
        for (size_t k = 0; k < i.operands.size(); ++k) {
          const int rank = i.operands[k]->shape.rank();
          auto v = Operand(i, static_cast<int>(k), rank == 0 ? Tiles::Replicated(0, n_) : layout);
          if (!v.ok()) return v.status();
          e->operands[k] = *v;
        }
        auto local = LocalShape(i.shape, layout, i);
        if (!local.ok()) return local.status();
        e->shape = *local;
        for (int d = 0; d < layout.rank(); ++d) {
          if (layout.dims[d] == 1) continue;
          if (i.op == Opcode::kSlice) e->slice.limit[d] = local->dims[d];
          if (i.op == Opcode::kDynamicSlice) e->dims[d] = local->dims[d];
        }
        r = m.Add(std::move(e));
        if (absl::Status s = Fix(&r, i, layout, out); !s.ok()) return s;
        break;
      }
      default: {
        if (!IsElementwise(i.op)) {
          if (absl::Status s = EmitWhole(i, &r); !s.ok()) return s;
          break;
        }
        std::vector<Instruction*> ops;
        for (size_t k = 0; k < i.operands.size(); ++k) {
          const Instruction* o = i.operands[k];
          if (o->shape.rank() != i.shape.rank()) {  // scalar predicate of select
            ops.push_back(lv_[o->id]);
            continue;
          }
          Tiles want = out;
          auto v = Operand(i, static_cast<int>(k), want);
          if (!v.ok()) return v.status();
          ops.push_back(*v);
        }
        auto e = std::make_unique<Instruction>();
        e->op = i.op;
        e->shape = *local_shape;
        e->operands = ops;
        e->compare = i.compare;
        e->loc = i.loc;
        e->scope = i.scope;
        r = m.Add(std::move(e));
      }
    }
    if (r->scope.empty()) r->scope = i.scope;
    lv_[i.id] = r;
    return absl::OkStatus();
  }

  // No split rule for this op (or for how its operands are split): every
  // device computes it whole on whole operands (gathered if they were split,
  // and recorded as such), then takes its share of the result.
  absl::Status EmitWhole(const Instruction& i, Instruction** r) {
    std::vector<Instruction*> ops;
    emitting_whole_ = true;
    for (size_t k = 0; k < i.operands.size(); ++k) {
      auto v = Operand(i, static_cast<int>(k), Tiles::Replicated(i.operands[k]->shape.rank(), n_));
      if (!v.ok()) return v.status();
      ops.push_back(*v);
    }
    emitting_whole_ = false;
    auto e = std::make_unique<Instruction>(i);
    e->operands = ops;
    e->sharding.reset();
    *r = result_.local->Add(std::move(e));
    return Fix(r, i, Tiles::Replicated(i.shape.rank(), n_), sh_[i.id]);
  }

  // When an op's natural result layout differs from the one assigned to it.
  absl::Status Fix(Instruction** r, const Instruction& i, const Tiles& natural, const Tiles& want) {
    auto v = Reshard(*r, i, natural, want);
    if (!v.ok()) return v.status();
    *r = *v;
    return absl::OkStatus();
  }

  const Module& g_;
  int n_;
  std::vector<Tiles> sh_;
  std::vector<bool> pinned_;
  std::vector<std::string> source_, via_;
  std::vector<Instruction*> lv_;
  Instruction* pid_ = nullptr;
  const Instruction* emitting_ = nullptr;  // the global op being emitted
  bool emitting_whole_ = false;            // its operands are made whole for want of a split rule
  std::map<std::vector<int32_t>, Instruction*> starts_;  // StartIndex's tables by content
  SpmdResult result_;
};

}  // namespace

absl::StatusOr<SpmdResult> SpmdPartition(const Module& global, int num_partitions) {
  if (num_partitions < 1) return absl::InvalidArgumentError("num_partitions must be >= 1");
  if (absl::Status s = Verify(global); !s.ok()) return s;
  return Partitioner(global, num_partitions).Run();
}

}  // namespace shardscope::compiler
