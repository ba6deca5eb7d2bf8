// The timeline's navigation answers; see timeline_nav.h.
#include "ui/app/timeline_nav.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ui/app/format.h"

namespace shardscope::app {
namespace {

int64_t LevelWidth(int level) { return store::SummaryWidthNs(level); }

// Floor and ceiling division for possibly negative times.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

// Nearest rank: the smallest value with at least q of the samples at or below it.
int64_t NearestRank(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return -1;
  const size_t rank = static_cast<size_t>(std::ceil(q * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

// Accumulates one range: raw slices by (name, kind), and what whole
// summary buckets hold by kind.
struct RangeAccumulator {
  void AddRaw(const std::vector<store::TimelineSlice>& slices, int64_t a, int64_t b) {
    for (const store::TimelineSlice& s : slices) {
      if (s.start_ns < a || s.start_ns >= b) continue;  // overlaps, but starts elsewhere
      const int64_t dur = std::max<int64_t>(0, s.dur_ns);
      by_name[{s.name_id, static_cast<int>(s.kind)}].push_back(dur);
      raw_kind[static_cast<int>(s.kind)].first += 1;
      raw_kind[static_cast<int>(s.kind)].second += dur;
      ++count;
      if (s.depth == 0) busy_ns += dur;
    }
  }
  void AddBucket(const store::SummaryBucket& bucket) {
    summarized += bucket.count;
    count += bucket.count;
    if (bucket.depth == 0) busy_ns += bucket.busy_ns;
    for (int k = 0; k < kNumSliceKinds; ++k) summary_kind_ns[k] += bucket.kind_ns[k];
  }

  std::map<std::pair<int32_t, int>, std::vector<int64_t>> by_name;
  std::array<std::pair<int64_t, int64_t>, kNumSliceKinds> raw_kind{};  // count, ns
  std::array<int64_t, kNumSliceKinds> summary_kind_ns{};
  int64_t count = 0, busy_ns = 0, summarized = 0;
};

// The finest level whose buckets over [t0, t1) number at most `n`.
int LevelWithAtMost(int64_t t0, int64_t t1, int64_t n) {
  for (int level = 0; level < store::kNumSummaryLevels; ++level) {
    if ((t1 - t0) / LevelWidth(level) + 1 <= n) return level;
  }
  return store::kNumSummaryLevels - 1;
}

}  // namespace

Slice SliceFromStore(const store::TimelineSlice& t) {
  Slice s;
  s.start_ns = t.start_ns;
  s.dur_ns = std::max<int64_t>(0, t.dur_ns);
  s.slice_id = t.slice_id;
  s.bytes = t.bytes;
  s.flow_id = t.flow_id;
  s.arrival_ns = t.arrival_ns;
  s.graph_id = t.graph_id;
  s.op_id = t.op_id;
  s.name_id = t.name_id;
  s.step = t.step;
  s.depth = static_cast<int16_t>(std::clamp<int>(t.depth, 0, kMaxSliceDepth));
  s.kind = static_cast<SliceKind>(static_cast<int>(t.kind));
  return s;
}

absl::StatusOr<RangeStats> ComputeRangeStats(const store::Reader& reader, int64_t run_id, Clock clock,
                                             const std::vector<int64_t>& track_ids, int64_t t0, int64_t t1,
                                             const RangeOptions& options) {
  RangeStats out;
  out.clock = clock;
  out.t0 = t0;
  out.t1 = std::max(t0, t1);
  out.track_ids = track_ids;
  t1 = out.t1;
  store::TimelineReader tl(reader);
  RangeAccumulator acc;
  const absl::flat_hash_set<int64_t> wanted(track_ids.begin(), track_ids.end());
  // How many slices the range holds, at most: a few coarse buckets covering
  // it, in one query. Within the budget, the slices themselves.
  const int coarse = LevelWithAtMost(t0, t1, 64);
  const int64_t cw = LevelWidth(coarse);
  auto estimate = tl.AllSummaries(run_id, coarse, FloorDiv(t0, cw) * cw, (FloorDiv(t1 - 1, cw) + 1) * cw);
  if (!estimate.ok()) return estimate.status();
  int64_t at_most = 0;
  for (const auto& b : *estimate) {
    if (wanted.contains(b.track_id)) at_most += b.bucket.count;
  }
  const int level = LevelWithAtMost(t0, t1, options.max_buckets);
  const int64_t w = LevelWidth(level);
  const int64_t i0 = CeilDiv(t0, w), i1 = FloorDiv(t1, w);
  if (at_most <= static_cast<int64_t>(options.max_raw_slices) || i1 <= i0) {
    // Few enough (or no whole bucket inside: under two level-0 buckets).
    for (int64_t track : track_ids) {
      auto slices = tl.Slices(run_id, track, t0, t1);
      if (!slices.ok()) return slices.status();
      acc.AddRaw(*slices, t0, t1);
    }
  } else {
    // Whole buckets from the summaries, in one query; the edges no whole
    // bucket covers (under one bucket each side) from slices.
    auto buckets = tl.AllSummaries(run_id, level, i0 * w, i1 * w);
    if (!buckets.ok()) return buckets.status();
    absl::flat_hash_set<int64_t> summarized_tracks;
    for (const auto& b : *buckets) {
      if (!wanted.contains(b.track_id)) continue;
      acc.AddBucket(b.bucket);
      summarized_tracks.insert(b.track_id);
    }
    out.tracks_summarized = static_cast<int>(summarized_tracks.size());
    out.summary_level = level;
    for (int64_t track : track_ids) {
      for (auto [a, b] : {std::pair{t0, i0 * w}, std::pair{i1 * w, t1}}) {
        if (a >= b) continue;
        auto slices = tl.Slices(run_id, track, a, b);
        if (!slices.ok()) return slices.status();
        acc.AddRaw(*slices, a, b);
      }
    }
  }
  out.count = acc.count;
  out.busy_ns = acc.busy_ns;
  out.summarized = acc.summarized;
  out.exact = acc.summarized == 0 && out.summary_level < 0;
  if (out.exact) {
    std::vector<int32_t> ids;
    for (const auto& [key, durs] : acc.by_name) ids.push_back(key.first);
    auto names = tl.Names(ids);
    if (!names.ok()) return names.status();
    absl::flat_hash_map<int32_t, std::string> name_of(names->begin(), names->end());
    for (auto& [key, durs] : acc.by_name) {
      std::sort(durs.begin(), durs.end());
      RangeRow row;
      row.name_id = key.first;
      row.name = name_of.contains(key.first) && !name_of[key.first].empty() ? name_of[key.first]
                                                                            : absl::StrCat("name #", key.first);
      row.kind = static_cast<SliceKind>(key.second);
      row.count = static_cast<int64_t>(durs.size());
      for (int64_t d : durs) row.total_ns += d;
      row.p50_ns = NearestRank(durs, 0.5);
      row.p90_ns = NearestRank(durs, 0.9);
      row.max_ns = durs.empty() ? 0 : durs.back();
      out.rows.push_back(std::move(row));
    }
    out.note = absl::StrFormat("%d slices start in this range on %d lanes (every depth), from the slices themselves",
                               out.count, track_ids.size());
  } else {
    // Summaries keep busy time per kind, not names or distributions: one row
    // per kind, its time the raw edges' plus the summarized buckets'.
    for (int k = 0; k < kNumSliceKinds; ++k) {
      const auto [raw_count, raw_ns] = acc.raw_kind[k];
      const int64_t ns = raw_ns + acc.summary_kind_ns[k];
      if (ns <= 0 && raw_count == 0) continue;
      RangeRow row;
      row.kind = static_cast<SliceKind>(k);
      row.name = SliceKindName(row.kind);
      row.total_ns = ns;
      row.count = -1;  // summaries do not count slices per kind
      row.from_summaries = acc.summary_kind_ns[k] > 0;
      out.rows.push_back(std::move(row));
    }
    out.note = absl::StrFormat(
        "%d slices start in this range on %d lanes; %d of them (on %d lanes) counted from level-%d summaries "
        "(%s buckets), so time is per kind, without per-name counts or percentiles: select a narrower range "
        "(under %d slices) for those",
        out.count, track_ids.size(), out.summarized, out.tracks_summarized, out.summary_level,
        FormatDuration(double(LevelWidth(std::max(0, out.summary_level)))), options.max_raw_slices);
  }
  std::sort(out.rows.begin(), out.rows.end(), [](const RangeRow& a, const RangeRow& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

absl::StatusOr<RangeArg> ParseRangeArg(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  RangeArg out;
  if (parts.size() == 3) {
    auto clock = ParseClock(parts[0]);
    if (!clock) return absl::InvalidArgumentError(absl::StrCat("--range: unknown clock '", parts[0], "' (device, modeled or host)"));
    out.clock = *clock;
    parts.erase(parts.begin());
  }
  if (parts.size() != 2) return absl::InvalidArgumentError(absl::StrCat("--range wants [CLOCK:]T0:T1, got '", text, "'"));
  int64_t t[2];
  for (int i = 0; i < 2; ++i) {
    std::string v = parts[i];
    double scale = 1;
    for (const auto& [unit, factor] : {std::pair{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}}) {
      if (absl::EndsWith(v, unit)) {
        v.resize(v.size() - std::string_view(unit).size());
        scale = factor;
        break;
      }
    }
    double x = 0;
    if (!absl::SimpleAtod(v, &x) || x < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--range: '", parts[i], "' is not a time (e.g. 1.5ms, 2s, 250000)"));
    }
    t[i] = static_cast<int64_t>(std::llround(x * scale));
  }
  if (t[1] <= t[0]) return absl::InvalidArgumentError(absl::StrCat("--range: the end must come after the start: '", text, "'"));
  out.t0 = t[0];
  out.t1 = t[1];
  return out;
}

std::string OpInfo::SourceLocation() const {
  if (source_file.empty()) return "";
  return source_line > 0 ? absl::StrCat(source_file, ":", source_line) : source_file;
}

absl::StatusOr<std::optional<OpInfo>> LookupOp(const store::Reader& reader, int64_t run_id, int64_t graph_id,
                                               int64_t op_id) {
  if (graph_id < 0 || op_id < 0) return std::nullopt;
  auto has = reader.HasTable("ops");
  if (!has.ok()) return has.status();
  if (!*has) return std::nullopt;
  auto q = reader.Query(
      "SELECT name, opcode, shape, flops, bytes_read, bytes_written, modeled_ns, roofline, profile, source_file,"
      " source_line, scope FROM ops WHERE run_id = ?1 AND graph_id = ?2 AND op_id = ?3",
      {std::to_string(run_id), std::to_string(graph_id), std::to_string(op_id)});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) return std::nullopt;
  OpInfo op;
  op.graph_id = graph_id;
  op.op_id = op_id;
  op.name = q->Text(0, "name");
  op.opcode = q->Text(0, "opcode");
  op.shape = q->Text(0, "shape");
  op.flops = q->Real(0, "flops");
  op.bytes_read = q->Int(0, "bytes_read");
  op.bytes_written = q->Int(0, "bytes_written");
  op.modeled_ns = q->Int(0, "modeled_ns", -1);
  op.roofline = q->Text(0, "roofline");
  op.profile = q->Text(0, "profile");
  op.source_file = q->Text(0, "source_file");
  op.source_line = q->Int(0, "source_line");
  op.scope = q->Text(0, "scope");
  return op;
}

absl::StatusOr<std::vector<ProgramStart>> FindProgramStarts(const store::Reader& reader, int64_t run_id,
                                                            const std::vector<int64_t>& tracks, int32_t step,
                                                            int64_t graph_id, int64_t t0, int64_t t1) {
  store::TimelineReader tl(reader);
  std::vector<ProgramStart> out;
  for (int64_t track : tracks) {
    auto slices = tl.Slices(run_id, track, t0, t1);
    if (!slices.ok()) return slices.status();
    const store::TimelineSlice* first = nullptr;
    for (const store::TimelineSlice& s : *slices) {
      if (s.step != step || s.graph_id != graph_id) continue;
      if (!first || s.start_ns < first->start_ns) first = &s;
    }
    if (first) out.push_back(ProgramStart{track, SliceFromStore(*first)});
  }
  return out;
}

absl::StatusOr<std::optional<Slice>> FindCounterpart(const store::Reader& reader, int64_t run_id, int64_t track_id,
                                                     const Slice& of, int32_t name_id, int64_t t0, int64_t t1) {
  store::TimelineReader tl(reader);
  auto slices = tl.Slices(run_id, track_id, t0, t1);
  if (!slices.ok()) return slices.status();
  for (const store::TimelineSlice& s : *slices) {
    if (s.step != of.step || s.graph_id != of.graph_id) continue;
    const bool same = of.op_id >= 0 ? s.op_id == of.op_id : s.name_id == name_id;
    if (same) return SliceFromStore(s);
  }
  return std::nullopt;
}

}  // namespace shardscope::app
