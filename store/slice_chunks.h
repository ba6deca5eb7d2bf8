// The chunked slice layout (docs/schema.md "Timelines"): a track's slices are
// stored a few hundred to a row of `slice_chunks`, as JSON text with each
// field delta-coded against the slice before it, so that recording costs one
// insert per chunk instead of one indexed row per slice, and the file stays
// readable by plain SQL (the `slices` view expands chunks with json_each).
// Level-of-detail summaries (`slice_summaries`) are accumulated here too, as
// slices arrive, so a run killed before its end has them.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "store/timeline.h"

struct sqlite3_stmt;

namespace shardscope::store::internal {

// A chunk holds at most this many slices, and only slices of one step and one
// program (graph), so folds and ring trims never need to split one.
inline constexpr int kChunkSlices = 512;
// ... and about this much text: four such rows fill a 16 KiB page (one a 4 KiB
// page). Rows of a step's ~10 KiB took a page each and left a third of it empty.
inline constexpr size_t kChunkTextBytes = 3840;

// Fields of one encoded slice, in order, and the value a trailing field takes
// when it is left out (a kernel right after the one before ends after five).
//   0 gap: start minus the previous slice's end (the chunk's start_ns for the first)
//   1 dur_ns   2 name_id   3 kind (TimelineKind)   4 op_id (-1 none)
//   5 slice_id minus the previous slice's (the first: minus first_slice_id)
//   6 depth   7 parent_id (-1 none)   8 flow_id (-1 none)   9 bytes
//   10 wait_ns: start_ns minus arrival_ns (-1: no arrival recorded)
//   11 category name_id (0 none)
inline constexpr int kChunkFields = 12;
inline constexpr std::array<int64_t, kChunkFields> kChunkDefaults = {0, 0, 0, 0, -1, 1, 0, -1, -1, 0, -1, 0};

// Builds one chunk's text slice by slice.
class ChunkEncoder {
 public:
  void Reset(int64_t step, int64_t graph_id);
  void Add(const TimelineSlice& s);
  bool empty() const { return count_ == 0; }
  int count() const { return count_; }
  int64_t step() const { return step_; }
  int64_t graph_id() const { return graph_id_; }
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }
  int64_t first_slice_id() const { return first_id_; }
  // The JSON text: "[[...],[...]]".
  std::string Text() const { return text_ + "]"; }
  size_t bytes() const { return text_.size(); }

 private:
  std::string text_;
  int count_ = 0;
  int64_t step_ = -1, graph_id_ = -1;
  int64_t start_ns_ = 0, end_ns_ = 0, first_id_ = 0;
  int64_t prev_end_ = 0, prev_id_ = 0;
};

// What a chunk row holds besides its text.
struct ChunkHeader {
  int64_t chunk_id = 0;
  int64_t step = -1;       // -1: NULL
  int64_t graph_id = -1;   // -1: NULL
  int64_t start_ns = 0;
  int64_t first_slice_id = 0;
  int64_t count = 0;
};

// Decodes one chunk, appending its slices to `out`. A malformed text (a
// damaged file) is DataLoss naming the chunk, never a crash.
absl::Status DecodeChunk(const ChunkHeader& header, std::string_view text, std::vector<TimelineSlice>* out);

// The columns of a slice_chunks row that DecodeChunkRow reads, in its order.
inline constexpr char kChunkRowColumns[] = "chunk_id, step, graph_id, start_ns, first_slice_id, count, slices";
// Decodes the chunk in the current row of `row`, a query that selected
// kChunkRowColumns first.
absl::Status DecodeChunkRow(sqlite3_stmt* row, std::vector<TimelineSlice>* out);

// The level-of-detail accumulator of one track: an open bucket per depth and
// level; a slice that starts in a later bucket closes the open one, which
// goes to `closed` for the writer to store (merged with what the file already
// has for that bucket, so late slices add to it rather than replace it).
struct ClosedBucket {
  int level = 0;
  int64_t bucket = 0;      // start_ns >> level's shift
  SummaryBucket summary;
  // Past every bucket this track closed before at its level and depth: no
  // row of it can exist yet, so a plain insert will do (most rows; an insert
  // that finds one anyway falls back to the merge).
  bool fresh = true;
};

class TrackSummaries {
 public:
  void Add(const TimelineSlice& s, std::vector<ClosedBucket>* closed);
  // Closes every open bucket (a flush: readers see everything so far).
  void CloseAll(std::vector<ClosedBucket>* closed);

 private:
  struct Open {
    int64_t bucket = 0;
    SummaryBucket summary;
    int64_t highest_closed = INT64_MIN;  // the last bucket written, for ClosedBucket::fresh
  };
  using Levels = std::array<Open, kNumSummaryLevels>;
  static void Close(Levels& levels, int level, std::vector<ClosedBucket>* closed);
  static void Start(Open& o, int64_t bucket, int level, int16_t depth);
  std::vector<Levels> by_depth_;
};

int SummaryShift(int level);  // log2 of SummaryWidthNs(level)

}  // namespace shardscope::store::internal
