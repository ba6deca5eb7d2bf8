#include "compiler/fingerprint.h"

#include <xxhash.h>

#include <cstdlib>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "compiler/text.h"

namespace shardscope::compiler {

namespace {

// Feeds fields to XXH3 in a fixed byte form: integers as 64-bit values,
// vectors with their length first (so [1],[2,3] and [1,2],[3] differ).
class Hasher {
 public:
  Hasher() : st_(XXH3_createState()) { XXH3_128bits_reset(st_); }
  ~Hasher() { XXH3_freeState(st_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void Int(int64_t v) { XXH3_128bits_update(st_, &v, sizeof v); }
  void Ints(const std::vector<int64_t>& v) {
    Int(static_cast<int64_t>(v.size()));
    if (!v.empty()) XXH3_128bits_update(st_, v.data(), v.size() * sizeof(int64_t));
  }
  void Pairs(const std::vector<std::pair<int64_t, int64_t>>& v) {
    Int(static_cast<int64_t>(v.size()));
    for (const auto& [a, b] : v) {
      Int(a);
      Int(b);
    }
  }
  void Bytes(const void* p, size_t n) {
    Int(static_cast<int64_t>(n));
    if (n > 0) XXH3_128bits_update(st_, p, n);
  }
  void Str(const std::string& s) { Bytes(s.data(), s.size()); }
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
  std::string Hex() const {
    XXH128_hash_t h = XXH3_128bits_digest(st_);
    return absl::StrFormat("%016x%016x", h.high64, h.low64);
  }

 private:
  XXH3_state_t* st_;
};

// Every attribute of Instruction except its id (operands are referred to by
// position), source location, module path and parameter name. A field added
// to Instruction must be added here: the size check below fails until then.
void HashInstruction(const Instruction& i, const absl::flat_hash_map<int64_t, int64_t>& position, Hasher& h) {
  static_assert(sizeof(Instruction) == 1264,
                "Instruction changed: hash the new field in HashInstruction, then update the size");
  h.Int(static_cast<int64_t>(i.op));
  h.ShapeOf(i.shape);
  h.Int(static_cast<int64_t>(i.operands.size()));
  for (const Instruction* o : i.operands) h.Int(position.at(o->id));
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
    HashInstruction(*i, position, h);
  }
  h.Int(static_cast<int64_t>(m.parameters().size()));
  for (const Instruction* p : m.parameters()) h.Int(position.at(p->id));
  h.Int(static_cast<int64_t>(m.outputs().size()));
  for (const Instruction* o : m.outputs()) h.Int(position.at(o->id));
  h.Int(static_cast<int64_t>(m.output_shardings().size()));
  for (const Sharding& s : m.output_shardings()) h.ShardingOf(s);
  return h.Hex();
}

namespace {
// Attributes of an instruction that do not follow from its shapes.
bool SameStructure(const Instruction& a, const Instruction& b, bool* constant_only) {
  *constant_only = false;
  if (a.op != b.op || a.operands.size() != b.operands.size()) return false;
  for (size_t k = 0; k < a.operands.size(); ++k) {
    if (a.operands[k]->id != b.operands[k]->id) return false;
  }
  if (IsCollective(a.op))
    return a.dims == b.dims && a.reduce == b.reduce && a.replica_groups == b.replica_groups &&
           a.source_target_pairs == b.source_target_pairs;
  switch (a.op) {
    case Opcode::kBroadcastInDim:
    case Opcode::kTranspose:
    case Opcode::kReduce:
    case Opcode::kIota:
      if (a.dims != b.dims || a.reduce != b.reduce) return false;
      break;
    case Opcode::kReshape:
      if (a.shape.rank() != b.shape.rank()) return false;
      break;
    case Opcode::kDotGeneral:
      if (a.dot.lhs_batch != b.dot.lhs_batch || a.dot.rhs_batch != b.dot.rhs_batch ||
          a.dot.lhs_contracting != b.dot.lhs_contracting ||
          a.dot.rhs_contracting != b.dot.rhs_contracting)
        return false;
      break;
    case Opcode::kCompare:
      if (a.compare != b.compare) return false;
      break;
    case Opcode::kGetTupleElement:
      if (a.dims != b.dims) return false;
      break;
    case Opcode::kWhile:  // a different loop (its trip count included) is a different graph
      if (Fingerprint(*a.cond) != Fingerprint(*b.cond) || Fingerprint(*a.body) != Fingerprint(*b.body)) return false;
      break;
    case Opcode::kConvert:
      if (a.shape.dtype != b.shape.dtype) return false;
      break;
    case Opcode::kConstant:
      if (a.literal->shape().rank() == 0 && b.literal->shape().rank() == 0 &&
          a.literal->GetDouble(0) != b.literal->GetDouble(0)) {
        *constant_only = true;
        return false;
      }
      break;
    default:
      break;
  }
  return true;
}
}  // namespace

ModuleDiff DiffModules(const Module& old_m, const Module& new_m) {
  ModuleDiff d;
  d.parameter_count_old = static_cast<int>(old_m.parameters().size());
  d.parameter_count_new = static_cast<int>(new_m.parameters().size());
  const auto& a = old_m.instructions();
  const auto& b = new_m.instructions();
  size_t n = std::min(a.size(), b.size());
  for (size_t k = 0; k < n; ++k) {
    bool constant_only = false;
    if (!SameStructure(*a[k], *b[k], &constant_only)) {
      ++d.distance;
      if (constant_only) {
        // A scalar constant's value: shape-derived ones (a mean's divisor)
        // change with the inputs; otherwise it is an inlined scalar.
        if (d.first_constant_difference < 0) {
          d.first_constant_difference = static_cast<int64_t>(k);
          d.old_constant = a[k]->literal->GetDouble(0);
          d.new_constant = b[k]->literal->GetDouble(0);
        }
        continue;
      }
      if (d.first_difference < 0) d.first_difference = static_cast<int64_t>(k);
      d.same_structure = false;
    }
  }
  if (a.size() != b.size()) {
    d.same_structure = false;
    if (d.first_difference < 0) d.first_difference = static_cast<int64_t>(n);
    d.distance += std::llabs(static_cast<int64_t>(a.size()) - static_cast<int64_t>(b.size()));
  }
  size_t np = std::min(old_m.parameters().size(), new_m.parameters().size());
  for (size_t k = 0; k < np; ++k) {
    const Instruction* p = old_m.parameters()[k];
    const Instruction* q = new_m.parameters()[k];
    InputDifference diff;
    diff.index = static_cast<int>(k);
    diff.shape = p->shape.dims != q->shape.dims;
    diff.dtype = p->shape.dtype != q->shape.dtype;
    Sharding ps = p->sharding.value_or(Sharding()), qs = q->sharding.value_or(Sharding());
    diff.sharding = ps != qs;
    if (diff.shape || diff.dtype || diff.sharding) {
      d.inputs.push_back(diff);
      ++d.distance;
    }
  }
  return d;
}

}  // namespace shardscope::compiler
