#include "compiler/ir.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardscope::compiler {

const char* OpcodeName(Opcode op) {
  switch (op) {
#define SHARDSCOPE_OP_NAME(e, name, arity) \
  case Opcode::e:                          \
    return name;
    SHARDSCOPE_OPCODES(SHARDSCOPE_OP_NAME)
#undef SHARDSCOPE_OP_NAME
  }
  return "?";
}

int OpcodeArity(Opcode op) {
  switch (op) {
#define SHARDSCOPE_OP_ARITY(e, name, arity) \
  case Opcode::e:                           \
    return arity;
    SHARDSCOPE_OPCODES(SHARDSCOPE_OP_ARITY)
#undef SHARDSCOPE_OP_ARITY
  }
  return 0;
}

bool IsElementwise(Opcode op) {
  switch (op) {
    case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kNegate:
    case Opcode::kExponential: case Opcode::kLog: case Opcode::kCompare: case Opcode::kSelect:
    case Opcode::kConvert: case Opcode::kAbs: case Opcode::kLogistic: case Opcode::kTanh:
    case Opcode::kSqrt: case Opcode::kRsqrt: case Opcode::kPower: case Opcode::kClamp:
      return true;
    default:
      return false;
  }
}

bool IsCollective(Opcode op) {
  switch (op) {
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
    case Opcode::kCollectiveBroadcast:
      return true;
    default:
      return false;
  }
}

bool HasReplicaGroups(Opcode op) { return IsCollective(op) && op != Opcode::kCollectivePermute; }

const char* ReduceKindOp(ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum: return "stablehlo.add";
    case ReduceKind::kMax: return "stablehlo.maximum";
    case ReduceKind::kMin: return "stablehlo.minimum";
    case ReduceKind::kProd: return "stablehlo.multiply";
  }
  return "?";
}

double ReduceIdentity(ReduceKind k, DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  const double highest = IsFloat(t)          ? inf
                         : t == DType::kI1   ? 1
                         : t == DType::kI32  ? std::numeric_limits<int32_t>::max()
                                             : static_cast<double>(std::numeric_limits<int64_t>::max());
  const double lowest = IsFloat(t)          ? -inf
                        : t == DType::kI1   ? 0
                        : t == DType::kI32  ? std::numeric_limits<int32_t>::lowest()
                                            : static_cast<double>(std::numeric_limits<int64_t>::lowest());
  switch (k) {
    case ReduceKind::kSum: return 0;
    case ReduceKind::kProd: return 1;
    case ReduceKind::kMax: return lowest;
    case ReduceKind::kMin: return highest;
  }
  return 0;
}

const char* CompareDirectionName(CompareDirection d) {
  switch (d) {
    case CompareDirection::kEQ: return "EQ";
    case CompareDirection::kNE: return "NE";
    case CompareDirection::kLT: return "LT";
    case CompareDirection::kLE: return "LE";
    case CompareDirection::kGT: return "GT";
    case CompareDirection::kGE: return "GE";
  }
  return "?";
}

Instruction* Module::Add(std::unique_ptr<Instruction> instr) {
  instr->id = next_id_++;
  if (instr->op == Opcode::kParameter) {
    instr->param_index = static_cast<int64_t>(params_.size());
    params_.push_back(instr.get());
  }
  instrs_.push_back(std::move(instr));
  return instrs_.back().get();
}

Instruction* Module::New(Opcode op, Shape shape, std::vector<Instruction*> operands,
                         const SourceLoc& loc) {
  auto i = std::make_unique<Instruction>();
  i->op = op;
  i->shape = std::move(shape);
  i->operands = std::move(operands);
  i->loc = loc;
  return Add(std::move(i));
}

Instruction* Module::Parameter(const Shape& shape, std::string name, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kParameter, shape, {}, loc);
  i->name = std::move(name);
  return i;
}

Instruction* Module::Constant(Literal value, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kConstant, value.shape(), {}, loc);
  i->literal = std::move(value);
  return i;
}

Instruction* Module::ScalarConstant(DType t, double v, const SourceLoc& loc) {
  return Constant(Literal::Scalar(t, v), loc);
}

