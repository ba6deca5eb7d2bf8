// Why a graph missed the compile cache. The new graph is diffed (aligned by
// content, compiler/graph_diff.h) against every earlier graph of its call
// site; the nearest one (the fewest differences, not merely the latest) is
// compared, and the cause names the most specific difference — an input's
// shape, dtype or layout, an inlined scalar, then the kind of structural
// change — at the user's line, with the others listed in the detail.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir.h"
#include "core/context.h"
#include "profiler/trace/records.h"

namespace shardscope::internal {

struct RecompileCause {
  std::string kind;     // first_compile | input_shape_changed | ... (docs/schema.md)
  std::string subkind;  // graph_changed only: layer_added | ... | ops_changed
  std::string detail;
  SourceLoc loc;        // the user's line the cause points at
  int64_t prev_graph_id = -1;
  std::vector<trace::CompileDiffOp> diff;  // against prev_graph_id
  int64_t diff_total = 0;
};

struct DiagnosisInput {
  const compiler::Module* graph = nullptr;
  const std::vector<GraphInput>* inputs = nullptr;
  const std::vector<SourceLoc>* notes = nullptr;  // per instruction of `graph`
  const std::vector<SeenGraph>* earlier = nullptr;  // this call site's graphs
  std::vector<const SeenGraph*> elsewhere;          // other call sites' graphs
  bool value_read = false;  // this cut is a value read
  SourceLoc cut_loc;        // the mark_step or the read
  SourceLoc read_before;    // a value read that cut this step earlier
  std::string options;      // compile options now
};

RecompileCause DiagnoseCause(const DiagnosisInput& in);

}  // namespace shardscope::internal
