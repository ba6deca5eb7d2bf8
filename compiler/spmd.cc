#include "compiler/spmd.h"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/spmd_layout.h"

namespace shardscope::compiler {
namespace {

using namespace spmd_layout;  // the layouts and rules of spmd_layout.h

class Partitioner {
 public:
  Partitioner(const Module& g, int n) : g_(g), n_(n) {}

  absl::StatusOr<SpmdResult> Run() {
    size_t count = g_.instructions().size();
    sh_.resize(count);
    pinned_.assign(count, false);
    manual_.assign(count, false);
    constant_.assign(count, false);
    source_.assign(count, "propagated");
    via_.assign(count, "");
    from_.assign(count, -1);
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
      result_.output_shardings.push_back(manual_[o->id] ? Sharding::Manual() : sh_[o->id].ToSharding());
    }
    result_.local->SetOutputs(outs);
    result_.local->output_shardings() = result_.output_shardings;
    for (const Instruction* p : g_.parameters()) {
      const bool own = p->sharding && (p->sharding->kind() == Sharding::Kind::kMaximal ||
                                       p->sharding->kind() == Sharding::Kind::kManual);
      result_.param_shardings.push_back(own ? *p->sharding : sh_[p->id].ToSharding());
    }
    std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, Sharding> as_sharding;
    for (const auto& i : g_.instructions()) {
      // Many ops share a layout, and converting one costs a pass over the devices.
      const Tiles& t = sh_[i->id];
      auto [it, fresh] = as_sharding.try_emplace(std::make_pair(t.dims, t.devices()));
      if (fresh) it->second = t.ToSharding();
      const bool maximal = i->sharding && i->sharding->kind() == Sharding::Kind::kMaximal;
      result_.decisions.push_back({i->id, manual_[i->id] ? Sharding::Manual() : maximal ? *i->sharding : it->second,
                                   source_[i->id], via_[i->id], from_[i->id]});
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
      if (absl::Status s = MarkManual(i); !s.ok()) return s;
      if (manual_[i.id]) {  // each device's own value: the partitioner leaves it alone
        sh_[i.id] = Tiles::Replicated(rank, n_);
        pinned_[i.id] = true;
        source_[i.id] = i.op == Opcode::kParameter ? "annotated" : "propagated";
        via_[i.id] = i.op == Opcode::kParameter ? "" : absl::StrCat(OpcodeName(i.op), " (manual)");
        continue;
      }
      // A value on one device is made whole on every device from it (a
      // collective_broadcast, in Emit); it is then replicated.
      const bool maximal = i.sharding && i.sharding->kind() == Sharding::Kind::kMaximal;
      if (maximal) {
        if (i.sharding->maximal_device() < 0 || i.sharding->maximal_device() >= n_)
          return absl::InvalidArgumentError(absl::StrCat(Where(i), ": ", i.sharding->ToString(), " names a device the ",
                                                         n_, " devices do not have"));
        sh_[i.id] = Tiles::Replicated(rank, n_);
        pinned_[i.id] = true;
        source_[i.id] = "annotated";
        continue;
      }
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
          sh_[i.id] = BroadcastOutOf(i, sh_[i.operands[0]->id]);
          via_[i.id] = "broadcast_in_dim";
          break;
        case Opcode::kTranspose:
          sh_[i.id] = TransposeOutOf(i, sh_[i.operands[0]->id]);
          via_[i.id] = "transpose";
          break;
        case Opcode::kReshape: {
          auto t = ReshapeOutOf(i, sh_[i.operands[0]->id]);
          sh_[i.id] = t ? *t : Tiles::Replicated(rank, n_);
          via_[i.id] = "reshape";
          break;
        }
        case Opcode::kDotGeneral:
          sh_[i.id] = PlanDotOf(i).out;
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
        default:
          if (IsCollective(i.op) || i.op == Opcode::kPartitionId)
            return absl::InvalidArgumentError(absl::StrCat(
                OpcodeName(i.op), " in a global program: collectives are inserted by the partitioner"));
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
            sh_[i.id] = Tiles::Replicated(rank, n_);  // constant, iota, ops without a split rule
          }
      }
      // The operand the layout came from: the most split one (the first on
      // a tie), as the rules let the most split operand drive; not one that
      // took its layout from this op (backward), which would close a loop.
      const Instruction* from = nullptr;
      for (const Instruction* o : i.operands)
        if (o->shape.rank() > 0 && from_[o->id] != i.id &&
            (!from || sh_[o->id].DataTiles() > sh_[from->id].DataTiles()))
          from = o;
      if (from && !via_[i.id].empty()) from_[i.id] = from->id;
    }
    return absl::OkStatus();
  }

  // "op at file:line", or the parameter's name.
  static std::string Where(const Instruction& i) {
    if (i.op == Opcode::kParameter) return absl::StrCat("parameter '", i.name, "'");
    return absl::StrCat(OpcodeName(i.op), i.loc.known() ? absl::StrCat(" at ", i.loc.file, ":", i.loc.line) : "");
  }

  // Manual values (each device's own, as a user's per-device program has
  // them): a parameter or value annotated {manual}, and every op reading
  // one. Mixing one with a value the partitioner lays out is an error:
  // there is no telling which part of it each device should see. Values
  // made from constants alone (a broadcast 1) are the same everywhere and mix.
  absl::Status MarkManual(const Instruction& i) {
    bool any = i.sharding && i.sharding->kind() == Sharding::Kind::kManual, all = true;
    bool constant = i.op == Opcode::kConstant || i.op == Opcode::kIota;
    if (!i.operands.empty()) constant = i.op != Opcode::kParameter;
    for (const Instruction* o : i.operands) {
      constant = constant && constant_[o->id];
      if (manual_[o->id]) any = true;
      else if (!constant_[o->id]) all = false;
    }
    constant_[i.id] = constant;
    if (any && !all)
      return absl::InvalidArgumentError(absl::StrCat(
          Where(i), " mixes manually sharded values with values the partitioner lays out; annotate them "
          "all {manual}, or none"));
    manual_[i.id] = any;
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
        from_[o->id] = i.id;
      }
    }
  }

  // Layout rules are pure functions of the op's attributes and its operands'
  // layouts, and a program applies the same few to the same few layouts over
  // and over (every activation shares one): results are kept, keyed by those,
  // with the operands' device tables held so a key's addresses stay theirs.
  struct Memo {
    std::vector<Tiles> inputs;  // keeps the keyed device tables alive
    std::optional<Tiles> out;
    DotPlan dot;
  };
  std::vector<int64_t> MemoKey(int tag, const Instruction& i, std::initializer_list<const Tiles*> in) {
    std::vector<int64_t> k = {tag, i.shape.rank()};
    k.insert(k.end(), i.shape.dims.begin(), i.shape.dims.end());
    k.insert(k.end(), i.dims.begin(), i.dims.end());
    for (const Instruction* o : i.operands) {
      k.push_back(-1);
      k.insert(k.end(), o->shape.dims.begin(), o->shape.dims.end());
    }
    for (const auto* v : {&i.dot.lhs_batch, &i.dot.rhs_batch, &i.dot.lhs_contracting, &i.dot.rhs_contracting}) {
      k.push_back(-2);
      k.insert(k.end(), v->begin(), v->end());
    }
    for (const Tiles* t : in) {
      k.push_back(-3);
      k.insert(k.end(), t->dims.begin(), t->dims.end());
      k.push_back(reinterpret_cast<intptr_t>(t->assignment.get()));
    }
    return k;
  }
  template <typename F>
  const Memo& Remember(std::vector<int64_t> key, std::initializer_list<const Tiles*> in, F fill) {
    auto [it, fresh] = memo_.try_emplace(std::move(key));
    if (fresh) {
      for (const Tiles* t : in) it->second.inputs.push_back(*t);
      fill(it->second);
    }
    return it->second;
  }
  Tiles BroadcastOutOf(const Instruction& i, const Tiles& t) {
    return *Remember(MemoKey(0, i, {&t}), {&t}, [&](Memo& m) { m.out = BroadcastOut(i, t, n_); }).out;
  }
  Tiles TransposeOutOf(const Instruction& i, const Tiles& t) {
    return *Remember(MemoKey(1, i, {&t}), {&t}, [&](Memo& m) { m.out = TransposeOut(i, t, n_); }).out;
  }
  std::optional<Tiles> ReshapeOutOf(const Instruction& i, const Tiles& t) {
    return Remember(MemoKey(2, i, {&t}), {&t}, [&](Memo& m) { m.out = ReshapeOut(i, t, n_); }).out;
  }
  const DotPlan& PlanDotOf(const Instruction& i) {
    const Tiles& l = sh_[i.operands[0]->id];
    const Tiles& r = sh_[i.operands[1]->id];
    return Remember(MemoKey(3, i, {&l, &r}), {&l, &r}, [&](Memo& m) { m.dot = PlanDot(i, l, r, n_); }).dot;
  }

  // Counts collective `c`, which moves (or adds up) global value `value`.
  Instruction* Moves(Instruction* c, const Instruction& value) {
    ++result_.collectives;
    result_.moved_values.push_back({c->id, value.id});
    return c;
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

  // A device's share of a `t`-tiled value: ceil(size / tiles) per dim. Where
  // the tiles do not divide a dim the last shards end in padding, which holds
  // anything: ops that combine elements along such a dim mask it first
  // (MaskPadding), and gathering the dim cuts it off (Resize).
  static Shape LocalShape(const Shape& global, const Tiles& t) {
    Shape s = global;
    for (int d = 0; d < global.rank(); ++d) s.dims[d] = (global.dims[d] + t.dims[d] - 1) / t.dims[d];
    return s;
  }
  static bool Uneven(const Shape& global, const Tiles& t, int64_t d) {
    return t.dims[d] > 1 && global.dims[d] % t.dims[d] != 0;
  }

  // `v` (a local value of global shape `global`, laid out as `t`) with the
  // padding of its uneven dims among `dims` replaced by `fill`: the identity
  // of a sum, a dot or a max that combines elements along them.
  Instruction* MaskPadding(Instruction* v, const Shape& global, const Tiles& t, const std::vector<int64_t>& dims,
                           double fill, const SourceLoc& loc) {
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

  // A local value whose dims outside `kept` are whole (or padded whole, after
  // an all_gather of an uneven split) cut or padded to the size a device
  // slices `to`'s tiles from: the global size where `to` keeps the dim whole,
  // tiles * ceil(size / tiles) where it splits it.
  Instruction* Resize(Instruction* v, const Instruction& global, const Tiles& to, const std::vector<int64_t>& kept) {
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
    if (manual_[i.id]) {  // as written: each device runs it on its own values
      auto e = std::make_unique<Instruction>(i);
      for (auto& o : e->operands) o = lv_[o->id];
      if (i.op != Opcode::kParameter) e->sharding.reset();
      lv_[i.id] = m.Add(std::move(e));
      return absl::OkStatus();
    }
    const Tiles& out = sh_[i.id];
    const Shape local_shape = LocalShape(i.shape, out);
    Instruction* r = nullptr;
    switch (i.op) {
      case Opcode::kParameter:
        r = m.Parameter(local_shape, i.name, i.loc);
        if (i.sharding && i.sharding->kind() == Sharding::Kind::kMaximal) {
          // Only that device's value counts: every device takes it from there.
          r->sharding = i.sharding;
          std::vector<int64_t> group = {i.sharding->maximal_device()};
          for (int64_t d = 0; d < n_; ++d)
            if (d != group[0]) group.push_back(d);
          if (n_ > 1) {
            r = Moves(m.CollectiveBroadcast(r, {group}, i.loc), i);
          }
          break;
        }
        r->sharding = out.ToSharding();
        break;
      case Opcode::kConstant: {
        const Literal& lit = *i.literal;
        bool splat = true;
        for (int64_t k = 1; k < lit.elements() && splat; ++k) splat = lit.GetDouble(k) == lit.GetDouble(0);
        if (out.DataTiles() == 1) {
          r = m.Constant(lit, i.loc);
        } else if (splat) {
          Literal l(local_shape);
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
          r = m.Iota(local_shape, i.dims[0], i.loc);
        } else {
          auto s = Reshard(m.Iota(i.shape, i.dims[0], i.loc), i, Tiles::Replicated(i.shape.rank(), n_), out);
          if (!s.ok()) return s.status();
          r = *s;
        }
        break;
      case Opcode::kBroadcastInDim: {
        auto a = Operand(i, 0, BroadcastOperandFor(i, out, n_));
        if (!a.ok()) return a.status();
        r = m.BroadcastInDim(*a, local_shape.dims, i.dims, i.loc);
        break;
      }
      case Opcode::kTranspose: {
        Tiles in = sh_[i.operands[0]->id];
        r = m.Transpose(lv_[i.operands[0]->id], i.dims, i.loc);
        if (absl::Status s = Fix(&r, i, TransposeOutOf(i, in), out); !s.ok()) return s;
        break;
      }
      case Opcode::kReshape: {
        Tiles in = sh_[i.operands[0]->id];
        auto mapped = ReshapeOutOf(i, in);
        if (mapped) {
          r = m.Reshape(lv_[i.operands[0]->id], LocalShape(i.shape, *mapped).dims, i.loc);
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
        const DotPlan p = PlanDotOf(i);
        auto ops = Operands(i, {p.lhs, p.rhs});
        if (!ops.ok()) return ops.status();
        if (p.partial) {  // split contracting dims: padding must add nothing
          (*ops)[0] = MaskPadding((*ops)[0], i.operands[0]->shape, p.lhs, i.dot.lhs_contracting, 0, i.loc);
          (*ops)[1] = MaskPadding((*ops)[1], i.operands[1]->shape, p.rhs, i.dot.rhs_contracting, 0, i.loc);
        }
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
        const double identity = ReduceIdentity(i.reduce, i.shape.dtype);
        const bool init_is_identity = i.operands[1]->op == Opcode::kConstant &&
                                      i.operands[1]->literal->GetDouble(0) == identity;
        const Instruction& in = *i.operands[0];
        Instruction* x = MaskPadding(lv_[in.id], in.shape, sh_[in.id], i.dims,
                                     ReduceIdentity(i.reduce, in.shape.dtype), i.loc);
        r = m.Reduce(x, once ? m.ScalarConstant(init->shape.dtype, identity, i.loc) : init, i.dims, i.reduce, i.loc);
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
        // Padded rows of split indices point anywhere: their updates change nothing.
        (*ops)[2] = MaskPadding((*ops)[2], i.operands[2]->shape, p->updates,
                                FreeDims(i.operands[2]->shape.rank(), i.scatter.update_window_dims, {}),
                                ReduceIdentity(i.reduce, i.shape.dtype), i.loc);
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
        if (!p->groups.empty()) {  // split features: padding must add nothing
          (*ops)[0] = MaskPadding((*ops)[0], i.operands[0]->shape, p->lhs, {i.conv.input_feature}, 0, i.loc);
          (*ops)[1] = MaskPadding((*ops)[1], i.operands[1]->shape, p->rhs, {i.conv.kernel_input_feature}, 0, i.loc);
        }
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
        const Shape local = LocalShape(i.shape, layout);
        e->shape = local;
        for (int d = 0; d < layout.rank(); ++d) {
          if (layout.dims[d] == 1) continue;
          if (i.op == Opcode::kSlice) e->slice.limit[d] = local.dims[d];
          if (i.op == Opcode::kDynamicSlice) e->dims[d] = local.dims[d];
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
        e->shape = local_shape;
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
  std::vector<bool> manual_;    // each device's own value (MarkManual)
  std::vector<bool> constant_;  // made from constants alone
  std::vector<std::string> source_, via_;
  std::vector<int64_t> from_;  // the instruction each propagated layout came from (-1: none)
  std::vector<Instruction*> lv_;
  Instruction* pid_ = nullptr;
  const Instruction* emitting_ = nullptr;  // the global op being emitted
  bool emitting_whole_ = false;            // its operands are made whole for want of a split rule
  std::map<std::vector<int32_t>, Instruction*> starts_;  // StartIndex's tables by content
  std::map<std::vector<int64_t>, Memo> memo_;             // layout rules' results (Remember)
  SpmdResult result_;
};

}  // namespace

absl::StatusOr<SpmdResult> SpmdPartition(const Module& global, int num_partitions) {
  if (num_partitions < 1) return absl::InvalidArgumentError("num_partitions must be >= 1");
  if (absl::Status s = Verify(global); !s.ok()) return s;
  return Partitioner(global, num_partitions).Run();
}

}  // namespace shardscope::compiler
