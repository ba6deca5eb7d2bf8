#include "core/ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/autocast.h"
#include "core/remat.h"

namespace shardscope {
using compiler::Opcode;

namespace internal {
namespace {
thread_local std::string g_scope;

std::string At(const SourceLoc& loc) { return loc.known() ? absl::StrCat(" (at ", loc.file, ":", loc.line, ")") : ""; }

// The first error among operands, or OK.
absl::Status FirstError(const std::vector<Tensor>& ops) {
  for (const Tensor& t : ops) {
    if (!t.defined()) return absl::InvalidArgumentError("an operand is an undefined tensor");
    if (!t.status().ok()) return t.status();
  }
  return absl::OkStatus();
}

std::shared_ptr<Node> NewNode(Opcode op, Shape shape, const std::vector<Tensor>& operands,
                              const SourceLoc& loc) {
  auto n = std::make_shared<Node>();
  n->op = op;
  n->shape = std::move(shape);
  n->loc = loc;
  n->scope = g_scope;
  n->seq = NextNodeSeq();
  for (const Tensor& t : operands) {
    n->operands.push_back(t.node());
    if (GradEnabled() && t.requires_grad()) n->requires_grad = true;
  }
  return n;
}
}  // namespace

const std::string& CurrentScope() { return g_scope; }

Tensor Error(absl::Status s, Shape shape) {
  auto n = std::make_shared<Node>();
  n->op = Opcode::kConstant;
  n->shape = std::move(shape);
  n->error = std::move(s);
  return Tensor(std::move(n));
}

Tensor MakeOp(Opcode op, Shape shape, std::vector<Tensor> operands, const SourceLoc& loc) {
  if (absl::Status s = FirstError(operands); !s.ok()) return Error(s, shape);
  return Tensor(NewNode(op, std::move(shape), operands, loc));
}

Tensor Constant(double v, DType t, const SourceLoc& loc) {
  auto n = std::make_shared<Node>();
  n->op = Opcode::kConstant;
  n->shape = Shape(t, {});
  n->literal = Literal::Scalar(t, v);
  n->loc = loc;
  n->scope = g_scope;
  return Tensor(std::move(n));
}

Tensor Binary(Opcode op, const Tensor& a, const Tensor& b, const SourceLoc& loc) {
  if (absl::Status s = FirstError({a, b}); !s.ok()) return Error(s, a.defined() ? a.shape() : Shape());
  if (a.shape() != b.shape())
    return Error(absl::InvalidArgumentError(absl::StrCat(compiler::OpcodeName(op), ": operands ",
                                                         a.shape().ToString(), " and ", b.shape().ToString(),
                                                         " differ", At(loc))),
                 a.shape());
  return MakeOp(op, a.shape(), {a, b}, loc);
}

Tensor Unary(Opcode op, const Tensor& a, const SourceLoc& loc) { return MakeOp(op, a.shape(), {a}, loc); }

Tensor Convert(const Tensor& a, DType t, const SourceLoc& loc) {
  if (a.dtype() == t) return a;
  return MakeOp(Opcode::kConvert, Shape(t, a.shape().dims), {a}, loc);
}

Tensor Broadcast(const Tensor& a, std::vector<int64_t> out_dims, std::vector<int64_t> bdims,
                 const SourceLoc& loc) {
  if (a.shape().dims == out_dims) return a;
  Tensor t = MakeOp(Opcode::kBroadcastInDim, Shape(a.dtype(), std::move(out_dims)), {a}, loc);
  if (t.status().ok()) t.node()->dims = std::move(bdims);
  return t;
}

Tensor Reduce(const Tensor& a, std::vector<int64_t> dims, compiler::ReduceKind k, const SourceLoc& loc) {
  std::vector<int64_t> out;
  for (int d = 0; d < a.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) out.push_back(a.shape().dims[d]);
  const double init = compiler::ReduceIdentity(k, a.dtype());
  Tensor t = MakeOp(Opcode::kReduce, Shape(a.dtype(), out), {a, Constant(init, a.dtype(), loc)}, loc);
  if (t.status().ok()) {
    std::sort(dims.begin(), dims.end());
    t.node()->dims = std::move(dims);
    t.node()->reduce = k;
  }
  return t;
}

Tensor Dot(const Tensor& a_in, const Tensor& b_in, compiler::DotDims dd, const SourceLoc& loc) {
  Tensor a = a_in, b = b_in;
  absl::StatusOr<DType> result_type = AutocastOperands(&a, &b, loc);  // bf16 operands, f32 result
  if (!result_type.ok()) return Error(result_type.status(), a_in.shape());
  std::vector<int64_t> out;
  auto is_in = [](const std::vector<int64_t>& v, int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); };
  for (int64_t d : dd.lhs_batch) out.push_back(a.shape().dims[d]);
  for (int d = 0; d < a.rank(); ++d)
    if (!is_in(dd.lhs_batch, d) && !is_in(dd.lhs_contracting, d)) out.push_back(a.shape().dims[d]);
  for (int d = 0; d < b.rank(); ++d)
    if (!is_in(dd.rhs_batch, d) && !is_in(dd.rhs_contracting, d)) out.push_back(b.shape().dims[d]);
  Tensor t = MakeOp(Opcode::kDotGeneral, Shape(*result_type, out), {a, b}, loc);
  if (t.status().ok()) t.node()->dot = std::move(dd);
  NoteAutocastOff(&t);
  return t;
}

Tensor Compare(const Tensor& a, const Tensor& b, compiler::CompareDirection d, const SourceLoc& loc) {
  Tensor t = MakeOp(Opcode::kCompare, Shape(DType::kI1, a.shape().dims), {a, b}, loc);
  if (t.status().ok()) t.node()->compare = d;
  return t;
}

Tensor Select(const Tensor& p, const Tensor& t, const Tensor& f, const SourceLoc& loc) {
  return MakeOp(Opcode::kSelect, t.shape(), {p, t, f}, loc);
}

Tensor Transpose(const Tensor& a, std::vector<int64_t> perm, const SourceLoc& loc) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(a.shape().dims[p]);
  Tensor t = MakeOp(Opcode::kTranspose, Shape(a.dtype(), out), {a}, loc);
  if (t.status().ok()) t.node()->dims = std::move(perm);
  return t;
}

