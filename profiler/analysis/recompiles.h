// Why a stored run recompiled, per call site, and what would stop it: what
// `shardscope recompiles` prints. Suggestions come from the whole run: for
// inputs whose shapes churn, the power-of-two padding buckets that cover the
// shapes seen and how many compilations they would have saved (counted from
// the recorded input signatures); for value reads, moving the read after
// mark_step, or reading every N steps with the program runs that saves
// (counted from the recorded executions); for branches and the scalar rule,
// the change that removes the cause.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"

namespace shardscope::analysis {

struct CompileEvent {
  int64_t compile_id = 0, step = 0, graph_id = 0, duration_ns = 0;
  std::string cache, cause_kind, cause_detail, at;  // at: "file:line" or ""
  std::string cause_subkind;
};

// What would stop a call site's compilations. A number is given only where
// the stored run proves it (e.g. a replay of the run's own sequence of
// programs through the compile cache reproduces the compilations it had);
// -1 means no prediction is made.
struct Suggestion {
  std::string text;
  int64_t compilations_saved = -1;  // predicted; -1 when it does not apply
  int64_t executions_saved = -1;    // program runs, predicted; -1 when it does not apply
  std::string kind;                 // pad_shapes | read_after_mark_step | read_every_n | scalar_as_tensor | ...
};

struct CallSiteRecompiles {
  std::string call_site;
  int64_t distinct_graphs = 0;
  int64_t misses = 0;
  int64_t compile_ns = 0;  // host clock, the misses'
  std::vector<CompileEvent> compiles;  // misses and disk hits, in order
  std::vector<Suggestion> suggestions;
};

struct RecompilesReport {
  int64_t run_id = 0;
  int64_t distinct_graphs = 0;  // over the run: a graph two call sites ran counts once
  std::vector<CallSiteRecompiles> sites;  // most misses first
};

// A value read mid-step cuts the graph there: the step runs one program up
// to the read and another for the rest. Per line that read, from the run's
// executions: the steps it cut, and what reading it only every `every` steps
// would change — the read kept at the run's first step and every `every`th
// step after it (0, every, 2 * every, ...), its other steps running whole.
struct ValueReadCuts {
  std::string at;          // "file:line" of the read
  int64_t steps = 0;       // steps in the run (that ran a program)
  int64_t steps_cut = 0;   // steps in which this read cut the graph
  int64_t executions = 0;  // program runs in the run
  int every = 0;
  int64_t executions_saved = 0;    // the cuts no longer made: one program run each
  int64_t compilations_added = 0;  // 1 when it cut every step: the whole step's graph is then new
  int64_t cuts = 0;  // its cuts: more than steps_cut when it read several times a step
};
inline constexpr int kReadEvery = 10;  // the N of the suggestion "read every N steps"
absl::StatusOr<std::vector<ValueReadCuts>> FindValueReadCuts(const store::Reader& reader, int64_t run_id,
                                                             int every = kReadEvery);

absl::StatusOr<RecompilesReport> BuildRecompilesReport(const store::Reader& reader, int64_t run_id);
// Details are cut to kMaxDetail characters in text (the database keeps all).
inline constexpr size_t kMaxDetail = 200;
std::string RenderRecompilesText(const RecompilesReport& r);
// The documented JSON form (docs/schema.md, "recompiles --format json").
std::string RenderRecompilesJson(const RecompilesReport& r);

// Padding buckets for one set of observed sizes: each rounded up to a power of two.
int64_t PowerOfTwoBucket(int64_t size);

}  // namespace shardscope::analysis
