// Why a stored run recompiled, per call site, and what would stop it: what
// `shardscope recompiles` prints. Suggestions come from the whole run: for
// inputs whose shapes churn, the power-of-two padding buckets that cover the
// shapes seen and how many compilations they would have saved (counted from
// the recorded input signatures); for value reads, branches and the scalar
// rule, the change that removes the cause.
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
};

struct Suggestion {
  std::string text;
  int64_t compilations_saved = -1;  // predicted; -1 when it does not apply
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
  std::vector<CallSiteRecompiles> sites;  // most misses first
};

absl::StatusOr<RecompilesReport> BuildRecompilesReport(const store::Reader& reader, int64_t run_id);
std::string RenderRecompilesText(const RecompilesReport& r);

// Padding buckets for one set of observed sizes: each rounded up to a power of two.
int64_t PowerOfTwoBucket(int64_t size);

}  // namespace shardscope::analysis