Tensor Reshape(const Tensor& a, std::vector<int64_t> dims, const SourceLoc& loc) {
  if (a.shape().dims == dims) return a;
  return MakeOp(Opcode::kReshape, Shape(a.dtype(), std::move(dims)), {a}, loc);
}

Tensor Slice(const Tensor& a, compiler::SliceDims s, const SourceLoc& loc) {
  std::vector<int64_t> out;
  for (int d = 0; d < a.rank(); ++d) out.push_back((s.limit[d] - s.start[d] + s.stride[d] - 1) / s.stride[d]);
  Tensor t = MakeOp(Opcode::kSlice, Shape(a.dtype(), out), {a}, loc);
  if (t.status().ok()) t.node()->slice = std::move(s);
  return t;
}

Tensor Pad(const Tensor& a, compiler::PadDims p, const SourceLoc& loc) {
  std::vector<int64_t> out;
  for (int d = 0; d < a.rank(); ++d) out.push_back(a.shape().dims[d] + p.low[d] + p.high[d]);
  Tensor t = MakeOp(Opcode::kPad, Shape(a.dtype(), out), {a, Constant(0, a.dtype(), loc)}, loc);
  if (t.status().ok()) t.node()->pad = std::move(p);
  return t;
}

Tensor Concatenate(const std::vector<Tensor>& parts, int64_t dim, const SourceLoc& loc) {
  std::vector<int64_t> out = parts[0].shape().dims;
  out[dim] = 0;
  for (const Tensor& p : parts) out[dim] += p.shape().dims[dim];
  Tensor t = MakeOp(Opcode::kConcatenate, Shape(parts[0].dtype(), out), parts, loc);
  if (t.status().ok()) t.node()->dims = {dim};
  return t;
}

Tensor Gather(const Tensor& table, const Tensor& ids, compiler::GatherDims g, Shape out, const SourceLoc& loc) {
  Tensor t = MakeOp(Opcode::kGather, std::move(out), {table, ids}, loc);
  if (t.status().ok()) t.node()->gather = std::move(g);
  return t;
}

Tensor ScatterAdd(const Tensor& base, const Tensor& ids, const Tensor& updates, compiler::ScatterDims s,
                  const SourceLoc& loc) {
  Tensor t = MakeOp(Opcode::kScatter, base.shape(), {base, ids, updates}, loc);
  if (t.status().ok()) {
    t.node()->scatter = std::move(s);
    t.node()->reduce = compiler::ReduceKind::kSum;
  }
  return t;
}

}  // namespace internal

