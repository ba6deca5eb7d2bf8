// Chunk encoding and decoding, and the level-of-detail accumulator (see slice_chunks.h).
#include "store/slice_chunks.h"

#include <algorithm>
#include <charconv>

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "store/sqlite_util.h"

namespace shardscope::store::internal {

int SummaryShift(int level) { return 22 + 2 * level; }

void ChunkEncoder::Reset(int64_t step, int64_t graph_id) {
  text_.clear();
  text_.push_back('[');
  count_ = 0;
  step_ = step;
  graph_id_ = graph_id;
  start_ns_ = end_ns_ = first_id_ = prev_end_ = prev_id_ = 0;
}

namespace {

void AppendInt(std::string* out, int64_t v) {
  if (static_cast<uint64_t>(v) < 10) {  // most fields: kinds, depths, small gaps and deltas
    out->push_back(static_cast<char>('0' + v));
    return;
  }
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, end);
}

}  // namespace

void ChunkEncoder::Add(const TimelineSlice& s) {
  if (count_ == 0) {
    start_ns_ = prev_end_ = s.start_ns;
    first_id_ = prev_id_ = s.slice_id;
    end_ns_ = s.start_ns + s.dur_ns;
  } else {
    text_.push_back(',');
  }
  std::array<int64_t, kChunkFields> f = {
      s.start_ns - prev_end_, s.dur_ns, s.name_id, static_cast<int64_t>(s.kind), s.op_id < 0 ? -1 : s.op_id,
      s.slice_id - prev_id_, s.depth, s.parent_id < 0 ? -1 : s.parent_id, s.flow_id < 0 ? -1 : s.flow_id,
      s.bytes, s.arrival_ns < 0 ? -1 : std::max<int64_t>(0, s.start_ns - s.arrival_ns), s.category_id, s.shape_id};
  // The first slice's id delta is 0, not the default 1: it stays written.
  int n = kChunkFields;
  while (n > 4 && f[n - 1] == kChunkDefaults[n - 1] && !(count_ == 0 && n == 6)) --n;
  text_.push_back('[');
  for (int i = 0; i < n; ++i) {
    if (i) text_.push_back(',');
    AppendInt(&text_, f[i]);
  }
  text_.push_back(']');
  prev_end_ = s.start_ns + s.dur_ns;
  prev_id_ = s.slice_id;
  end_ns_ = std::max(end_ns_, s.start_ns + s.dur_ns);
  ++count_;
}

