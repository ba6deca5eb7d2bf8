#include "core/recompile.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "compiler/fingerprint.h"
#include "compiler/graph_diff.h"

namespace shardscope::internal {
namespace {
using compiler::GraphDiff;
using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;
using compiler::OpChange;

std::string At(const SourceLoc& l) { return l.known() ? absl::StrCat(l.file, ":", l.line) : "an unknown line"; }

std::string Short(Opcode op) {
  std::string s = compiler::OpcodeName(op);
  if (s.rfind("stablehlo.", 0) == 0) s = s.substr(10);
  return s;
}

// "the exponential at train.cc:12 (in optim::AdamW::step)"
bool Is16BitFloat(DType t) { return t == DType::kBF16 || t == DType::kF16; }

std::string OpAt(const Instruction& i) {
  std::string s = absl::StrCat(Short(i.op), " at ", At(i.loc));
  if (!i.loc.via.empty())
    absl::StrAppend(&s, " (in ", i.loc.via, i.scope.empty() ? "" : absl::StrCat(" '", i.scope, "'"), ")");
  else if (!i.scope.empty())
    absl::StrAppend(&s, " (in '", i.scope, "')");
  return s;
}

// The names of inputs only one graph has ("sgd.momentum.l1.weight, ..."), at most three.
std::string InputsOnlyIn(const Module& m, const std::vector<int64_t>& to_other, bool skip_grads = false) {
  std::vector<std::string> names;
  for (size_t k = 0; k < m.instructions().size(); ++k) {
    const Instruction& p = *m.instructions()[k];
    if (p.op != Opcode::kParameter || to_other[k] >= 0 || p.name.empty() || p.name.rfind("scalar@", 0) == 0) continue;
    if (skip_grads && absl::EndsWith(p.name, ".grad")) continue;
    names.push_back(p.name);
  }
  if (names.size() > 3) {
    const size_t more = names.size() - 3;
    names.resize(3);
    names.push_back(absl::StrCat("and ", more, " more"));
  }
  return absl::StrJoin(names, ", ");
}

// A 16-bit float conversion: what autocast adds around contractions.
bool IsAutocastConvert(const Instruction& i) {
  return i.op == Opcode::kConvert &&
         (Is16BitFloat(i.shape.dtype) || (!i.operands.empty() && Is16BitFloat(i.operands[0]->shape.dtype)));
}

// Whether the graphs are the same once 16-bit conversions are left out (the
// other ops' own fields, as a multiset), and differ in those conversions.
bool OnlyAutocastDiffers(const Module& a, const Module& b) {
  std::multiset<uint64_t> x, y;
  std::multiset<std::pair<int, int>> cx, cy;  // conversions: (from, to) dtypes
  for (const auto& i : a.instructions()) {
    if (IsAutocastConvert(*i)) cx.insert({static_cast<int>(i->operands[0]->shape.dtype), static_cast<int>(i->shape.dtype)});
    else if (i->op != Opcode::kParameter) x.insert(compiler::OwnStructureKey(*i));
  }
  for (const auto& i : b.instructions()) {
    if (IsAutocastConvert(*i)) cy.insert({static_cast<int>(i->operands[0]->shape.dtype), static_cast<int>(i->shape.dtype)});
    else if (i->op != Opcode::kParameter) y.insert(compiler::OwnStructureKey(*i));
  }
  return x == y && cx != cy;
}

// Layer names (module scopes) a graph's ops were made under.
std::set<std::string> Layers(const Module& m) {
  std::set<std::string> s;
  for (const auto& i : m.instructions())
    if (!i->scope.empty()) s.insert(i->scope);
  return s;
}

std::string InputName(const GraphInput& in, int index) {
  if (in.name.rfind("scalar@", 0) == 0) return absl::StrCat("the scalar made at ", in.name.substr(7));
  return in.name.empty() ? absl::StrCat("input #", index) : in.name;
}

std::vector<std::string> Keys(const std::vector<GraphInput>& inputs) {
  std::vector<std::string> k;
  for (const auto& in : inputs) k.push_back(in.Key());
  return k;
}

// The first op (in the new graph's order) that reads parameter `p`.
const Instruction* FirstReader(const Module& m, const Instruction* p) {
  for (const auto& i : m.instructions())
    for (const Instruction* o : i->operands)
      if (o == p) return i.get();
  return nullptr;
}

// The graph compared with, the diff, and lookups over both sides.
struct Compared {
  const SeenGraph* old = nullptr;
  GraphDiff diff;
  const Module* now = nullptr;
  const std::vector<GraphInput>* inputs = nullptr;
  const std::vector<SourceLoc>* notes = nullptr;