NameScope::NameScope(const std::string& name) : prev_len_(internal::g_scope.size()) {
  if (!internal::g_scope.empty()) internal::g_scope += ".";
  internal::g_scope += name;
}
NameScope::~NameScope() { internal::g_scope.resize(prev_len_); }

namespace {
using internal::At;

// NumPy broadcasting of two shapes; brings both operands to the result shape.
bool BroadcastPair(const Tensor& a, const Tensor& b, const char* op, const SourceLoc& loc, Tensor* ra,
                   Tensor* rb) {
  if (a.shape().dims == b.shape().dims) {
    *ra = a;
    *rb = b;
    return true;
  }
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(rank);
  for (int k = 0; k < rank; ++k) {
    int ia = k - (rank - a.rank()), ib = k - (rank - b.rank());
    int64_t da = ia >= 0 ? a.shape().dims[ia] : 1, db = ib >= 0 ? b.shape().dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      *ra = internal::Error(absl::InvalidArgumentError(absl::StrCat(op, ": shapes ", a.shape().ToString(), " and ",
                                                                    b.shape().ToString(), " do not broadcast",
                                                                    At(loc))),
                            a.shape());
      return false;
    }
    out[k] = std::max(da, db);
  }
  auto bring = [&](const Tensor& t) {
    std::vector<int64_t> bd(t.rank());
    for (int k = 0; k < t.rank(); ++k) bd[k] = k + (rank - t.rank());
    return internal::Broadcast(t, out, bd, loc);
  };
  *ra = bring(a);
  *rb = bring(b);
  return true;
}

Tensor BinaryOp(Opcode op, const char* name, const Tensor& a, const Tensor& b, SL sl) {
  SourceLoc loc = Loc(sl);
  if (!a.defined() || !b.defined())
    return internal::Error(absl::InvalidArgumentError(absl::StrCat(name, ": undefined operand", At(loc))), Shape());
  if (a.dtype() != b.dtype())
    return internal::Error(absl::InvalidArgumentError(absl::StrCat(name, ": element types differ: ",
                                                                   a.shape().ToString(), " and ",
                                                                   b.shape().ToString(), At(loc))),
                           a.shape());
  Tensor x, y;
  if (!BroadcastPair(a, b, name, loc, &x, &y)) return x;
  return internal::Binary(op, x, y, loc);
}

std::vector<int64_t> NormDims(const Tensor& a, std::vector<int64_t> dims) {
  for (auto& d : dims)
    if (d < 0) d += a.rank();
  return dims;
}

Tensor CheckDims(const Tensor& a, const std::vector<int64_t>& dims, const char* op, const SourceLoc& loc) {
  for (int64_t d : dims)
    if (d < 0 || d >= a.rank())
      return internal::Error(absl::InvalidArgumentError(absl::StrCat(op, ": dimension ", d, " is out of range for ",
                                                                     a.shape().ToString(), At(loc))),
                             a.shape());
  return Tensor();
}

Tensor KeepDims(const Tensor& r, const Tensor& a, const std::vector<int64_t>& dims, const SourceLoc& loc) {
  std::vector<int64_t> kd = a.shape().dims;
  for (int64_t d : dims) kd[d] = 1;
  return internal::Reshape(r, kd, loc);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, SL l) { return BinaryOp(Opcode::kAdd, "add", a, b, l); }
