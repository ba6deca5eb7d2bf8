// The IR: typed SSA instructions named as in StableHLO, with HLO-style
// shardings and the user's source location on every instruction. The op list
// is one table (SHARDSCOPE_OPCODES) from which names and arity come.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/literal.h"
#include "compiler/sharding.h"
#include "compiler/types.h"

namespace shardscope::compiler {

// X(enum, StableHLO name, arity (-1: variadic))
#define SHARDSCOPE_OPCODES(X)                                   \
  X(kParameter, "parameter", 0)                                 \
  X(kConstant, "stablehlo.constant", 0)                         \
  X(kIota, "stablehlo.iota", 0)                                 \
  X(kPartitionId, "stablehlo.partition_id", 0)                  \
  X(kAdd, "stablehlo.add", 2)                                   \
  X(kSubtract, "stablehlo.subtract", 2)                         \
  X(kMultiply, "stablehlo.multiply", 2)                         \
  X(kDivide, "stablehlo.divide", 2)                             \
  X(kMaximum, "stablehlo.maximum", 2)                           \
  X(kMinimum, "stablehlo.minimum", 2)                           \
  X(kNegate, "stablehlo.negate", 1)                             \
  X(kExponential, "stablehlo.exponential", 1)                   \
  X(kLog, "stablehlo.log", 1)                                   \
  X(kCompare, "stablehlo.compare", 2)                           \
  X(kSelect, "stablehlo.select", 3)                             \
  X(kConvert, "stablehlo.convert", 1)                           \
  X(kBroadcastInDim, "stablehlo.broadcast_in_dim", 1)           \
  X(kReshape, "stablehlo.reshape", 1)                           \
  X(kTranspose, "stablehlo.transpose", 1)                       \
  X(kDotGeneral, "stablehlo.dot_general", 2)                    \
  X(kReduce, "stablehlo.reduce", 2)                             \
  X(kDynamicSlice, "stablehlo.dynamic_slice", -1)               \
  X(kAllReduce, "stablehlo.all_reduce", 1)                      \
  X(kAllGather, "stablehlo.all_gather", 1)

enum class Opcode {
#define SHARDSCOPE_OP_ENUM(e, name, arity) e,
  SHARDSCOPE_OPCODES(SHARDSCOPE_OP_ENUM)
#undef SHARDSCOPE_OP_ENUM
};

const char* OpcodeName(Opcode op);
int OpcodeArity(Opcode op);
bool IsElementwise(Opcode op);
bool IsCollective(Opcode op);

enum class ReduceKind { kSum, kMax, kMin, kProd };
const char* ReduceKindOp(ReduceKind k);  // the body's op, e.g. "stablehlo.add"

enum class CompareDirection { kEQ, kNE, kLT, kLE, kGT, kGE };
const char* CompareDirectionName(CompareDirection d);

struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contracting, rhs_contracting;
};

// Where the user's code created an op. Side data: never part of a fingerprint.
struct SourceLoc {
  std::string file;  // relative to the source tree, e.g. "samples/mlp.cc"
  int line = 0;
  std::string function;
  bool known() const { return line > 0; }
};

struct Instruction {
  int64_t id = 0;  // unique within its module, in creation order
  Opcode op = Opcode::kConstant;
  Shape shape;
  std::vector<Instruction*> operands;

  // Attributes; which apply depends on `op`:
  //  broadcast_in_dim: broadcast dimensions; transpose: permutation;
  //  reduce: dimensions; iota: {iota_dimension}; dynamic_slice: slice sizes;
  //  all_gather: {all_gather_dim}.
  std::vector<int64_t> dims;
  DotDims dot;
  ReduceKind reduce = ReduceKind::kSum;                   // reduce, all_reduce
  CompareDirection compare = CompareDirection::kEQ;
  std::optional<Literal> literal;                         // constant
  int64_t param_index = -1;                               // parameter
  std::string name;                                       // parameter name, e.g. "l1.weight"
  std::optional<Sharding> sharding;
  std::vector<std::vector<int64_t>> replica_groups;       // collectives

