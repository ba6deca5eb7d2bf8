// Two stored runs side by side: what `shardscope diff` prints and the app's
// Compare view shows (issues 16 and 17). Built only from the store, so it
// works on any two runs: two files, two runs of one file, imported traces
// (ops matched by name and shape). Every time says its clock.
//
// "Unchanged" is decided by the runs' own noise, not a fixed percentage: each
// side's per-step times give a median and its standard error (from the median
// absolute deviation), and a change counts only beyond three standard errors
// of the difference, or when a rank test (Mann-Whitney) puts the two sides'
// steps apart at the same confidence: a median rule is blunt with few steps or
// steps that swing (+62% over 8 steps within a ±88% median noise, every step of
// one side slower than every step of the other). With fewer than kMinSteps
// steps on a side the noise cannot be measured; a fixed 10% is used then and
// the result says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "profiler/analysis/run_report.h"
#include "store/reader.h"

namespace shardscope::analysis {

inline constexpr int kMinSteps = 3;
inline constexpr double kNoiseSigmas = 3.0;
inline constexpr double kFallbackThreshold = 0.10;  // relative, when the noise cannot be measured
// The rank test's two-sided p below which the sides differ: the tail of
// kNoiseSigmas standard deviations of a normal distribution, so both rules ask
// the same confidence.
inline constexpr double kRankAlpha = 0.0027;

// Per-step samples summarized robustly (ns).
struct Spread {
  int64_t n = 0;
  double median = 0, p10 = 0, p90 = 0;
  double mad = 0;  // median absolute deviation from the median
  std::vector<double> sorted;  // the samples, ascending (for the rank test)
  // Of the median: 1.2533 * 1.4826 * MAD / sqrt(n) (normal-equivalent).
  double StandardError() const;
};
Spread SpreadOf(std::vector<double> samples);

enum class Change { kAdded, kRemoved, kFaster, kSlower, kUnchanged };
const char* ChangeName(Change c);  // added | removed | faster | slower | unchanged

// How two spreads of one quantity compare: the difference of the medians, the
// threshold it must pass, and the class.
struct Delta {
  double diff = 0;         // median b - median a
  double threshold = 0;    // kNoiseSigmas standard errors of the difference, or the fallback
  bool noise_measured = false;
  // The rank test's two-sided p (-1: not run, fewer than kMinSteps on a side),
  // and whether it, not the medians' threshold, made the change.
  double rank_p = -1;
  bool by_ranks = false;
  Change change = Change::kUnchanged;
};
Delta Classify(const Spread& a, const Spread& b);

// Two-sided p of the Mann-Whitney U test that samples a and b (each sorted
// ascending) come from one distribution: exact without ties while the
// orderings' counts fit a double (about 26 against 26), else the normal
// approximation with the tie correction. 1 when every sample ties.
double RankTestP(const std::vector<double>& a, const std::vector<double>& b);

// Step time on one clock (host: each step's wall time; device and modeled:
// each step's span over every chip on that clock).
struct StepClockDelta {
  std::string clock;  // host | device | modeled
  Spread a, b;        // empty (n = 0) on a side without that clock
  Delta delta;
  double Relative() const { return a.median > 0 ? delta.diff / a.median : 0; }
};

// One op (own runs: a compiled op, keyed by its graph's call site, name and
// shape; imported runs: a kernel name), its time per step on the op clock
// (summed over its executions in the step, averaged over the chips).
struct OpDelta {
  std::string name, shape, opcode;
  std::string source;  // "file:line", "" when unknown
  Spread a, b;         // n = 0 on the side that lacks it (medians over the steps it ran in)
  Delta delta;
  // Its change to B's average step: the difference of the medians times the
  // share of B's steps it ran in (an op of an eval program every tenth step
  // weighs a tenth); an added or removed op's whole time, so weighted.
  // Changed ops are listed by its size.
  double step_impact_ns = 0;
};

// One chip's time per step on the op clock, in both runs: its kernels
// (compute) and its collectives and transfers (communication). A chip made
// slow, or a link, shows here where the ops' means over the chips dilute it
// (one chip of eight at 0.7x moves each op by 5%).
struct ChipDelta {
  int64_t chip = 0;
  Spread compute_a, compute_b, comm_a, comm_b;
  Delta compute, comm;
  // Its change stands apart from the other chips' (StandsApart): what the
  // text names.
  bool compute_apart = false, comm_apart = false;
  double ComputeRelative() const { return compute_a.median > 0 ? compute.diff / compute_a.median : 0; }
  double CommRelative() const { return comm_a.median > 0 ? comm.diff / comm_a.median : 0; }
};

struct ShardingChange {
  std::string tensor, a, b;  // a or b "" when the tensor is absent on that side
};

struct RunComparison {
  RunHeader a, b;
  std::string op_clock;                 // device or modeled
  std::vector<StepClockDelta> steps;    // host, device, modeled: those either run has
  CompileStats compiles_a, compiles_b;  // host clock
  int64_t peak_a = 0, peak_b = 0;       // largest compiled program's peak per chip, bytes (0: none recorded)
  std::vector<OpDelta> ops;             // changed first, by |difference|; then unchanged
  int64_t counts[5] = {0, 0, 0, 0, 0};  // ops per Change
  // Chips on the op clock in both runs, by id (none when the chip counts
  // differ: another mesh's chips are not the same chips).
  std::vector<ChipDelta> chips;
  double chips_compute_median = 0, chips_comm_median = 0;  // the chips' median relative change
  std::vector<ShardingChange> sharding; // tensors whose sharding differs (or exist on one side only)
  std::string sharding_not_compared;    // why not ("": compared), e.g. a side is an imported trace
  std::vector<std::string> notes;       // what limits the comparison, in words
  // "A runs mlp and B runs cnn" when the two runs are different workloads:
  // then no side is "slower", and the text lists no op or tensor by name.
  std::string different_workloads;
  // "A's global batch is 64 and B's 2" when the runs' batches differ (the
  // verdict and a note say so); "" when the same or not recorded.
  std::string batches_differ;
  // Why ops were not compared ("": they were), e.g. "A's timeline is
  // damaged": the verdict says so instead of counting none changed.
  std::string ops_not_compared;
  std::string verdict;                  // one line

  const StepClockDelta* StepsOn(const std::string& clock) const;
};

struct CompareOptions {
  // The clock of op times and of the verdict: device or modeled; auto is the
  // device clock unless only the modeled clock has both runs' steps (two
  // simulated pods), which a note then says.
  std::string clock = "auto";
};

// NotFound when a file lacks the run; InvalidArgument for an unknown clock.
absl::StatusOr<RunComparison> CompareRuns(const store::Reader& reader_a, int64_t run_a, const store::Reader& reader_b,
                                          int64_t run_b, const CompareOptions& options = {});

std::string RenderComparisonText(const RunComparison& c);
std::string RenderComparisonMarkdown(const RunComparison& c);
nlohmann::json ComparisonToJson(const RunComparison& c);  // schema in docs/diff.md
std::string RenderComparisonHtml(const RunComparison& c);  // one self-contained file

}  // namespace shardscope::analysis