Instruction* Module::Iota(const Shape& shape, int64_t dim, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kIota, shape, {}, loc);
  i->dims = {dim};
  return i;
}

Instruction* Module::PartitionId() { return New(Opcode::kPartitionId, Shape(DType::kI32, {}), {}, {}); }

Instruction* Module::Binary(Opcode op, Instruction* a, Instruction* b, const SourceLoc& loc) {
  return New(op, a->shape, {a, b}, loc);
}

Instruction* Module::Unary(Opcode op, Instruction* a, const SourceLoc& loc) {
  return New(op, a->shape, {a}, loc);
}

Instruction* Module::Compare(Instruction* a, Instruction* b, CompareDirection d,
                             const SourceLoc& loc) {
  Instruction* i = New(Opcode::kCompare, Shape(DType::kI1, a->shape.dims), {a, b}, loc);
  i->compare = d;
  return i;
}

Instruction* Module::Select(Instruction* pred, Instruction* t, Instruction* f,
                            const SourceLoc& loc) {
  return New(Opcode::kSelect, t->shape, {pred, t, f}, loc);
}

Instruction* Module::Convert(Instruction* a, DType to, const SourceLoc& loc) {
  return New(Opcode::kConvert, Shape(to, a->shape.dims), {a}, loc);
}

Instruction* Module::BroadcastInDim(Instruction* a, std::vector<int64_t> out_dims,
                                    std::vector<int64_t> broadcast_dims, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kBroadcastInDim, Shape(a->shape.dtype, std::move(out_dims)), {a}, loc);
  i->dims = std::move(broadcast_dims);
  return i;
}

Instruction* Module::Reshape(Instruction* a, std::vector<int64_t> out_dims, const SourceLoc& loc) {
  return New(Opcode::kReshape, Shape(a->shape.dtype, std::move(out_dims)), {a}, loc);
}

Instruction* Module::Transpose(Instruction* a, std::vector<int64_t> perm, const SourceLoc& loc) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(p >= 0 && p < a->shape.rank() ? a->shape.dims[p] : -1);
  Instruction* i = New(Opcode::kTranspose, Shape(a->shape.dtype, out), {a}, loc);
  i->dims = std::move(perm);
  return i;
}

std::vector<int64_t> FreeDims(int rank, const std::vector<int64_t>& batch,
                              const std::vector<int64_t>& contracting) {
  std::vector<int64_t> out;
  for (int d = 0; d < rank; ++d) {
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), d) == contracting.end())
      out.push_back(d);
  }
  return out;
}

namespace {
int64_t DimOr(const Shape& s, int64_t d) { return d >= 0 && d < s.rank() ? s.dims[d] : -1; }
}  // namespace

Instruction* Module::DotGeneral(Instruction* a, Instruction* b, DotDims dd, const SourceLoc& loc,
                               std::optional<DType> result_type) {
  std::vector<int64_t> out;
  for (int64_t d : dd.lhs_batch) out.push_back(DimOr(a->shape, d));
  for (int64_t d : FreeDims(a->shape.rank(), dd.lhs_batch, dd.lhs_contracting))
    out.push_back(a->shape.dims[d]);
  for (int64_t d : FreeDims(b->shape.rank(), dd.rhs_batch, dd.rhs_contracting))
    out.push_back(b->shape.dims[d]);
  Instruction* i = New(Opcode::kDotGeneral, Shape(result_type.value_or(a->shape.dtype), out), {a, b}, loc);
  i->dot = std::move(dd);
  return i;
}

Instruction* Module::Reduce(Instruction* a, Instruction* init, std::vector<int64_t> dims,
                            ReduceKind k, const SourceLoc& loc) {
  std::vector<int64_t> out;
  for (int d = 0; d < a->shape.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) out.push_back(a->shape.dims[d]);
  Instruction* i = New(Opcode::kReduce, Shape(a->shape.dtype, out), {a, init}, loc);
  i->dims = std::move(dims);
  i->reduce = k;
  return i;
}