  SourceLoc loc;
  std::string scope;  // module path, e.g. "layers.0.attn"
};

class Module {
 public:
  explicit Module(std::string name = "main") : name_(std::move(name)) {}

  // Instructions in creation order, which is a topological order.
  const std::vector<std::unique_ptr<Instruction>>& instructions() const { return instrs_; }
  const std::vector<Instruction*>& parameters() const { return params_; }
  const std::vector<Instruction*>& outputs() const { return outputs_; }
  void AddOutput(Instruction* i) { outputs_.push_back(i); }
  void SetOutputs(std::vector<Instruction*> outs) { outputs_ = std::move(outs); }
  const std::string& name() const { return name_; }
  int num_partitions() const { return num_partitions_; }
  void set_num_partitions(int n) { num_partitions_ = n; }
  // Output shardings after propagation (global modules) — one per output.
  std::vector<Sharding>& output_shardings() { return output_shardings_; }
  const std::vector<Sharding>& output_shardings() const { return output_shardings_; }

  // Builders. Each infers the result shape; the verifier checks the whole module.
  Instruction* Parameter(const Shape& shape, std::string name, const SourceLoc& loc = {});
  Instruction* Constant(Literal value, const SourceLoc& loc = {});
  Instruction* ScalarConstant(DType t, double v, const SourceLoc& loc = {});
  Instruction* Iota(const Shape& shape, int64_t dim, const SourceLoc& loc = {});
  Instruction* PartitionId();
  Instruction* Binary(Opcode op, Instruction* a, Instruction* b, const SourceLoc& loc = {});
  Instruction* Unary(Opcode op, Instruction* a, const SourceLoc& loc = {});
  Instruction* Compare(Instruction* a, Instruction* b, CompareDirection d, const SourceLoc& loc = {});
  Instruction* Select(Instruction* pred, Instruction* t, Instruction* f, const SourceLoc& loc = {});
  Instruction* Convert(Instruction* a, DType to, const SourceLoc& loc = {});
  Instruction* BroadcastInDim(Instruction* a, std::vector<int64_t> out_dims,
                              std::vector<int64_t> broadcast_dims, const SourceLoc& loc = {});
  Instruction* Reshape(Instruction* a, std::vector<int64_t> out_dims, const SourceLoc& loc = {});
  Instruction* Transpose(Instruction* a, std::vector<int64_t> perm, const SourceLoc& loc = {});
  Instruction* DotGeneral(Instruction* a, Instruction* b, DotDims dims, const SourceLoc& loc = {});
  Instruction* Reduce(Instruction* a, Instruction* init, std::vector<int64_t> dims, ReduceKind k,
                      const SourceLoc& loc = {});
  Instruction* DynamicSlice(Instruction* a, std::vector<Instruction*> starts,
                            std::vector<int64_t> sizes, const SourceLoc& loc = {});
  Instruction* AllReduce(Instruction* a, ReduceKind k, std::vector<std::vector<int64_t>> groups,
                         const SourceLoc& loc = {});
  Instruction* AllGather(Instruction* a, int64_t dim, std::vector<std::vector<int64_t>> groups,
                         const SourceLoc& loc = {});

  // Adds an instruction built elsewhere (e.g. by a pass); assigns its id.
  Instruction* Add(std::unique_ptr<Instruction> instr);

 private:
  Instruction* New(Opcode op, Shape shape, std::vector<Instruction*> operands, const SourceLoc& loc);

  std::string name_;
  int num_partitions_ = 1;
  int64_t next_id_ = 0;
  std::vector<std::unique_ptr<Instruction>> instrs_;
  std::vector<Instruction*> params_;
  std::vector<Instruction*> outputs_;
  std::vector<Sharding> output_shardings_;
};

// Checks types, arities and attributes of every instruction. Errors name the
// instruction and its source line.
absl::Status Verify(const Module& m);

// FLOPs of one instruction (2 per multiply-add for dot_general, 1 per element
// for elementwise ops and reductions).
double InstructionFlops(const Instruction& i);

}  // namespace shardscope::compiler
