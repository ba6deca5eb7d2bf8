#include "runtime/collectives.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "compiler/cost_model.h"

namespace shardscope::runtime {
namespace {

template <compiler::ReduceKind K, typename T>
T CombineOne(T a, T b) {
  if constexpr (K == compiler::ReduceKind::kSum) return a + b;
  else if constexpr (K == compiler::ReduceKind::kProd) return a * b;
  else if constexpr (K == compiler::ReduceKind::kMax) return std::max(a, b);
  else return std::min(a, b);
}

// Folds the `members` inputs into `acc` (it starts as the first), in group
// order; read(g, i) is element i of member g. The kind is a template
// argument so each loop is a plain vectorizable one (gradients pass here).
template <typename T, typename Read>
void CombineAll(compiler::ReduceKind k, size_t members, T* acc, int64_t n, Read read) {
  auto fold = [&](auto kind) {
    for (int64_t i = 0; i < n; ++i) acc[i] = read(0, i);
    for (size_t g = 1; g < members; ++g)
      for (int64_t i = 0; i < n; ++i) acc[i] = CombineOne<decltype(kind)::value>(acc[i], read(g, i));
  };
  switch (k) {
    case compiler::ReduceKind::kSum: fold(std::integral_constant<compiler::ReduceKind, compiler::ReduceKind::kSum>()); break;
    case compiler::ReduceKind::kProd: fold(std::integral_constant<compiler::ReduceKind, compiler::ReduceKind::kProd>()); break;
    case compiler::ReduceKind::kMax: fold(std::integral_constant<compiler::ReduceKind, compiler::ReduceKind::kMax>()); break;
    case compiler::ReduceKind::kMin: fold(std::integral_constant<compiler::ReduceKind, compiler::ReduceKind::kMin>()); break;
  }
}

template <typename T>
void Combine(compiler::ReduceKind k, const std::vector<const Literal*>& in, Literal* out) {
  CombineAll<T>(k, in.size(), out->as<T>(), out->elements(), [&](size_t g, int64_t i) { return in[g]->as<T>()[i]; });
}

// The copy of a `block`-sized region at `from` in src to `to` in dst (same
// element type and rank; both regions in bounds).
void CopyRegion(const Literal& src, const std::vector<int64_t>& from, const std::vector<int64_t>& block,
                Literal* dst, const std::vector<int64_t>& to) {
  const int64_t es = DTypeBytes(src.shape().dtype);
  auto* d = static_cast<uint8_t*>(dst->data());
  auto* s = static_cast<const uint8_t*>(src.data());
  const int rank = static_cast<int>(block.size());
  if (rank == 0) {
    std::memcpy(d, s, es);
    return;
  }
  const std::vector<int64_t> ss = Strides(src.shape().dims), ds = Strides(dst->shape().dims);
  int64_t rows = 1;
  for (int k = 0; k + 1 < rank; ++k) rows *= block[k];
  const int64_t row_bytes = block[rank - 1] * es;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < rows && row_bytes > 0; ++r) {
    int64_t so = 0, dof = 0;
    for (int k = 0; k < rank; ++k) {
      so += (idx[k] + from[k]) * ss[k];
      dof += (idx[k] + to[k]) * ds[k];
    }
    std::memcpy(d + dof * es, s + so * es, row_bytes);
    for (int k = rank - 2; k >= 0; --k) {
      if (++idx[k] < block[k]) break;
      idx[k] = 0;
    }
  }
}

// `s` with dimension `dim` multiplied by `mul` and divided by `div`.
Shape Scaled(Shape s, int64_t dim, int64_t mul, int64_t div) {
  s.dims[dim] = s.dims[dim] * mul / div;
  return s;
}

absl::Status SameShapes(const char* op, const std::vector<const Literal*>& inputs) {
  for (const Literal* l : inputs)
    if (l == nullptr || l->shape() != inputs[0]->shape())
      return absl::InvalidArgumentError(absl::StrCat(op, ": participants hold different types (",
                                                     inputs[0]->shape().ToString(), " and ",
                                                     l ? l->shape().ToString() : "nothing", ")"));
  return absl::OkStatus();
}

// One output per input, and the inputs alike.
absl::Status CheckGroup(const char* op, const std::vector<const Literal*>& inputs,
                        const std::vector<Literal*>& outputs) {
  if (inputs.empty() || inputs[0] == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(op, ": empty group"));
  if (outputs.size() != inputs.size())
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", inputs.size(), " inputs but ", outputs.size(), " outputs"));
  return SameShapes(op, inputs);
}

absl::Status OutputsAre(const char* op, const Shape& want, const std::vector<Literal*>& outputs) {
  for (const Literal* out : outputs)
    if (out == nullptr || out->shape() != want)
      return absl::InvalidArgumentError(absl::StrCat(op, ": the group makes results of ", want.ToString(),
                                                     " but the result type is ",
                                                     out ? out->shape().ToString() : "missing"));
  return absl::OkStatus();
}

// 16-bit floats are combined in f32 and rounded once, as a reduction that
// accumulates in f32 would.
void CombineHalf(compiler::ReduceKind k, const std::vector<const Literal*>& in, Literal* out) {
  std::vector<std::vector<float>> wide;
  for (const Literal* l : in) wide.push_back(l->ToF32Vector());
  std::vector<float> acc(out->elements());
  CombineAll<float>(k, in.size(), acc.data(), out->elements(), [&](size_t g, int64_t i) { return wide[g][i]; });
  for (size_t i = 0; i < acc.size(); ++i) out->SetDouble(static_cast<int64_t>(i), acc[i]);
}

}  // namespace