Instruction* Module::DynamicSlice(Instruction* a, std::vector<Instruction*> starts,
                                  std::vector<int64_t> sizes, const SourceLoc& loc) {
  std::vector<Instruction*> ops = {a};
  ops.insert(ops.end(), starts.begin(), starts.end());
  Instruction* i = New(Opcode::kDynamicSlice, Shape(a->shape.dtype, sizes), ops, loc);
  i->dims = std::move(sizes);
  return i;
}

Instruction* Module::AllReduce(Instruction* a, ReduceKind k,
                               std::vector<std::vector<int64_t>> groups, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kAllReduce, a->shape, {a}, loc);
  i->reduce = k;
  i->replica_groups = std::move(groups);
  return i;
}

Instruction* Module::AllGather(Instruction* a, int64_t dim,
                               std::vector<std::vector<int64_t>> groups, const SourceLoc& loc) {
  Shape s = a->shape;
  int64_t group_size = groups.empty() ? 1 : static_cast<int64_t>(groups[0].size());
  if (dim >= 0 && dim < s.rank()) s.dims[dim] *= group_size;
  Instruction* i = New(Opcode::kAllGather, s, {a}, loc);
  i->dims = {dim};
  i->replica_groups = std::move(groups);
  return i;
}

// The builders of the ops below set attributes first, then take the result
// type from InferShape; on a bad attribute the type gets a -1 dim, which the
// verifier reports with InferShape's reason.
namespace {
Instruction* Finish(Instruction* i) {
  auto s = InferShape(*i);
  i->shape = s.ok() ? *s : Shape(i->operands.empty() ? DType::kF32 : i->operands[0]->shape.dtype, {-1});
  return i;
}
}  // namespace

Instruction* Module::ReduceScatter(Instruction* a, int64_t dim, ReduceKind k,
                                   std::vector<std::vector<int64_t>> groups, const SourceLoc& loc) {
  // With empty groups the IR cannot see the group size, so InferShape reads it
  // from the declared result: give it the one all num_partitions() devices imply.
  Shape declared = a->shape;
  if (groups.empty() && dim >= 0 && dim < declared.rank()) {
    int64_t& d = declared.dims[dim];
    d = num_partitions_ > 0 && d % num_partitions_ == 0 ? d / num_partitions_ : -1;
  }
  Instruction* i = New(Opcode::kReduceScatter, declared, {a}, loc);
  i->dims = {dim};
  i->reduce = k;
  i->replica_groups = std::move(groups);
  return Finish(i);
}

Instruction* Module::AllToAll(Instruction* a, int64_t split_dim, int64_t concat_dim, int64_t split_count,
                              std::vector<std::vector<int64_t>> groups, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kAllToAll, {}, {a}, loc);
  i->dims = {split_dim, concat_dim, split_count};
  i->replica_groups = std::move(groups);
  return Finish(i);
}

Instruction* Module::CollectivePermute(Instruction* a,
                                       std::vector<std::pair<int64_t, int64_t>> source_target_pairs,
                                       const SourceLoc& loc) {
  Instruction* i = New(Opcode::kCollectivePermute, {}, {a}, loc);
  i->source_target_pairs = std::move(source_target_pairs);
  return Finish(i);
}

Instruction* Module::CollectiveBroadcast(Instruction* a, std::vector<std::vector<int64_t>> groups,
                                         const SourceLoc& loc) {
  Instruction* i = New(Opcode::kCollectiveBroadcast, {}, {a}, loc);
  i->replica_groups = std::move(groups);
  return Finish(i);
}

Instruction* Module::Clamp(Instruction* lo, Instruction* x, Instruction* hi, const SourceLoc& loc) {
  return Finish(New(Opcode::kClamp, {}, {lo, x, hi}, loc));
}

Instruction* Module::Slice(Instruction* a, SliceDims s, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kSlice, {}, {a}, loc);
  i->slice = std::move(s);
  return Finish(i);
}

Instruction* Module::DynamicUpdateSlice(Instruction* a, Instruction* update,
                                        std::vector<Instruction*> starts, const SourceLoc& loc) {
  std::vector<Instruction*> ops = {a, update};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return Finish(New(Opcode::kDynamicUpdateSlice, {}, std::move(ops), loc));
}