Tensor sub(const Tensor& a, const Tensor& b, SL l) { return BinaryOp(Opcode::kSubtract, "sub", a, b, l); }
Tensor mul(const Tensor& a, const Tensor& b, SL l) { return BinaryOp(Opcode::kMultiply, "mul", a, b, l); }
Tensor div(const Tensor& a, const Tensor& b, SL l) { return BinaryOp(Opcode::kDivide, "div", a, b, l); }
Tensor maximum(const Tensor& a, const Tensor& b, SL l) { return BinaryOp(Opcode::kMaximum, "maximum", a, b, l); }
Tensor neg(const Tensor& a, SL l) { return internal::Unary(Opcode::kNegate, a, Loc(l)); }
Tensor exp(const Tensor& a, SL l) { return internal::Unary(Opcode::kExponential, a, Loc(l)); }
Tensor log(const Tensor& a, SL l) { return internal::Unary(Opcode::kLog, a, Loc(l)); }
Tensor relu(const Tensor& a, SL l) {
  return BinaryOp(Opcode::kMaximum, "relu", a, internal::Constant(0, a.dtype(), Loc(l)), l);
}
Tensor minimum(const Tensor& a, const Tensor& b, SL l) { return BinaryOp(Opcode::kMinimum, "minimum", a, b, l); }
Tensor pow(const Tensor& a, const Tensor& b, SL l) { return BinaryOp(Opcode::kPower, "pow", a, b, l); }
Tensor sqrt(const Tensor& a, SL l) { return internal::Unary(Opcode::kSqrt, a, Loc(l)); }
Tensor rsqrt(const Tensor& a, SL l) { return internal::Unary(Opcode::kRsqrt, a, Loc(l)); }
Tensor tanh(const Tensor& a, SL l) { return internal::Unary(Opcode::kTanh, a, Loc(l)); }
Tensor sigmoid(const Tensor& a, SL l) { return internal::Unary(Opcode::kLogistic, a, Loc(l)); }
Tensor abs(const Tensor& a, SL l) { return internal::Unary(Opcode::kAbs, a, Loc(l)); }
Tensor silu(const Tensor& a, SL l) { return mul(a, sigmoid(a, l), l); }
Tensor add(const Tensor& a, double b, SL l) { return add(a, Tensor::scalar(b, a.dtype(), l), l); }
Tensor mul(const Tensor& a, double b, SL l) { return mul(a, Tensor::scalar(b, a.dtype(), l), l); }
Tensor convert(const Tensor& a, DType to, SL l) { return internal::Convert(a, to, Loc(l)); }

Tensor matmul(const Tensor& a, const Tensor& b, SL sl) {
  SourceLoc loc = Loc(sl);
  if (!a.defined() || !b.defined()) return internal::Error(absl::InvalidArgumentError("matmul: undefined operand"), Shape());
  auto bad = [&](const std::string& why) {
    return internal::Error(absl::InvalidArgumentError(absl::StrCat("matmul: ", a.shape().ToString(), " x ",
                                                                   b.shape().ToString(), ": ", why, At(loc))),
                           a.shape());
  };
  if (a.rank() < 2 || b.rank() < 2) return bad("both operands need rank >= 2");
  if (a.dtype() != b.dtype()) return bad("element types differ");
  int64_t k = a.shape().dims[a.rank() - 1];
  if (b.rank() == 2) {
    if (b.shape().dims[0] != k) return bad(absl::StrCat("contracting sizes differ (", k, " vs ", b.shape().dims[0], ")"));
    return internal::Dot(a, b, {{}, {}, {a.rank() - 1}, {0}}, loc);
  }
  if (a.rank() != 3 || b.rank() != 3 || a.shape().dims[0] != b.shape().dims[0])
    return bad("batched matmul needs two rank-3 operands with equal batch");
  if (b.shape().dims[1] != k) return bad("contracting sizes differ");
  return internal::Dot(a, b, {{0}, {0}, {2}, {1}}, loc);
}

Tensor transpose(const Tensor& a, std::vector<int64_t> perm, SL sl) {
  SourceLoc loc = Loc(sl);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int k = 0; k < static_cast<int>(sorted.size()); ++k)
    if (sorted[k] != k || static_cast<int>(perm.size()) != a.rank())
      return internal::Error(absl::InvalidArgumentError(absl::StrCat("transpose: [", absl::StrJoin(perm, ","),
                                                                     "] is not a permutation of ", a.rank(),
                                                                     " dimensions", At(loc))),
                             a.shape());
  return internal::Transpose(a, std::move(perm), loc);
}

Tensor reshape(const Tensor& a, std::vector<int64_t> dims, SL sl) {
  SourceLoc loc = Loc(sl);
  Shape s(a.dtype(), dims);
  if (s.elements() != a.shape().elements())
    return internal::Error(absl::InvalidArgumentError(absl::StrCat("reshape: ", a.shape().ToString(), " has ",
                                                                   a.shape().elements(), " elements, ",
                                                                   s.ToString(), " has ", s.elements(), At(loc))),
                           a.shape());
  return internal::Reshape(a, std::move(dims), loc);
}

