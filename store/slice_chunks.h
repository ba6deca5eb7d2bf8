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
inline constexpr int kChunkFields = 13;
inline constexpr std::array<int64_t, kChunkFields> kChunkDefaults = {0, 0, 0, 0, -1, 1, 0, -1, -1, 0, -1, 0, 0};

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
// goes to `closed` (for TrackGroups, below: merged with what the file already
// has for that bucket, so late slices add to it rather than replace it).
struct ClosedBucket {
  int level = 0;
  int64_t bucket = 0;      // start_ns >> level's shift
  SummaryBucket summary;
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
  };
  using Levels = std::array<Open, kNumSummaryLevels>;
  static void Close(Levels& levels, int level, std::vector<ClosedBucket>* closed);
  static void Start(Open& o, int64_t bucket, int level, int16_t depth);
  std::vector<Levels> by_depth_;
};

// Adds a bucket's figures to another's of the same place (a bucket written
// open gaining later slices, or a child rolling up into its parent).
void MergeBucket(SummaryBucket& into, const SummaryBucket& b);

// Summary buckets are stored kGroupBuckets to a row of `slice_summary_groups`
// (one track, depth and level; the group of bucket b starts at b rounded down
// to a multiple of kGroupBuckets), as JSON text: one row per bucket cost a
// fifth of the writer's time and made the whole-run view read ~50k rows.
inline constexpr int kGroupBuckets = 32;
inline constexpr int64_t GroupOf(int64_t bucket) { return bucket & ~int64_t{kGroupBuckets - 1}; }

// Fields of one bucket in a group's text, in order; trailing zeros are left
// out (at least kGroupMinFields are written):
//   0 offset: bucket - first_bucket (0..31)   1 count   2 longest_dur_ns
//   3 longest_start_ns - the bucket's start   4 longest_slice_id - slice_base
//   5 longest_name_id   6 longest_kind (TimelineKind)
//   7 first_step - step_base (-1: the bucket's slices carry no step)
//   8 last_step - first_step
//   9.. time by kind, in TimelineKind order (busy_ns is their sum)
inline constexpr int kGroupFields = 9 + kNumTimelineKinds;
inline constexpr int kGroupMinFields = 9;

struct SummaryGroup {
  int level = 0;
  int16_t depth = 0;
  int64_t first_bucket = 0;            // GroupOf(any of its buckets)
  std::vector<SummaryBucket> buckets;  // by start, each of this level's width
};

// Puts `b` (a bucket of g's level and depth, inside g) in its place in g,
// merging with the bucket already there.
void AddToGroup(SummaryGroup& g, const SummaryBucket& b);

// What a group row holds besides its text.
struct GroupRow {
  int64_t first_bucket = 0;
  int64_t slice_base = 0;  // the smallest longest_slice_id
  int64_t step_base = 0;   // the smallest first_step (0 when no bucket has one)
  std::string text;
};
GroupRow EncodeGroup(const SummaryGroup& g);

// Decodes a group row's buckets (level and depth given), appending them to
// `out`; those outside [b0, b1] are skipped. A malformed text is DataLoss
// naming the row, never a crash.
absl::Status DecodeGroup(int level, int16_t depth, int64_t first_bucket, int64_t slice_base, int64_t step_base,
                         int64_t count, std::string_view text, std::vector<SummaryBucket>* out,
                         int64_t b0 = INT64_MIN, int64_t b1 = INT64_MAX);

// One track's groups as the writer holds them: the newest group of each
// depth and level stays in memory while its buckets close, and is written
// when a bucket of a later group closes (or at a flush). A bucket closing in
// an older group (a late slice) is merged into that group's row at once.
struct GroupWrite {
  enum class Mode {
    kInsert,   // no row can exist yet (unless an earlier writer's): insert; if one is there, merge
    kReplace,  // the row holds a part of what this holds: overwrite it
    kMerge,    // a row may hold other buckets of it: read, merge, write
  };
  Mode mode = Mode::kInsert;
  SummaryGroup group;
  // The group is still this track's newest of its level and depth: after a
  // merge the writer hands the merged buckets back (TrackGroups::Adopt).
  bool current = false;
};

class TrackGroups {
 public:
  void Add(const ClosedBucket& c, std::vector<GroupWrite>* writes);
  // Every newest group that gained a bucket since it was written (a flush).
  void TakeDirty(std::vector<GroupWrite>* writes);
  // The file's row of this group, merged with what memory held: memory now
  // holds it all, and later writes overwrite the row.
  void Adopt(const SummaryGroup& merged);
  // The ring trim: forgets buckets that end at or before `cut_ns`.
  void DropBefore(int64_t cut_ns);

 private:
  enum class Row : uint8_t { kNone, kMine, kUnknown };
  struct Newest {
    bool present = false;
    bool dirty = false;
    Row row = Row::kNone;
    SummaryGroup group;
    int64_t highest_written = INT64_MIN;  // first_bucket of the last group written
  };
  GroupWrite Write(Newest& n, bool keep);
  std::vector<std::array<Newest, kNumSummaryLevels>> by_depth_;
};

int SummaryShift(int level);  // log2 of SummaryWidthNs(level)

}  // namespace shardscope::store::internal
