#include "compiler/fingerprint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "compiler/text.h"

namespace shardscope::compiler {

namespace {

// Feeds fields in a fixed form: integers as 64-bit values, vectors with
// their length first (so [1],[2,3] and [1,2],[3] differ). `Sink` takes the
// words (Words) and byte strings (Bytes).
template <class Sink>
class Feeder {
 public:
  void Int(int64_t v) { sink().Words(&v, 1); }
  void Ints(const std::vector<int64_t>& v) {
    Int(static_cast<int64_t>(v.size()));
    if (!v.empty()) sink().Words(v.data(), v.size());
  }
  void Pairs(const std::vector<std::pair<int64_t, int64_t>>& v) {
    Int(static_cast<int64_t>(v.size()));
    for (const auto& [a, b] : v) {
      Int(a);
      Int(b);
    }
  }
  void Str(const std::string& s) { sink().Bytes(s.data(), s.size()); }
  void ShapeOf(const shardscope::Shape& s) {
    Int(static_cast<int64_t>(s.dtype));
    Ints(s.dims);
  }
  void ShardingOf(const shardscope::Sharding& s) {
    Int(static_cast<int64_t>(s.kind()));
    Ints(s.tile_dims());
    Ints(s.devices());
    Int(s.last_tile_dim_replicate());
    Int(s.maximal_device());
  }
  void ShardingOf(const std::optional<shardscope::Sharding>& s) {
    Int(s.has_value());
    if (s) ShardingOf(*s);
  }

