#include "core/recompile.h"

#include "absl/strings/str_cat.h"
#include "compiler/fingerprint.h"

namespace shardscope::internal {
namespace {
std::string At(const SourceLoc& l) { return l.known() ? absl::StrCat(l.file, ":", l.line) : "an unknown line"; }

std::string InputName(const GraphInput& in, int index) {
  return in.name.empty() ? absl::StrCat("input #", index) : in.name;
}

std::string Describe(const GraphInput& old_in, const GraphInput& new_in, int index, const compiler::InputDifference& d) {
  std::string n = InputName(new_in, index);
  if (d.shape || d.dtype) return absl::StrCat(n, " ", old_in.shape.ToString(), " -> ", new_in.shape.ToString());
  return absl::StrCat(n, " ", old_in.sharding.ToString(), " -> ", new_in.sharding.ToString());
}
}  // namespace

RecompileCause DiagnoseCause(const compiler::Module& graph, const std::vector<GraphInput>& inputs,
                             const std::vector<SeenGraph>& earlier, bool value_read, const SourceLoc& cut_loc) {
  RecompileCause c;
  if (earlier.empty()) {
    if (value_read) {
      c.kind = "value_read_cut";
      c.detail = absl::StrCat("a tensor value was read mid-step at ", At(cut_loc),
                              ", cutting the graph there");
      c.loc = cut_loc;
    } else {
      c.kind = "first_compile";
      c.detail = absl::StrCat("first graph at this call site (", graph.instructions().size(), " ops, ",
                              inputs.size(), " inputs)");
      c.loc = cut_loc;
    }
    return c;
  }
  // The nearest earlier graph of this call site.
  const SeenGraph* best = nullptr;
  compiler::ModuleDiff best_diff;
  for (const auto& g : earlier) {
    compiler::ModuleDiff d = compiler::DiffModules(*g.module, graph);
    if (!best || d.distance < best_diff.distance) {
      best = &g;
      best_diff = d;
    }
  }
  c.prev_graph_id = best->graph_id;
  const auto& d = best_diff;
  if (d.same_structure && d.parameter_count_old == d.parameter_count_new && !d.inputs.empty()) {
    const compiler::InputDifference& first = d.inputs.front();
    const GraphInput& now = inputs[first.index];
    const GraphInput& before = best->inputs[first.index];
    c.kind = first.shape ? "input_shape_changed" : first.dtype ? "input_dtype_changed" : "input_sharding_changed";
    c.detail = absl::StrCat("input ", Describe(before, now, first.index, first), " (created at ", At(now.created), ")");
    if (first.shape && now.shape_from_data) {  // the values decided the shape: padding it is the fix
      c.kind = "data_dependent_shape";
      c.detail = absl::StrCat("input ", Describe(before, now, first.index, first), " has a shape that depends on ",
                              "values (nonzero at ", At(now.created), "); pad it to a fixed size to compile once");
    }
    if (d.inputs.size() > 1) {
      absl::StrAppend(&c.detail, "; also ");
      for (size_t k = 1; k < d.inputs.size() && k < 4; ++k) {
        const auto& o = d.inputs[k];
        absl::StrAppend(&c.detail, k > 1 ? ", " : "", Describe(best->inputs[o.index], inputs[o.index], o.index, o));
      }
      if (d.inputs.size() > 4) absl::StrAppend(&c.detail, ", and ", d.inputs.size() - 4, " more");
    }
    c.loc = now.created;
    return c;
  }
  const auto& instrs = graph.instructions();
  if (d.same_structure && d.first_constant_difference >= 0) {
    const compiler::Instruction& i = *instrs[d.first_constant_difference];
    c.kind = "inlined_scalar_changed";
    c.detail = absl::StrCat("an inlined scalar changed from ", d.old_constant, " to ", d.new_constant, " at ",
                            At(i.loc), " (0 and 1 are inlined into the graph; pass a tensor to avoid recompiling)");
    c.loc = i.loc;
    return c;
  }
  c.kind = "graph_changed";
  if (d.first_difference >= 0 && d.first_difference < static_cast<int64_t>(instrs.size())) {
    const compiler::Instruction& i = *instrs[d.first_difference];
    c.detail = absl::StrCat("the graph differs from graph ", best->graph_id, " first at ", compiler::OpcodeName(i.op),
                            " (op #", d.first_difference, ") created at ", At(i.loc));
    c.loc = i.loc;
  } else {
    c.detail = absl::StrCat("the graph differs from graph ", best->graph_id, " (", best->module->instructions().size(),
                            " ops then, ", instrs.size(), " now)");
    c.loc = cut_loc;
  }
  return c;
}

}  // namespace shardscope::internal
