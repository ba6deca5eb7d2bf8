// InferShape: the result type each op's operands and attributes imply, written
// once from the StableHLO spec's type rules. The builders call it (so a bad
// attribute leaves a -1 dim for the verifier to report) and the verifier checks
// every instruction's declared type against it, which is how a parsed program
// with a wrong result type is caught.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/ir.h"

namespace shardscope::compiler {
namespace {

absl::Status Err(const std::string& msg) { return absl::InvalidArgumentError(msg); }

std::string List(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Every entry in [0, rank) and none twice.
bool DistinctInRange(const std::vector<int64_t>& v, int64_t rank) {
  std::set<int64_t> s;
  for (int64_t x : v)
    if (x < 0 || x >= rank || !s.insert(x).second) return false;
  return true;
}

bool IsInt(DType t) { return t == DType::kI32 || t == DType::kI64; }

// dot_general and convolution may return f32 for bf16/f16 operands (StableHLO
// lets their result element type differ from the operands'): the products are
// accumulated in f32 and not rounded back, which is how mixed precision keeps
// f32 accuracy in its sums. The instruction's own element type says which.
DType ContractionResultType(const Instruction& i, DType operands) {
  const bool half = operands == DType::kBF16 || operands == DType::kF16;
  return half && i.shape.dtype == DType::kF32 ? DType::kF32 : operands;
}

// Size of a dimension after dilation by `dil` and padding by lo/hi, then the
// number of windows of dilated size that fit at stride `stride` (StableHLO's
// formula for convolution and reduce_window).
int64_t WindowCount(int64_t in, int64_t lo, int64_t hi, int64_t base_dil, int64_t win,
                    int64_t win_dil, int64_t stride) {
  int64_t padded = (in == 0 ? 0 : (in - 1) * base_dil + 1) + lo + hi;
  int64_t dilated_window = (win - 1) * win_dil + 1;
  if (padded < dilated_window) return 0;
  return (padded - dilated_window) / stride + 1;
}

int64_t At(const std::vector<int64_t>& v, size_t k, int64_t dflt) { return k < v.size() ? v[k] : dflt; }

absl::StatusOr<Shape> InferConvolution(const Instruction& i) {
  const Shape& l = i.operands[0]->shape;
  const Shape& r = i.operands[1]->shape;
  const ConvDims& c = i.conv;
  const size_t ns = c.input_spatial.size();
  if (l.rank() != static_cast<int>(ns) + 2 || r.rank() != l.rank())
    return Err(absl::StrCat("input ", l.ToString(), " and kernel ", r.ToString(), " must both have rank ",
                            ns + 2, " (batch, feature and ", ns, " spatial dims)"));
  if (c.kernel_spatial.size() != ns || c.output_spatial.size() != ns)
    return Err("input, kernel and output must list as many spatial dims");
  std::vector<int64_t> in = {c.input_batch, c.input_feature}, kr = {c.kernel_input_feature, c.kernel_output_feature},
                       out = {c.output_batch, c.output_feature};
  in.insert(in.end(), c.input_spatial.begin(), c.input_spatial.end());
  kr.insert(kr.end(), c.kernel_spatial.begin(), c.kernel_spatial.end());
  out.insert(out.end(), c.output_spatial.begin(), c.output_spatial.end());
  if (!DistinctInRange(in, l.rank()) || !DistinctInRange(kr, r.rank()) || !DistinctInRange(out, l.rank()))
    return Err("dimension numbers must name every dimension exactly once");
  for (const auto* v : {&c.window_strides, &c.lhs_dilation, &c.rhs_dilation}) {
    if (!v->empty() && v->size() != ns) return Err("window attributes need one entry per spatial dim");
    for (int64_t x : *v)
      if (x < 1) return Err("window strides and dilations must be >= 1");
  }
  if (!c.padding.empty() && c.padding.size() != ns) return Err("padding needs one pair per spatial dim");
  const int64_t fg = c.feature_group_count, bg = c.batch_group_count;
  if (fg < 1 || bg < 1 || (fg > 1 && bg > 1)) return Err("group counts must be >= 1 and not both > 1");
  const int64_t batch = l.dims[c.input_batch], feat = l.dims[c.input_feature];
  const int64_t kin = r.dims[c.kernel_input_feature], kout = r.dims[c.kernel_output_feature];
  if (feat % fg != 0 || feat / fg != kin)
    return Err(absl::StrCat("input features (", feat, ") / feature_group_count (", fg,
                            ") must equal the kernel's input features (", kin, ")"));
  if (kout % fg != 0 || kout % bg != 0 || batch % bg != 0)
    return Err("kernel output features must divide by the group counts, and the batch by batch_group_count");
  if (l.dtype != r.dtype) return Err("input and kernel element types differ");
  std::vector<int64_t> dims(l.rank());
  dims[c.output_batch] = batch / bg;
  dims[c.output_feature] = kout;
  for (size_t k = 0; k < ns; ++k) {
    int64_t lo = k < c.padding.size() ? c.padding[k].first : 0;
    int64_t hi = k < c.padding.size() ? c.padding[k].second : 0;
    dims[c.output_spatial[k]] =
        WindowCount(l.dims[c.input_spatial[k]], lo, hi, At(c.lhs_dilation, k, 1), r.dims[c.kernel_spatial[k]],
                    At(c.rhs_dilation, k, 1), At(c.window_strides, k, 1));
  }
  return Shape(ContractionResultType(i, l.dtype), dims);
}

absl::StatusOr<Shape> InferReduceWindow(const Instruction& i) {
  const Shape& in = i.operands[0]->shape;
  const WindowDims& w = i.window;
  const size_t r = static_cast<size_t>(in.rank());
  if (w.dimensions.size() != r) return Err("window_dimensions needs one entry per operand dim");
  for (const auto* v : {&w.strides, &w.base_dilations, &w.window_dilations}) {
    if (!v->empty() && v->size() != r) return Err("window attributes need one entry per operand dim");
    for (int64_t x : *v)
      if (x < 1) return Err("window strides and dilations must be >= 1");
  }
  if (!w.padding.empty() && w.padding.size() != r) return Err("padding needs one pair per operand dim");
  if (i.operands[1]->shape != Shape(in.dtype, {})) return Err("init value must be a scalar of the operand's type");
  std::vector<int64_t> dims(r);
  for (size_t k = 0; k < r; ++k) {
    if (w.dimensions[k] < 1) return Err("window dimensions must be >= 1");
    dims[k] = WindowCount(in.dims[k], k < w.padding.size() ? w.padding[k].first : 0,
                          k < w.padding.size() ? w.padding[k].second : 0, At(w.base_dilations, k, 1),
                          w.dimensions[k], At(w.window_dilations, k, 1), At(w.strides, k, 1));
  }
  return Shape(in.dtype, dims);
}

absl::StatusOr<Shape> InferGather(const Instruction& i) {
  const Shape& a = i.operands[0]->shape;
  const Shape& idx = i.operands[1]->shape;
  const GatherDims& g = i.gather;
  if (!IsInt(idx.dtype)) return Err("start indices must be i32 or i64");
  if (g.index_vector_dim < 0 || g.index_vector_dim > idx.rank()) return Err("index_vector_dim out of range");
  const int64_t nidx = g.index_vector_dim == idx.rank() ? 1 : idx.dims[g.index_vector_dim];
  if (static_cast<int64_t>(g.start_index_map.size()) != nidx)
    return Err(absl::StrCat("start_index_map has ", g.start_index_map.size(), " entries; the index vector has ", nidx));
  if (!DistinctInRange(g.start_index_map, a.rank())) return Err("start_index_map entries must be distinct operand dims");
  if (static_cast<int>(g.slice_sizes.size()) != a.rank()) return Err("slice_sizes needs one entry per operand dim");
  if (!DistinctInRange(g.collapsed_slice_dims, a.rank())) return Err("collapsed_slice_dims must be distinct operand dims");
  for (int d = 0; d < a.rank(); ++d)
    if (g.slice_sizes[d] < 0 || g.slice_sizes[d] > a.dims[d])
      return Err(absl::StrCat("slice size ", g.slice_sizes[d], " does not fit operand dim ", d));
  for (int64_t d : g.collapsed_slice_dims)
    if (g.slice_sizes[d] != 1) return Err("collapsed slice dims must have slice size 1");
  std::vector<int64_t> batch, offset;
  for (int d = 0; d < idx.rank(); ++d)
    if (d != g.index_vector_dim) batch.push_back(idx.dims[d]);
  for (int d = 0; d < a.rank(); ++d)
    if (!Contains(g.collapsed_slice_dims, d)) offset.push_back(g.slice_sizes[d]);
  const int64_t rank = static_cast<int64_t>(batch.size() + offset.size());
  if (offset.size() != g.offset_dims.size() || !DistinctInRange(g.offset_dims, rank) ||
      !std::is_sorted(g.offset_dims.begin(), g.offset_dims.end()))
    return Err(absl::StrCat("offset_dims ", List(g.offset_dims), " must be ", offset.size(),
                            " sorted result dims"));
  std::vector<int64_t> dims;
  size_t bi = 0, oi = 0;
  for (int64_t d = 0; d < rank; ++d) dims.push_back(Contains(g.offset_dims, d) ? offset[oi++] : batch[bi++]);
  return Shape(a.dtype, dims);
}

absl::Status CheckScatter(const Instruction& i) {
  const Shape& a = i.operands[0]->shape;
  const Shape& idx = i.operands[1]->shape;
  const Shape& up = i.operands[2]->shape;
  const ScatterDims& s = i.scatter;
  if (!IsInt(idx.dtype)) return Err("scatter indices must be i32 or i64");
  if (up.dtype != a.dtype) return Err("updates and operand element types differ");
  if (s.index_vector_dim < 0 || s.index_vector_dim > idx.rank()) return Err("index_vector_dim out of range");
  const int64_t nidx = s.index_vector_dim == idx.rank() ? 1 : idx.dims[s.index_vector_dim];
  if (static_cast<int64_t>(s.scatter_dims_to_operand_dims.size()) != nidx)
    return Err("scatter_dims_to_operand_dims needs one entry per index vector element");
  if (!DistinctInRange(s.scatter_dims_to_operand_dims, a.rank()) || !DistinctInRange(s.inserted_window_dims, a.rank()))
    return Err("scatter_dims_to_operand_dims and inserted_window_dims must be distinct operand dims");
  if (!DistinctInRange(s.update_window_dims, up.rank()) ||
      !std::is_sorted(s.update_window_dims.begin(), s.update_window_dims.end()))
    return Err("update_window_dims must be sorted, distinct update dims");
  if (static_cast<int>(s.update_window_dims.size() + s.inserted_window_dims.size()) != a.rank())
    return Err("update_window_dims plus inserted_window_dims must cover the operand's rank");
  std::vector<int64_t> scatter_dims;
  for (int d = 0; d < idx.rank(); ++d)
    if (d != s.index_vector_dim) scatter_dims.push_back(idx.dims[d]);
  std::vector<int64_t> up_scatter;
  for (int d = 0; d < up.rank(); ++d)
    if (!Contains(s.update_window_dims, d)) up_scatter.push_back(up.dims[d]);
  if (up_scatter != scatter_dims)
    return Err(absl::StrCat("update scatter dims ", List(up_scatter), " must equal the index batch dims ",
                            List(scatter_dims)));
  size_t w = 0;
  for (int d = 0; d < a.rank(); ++d) {
    if (Contains(s.inserted_window_dims, d)) continue;
    if (up.dims[s.update_window_dims[w++]] > a.dims[d]) return Err("an update window exceeds the operand");
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> Infer(const Instruction& i) {
  const auto& ops = i.operands;
  auto in = [&](size_t k) -> const Shape& { return ops[k]->shape; };
  switch (i.op) {
    case Opcode::kParameter: case Opcode::kIota: case Opcode::kPartitionId:
      return i.shape;
    case Opcode::kConstant:
      if (!i.literal) return Err("constant without a value");
      return i.literal->shape();
    case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kPower:
      if (in(0) != in(1))
        return Err(absl::StrCat("operand types differ: ", in(0).ToString(), " vs ", in(1).ToString()));
      return in(0);
    case Opcode::kNegate: case Opcode::kAbs:
      return in(0);
    case Opcode::kExponential: case Opcode::kLog: case Opcode::kLogistic: case Opcode::kTanh:
    case Opcode::kSqrt: case Opcode::kRsqrt:
      if (!IsFloat(in(0).dtype)) return Err(absl::StrCat("needs a floating-point operand, not ", in(0).ToString()));
      return in(0);
    case Opcode::kCompare:
      if (in(0) != in(1)) return Err("compare operands differ in type");
      return Shape(DType::kI1, in(0).dims);
    case Opcode::kSelect:
      if (in(1) != in(2)) return Err("select branches differ in type");
      if (in(0).dtype != DType::kI1) return Err("select predicate must be i1");
      if (in(0).rank() != 0 && in(0).dims != in(1).dims) return Err("select predicate shape differs from the branches");
      return in(1);
    case Opcode::kClamp:
      for (size_t k : {size_t{0}, size_t{2}})
        if (in(k).dtype != in(1).dtype || (in(k).rank() != 0 && in(k).dims != in(1).dims))
          return Err("clamp bounds must be scalars or the operand's type");
      return in(1);
    case Opcode::kConvert:
      return Shape(i.shape.dtype, in(0).dims);
    case Opcode::kBroadcastInDim: case Opcode::kReshape:
      return Shape(in(0).dtype, i.shape.dims);
    case Opcode::kTranspose: {
      if (!DistinctInRange(i.dims, in(0).rank()) || static_cast<int>(i.dims.size()) != in(0).rank())
        return Err(absl::StrCat("dims ", List(i.dims), " are not a permutation of ", in(0).rank(), " dimensions"));
      std::vector<int64_t> d;
      for (int64_t p : i.dims) d.push_back(in(0).dims[p]);
      return Shape(in(0).dtype, d);
    }
    case Opcode::kDotGeneral: {
      const DotDims& dd = i.dot;
      std::vector<int64_t> lhs_all = dd.lhs_batch, rhs_all = dd.rhs_batch;
      lhs_all.insert(lhs_all.end(), dd.lhs_contracting.begin(), dd.lhs_contracting.end());
      rhs_all.insert(rhs_all.end(), dd.rhs_contracting.begin(), dd.rhs_contracting.end());
      if (!DistinctInRange(lhs_all, in(0).rank()) || !DistinctInRange(rhs_all, in(1).rank()))
        return Err("batch and contracting dims must be distinct dims of their operand");
      std::vector<int64_t> d;
      for (int64_t x : dd.lhs_batch) d.push_back(in(0).dims[x]);
      for (int k = 0; k < in(0).rank(); ++k)
        if (!Contains(lhs_all, k)) d.push_back(in(0).dims[k]);
      for (int k = 0; k < in(1).rank(); ++k)
        if (!Contains(rhs_all, k)) d.push_back(in(1).dims[k]);
      return Shape(ContractionResultType(i, in(0).dtype), d);
    }
    case Opcode::kReduce: {
      if (!DistinctInRange(i.dims, in(0).rank())) return Err("reduce dimensions out of range or repeated");
      if (in(1) != Shape(in(0).dtype, {})) return Err("init value must be a scalar of the operand's type");
      std::vector<int64_t> d;
      for (int k = 0; k < in(0).rank(); ++k)
        if (!Contains(i.dims, k)) d.push_back(in(0).dims[k]);
      return Shape(in(0).dtype, d);
    }
    case Opcode::kDynamicSlice: case Opcode::kDynamicUpdateSlice: {
      const bool update = i.op == Opcode::kDynamicUpdateSlice;
      const size_t first = update ? 2 : 1;
      if (ops.size() != first + in(0).rank())
        return Err(absl::StrCat("needs one start index per operand dimension (", in(0).rank(), ")"));
      for (size_t k = first; k < ops.size(); ++k)
        if (in(k).rank() != 0 || !IsInt(in(k).dtype)) return Err("start indices must be i32 or i64 scalars");
      const std::vector<int64_t>& sizes = update ? in(1).dims : i.dims;
      if (static_cast<int>(sizes.size()) != in(0).rank()) return Err("slice rank differs from the operand's");
      for (int d = 0; d < in(0).rank(); ++d)
        if (sizes[d] < 0 || sizes[d] > in(0).dims[d]) return Err("slice size exceeds the dimension");
      if (update && in(1).dtype != in(0).dtype) return Err("update and operand element types differ");
      return update ? in(0) : Shape(in(0).dtype, sizes);
    }
    case Opcode::kSlice: {
      const SliceDims& s = i.slice;
      const int r = in(0).rank();
      if (static_cast<int>(s.start.size()) != r || static_cast<int>(s.limit.size()) != r ||
          static_cast<int>(s.stride.size()) != r)
        return Err("slice needs start, limit and stride per dimension");
      std::vector<int64_t> d;
      for (int k = 0; k < r; ++k) {
        if (s.start[k] < 0 || s.limit[k] < s.start[k] || s.limit[k] > in(0).dims[k] || s.stride[k] < 1)
          return Err(absl::StrCat("slice [", s.start[k], ":", s.limit[k], ":", s.stride[k],
                                  "] does not fit dimension ", k, " of size ", in(0).dims[k]));
        d.push_back((s.limit[k] - s.start[k] + s.stride[k] - 1) / s.stride[k]);
      }
      return Shape(in(0).dtype, d);
    }
    case Opcode::kPad: {
      const PadDims& p = i.pad;
      const int r = in(0).rank();
      if (in(1) != Shape(in(0).dtype, {})) return Err("padding value must be a scalar of the operand's type");
      if (static_cast<int>(p.low.size()) != r || static_cast<int>(p.high.size()) != r ||
          static_cast<int>(p.interior.size()) != r)
        return Err("pad needs low, high and interior per dimension");
      std::vector<int64_t> d;
      for (int k = 0; k < r; ++k) {
        if (p.interior[k] < 0) return Err("interior padding must be >= 0");
        int64_t n = in(0).dims[k];
        d.push_back(p.low[k] + p.high[k] + n + std::max<int64_t>(n - 1, 0) * p.interior[k]);
        if (d.back() < 0) return Err("negative padding crops more than the dimension holds");
      }
      return Shape(in(0).dtype, d);
    }
    case Opcode::kConcatenate: {
      if (ops.empty()) return Err("concatenate needs at least one operand");
      if (i.dims.size() != 1 || i.dims[0] < 0 || i.dims[0] >= in(0).rank())
        return Err("concatenate dimension out of range");
      Shape out = in(0);
      for (size_t k = 1; k < ops.size(); ++k) {
        Shape s = in(k);
        if (s.dtype != out.dtype || s.rank() != out.rank()) return Err("operands differ in element type or rank");
        for (int d = 0; d < s.rank(); ++d)
          if (d != i.dims[0] && s.dims[d] != out.dims[d]) return Err("operands differ outside the concatenated dim");
        out.dims[i.dims[0]] += s.dims[i.dims[0]];
      }
      return out;
    }
    case Opcode::kConvolution: return InferConvolution(i);
    case Opcode::kReduceWindow: return InferReduceWindow(i);
    case Opcode::kGather: return InferGather(i);
    case Opcode::kScatter:
      if (absl::Status s = CheckScatter(i); !s.ok()) return s;
      return in(0);
    case Opcode::kRngBitGenerator:
      if (in(0) != Shape(DType::kI64, {2})) return Err("the state must be tensor<2xi64>");
      if (!IsInt(i.shape.dtype)) return Err("random bits are i32 or i64");
      return i.shape;
    case Opcode::kWhile:
      return WhilePlaceholderShape();
    case Opcode::kGetTupleElement: {
      const Instruction& w = *ops[0];
      if (w.op != Opcode::kWhile) return Err("get_tuple_element reads a while's results only");
      if (i.dims.size() != 1 || i.dims[0] < 0 || i.dims[0] >= static_cast<int64_t>(w.operands.size()))
        return Err(absl::StrCat("result index out of range: the while carries ", w.operands.size(), " values"));
      return w.operands[i.dims[0]]->shape;
    }
    case Opcode::kOptimizationBarrier:
      if (ops.empty()) return Err("optimization_barrier needs at least one operand");
      return in(0);
    case Opcode::kAllReduce:
      return in(0);
    case Opcode::kAllGather: {
      Shape s = in(0);
      int64_t group = i.replica_groups.empty() ? 1 : static_cast<int64_t>(i.replica_groups[0].size());
      if (i.dims.size() != 1 || i.dims[0] < 0 || i.dims[0] >= s.rank()) return Err("all_gather dim out of range");
      s.dims[i.dims[0]] *= group;
      return s;
    }
    case Opcode::kReduceScatter: {
      Shape s = in(0);
      if (i.dims.size() != 1 || i.dims[0] < 0 || i.dims[0] >= s.rank())
        return Err(absl::StrCat("scatter_dimension ", List(i.dims), " is out of range for rank ", s.rank()));
      const int64_t dim = i.dims[0], size = s.dims[dim];
      if (size == 0) return s;
      int64_t group = i.replica_groups.empty() ? 0 : static_cast<int64_t>(i.replica_groups[0].size());
      if (group == 0) {
        // Empty replica groups are every device, a count the IR does not hold:
        // the declared result type says it (the builder uses num_partitions).
        const int64_t declared = i.shape.rank() == s.rank() ? i.shape.dims[dim] : -1;
        if (declared <= 0 || size % declared != 0)
          return Err(absl::StrCat("with empty replica_groups the result's scatter dimension (", declared,
                                  ") must divide the operand's (", size, ")"));
        group = size / declared;
      }
      if (size % group != 0)
        return Err(absl::StrCat("scatter dimension ", dim, " (size ", size,
                                ") is not divisible by the replica group size ", group));
      s.dims[dim] = size / group;
      return s;
    }
    case Opcode::kAllToAll: {
      Shape s = in(0);
      if (i.dims.size() != 3)
        return Err("all_to_all needs split_dimension, concat_dimension and split_count");
      const int64_t split = i.dims[0], concat = i.dims[1], count = i.dims[2];
      if (split < 0 || split >= s.rank())
        return Err(absl::StrCat("split_dimension ", split, " is out of range for rank ", s.rank()));
      if (concat < 0 || concat >= s.rank())
        return Err(absl::StrCat("concat_dimension ", concat, " is out of range for rank ", s.rank()));
      if (count <= 0) return Err(absl::StrCat("split_count ", count, " must be positive"));
      if (!i.replica_groups.empty() && static_cast<int64_t>(i.replica_groups[0].size()) != count)
        return Err(absl::StrCat("split_count ", count, " differs from the replica group size ",
                                i.replica_groups[0].size()));
      if (s.dims[split] % count != 0)
        return Err(absl::StrCat("split dimension ", split, " (size ", s.dims[split],
                                ") is not divisible by split_count ", count));
      s.dims[split] /= count;
      s.dims[concat] *= count;
      return s;
    }
    case Opcode::kCollectivePermute:
    case Opcode::kCollectiveBroadcast:
      return in(0);
  }
  return Err("unknown op");
}

}  // namespace

absl::StatusOr<Shape> InferShape(const Instruction& i) {
  int arity = OpcodeArity(i.op);
  if (arity >= 0 && static_cast<int>(i.operands.size()) != arity)
    return Err(absl::StrCat("expects ", arity, " operands, has ", i.operands.size()));
  for (const Instruction* o : i.operands)
    if (o == nullptr) return Err("an operand is missing");
  return Infer(i);
}

}  // namespace shardscope::compiler