 private:
  Sink& sink() { return static_cast<Sink&>(*this); }
};

// The fingerprint's hasher: XXH3-128 over the fed bytes.
class Hasher : public Feeder<Hasher> {
 public:
  Hasher() : st_(XXH3_createState()) { XXH3_128bits_reset(st_); }
  ~Hasher() { XXH3_freeState(st_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void Words(const int64_t* v, size_t n) { XXH3_128bits_update(st_, v, n * sizeof(int64_t)); }
  void Bytes(const void* p, size_t n) {
    Int(static_cast<int64_t>(n));
    if (n > 0) XXH3_128bits_update(st_, p, n);
  }
  std::string Hex() const {
    XXH128_hash_t h = XXH3_128bits_digest(st_);
    return absl::StrFormat("%016x%016x", h.high64, h.low64);
  }

 private:
  XXH3_state_t* st_;
};

// A 64-bit key per instruction: the fields are gathered (comparable as they
// are), then hashed once.
class Key64 : public Feeder<Key64> {
 public:
  void Words(const int64_t* v, size_t n) { buf_.insert(buf_.end(), v, v + n); }
  void Bytes(const void* p, size_t n) {
    Int(static_cast<int64_t>(n));
    Int(static_cast<int64_t>(XXH3_64bits(p, n)));
  }
  uint64_t Digest() const { return XXH3_64bits(buf_.data(), buf_.size() * sizeof(int64_t)); }
  bool operator==(const Key64& o) const { return buf_ == o.buf_; }

 private:
  absl::InlinedVector<int64_t, 64> buf_;
};

// Every attribute of Instruction except its id (operands are referred to by
// `operand(o)`: a position, or a key), source location, module path and
// parameter name. A field added to Instruction must be added here: the size
// check below fails until then.
template <class H, class OperandValue>
void HashInstruction(const Instruction& i, const OperandValue& operand, H& h) {
  static_assert(sizeof(Instruction) == 1264,
                "Instruction changed: hash the new field in HashInstruction, then update the size");
  h.Int(static_cast<int64_t>(i.op));
  h.ShapeOf(i.shape);
  h.Int(static_cast<int64_t>(i.operands.size()));
  for (const Instruction* o : i.operands) h.Int(static_cast<int64_t>(operand(o)));
  h.Ints(i.dims);
  h.Ints(i.dot.lhs_batch);
  h.Ints(i.dot.rhs_batch);
  h.Ints(i.dot.lhs_contracting);
  h.Ints(i.dot.rhs_contracting);
  h.Ints(i.slice.start);
  h.Ints(i.slice.limit);
  h.Ints(i.slice.stride);
  h.Ints(i.pad.low);
  h.Ints(i.pad.high);
  h.Ints(i.pad.interior);
  const ConvDims& c = i.conv;
  for (int64_t v : {c.input_batch, c.input_feature, c.kernel_input_feature, c.kernel_output_feature, c.output_batch,
                    c.output_feature, c.feature_group_count, c.batch_group_count})
    h.Int(v);
  h.Ints(c.input_spatial);
  h.Ints(c.kernel_spatial);
  h.Ints(c.output_spatial);
  h.Ints(c.window_strides);
  h.Pairs(c.padding);
  h.Ints(c.lhs_dilation);
  h.Ints(c.rhs_dilation);
  h.Ints(i.window.dimensions);
  h.Ints(i.window.strides);
  h.Ints(i.window.base_dilations);
  h.Ints(i.window.window_dilations);
  h.Pairs(i.window.padding);
  h.Ints(i.gather.offset_dims);
  h.Ints(i.gather.collapsed_slice_dims);
  h.Ints(i.gather.start_index_map);
  h.Int(i.gather.index_vector_dim);
  h.Ints(i.gather.slice_sizes);
  h.Int(i.gather.indices_are_sorted);
  h.Ints(i.scatter.update_window_dims);
  h.Ints(i.scatter.inserted_window_dims);
  h.Ints(i.scatter.scatter_dims_to_operand_dims);
  h.Int(i.scatter.index_vector_dim);
  h.Int(i.scatter.indices_are_sorted);
  h.Int(i.scatter.unique_indices);
  h.Int(i.scatter.replace);
  h.Int(static_cast<int64_t>(i.reduce));
  h.Int(static_cast<int64_t>(i.compare));
  h.Int(i.literal.has_value());
  if (i.literal) {
    h.ShapeOf(i.literal->shape());
    h.Bytes(i.literal->data(), static_cast<size_t>(i.literal->bytes()));
  }
  h.Int(i.param_index);
  h.ShardingOf(i.sharding);
  h.Int(static_cast<int64_t>(i.replica_groups.size()));
  for (const auto& g : i.replica_groups) h.Ints(g);
  h.Pairs(i.source_target_pairs);
  for (const auto* region : {&i.cond, &i.body}) {
    h.Int(*region != nullptr);
    if (*region) h.Str(Fingerprint(**region));
  }
}

// What graph diffs count as structure: the opcode, the wiring (operands by
// `operand(o)`) and the attributes that do not follow from shapes. Shapes,
// dtypes of inputs, shardings and scalar constants' values are left out, so
// graphs that differ only in those (a new batch size, an inlined scalar) keep
// the same structure, op for op.
template <class OperandValue>
void HashStructure(const Instruction& i, const OperandValue& operand, Key64& h) {
  h.Int(static_cast<int64_t>(i.op));
  h.Int(static_cast<int64_t>(i.operands.size()));
  for (const Instruction* o : i.operands) h.Int(static_cast<int64_t>(operand(o)));
  if (IsCollective(i.op)) {
    h.Ints(i.dims);
    h.Int(static_cast<int64_t>(i.reduce));
    h.Int(static_cast<int64_t>(i.replica_groups.size()));
    for (const auto& g : i.replica_groups) h.Ints(g);
    h.Pairs(i.source_target_pairs);
    return;
  }
  switch (i.op) {
    case Opcode::kBroadcastInDim:
    case Opcode::kTranspose:
    case Opcode::kReduce:
    case Opcode::kIota:
      h.Ints(i.dims);
      h.Int(static_cast<int64_t>(i.reduce));
      break;
    case Opcode::kReshape:
      h.Int(i.shape.rank());
      break;
    case Opcode::kDotGeneral:
      h.Ints(i.dot.lhs_batch);
      h.Ints(i.dot.rhs_batch);
      h.Ints(i.dot.lhs_contracting);
      h.Ints(i.dot.rhs_contracting);
      break;
    case Opcode::kCompare:
      h.Int(static_cast<int64_t>(i.compare));
      break;
    case Opcode::kConvert:
      h.Int(static_cast<int64_t>(i.shape.dtype));
      break;
    case Opcode::kGetTupleElement:
      h.Ints(i.dims);
      break;
    case Opcode::kWhile:  // a different loop (its trip count included) is a different graph
      h.Str(Fingerprint(*i.cond));
      h.Str(Fingerprint(*i.body));
      break;
    default:
      break;
  }
}

}  // namespace

std::string Fingerprint(const Module& m) {
  // Hashed field by field rather than printed and hashed: printing the llama
  // training graph took ~5.5 ms per step, this takes a few hundred us.
  Hasher h;
  h.Str("structural-v1");  // changes when the hashed form changes
  h.Int(m.num_partitions());
  absl::flat_hash_map<int64_t, int64_t> position;  // instruction id -> position
  position.reserve(m.instructions().size());
  for (const auto& i : m.instructions()) {
    position[i->id] = static_cast<int64_t>(position.size());
    const auto by_position = [&](const Instruction* o) { return position.at(o->id); };
    HashInstruction(*i, by_position, h);
  }
  h.Int(static_cast<int64_t>(m.parameters().size()));
  for (const Instruction* p : m.parameters()) h.Int(position.at(p->id));
  h.Int(static_cast<int64_t>(m.outputs().size()));
  for (const Instruction* o : m.outputs()) h.Int(position.at(o->id));
  h.Int(static_cast<int64_t>(m.output_shardings().size()));
  for (const Sharding& s : m.output_shardings()) h.ShardingOf(s);
  return h.Hex();
}

uint64_t OwnStructureKey(const Instruction& i) {
  Key64 k;
  HashStructure(i, [](const Instruction*) { return 0; }, k);
  return k.Digest();
}

uint64_t OwnFullKey(const Instruction& i) {
  Key64 k;
  HashStructure(i, [](const Instruction*) { return 0; }, k);
  if (i.literal) k.Bytes(i.literal->data(), static_cast<size_t>(i.literal->bytes()));
  if (i.op != Opcode::kParameter) k.ShardingOf(i.sharding);  // a constraint; a parameter's layout is its input's
  return k.Digest();
}

namespace {
uint64_t Combine(std::initializer_list<uint64_t> words) {
  return XXH3_64bits(words.begin(), words.size() * sizeof(uint64_t));
}
}  // namespace

std::vector<size_t> CanonicalOutputOrder(const std::vector<const Instruction*>& topo,
                                         const std::vector<const Instruction*>& outputs) {
  const size_t n = topo.size();
  absl::flat_hash_map<const Instruction*, size_t> index;
  index.reserve(n);
  for (size_t k = 0; k < n; ++k) index[topo[k]] = k;
  // Bottom-up: the structure key (what graph diffs compare) over each subgraph.
  std::vector<uint64_t> structure(n);
  const auto structure_of = [&](const Instruction* o) { return structure[index.at(o)]; };
  for (size_t k = 0; k < n; ++k) {
    Key64 s;
    HashStructure(*topo[k], structure_of, s);
    structure[k] = s.Digest();
  }
  std::vector<size_t> out(outputs.size());
  for (size_t j = 0; j < outputs.size(); ++j) out[j] = index.at(outputs[j]);
  bool ties = false;  // distinct outputs of equal structure (rare: only then are more keys needed)
  {
    absl::flat_hash_map<uint64_t, size_t> first;  // structure key -> an output's instruction
    for (size_t o : out) {
      auto [it, fresh] = first.try_emplace(structure[o], o);
      ties = ties || (!fresh && it->second != o);
    }
  }
  // For ties: outputs of equal structure over different values (exp(x),
  // exp(y)) are told apart by how their subgraphs' values are used elsewhere
  // (a key of each instruction's users, top-down, folded back into the
  // subgraphs bottom-up), then by the full key (what the fingerprint covers:
  // shapes, shardings, constants) of their subgraphs.
  std::vector<uint64_t> refined(n, 0), full(n, 0);
  if (ties) {
    std::vector<std::vector<std::pair<size_t, size_t>>> users(n);  // (user, operand position)
    for (size_t k = 0; k < n; ++k)
      for (size_t p = 0; p < topo[k]->operands.size(); ++p)
        users[index.at(topo[k]->operands[p])].push_back({k, p});
    std::vector<uint64_t> used(n, 0), output_count(n, 0);
    for (size_t o : out) ++output_count[o];
    for (size_t k = n; k-- > 0;) {
      std::vector<uint64_t> u;
      for (const auto& [user, pos] : users[k]) u.push_back(Combine({structure[user], pos, used[user]}));
      std::sort(u.begin(), u.end());
      u.push_back(output_count[k]);
      used[k] = XXH3_64bits(u.data(), u.size() * sizeof(uint64_t));
    }
    const auto full_of = [&](const Instruction* o) { return full[index.at(o)]; };
    for (size_t k = 0; k < n; ++k) {
      std::vector<uint64_t> w = {structure[k], used[k]};
      for (const Instruction* o : topo[k]->operands) w.push_back(refined[index.at(o)]);
      refined[k] = XXH3_64bits(w.data(), w.size() * sizeof(uint64_t));
      Key64 f;
      HashInstruction(*topo[k], full_of, f);
      full[k] = f.Digest();
    }
  }
  std::vector<size_t> order(outputs.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t x = out[a], y = out[b];
    return std::tie(structure[x], refined[x], full[x]) < std::tie(structure[y], refined[y], full[y]);
  });
  return order;
}

}  // namespace shardscope::compiler
