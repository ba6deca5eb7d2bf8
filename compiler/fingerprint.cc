#include "compiler/fingerprint.h"

#include <xxhash.h>

#include <cstdlib>

#include "absl/strings/str_format.h"
#include "compiler/text.h"

namespace shardscope::compiler {

std::string Fingerprint(const Module& m) {
  std::string text = PrintModule(m, PrintOptions{.locations = false, .names = false});
  XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return absl::StrFormat("%016x%016x", h.high64, h.low64);
}

namespace {
// Attributes of an instruction that do not follow from its shapes.
bool SameStructure(const Instruction& a, const Instruction& b, bool* constant_only) {
  *constant_only = false;
  if (a.op != b.op || a.operands.size() != b.operands.size()) return false;
  for (size_t k = 0; k < a.operands.size(); ++k) {
    if (a.operands[k]->id != b.operands[k]->id) return false;
  }
  switch (a.op) {
    case Opcode::kBroadcastInDim:
    case Opcode::kTranspose:
    case Opcode::kReduce:
    case Opcode::kIota:
    case Opcode::kAllGather:
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