Instruction* Module::Pad(Instruction* a, Instruction* value, PadDims p, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kPad, {}, {a, value}, loc);
  i->pad = std::move(p);
  return Finish(i);
}

Instruction* Module::Concatenate(std::vector<Instruction*> parts, int64_t dim, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kConcatenate, {}, std::move(parts), loc);
  i->dims = {dim};
  return Finish(i);
}

Instruction* Module::Convolution(Instruction* lhs, Instruction* rhs, ConvDims c, const SourceLoc& loc,
                                 std::optional<DType> result_type) {
  // The element type is read by InferShape (f32 may be asked for bf16/f16 operands).
  Instruction* i = New(Opcode::kConvolution, Shape(result_type.value_or(lhs->shape.dtype), {}), {lhs, rhs}, loc);
  i->conv = std::move(c);
  return Finish(i);
}

Instruction* Module::ReduceWindow(Instruction* a, Instruction* init, WindowDims w, ReduceKind k,
                                  const SourceLoc& loc) {
  Instruction* i = New(Opcode::kReduceWindow, {}, {a, init}, loc);
  i->window = std::move(w);
  i->reduce = k;
  return Finish(i);
}

Instruction* Module::Gather(Instruction* a, Instruction* indices, GatherDims g, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kGather, {}, {a, indices}, loc);
  i->gather = std::move(g);
  return Finish(i);
}

Instruction* Module::Scatter(Instruction* a, Instruction* indices, Instruction* updates, ScatterDims s,
                             ReduceKind k, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kScatter, {}, {a, indices, updates}, loc);
  i->scatter = std::move(s);
  i->reduce = k;
  return Finish(i);
}

Instruction* Module::RngBitGenerator(Instruction* state, const Shape& shape, const SourceLoc& loc) {
  return New(Opcode::kRngBitGenerator, shape, {state}, loc);
}

Instruction* Module::OptimizationBarrier(Instruction* a, std::vector<Instruction*> after, const SourceLoc& loc) {
  std::vector<Instruction*> ops = {a};
  ops.insert(ops.end(), after.begin(), after.end());
  return Finish(New(Opcode::kOptimizationBarrier, {}, std::move(ops), loc));
}

std::vector<Instruction*> Module::While(std::vector<Instruction*> init, std::shared_ptr<const Module> cond,
                                        std::shared_ptr<const Module> body, const SourceLoc& loc) {
  const size_t n = init.size();
  Instruction* w = New(Opcode::kWhile, WhilePlaceholderShape(), std::move(init), loc);
  w->cond = std::move(cond);
  w->body = std::move(body);
  std::vector<Instruction*> results;
  for (size_t k = 0; k < n; ++k) results.push_back(GetTupleElement(w, static_cast<int64_t>(k), loc));
  return results;
}

Instruction* Module::GetTupleElement(Instruction* w, int64_t index, const SourceLoc& loc) {
  Instruction* i = New(Opcode::kGetTupleElement, {}, {w}, loc);
  i->dims = {index};
  return Finish(i);
}

Shape WhilePlaceholderShape() { return Shape(DType::kI1, {0}); }

namespace {
// The scalar integer constant `i` holds, if it is one.
std::optional<int64_t> IntConstant(const Instruction* i) {
  if (i->op != Opcode::kConstant || !i->literal || i->shape.rank() != 0 || IsFloat(i->shape.dtype) ||
      i->shape.dtype == DType::kI1)
    return std::nullopt;
  return static_cast<int64_t>(i->literal->GetDouble(0));
}
}  // namespace