Tensor broadcast_to(const Tensor& a, std::vector<int64_t> dims, SL sl) {
  std::vector<int64_t> bd(a.rank());
  for (int k = 0; k < a.rank(); ++k) bd[k] = k + (static_cast<int>(dims.size()) - a.rank());
  return internal::Broadcast(a, std::move(dims), bd, Loc(sl));
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t limit, SL sl) {
  SourceLoc loc = Loc(sl);
  if (dim < 0) dim += a.rank();
  if (dim < 0 || dim >= a.rank() || start < 0 || limit > a.shape().dims[dim] || start > limit)
    return internal::Error(absl::InvalidArgumentError(absl::StrCat("slice: [", start, ":", limit, "] along dimension ",
                                                                   dim, " is out of range for ", a.shape().ToString(),
                                                                   At(loc))),
                           a.shape());
  compiler::SliceDims s;
  for (int d = 0; d < a.rank(); ++d) {
    s.start.push_back(d == dim ? start : 0);
    s.limit.push_back(d == dim ? limit : a.shape().dims[d]);
    s.stride.push_back(1);
  }
  return internal::Slice(a, std::move(s), loc);
}

Tensor concatenate(const std::vector<Tensor>& parts, int64_t dim, SL sl) {
  SourceLoc loc = Loc(sl);
  if (parts.empty()) return internal::Error(absl::InvalidArgumentError(absl::StrCat("concatenate: no tensors", At(loc))), Shape());
  const Tensor& first = parts[0];
  if (dim < 0) dim += first.rank();
  for (const Tensor& p : parts) {
    bool ok = p.defined() && p.rank() == first.rank() && p.dtype() == first.dtype() && dim >= 0 && dim < p.rank();
    for (int d = 0; ok && d < p.rank(); ++d) ok = d == dim || p.shape().dims[d] == first.shape().dims[d];
    if (!ok)
      return internal::Error(absl::InvalidArgumentError(absl::StrCat("concatenate: ", p.shape().ToString(), " does not fit ",
                                                                     first.shape().ToString(), " along dimension ", dim,
                                                                     At(loc))),
                             first.shape());
  }
  return internal::Concatenate(parts, dim, loc);
}

Tensor embedding_lookup(const Tensor& table, const Tensor& ids, SL sl) {
  SourceLoc loc = Loc(sl);
  if (table.rank() != 2 || IsFloat(ids.dtype()))
    return internal::Error(absl::InvalidArgumentError(absl::StrCat("embedding_lookup: table ", table.shape().ToString(),
                                                                   " must be [V, D] and ids ", ids.shape().ToString(),
                                                                   " integers", At(loc))),
                           table.shape());
  compiler::GatherDims g;
  g.offset_dims = {ids.rank()};
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = ids.rank();
  g.slice_sizes = {1, table.shape().dims[1]};
  std::vector<int64_t> out = ids.shape().dims;
  out.push_back(table.shape().dims[1]);
  return internal::Gather(table, ids, std::move(g), Shape(table.dtype(), out), loc);
}

Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim, SL sl) {
  SourceLoc loc = Loc(sl);
  dims = NormDims(a, dims);
  if (Tensor e = CheckDims(a, dims, "sum", loc); e.defined()) return e;
  Tensor r = internal::Reduce(a, dims, compiler::ReduceKind::kSum, loc);
  return keepdim ? KeepDims(r, a, dims, loc) : r;
}

Tensor sum(const Tensor& a, SL sl) {
  std::vector<int64_t> all(a.rank());
  for (int k = 0; k < a.rank(); ++k) all[k] = k;
  return sum(a, all, false, sl);
}

Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim, SL sl) {
  SourceLoc loc = Loc(sl);
  dims = NormDims(a, dims);
  if (Tensor e = CheckDims(a, dims, "mean", loc); e.defined()) return e;
  double count = 1;
  for (int64_t d : dims) count *= static_cast<double>(a.shape().dims[d]);
  Tensor s = sum(a, dims, keepdim, sl);
  // The divisor follows from the shape, so it is part of the graph, not data.
  Tensor c = internal::Broadcast(internal::Constant(count, a.dtype(), loc), s.shape().dims, {}, loc);
  return internal::Binary(Opcode::kDivide, s, c, loc);
}

