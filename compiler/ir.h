// The IR: typed SSA instructions named as in StableHLO, with HLO-style
// shardings and the user's source location on every instruction. The op list
// is one table (SHARDSCOPE_OPCODES) from which names and arity come.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
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
  X(kAbs, "stablehlo.abs", 1)                                   \
  X(kLogistic, "stablehlo.logistic", 1)                         \
  X(kTanh, "stablehlo.tanh", 1)                                 \
  X(kSqrt, "stablehlo.sqrt", 1)                                 \
  X(kRsqrt, "stablehlo.rsqrt", 1)                               \
  X(kPower, "stablehlo.power", 2)                               \
  X(kClamp, "stablehlo.clamp", 3)                               \
  X(kCompare, "stablehlo.compare", 2)                           \
  X(kSelect, "stablehlo.select", 3)                             \
  X(kConvert, "stablehlo.convert", 1)                           \
  X(kBroadcastInDim, "stablehlo.broadcast_in_dim", 1)           \
  X(kReshape, "stablehlo.reshape", 1)                           \
  X(kTranspose, "stablehlo.transpose", 1)                       \
  X(kDotGeneral, "stablehlo.dot_general", 2)                    \
  X(kReduce, "stablehlo.reduce", 2)                             \
  X(kDynamicSlice, "stablehlo.dynamic_slice", -1)               \
  X(kDynamicUpdateSlice, "stablehlo.dynamic_update_slice", -1)  \
  X(kSlice, "stablehlo.slice", 1)                               \
  X(kPad, "stablehlo.pad", 2)                                   \
  X(kConcatenate, "stablehlo.concatenate", -1)                  \
  X(kConvolution, "stablehlo.convolution", 2)                   \
  X(kReduceWindow, "stablehlo.reduce_window", 2)                \
  X(kGather, "stablehlo.gather", 2)                             \
  X(kScatter, "stablehlo.scatter", 3)                           \
  X(kRngBitGenerator, "stablehlo.rng_bit_generator", 1)         \
  X(kOptimizationBarrier, "stablehlo.optimization_barrier", -1) \
  X(kAllReduce, "stablehlo.all_reduce", 1)                      \
  X(kAllGather, "stablehlo.all_gather", 1)                      \
  X(kReduceScatter, "stablehlo.reduce_scatter", 1)              \
  X(kAllToAll, "stablehlo.all_to_all", 1)                       \
  X(kCollectivePermute, "stablehlo.collective_permute", 1)      \
  X(kCollectiveBroadcast, "stablehlo.collective_broadcast", 1)  \
  X(kWhile, "stablehlo.while", -1)                              \
  X(kGetTupleElement, "get_tuple_element", 1)

enum class Opcode {
#define SHARDSCOPE_OP_ENUM(e, name, arity) e,
  SHARDSCOPE_OPCODES(SHARDSCOPE_OP_ENUM)
#undef SHARDSCOPE_OP_ENUM
};

const char* OpcodeName(Opcode op);
int OpcodeArity(Opcode op);
bool IsElementwise(Opcode op);
bool IsCollective(Opcode op);
// Collectives whose participants are replica_groups (all but collective_permute).
bool HasReplicaGroups(Opcode op);

enum class ReduceKind { kSum, kMax, kMin, kProd };
const char* ReduceKindOp(ReduceKind k);  // the body's op, e.g. "stablehlo.add"
// The value combining with which changes nothing: 0 for a sum, 1 for a
// product, the type's lowest (-inf for floats) for a max, its highest for a min.
double ReduceIdentity(ReduceKind k, DType t);

enum class CompareDirection { kEQ, kNE, kLT, kLE, kGT, kGE };
const char* CompareDirectionName(CompareDirection d);

struct DotDims {
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contracting, rhs_contracting;
};
// Dims of a rank-`rank` operand that are neither batch nor contracting, in
// order (a dot's free dims; the result lists batch, lhs free, rhs free).
std::vector<int64_t> FreeDims(int rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contracting);

// slice: result[i] = operand[start + i * stride] for start <= ... < limit.
// pad: `low`/`high` may be negative (cropping); `interior` >= 0 between elements.
struct SliceDims {
  std::vector<int64_t> start, limit, stride;
};
struct PadDims {
  std::vector<int64_t> low, high, interior;
};

