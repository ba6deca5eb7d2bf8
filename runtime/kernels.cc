// EvalInstruction: checks that the operands match the instruction, then hands
// each op to its kernel (elementwise, data movement, slicing, gather/scatter,
// reduce, reduce_window, dot_general, convolution live in their own files).
// The small sources (constant, iota, partition_id, rng_bit_generator) are
// here, and the bf16/f16 rule: ops that only move data run on the 16-bit
// values directly; every other op gets its 16-bit operands widened to f32, runs
// the f32 kernel (so sums and GEMMs accumulate in f32) and rounds the result
// back once. Also the shared helpers of kernels_internal.h that need a home.
#include "runtime/kernels.h"
#include "runtime/mix.h"

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

Unsupported::operator absl::Status() const {
  if (convert)
    return Unimplemented(*instr, "convert from ", DTypeName(type), " to ", DTypeName(to),
                         " is not computed by this build (supported: f32, f64, i32, i64, i1)");
  if (type == DType::kBF16 || type == DType::kF16) {
    return Unimplemented(*instr, "element type ", DTypeName(type),
                         " is not computed by this build's kernels (convert to f32 first)");
  }
  return Invalid(*instr, "element type ", DTypeName(type), " is not valid for this op");
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
  // out's type, not instr's: a bf16 iota arrives here as f32 (see Widened).
  const auto& dims = out->shape().dims;
  if (instr.dims.size() != 1 || instr.dims[0] < 0 || instr.dims[0] >= instr.shape.rank()) {
    return Invalid(instr, "iota dimension must be one index below the rank ", instr.shape.rank());
  }
  const int d = static_cast<int>(instr.dims[0]);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= dims[i];
  for (int i = d + 1; i < out->shape().rank(); ++i) inner *= dims[i];
  const int64_t len = dims[d];
  return internal::VisitArith(
      out->shape().dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* o = out->as<T>();
        // One [len, inner] block, then copies of it for every outer index.
        for (int64_t k = 0; k < len; ++k) {
          if (inner == 1) o[k] = static_cast<T>(k);
          else std::fill_n(o + k * inner, inner, static_cast<T>(k));
        }
        for (int64_t a = 1; a < outer; ++a) std::memcpy(o + a * len * inner, o, static_cast<size_t>(len * inner) * sizeof(T));
        return absl::OkStatus();
      },
      internal::UnsupportedType(instr, out->shape().dtype));
}

// Counter-based: element k of the output is SplitMix64(key' + k * golden) with
// key' = state[0] ^ SplitMix64(state[1]), so any element is computable on its own
// (a sharded program can make just its slice) and the same state always gives
// the same bits. i32 outputs keep the high 32 bits.
absl::Status EvalRngBitGenerator(const Instruction& instr, const Literal& state, Literal* out) {
  if (state.shape() != Shape(DType::kI64, {2})) return Invalid(instr, "the state must be tensor<2xi64>");
  const uint64_t key =
      static_cast<uint64_t>(state.as<int64_t>()[0]) ^ SplitMix64(static_cast<uint64_t>(state.as<int64_t>()[1]));
  const int64_t n = out->elements();
  switch (out->shape().dtype) {
    case DType::kI64:
      for (int64_t k = 0; k < n; ++k)
        out->as<int64_t>()[k] =
            static_cast<int64_t>(SplitMix64(key + static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ull));
      return absl::OkStatus();
    case DType::kI32:
      for (int64_t k = 0; k < n; ++k)
        out->as<int32_t>()[k] =
            static_cast<int32_t>(SplitMix64(key + static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ull) >> 32);
      return absl::OkStatus();
    default:
      return Invalid(instr, "random bits are i32 or i64, not ", out->shape().ToString());
  }
}