namespace {

// A strict reader of what ChunkEncoder writes: an array of arrays of integers.
class ChunkParser {
 public:
  explicit ChunkParser(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool Eat(char c) {
    Skip();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool Int(int64_t* v) {
    Skip();
    auto [next, ec] = std::from_chars(p_, end_, *v);
    if (ec != std::errc() || next == p_) return false;
    p_ = next;
    return true;
  }
  bool AtEnd() {
    Skip();
    return p_ == end_;
  }
  size_t offset(std::string_view text) const { return static_cast<size_t>(p_ - text.data()); }

 private:
  // SQL users may rewrite a chunk with json() (which keeps it valid JSON but
  // may add spaces): accept whitespace anywhere JSON does.
  void Skip() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\t' || *p_ == '\r')) ++p_;
  }
  const char* p_;
  const char* end_;
};

}  // namespace

absl::Status DecodeChunk(const ChunkHeader& h, std::string_view text, std::vector<TimelineSlice>* out) {
  ChunkParser p(text);
  const size_t first = out->size();
  auto bad = [&](const std::string& what) {
    out->resize(first);  // a damaged chunk gives nothing, not its first half
    return absl::DataLossError(absl::StrCat("slice_chunks row ", h.chunk_id, " is damaged: ", what, " at byte ",
                                            p.offset(text), " of its text"));
  };
  if (!p.Eat('[')) return bad("expected '['");
  int64_t prev_end = h.start_ns, id = h.first_slice_id;
  bool any = false;
  if (!p.Eat(']')) {
    do {
      if (!p.Eat('[')) return bad("expected '[' opening a slice");
      std::array<int64_t, kChunkFields> f = kChunkDefaults;
      int n = 0;
      if (!p.Eat(']')) {
        do {
          if (n == kChunkFields) return bad("a slice with more than 13 fields");
          if (!p.Int(&f[n])) return bad("expected an integer");
          ++n;
        } while (p.Eat(','));
        if (!p.Eat(']')) return bad("expected ']' closing a slice");
      }
      if (n < 4) return bad("a slice with fewer than 4 fields");
      if (!any && n < 6) f[5] = 0;  // the first slice's id is first_slice_id itself
      any = true;
      TimelineSlice s;
      const int64_t start = prev_end + f[0];
      id += f[5];
      s.start_ns = start;
      s.slice_id = id;
      s.dur_ns = f[1];
      if (f[1] < 0) return bad("a negative duration");
      prev_end = start + f[1];
      if (f[2] < 0 || f[2] > INT32_MAX) return bad("a name_id out of range");
      s.name_id = static_cast<int32_t>(f[2]);
      if (f[3] < 0 || f[3] >= kNumTimelineKinds) return bad("an unknown kind code");
      s.kind = static_cast<TimelineKind>(f[3]);
      s.op_id = f[4];
      if (f[6] < 0 || f[6] > INT16_MAX) return bad("a depth out of range");
      s.depth = static_cast<int16_t>(f[6]);
      s.parent_id = f[7];
      s.flow_id = f[8];
      s.bytes = f[9];
      s.arrival_ns = f[10] < 0 ? -1 : start - f[10];
      if (f[11] < 0 || f[11] > INT32_MAX) return bad("a category name_id out of range");
      s.category_id = static_cast<int32_t>(f[11]);
      if (f[12] < 0 || f[12] > INT32_MAX) return bad("a shape name_id out of range");
      s.shape_id = static_cast<int32_t>(f[12]);
      s.step = h.step < 0 || h.step > INT32_MAX ? -1 : static_cast<int32_t>(h.step);
      s.graph_id = h.graph_id;
      out->push_back(s);
    } while (p.Eat(','));
    if (!p.Eat(']')) return bad("expected ']' closing the chunk");
  }
  if (!p.AtEnd()) return bad("text after the chunk");
  if (const size_t held = out->size() - first; static_cast<int64_t>(held) != h.count) {
    out->resize(first);
    return absl::DataLossError(absl::StrCat("slice_chunks row ", h.chunk_id, " is damaged: it says ", h.count,
                                            " slices and holds ", held));
  }
  return absl::OkStatus();
}

absl::Status DecodeChunkRow(sqlite3_stmt* row, std::vector<TimelineSlice>* out) {
  auto opt = [&](int col) {
    return sqlite3_column_type(row, col) == SQLITE_NULL ? int64_t{-1} : sqlite3_column_int64(row, col);
  };
  ChunkHeader h;
  h.chunk_id = sqlite3_column_int64(row, 0);
  h.step = opt(1);
  h.graph_id = opt(2);
  h.start_ns = sqlite3_column_int64(row, 3);
  h.first_slice_id = sqlite3_column_int64(row, 4);
  h.count = sqlite3_column_int64(row, 5);
  return DecodeChunk(h, ColumnView(row, 6), out);
}

namespace {

void Accumulate(SummaryBucket& b, const TimelineSlice& s) {
  if (b.count == 0 || s.dur_ns > b.longest_dur_ns) {
    b.longest_slice_id = s.slice_id;
    b.longest_start_ns = s.start_ns;
    b.longest_dur_ns = s.dur_ns;
    b.longest_name_id = s.name_id;
    b.longest_kind = s.kind;
  }
  ++b.count;
  b.busy_ns += s.dur_ns;
  b.kind_ns[static_cast<int>(s.kind)] += s.dur_ns;
  if (s.step >= 0) {
    b.first_step = b.first_step < 0 ? s.step : std::min(b.first_step, s.step);
    b.last_step = std::max(b.last_step, s.step);
  }
}

}  // namespace

void MergeBucket(SummaryBucket& into, const SummaryBucket& b) {
  if (into.count == 0 || b.longest_dur_ns > into.longest_dur_ns) {
    into.longest_slice_id = b.longest_slice_id;
    into.longest_start_ns = b.longest_start_ns;
    into.longest_dur_ns = b.longest_dur_ns;
    into.longest_name_id = b.longest_name_id;
    into.longest_kind = b.longest_kind;
  }
  into.count += b.count;
  into.busy_ns += b.busy_ns;
  for (int k = 0; k < kNumTimelineKinds; ++k) into.kind_ns[k] += b.kind_ns[k];
  if (b.first_step >= 0) into.first_step = into.first_step < 0 ? b.first_step : std::min(into.first_step, b.first_step);
  into.last_step = std::max(into.last_step, b.last_step);
}

// Only level 0 sees every slice; a bucket that closes rolls up into the level
// above, so a slice costs one accumulation, not one per level. Buckets nest
// exactly (four per parent), and every write is a merge, so a slice that
// arrives late (in a bucket already closed) still lands in the right place at
// every level.
void TrackSummaries::Close(Levels& levels, int level, std::vector<ClosedBucket>* closed) {
  Open& o = levels[level];
  if (o.summary.count == 0) return;
  closed->push_back({level, o.bucket, o.summary});
  if (level + 1 < kNumSummaryLevels) {
    Open& up = levels[level + 1];
    const int64_t parent = o.bucket >> 2;
    if (up.summary.count > 0 && up.bucket != parent) Close(levels, level + 1, closed);
    if (up.summary.count == 0) Start(up, parent, level + 1, o.summary.depth);
    MergeBucket(up.summary, o.summary);
  }
  o.summary = SummaryBucket{};
}

void TrackSummaries::Start(Open& o, int64_t bucket, int level, int16_t depth) {
  o.bucket = bucket;
  o.summary.start_ns = bucket << SummaryShift(level);
  o.summary.width_ns = int64_t{1} << SummaryShift(level);
  o.summary.depth = depth;
}

void TrackSummaries::Add(const TimelineSlice& s, std::vector<ClosedBucket>* closed) {
  const size_t depth = static_cast<size_t>(std::max<int16_t>(0, s.depth));
  if (depth >= by_depth_.size()) by_depth_.resize(depth + 1);
  Levels& levels = by_depth_[depth];
  Open& o = levels[0];
  const int64_t bucket = s.start_ns >> SummaryShift(0);  // floor, also before 0
  if (o.summary.count > 0 && o.bucket != bucket) Close(levels, 0, closed);
  if (o.summary.count == 0) Start(o, bucket, 0, static_cast<int16_t>(depth));
  Accumulate(o.summary, s);
}

void TrackSummaries::CloseAll(std::vector<ClosedBucket>* closed) {
  // Finest first: each close rolls up into the level above before that one
  // is closed in turn.
  for (Levels& levels : by_depth_)
    for (int level = 0; level < kNumSummaryLevels; ++level) Close(levels, level, closed);
}

// ---- Summary groups ----

void AddToGroup(SummaryGroup& g, const SummaryBucket& b) {
  auto& v = g.buckets;
  if (v.empty() || v.back().start_ns < b.start_ns) {  // the usual case: buckets close in time order
    v.push_back(b);
    return;
  }
  auto it = std::lower_bound(v.begin(), v.end(), b.start_ns,
                             [](const SummaryBucket& x, int64_t start) { return x.start_ns < start; });
  if (it != v.end() && it->start_ns == b.start_ns) {
    MergeBucket(*it, b);
  } else {
    v.insert(it, b);
  }
}

GroupRow EncodeGroup(const SummaryGroup& g) {
  GroupRow row;
  row.first_bucket = g.first_bucket;
  int64_t slice_base = INT64_MAX, step_base = INT64_MAX;
  for (const SummaryBucket& b : g.buckets) {
    slice_base = std::min(slice_base, b.longest_slice_id);
    if (b.first_step >= 0) step_base = std::min<int64_t>(step_base, b.first_step);
  }
  row.slice_base = slice_base == INT64_MAX ? 0 : slice_base;
  row.step_base = step_base == INT64_MAX ? 0 : step_base;
  const int shift = SummaryShift(g.level);
  std::string& t = row.text;
  t.reserve(g.buckets.size() * 48 + 2);
  t.push_back('[');
  for (size_t i = 0; i < g.buckets.size(); ++i) {
    const SummaryBucket& b = g.buckets[i];
    const bool stepped = b.first_step >= 0;
    std::array<int64_t, kGroupFields> f = {(b.start_ns >> shift) - g.first_bucket,
                                           b.count,
                                           b.longest_dur_ns,
                                           b.longest_start_ns - b.start_ns,
                                           b.longest_slice_id - row.slice_base,
                                           b.longest_name_id,
                                           static_cast<int64_t>(b.longest_kind),
                                           stepped ? b.first_step - row.step_base : -1,
                                           stepped ? std::max(0, b.last_step - b.first_step) : 0};
    for (int k = 0; k < kNumTimelineKinds; ++k) f[9 + k] = b.kind_ns[k];
    int n = kGroupFields;
    while (n > kGroupMinFields && f[n - 1] == 0) --n;
    if (i) t.push_back(',');
    t.push_back('[');
    for (int j = 0; j < n; ++j) {
      if (j) t.push_back(',');
      AppendInt(&t, f[j]);
    }
    t.push_back(']');
  }
  t.push_back(']');
  return row;
}

absl::Status DecodeGroup(int level, int16_t depth, int64_t first_bucket, int64_t slice_base, int64_t step_base,
                         int64_t count, std::string_view text, std::vector<SummaryBucket>* out, int64_t b0,
                         int64_t b1) {
  ChunkParser p(text);
  const size_t first = out->size();
  auto bad = [&](const std::string& what) {
    out->resize(first);
    return absl::DataLossError(absl::StrCat("slice_summary_groups row (level ", level, ", first bucket ", first_bucket,
                                            ", depth ", depth, ") is damaged: ", what, " at byte ", p.offset(text),
                                            " of its text"));
  };
  if (level < 0 || level >= kNumSummaryLevels) return bad(absl::StrCat("level ", level, " does not exist"));
  const int shift = SummaryShift(level);
  int64_t held = 0, prev_offset = -1;
  if (!p.Eat('[')) return bad("expected '['");
  if (!p.Eat(']')) {
    do {
      if (!p.Eat('[')) return bad("expected '[' opening a bucket");
      std::array<int64_t, kGroupFields> f{};
      int n = 0;
      if (!p.Eat(']')) {
        do {
          if (n == kGroupFields) return bad(absl::StrCat("a bucket with more than ", kGroupFields, " fields"));
          if (!p.Int(&f[n])) return bad("expected an integer");
          ++n;
        } while (p.Eat(','));
        if (!p.Eat(']')) return bad("expected ']' closing a bucket");
      }
      if (n < kGroupMinFields) return bad(absl::StrCat("a bucket with fewer than ", kGroupMinFields, " fields"));
      if (f[0] <= prev_offset || f[0] >= kGroupBuckets) return bad("a bucket offset out of order or range");
      prev_offset = f[0];
      if (f[1] < 1) return bad("a bucket holding no slices");
      if (f[2] < 0) return bad("a negative duration");
      if (f[5] < 0 || f[5] > INT32_MAX) return bad("a name_id out of range");
      if (f[6] < 0 || f[6] >= kNumTimelineKinds) return bad("an unknown kind code");
      if (f[7] < -1 || f[8] < 0 || (f[7] >= 0 && step_base + f[7] + f[8] > INT32_MAX))
        return bad("a step out of range");
      int64_t busy = 0;
      for (int k = 0; k < kNumTimelineKinds; ++k) {
        if (f[9 + k] < 0) return bad("a negative time by kind");
        busy += f[9 + k];
      }
      ++held;
      const int64_t bucket = first_bucket + f[0];
      if (bucket < b0 || bucket > b1) continue;
      SummaryBucket b;
      b.start_ns = bucket << shift;
      b.width_ns = int64_t{1} << shift;
      b.depth = depth;
      b.count = f[1];
      b.longest_dur_ns = f[2];
      b.longest_start_ns = b.start_ns + f[3];
      b.longest_slice_id = slice_base + f[4];
      b.longest_name_id = static_cast<int32_t>(f[5]);
      b.longest_kind = static_cast<TimelineKind>(f[6]);
      if (f[7] >= 0) {
        b.first_step = static_cast<int32_t>(step_base + f[7]);
        b.last_step = static_cast<int32_t>(step_base + f[7] + f[8]);
      }
      for (int k = 0; k < kNumTimelineKinds; ++k) b.kind_ns[k] = f[9 + k];
      b.busy_ns = busy;
      out->push_back(b);
    } while (p.Eat(','));
    if (!p.Eat(']')) return bad("expected ']' closing the group");
  }
  if (!p.AtEnd()) return bad("text after the group");
  if (held != count) {
    out->resize(first);
    return absl::DataLossError(absl::StrCat("slice_summary_groups row (level ", level, ", first bucket ", first_bucket,
                                            ", depth ", depth, ") is damaged: it says ", count, " buckets and holds ",
                                            held));
  }
  return absl::OkStatus();
}

GroupWrite TrackGroups::Write(Newest& n, bool keep) {
  GroupWrite w;
  w.mode = n.row == Row::kMine   ? GroupWrite::Mode::kReplace
           : n.row == Row::kNone ? GroupWrite::Mode::kInsert
                                 : GroupWrite::Mode::kMerge;
  w.current = keep;
  n.highest_written = std::max(n.highest_written, n.group.first_bucket);
  n.row = Row::kMine;  // once written (a failed write rolls the batch and this state back)
  n.dirty = false;
  if (keep) {
    w.group = n.group;
  } else {
    w.group = std::move(n.group);
    n.group = SummaryGroup{};
    n.present = false;
  }
  return w;
}

void TrackGroups::Add(const ClosedBucket& c, std::vector<GroupWrite>* writes) {
  const auto depth = static_cast<int16_t>(std::max<int16_t>(0, c.summary.depth));
  if (static_cast<size_t>(depth) >= by_depth_.size()) by_depth_.resize(depth + 1);
  Newest& n = by_depth_[depth][c.level];
  const int64_t first = GroupOf(c.bucket);
  if (n.present && first < n.group.first_bucket) {
    // A late slice's bucket, in a group already written: merge it into the row.
    GroupWrite w;
    w.mode = GroupWrite::Mode::kMerge;
    w.group.level = c.level;
    w.group.depth = depth;
    w.group.first_bucket = first;
    w.group.buckets.push_back(c.summary);
    writes->push_back(std::move(w));
    return;
  }
  if (n.present && first > n.group.first_bucket) {
    if (n.dirty) {
      writes->push_back(Write(n, /*keep=*/false));
    } else {
      n.present = false;
    }
  }
  if (!n.present) {
    n.present = true;
    n.dirty = false;
    n.row = first > n.highest_written ? Row::kNone : Row::kUnknown;
    n.group = SummaryGroup{c.level, depth, first, {}};
  }
  AddToGroup(n.group, c.summary);
  n.dirty = true;
}

void TrackGroups::TakeDirty(std::vector<GroupWrite>* writes) {
  for (auto& levels : by_depth_)
    for (Newest& n : levels)
      if (n.present && n.dirty) writes->push_back(Write(n, /*keep=*/true));
}

void TrackGroups::Adopt(const SummaryGroup& merged) {
  if (static_cast<size_t>(merged.depth) >= by_depth_.size() || merged.level < 0 || merged.level >= kNumSummaryLevels)
    return;
  Newest& n = by_depth_[merged.depth][merged.level];
  if (!n.present || n.group.first_bucket != merged.first_bucket) return;
  n.group.buckets = merged.buckets;
  n.row = Row::kMine;
}

void TrackGroups::DropBefore(int64_t cut_ns) {
  for (auto& levels : by_depth_)
    for (Newest& n : levels) {
      if (!n.present) continue;
      auto& v = n.group.buckets;
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](const SummaryBucket& b) { return b.start_ns + b.width_ns <= cut_ns; }),
              v.end());
      if (v.empty()) {
        n.present = false;
        n.dirty = false;
      }
    }
}

}  // namespace shardscope::store::internal
