// Per-name time from the stored timeline; see slice_names.h.
#include "profiler/analysis/slice_names.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "profiler/analysis/even_sample.h"
#include "store/timeline.h"

namespace shardscope::analysis {
namespace {

// "ProfilerStep#12" -> "ProfilerStep#*": one row for every step's marker.
std::string RowName(std::string name) {
  const std::string step = "ProfilerStep#";
  if (name.rfind(step, 0) == 0 && name.size() > step.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(step.size()), name.end(),
                  [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }))
    return "ProfilerStep#*";
  return name;
}

struct Acc {
  int64_t count = 0, total_ns = 0, self_ns = 0, max_ns = 0;
  int64_t by_kind[store::kNumTimelineKinds] = {};
};

}  // namespace

absl::StatusOr<NameTimes> TopNamesBySelfTime(const store::Reader& reader, int64_t run_id, const std::string& clock,
                                             size_t limit, const NameTimesOptions& options) {
  const std::optional<int> step = options.step;
  const size_t max_tracks = options.max_tracks;
  NameTimes out;
  out.clock = clock;
  // On the device clock, a lane without a device holds annotations that span
  // the kernels (an imported GPU's user annotations): counting it would make
  // ProfilerStep#N most of the device's time. Left out when chips' lanes exist.
  auto tracks = reader.Query(
      "SELECT track_id FROM tracks WHERE run_id = ?1 AND clock = ?2 AND (?2 <> 'device' OR device_id IS NOT "
      "NULL "
      "OR NOT EXISTS (SELECT 1 FROM tracks d WHERE d.run_id = ?1 AND d.clock = 'device' AND d.device_id IS "
      "NOT NULL)) "
      "ORDER BY track_id",
      {absl::StrCat(run_id), clock});
  if (!tracks.ok()) return tracks.status();
  auto all = reader.Query("SELECT count(*) AS n FROM tracks WHERE run_id = ?1 AND clock = ?2",
                          {absl::StrCat(run_id), clock});
  if (!all.ok()) return all.status();
  out.annotation_tracks = static_cast<int>(all->Int(0, "n")) - static_cast<int>(tracks->rows.size());
  out.tracks_in_run = static_cast<int>(tracks->rows.size());
  KeepEvenSample(*tracks, max_tracks);
  store::TimelineReader timeline(reader);
  absl::flat_hash_map<int32_t, Acc> by_name_id;
  // One lane at a time: a slice's children are on its lane (parent_id), so
  // memory holds one lane's slices, never the run's.
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max() / 4;
  for (size_t i = 0; i < tracks->rows.size(); ++i) {
    auto slices = timeline.Slices(run_id, tracks->Int(i, "track_id"), -kAll, kAll);
    if (!slices.ok()) return slices.status();
    ++out.tracks;
    absl::flat_hash_map<int64_t, size_t> index;
    index.reserve(slices->size());
    for (size_t k = 0; k < slices->size(); ++k) index.emplace((*slices)[k].slice_id, k);
    std::vector<int64_t> child_ns(slices->size(), 0);
    for (const store::TimelineSlice& s : *slices) {
      if (s.parent_id < 0) continue;
      if (auto it = index.find(s.parent_id); it != index.end()) child_ns[it->second] += s.dur_ns;
    }
    for (size_t k = 0; k < slices->size(); ++k) {
      const store::TimelineSlice& s = (*slices)[k];
      if (step && s.step != *step) continue;
      if (options.top_level_only && s.depth != 0) continue;
      // A chip waiting for the host ran nothing: the per-chip breakdown has it.
      if (s.kind == store::TimelineKind::kHostWait) continue;
      Acc& a = by_name_id[s.name_id];
      const int64_t self = options.top_level_only ? s.dur_ns : std::max<int64_t>(0, s.dur_ns - child_ns[k]);
      ++a.count;
      a.total_ns += s.dur_ns;
      a.self_ns += self;
      a.max_ns = std::max(a.max_ns, s.dur_ns);
      a.by_kind[static_cast<int>(s.kind)] += 1;
      out.self_ns += self;
      ++out.slices;
    }
  }
  std::vector<int32_t> ids;
  for (const auto& [id, acc] : by_name_id) ids.push_back(id);
  auto names = timeline.Names(ids);
  if (!names.ok()) return names.status();
  absl::flat_hash_map<int32_t, std::string> name_of(names->begin(), names->end());
  std::map<std::string, Acc> rows;  // by the name a row shows
  for (const auto& [id, a] : by_name_id) {
    auto it = name_of.find(id);
    Acc& r = rows[RowName(it == name_of.end() || it->second.empty() ? absl::StrCat("(name ", id, ")") : it->second)];
    r.count += a.count;
    r.total_ns += a.total_ns;
    r.self_ns += a.self_ns;
    r.max_ns = std::max(r.max_ns, a.max_ns);
    for (int k = 0; k < store::kNumTimelineKinds; ++k) r.by_kind[k] += a.by_kind[k];
  }
  out.names = static_cast<int64_t>(rows.size());
  for (const auto& [name, a] : rows) {
    NameTime t;
    t.name = name;
    t.count = a.count;
    t.total_ns = a.total_ns;
    t.self_ns = a.self_ns;
    t.max_ns = a.max_ns;
    const int kind = static_cast<int>(std::max_element(a.by_kind, a.by_kind + store::kNumTimelineKinds) - a.by_kind);
    t.kind = store::TimelineKindName(static_cast<store::TimelineKind>(kind));
    out.top.push_back(std::move(t));
  }
  std::stable_sort(out.top.begin(), out.top.end(),
                   [](const NameTime& a, const NameTime& b) { return a.self_ns > b.self_ns; });
  if (out.top.size() > limit) out.top.resize(limit);
  return out;
}

std::string AnnotationLanesLeftOut(const NameTimes& n) {
  if (n.annotation_tracks <= 0) return "";
  return absl::StrCat("; ", n.annotation_tracks,
                      n.annotation_tracks == 1 ? " annotation lane" : " annotation lanes", " left out");
}

}  // namespace shardscope::analysis
