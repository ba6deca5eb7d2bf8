// What the Recompilations view shows, read from the store without a display:
// per call site (as `shardscope recompiles` groups them, with its suggestions
// from profiler/analysis/recompiles.h) every compilation with its cache
// outcome, cause, subkind, detail, the user's line and compile time; and, for
// a picked compilation, its graph beside the graph it was compared with
// (compilations.prev_graph_id), aligned by the stored diff (compile_diffs;
// graph_text.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/analysis/recompiles.h"
#include "store/reader.h"
#include "ui/app/graph_text.h"

namespace shardscope::app {

struct CompileRow {
  int64_t compile_id = 0, step = 0, graph_id = -1, prev_graph_id = -1;
  int64_t duration_ns = 0, diff_total = 0, host_start_ns = 0;
  std::string cache, cause_kind, cause_subkind, cause_detail, source, call_site;
  bool is_miss() const { return cache == "miss"; }
};

struct CallSiteRecompiles {
  std::string call_site;
  int64_t distinct_graphs = 0;
  int64_t misses = 0;
  int64_t compile_ns = 0;  // every compilation's, host clock
  std::vector<CompileRow> compiles;  // by compile_id
  std::vector<analysis::Suggestion> suggestions;
};

struct RecompilesModel {
  std::vector<CallSiteRecompiles> sites;  // most misses first, as the report orders them
  int64_t compilations = 0, misses = 0;
  // Why no graph can be shown, in one line ("" when the run has IR): an
  // imported trace has timelines but no IR.
  std::string no_ir;
  const CompileRow* Find(int64_t compile_id) const;
};

absl::StatusOr<RecompilesModel> LoadRecompiles(const store::Reader& reader, int64_t run_id);

// A compilation's graph beside the one it was compared with.
struct GraphPair {
  int64_t compile_id = 0;
  int64_t old_graph_id = -1, new_graph_id = -1;  // old -1: nothing to compare with
  IrProgram old_program, new_program;
  std::vector<DiffRow> diffs;  // compile_diffs, by ordinal
  int64_t diff_total = 0;      // compilations.diff_total (diffs keeps at most 200)
  Alignment alignment;
  std::string note;            // why there is only one side, or none
  // The first aligned row that differs, or -1.
  int first_difference = -1;
};

absl::StatusOr<GraphPair> LoadGraphPair(const store::Reader& reader, int64_t run_id, int64_t compile_id);

}  // namespace shardscope::app
