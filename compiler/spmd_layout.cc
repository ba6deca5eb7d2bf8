#include "compiler/spmd_layout.h"

#include <algorithm>
#include <map>

namespace shardscope::compiler::spmd_layout {

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

// The plan with one operand driving: its splits stay; the other operand is
// split alike on batch and contracting dims and whole on its free dims.
DotPlan PlanDotDriven(const Instruction& i, const Tiles& tl, const Tiles& tr, int n, bool lhs_drives) {
  const DotDims& dd = i.dot;
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

namespace {

int64_t LocalBytes(const Shape& s, const Tiles& t) {
  int64_t elements = 1;
  for (int d = 0; d < s.rank(); ++d) elements *= (s.dims[d] + t.dims[d] - 1) / t.dims[d];
  return elements * DTypeBytes(s.dtype);
}

// What a plan costs one chip, in bytes moved: the operands it reshards (each
// chip receives at most its new share), the partial sums it adds up (an
// all-reduce moves about twice the result), and its share of the arithmetic
// at kFlopsPerByte (about the ridge point of the cpu profile) — so a plan that
// keeps more work split wins unless it moves much more data.
double PlanCost(const Instruction& i, const DotPlan& p, const Tiles& tl, const Tiles& tr) {
  constexpr double kFlopsPerByte = 8;
  const Shape& ls = i.operands[0]->shape;
  const Shape& rs = i.operands[1]->shape;
  double moved = 0;
  if (!p.lhs.SameLayout(tl)) moved += static_cast<double>(LocalBytes(ls, p.lhs));
  if (!p.rhs.SameLayout(tr)) moved += static_cast<double>(LocalBytes(rs, p.rhs));
  if (p.partial) moved += 2.0 * static_cast<double>(LocalBytes(i.shape, p.out));
  // Local FLOPs: 2 x every local dim of the result x the local contracting sizes.
  double flops = 2 * static_cast<double>(LocalBytes(i.shape, p.out)) / DTypeBytes(i.shape.dtype);
  for (int64_t c : i.dot.lhs_contracting)
    flops *= static_cast<double>((ls.dims[c] + p.lhs.dims[c] - 1) / p.lhs.dims[c]);
  return moved + flops / kFlopsPerByte;
}

}  // namespace

DotPlan PlanDot(const Instruction& i, const Tiles& tl, const Tiles& tr, int n) {
  if (auto both = PlanDotBothFree(i, tl, tr, n)) return *both;
  // Both operands split: each driving is a plan; the cheaper one wins
  // (FSDP's gradient dy x W keeps dy's batch split and gathers W, rather than
  // letting W's split contracting dim scatter dy and lose the batch split).
  // A third: gather the split contracting dims, then keep both operands'
  // free splits (the row-parallel weight's gradient dy x W under FSDP + TP:
  // W gathered over fsdp as its forward use is, dy's batch split and W's
  // column split both kept, nothing to add up).
  if (tl.DataTiles() > 1 && tr.DataTiles() > 1) {
    std::vector<DotPlan> plans = {PlanDotDriven(i, tl, tr, n, true), PlanDotDriven(i, tl, tr, n, false)};
    auto split_of = [](const Tiles& t, const std::vector<int64_t>& dims) {
      std::vector<int64_t> out;
      for (int64_t d : dims)
        if (t.dims[d] > 1) out.push_back(d);
      return out;
    };
    if (auto gathered = PlanDotBothFree(i, tl.Unsplit(split_of(tl, i.dot.lhs_contracting)),
                                        tr.Unsplit(split_of(tr, i.dot.rhs_contracting)), n))
      plans.push_back(*gathered);
    size_t best = 0;
    double best_cost = PlanCost(i, plans[0], tl, tr);
    for (size_t k = 1; k < plans.size(); ++k) {
      const double c = PlanCost(i, plans[k], tl, tr);
      if (c < best_cost) {
        best = k;
        best_cost = c;
      }
    }
    return plans[best];
  }
  return PlanDotDriven(i, tl, tr, n, tl.DataTiles() >= tr.DataTiles());
}

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
// then stay one contiguous block of that output dim. A dim the tiles do not
// divide keeps its split only where it keeps its size (its padding then stays
// at the end of that dim).
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
        } else if (out[od] > in.dims[k] && in.dims[k] % t.dims[k] == 0) {
          // merged with the dims after k (a split one finds no dim of its own); a padded
          // shard would put its padding between the elements of the merged dim
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

// Dims of `rank` not in `taken`, in order (a gather's batch dims among its
// indices' dims are those not the index vector dim).
std::vector<int64_t> DimsNotIn(int rank, const std::vector<int64_t>& taken) { return FreeDims(rank, taken, {}); }

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

std::optional<GatherPlan> PlanGather(const Instruction& i, const Tiles& to, const Tiles& ti, int n) {
  const GatherDims& g = i.gather;
  const Shape& os = i.operands[0]->shape;
  const int irank = ti.rank(), orank = to.rank(), rrank = i.shape.rank();
  const std::vector<int64_t> batch_in = DimsNotIn(irank, {g.index_vector_dim});
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

std::optional<ScatterPlan> PlanScatter(const Instruction& i, const Tiles& ti, const Tiles& tu, int n) {
  const ScatterDims& s = i.scatter;
  if (s.replace || (i.reduce != ReduceKind::kSum && i.reduce != ReduceKind::kMax && i.reduce != ReduceKind::kMin))
    return std::nullopt;
  const std::vector<int64_t> batch_in = DimsNotIn(ti.rank(), {s.index_vector_dim});
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

}  // namespace shardscope::compiler::spmd_layout
