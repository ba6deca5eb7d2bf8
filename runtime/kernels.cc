// EvalInstruction: checks that the operands match the instruction, then hands
// each op to its kernel (elementwise, data movement, reduce, dot_general live
// in their own files). The small sources (constant, iota, partition_id) are
// here. Also the shared helpers of kernels_internal.h that need a home.
#include "runtime/kernels.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/kernels_internal.h"

namespace shardscope::runtime {
namespace internal {

std::string Describe(const Instruction& instr) {
  std::string s = absl::StrCat(compiler::OpcodeName(instr.op), " (%", instr.id);
  if (instr.loc.known()) absl::StrAppend(&s, ", ", instr.loc.file, ":", instr.loc.line);
  absl::StrAppend(&s, ")");
  return s;
}

absl::Status UnsupportedType(const Instruction& instr, DType t) {
  if (t == DType::kBF16 || t == DType::kF16) {
    return Unimplemented(instr, "element type ", DTypeName(t),
                         " is not computed by this build's kernels (convert to f32 first)");
  }
  return Invalid(instr, "element type ", DTypeName(t), " is not valid for this op");
}

void* Scratch(int slot, int64_t bytes) {
  // Never shrinks: the same sizes recur every step, and memory handed back to
  // the OS would page-fault again on the next step.
  thread_local std::vector<uint8_t> buffers[4];
  std::vector<uint8_t>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < bytes) b.resize(static_cast<size_t>(bytes));
  return b.data();
}

}  // namespace internal

namespace {

using compiler::Instruction;
using compiler::Opcode;
using internal::Invalid;
using internal::TypeTag;

absl::Status EvalConstant(const Instruction& instr, Literal* out) {
  if (!instr.literal.has_value()) return Invalid(instr, "constant has no value");
  const Literal& v = *instr.literal;
  if (v.shape().dtype != instr.shape.dtype) {
    return Invalid(instr, "constant value is ", v.shape().ToString(), " but its type is ",
                   instr.shape.ToString());
  }
  const int64_t n = instr.shape.elements();
  const int64_t eb = DTypeBytes(instr.shape.dtype);
  if (v.elements() == n) {
    if (n > 0) std::memcpy(out->data(), v.data(), static_cast<size_t>(n * eb));
    return absl::OkStatus();
  }
  if (v.elements() == 1) {  // a splat: one value for the whole shape
    internal::StridedCopy(v.data(), out->data(), eb, {n}, {0});
    return absl::OkStatus();
  }
  return Invalid(instr, "constant value has ", v.elements(), " elements; its type ",
                 instr.shape.ToString(), " needs ", n, " (or 1, a splat)");
}

absl::Status EvalIota(const Instruction& instr, Literal* out) {
  const auto& dims = instr.shape.dims;
  if (instr.dims.size() != 1 || instr.dims[0] < 0 || instr.dims[0] >= instr.shape.rank()) {
    return Invalid(instr, "iota dimension must be one index below the rank ", instr.shape.rank());
  }
  const int d = static_cast<int>(instr.dims[0]);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= dims[i];
  for (int i = d + 1; i < instr.shape.rank(); ++i) inner *= dims[i];
  const int64_t len = dims[d];
  return internal::VisitArith(
      instr.shape.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* o = out->as<T>();
        for (int64_t a = 0; a < outer; ++a) {
          for (int64_t k = 0; k < len; ++k) {
            std::fill_n(o, inner, static_cast<T>(k));
            o += inner;
          }
        }
        return absl::OkStatus();
      },
      internal::UnsupportedType(instr, instr.shape.dtype));
}

absl::Status EvalPartitionId(const Instruction& instr, int64_t partition_id, Literal* out) {
  if (instr.shape.elements() != 1) return Invalid(instr, "partition_id must be a scalar");
  switch (instr.shape.dtype) {
    case DType::kI32: *out->as<int32_t>() = static_cast<int32_t>(partition_id); break;
    case DType::kI64: *out->as<int64_t>() = partition_id; break;
    default: return Invalid(instr, "partition_id must be i32 or i64, not ", instr.shape.ToString());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EvalInstruction(const compiler::Instruction& instr,
                             const std::vector<const Literal*>& operands,
                             int64_t partition_id, Literal* out) {
  if (out == nullptr) return Invalid(instr, "no output buffer");
  if (out->shape() != instr.shape || out->bytes() != instr.shape.bytes()) {
    return Invalid(instr, "output buffer is ", out->shape().ToString(),
                   " but the instruction's type is ", instr.shape.ToString());
  }
  if (compiler::IsCollective(instr.op)) {
    return Invalid(instr, "collectives are run by the runtime's collectives, not as a kernel");
  }
  if (instr.op == Opcode::kParameter) {
    return Invalid(instr, "parameters are bound by the executor, not computed");
  }
  const int arity = compiler::OpcodeArity(instr.op);
  if (arity >= 0 ? static_cast<int>(operands.size()) != arity : operands.empty()) {
    return Invalid(instr, "got ", operands.size(), " operands, expected ",
                   arity >= 0 ? absl::StrCat(arity) : std::string("at least 1"));
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    const Literal* lit = operands[i];
    if (lit == nullptr) return Invalid(instr, "operand ", i, " is missing");
    if (lit->bytes() != lit->shape().bytes()) {
      return Invalid(instr, "operand ", i, " holds ", lit->bytes(), " bytes, not the ",
                     lit->shape().bytes(), " of ", lit->shape().ToString());
    }
    // When the IR operands are present, the values must have their types; a
    // mismatch is an executor bug that would otherwise compute garbage.
    if (instr.operands.size() == operands.size() && instr.operands[i] != nullptr &&
        instr.operands[i]->shape != lit->shape()) {
      return Invalid(instr, "operand ", i, " is ", lit->shape().ToString(),
                     " but the instruction expects ", instr.operands[i]->shape.ToString());
    }
  }

  switch (instr.op) {
    case Opcode::kConstant: return EvalConstant(instr, out);
    case Opcode::kIota: return EvalIota(instr, out);
    case Opcode::kPartitionId: return EvalPartitionId(instr, partition_id, out);
    case Opcode::kAdd:
    case Opcode::kSubtract:
    case Opcode::kMultiply:
    case Opcode::kDivide:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kNegate:
    case Opcode::kExponential:
    case Opcode::kLog:
    case Opcode::kCompare:
    case Opcode::kSelect:
    case Opcode::kConvert:
      return internal::EvalElementwise(instr, operands, out);
    case Opcode::kBroadcastInDim:
    case Opcode::kReshape:
    case Opcode::kTranspose:
    case Opcode::kDynamicSlice:
      return internal::EvalDataMovement(instr, operands, out);
    case Opcode::kReduce: return internal::EvalReduce(instr, *operands[0], *operands[1], out);
    case Opcode::kDotGeneral:
      return internal::EvalDotGeneral(instr, *operands[0], *operands[1], out);
    default: break;
  }
  return internal::Unimplemented(instr, "no kernel for this op");
}

}  // namespace shardscope::runtime