// convolution, in StableHLO's terms. Spatial dimension k of the input, kernel
// and output are paired by position in the *_spatial lists; the window
// attributes have one entry per spatial dimension (empty: stride 1, no
// padding, dilation 1).
struct ConvDims {
  int64_t input_batch = 0, input_feature = 1;
  std::vector<int64_t> input_spatial;
  int64_t kernel_input_feature = 1, kernel_output_feature = 0;
  std::vector<int64_t> kernel_spatial;
  int64_t output_batch = 0, output_feature = 1;
  std::vector<int64_t> output_spatial;
  std::vector<int64_t> window_strides;
  std::vector<std::pair<int64_t, int64_t>> padding;  // (low, high) per spatial dim
  std::vector<int64_t> lhs_dilation, rhs_dilation;
  int64_t feature_group_count = 1, batch_group_count = 1;
};

// reduce_window: one entry per operand dimension (empty lists: 1 / no padding).
struct WindowDims {
  std::vector<int64_t> dimensions, strides, base_dilations, window_dilations;
  std::vector<std::pair<int64_t, int64_t>> padding;
};

// gather and scatter dimension numbers (StableHLO's, without the batching dims).
struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> slice_sizes;
  bool indices_are_sorted = false;
};
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
  bool indices_are_sorted = false, unique_indices = false;
  // The update computation: `reduce` of the instruction combines the current
  // value with the update (add for embedding gradients), unless `replace`,
  // where the update overwrites (a region returning its second argument).
  bool replace = false;
};

class Module;

// Where the user's code created an op. Side data: never part of a fingerprint.
struct SourceLoc {
  std::string file;  // relative to the source tree, e.g. "samples/mlp.cc"
  int line = 0;
  // The library call between the user's line and the op, when the op was made
  // inside one (e.g. "optim::AdamW::step"); empty when the user made it.
  std::string via;
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
  //  all_gather: {all_gather_dim}; concatenate: {dimension};
  //  reduce_scatter: {scatter_dimension};
  //  all_to_all: {split_dimension, concat_dimension, split_count}.
  std::vector<int64_t> dims;
  DotDims dot;
  SliceDims slice;                                        // slice
  PadDims pad;                                            // pad
  ConvDims conv;                                          // convolution
  WindowDims window;                                      // reduce_window
  GatherDims gather;                                      // gather
  ScatterDims scatter;                                    // scatter
  ReduceKind reduce = ReduceKind::kSum;  // reduce, reduce_window, scatter, all_reduce, reduce_scatter
  CompareDirection compare = CompareDirection::kEQ;
  std::optional<Literal> literal;                         // constant
  int64_t param_index = -1;                               // parameter
  std::string name;                                       // parameter name, e.g. "l1.weight"
  std::optional<Sharding> sharding;
  std::vector<std::vector<int64_t>> replica_groups;       // collectives but collective_permute
  // collective_permute: (source, target) device pairs. Not kept in
  // replica_groups, whose rows are disjoint groups to everything that reads them.
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
  // while: the loop's regions, closed modules over the carried values (one
  // parameter each, in operand order): `cond` returns one i1 scalar, `body`
  // the next carried values. Shared, never changed once built.
  std::shared_ptr<const Module> cond, body;

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
  // `result_type`: the result's element type when it is not the operands'
  // (f32 for bf16/f16 operands: accumulate and return in f32).
  Instruction* DotGeneral(Instruction* a, Instruction* b, DotDims dims, const SourceLoc& loc = {},
                          std::optional<DType> result_type = std::nullopt);
  Instruction* Reduce(Instruction* a, Instruction* init, std::vector<int64_t> dims, ReduceKind k,
                      const SourceLoc& loc = {});
  Instruction* DynamicSlice(Instruction* a, std::vector<Instruction*> starts,
                            std::vector<int64_t> sizes, const SourceLoc& loc = {});
  Instruction* AllReduce(Instruction* a, ReduceKind k, std::vector<std::vector<int64_t>> groups,
                         const SourceLoc& loc = {});
  Instruction* AllGather(Instruction* a, int64_t dim, std::vector<std::vector<int64_t>> groups,
                         const SourceLoc& loc = {});
  // Member k of a group gets block k (along `dim`) of the group's reduction.
  // Empty groups: all num_partitions() devices.
  Instruction* ReduceScatter(Instruction* a, int64_t dim, ReduceKind k,
                             std::vector<std::vector<int64_t>> groups, const SourceLoc& loc = {});
  // Each member splits its value into `split_count` blocks along `split_dim`,
  // sends block j to member j, and concatenates what it receives (in member
  // order) along `concat_dim`.
  Instruction* AllToAll(Instruction* a, int64_t split_dim, int64_t concat_dim, int64_t split_count,
                        std::vector<std::vector<int64_t>> groups, const SourceLoc& loc = {});
  // Each target gets its source's value; a device that is no pair's target gets zeros.
  Instruction* CollectivePermute(Instruction* a, std::vector<std::pair<int64_t, int64_t>> source_target_pairs,
                                 const SourceLoc& loc = {});
  // Every member of a group gets the group's first member's value.
  Instruction* CollectiveBroadcast(Instruction* a, std::vector<std::vector<int64_t>> groups,
                                   const SourceLoc& loc = {});