std::optional<int64_t> StaticTripCount(const Instruction& w) {
  if (w.op != Opcode::kWhile || !w.cond || !w.body || w.cond->outputs().size() != 1) return std::nullopt;
  const Instruction* c = w.cond->outputs()[0];
  if (c->op != Opcode::kCompare) return std::nullopt;
  // counter OP limit, or limit OP counter (turned around).
  CompareDirection dir = c->compare;
  const Instruction* counter = c->operands[0];
  std::optional<int64_t> limit = IntConstant(c->operands[1]);
  if (counter->op != Opcode::kParameter) {
    counter = c->operands[1];
    limit = IntConstant(c->operands[0]);
    static const CompareDirection kSwapped[] = {CompareDirection::kEQ, CompareDirection::kNE, CompareDirection::kGT,
                                                CompareDirection::kGE, CompareDirection::kLT, CompareDirection::kLE};
    dir = kSwapped[static_cast<int>(dir)];
  }
  if (counter->op != Opcode::kParameter || !limit) return std::nullopt;
  const int64_t k = counter->param_index;
  if (k < 0 || k >= static_cast<int64_t>(w.operands.size()) || k >= static_cast<int64_t>(w.body->outputs().size()))
    return std::nullopt;
  std::optional<int64_t> start = IntConstant(w.operands[k]);
  const Instruction* next = w.body->outputs()[k];
  if (!start || next->op != Opcode::kAdd) return std::nullopt;
  std::optional<int64_t> step;
  if (next->operands[0]->op == Opcode::kParameter && next->operands[0]->param_index == k)
    step = IntConstant(next->operands[1]);
  else if (next->operands[1]->op == Opcode::kParameter && next->operands[1]->param_index == k)
    step = IntConstant(next->operands[0]);
  if (!step || *step == 0) return std::nullopt;
  // Run the count symbolically, up to a bound that keeps this cheap.
  auto holds = [&](int64_t v) {
    switch (dir) {
      case CompareDirection::kLT: return v < *limit;
      case CompareDirection::kLE: return v <= *limit;
      case CompareDirection::kGT: return v > *limit;
      case CompareDirection::kGE: return v >= *limit;
      case CompareDirection::kNE: return v != *limit;
      case CompareDirection::kEQ: return v == *limit;
    }
    return false;
  };
  int64_t trips = 0;
  for (int64_t v = *start; holds(v); v += *step)
    if (++trips > (int64_t{1} << 24)) return std::nullopt;
  return trips;
}

// ---------------------------------------------------------------- verifier

namespace {
std::string Where(const Instruction& i) {
  std::string s = absl::StrCat(OpcodeName(i.op), " (%", i.id, ")");
  if (i.loc.known()) absl::StrAppend(&s, " at ", i.loc.file, ":", i.loc.line);
  return s;
}

absl::Status Bad(const Instruction& i, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("verifier: ", Where(i), ": ", why));
}

bool IsPermutation(const std::vector<int64_t>& p, int rank) {
  if (static_cast<int>(p.size()) != rank) return false;
  if (rank == 0) return true;
  std::set<int64_t> s(p.begin(), p.end());
  return static_cast<int>(s.size()) == rank && *s.begin() == 0 && *s.rbegin() == rank - 1;
}

// The regions take the carried values and give them back (body) or an i1 (cond).
absl::Status VerifyWhile(const Instruction& i) {
  if (!i.cond || !i.body) return Bad(i, "while without its cond and body regions");
  for (const Module* region : {i.cond.get(), i.body.get()}) {
    const char* what = region == i.cond.get() ? "cond" : "body";
    if (absl::Status s = Verify(*region); !s.ok())
      return Bad(i, absl::StrCat("in its ", what, ": ", s.message()));
    if (region->parameters().size() != i.operands.size())
      return Bad(i, absl::StrCat("its ", what, " takes ", region->parameters().size(), " values, the loop carries ",
                                 i.operands.size()));
    for (size_t k = 0; k < i.operands.size(); ++k)
      if (region->parameters()[k]->shape != i.operands[k]->shape)
        return Bad(i, absl::StrCat("its ", what, "'s parameter ", k, " is ", region->parameters()[k]->shape.ToString(),
                                   ", the carried value is ", i.operands[k]->shape.ToString()));
  }
  if (i.cond->outputs().size() != 1 || i.cond->outputs()[0]->shape != Shape(DType::kI1, {}))
    return Bad(i, "its cond must return one i1 scalar");
  if (i.body->outputs().size() != i.operands.size())
    return Bad(i, absl::StrCat("its body returns ", i.body->outputs().size(), " values, the loop carries ",
                               i.operands.size()));
  for (size_t k = 0; k < i.operands.size(); ++k)
    if (i.body->outputs()[k]->shape != i.operands[k]->shape)
      return Bad(i, absl::StrCat("its body returns ", i.body->outputs()[k]->shape.ToString(), " for carried value ",
                                 k, ", which is ", i.operands[k]->shape.ToString()));
  return absl::OkStatus();
}

