// The timeline's navigation answers, computed from the store off the UI
// thread (no ImGui here, so tests check them against SQL without a display):
//   - what a time range covers (shift-drag): per name, count, total, mean,
//     p50 and p90 of the slices that start in the range, on the lanes of one
//     clock. Exact from raw slices while they are few enough (estimated from
//     coarse summaries); past that the parts of the range that whole
//     level-of-detail buckets cover are counted from the stored summaries in
//     one query (per kind: summaries keep no per-name durations) and only the
//     edges are read raw, and the result says so.
//   - search by name over the whole run (store/slice_search.h);
//   - the selected slice's op (`ops`), its counterpart on the other clock
//     (device <-> modeled) and the program it belongs to: the host's dispatch
//     of it and where each chip started running it (the dispatch flow).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/reader.h"
#include "store/slice_search.h"
#include "store/timeline.h"
#include "ui/app/trace_model.h"

namespace shardscope::app {

// The deepest depth the app keeps apart (deeper slices draw at this one).
inline constexpr int kMaxSliceDepth = 31;
Slice SliceFromStore(const store::TimelineSlice& t);

// One line of a range's table.
struct RangeRow {
  std::string name;  // the slice name; for a summarized part, the kind
  int32_t name_id = 0;  // 0: a kind row (from summaries)
  SliceKind kind = SliceKind::kCompute;
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns() const { return count ? double(total_ns) / count : 0; }
  // Nearest-rank percentiles of the durations; -1 where the figures come
  // from summaries (they keep no distribution).
  int64_t p50_ns = -1, p90_ns = -1;
  int64_t max_ns = 0;
  bool from_summaries = false;
};

struct RangeStats {
  Clock clock = Clock::kDevice;
  int64_t t0 = 0, t1 = 0;  // the clock's own times: slices starting in [t0, t1)
  std::vector<int64_t> track_ids;
  // exact: one row per name, from raw slices. Otherwise one row per kind,
  // each counting raw edges and summarized middles together.
  bool exact = true;
  std::vector<RangeRow> rows;  // by total, largest first
  int64_t count = 0;           // all slices (every depth)
  int64_t busy_ns = 0;         // the sum of depth-0 durations: the lanes' busy time
  int64_t summarized = 0;      // slices counted from summaries
  int summary_level = -1;      // the coarsest summary level read (-1: none)
  int tracks_summarized = 0;
  std::string note;            // how the figures were made, one line
};

struct RangeOptions {
  // The most slices a range is read from one by one, over all its tracks
  // (estimated first from a few coarse summary buckets, in one query); a
  // range holding more is counted from summaries plus its edges.
  size_t max_raw_slices = 400'000;
  // Summary buckets read per track for the summarized middle of a range.
  int max_buckets = 4096;
};

absl::StatusOr<RangeStats> ComputeRangeStats(const store::Reader& reader, int64_t run_id, Clock clock,
                                             const std::vector<int64_t>& track_ids, int64_t t0, int64_t t1,
                                             const RangeOptions& options = {});

// --range [CLOCK:]T0:T1 (CLOCK device, modeled or host, default device; each
// time a number with an optional unit, ns (default), us, ms or s: 1.2ms:4.5ms).
struct RangeArg {
  Clock clock = Clock::kDevice;
  int64_t t0 = 0, t1 = 0;
};
absl::StatusOr<RangeArg> ParseRangeArg(const std::string& text);

// The stored op a slice ran (`ops`): what the compiler made of it and what
// the cost model expected (per device, per execution).
struct OpInfo {
  int64_t graph_id = -1, op_id = -1;
  std::string name, opcode, shape, roofline, profile, source_file, scope;
  int64_t source_line = 0;
  double flops = 0;
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t modeled_ns = -1;
  std::string SourceLocation() const;
};
// nullopt when the file has no such op (an imported trace, a host slice).
absl::StatusOr<std::optional<OpInfo>> LookupOp(const store::Reader& reader, int64_t run_id, int64_t graph_id,
                                               int64_t op_id);

// Where a program (a step's run of one graph) started on each of `tracks`:
// the first slice of that step and graph on each, within [t0, t1) of their
// clock. Tracks that did not run it are left out.
struct ProgramStart {
  int64_t track_id = 0;
  Slice slice;
};
absl::StatusOr<std::vector<ProgramStart>> FindProgramStarts(const store::Reader& reader, int64_t run_id,
                                                            const std::vector<int64_t>& tracks, int32_t step,
                                                            int64_t graph_id, int64_t t0, int64_t t1);

// The same op of the same step on `track_id` (another clock of the same
// chip), found within [t0, t1) of that track's clock.
absl::StatusOr<std::optional<Slice>> FindCounterpart(const store::Reader& reader, int64_t run_id, int64_t track_id,
                                                     const Slice& of, int32_t name_id, int64_t t0, int64_t t1);

// A query run on its own thread with its own read connection, polled by the
// view each frame. `wake` is called on that thread when it finishes.
template <typename T>
class Background {
 public:
  void Start(const std::string& path, std::function<absl::StatusOr<T>(const store::Reader&)> work,
             std::function<void()> wake = {}) {
    // A query still running is left to finish on its own, its answer unread:
    // a std::async future would otherwise block this (the UI) thread when replaced.
    Retire();
    future_ = std::async(std::launch::async, [path, work = std::move(work), wake = std::move(wake)]() {
      absl::StatusOr<T> result = [&]() -> absl::StatusOr<T> {
        auto reader = store::Reader::Open(path, store::Reader::Threads::kOneThread);
        if (!reader.ok()) return reader.status();
        return work(*reader);
      }();
      if (wake) wake();
      return result;
    });
    result_.reset();
  }
  bool pending() const { return future_.valid(); }
  // Moves a finished answer in; true when one arrived this call.
  bool Poll() {
    std::erase_if(retired_, [](auto& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    if (!future_.valid() || future_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    result_ = future_.get();
    return true;
  }
  void Wait() {
    if (future_.valid()) future_.wait();
    Poll();
  }
  const std::optional<absl::StatusOr<T>>& result() const { return result_; }
  // Forgets the query and its answer (a running one finishes on its own).
  void Reset() {
    Retire();
    result_.reset();
  }
  ~Background() {
    if (future_.valid()) future_.wait();
    for (auto& f : retired_) f.wait();
  }

 private:
  void Retire() {
    if (future_.valid() && future_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      retired_.push_back(std::move(future_));
    }
    future_ = {};
  }
  std::future<absl::StatusOr<T>> future_;
  std::vector<std::future<absl::StatusOr<T>>> retired_;
  std::optional<absl::StatusOr<T>> result_;
};

}  // namespace shardscope::app