  const Instruction& Old(int64_t k) const { return *old->module->instructions()[k]; }
  const Instruction& New(int64_t k) const { return *now->instructions()[k]; }
  // The instruction a change is about: the new one, else the old one.
  const Instruction& Of(const OpChange& c) const { return c.new_index >= 0 ? New(c.new_index) : Old(c.old_index); }
  SourceLoc NoteOf(const OpChange& c) const {
    if (c.new_index >= 0 && c.new_index < static_cast<int64_t>(notes->size()) && (*notes)[c.new_index].known())
      return (*notes)[c.new_index];
    if (c.old_index >= 0 && c.old_index < static_cast<int64_t>(old->notes.size())) return old->notes[c.old_index];
    return {};
  }
  bool IsParam(const OpChange& c) const { return Of(c).op == Opcode::kParameter; }
};

// "3 ops added, 1 removed, 2 changed"
std::string CountText(const GraphDiff& d) {
  std::vector<std::string> parts;
  const int64_t a = d.Count(OpChange::Kind::kAdded), r = d.Count(OpChange::Kind::kRemoved),
                c = d.Count(OpChange::Kind::kChanged);
  if (a) parts.push_back(absl::StrCat(a, a == 1 ? " op added" : " ops added"));
  if (r) parts.push_back(absl::StrCat(r, " removed"));
  if (c) parts.push_back(absl::StrCat(c, " changed"));
  return absl::StrJoin(parts, ", ");
}

std::string DescribeChange(const Compared& c, const OpChange& ch) {
  const Instruction& i = c.Of(ch);
  switch (ch.kind) {
    case OpChange::Kind::kAdded: return absl::StrCat("added ", OpAt(i));
    case OpChange::Kind::kRemoved: return absl::StrCat("removed ", OpAt(i));
    case OpChange::Kind::kChanged:
      if (ch.what == "opcode") return absl::StrCat(OpAt(i), " (was ", Short(c.Old(ch.old_index).op), ")");
      if (i.op == Opcode::kConstant && ch.what == "constant") return absl::StrCat("the value of ", OpAt(i));
      return absl::StrCat(ch.what, " of ", OpAt(i));
  }
  return "";
}

// The first change a user should look at: in the new graph's order, ops the
// user made (not parameters) first, and among those an op added, removed or
// changed in itself before one that only reads other values: ops taken out of
// a step (clipping on some steps) change the operands of the op after them,
// whose line is not the one that changed.
const OpChange* FirstChange(const Compared& c) {
  const auto only_operands = [](const OpChange& ch) {
    return ch.kind == OpChange::Kind::kChanged && ch.what == "operands";
  };
  for (const auto& ch : c.diff.changes)
    if (!c.IsParam(ch) && !only_operands(ch)) return &ch;
  for (const auto& ch : c.diff.changes)
    if (!c.IsParam(ch)) return &ch;
  return c.diff.changes.empty() ? nullptr : &c.diff.changes.front();
}

void FillDiff(const Compared& c, RecompileCause* cause) {
  cause->prev_graph_id = c.old->graph_id;
  cause->diff_total = static_cast<int64_t>(c.diff.changes.size());
  for (const auto& ch : c.diff.changes) {
    if (cause->diff.size() >= trace::kMaxDiffOps) break;
    const Instruction& i = c.Of(ch);
    trace::CompileDiffOp op;
    op.change = compiler::OpChangeKindName(ch.kind);
    op.opcode = compiler::OpcodeName(i.op);
    op.op_index = ch.new_index >= 0 ? ch.new_index : ch.old_index;
    op.what = ch.what;
    op.source_file = i.loc.file;
    op.source_line = i.loc.line;
    op.via = i.loc.via;
    if (i.op == Opcode::kParameter && !i.name.empty()) op.what = i.name;
    cause->diff.push_back(std::move(op));
  }
}

// The input differences, most specific first: a shape that follows the
// values, a shape, a dtype, a layout.
bool InputCause(const Compared& c, RecompileCause* cause) {
  const auto& d = c.diff;
  if (d.inputs.empty()) return false;
  const auto rank = [&](const compiler::InputChange& ic) {
    const GraphInput& now = (*c.inputs)[ic.new_param];
    if (ic.shape && now.shape_from_data) return 0;
    return ic.shape ? 1 : ic.dtype ? 2 : 3;
  };
  std::vector<compiler::InputChange> sorted = d.inputs;
  std::stable_sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  const auto describe = [&](const compiler::InputChange& ic) {
    const GraphInput& before = c.old->inputs[ic.old_param];
    const GraphInput& now = (*c.inputs)[ic.new_param];
    std::string n = InputName(now, ic.new_param);
    if (ic.shape || ic.dtype) return absl::StrCat(n, " ", before.shape.ToString(), " -> ", now.shape.ToString());
    return absl::StrCat(n, " ", before.sharding.ToString(), " -> ", now.sharding.ToString());
  };
  const compiler::InputChange& first = sorted.front();
  const GraphInput& now = (*c.inputs)[first.new_param];
  const Instruction* param = c.now->parameters()[first.new_param];
  const Instruction* reader = FirstReader(*c.now, param);
  const std::string read_by = reader ? absl::StrCat(", read by ", OpAt(*reader)) : "";
  switch (rank(first)) {
    case 0:
      cause->kind = "data_dependent_shape";
      cause->detail = absl::StrCat("input ", describe(first), ": its shape follows the values (nonzero at ",
                                   At(now.created), "); pad it to a fixed size to compile once");
      cause->loc = now.created;
      break;
    case 1:
    case 2:
      cause->kind = rank(first) == 1 ? "input_shape_changed" : "input_dtype_changed";
      cause->detail = absl::StrCat("input ", describe(first), " (created at ", At(now.created), read_by, ")");
      cause->loc = now.created;
      break;
    default:
      cause->kind = "input_sharding_changed";
      if (now.sharding_loc.known()) {
        cause->loc = now.sharding_loc;
        cause->detail = absl::StrCat("input ", describe(first), " (", now.sharding_by, " at ", At(now.sharding_loc), ")");
      } else if (now.layout_from_loc.known()) {
        // Not annotated itself: its layout was propagated from an annotation,
        // which is the line to change (or mark_sharding this input too).
        cause->loc = now.layout_from_loc;
        const bool same_file = now.created.file == now.layout_from_loc.file;
        cause->detail = absl::StrCat(
            "input ", describe(first), " (layout from the ", now.layout_from_by,
            now.layout_from.empty() ? "" : absl::StrCat(" of ", now.layout_from), " at ", At(now.layout_from_loc),
            "; made at ", same_file ? absl::StrCat(":", now.created.line) : At(now.created),
            now.created.via.empty() ? "" : absl::StrCat(" in ", now.created.via), ")");
      } else {
        cause->loc = now.created;
        cause->detail = absl::StrCat("input ", describe(first), " (created at ", At(now.created), ")");
      }
      break;
  }
  if (sorted.size() > 1) {
    // The others in full while the detail stays short (layouts print long), else by name.
    std::string also = "; also ", names = "; also ";
    for (size_t k = 1; k < sorted.size() && k < 3; ++k) {
      absl::StrAppend(&also, k > 1 ? ", " : "", describe(sorted[k]));
      absl::StrAppend(&names, k > 1 ? ", " : "", InputName((*c.inputs)[sorted[k].new_param], sorted[k].new_param));
    }
    if (cause->detail.size() + also.size() > 200) also = names;
    if (sorted.size() > 3) absl::StrAppend(&also, " and ", sorted.size() - 3, " more inputs");
    absl::StrAppend(&cause->detail, also);
  }
  return true;
}

// A scalar whose inlined value changed, or that crossed the scalar rule (0
// and 1 are inlined, other values are data): a constant removed where a
// scalar input made at the same line was added, or the reverse.
bool ScalarCause(const Compared& c, RecompileCause* cause) {
  const auto scalar_param_line = [](const Instruction& i) -> std::string {
    if (i.op != Opcode::kParameter || i.name.rfind("scalar@", 0) != 0) return "";
    return i.name.substr(7);
  };
  const auto constant_line = [](const Instruction& i) -> std::string {
    if (i.op != Opcode::kConstant || !i.literal || i.literal->shape().rank() != 0) return "";
    return absl::StrCat(i.loc.file, ":", i.loc.line);
  };
  for (const auto& ch : c.diff.changes) {
    if (ch.kind == OpChange::Kind::kChanged && ch.what == "constant") {
      const Instruction& o = c.Old(ch.old_index);
      const Instruction& n = c.New(ch.new_index);
      if (constant_line(n).empty() || !c.NoteOf(ch).known()) continue;  // a user's Tensor::scalar only
      cause->kind = "inlined_scalar_changed";
      cause->loc = n.loc;
      cause->detail = absl::StrCat("the scalar at ", At(n.loc), " changed from ", o.literal->GetDouble(0), " to ",
                                   n.literal->GetDouble(0),
                                   " (0 and 1 are inlined into the graph; pass a tensor to avoid recompiling)");
      return true;
    }
  }
  for (const auto& add : c.diff.changes) {
    if (add.kind != OpChange::Kind::kAdded) continue;
    const Instruction& a = c.New(add.new_index);
    const std::string pa = scalar_param_line(a), ca = constant_line(a);
    if (pa.empty() && ca.empty()) continue;
    for (const auto& rem : c.diff.changes) {
      if (rem.kind != OpChange::Kind::kRemoved) continue;
      const Instruction& r = c.Old(rem.old_index);
      if (!pa.empty() && constant_line(r) == pa && c.NoteOf(rem).known()) {
        cause->kind = "inlined_scalar_changed";
        for (size_t p = 0; p < c.now->parameters().size(); ++p)
          if (c.now->parameters()[p] == &a) cause->loc = (*c.inputs)[p].created;
        cause->detail = absl::StrCat("the scalar at ", pa, " was inlined as ", r.literal->GetDouble(0),
                                     " and is now data (only 0 and 1 are inlined; pass it as a tensor every step)");
        return true;
      }
      if (!ca.empty() && scalar_param_line(r) == ca && c.NoteOf(add).known()) {
        cause->kind = "inlined_scalar_changed";
        cause->loc = a.loc;
        cause->detail = absl::StrCat("the scalar at ", ca, " was data and is now inlined as ", a.literal->GetDouble(0),
                                     " (0 and 1 are inlined; pass it as a tensor every step)");
        return true;
      }
    }
  }
  return false;
}

// The kind of structural change.
// An op whose window or dims changed (a slice bounded by a host integer, a
// reshape to other dims) in a graph otherwise the same op for op, which the
// structural diff does not see: the first, at its line.
bool AttributeCause(const Compared& c, RecompileCause* cause) {
  const std::vector<compiler::AttributeChange> all = compiler::AttributeChanges(*c.old->module, *c.now);
  if (all.empty()) return false;
  // The ops whose window the program chose, the first in the user's code
  // (lowering may order two slices of one host integer either way); else the
  // first change.
  std::vector<const compiler::AttributeChange*> chosen;
  for (const auto& a : all)
    if (a.chosen) chosen.push_back(&a);
  const auto line_of = [&](const compiler::AttributeChange* a) {
    const SourceLoc& l = c.New(a->index).loc;
    return std::tuple(!l.known(), l.file, l.line, a->index);
  };
  std::stable_sort(chosen.begin(), chosen.end(),
                   [&](const auto* x, const auto* y) { return line_of(x) < line_of(y); });
  const compiler::AttributeChange& a = chosen.empty() ? all.front() : *chosen.front();
  const Instruction& i = c.New(a.index);
  cause->kind = "graph_changed";
  cause->subkind = "dims_changed";
  if (i.loc.known()) cause->loc = i.loc;
  std::string also;
  for (size_t k = 1; k < chosen.size() && k < 3; ++k)
    absl::StrAppend(&also, k == 1 ? "; also " : ", ", OpAt(c.New(chosen[k]->index)));
  if (chosen.size() > 3) absl::StrAppend(&also, " and ", chosen.size() - 3, " more");
  const size_t following = all.size() - std::max<size_t>(chosen.size(), 1);
  cause->detail = absl::StrCat(OpAt(i), " changed: ", a.old_text, " -> ", a.new_text, also,
                               "; the graph's ops are graph ", c.old->graph_id, "'s in the same order",
                               following > 0 ? absl::StrCat(", ", following, following == 1 ? " op's" : " ops'",
                                                            " shapes following")
                                             : "");
  return true;
}

void GraphCause(const Compared& c, const DiagnosisInput& in, RecompileCause* cause) {
  const auto& d = c.diff;
  cause->kind = "graph_changed";
  const std::string vs = absl::StrCat(" vs graph ", c.old->graph_id);
  const std::string counts = CountText(d);
  const OpChange* first = FirstChange(c);

  // A value read that cut the step on some steps only: the graph after the
  // read lacks what the program before it computed (ops removed), and the
  // whole step has them again (ops added). A graph after a read that only
  // gained ops (the next micro-batch's, carrying gradients in) is not that.
  const bool cut_shape = in.read_before.known() ? d.Count(OpChange::Kind::kRemoved) > 0
                                                : d.Count(OpChange::Kind::kAdded) > 0;
  if (in.read_before.known() != c.old->read_before.known() && cut_shape) {
    const SourceLoc& read = in.read_before.known() ? in.read_before : c.old->read_before;
    cause->subkind = "cut_on_some_steps";
    cause->loc = read;
    cause->detail = absl::StrCat("a value read at ", At(read), " cuts the step on some steps only, so this call site",
                                 in.read_before.known() ? " now compiles the rest of the step after the read"
                                                        : " now compiles the whole step again",
                                 vs, " (", counts, ")");
    return;
  }
  // Parameters frozen or unfrozen.
  {
    std::vector<std::string> frozen, unfrozen;
    SourceLoc where;
    // Paired inputs, each instruction once (param_index is its parameter number).
    for (size_t k = 0; k < c.now->instructions().size(); ++k) {
      const Instruction& i = c.New(static_cast<int64_t>(k));
      const int64_t o = d.new_to_old[k];
      if (i.op != Opcode::kParameter || o < 0 || c.Old(o).op != Opcode::kParameter) continue;
      const int64_t p = i.param_index, old_p = c.Old(o).param_index;
      if (p < 0 || old_p < 0 || p >= static_cast<int64_t>(c.inputs->size()) ||
          old_p >= static_cast<int64_t>(c.old->inputs.size()))
        continue;
      const GraphInput& now = (*c.inputs)[p];
      if (now.requires_grad == c.old->inputs[old_p].requires_grad) continue;
      (now.requires_grad ? unfrozen : frozen).push_back(InputName(now, static_cast<int>(p)));
      if (!where.known()) where = now.requires_grad_loc.known() ? now.requires_grad_loc : now.created;
    }
    if (!frozen.empty() || !unfrozen.empty()) {
      const bool freezing = !frozen.empty();
      std::vector<std::string>& names = freezing ? frozen : unfrozen;
      std::sort(names.begin(), names.end());
      cause->subkind = freezing ? "parameter_frozen" : "parameter_unfrozen";
      cause->loc = where;
      cause->detail = absl::StrCat(absl::StrJoin(names.begin(), names.begin() + std::min<size_t>(names.size(), 4), ", "),
                                   names.size() > 4 ? absl::StrCat(" and ", names.size() - 4, " more") : "",
                                   freezing ? " no longer require" : " now require", names.size() == 1 ? "s" : "",
                                   " a gradient (requires_grad_ at ",
                                   At(where), ")", vs, ": ", counts);
      return;
    }
  }
  std::vector<const OpChange*> ops;  // the differing ops, inputs left out
  for (const auto& ch : d.changes)
    if (!c.IsParam(ch)) ops.push_back(&ch);
  const auto all = [&](auto pred) { return !ops.empty() && std::all_of(ops.begin(), ops.end(), pred); };
  // A sharding constraint on an intermediate added, removed or changed.
  if (all([](const OpChange* ch) { return ch->kind == OpChange::Kind::kChanged && ch->what == "sharding constraint"; })) {
    const OpChange& ch = *ops.front();
    const Instruction& o = c.Old(ch.old_index);
    const Instruction& n = c.New(ch.new_index);
    const SourceLoc note = c.NoteOf(ch);
    // The same spec on another mesh: every changed constraint's mesh differs.
    const bool mesh_moved = std::all_of(ops.begin(), ops.end(), [&](const OpChange* x) {
      const SourceLoc a = x->old_index < static_cast<int64_t>(c.old->notes.size()) ? c.old->notes[x->old_index] : SourceLoc();
      const SourceLoc b = x->new_index < static_cast<int64_t>(c.notes->size()) ? (*c.notes)[x->new_index] : SourceLoc();
      return a.known() && b.known() && a.via != b.via && a.file == b.file && a.line == b.line;
    });
    if (mesh_moved) {
      const SourceLoc a = c.old->notes[ch.old_index];
      cause->kind = "mesh_changed";
      cause->loc = in.cut_loc;
      cause->detail = absl::StrCat("the mesh changed under the mark_sharding at ", At(note), " (", a.via, " -> ",
                                   note.via, "); no input's layout differs");
      return;
    }
    cause->subkind = "constraint_changed";
    cause->loc = note.known() ? note : n.loc;
    cause->detail = absl::StrCat("the sharding constraint on ", OpAt(n), " changed: ",
                                 o.sharding ? o.sharding->ToString() : "none", " -> ",
                                 n.sharding ? n.sharding->ToString() : "none", " (",
                                 note.via == "clear_sharding" ? "clear_sharding" : "mark_sharding", " at ",
                                 At(cause->loc), ")",
                                 ops.size() > 1 ? absl::StrCat("; ", ops.size() - 1, " more constraints") : "");
    return;
  }
  // Autocast turned on, off or to another type: the graphs are the same once
  // 16-bit conversions are left out.
  // Conversions a user wrote (a bf16 round trip) are not autocast: only those
  // an AutocastGuard made carry its line. Autocast changed when those differ
  // (in number or type), or a guard(nullopt) kept contractions f32 on one side.
  const auto autocast_made = [](const Module& m, const std::vector<SourceLoc>& notes) {
    std::multiset<std::pair<int, int>> made;
    int64_t off = 0;
    for (size_t k = 0; k < m.instructions().size() && k < notes.size(); ++k) {
      const Instruction& i = *m.instructions()[k];
      if (notes[k].known() && IsAutocastConvert(i))
        made.insert({static_cast<int>(i.operands[0]->shape.dtype), static_cast<int>(i.shape.dtype)});
      off += notes[k].known() && notes[k].via == "autocast_off";
    }
    return std::pair{made, off};
  };
  if (OnlyAutocastDiffers(*c.old->module, *c.now) &&
      autocast_made(*c.old->module, c.old->notes) != autocast_made(*c.now, *c.notes)) {
    // Which way: the graph with more conversions is the one autocast covers
    // more of. The guard blamed is one whose conversions only that graph has;
    // when the same guards convert in both, a user's AutocastGuard(nullopt)
    // that kept contractions f32 on one side (noted on them, "autocast_off").
    struct Side {
      int64_t converts = 0;
      std::vector<SourceLoc> guards;  // each convert's guard, in order
      SourceLoc off;                  // the first AutocastGuard(nullopt) noted
    };
    const auto side = [](const Module& m, const std::vector<SourceLoc>& notes) {
      Side s;
      for (size_t k = 0; k < m.instructions().size() && k < notes.size(); ++k) {
        const Instruction& i = *m.instructions()[k];
        if (IsAutocastConvert(i)) {
          ++s.converts;
          if (notes[k].known()) s.guards.push_back(notes[k]);
        } else if (notes[k].via == "autocast_off" && notes[k].known() && !s.off.known()) {
          s.off = notes[k];
        }
      }
      return s;
    };
    const Side was = side(*c.old->module, c.old->notes), is = side(*c.now, *c.notes);
    const auto only_in = [](const Side& a, const Side& b) {
      for (const SourceLoc& g : a.guards)
        if (std::none_of(b.guards.begin(), b.guards.end(),
                         [&](const SourceLoc& h) { return h.file == g.file && h.line == g.line; }))
          return g;
      return SourceLoc();
    };
    const bool on = is.converts >= was.converts;
    const Side& more = on ? is : was;
    const Side& fewer = on ? was : is;
    SourceLoc guard = only_in(more, fewer);
    std::string how = on ? "is on" : "was turned off";
    std::string guard_text = "AutocastGuard at ";
    if (!guard.known() && fewer.off.known() && !more.off.known()) {
      guard = fewer.off;
      how = on ? "is on again" : "was turned off";
      guard_text = on ? "the AutocastGuard(std::nullopt) at " : "AutocastGuard(std::nullopt) at ";
    } else if (!guard.known() && !more.guards.empty()) {
      guard = more.guards.front();
    }
    cause->subkind = "autocast_changed";
    cause->loc = guard.known() ? guard : in.cut_loc;
    cause->detail = absl::StrCat("autocast ", how, " (", guard_text, At(cause->loc),
                                 how == "is on again" ? " no longer keeps these ops f32" : "", ")", vs, ": ", counts);
    return;
  }
  // A stop_gradient the user added (or took away): backward no longer reaches
  // (or reaches again) what it fed, so backward ops, and the updates of the
  // parameters behind it, leave (or join) the graph. Its line, not the
  // forward ops' whose gradients went, is the change.
  {
    const auto stop_at = [](const std::vector<SourceLoc>& notes) {
      for (const SourceLoc& n : notes)
        if (n.known() && n.via == "stop_gradient") return n;
      return SourceLoc();
    };
    const SourceLoc now_stop = stop_at(*c.notes), was_stop = stop_at(c.old->notes);
    const bool only_removed = all([](const OpChange* ch) { return ch->kind == OpChange::Kind::kRemoved; });
    const bool only_added = all([](const OpChange* ch) { return ch->kind == OpChange::Kind::kAdded; });
    if (only_removed && now_stop.known() && !was_stop.known()) {
      cause->subkind = "ops_changed";
      cause->loc = now_stop;
      cause->detail = absl::StrCat("the stop_gradient at ", At(now_stop),
                                   " stops gradients there: backward no longer reaches what it fed (nor updates "
                                   "the parameters behind it)",
                                   vs, ": ", counts);
      return;
    }
    if (only_added && was_stop.known() && !now_stop.known()) {
      cause->subkind = "ops_changed";
      cause->loc = was_stop;
      cause->detail = absl::StrCat("the stop_gradient at ", At(was_stop),
                                   " no longer runs: backward reaches what it fed again", vs, ": ", counts);
      return;
    }
  }
  // The optimizer swapped, or its update changed.
  const auto by_optimizer = [](const SourceLoc& loc) {
    return loc.via.rfind("optim::SGD", 0) == 0 || loc.via.rfind("optim::AdamW", 0) == 0;
  };
  const auto optimizer_op = [&](const OpChange* ch) { return by_optimizer(c.Of(*ch).loc); };
  // Ops only added, or only removed: what one graph has and the other lacks.
  const bool one_way = all([](const OpChange* ch) { return ch->kind == OpChange::Kind::kAdded; }) ||
                       all([](const OpChange* ch) { return ch->kind == OpChange::Kind::kRemoved; });
  const auto updates_something = [&](const Module& m) {
    for (const auto& i : m.instructions())
      if (i->op != Opcode::kParameter && by_optimizer(i->loc)) return true;  // (not a weight an update made)
    return false;
  };
  // The side that has the ops the other lacks, and whether the other runs no update at all.
  const bool adding_side = !ops.empty() && ops.front()->kind == OpChange::Kind::kAdded;
  const Module& with_ops = adding_side ? *c.now : *c.old->module;
  const std::vector<int64_t>& with_to_other = adding_side ? d.new_to_old : d.old_to_new;
  const bool other_updates = updates_something(adding_side ? *c.old->module : *c.now);
  // Gradient accumulation: where the update runs, the gradients the steps
  // before it left are carried in (inputs named "<param>.grad", which the
  // other graph lacks) and added to this step's; the other graph updates
  // nothing.
  const auto accumulates = [&](const OpChange* ch) { return !optimizer_op(ch) && c.Of(*ch).op == Opcode::kAdd; };
  bool grads_carried_in = false;
  for (size_t k = 0; k < with_ops.instructions().size() && k < with_to_other.size(); ++k) {
    const Instruction& p = *with_ops.instructions()[k];
    grads_carried_in |= p.op == Opcode::kParameter && with_to_other[k] < 0 && absl::EndsWith(p.name, ".grad");
  }
  // Clipping the gradients belongs to the update it comes before: an update
  // on some steps only takes its clip_grad_norm with it.
  const auto update_op = [&](const OpChange* ch) {
    return optimizer_op(ch) || c.Of(*ch).loc.via.rfind("optim::clip_grad_norm", 0) == 0;
  };
  const bool accumulation = one_way && !other_updates && grads_carried_in &&
                            std::any_of(ops.begin(), ops.end(), optimizer_op) &&
                            std::any_of(ops.begin(), ops.end(), accumulates) &&
                            all([&](const OpChange* ch) { return update_op(ch) || accumulates(ch); });
  // The backward pass that only feeds the update goes with it (an evaluation
  // step, an update skipped): the ops only one graph has are the update and
  // what every one of whose users is the update, or such an op, transitively.
  std::set<const Instruction*> feeds_update;
  if (one_way) {
    std::set<const Instruction*> only;
    for (const OpChange* ch : ops) only.insert(&c.Of(*ch));
    std::map<const Instruction*, std::vector<const Instruction*>> users;
    for (const auto& i : with_ops.instructions())
      for (const Instruction* o : i->operands) users[o].push_back(i.get());
    const auto is_update = [&](const Instruction& i) {
      return by_optimizer(i.loc) || i.loc.via.rfind("optim::clip_grad_norm", 0) == 0;
    };
    for (auto it = with_ops.instructions().rbegin(); it != with_ops.instructions().rend(); ++it) {
      const Instruction* x = it->get();
      if (!only.count(x)) continue;
      const auto& u = users[x];
      // A constant matched to another of its value says nothing by itself.
      if (is_update(*x) || x->op == Opcode::kConstant ||
          (!u.empty() && std::all_of(u.begin(), u.end(), [&](const Instruction* y) { return feeds_update.count(y) > 0; })))
        feeds_update.insert(x);
    }
  }
  const bool with_backward = !all(update_op);
  const bool update_on_some_steps = one_way && !other_updates && std::any_of(ops.begin(), ops.end(), optimizer_op) &&
                                    all([&](const OpChange* ch) { return feeds_update.count(&c.Of(*ch)) > 0; });
  if (all(optimizer_op) || accumulation || update_on_some_steps) {
    const OpChange* at = *std::find_if(ops.begin(), ops.end(), optimizer_op);
    for (const OpChange* ch : ops)
      if (ch->new_index >= 0 && optimizer_op(ch)) { at = ch; break; }
    const Instruction& i = c.Of(*at);
    // Accumulation's new inputs (the gradients carried in, the update's own) are said in words.
    const std::string added = accumulation ? "" : InputsOnlyIn(*c.now, d.new_to_old),
                      gone = InputsOnlyIn(*c.old->module, d.old_to_new, accumulation);
    cause->loc = i.loc;
    // The whole update in one graph while the other updates nothing: on some
    // steps only; an update that only gained or lost ops changed.
    if (one_way && !other_updates) {
      // The whole update there in one graph and not in the other: the
      // optimizer steps on some steps only (gradient accumulation), not a new
      // optimizer.
      const bool adding = ops.front()->kind == OpChange::Kind::kAdded;
      cause->subkind = "optimizer_on_some_steps";
      cause->detail = absl::StrCat("the optimizer's update (", i.loc.via, " called at ", At(i.loc), ") runs in ",
                                   adding ? "this graph and not in " : "graph ",
                                   adding ? absl::StrCat("graph ", c.old->graph_id) : absl::StrCat(c.old->graph_id, " and not in this one"),
                                   ": it steps on some steps only (",
                                   accumulation ? "gradient accumulation, earlier gradients carried in and added"
                                   : with_backward
                                       ? "with the backward pass that only feeds it: an evaluation step, an update "
                                         "skipped, or gradient accumulation"
                                       : "gradient accumulation",
                                   "); ", counts, added.empty() ? "" : absl::StrCat("; new inputs ", added),
                                   gone.empty() ? "" : absl::StrCat("; inputs gone ", gone));
      return;
    }
    cause->subkind = "optimizer_changed";
    cause->detail = absl::StrCat("the optimizer's update changed (", i.loc.via, " called at ", At(i.loc), ")", vs, ": ",
                                 counts, added.empty() ? "" : absl::StrCat("; new inputs ", added),
                                 gone.empty() ? "" : absl::StrCat("; gone ", gone));
    return;
  }
  // The optimizer's update among ops only one graph has, while the other
  // updates nothing at all (an evaluation step beside a training one, or an
  // update on some steps only): not a layer added or removed, even when a
  // layer's ops (dropout, left out in eval mode) are among them. Left to
  // ops_changed, whose by-line count names the update's line.
  const bool update_on_one_side = one_way && std::any_of(ops.begin(), ops.end(), optimizer_op) && !other_updates;
  // A layer added or removed: a layer (module scope) only one graph has.
  {
    const std::set<std::string> before = Layers(*c.old->module), now = Layers(*c.now);
    const auto only = [](const std::set<std::string>& a, const std::set<std::string>& b) {
      std::vector<std::string> out;
      for (const auto& x : a)
        if (!b.count(x) && !b.count(x.substr(0, x.find('.')))) out.push_back(x);
      return out;
    };
    const std::vector<std::string> added = only(now, before), removed = only(before, now);
    if (added.empty() != removed.empty() && !update_on_one_side) {
      const bool adding = !added.empty();
      const std::string& layer = adding ? added.front() : removed.front();
      // Its call's line: the first op made under that scope.
      const Module& m = adding ? *c.now : *c.old->module;
      SourceLoc at;
      std::string via;
      for (const auto& i : m.instructions())
        if (i->scope == layer) { at = i->loc; via = i->loc.via; break; }
      cause->loc = at;
      // Gradient checkpointing (core/remat.h) switched: backward's recomputed
      // forward is the library's scope, not a layer of the user's.
      if (absl::EndsWith(layer, "(recomputed)")) {
        cause->subkind = "remat_changed";
        cause->detail = absl::StrCat("gradient checkpointing turned ", adding ? "on" : "off", " (",
                                     via.empty() ? "checkpoint" : via, " at ", At(at), "): backward ",
                                     adding ? "now recomputes" : "no longer recomputes", " the block's forward", vs,
                                     ": ", counts);
        return;
      }
      // A dropout at p 0, or not training, is the identity and makes no ops:
      // its layer leaves the graph while the program still calls it.
      if (via == "nn::Dropout") {
        cause->subkind = adding ? "dropout_on" : "dropout_off";
        cause->detail =
            absl::StrCat("dropout '", layer, "'",
                         adding ? " masks again (p above 0, training), called at "
                                : " is the identity now (p 0, or not training), so its ops left the graph; called "
                                  "before at ",
                         At(at), vs, ": ", counts);
        return;
      }
      // Ops going the other way too: the layer was replaced, by ops of the
      // user's (weight tying: the head's matmul written by hand) or it took
      // their place. The replacement's line is where the code changed.
      const OpChange::Kind other = adding ? OpChange::Kind::kRemoved : OpChange::Kind::kAdded;
      const OpChange* first_other = nullptr;
      int64_t others = 0;
      for (const OpChange* ch : ops)
        if (ch->kind == other) {
          ++others;
          if (!first_other && c.Of(*ch).loc.known()) first_other = ch;
        }
      if (!adding && first_other) {
        const Instruction& r = c.Of(*first_other);
        cause->subkind = "ops_changed";
        cause->loc = r.loc;
        cause->detail = absl::StrCat("layer '", layer, "'", via.empty() ? "" : absl::StrCat(" (", via, ")"),
                                     " removed (called before at ", At(at), "), and in its place ", others,
                                     others == 1 ? " op" : " ops", " added (first: ", OpAt(r), ")", vs, ": ", counts);
        return;
      }
      cause->subkind = adding ? "layer_added" : "layer_removed";
      cause->detail = absl::StrCat("layer '", layer, "'", via.empty() ? "" : absl::StrCat(" (", via, ")"),
                                   adding ? " added, called at " : " removed, called before at ", At(at),
                                   first_other ? absl::StrCat(", in place of ", others, others == 1 ? " op" : " ops",
                                                              " (first: ", OpAt(c.Of(*first_other)), ")")
                                               : "",
                                   vs, ": ", counts);
      return;
    }
  }
  cause->subkind = "ops_changed";
  if (first) {
    const Instruction& i = c.Of(*first);
    cause->loc = i.loc;
    cause->detail = absl::StrCat("the graph changed", vs, " (", counts, "); first: ", DescribeChange(c, *first));
    // Changes made by several lines (an optimizer step run on some steps only
    // adds ops at its line and changes the gradients' at backward's): each
    // line with how many, the most first, so the branch's line is named too.
    // Within the 200 characters a detail keeps; lines of the first change's
    // file as ":13".
    std::map<std::pair<std::string, int>, int> by_line;
    for (const OpChange& ch : d.changes) {
      const Instruction& op = c.Of(ch);
      if (op.loc.known()) ++by_line[{op.loc.file, op.loc.line}];
    }
    if (by_line.size() > 1) {
      std::vector<std::tuple<int, std::string, int>> lines;  // (-count, file, line)
      for (const auto& [at, n] : by_line) lines.push_back({-n, at.first, at.second});
      std::sort(lines.begin(), lines.end());
      std::string more = "; by line:";
      for (size_t k = 0; k < lines.size(); ++k) {
        const auto& [n, file, line] = lines[k];
        const std::string entry =
            absl::StrCat(k ? ", " : " ", file == i.loc.file ? "" : file, ":", line, " (", -n, ")");
        if (cause->detail.size() + more.size() + entry.size() > 200) break;
        more += entry;
      }
      if (more.size() > std::string("; by line:").size()) cause->detail += more;
    }
  } else {
    cause->loc = in.cut_loc;
    cause->detail = absl::StrCat("the graph changed", vs);
  }
}

// A user's scalar (Tensor::scalar, inlined by the scalar rule) is told apart
// from the library's own constants of the same value and line.
std::vector<std::string> Tags(const Module& m, const std::vector<SourceLoc>& notes) {
  std::vector<std::string> tags(m.instructions().size());
  for (size_t k = 0; k < tags.size() && k < notes.size(); ++k)
    if (m.instructions()[k]->op == Opcode::kConstant && notes[k].known()) tags[k] = "user scalar";
  return tags;
}

// How many earlier graphs are diffed in full: a call site with hundreds of
// graphs (a shape storm) must not make every miss cost hundreds of diffs.
constexpr size_t kMaxCompared = 8;

Compared Nearest(std::vector<const SeenGraph*> graphs, const DiagnosisInput& in) {
  Compared best;
  if (graphs.size() > kMaxCompared) {
    // The candidates closest in size (ops and inputs), the latest first on a tie.
    const auto gap = [&](const SeenGraph* g) {
      return std::llabs(static_cast<int64_t>(g->module->instructions().size()) -
                        static_cast<int64_t>(in.graph->instructions().size())) +
             std::llabs(static_cast<int64_t>(g->inputs.size()) - static_cast<int64_t>(in.inputs->size()));
    };
    std::reverse(graphs.begin(), graphs.end());
    std::stable_sort(graphs.begin(), graphs.end(),
                     [&](const SeenGraph* a, const SeenGraph* b) { return gap(a) < gap(b); });
    graphs.resize(kMaxCompared);
    // In the order they were compiled again, so that equal distances go to the latest.
    std::sort(graphs.begin(), graphs.end(),
              [](const SeenGraph* a, const SeenGraph* b) { return a->graph_id < b->graph_id; });
  }
  const std::vector<std::string> keys = Keys(*in.inputs), tags = Tags(*in.graph, *in.notes);
  for (const SeenGraph* g : graphs) {
    GraphDiff d = compiler::DiffGraphs(*g->module, *in.graph, Keys(g->inputs), keys, Tags(*g->module, g->notes), tags);
    // Ties go to the later graph: the one the user changed last.
    if (!best.old || d.distance() <= best.diff.distance()) {
      best.old = g;
      best.diff = std::move(d);
    }
  }
  best.now = in.graph;
  best.inputs = in.inputs;
  best.notes = in.notes;
  return best;
}

}  // namespace

RecompileCause DiagnoseCause(const DiagnosisInput& in) {
  RecompileCause c;
  c.loc = in.cut_loc;
  if (in.earlier->empty()) {
    if (in.value_read) {
      c.kind = "value_read_cut";
      c.detail = absl::StrCat("a tensor value was read mid-step at ", At(in.cut_loc), ", cutting the graph there");
      return c;
    }
    // A graph close to one compiled at another call site: the call moved.
    if (!in.elsewhere.empty()) {
      Compared near = Nearest(in.elsewhere, in);
      const int64_t ops = static_cast<int64_t>(in.graph->instructions().size());
      if (near.old && near.diff.distance() * 20 <= ops) {
        c.kind = "call_site_changed";
        // The other site's line and nearest caller (its whole stack is its graph's call_site).
        const std::string& other = near.old->site_text;
        const size_t first = other.find(" <- ");
        const std::string other_site = other.substr(0, first == std::string::npos ? first : other.find(" <- ", first + 4));
        c.detail = absl::StrCat("first graph at this call site; graph ", near.old->graph_id, " from ",
                                other_site, near.diff.empty() ? " is the same graph" : " differs by ",
                                near.diff.empty() ? "" : CountText(near.diff),
                                near.diff.inputs.empty() ? "" : absl::StrCat(near.diff.changes.empty() ? "" : ", ",
                                                                            near.diff.inputs.size(), " inputs"));
        FillDiff(near, &c);
        return c;
      }
      // The same graph compiled elsewhere at other input shapes (a second
      // loop at another batch size): a first compile here, said with what
      // differs, since one shape for both would have shared the program.
      const bool only_shapes = near.old && !near.diff.inputs.empty() &&
                               std::all_of(near.diff.inputs.begin(), near.diff.inputs.end(),
                                           [](const compiler::InputChange& ic) {
                                             return ic.shape && !ic.dtype && !ic.sharding;
                                           }) &&
                               compiler::SameOpsInOrder(*near.old->module, *near.now);
      if (only_shapes) {
        std::vector<std::string> shapes;
        for (const compiler::InputChange& ic : near.diff.inputs) {
          if (shapes.size() == 2) {
            shapes.push_back("...");
            break;
          }
          shapes.push_back(absl::StrCat(InputName((*in.inputs)[ic.new_param], ic.new_param), " ",
                                        near.old->inputs[ic.old_param].shape.ToString(), " -> ",
                                        (*in.inputs)[ic.new_param].shape.ToString()));
        }
        const std::string site = near.old->site_text.substr(0, near.old->site_text.find(" <- "));
        c.kind = "first_compile";
        c.detail = absl::StrCat("first graph at this call site; graph ", near.old->graph_id, " (", site,
                                ") is this graph at other input shapes: ", absl::StrJoin(shapes, ", "));
        return c;
      }
    }
    c.kind = "first_compile";
    c.detail = absl::StrCat("first graph at this call site (", in.graph->instructions().size(), " ops, ",
                            in.inputs->size(), " inputs)");
    return c;
  }
  std::vector<const SeenGraph*> graphs;
  for (const auto& g : *in.earlier) graphs.push_back(&g);
  Compared near = Nearest(graphs, in);
  FillDiff(near, &c);
  if (near.diff.empty()) {
    // "4 chips, fusion on, profile cpu": the chip count is the mesh.
    const auto chips = [](const std::string& o) { return o.substr(0, o.find(',')); };
    const auto rest = [](const std::string& o) { return o.find(',') == std::string::npos ? "" : o.substr(o.find(',')); };
    if (chips(near.old->options) != chips(in.options) && rest(near.old->options) == rest(in.options)) {
      c.kind = "mesh_changed";
      c.detail = absl::StrCat("the same graph as graph ", near.old->graph_id, " on another mesh: ",
                              chips(near.old->options), " -> ", chips(in.options),
                              ", no input's layout differs");
      return c;
    }
    if (near.old->options != in.options) {
      c.kind = "options_changed";
      c.detail = absl::StrCat("the same graph as graph ", near.old->graph_id, " under other compile options: ",
                              near.old->options, " -> ", in.options);
      return c;
    }
    if (AttributeCause(near, &c)) return c;
    // Nothing this comparison sees (output layouts, say): say so rather than guess.
    c.kind = "graph_changed";
    c.subkind = "ops_changed";
    c.detail = absl::StrCat("differs from graph ", near.old->graph_id,
                            " only in what the comparison does not cover (output layouts)");
    return c;
  }
  if (InputCause(near, &c)) {
    // Constants that follow the new shapes (a mean's divisor) are not news;
    // anything else that changed is listed.
    GraphDiff rest;
    for (const auto& ch : near.diff.changes)
      if (!(ch.kind == OpChange::Kind::kChanged && ch.what == "constant")) rest.changes.push_back(ch);
    if (!rest.changes.empty())
      absl::StrAppend(&c.detail, "; also ", CountText(rest), " vs graph ", near.old->graph_id);
    return c;
  }
  const std::string also = absl::StrCat("; also ", CountText(near.diff), " vs graph ", near.old->graph_id);
  if (ScalarCause(near, &c)) {
    if (near.diff.changes.size() > 2) absl::StrAppend(&c.detail, also);
    return c;
  }
  // Only constants changed, which follow from an op's new window (a mean's
  // divisor after a narrower slice): the op is the cause.
  const bool only_constants = std::all_of(
      near.diff.changes.begin(), near.diff.changes.end(),
      [](const OpChange& ch) { return ch.kind == OpChange::Kind::kChanged && ch.what == "constant"; });
  if (only_constants && near.diff.inputs.empty() && AttributeCause(near, &c)) {
    absl::StrAppend(&c.detail, "; ", near.diff.changes.size(),
                    near.diff.changes.size() == 1 ? " constant" : " constants", " changed with it");
    return c;
  }
  GraphCause(near, in, &c);
  return c;
}

}  // namespace shardscope::internal