absl::Status VerifyOne(const Instruction& i, const std::set<const Instruction*>& seen) {
  int arity = OpcodeArity(i.op);
  if (arity >= 0 && static_cast<int>(i.operands.size()) != arity)
    return Bad(i, absl::StrCat("expects ", arity, " operands, has ", i.operands.size()));
  for (const Instruction* o : i.operands) {
    if (!seen.count(o)) return Bad(i, "uses a value defined after it (not topological)");
  }
  auto& ops = i.operands;
  switch (i.op) {
    case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum:
      if (ops[0]->shape != ops[1]->shape)
        return Bad(i, absl::StrCat("operand types differ: ", ops[0]->shape.ToString(), " vs ",
                                   ops[1]->shape.ToString()));
      break;
    case Opcode::kCompare:
      if (ops[0]->shape != ops[1]->shape) return Bad(i, "compare operands differ in type");
      break;
    case Opcode::kSelect:
      if (ops[1]->shape != ops[2]->shape) return Bad(i, "select branches differ in type");
      if (ops[0]->shape.dtype != DType::kI1) return Bad(i, "select predicate must be i1");
      if (ops[0]->shape.rank() != 0 && ops[0]->shape.dims != ops[1]->shape.dims)
        return Bad(i, "select predicate shape differs from the branches");
      break;
    case Opcode::kBroadcastInDim: {
      const Shape& in = ops[0]->shape;
      if (static_cast<int>(i.dims.size()) != in.rank())
        return Bad(i, "broadcast_dimensions must have one entry per operand dimension");
      for (int d = 0; d < in.rank(); ++d) {
        int64_t od = i.dims[d];
        if (od < 0 || od >= i.shape.rank()) return Bad(i, "broadcast dimension out of range");
        if (in.dims[d] != 1 && in.dims[d] != i.shape.dims[od])
          return Bad(i, absl::StrCat("operand dim ", d, " (", in.dims[d], ") cannot broadcast to ",
                                     i.shape.dims[od]));
      }
      break;
    }
    case Opcode::kReshape:
      if (ops[0]->shape.elements() != i.shape.elements())
        return Bad(i, absl::StrCat("reshape changes the element count: ", ops[0]->shape.ToString(),
                                   " -> ", i.shape.ToString()));
      break;
    case Opcode::kTranspose:
      if (!IsPermutation(i.dims, ops[0]->shape.rank())) return Bad(i, absl::StrCat("dims [", absl::StrJoin(i.dims, ","), "] are not a permutation of ",
                                     ops[0]->shape.rank(), " dimensions"));
      break;
    case Opcode::kDotGeneral: {
      const DotDims& d = i.dot;
      if (d.lhs_batch.size() != d.rhs_batch.size() ||
          d.lhs_contracting.size() != d.rhs_contracting.size())
        return Bad(i, "lhs and rhs must list as many batch and contracting dims");
      for (size_t k = 0; k < d.lhs_contracting.size(); ++k) {
        int64_t a = DimOr(ops[0]->shape, d.lhs_contracting[k]);
        int64_t b = DimOr(ops[1]->shape, d.rhs_contracting[k]);
        if (a < 0 || b < 0 || a != b)
          return Bad(i, absl::StrCat("contracting dimensions differ: ", ops[0]->shape.ToString(),
                                     " x ", ops[1]->shape.ToString()));
      }
      for (size_t k = 0; k < d.lhs_batch.size(); ++k) {
        int64_t a = DimOr(ops[0]->shape, d.lhs_batch[k]);
        int64_t b = DimOr(ops[1]->shape, d.rhs_batch[k]);
        if (a < 0 || b < 0 || a != b) return Bad(i, "batch dimensions differ");
      }
      if (ops[0]->shape.dtype != ops[1]->shape.dtype) return Bad(i, "operand element types differ");
      break;
    }
    case Opcode::kReduce:
      if (ops[1]->shape.rank() != 0) return Bad(i, "init value must be a scalar");
      for (int64_t d : i.dims)
        if (d < 0 || d >= ops[0]->shape.rank()) return Bad(i, "reduce dimension out of range");
      break;
    case Opcode::kDynamicSlice:
      if (static_cast<int>(ops.size()) != 1 + ops[0]->shape.rank())
        return Bad(i, "dynamic_slice needs one start index per dimension");
      for (int d = 0; d < ops[0]->shape.rank(); ++d)
        if (i.dims[d] > ops[0]->shape.dims[d]) return Bad(i, "slice size exceeds the dimension");
      break;
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectiveBroadcast: {
      // StableHLO's replica_groups is a 2-D tensor: every group has as many
      // members, which the result types of all_gather and reduce_scatter rely on.
      std::set<int64_t> ids;
      for (const auto& g : i.replica_groups) {
        if (g.empty()) return Bad(i, "a replica group is empty");
        if (g.size() != i.replica_groups[0].size())
          return Bad(i, absl::StrCat("replica groups differ in size (", i.replica_groups[0].size(), " and ",
                                     g.size(), " members)"));
        for (int64_t d : g) {
          if (d < 0) return Bad(i, absl::StrCat("negative device id ", d, " in replica_groups"));
          if (!ids.insert(d).second) return Bad(i, "a device appears in two replica groups");
        }
      }
      break;
    }
    case Opcode::kCollectivePermute: {
      std::set<int64_t> sources, targets;
      for (const auto& [source, target] : i.source_target_pairs) {
        if (source < 0 || target < 0)
          return Bad(i,
                     absl::StrCat("negative device id in source_target_pairs [", source, ", ", target, "]"));
        if (!sources.insert(source).second)
          return Bad(i, absl::StrCat("device ", source, " is the source of two source_target_pairs"));
        if (!targets.insert(target).second)
          return Bad(i, absl::StrCat("device ", target, " is the target of two source_target_pairs"));
      }
      break;
    }
    case Opcode::kConstant:
      if (!i.literal || i.literal->shape() != i.shape) return Bad(i, "constant without a matching literal");
      break;
    case Opcode::kWhile:
      if (absl::Status s = VerifyWhile(i); !s.ok()) return s;
      break;
    case Opcode::kGetTupleElement:
      if (ops[0]->op != Opcode::kWhile) return Bad(i, "get_tuple_element reads a while's results only");
      break;
    default:
      break;
  }
  // After the op's own checks, which explain a bad attribute better than the
  // -1 it leaves in the inferred result shape.
  auto inferred = InferShape(i);
  if (!inferred.ok()) return Bad(i, inferred.status().message());
  if (*inferred != i.shape)
    return Bad(i, absl::StrCat("result type ", i.shape.ToString(), " differs from the ",
                               inferred->ToString(), " its operands imply"));
  for (int64_t d : i.shape.dims)
    if (d < 0) return Bad(i, absl::StrCat("negative dimension in result ", i.shape.ToString()));
  return absl::OkStatus();
}
}  // namespace

