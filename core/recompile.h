// Why a graph missed the compile cache: diffs the new graph against every
// earlier graph of the same call site, picks the nearest (most similar, not
// merely the latest) and names the difference and the user's line.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir.h"
#include "core/context.h"

namespace shardscope::internal {

struct RecompileCause {
  std::string kind;     // first_compile | input_shape_changed | ... (docs/schema.md)
  std::string detail;
  SourceLoc loc;        // the line the cause points at
  int64_t prev_graph_id = -1;
};

RecompileCause DiagnoseCause(const compiler::Module& graph, const std::vector<GraphInput>& inputs,
                             const std::vector<SeenGraph>& earlier, bool value_read, const SourceLoc& cut_loc);

}  // namespace shardscope::internal