// The first operand, copied (the executor gives every value its own buffer);
// the other operands were only waited for.
absl::Status EvalOptimizationBarrier(const Instruction& instr, const Literal& a, Literal* out) {
  if (a.shape() != out->shape())
    return Invalid(instr, "operand ", a.shape().ToString(), " differs from the result ", out->shape().ToString());
  if (a.bytes() > 0) std::memcpy(out->data(), a.data(), static_cast<size_t>(a.bytes()));
  return absl::OkStatus();
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

bool IsHalf(DType t) { return t == DType::kBF16 || t == DType::kF16; }

// Ops that only move elements: they run on 16-bit floats as they are.
bool MovesData(const Instruction& instr) {
  switch (instr.op) {
    case Opcode::kConstant: case Opcode::kBroadcastInDim: case Opcode::kReshape: case Opcode::kTranspose:
    case Opcode::kDynamicSlice: case Opcode::kDynamicUpdateSlice: case Opcode::kSlice: case Opcode::kPad:
    case Opcode::kConcatenate: case Opcode::kGather: case Opcode::kSelect: case Opcode::kOptimizationBarrier:
      return true;
    default:  // scatter too: a replacing scatter passes values through f32 exactly
      return false;
  }
}

bool NeedsWidening(const Instruction& instr, const std::vector<const Literal*>& ops, const Literal& out) {
  if (MovesData(instr)) return false;
  if (instr.op == Opcode::kConvert && ops[0]->shape().dtype == out.shape().dtype) return false;
  if (IsHalf(out.shape().dtype)) return true;
  for (const Literal* l : ops)
    if (IsHalf(l->shape().dtype)) return true;
  return false;
}

absl::Status Dispatch(const Instruction& instr, const std::vector<const Literal*>& operands, int64_t partition_id,
                      Literal* out) {
  switch (instr.op) {
    case Opcode::kConstant: return EvalConstant(instr, out);
    case Opcode::kIota: return EvalIota(instr, out);
    case Opcode::kPartitionId: return EvalPartitionId(instr, partition_id, out);
    case Opcode::kRngBitGenerator: return EvalRngBitGenerator(instr, *operands[0], out);
    case Opcode::kOptimizationBarrier: return EvalOptimizationBarrier(instr, *operands[0], out);
    case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kPower: case Opcode::kNegate:
    case Opcode::kExponential: case Opcode::kLog: case Opcode::kAbs: case Opcode::kLogistic:
    case Opcode::kTanh: case Opcode::kSqrt: case Opcode::kRsqrt: case Opcode::kClamp:
    case Opcode::kCompare: case Opcode::kSelect: case Opcode::kConvert:
      return internal::EvalElementwise(instr, operands, out);
    case Opcode::kBroadcastInDim:
    case Opcode::kReshape:
    case Opcode::kTranspose:
    case Opcode::kDynamicSlice:
      return internal::EvalDataMovement(instr, operands, out);
    case Opcode::kSlice: case Opcode::kPad: case Opcode::kConcatenate: case Opcode::kDynamicUpdateSlice:
      return internal::EvalSlicing(instr, operands, out);
    case Opcode::kGather: return internal::EvalGather(instr, *operands[0], *operands[1], out);
    case Opcode::kScatter: return internal::EvalScatter(instr, *operands[0], *operands[1], *operands[2], out);
    case Opcode::kReduce: return internal::EvalReduce(instr, *operands[0], *operands[1], out);
    case Opcode::kReduceWindow: return internal::EvalReduceWindow(instr, *operands[0], *operands[1], out);
    case Opcode::kDotGeneral:
      return internal::EvalDotGeneral(instr, *operands[0], *operands[1], out);
    case Opcode::kConvolution: return internal::EvalConvolution(instr, *operands[0], *operands[1], out);
    default: break;
  }
  return internal::Unimplemented(instr, "no kernel for this op");
}

// Runs `instr` in f32 on widened copies of its 16-bit operands and rounds an
// f32 result back to the 16-bit result type.
absl::Status Widened(const Instruction& instr, const std::vector<const Literal*>& operands, int64_t partition_id,
                     Literal* out) {
  std::vector<Literal> wide(operands.size());
  std::vector<const Literal*> ops(operands.size());
  for (size_t k = 0; k < operands.size(); ++k) {
    const Literal& l = *operands[k];
    if (!IsHalf(l.shape().dtype)) {
      ops[k] = &l;
      continue;
    }
    wide[k] = Literal(Shape(DType::kF32, l.shape().dims));
    internal::HalfToF32(l.shape().dtype, l.data(), wide[k].as<float>(), l.elements());
    ops[k] = &wide[k];
  }
  const DType t = out->shape().dtype;
  if (!IsHalf(t)) return Dispatch(instr, ops, partition_id, out);
  Literal wide_out(Shape(DType::kF32, out->shape().dims));
  if (absl::Status s = Dispatch(instr, ops, partition_id, &wide_out); !s.ok()) return s;
  internal::F32ToHalf(t, wide_out.as<float>(), out->data(), out->elements());
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

  if (NeedsWidening(instr, operands, *out)) return Widened(instr, operands, partition_id, out);
  return Dispatch(instr, operands, partition_id, out);
}

}  // namespace shardscope::runtime