absl::Status Verify(const Module& m) {
  std::set<const Instruction*> seen;
  for (const auto& i : m.instructions()) {
    absl::Status s = VerifyOne(*i, seen);
    if (!s.ok()) return s;
    seen.insert(i.get());
  }
  for (const Instruction* o : m.outputs())
    if (!seen.count(o)) return absl::InvalidArgumentError("verifier: an output is not in the module");
  return absl::OkStatus();
}

namespace {

// The (output position, kernel tap) pairs of one spatial dim whose tap lands on
// an input element: not on padding, and not between the elements of an input
// dilated by lhs_dilation (the input gradient of a strided convolution, whose
// runtime skips those holes: runtime/kernels_conv.cc, ConvPolyphase).
double ValidConvTaps(int64_t in, int64_t kernel, int64_t out, int64_t stride, int64_t pad_low, int64_t lhs_dil,
                     int64_t rhs_dil) {
  stride = std::max<int64_t>(1, stride);
  lhs_dil = std::max<int64_t>(1, lhs_dil);
  rhs_dil = std::max<int64_t>(1, rhs_dil);
  const int64_t dilated_in = in > 0 ? (in - 1) * lhs_dil + 1 : 0;
  double pairs = 0;
  for (int64_t k = 0; k < kernel; ++k) {
    // pos = o * stride + k * rhs_dil - pad_low must be in [0, dilated_in).
    const int64_t c = k * rhs_dil - pad_low;
    const int64_t lo = c >= 0 ? 0 : (-c + stride - 1) / stride;
    const int64_t hi = std::min(out - 1, dilated_in - 1 - c < 0 ? -1 : (dilated_in - 1 - c) / stride);
    if (hi < lo) continue;
    if (lhs_dil == 1) {
      pairs += static_cast<double>(hi - lo + 1);
    } else {
      for (int64_t o = lo; o <= hi; ++o) pairs += (o * stride + c) % lhs_dil == 0 ? 1 : 0;
    }
  }
  return pairs;
}

}  // namespace

