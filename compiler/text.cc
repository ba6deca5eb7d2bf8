// PrintModule: the StableHLO text of a module (see text.h and docs/ops.md for the
// forms each op takes; compiler/parser.cc reads the same forms back).
#include "compiler/text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace shardscope::compiler {
namespace {

// How values are named in one region: parameters `%<arg><k>`, the others
// `%<instr><id>`. The function body uses %arg0 and %7; a while's regions
// prefix both with the while's name (%w7_arg0, %w7_c3 in its cond, %w7_b3 in
// its body), so names stay unique in the whole function, as MLIR needs.
struct Names {
  std::string arg = "arg", instr;
};

// A while's result k: `%7#k`, or `%7` when it carries one value.
std::string Ref(const Instruction* i, const Names& n) {
  if (i->op == Opcode::kGetTupleElement) {
    std::string w = Ref(i->operands[0], n);
    return i->operands[0]->operands.size() == 1 ? w : absl::StrCat(w, "#", i->dims.empty() ? -1 : i->dims[0]);
  }
  return i->op == Opcode::kParameter ? absl::StrCat("%", n.arg, i->param_index)
                                     : absl::StrCat("%", n.instr, i->id);
}

// The names inside the regions of while `w` (named under `n`).
Names RegionNames(const Instruction& w, const Names& n, bool body) {
  std::string base = n.instr.empty() ? absl::StrCat("w", w.id, "_") : absl::StrCat(n.instr, w.id, "_");
  return {absl::StrCat(base, "arg"), absl::StrCat(base, body ? "b" : "c")};
}

std::string ShardingText(const Sharding& s, const PrintOptions& o) {
  return o.iota_shardings ? s.ToIotaString() : s.ToString();
}

std::string Indented(const std::string& text, const std::string& pad) {
  std::string out;
  size_t b = 0;
  while (b < text.size()) {
    size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size() - 1;
    absl::StrAppend(&out, pad, text.substr(b, e - b + 1));
    b = e + 1;
  }
  return out;
}

std::string IntList(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

// A string attribute as MLIR writes one: quotes and backslashes escaped, and
// any other byte outside printable ASCII as \XX, so a user's name with a
// quote or a newline (they name tensors and layers) parses back as it was.
std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      static const char* hex = "0123456789ABCDEF";
      out += '\\';
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Loc(const Instruction& i, const PrintOptions& o) {
  if (!o.locations || !i.loc.known()) return "";
  std::string file = absl::StrCat(Quoted(i.loc.file), ":", i.loc.line, ":0");
  if (!i.scope.empty()) return absl::StrCat(" loc(", Quoted(i.scope), "(", file, "))");
  return absl::StrCat(" loc(", file, ")");
}

std::string FunctionalType(const Instruction& i) {
  std::vector<std::string> in;
  for (const Instruction* o : i.operands) in.push_back(o->shape.ToMlir());
  return absl::StrCat("(", absl::StrJoin(in, ", "), ") -> ", i.shape.ToMlir());
}

std::string Groups(const std::vector<std::vector<int64_t>>& groups) {
  std::vector<std::string> rows;
  size_t width = groups.empty() ? 0 : groups[0].size();
  for (const auto& g : groups) rows.push_back(IntList(g));
  return absl::StrCat("dense<[", absl::StrJoin(rows, ", "), "]> : tensor<", groups.size(), "x",
                      width, "xi64>");
}

std::string SourceTargetPairs(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::vector<std::string> rows;
  for (const auto& [source, target] : pairs) rows.push_back(absl::StrCat("[", source, ", ", target, "]"));
  return absl::StrCat("dense<[", absl::StrJoin(rows, ", "), "]> : tensor<", pairs.size(), "x2xi64>");
}

// dims[k], or -1 when a malformed instruction lacks it (printing never fails).
int64_t DimAt(const Instruction& i, size_t k) { return k < i.dims.size() ? i.dims[k] : -1; }

std::string LiteralText(const Literal& l) {
  std::vector<std::string> vals;
  for (int64_t k = 0; k < l.elements(); ++k) {
    double v = l.GetDouble(k);
    // f64 needs 17 significant digits to print every value distinctly (the
    // fingerprint is this text, so close constants must not collide).
    vals.push_back(IsFloat(l.shape().dtype)
                       ? absl::StrFormat(l.shape().dtype == DType::kF64 ? "%.17g" : "%.9g", v)
                                            : absl::StrCat(static_cast<int64_t>(v)));
    if (l.shape().dtype == DType::kI1) vals.back() = v != 0 ? "true" : "false";
  }
  if (l.shape().rank() == 0) return absl::StrCat("dense<", vals[0], ">");
  return absl::StrCat("dense<[", absl::StrJoin(vals, ", "), "]>");
}

std::string Array(const std::vector<int64_t>& v) {
  if (v.empty()) return "array<i64>";
  return absl::StrCat("array<i64: ", absl::StrJoin(v, ", "), ">");
}

// `v` with `n` entries, defaulting missing ones (an empty list means defaults).
std::vector<int64_t> Filled(const std::vector<int64_t>& v, size_t n, int64_t dflt) {
  return v.empty() ? std::vector<int64_t>(n, dflt) : v;
}

std::string Pairs(const std::vector<std::pair<int64_t, int64_t>>& p, size_t n) {
  std::vector<std::string> rows;
  for (size_t k = 0; k < n; ++k)
    rows.push_back(k < p.size() ? absl::StrCat("[", p[k].first, ", ", p[k].second, "]") : "[0, 0]");
  return absl::StrCat("[", absl::StrJoin(rows, ", "), "]");
}

// The body of reduce_window, scatter and reduce_scatter: a two-argument
// region applying the ReduceKind's op, or returning the update (`replace`).
std::string Region(DType t, ReduceKind k, bool replace) {
  std::string ty = Shape(t, {}).ToMlir();
  std::string body = replace ? absl::StrCat("        stablehlo.return %y : ", ty)
                             : absl::StrCat("        %r = ", ReduceKindOp(k), " %x, %y : ", ty,
                                            "\n        stablehlo.return %r : ", ty);
  return absl::StrCat("({\n      ^bb0(%x: ", ty, ", %y: ", ty, "):\n", body, "\n    })");
}

// "[b, f, 0, 1]": each position of a tensor's dims says which role it plays.
std::string ConvLayout(int rank, int64_t batch, char b, int64_t feature, char f,
                       const std::vector<int64_t>& spatial) {
  std::vector<std::string> v(std::max(rank, 0), "?");
  if (batch >= 0 && batch < rank) v[batch] = std::string(1, b);
  if (feature >= 0 && feature < rank) v[feature] = std::string(1, f);
  for (size_t k = 0; k < spatial.size(); ++k)
    if (spatial[k] >= 0 && spatial[k] < rank) v[spatial[k]] = absl::StrCat(k);
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

std::string PrintInstr(const Instruction& i, const PrintOptions& o, const Names& names);

// A region's lines and its return, indented one level below the while.
std::string RegionText(const Module& m, const PrintOptions& o, const Names& names) {
  std::string out;
  for (const auto& i : m.instructions())
    if (i->op != Opcode::kParameter && i->op != Opcode::kGetTupleElement)
      absl::StrAppend(&out, Indented(PrintInstr(*i, o, names), "  "));
  std::vector<std::string> refs, types;
  for (const Instruction* r : m.outputs()) {
    refs.push_back(Ref(r, names));
    types.push_back(r->shape.ToMlir());
  }
  absl::StrAppend(&out, "      stablehlo.return ", absl::StrJoin(refs, ", "), " : ", absl::StrJoin(types, ", "),
                  "\n");
  return out;
}

// `%7:2 = stablehlo.while(%w7_arg0 = %3, %w7_arg1 = %arg0) : T0, T1 cond {...} do {...}`
std::string WhileText(const Instruction& i, const PrintOptions& o, const Names& names) {
  if (!i.cond || !i.body) return "stablehlo.while() : () cond {} do {}";  // malformed: printing never fails
  const Names cn = RegionNames(i, names, false), bn = RegionNames(i, names, true);
  std::vector<std::string> args, types;
  for (size_t k = 0; k < i.operands.size(); ++k) {
    args.push_back(absl::StrCat("%", cn.arg, k, " = ", Ref(i.operands[k], names)));
    types.push_back(i.operands[k]->shape.ToMlir());
  }
  return absl::StrCat(OpcodeName(i.op), "(", absl::StrJoin(args, ", "), ") : ", absl::StrJoin(types, ", "),
                      "\n     cond {\n", RegionText(*i.cond, o, cn), "    } do {\n", RegionText(*i.body, o, bn),
                      "    }");
}

std::string PrintInstr(const Instruction& i, const PrintOptions& o, const Names& names) {
  std::string lhs = absl::StrCat("    ", Ref(&i, names));
  if (i.op == Opcode::kWhile && i.operands.size() != 1) absl::StrAppend(&lhs, ":", i.operands.size());
  absl::StrAppend(&lhs, " = ");
  std::vector<std::string> args;
  for (const Instruction* op : i.operands) args.push_back(Ref(op, names));
  std::string a = absl::StrJoin(args, ", ");
  std::string name = OpcodeName(i.op);
  std::string body;
  switch (i.op) {
    case Opcode::kConstant:
      body = absl::StrCat(name, " ", LiteralText(*i.literal), " : ", i.shape.ToMlir());
      break;
    case Opcode::kIota:
      body = absl::StrCat(name, " dim = ", i.dims[0], " : ", i.shape.ToMlir());
      break;
    case Opcode::kPartitionId:
      body = absl::StrCat(name, " : ", i.shape.ToMlir());
      break;
    case Opcode::kCompare:
      body = absl::StrCat(name, "  ", CompareDirectionName(i.compare), ", ", a, " : ",
                          FunctionalType(i));
      break;
    case Opcode::kBroadcastInDim:
      body = absl::StrCat(name, " ", a, ", dims = ", IntList(i.dims), " : ", FunctionalType(i));
      break;
    case Opcode::kTranspose:
      body = absl::StrCat(name, " ", a, ", dims = ", IntList(i.dims), " : ", FunctionalType(i));
      break;
    case Opcode::kDotGeneral:
      body = absl::StrCat(name, " ", a, ", batching_dims = ", IntList(i.dot.lhs_batch), " x ",
                          IntList(i.dot.rhs_batch), ", contracting_dims = ",
                          IntList(i.dot.lhs_contracting), " x ", IntList(i.dot.rhs_contracting),
                          " : ", FunctionalType(i));
      break;
    case Opcode::kReduce:
      body = absl::StrCat(name, "(", Ref(i.operands[0], names), " init: ", Ref(i.operands[1], names),
                          ") applies ", ReduceKindOp(i.reduce), " across dimensions = ",
                          IntList(i.dims), " : ", FunctionalType(i));
      break;
    case Opcode::kDynamicSlice:
      body = absl::StrCat(name, " ", a, ", sizes = ", IntList(i.dims), " : ", FunctionalType(i));
      break;
    case Opcode::kAllReduce:
      body = absl::StrCat("\"", name, "\"(", a, ") ({\n      ^bb0(%x: ",
                          Shape(i.shape.dtype, {}).ToMlir(), ", %y: ",
                          Shape(i.shape.dtype, {}).ToMlir(), "):\n        %r = ",
                          ReduceKindOp(i.reduce), " %x, %y : ", Shape(i.shape.dtype, {}).ToMlir(),
                          "\n        stablehlo.return %r : ", Shape(i.shape.dtype, {}).ToMlir(),
                          "\n    }) {replica_groups = ", Groups(i.replica_groups), "} : ",
                          FunctionalType(i));
      break;
    case Opcode::kSlice: {
      std::vector<std::string> r;
      for (size_t k = 0; k < i.slice.start.size(); ++k)
        r.push_back(absl::StrCat(i.slice.start[k], ":", k < i.slice.limit.size() ? i.slice.limit[k] : 0, ":",
                                 k < i.slice.stride.size() ? i.slice.stride[k] : 1));
      body = absl::StrCat(name, " ", a, " [", absl::StrJoin(r, ", "), "] : ", FunctionalType(i));
      break;
    }
    case Opcode::kPad:
      body = absl::StrCat(name, " ", a, ", low = ", IntList(i.pad.low), ", high = ", IntList(i.pad.high),
                          ", interior = ", IntList(i.pad.interior), " : ", FunctionalType(i));
      break;
    case Opcode::kConcatenate:
      body = absl::StrCat(name, " ", a, ", dim = ", i.dims.empty() ? -1 : i.dims[0], " : ", FunctionalType(i));
      break;
    case Opcode::kConvolution: {
      const ConvDims& c = i.conv;
      const size_t ns = c.input_spatial.size();
      int rank = static_cast<int>(ns) + 2;
      body = absl::StrCat(
          name, "(", a, ") dim_numbers = ",
          ConvLayout(rank, c.input_batch, 'b', c.input_feature, 'f', c.input_spatial), "x",
          ConvLayout(rank, c.kernel_output_feature, 'o', c.kernel_input_feature, 'i', c.kernel_spatial), "->",
          ConvLayout(rank, c.output_batch, 'b', c.output_feature, 'f', c.output_spatial),
          ", window = {stride = ", IntList(Filled(c.window_strides, ns, 1)), ", pad = ", Pairs(c.padding, ns),
          ", lhs_dilate = ", IntList(Filled(c.lhs_dilation, ns, 1)), ", rhs_dilate = ",
          IntList(Filled(c.rhs_dilation, ns, 1)), "} {batch_group_count = ", c.batch_group_count,
          " : i64, feature_group_count = ", c.feature_group_count, " : i64} : ", FunctionalType(i));
      break;
    }
    case Opcode::kReduceWindow: {
      const WindowDims& w = i.window;
      const size_t r = w.dimensions.size();
      body = absl::StrCat("\"", name, "\"(", a, ") ", Region(i.shape.dtype, i.reduce, false),
                          " {window_dimensions = ", Array(w.dimensions), ", window_strides = ",
                          Array(Filled(w.strides, r, 1)), ", base_dilations = ", Array(Filled(w.base_dilations, r, 1)),
                          ", window_dilations = ", Array(Filled(w.window_dilations, r, 1)), ", padding = dense<",
                          Pairs(w.padding, r), "> : tensor<", r, "x2xi64>} : ", FunctionalType(i));
      break;
    }
    case Opcode::kGather: {
      const GatherDims& g = i.gather;
      body = absl::StrCat("\"", name, "\"(", a, ") {dimension_numbers = #stablehlo.gather<offset_dims = ",
                          IntList(g.offset_dims), ", collapsed_slice_dims = ", IntList(g.collapsed_slice_dims),
                          ", start_index_map = ", IntList(g.start_index_map), ", index_vector_dim = ",
                          g.index_vector_dim, ">, slice_sizes = ", Array(g.slice_sizes),
                          ", indices_are_sorted = ", g.indices_are_sorted ? "true" : "false", "} : ",
                          FunctionalType(i));
      break;
    }
    case Opcode::kScatter: {
      const ScatterDims& sc = i.scatter;
      body = absl::StrCat("\"", name, "\"(", a, ") ", Region(i.shape.dtype, i.reduce, sc.replace),
                          " {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = ",
                          IntList(sc.update_window_dims), ", inserted_window_dims = ", IntList(sc.inserted_window_dims),
                          ", scatter_dims_to_operand_dims = ", IntList(sc.scatter_dims_to_operand_dims),
                          ", index_vector_dim = ", sc.index_vector_dim, ">, indices_are_sorted = ",
                          sc.indices_are_sorted ? "true" : "false", ", unique_indices = ",
                          sc.unique_indices ? "true" : "false", "} : ", FunctionalType(i));
      break;
    }
    case Opcode::kRngBitGenerator:
      body = absl::StrCat(name, " ", a, ", algorithm = DEFAULT : ", FunctionalType(i));
      break;
    case Opcode::kOptimizationBarrier:  // StableHLO's form when it holds one value
      body = absl::StrCat(name, " ", a, " : ", i.operands.size() == 1 ? i.shape.ToMlir() : FunctionalType(i));
      break;
    case Opcode::kAllGather:
      body = absl::StrCat("\"", name, "\"(", a, ") {all_gather_dim = ", DimAt(i, 0),
                          " : i64, replica_groups = ", Groups(i.replica_groups), "} : ", FunctionalType(i));
      break;
    case Opcode::kReduceScatter:
      body = absl::StrCat("\"", name, "\"(", a, ") ", Region(i.shape.dtype, i.reduce, false),
                          " {replica_groups = ", Groups(i.replica_groups),
                          ", scatter_dimension = ", DimAt(i, 0), " : i64} : ", FunctionalType(i));
      break;
    case Opcode::kAllToAll:
      body =
          absl::StrCat("\"", name, "\"(", a, ") {concat_dimension = ", DimAt(i, 1),
                       " : i64, replica_groups = ", Groups(i.replica_groups), ", split_count = ", DimAt(i, 2),
                       " : i64, split_dimension = ", DimAt(i, 0), " : i64} : ", FunctionalType(i));
      break;
    case Opcode::kCollectivePermute:
      body = absl::StrCat("\"", name, "\"(", a,
                          ") {source_target_pairs = ", SourceTargetPairs(i.source_target_pairs),
                          "} : ", FunctionalType(i));
      break;
    case Opcode::kCollectiveBroadcast:
      body = absl::StrCat("\"", name, "\"(", a, ") {replica_groups = ", Groups(i.replica_groups),
                          "} : ", FunctionalType(i));
      break;
    case Opcode::kWhile:
      body = WhileText(i, o, names);
      break;
    case Opcode::kGetTupleElement:  // never a line of a module (its uses say %w#k); the CSE key's form
      body = absl::StrCat(name, " ", a, ", index = ", DimAt(i, 0), " : ", i.shape.ToMlir());
      break;
    default:
      if (IsElementwise(i.op) && i.op != Opcode::kSelect && i.op != Opcode::kConvert &&
          i.operands.size() <= 2 && i.operands[0]->shape == i.shape) {
        body = absl::StrCat(name, " ", a, " : ", i.shape.ToMlir());
      } else {
        body = absl::StrCat(name, " ", a, " : ", FunctionalType(i));
      }
  }
  std::string sh;
  if (i.sharding && i.op != Opcode::kParameter)
    sh = absl::StrCat(" {mhlo.sharding = \"", ShardingText(*i.sharding, o), "\"}");
  return absl::StrCat(lhs, body, sh, Loc(i, o), "\n");
}

}  // namespace

std::string PrintInstruction(const Instruction& i, const PrintOptions& o) { return PrintInstr(i, o, Names()); }

std::string PrintModule(const Module& m, const PrintOptions& o) {
  std::string out = absl::StrCat("module @", m.name(), " attributes {mhlo.num_partitions = ",
                                 m.num_partitions(), " : i32} {\n  func.func @main(");
  std::vector<std::string> params;
  for (const Instruction* p : m.parameters()) {
    std::vector<std::string> attrs;
    if (p->sharding) attrs.push_back(absl::StrCat("mhlo.sharding = \"", ShardingText(*p->sharding, o), "\""));
    if (o.names && !p->name.empty()) attrs.push_back(absl::StrCat("shardscope.name = ", Quoted(p->name)));
    std::string s = absl::StrCat(Ref(p, Names()), ": ", p->shape.ToMlir());
    if (!attrs.empty()) absl::StrAppend(&s, " {", absl::StrJoin(attrs, ", "), "}");
    absl::StrAppend(&s, Loc(*p, o));
    params.push_back(s);
  }
  std::vector<std::string> results;
  for (size_t k = 0; k < m.outputs().size(); ++k) {
    std::string s = m.outputs()[k]->shape.ToMlir();
    if (k < m.output_shardings().size())
      absl::StrAppend(&s, " {mhlo.sharding = \"", ShardingText(m.output_shardings()[k], o), "\"}");
    results.push_back(s);
  }
  absl::StrAppend(&out, absl::StrJoin(params, ", "), ") -> (", absl::StrJoin(results, ", "),
                  ") {\n");
  for (const auto& i : m.instructions()) {
    if (i->op == Opcode::kParameter || i->op == Opcode::kGetTupleElement) continue;
    absl::StrAppend(&out, PrintInstr(*i, o, Names()));
  }
  std::vector<std::string> refs, types;
  for (const Instruction* r : m.outputs()) {
    refs.push_back(Ref(r, Names()));
    types.push_back(r->shape.ToMlir());
  }
  absl::StrAppend(&out, "    return ", absl::StrJoin(refs, ", "), " : ", absl::StrJoin(types, ", "),
                  "\n  }\n}\n");
  return out;
}

}  // namespace shardscope::compiler