Tensor mean(const Tensor& a, SL sl) {
  std::vector<int64_t> all(a.rank());
  for (int k = 0; k < a.rank(); ++k) all[k] = k;
  return mean(a, all, false, sl);
}

Tensor max(const Tensor& a, std::vector<int64_t> dims, bool keepdim, SL sl) {
  SourceLoc loc = Loc(sl);
  dims = NormDims(a, dims);
  if (Tensor e = CheckDims(a, dims, "max", loc); e.defined()) return e;
  Tensor r = internal::Reduce(a, dims, compiler::ReduceKind::kMax, loc);
  return keepdim ? KeepDims(r, a, dims, loc) : r;
}

namespace {
// The same value (same inputs, or the same data) outside autograd.
Tensor Detached(const Tensor& a) {
  if (!a.defined() || !a.requires_grad()) return a;
  auto n = std::make_shared<Node>(*a.node());
  n->requires_grad = false;
  n->grad_leaf = nullptr;
  return Tensor(std::move(n));
}
}  // namespace

Tensor stop_gradient(const Tensor& a, SL sl) {
  Tensor t = Detached(a);
  if (t.defined() && t.node() != a.node() && !t.node()->note_loc.known()) {
    t.node()->note_loc = Loc(sl);
    t.node()->note_loc.via = "stop_gradient";
  }
  return t;
}

Tensor log_softmax(const Tensor& x, int64_t dim, SL sl) {
  if (dim < 0) dim += x.rank();
  Tensor m = Detached(max(x, {dim}, true, sl));  // the library's own: not a user's stop_gradient
  Tensor s = sub(x, m, sl);
  Tensor lse = log(sum(exp(s, sl), {dim}, true, sl), sl);
  return sub(s, lse, sl);
}

Tensor softmax(const Tensor& logits, int64_t dim, SL sl) { return exp(log_softmax(logits, dim, sl), sl); }

Tensor mse_loss(const Tensor& pred, const Tensor& target, SL sl) {
  Tensor d = sub(pred, target, sl);
  return mean(mul(d, d, sl), sl);
}

namespace {
// The leading dims of a [..., T, D] operand: batch dims of the attention dots.
std::vector<int64_t> LeadingDims(int rank) {
  std::vector<int64_t> d(rank - 2);
  for (int k = 0; k < rank - 2; ++k) d[k] = k;
  return d;
}
}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, SL sl) {
  SourceLoc loc = Loc(sl);
  const int r = q.rank();
  if (r < 3 || k.shape() != q.shape() || v.rank() != r ||
      !std::equal(q.shape().dims.begin(), q.shape().dims.end() - 1, v.shape().dims.begin()))
    return internal::Error(absl::InvalidArgumentError(absl::StrCat("attention: q ", q.shape().ToString(), ", k ",
                                                                   k.shape().ToString(), ", v ", v.shape().ToString(),
                                                                   " must be [..., T, Dh] alike", At(loc))),
                           q.shape());
  const int64_t t = q.shape().dims[r - 2], dh = q.shape().dims[r - 1];
  const std::vector<int64_t> batch = LeadingDims(r);
  // The scale and the mask follow from the shapes: inlined into the graph.
  Tensor scores = internal::Dot(q, k, {batch, batch, {r - 1}, {r - 1}}, loc);  // [..., T, T]
  Tensor scale = internal::Broadcast(internal::Constant(1.0 / std::sqrt(static_cast<double>(dh)), q.dtype(), loc),
                                     scores.shape().dims, {}, loc);
  scores = internal::Binary(Opcode::kMultiply, scores, scale, loc);
  if (causal) {
    // Row i may look at columns j <= i: compare iotas, then push the rest to -inf-ish.
    Shape tt(DType::kI32, {t, t});
    Tensor row = internal::MakeOp(Opcode::kIota, tt, {}, loc);
    row.node()->dims = {0};
    Tensor col = internal::MakeOp(Opcode::kIota, tt, {}, loc);
    col.node()->dims = {1};
    Tensor visible = internal::Broadcast(internal::Compare(col, row, compiler::CompareDirection::kLE, loc),
                                         scores.shape().dims, {r - 2, r - 1}, loc);
    Tensor hidden = internal::Broadcast(internal::Constant(-1e9, q.dtype(), loc), scores.shape().dims, {}, loc);
    scores = internal::Select(visible, scores, hidden, loc);
  }
  Tensor p = softmax(scores, -1, sl);
  return internal::Dot(p, v, {batch, batch, {r - 1}, {r - 2}}, loc);  // [..., T, Dv]
}