namespace {
// `block` cut back so that it fits in `limit` from `offsets` (an uneven
// shard's padding lies past the end of the value).
std::vector<int64_t> Clipped(std::vector<int64_t> block, const std::vector<int64_t>& offsets,
                             const std::vector<int64_t>& limit) {
  for (size_t k = 0; k < block.size(); ++k) block[k] = std::max<int64_t>(0, std::min(block[k], limit[k] - offsets[k]));
  return block;
}
}  // namespace

void CopyBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst) {
  CopyRegion(src, std::vector<int64_t>(offsets.size(), 0), Clipped(src.shape().dims, offsets, dst->shape().dims),
             dst, offsets);
}

void ExtractBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst) {
  CopyRegion(src, offsets, Clipped(dst->shape().dims, offsets, src.shape().dims), dst,
             std::vector<int64_t>(offsets.size(), 0));
}

namespace {
// all_reduce's combine, shared with reduce_scatter; `op` names the caller in errors.
absl::Status ReduceInto(const char* op, compiler::ReduceKind kind, const std::vector<const Literal*>& inputs,
                        Literal* out) {
  if (inputs.empty()) return absl::InvalidArgumentError(absl::StrCat(op, ": empty replica group"));
  for (const Literal* l : inputs)
    if (l->shape() != out->shape())
      return absl::InvalidArgumentError(absl::StrCat(op, ": participant holds ", l->shape().ToString(),
                                                     ", expected ", out->shape().ToString()));
  switch (out->shape().dtype) {
    case DType::kF32: Combine<float>(kind, inputs, out); break;
    case DType::kF64: Combine<double>(kind, inputs, out); break;
    case DType::kI32: Combine<int32_t>(kind, inputs, out); break;
    case DType::kI64: Combine<int64_t>(kind, inputs, out); break;
    case DType::kBF16: case DType::kF16: CombineHalf(kind, inputs, out); break;
    default:
      return absl::UnimplementedError(absl::StrCat(op, " on ", DTypeName(out->shape().dtype)));
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status AllReduce(compiler::ReduceKind kind, const std::vector<const Literal*>& inputs, Literal* out) {
  return ReduceInto("all_reduce", kind, inputs, out);
}

absl::Status AllGather(int64_t dim, const std::vector<const Literal*>& inputs, Literal* out) {
  if (inputs.empty()) return absl::InvalidArgumentError("all_gather: empty replica group");
  // Checked before copying: a group larger than the result type assumed
  // (empty replica_groups on several devices) would write past the buffer.
  if (absl::Status s = SameShapes("all_gather", inputs); !s.ok()) return s;
  if (dim < 0 || dim >= inputs[0]->shape().rank())
    return absl::InvalidArgumentError(absl::StrCat("all_gather: dimension ", dim, " is out of range"));
  if (out->shape() != Scaled(inputs[0]->shape(), dim, static_cast<int64_t>(inputs.size()), 1))
    return absl::InvalidArgumentError(absl::StrCat("all_gather: ", inputs.size(), " participants of ",
                                                   inputs[0]->shape().ToString(), " do not make the result ",
                                                   out->shape().ToString()));
  std::vector<int64_t> offsets(out->shape().rank(), 0);
  for (const Literal* l : inputs) {
    CopyBlock(*l, offsets, out);
    offsets[dim] += l->shape().dims[dim];
  }
  return absl::OkStatus();
}

absl::Status ReduceScatter(compiler::ReduceKind kind, int64_t dim, const std::vector<const Literal*>& inputs,
                           const std::vector<Literal*>& outputs) {
  if (absl::Status s = CheckGroup("reduce_scatter", inputs, outputs); !s.ok()) return s;
  const Shape& in = inputs[0]->shape();
  const int64_t n = static_cast<int64_t>(inputs.size());
  if (dim < 0 || dim >= in.rank())
    return absl::InvalidArgumentError(
        absl::StrCat("reduce_scatter: scatter dimension ", dim, " is out of range for ", in.ToString()));
  if (in.dims[dim] % n != 0)
    return absl::InvalidArgumentError(absl::StrCat("reduce_scatter: scatter dimension ", dim, " (size ",
                                                   in.dims[dim], ") is not divisible by the ", n,
                                                   " participants"));
  const Shape block = Scaled(in, dim, 1, n);
  if (absl::Status s = OutputsAre("reduce_scatter", block, outputs); !s.ok()) return s;
  // The whole reduction, then each member's block of it: the staging buffer
  // a ring's links would hold, not charged to any device.
  Literal reduced = Literal::Uninitialized(in);
  if (absl::Status s = ReduceInto("reduce_scatter", kind, inputs, &reduced); !s.ok()) return s;
  std::vector<int64_t> offsets(in.rank(), 0);
  for (int64_t k = 0; k < n; ++k) {
    offsets[dim] = k * block.dims[dim];
    ExtractBlock(reduced, offsets, outputs[k]);
  }
  return absl::OkStatus();
}

absl::Status AllToAll(int64_t split_dim, int64_t concat_dim, const std::vector<const Literal*>& inputs,
                      const std::vector<Literal*>& outputs) {
  if (absl::Status s = CheckGroup("all_to_all", inputs, outputs); !s.ok()) return s;
  const Shape& in = inputs[0]->shape();
  const int64_t n = static_cast<int64_t>(inputs.size());
  if (split_dim < 0 || split_dim >= in.rank() || concat_dim < 0 || concat_dim >= in.rank())
    return absl::InvalidArgumentError(absl::StrCat("all_to_all: split dimension ", split_dim,
                                                   " or concat dimension ", concat_dim,
                                                   " is out of range for ", in.ToString()));
  if (in.dims[split_dim] % n != 0)
    return absl::InvalidArgumentError(absl::StrCat("all_to_all: split dimension ", split_dim, " (size ",
                                                   in.dims[split_dim], ") is not divisible by the ", n,
                                                   " participants"));
  const Shape block = Scaled(in, split_dim, 1, n);
  if (absl::Status s = OutputsAre("all_to_all", Scaled(block, concat_dim, n, 1), outputs); !s.ok()) return s;
  std::vector<int64_t> from(in.rank(), 0), to(in.rank(), 0);
  for (int64_t receiver = 0; receiver < n; ++receiver) {
    for (int64_t sender = 0; sender < n; ++sender) {
      from[split_dim] = receiver * block.dims[split_dim];
      to[concat_dim] = sender * block.dims[concat_dim];
      CopyRegion(*inputs[sender], from, block.dims, outputs[receiver], to);
      from[split_dim] = to[concat_dim] = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status CollectivePermute(const std::vector<std::pair<int64_t, int64_t>>& pairs,
                               const std::vector<const Literal*>& inputs,
                               const std::vector<Literal*>& outputs) {
  if (absl::Status s = CheckGroup("collective_permute", inputs, outputs); !s.ok()) return s;
  if (absl::Status s = OutputsAre("collective_permute", inputs[0]->shape(), outputs); !s.ok()) return s;
  const int64_t n = static_cast<int64_t>(inputs.size());
  std::vector<const Literal*> source_of(n, nullptr);
  std::vector<bool> is_source(n, false);
  for (const auto& [source, target] : pairs) {
    if (source < 0 || source >= n || target < 0 || target >= n)
      return absl::InvalidArgumentError(absl::StrCat("collective_permute: pair [", source, ", ", target,
                                                     "] is out of range for ", n, " participants"));
    if (is_source[source])
      return absl::InvalidArgumentError(
          absl::StrCat("collective_permute: member ", source, " is the source of two pairs"));
    if (source_of[target])
      return absl::InvalidArgumentError(
          absl::StrCat("collective_permute: member ", target, " is the target of two pairs"));
    is_source[source] = true;
    source_of[target] = inputs[source];
  }
  for (int64_t t = 0; t < n; ++t) {
    if (source_of[t])
      std::memcpy(outputs[t]->data(), source_of[t]->data(), outputs[t]->bytes());
    else
      std::memset(outputs[t]->data(), 0, outputs[t]->bytes());
  }
  return absl::OkStatus();
}

absl::Status CollectiveBroadcast(const std::vector<const Literal*>& inputs,
                                 const std::vector<Literal*>& outputs) {
  if (absl::Status s = CheckGroup("collective_broadcast", inputs, outputs); !s.ok()) return s;
  if (absl::Status s = OutputsAre("collective_broadcast", inputs[0]->shape(), outputs); !s.ok()) return s;
  for (Literal* out : outputs) std::memcpy(out->data(), inputs[0]->data(), out->bytes());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<int64_t>>> ParticipantGroups(const compiler::Instruction& c,
                                                                    int num_devices) {
  using compiler::Opcode;
  const int64_t n = num_devices;
  auto in_range = [&](int64_t d) { return d >= 0 && d < n; };
  std::vector<std::vector<int64_t>> groups;
  if (c.op == Opcode::kCollectivePermute) {
    // Connected parts by union-find; each part is named by its smallest device.
    std::vector<int64_t> parent(n);
    for (int64_t d = 0; d < n; ++d) parent[d] = d;
    auto root = [&](int64_t d) {
      while (parent[d] != d) d = parent[d] = parent[parent[d]];
      return d;
    };
    std::set<int64_t> sources, targets;
    for (const auto& [source, target] : c.source_target_pairs) {
      if (!in_range(source) || !in_range(target))
        return absl::InvalidArgumentError(
            absl::StrCat("source_target_pairs name [", source, ", ", target, "]; there are ", n, " devices"));
      if (!sources.insert(source).second)
        return absl::InvalidArgumentError(
            absl::StrCat("device ", source, " is the source of two source_target_pairs"));
      if (!targets.insert(target).second)
        return absl::InvalidArgumentError(
            absl::StrCat("device ", target, " is the target of two source_target_pairs"));
      int64_t a = root(source), b = root(target);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
    std::map<int64_t, std::vector<int64_t>> parts;
    for (int64_t d = 0; d < n; ++d) parts[root(d)].push_back(d);
    for (auto& [first, members] : parts) groups.push_back(std::move(members));
    return groups;
  }
  if (!compiler::HasReplicaGroups(c.op))
    return absl::InvalidArgumentError(absl::StrCat(compiler::OpcodeName(c.op), " is not a collective"));
  groups = c.replica_groups;
  if (groups.empty()) {
    groups.emplace_back();
    for (int64_t d = 0; d < n; ++d) groups[0].push_back(d);
    return groups;
  }
  std::vector<bool> seen(n, false);
  for (const auto& g : groups) {
    if (g.empty()) return absl::InvalidArgumentError("a replica group is empty");
    for (int64_t d : g) {
      if (!in_range(d))
        return absl::InvalidArgumentError(
            absl::StrCat("replica_groups name device ", d, "; there are ", n, " devices"));
      if (seen[d]) return absl::InvalidArgumentError(absl::StrCat("device ", d, " is in two replica groups"));
      seen[d] = true;
    }
  }
  for (int64_t d = 0; d < n; ++d) {
    if (seen[d]) continue;
    if (c.op != Opcode::kCollectiveBroadcast)
      return absl::InvalidArgumentError(absl::StrCat("device ", d, " is in no replica group"));
    groups.push_back({d});
  }
  return groups;
}

LinkBytes CollectiveLinkBytes(const compiler::Instruction& c, const std::vector<int64_t>& group, size_t position) {
  using compiler::CollectiveKind;
  LinkBytes out;
  const int64_t n = static_cast<int64_t>(group.size());
  if (n <= 1 || position >= group.size() || c.operands.empty()) return out;
  const int64_t b = c.operands[0]->shape.bytes();
  const int64_t me = group[position];
  switch (compiler::CollectiveKindOf(c.op)) {
    case CollectiveKind::kAllReduce:
      out.sent = out.received = 2 * (n - 1) * b / n;
      break;
    case CollectiveKind::kAllGather:
      out.sent = out.received = (n - 1) * b;
      break;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      out.sent = out.received = (n - 1) * b / n;
      break;
    case CollectiveKind::kCollectivePermute:
      for (const auto& [source, target] : c.source_target_pairs) {
        if (source == target) continue;
        if (source == me) out.sent += b;
        if (target == me) out.received += b;
      }
      break;
    case CollectiveKind::kCollectiveBroadcast: {
      // Step k: the first 2^k members hold the value, and member i forwards it to i + 2^k.
      const int64_t i = static_cast<int64_t>(position);
      for (int64_t holders = 1; holders < n; holders *= 2)
        if (i < holders && i + holders < n) out.sent += b;
      out.received = i > 0 ? b : 0;
      break;
    }
  }
  return out;
}

absl::Status RunCollective(const compiler::Instruction& c, const std::vector<int64_t>& members,
                           const std::vector<const Literal*>& inputs, const std::vector<Literal*>& outputs) {
  using compiler::Opcode;
  if (members.empty() || inputs.size() != members.size() || outputs.size() != members.size())
    return absl::InvalidArgumentError("a collective group needs one input and one output per member");
  const std::vector<int64_t>& dims = c.dims;
  switch (c.op) {
    case Opcode::kAllReduce:
    case Opcode::kAllGather: {
      // Every member's result is the same: compute it once and copy it.
      if (c.op == Opcode::kAllGather && dims.size() != 1)
        return absl::InvalidArgumentError("all_gather needs one all_gather_dim");
      Literal* first = outputs[0];
      absl::Status s =
          c.op == Opcode::kAllReduce ? AllReduce(c.reduce, inputs, first) : AllGather(dims[0], inputs, first);
      for (size_t m = 1; m < outputs.size() && s.ok(); ++m) {
        if (outputs[m]->shape() != first->shape())
          return absl::InvalidArgumentError(
              absl::StrCat("member ", members[m], "'s output is ", outputs[m]->shape().ToString()));
        std::memcpy(outputs[m]->data(), first->data(), first->bytes());
      }
      return s;
    }
    case Opcode::kReduceScatter:
      if (dims.size() != 1) return absl::InvalidArgumentError("reduce_scatter needs one scatter_dimension");
      return ReduceScatter(c.reduce, dims[0], inputs, outputs);
    case Opcode::kAllToAll:
      if (dims.size() != 3)
        return absl::InvalidArgumentError(
            "all_to_all needs split_dimension, concat_dimension and split_count");
      if (dims[2] != static_cast<int64_t>(members.size()))
        return absl::InvalidArgumentError(absl::StrCat(
            "all_to_all: split_count ", dims[2], " differs from the ", members.size(), " participants"));
      return AllToAll(dims[0], dims[1], inputs, outputs);
    case Opcode::kCollectivePermute: {
      // The pairs among this group's devices, as positions in it.
      std::map<int64_t, int64_t> position;
      for (size_t k = 0; k < members.size(); ++k) position[members[k]] = static_cast<int64_t>(k);
      std::vector<std::pair<int64_t, int64_t>> local;
      for (const auto& [source, target] : c.source_target_pairs) {
        auto s = position.find(source), t = position.find(target);
        if (s == position.end() && t == position.end()) continue;
        if (s == position.end() || t == position.end())
          return absl::InvalidArgumentError(
              absl::StrCat("collective_permute: pair [", source, ", ", target, "] crosses groups"));
        local.push_back({s->second, t->second});
      }
      return CollectivePermute(local, inputs, outputs);
    }
    case Opcode::kCollectiveBroadcast: {
      // A group ParticipantGroups added for a device in no replica group: zeros.
      bool listed = c.replica_groups.empty();
      for (const auto& g : c.replica_groups) listed = listed || g == members;
      if (!listed) {
        for (Literal* out : outputs) std::memset(out->data(), 0, out->bytes());
        return absl::OkStatus();
      }
      return CollectiveBroadcast(inputs, outputs);
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(compiler::OpcodeName(c.op), " is not a collective"));
  }
}

}  // namespace shardscope::runtime