  // clamp(min, x, max); min and max may be scalars.
  Instruction* Clamp(Instruction* lo, Instruction* x, Instruction* hi, const SourceLoc& loc = {});
  Instruction* Slice(Instruction* a, SliceDims s, const SourceLoc& loc = {});
  Instruction* DynamicUpdateSlice(Instruction* a, Instruction* update,
                                  std::vector<Instruction*> starts, const SourceLoc& loc = {});
  Instruction* Pad(Instruction* a, Instruction* value, PadDims p, const SourceLoc& loc = {});
  Instruction* Concatenate(std::vector<Instruction*> parts, int64_t dim, const SourceLoc& loc = {});
  Instruction* Convolution(Instruction* lhs, Instruction* rhs, ConvDims c, const SourceLoc& loc = {},
                           std::optional<DType> result_type = std::nullopt);
  Instruction* ReduceWindow(Instruction* a, Instruction* init, WindowDims w, ReduceKind k,
                            const SourceLoc& loc = {});
  Instruction* Gather(Instruction* a, Instruction* indices, GatherDims g, const SourceLoc& loc = {});
  Instruction* Scatter(Instruction* a, Instruction* indices, Instruction* updates, ScatterDims s,
                       ReduceKind k, const SourceLoc& loc = {});
  // Random bits of type `shape` (i32 or i64) from a tensor<2xi64> state; the
  // same state gives the same bits. Unlike StableHLO it returns only the bits:
  // callers advance the state themselves (e.g. add 1 per step).
  Instruction* RngBitGenerator(Instruction* state, const Shape& shape, const SourceLoc& loc = {});
  // `a` unchanged, but not available before every value in `after` is: the
  // compiler may neither merge it with an equal value (CSE) nor compute what
  // uses it earlier. StableHLO's optimization_barrier returns all its
  // operands; ours returns the first and holds the rest (their unused results).
  Instruction* OptimizationBarrier(Instruction* a, std::vector<Instruction*> after = {},
                                   const SourceLoc& loc = {});

  // A loop over carried values: while cond(values) is true, values = body(values).
  // Returns one get_tuple_element per carried value (the loop's results; the
  // while instruction itself holds no value, its shape is the empty
  // placeholder tensor<0xi1>). `cond` and `body` take one parameter per
  // value of `init`, in order.
  std::vector<Instruction*> While(std::vector<Instruction*> init, std::shared_ptr<const Module> cond,
                                  std::shared_ptr<const Module> body, const SourceLoc& loc = {});
  // Result `index` of a while.
  Instruction* GetTupleElement(Instruction* w, int64_t index, const SourceLoc& loc = {});

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

// The result type an instruction's operands and attributes imply (its own
// `shape` is not read, except for the ops whose result type is an attribute:
// parameter, constant, iota, reshape, convert, rng_bit_generator, and the
// element type of dot_general and convolution, which may be f32 for bf16/f16
// operands, and the group size of a reduce_scatter with empty replica_groups,
// read from its scatter dimension). The builders
// use it and leave -1 dims on failure; the verifier reports its error.
absl::StatusOr<Shape> InferShape(const Instruction& i);

// Checks types, arities and attributes of every instruction. Errors name the
// instruction and its source line.
absl::Status Verify(const Module& m);

// The placeholder type of a while instruction itself (it holds no value).
Shape WhilePlaceholderShape();

// How many times a while's body runs when that is plain from the program: the
// loop counts a scalar integer from a constant init by a constant step in the
// body, compared with a constant in the condition. nullopt otherwise.
std::optional<int64_t> StaticTripCount(const Instruction& w);

// FLOPs of one instruction (2 per multiply-add for dot_general and
// convolution, a convolution's counting only the window taps that land on
// input elements, not padding or an lhs dilation's holes; 1 per element for
// elementwise ops and reductions).
double InstructionFlops(const Instruction& i);

}  // namespace shardscope::compiler
