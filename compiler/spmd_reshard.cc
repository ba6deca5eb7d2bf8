// Moving a local value between layouts (collective_permute, all_to_all,
// all_gather, slicing; padding of uneven splits) and combining partial
// results (all_reduce, reduce_scatter); see spmd_partitioner.h.
#include "compiler/spmd_partitioner.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace shardscope::compiler::spmd_internal {

Instruction* Partitioner::Moves(Instruction* c, const Instruction& value) {
  ++result_.collectives;
  result_.moved_values.push_back({c->id, value.id});
  return c;
}

Instruction* Partitioner::Pid() {
  if (!pid_) pid_ = result_.local->PartitionId();
  return pid_;
}

Instruction* Partitioner::StartIndex(const Tiles& to, int dim, int64_t shard_size) {
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

Shape Partitioner::LocalShape(const Shape& global, const Tiles& t) {
  Shape s = global;
  for (int d = 0; d < global.rank(); ++d) s.dims[d] = (global.dims[d] + t.dims[d] - 1) / t.dims[d];
  return s;
}

bool Partitioner::Uneven(const Shape& global, const Tiles& t, int64_t d) {
  return t.dims[d] > 1 && global.dims[d] % t.dims[d] != 0;
}

Instruction* Partitioner::MaskPadding(Instruction* v, const Shape& global, const Tiles& t,
                                      const std::vector<int64_t>& dims, double fill, const SourceLoc& loc) {
  Module& m = *result_.local;
  for (int64_t d : dims) {
    if (!Uneven(global, t, d)) continue;
    const std::vector<int64_t>& ld = v->shape.dims;
    Instruction* index = m.Binary(Opcode::kAdd, m.Iota(Shape(DType::kI32, ld), d, loc),
                                  m.BroadcastInDim(StartIndex(t, static_cast<int>(d), ld[d]), ld, {}, loc), loc);
    Instruction* size = m.BroadcastInDim(m.ScalarConstant(DType::kI32, global.dims[d], loc), ld, {}, loc);
    Instruction* fills = m.BroadcastInDim(m.ScalarConstant(v->shape.dtype, fill, loc), ld, {}, loc);
    v = m.Select(m.Compare(index, size, CompareDirection::kLT, loc), v, fills, loc);
  }
  return v;
}

Instruction* Partitioner::Resize(Instruction* v, const Instruction& global, const Tiles& to,
                                 const std::vector<int64_t>& kept) {
  Module& m = *result_.local;
  const int rank = global.shape.rank();
  SliceDims cut{std::vector<int64_t>(rank, 0), v->shape.dims, std::vector<int64_t>(rank, 1)};
  PadDims grow{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  bool cuts = false, grows = false;
  for (int d = 0; d < rank; ++d) {
    if (std::find(kept.begin(), kept.end(), d) != kept.end()) continue;
    const int64_t size = global.shape.dims[d], tiles = to.dims[d];
    const int64_t want = (size + tiles - 1) / tiles * tiles;
    if (v->shape.dims[d] > want) {
      cut.limit[d] = want;
      cuts = true;
    } else if (v->shape.dims[d] < want) {
      grow.high[d] = want - v->shape.dims[d];
      grows = true;
    }
  }
  if (cuts) v = m.Slice(v, cut, global.loc);
  if (grows) v = m.Pad(v, m.ScalarConstant(v->shape.dtype, 0, global.loc), grow, global.loc);
  return v;
}

absl::StatusOr<Instruction*> Partitioner::Reshard(Instruction* v, const Instruction& global, const Tiles& from,
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
    return m.BroadcastInDim(*operand, LocalShape(global.shape, to).dims, global.dims, global.loc);
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
    v = Moves(m.AllGather(v, d, GroupsVarying(cur, {d}), global.loc), global);
    cur = cur.Unsplit({d});
  }
  // Involuntary: made whole only because the op reading it has no split
  // rule, or on the way between two split layouts. A plan that wants an
  // operand whole (FSDP's weight gathers) is not recorded.
  if (from.DataTiles() > 1 && cur.DataTiles() == 1 && (emitting_whole_ || to.DataTiles() > 1)) {
    result_.rematerializations.push_back(
        {global.id, OpcodeName(emitting_ ? emitting_->op : global.op), global.shape.bytes(), global.loc});
  }
  v = Resize(v, global, to, kept);
  if (cur.SameLayout(to)) return v;
  const Shape local = LocalShape(global.shape, to);
  std::vector<Instruction*> starts;
  for (int d = 0; d < to.rank(); ++d) {
    const bool kept_here = std::find(kept.begin(), kept.end(), d) != kept.end();
    starts.push_back(kept_here ? m.ScalarConstant(DType::kI32, 0) : StartIndex(to, d, local.dims[d]));
  }
  return m.DynamicSlice(v, starts, local.dims, global.loc);
}

Instruction* Partitioner::MoveSplit(Instruction* v, const Instruction& global, const Tiles& from, const Tiles& to,
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
    return Moves(m.CollectivePermute(v, std::move(pairs), global.loc), global);
  }
  int a = -1, b = -1;
  for (int d = 0; d < from.rank(); ++d) {
    if (std::find(kept.begin(), kept.end(), d) != kept.end()) continue;
    if (from.dims[d] > 1 && to.dims[d] == 1 && a < 0) a = d;
    else if (to.dims[d] > 1 && from.dims[d] == 1 && b < 0) b = d;
    else if (from.dims[d] > 1 || to.dims[d] > 1) return nullptr;
  }
  if (a < 0 || b < 0 || from.dims[a] != to.dims[b] || Uneven(global.shape, from, a) || Uneven(global.shape, to, b))
    return nullptr;
  for (int64_t dev = 0; dev < n_; ++dev)
    if (to.Coords(dev)[b] != from.Coords(dev)[a]) return nullptr;
  return Moves(m.AllToAll(v, b, a, from.dims[a], GroupsVarying(from, {a}), global.loc), global);
}

absl::StatusOr<Instruction*> Partitioner::Operand(const Instruction& i, int k, const Tiles& want) {
  const Instruction* o = i.operands[k];
  return Reshard(lv_[o->id], *o, sh_[o->id], want);
}

absl::Status Partitioner::CombinePartials(Instruction** r, const Instruction& i, ReduceKind kind,
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
    *r = Moves(m.AllReduce(*r, kind, groups, i.loc), i);
    return Fix(r, i, natural, want);
  }
  if (Uneven(i.shape, want, dim)) {  // each member's block padded alike (the padding holds partial sums of nothing)
    std::vector<int64_t> kept;
    for (int d = 0; d < want.rank(); ++d)
      if (d != dim) kept.push_back(d);
    *r = Resize(*r, i, want, kept);
  }
  *r = Moves(m.ReduceScatter(*r, dim, kind, scatter_groups, i.loc), i);
  if (!sum_groups.empty()) *r = Moves(m.AllReduce(*r, kind, sum_groups, i.loc), i);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Instruction*>> Partitioner::Operands(const Instruction& i, const std::vector<Tiles>& want) {
  std::vector<Instruction*> ops;
  for (size_t k = 0; k < want.size(); ++k) {
    auto v = Operand(i, static_cast<int>(k), want[k]);
    if (!v.ok()) return v.status();
    ops.push_back(*v);
  }
  return ops;
}

absl::Status Partitioner::Fix(Instruction** r, const Instruction& i, const Tiles& natural, const Tiles& want) {
  auto v = Reshard(*r, i, natural, want);
  if (!v.ok()) return v.status();
  *r = *v;
  return absl::OkStatus();
}

}  // namespace shardscope::compiler::spmd_internal