Tensor apply_rope(const Tensor& x, SL sl) {
  SourceLoc loc = Loc(sl);
  const int r = x.rank();
  if (r < 3 || x.shape().dims[r - 1] % 2 != 0)
    return internal::Error(absl::InvalidArgumentError(absl::StrCat("apply_rope: x ", x.shape().ToString(),
                                                                   " must be [..., T, Dh] with Dh even", At(loc))),
                           x.shape());
  const int64_t t = x.shape().dims[r - 2], dh = x.shape().dims[r - 1], half = dh / 2;
  // The angle tables follow from the shape; they are constants of the graph.
  Literal cos_l(Shape(x.dtype(), {t, dh})), sin_l(Shape(x.dtype(), {t, dh}));
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < dh; ++i) {
      double freq = std::pow(10000.0, -2.0 * static_cast<double>(i % half) / static_cast<double>(dh));
      cos_l.SetDouble(p * dh + i, std::cos(static_cast<double>(p) * freq));
      sin_l.SetDouble(p * dh + i, std::sin(static_cast<double>(p) * freq));
    }
  auto table = [&](Literal l) {
    auto n = std::make_shared<Node>();
    n->op = Opcode::kConstant;
    n->shape = l.shape();
    n->literal = std::move(l);
    n->loc = loc;
    return internal::Broadcast(Tensor(std::move(n)), x.shape().dims, {r - 2, r - 1}, loc);
  };
  Tensor rotated = concatenate({neg(slice(x, r - 1, half, dh, sl), sl), slice(x, r - 1, 0, half, sl)}, r - 1, sl);
  return add(mul(x, table(std::move(cos_l)), sl), mul(rotated, table(std::move(sin_l)), sl), sl);
}

Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype, SL sl) {
  SourceLoc loc = Loc(sl);
  std::vector<int64_t> out = labels.shape().dims;
  out.push_back(classes);
  Tensor iota = internal::MakeOp(Opcode::kIota, Shape(labels.dtype(), out), {}, loc);
  iota.node()->dims = {labels.rank()};
  std::vector<int64_t> bd(labels.rank());
  for (int k = 0; k < labels.rank(); ++k) bd[k] = k;
  Tensor lb = internal::Broadcast(labels, out, bd, loc);
  return internal::Convert(internal::Compare(lb, iota, compiler::CompareDirection::kEQ, loc), dtype, loc);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, SL sl) {
  SourceLoc loc = Loc(sl);
  if (logits.rank() != 2 || labels.rank() != 1 || labels.shape().dims[0] != logits.shape().dims[0])
    return internal::Error(absl::InvalidArgumentError(absl::StrCat(
                               "cross_entropy: logits ", logits.shape().ToString(), " and labels ",
                               labels.shape().ToString(), " must be [B, C] and [B]", At(loc))),
                           Shape(logits.dtype(), {}));
  if (IsFloat(labels.dtype()))
    return internal::Error(absl::InvalidArgumentError(absl::StrCat("cross_entropy: labels '", labels.name(),
                                                                   "' must be integer class ids, not ",
                                                                   labels.shape().ToString(), At(loc))),
                           Shape(logits.dtype(), {}));
  Tensor lp = log_softmax(logits, 1, sl);
  Tensor oh = one_hot(labels, logits.shape().dims[1], logits.dtype(), sl);
  return neg(mean(sum(mul(lp, oh, sl), {1}, false, sl), sl), sl);
}

absl::StatusOr<Tensor> nonzero(const Tensor& a, SL loc) {
  auto v = a.to_host(loc);
  if (!v.ok()) return v.status();
  const std::vector<int64_t>& dims = v->shape().dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int32_t> idx;
  int64_t count = 0;
  for (int64_t k = 0; k < v->elements(); ++k) {
    if (v->GetDouble(k) == 0) continue;
    ++count;
    for (int64_t i : Unravel(k, dims)) idx.push_back(static_cast<int32_t>(i));
  }
  Tensor t = Tensor::from_host(Literal::FromI32({count, rank}, idx), "nonzero", loc);
  t.node()->shape_from_data = true;
  return t;
}

}  // namespace shardscope
