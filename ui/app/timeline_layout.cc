// The timeline's vertical layout; see timeline_layout.h.
#include "ui/app/timeline_layout.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"

namespace shardscope::app {
namespace {

// "chips 0-7" for a contiguous run of ids, else "8 chips".
std::string ChipRange(const std::vector<int64_t>& ids) {
  if (ids.empty()) return "no chips";
  if (ids.size() == 1) return absl::StrCat("chip ", ids.front());
  bool contiguous = true;
  for (size_t i = 1; i < ids.size(); ++i) contiguous &= ids[i] == ids[i - 1] + 1;
  return contiguous ? absl::StrCat("chips ", ids.front(), "-", ids.back())
                    : absl::StrCat(ids.size(), " chips");
}

// A chip with several lanes (an imported GPU's streams, XLA's CPU device on
// several threads) names each lane's stream or thread after the chip.
std::string LaneLabel(const Track& t, bool chip_has_lanes, const std::map<int64_t, int64_t>& stopped) {
  if (t.device_id) {
    // A chip the hang detector found stopped: its lane ends there, and says why.
    auto s = stopped.find(*t.device_id);
    const std::string why = s == stopped.end() ? "" : absl::StrCat(" \xC2\xB7 stopped at step ", s->second);
    if (chip_has_lanes && !t.thread_name.empty())
      return absl::StrCat("chip ", *t.device_id, " \xC2\xB7 ", t.thread_name, why);
    return absl::StrCat("chip ", *t.device_id, why);
  }
  const std::string& thread = t.thread_name.empty() ? t.name : t.thread_name;
  // A lane of the device clock without a chip spans a GPU's work (an imported
  // trace's annotations, its CUDA sync markers): not a host thread.
  if (t.clock != Clock::kHost) return absl::StrCat("host ", t.host_id, ": ", thread, " annotations");
  return absl::StrCat("host ", t.host_id, ": ", thread);
}

int DepthRows(const RunOverview* overview, const Track& t) {
  if (!overview) return 1;
  auto it = overview->depths.find(t.track_id);
  return it == overview->depths.end() ? 1 : std::max(1, it->second);
}

}  // namespace

std::vector<Section> BuildSections(const TraceModel& model, const RunOverview* overview) {
  std::vector<Section> sections;
  for (Clock clock : {Clock::kDevice, Clock::kModeled, Clock::kHost}) {
    Section section;
    section.clock = clock;
    section.key = ClockName(clock);
    if (clock == Clock::kHost && !model.compilations.empty()) {
      LaneGroup g;
      g.key = "host/compilations";
      g.label = "compilations";
      g.header = false;
      g.lanes.push_back(LaneRef{RowType::kCompiles, -1, 1, "compilations"});
      section.groups.push_back(std::move(g));
    }
    // Lanes by host, in the model's order (devices by id, then host threads).
    std::map<int64_t, std::vector<int>> by_host;
    for (size_t i = 0; i < model.tracks.size(); ++i) {
      if (model.tracks[i].clock == clock) by_host[model.tracks[i].host_id].push_back(static_cast<int>(i));
    }
    for (const auto& [host, indices] : by_host) {
      LaneGroup g;
      g.key = absl::StrCat(section.key, "/host ", host);
      std::map<int64_t, int> lanes_of;  // chip -> its lanes here
      for (int i : indices)
        if (model.tracks[i].device_id) ++lanes_of[*model.tracks[i].device_id];
      std::vector<int64_t> chips;
      for (const auto& [chip, n] : lanes_of) chips.push_back(chip);
      for (int i : indices) {
        const Track& t = model.tracks[i];
        const bool several = t.device_id && lanes_of[*t.device_id] > 1;
        g.lanes.push_back(LaneRef{RowType::kLane, i, DepthRows(overview, t), LaneLabel(t, several, model.run.stopped)});
      }
      // Its chips, however many lanes each has (annotation lanes beside them
      // have no chip); a host without chips has threads.
      g.label = !chips.empty() ? absl::StrCat("host ", host, " \xC2\xB7 ", ChipRange(chips))
                               : absl::StrCat("host ", host, " \xC2\xB7 ", indices.size(), " threads");
      g.header = g.lanes.size() > 1;
      section.groups.push_back(std::move(g));
    }
    if (clock == Clock::kHost && overview) {
      // Per-chip counters grouped by name; process-wide ones together.
      std::map<std::string, LaneGroup> per_chip;
      LaneGroup process;
      process.key = "host/counters/process";
      process.label = "process counters";
      for (size_t i = 0; i < overview->counters.size(); ++i) {
        const CounterTrack& c = overview->counters[i];
        if (!c.device_id) {
          process.lanes.push_back(LaneRef{RowType::kCounter, static_cast<int>(i), 1, c.name});
          continue;
        }
        LaneGroup& g = per_chip[c.name];
        g.key = absl::StrCat("host/counters/", c.name);
        g.lanes.push_back(LaneRef{RowType::kCounter, static_cast<int>(i), 1,
                                  absl::StrCat(c.name, " chip ", *c.device_id)});
      }
      for (auto& [name, g] : per_chip) {
        g.label = absl::StrCat(name, " \xC2\xB7 ", g.lanes.size(), g.lanes.size() == 1 ? " chip" : " chips");
        g.header = g.lanes.size() > 1;
        section.groups.push_back(std::move(g));
      }
      if (!process.lanes.empty()) {
        process.label = absl::StrCat("process counters \xC2\xB7 ", process.lanes.size());
        process.header = process.lanes.size() > 1;
        section.groups.push_back(std::move(process));
      }
    }
    if (!section.groups.empty()) sections.push_back(std::move(section));
  }
  return sections;
}

absl::flat_hash_set<std::string> DefaultCollapsed(const std::vector<Section>& sections) {
  absl::flat_hash_set<std::string> collapsed;
  bool has_device = false;
  for (const Section& s : sections) has_device |= s.clock == Clock::kDevice;
  for (const Section& s : sections) {
    if (s.clock == Clock::kModeled && has_device) collapsed.insert(s.key);
    for (const LaneGroup& g : s.groups) {
      if (g.header && !g.lanes.empty() && g.lanes.front().type == RowType::kCounter && g.lanes.size() > 8) {
        collapsed.insert(g.key);
      }
    }
  }
  return collapsed;
}

RowLayout LayoutRows(const std::vector<Section>& sections,
                     const absl::flat_hash_set<std::string>& collapsed, float avail_h) {
  RowLayout out;
  // First pass: rows and the heights lanes want.
  float fixed = 0, wanted = 0;
  for (size_t si = 0; si < sections.size(); ++si) {
    const Section& s = sections[si];
    Row header;
    header.type = RowType::kSection;
    header.section = static_cast<int>(si);
    header.label = ClockLabel(s.clock);
    header.collapsed = collapsed.contains(s.key);
    header.h = kSectionHeight;
    fixed += header.h;
    out.rows.push_back(header);
    if (header.collapsed) continue;
    for (size_t gi = 0; gi < s.groups.size(); ++gi) {
      const LaneGroup& g = s.groups[gi];
      const bool group_collapsed = g.header && collapsed.contains(g.key);
      if (g.header) {
        Row row;
        row.type = RowType::kGroup;
        row.section = static_cast<int>(si);
        row.group = static_cast<int>(gi);
        row.label = g.label;
        row.collapsed = group_collapsed;
        row.h = kGroupHeight;
        fixed += row.h;
        out.rows.push_back(row);
      }
      if (group_collapsed) continue;
      for (const LaneRef& lane : g.lanes) {
        Row row;
        row.type = lane.type;
        row.section = static_cast<int>(si);
        row.group = static_cast<int>(gi);
        row.lane = lane;
        row.label = lane.label;
        switch (lane.type) {
          case RowType::kCounter: row.h = kCounterHeight; break;
          case RowType::kCompiles: row.h = kCompilesHeight; break;
          default:
            row.h = std::min(lane.depth_rows, kMaxDepthRowsShown) * kDepthRowHeight + 4;
            break;
        }
        wanted += row.h;
        out.rows.push_back(row);
      }
    }
  }
  // Second pass: shrink lanes together when they do not fit. Lanes that
  // reach kMinLaneHeight stay there and the others share what is left
  // (a few rounds settle it: each round pins at least one more lane or stops).
  const float room = std::max(0.0f, avail_h - fixed);
  // The compilations row keeps room for its label: at a chip lane's least it
  // ran over the host lane below it.
  auto least = [](const Row& row) { return row.type == RowType::kCompiles ? kMinCompilesHeight : kMinLaneHeight; };
  float scale = 1.0f;
  if (wanted > room && wanted > 0) {
    float pinned = 0, free_wanted = wanted;
    for (int round = 0; round < 8; ++round) {
      scale = free_wanted > 0 ? std::max(0.0f, room - pinned) / free_wanted : 1.0f;
      float next_pinned = 0, next_free = 0;
      for (const Row& row : out.rows) {
        if (row.type == RowType::kSection || row.type == RowType::kGroup) continue;
        if (row.h * scale < least(row)) next_pinned += least(row);
        else next_free += row.h;
      }
      if (next_pinned == pinned) break;
      pinned = next_pinned;
      free_wanted = next_free;
    }
  }
  float y = 0;
  for (Row& row : out.rows) {
    if (row.type != RowType::kSection && row.type != RowType::kGroup) {
      row.h = std::max(least(row), std::floor(row.h * scale * 4) / 4);
      if (row.type == RowType::kLane) {
        const int fit = static_cast<int>((row.h - 2) / kMinDepthRowHeight);
        row.rows_shown = std::clamp(std::min(fit, row.lane.depth_rows), 1, kMaxDepthRowsShown);
      }
    }
    row.y = y;
    y += row.h;
  }
  out.total_h = y;
  out.fits = y <= avail_h + 0.5f;
  return out;
}

}  // namespace shardscope::app