double InstructionFlops(const Instruction& i) {
  switch (i.op) {
    case Opcode::kDotGeneral: {
      double k = 1;
      for (int64_t d : i.dot.lhs_contracting) k *= static_cast<double>(i.operands[0]->shape.dims[d]);
      return 2.0 * k * static_cast<double>(i.shape.elements());
    }
    case Opcode::kReduce:
      return static_cast<double>(i.operands[0]->shape.elements());
    case Opcode::kConvolution: {
      // 2 per multiply-add: each output sums kernel-input-features x the taps of
      // its window that land on input elements (as XLA's cost analysis counts:
      // padding and an lhs dilation's holes are not work).
      const ConvDims& c = i.conv;
      const Shape& k = i.operands[1]->shape;
      const Shape& in = i.operands[0]->shape;
      if (c.kernel_output_feature < 0 || c.kernel_output_feature >= k.rank()) return 0.0;
      double per = static_cast<double>(k.elements()) / static_cast<double>(std::max<int64_t>(1, k.dims[c.kernel_output_feature]));
      double outputs = static_cast<double>(i.shape.elements());
      const size_t n = c.kernel_spatial.size();
      auto dim = [](const Shape& s, const std::vector<int64_t>& v, size_t j) -> int64_t {
        return j < v.size() && v[j] >= 0 && v[j] < s.rank() ? s.dims[v[j]] : -1;
      };
      auto at = [](const std::vector<int64_t>& v, size_t j, int64_t dflt) { return j < v.size() ? v[j] : dflt; };
      for (size_t j = 0; j < n; ++j) {
        const int64_t kd = dim(k, c.kernel_spatial, j), od = dim(i.shape, c.output_spatial, j),
                      id = dim(in, c.input_spatial, j);
        if (kd <= 0 || od <= 0 || id < 0) return 2.0 * per * outputs;  // malformed: the dense count
        per /= static_cast<double>(kd);
        outputs /= static_cast<double>(od);
        outputs *= ValidConvTaps(id, kd, od, at(c.window_strides, j, 1),
                                 j < c.padding.size() ? c.padding[j].first : 0, at(c.lhs_dilation, j, 1),
                                 at(c.rhs_dilation, j, 1));
      }
      return 2.0 * per * outputs;
    }
    case Opcode::kReduceWindow: {
      double w = 1;
      for (int64_t d : i.window.dimensions) w *= static_cast<double>(d);
      return w * static_cast<double>(i.shape.elements());
    }
    case Opcode::kScatter:
      return i.scatter.replace ? 0.0 : static_cast<double>(i.operands[2]->shape.elements());
    case Opcode::kAllReduce:
      return static_cast<double>(i.shape.elements());
    case Opcode::kReduceScatter:  // like all_reduce: one combine per operand element
      return static_cast<double>(i.operands[0]->shape.elements());
    default:
      return IsElementwise(i.op) ? static_cast<double>(i.shape.elements()) : 0.0;
  }
}

}  // namespace shardscope::compiler
