// The Op profile; see ops_view.h.
#include "ui/app/ops_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "profiler/analysis/even_sample.h"
#include "profiler/analysis/slice_names.h"
#include "store/timeline.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

ImVec4 Color(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

// "1.2 GFLOP/s", "850 MFLOP", "3.4 GB/s": SI, three digits.
std::string Si(double v, const char* unit) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  double a = std::fabs(v);
  while (a >= 1000 && i < 6) {
    a /= 1000;
    v /= 1000;
    ++i;
  }
  return absl::StrFormat(a >= 100 || i == 0 ? "%.0f %s%s" : "%.3g %s%s", v, kPrefix[i], unit);
}

Rgb BoundColor(const std::string& bound) {
  if (bound == "compute") return KindColor(SliceKind::kCompute);
  if (bound == "memory") return {120, 200, 120};
  if (bound == "collective") return KindColor(SliceKind::kCollective);
  if (bound == "transfer") return KindColor(SliceKind::kTransfer);
  return kDimText;
}

// Least squares of modeled time against bytes over memory-bound ops: the
// profile's HBM bandwidth (the slope's inverse) and kernel overhead (the
// intercept). Needs two distinct sizes.
void FitMemoryRoof(const std::vector<std::pair<double, double>>& bytes_ns, double* bw, double* overhead) {
  *bw = 0;
  *overhead = 0;
  if (bytes_ns.size() < 2) return;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : bytes_ns) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = double(bytes_ns.size());
  const double den = n * sxx - sx * sx;
  if (den <= 0) return;
  const double slope = (n * sxy - sx * sy) / den;  // ns per byte
  if (slope <= 0) return;
  *bw = 1e9 / slope;
  *overhead = std::max(0.0, (sy - slope * sx) / n);
}

// Groups kernels by `key`; executions' model errors come from `errors`
// (per kernel, its executions' (measured, modeled) pairs).
std::vector<OpGroup> Group(const std::vector<OpKernel>& kernels,
                           const std::vector<std::vector<std::pair<int64_t, int64_t>>>& pairs,
                           const std::string& profile, std::string (*key)(const OpKernel&)) {
  std::map<std::string, OpGroup> groups;
  std::map<std::string, std::map<std::string, int64_t>> by_bound;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> group_pairs;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const OpKernel& k = kernels[i];
    const std::string name = key(k);
    OpGroup& g = groups[name];
    g.key = name;
    ++g.kernels;
    g.count += k.count;
    g.total_ns += k.total_ns;
    if (k.has_cost) {
      g.flops += k.flops * double(k.count);
      g.bytes += k.bytes * double(k.count);
      g.costed_ns += k.total_ns;
    }
    by_bound[name][k.bound] += k.total_ns;
    auto& gp = group_pairs[name];
    gp.insert(gp.end(), pairs[i].begin(), pairs[i].end());
  }
  std::vector<OpGroup> out;
  for (auto& [name, g] : groups) {
    int64_t best = -1;
    for (const auto& [bound, ns] : by_bound[name]) {
      if (ns > best) {
        best = ns;
        g.bound = bound;
      }
    }
    const auto& gp = group_pairs[name];
    if (!gp.empty()) {
      const analysis::CostModelError e = analysis::ScoreCostModel(gp, profile);
      if (e.kernels > 0) g.model_error = e.median;
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const OpGroup& a, const OpGroup& b) {
    return std::tie(b.total_ns, a.key) < std::tie(a.total_ns, b.key);
  });
  return out;
}

std::string OpcodeKey(const OpKernel& k) {
  if (!k.opcode.empty()) return k.opcode;
  return absl::StrCat("(", k.kind, ", no op)");
}
std::string SourceKey(const OpKernel& k) { return k.source.empty() ? "(no source line)" : k.source; }
std::string ModuleKey(const OpKernel& k) { return k.scope.empty() ? "(no module)" : k.scope; }

// A trace with host lanes only: per name, self time on the host clock (nested
// ops counted once), as slice_names.h adds it up for the report.
absl::StatusOr<OpProfile> HostProfile(const store::Reader& reader, OpProfile p) {
  p.self_time = true;
  analysis::NameTimesOptions options;
  options.step = p.step;
  auto names = analysis::TopNamesBySelfTime(reader, p.run_id, "host", std::numeric_limits<size_t>::max(), options);
  if (!names.ok()) return names.status();
  p.devices = names->tracks;
  for (const analysis::NameTime& n : names->top) {
    if (n.count == 0) continue;
    OpKernel k;
    k.name = n.name;
    k.kind = n.kind;
    k.bound = n.kind;
    k.count = n.count;
    k.total_ns = n.self_ns;
    p.total_ns += k.total_ns;
    p.kernels.push_back(std::move(k));
  }
  std::stable_sort(p.kernels.begin(), p.kernels.end(),
                   [](const OpKernel& a, const OpKernel& b) { return a.total_ns > b.total_ns; });
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> no_pairs(p.kernels.size());
  p.by_opcode = Group(p.kernels, no_pairs, p.profile, OpcodeKey);
  p.by_source = Group(p.kernels, no_pairs, p.profile, SourceKey);
  p.by_module = Group(p.kernels, no_pairs, p.profile, ModuleKey);
  return p;
}


}  // namespace

absl::StatusOr<OpProfile> BuildOpProfile(const store::Reader& reader, int64_t run_id, std::optional<int> step) {
  OpProfile p;
  p.run_id = run_id;
  p.step = step;
  const std::string run = absl::StrCat(run_id);
  auto head = reader.Query(
      "SELECT r.profile, (SELECT max(peak_flops) FROM devices d WHERE d.run_id = r.run_id) AS peak"
      " FROM runs r WHERE r.run_id = ?1",
      {run});
  if (!head.ok()) return head.status();
  if (head->rows.empty()) return absl::NotFoundError(absl::StrCat(reader.path(), " has no run ", run_id));
  p.profile = head->Text(0, "profile");
  p.peak_flops = head->Real(0, "peak");

  // The clock: device-clock chip lanes, else a simulated run's modeled ones,
  // else the host's (an imported CPU-only trace).
  auto chip_tracks = [&](const char* clock) {
    return reader.Query(absl::StrCat("SELECT track_id, device_id FROM tracks WHERE run_id = ?1 AND clock = '", clock,
                                     "' AND device_id IS NOT NULL ORDER BY device_id, track_id"),
                        {run});
  };
  auto tracks = chip_tracks("device");
  if (!tracks.ok()) return tracks.status();
  if (tracks->rows.empty()) {
    tracks = chip_tracks("modeled");
    if (!tracks.ok()) return tracks.status();
    p.clock = tracks->rows.empty() ? "host" : "modeled";
  }
  if (p.clock == "host") return HostProfile(reader, std::move(p));
  if (p.clock == "modeled") {
    p.chips_in_run = static_cast<int64_t>(tracks->rows.size());
    analysis::KeepEvenSample(*tracks, kMaxModeledChips);
  }

  // The window to decode: the step's span on that clock, or everything.
  int64_t t0 = -(int64_t{1} << 60), t1 = int64_t{1} << 61;
  auto has_bounds = reader.HasTable("step_bounds");  // not in schema version 1 files
  if (!has_bounds.ok()) return has_bounds.status();
  // Without step spans stored, the step's slices are picked by their step tags below.
  if (step && *has_bounds) {
    auto b = reader.Query("SELECT start_ns, end_ns FROM step_bounds WHERE run_id = ?1 AND clock = ?2 AND step = ?3",
                          {run, p.clock, absl::StrCat(*step)});
    if (!b.ok()) return b.status();
    if (b->rows.empty()) return p;  // no slices in that step
    t0 = b->Int(0, "start_ns");
    t1 = b->Int(0, "end_ns") + 1;
  }

  // Per kernel key: (graph, op) when the slice has an op, else (name, kind).
  struct Acc {
    int64_t count = 0, total_ns = 0;
    int32_t name_id = 0;
    store::TimelineKind kind = store::TimelineKind::kCompute;
    std::vector<int64_t> durations;  // compute executions, for the model's error
  };
  absl::flat_hash_map<std::tuple<int64_t, int64_t, int32_t, int>, Acc> acc;
  store::TimelineReader tl(reader);
  std::set<int64_t> chips_seen;
  for (size_t i = 0; i < tracks->rows.size(); ++i) {
    auto slices = tl.Slices(run_id, tracks->Int(i, "track_id"), t0, t1);
    if (!slices.ok()) return slices.status();
    // Chips, not lanes: an imported GPU has a lane per stream and one for its waits on the host.
    if (!slices->empty() && chips_seen.insert(tracks->Int(i, "device_id")).second) ++p.devices;
    for (const store::TimelineSlice& s : *slices) {
      if (s.depth != 0 || s.kind == store::TimelineKind::kHostWait) continue;
      if (step && s.step != *step) continue;
      const bool has_op = s.graph_id >= 0 && s.op_id >= 0;
      auto key = has_op ? std::tuple<int64_t, int64_t, int32_t, int>{s.graph_id, s.op_id, 0, 0}
                        : std::tuple<int64_t, int64_t, int32_t, int>{-1, -1, s.name_id, int(s.kind)};
      Acc& a = acc[key];
      if (a.count == 0) {
        a.name_id = s.name_id;
        a.kind = s.kind;
      }
      ++a.count;
      a.total_ns += s.dur_ns;
      // The model's error needs a measured time: not on the modeled clock.
      if (has_op && s.kind == store::TimelineKind::kCompute && p.clock == "device") a.durations.push_back(s.dur_ns);
    }
  }

  // The `ops` rows of the programs seen (none on an imported trace).
  struct OpRow {
    std::string name, opcode, shape, roofline, source, scope;
    double flops = 0, bytes = 0;
    int64_t modeled_ns = 0;
  };
  std::map<std::pair<int64_t, int64_t>, OpRow> ops;
  std::vector<std::pair<double, double>> memory_points;
  auto has_ops = reader.HasTable("ops");
  if (!has_ops.ok()) return has_ops.status();
  if (*has_ops) {
    auto q = reader.Query(
        "SELECT graph_id, op_id, name, opcode, shape, flops, bytes_read + bytes_written AS bytes, modeled_ns,"
        " roofline, source_file, source_line, scope FROM ops WHERE run_id = ?1",
        {run});
    if (!q.ok()) return q.status();
    p.has_ops = !q->rows.empty();
    if (!p.has_ops) p.no_ops_why = NoProgramsWhy(reader, run_id);
    for (size_t i = 0; i < q->rows.size(); ++i) {
      OpRow o;
      o.name = q->Text(i, "name");
      o.opcode = q->Text(i, "opcode");
      o.shape = q->Text(i, "shape");
      o.roofline = q->Text(i, "roofline");
      o.flops = q->Real(i, "flops");
      o.bytes = q->Real(i, "bytes");
      o.modeled_ns = q->Int(i, "modeled_ns");
      if (!q->Text(i, "source_file").empty()) {
        o.source = absl::StrCat(q->Text(i, "source_file"), ":", q->Int(i, "source_line"));
      }
      o.scope = q->Text(i, "scope");
      if (o.roofline == "memory" && o.bytes > 0) memory_points.push_back({o.bytes, double(o.modeled_ns)});
      ops[{q->Int(i, "graph_id"), q->Int(i, "op_id")}] = std::move(o);
    }
  }
  FitMemoryRoof(memory_points, &p.peak_bytes_per_s, &p.overhead_ns);

  std::vector<int32_t> name_ids;
  for (const auto& [key, a] : acc) name_ids.push_back(a.name_id);
  std::sort(name_ids.begin(), name_ids.end());
  name_ids.erase(std::unique(name_ids.begin(), name_ids.end()), name_ids.end());
  auto names = tl.Names(name_ids);
  if (!names.ok()) return names.status();
  absl::flat_hash_map<int32_t, std::string> name_of(names->begin(), names->end());

  std::vector<std::pair<OpKernel, std::vector<int64_t>>> rows;
  for (auto& [key, a] : acc) {
    OpKernel k;
    k.graph_id = std::get<0>(key);
    k.op_id = std::get<1>(key);
    k.kind = store::TimelineKindName(a.kind);
    k.count = a.count;
    k.total_ns = a.total_ns;
    k.name = name_of[a.name_id];
    k.bound = a.kind == store::TimelineKind::kCompute ? "none" : k.kind;
    if (auto it = ops.find({k.graph_id, k.op_id}); k.graph_id >= 0 && it != ops.end()) {
      const OpRow& o = it->second;
      k.has_cost = true;
      if (!o.name.empty()) k.name = o.name;
      k.opcode = o.opcode;
      k.shape = o.shape;
      k.bound = o.roofline;
      k.source = o.source;
      k.scope = o.scope;
      k.flops = o.flops;
      k.bytes = o.bytes;
      k.modeled_ns = o.modeled_ns;
    }
    p.total_ns += k.total_ns;
    rows.push_back({std::move(k), std::move(a.durations)});
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::tie(b.first.total_ns, a.first.graph_id, a.first.op_id, a.first.name) <
           std::tie(a.first.total_ns, b.first.graph_id, b.first.op_id, b.first.name);
  });
  // The model's error, as cost_error.h scores it: per compute execution.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> pairs(rows.size());
  std::vector<std::pair<int64_t, int64_t>> all;
  for (size_t i = 0; i < rows.size(); ++i) {
    OpKernel& k = rows[i].first;
    if (k.has_cost) {
      for (int64_t d : rows[i].second) pairs[i].push_back({d, k.modeled_ns});
    }
    if (!pairs[i].empty()) {
      const analysis::CostModelError e = analysis::ScoreCostModel(pairs[i], p.profile);
      if (e.kernels > 0) k.model_error = e.median;
      all.insert(all.end(), pairs[i].begin(), pairs[i].end());
    }
    p.kernels.push_back(std::move(k));
  }
  if (!all.empty()) p.cost_error = analysis::ScoreCostModel(all, p.profile);
  p.by_opcode = Group(p.kernels, pairs, p.profile, OpcodeKey);
  p.by_source = Group(p.kernels, pairs, p.profile, SourceKey);
  p.by_module = Group(p.kernels, pairs, p.profile, ModuleKey);
  return p;
}

void OpsView::StartLoading() {
  const int64_t run = model_.run.run_id;
  const std::optional<int> step = step_;
  job_.Start(model_.path, [run, step](const store::Reader& r) { return BuildOpProfile(r, run, step); }, wake_);
}

void OpsView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("ops");
  StartLoading();
  // Which steps: all, or one (a new aggregate, built off the UI thread).
  ImGui::SetNextItemWidth(140);
  const std::string current = step_ ? absl::StrCat("step ", *step_) : std::string("all steps");
  if (ImGui::BeginCombo("##step", current.c_str())) {
    if (ImGui::Selectable("all steps", !step_) && step_) {
      step_.reset();
      job_.Cancel();
      drawn_ = 0;
    }
    std::set<int> steps;
    for (const Dispatch& d : model_.dispatches) steps.insert(d.step);
    for (int s : steps) {
      if (ImGui::Selectable(absl::StrCat("step ", s).c_str(), step_ == s) && step_ != s) {
        step_ = s;
        job_.Cancel();
        drawn_ = 0;
      }
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  static const char* kGroupings[] = {"per kernel", "by opcode", "by source line", "by module path"};
  for (int g = 0; g < 4; ++g) {
    ImGui::SameLine();
    if (ImGui::RadioButton(kGroupings[g], grouping_ == g)) grouping_ = g;
  }
  StartLoading();
  const auto* result = job_.result();
  if (!result) {
    ImGui::TextDisabled("Adding up every kernel's time...");
    return;
  }
  if (!result->ok()) {
    ++drawn_;
    ImGui::TextColored(Color(kWarning), "The op profile could not be built: %s",
                       std::string(result->status().message()).c_str());
    ui.DataError(result->status().message());
    return;
  }
  const OpProfile& p = **result;
  ++drawn_;
  const std::string steps = p.step ? absl::StrCat("step ", *p.step) : "all steps";
  std::string line;
  if (p.clock == "host") {
    line = absl::StrFormat("%d names, %s of self time on %d host lanes (host clock, %s): no device or modeled lanes "
                           "in this run, so each name's time less its children's, as PyTorch's key_averages",
                           p.kernels.size(), FormatDuration(double(p.total_ns)), p.devices, steps);
  } else {
    const std::string chips = p.chips_in_run > p.devices
                                  ? absl::StrFormat("%d of %d chips (an even sample: every chip runs the same programs; "
                                                    "Fleet compares the chips)",
                                                    p.devices, p.chips_in_run)
                                  : absl::StrFormat("%d chips", p.devices);
    line = absl::StrFormat("%d kernels, %s of %s time on %s (%s clock, %s)", p.kernels.size(),
                           FormatDuration(double(p.total_ns)), p.clock, chips, p.clock, steps);
  }
  if (p.peak_flops > 0) absl::StrAppend(&line, "; profile ", p.profile, ": peak ", Si(p.peak_flops, "FLOP/s"));
  if (p.peak_bytes_per_s > 0) absl::StrAppend(&line, ", HBM ", Si(p.peak_bytes_per_s, "B/s"), " (fitted)");
  if (p.cost_error) absl::StrAppend(&line, "; ", analysis::CostModelErrorLine(*p.cost_error));
  ImGui::TextUnformatted(line.c_str());
  if (ui.layout) {
    auto& item = ui.layout->Add("text", line, json{{"table", "ops"}, {"run_id", p.run_id}}, ImGui::GetItemRectMin().x,
                                ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
    item["total_ns"] = p.total_ns;
    item["kernels"] = p.kernels.size();
    item["clock"] = p.clock;
    item["lanes"] = p.devices;
  }
  if (!p.has_ops) {
    ImGui::TextColored(Color(kWarning), "%s",
                       absl::StrCat("This run has no IR (", p.no_ops_why.empty() ? "an imported trace" : p.no_ops_why,
                                    "): kernels by name only; no FLOPs, bytes, roofline or cost model.")
                           .c_str());
  }
  if (p.kernels.empty()) {
    ImGui::TextDisabled("No %s-clock %s in %s.", p.clock.c_str(), p.clock == "host" ? "slices" : "kernels",
                        p.step ? "this step" : "this run");
    return;
  }
  const float avail = ImGui::GetContentRegionAvail().y;
  const bool chart = p.has_ops && p.peak_flops > 0;
  const float chart_h = chart ? std::clamp(avail * 0.42f, 160.0f, 380.0f) : 0;
  DrawTable(ui, p, std::max(120.0f, avail - chart_h - (chart ? 8 : 0)));
  if (chart) DrawRoofline(ui, p, chart_h);
}

void OpsView::DrawTable(UiState& ui, const OpProfile& p, float table_h) {
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit;
  const bool per_kernel = grouping_ == 0;
  const std::vector<OpGroup>* groups =
      grouping_ == 1 ? &p.by_opcode : grouping_ == 2 ? &p.by_source : grouping_ == 3 ? &p.by_module : nullptr;
  const int rows = per_kernel ? int(p.kernels.size()) : int(groups->size());
  if (!ImGui::BeginTable("##ops", 13, flags, ImVec2(0, table_h))) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn(per_kernel ? "kernel" : grouping_ == 1 ? "opcode" : grouping_ == 2 ? "source line" : "module path",
                          ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn(per_kernel ? "program" : "");
  ImGui::TableSetupColumn(per_kernel ? "shape" : "kernels");
  ImGui::TableSetupColumn("count");
  ImGui::TableSetupColumn("time");
  ImGui::TableSetupColumn("share");
  ImGui::TableSetupColumn("FLOPs");
  ImGui::TableSetupColumn("bytes");
  ImGui::TableSetupColumn("FLOP/B");
  ImGui::TableSetupColumn("achieved");
  ImGui::TableSetupColumn("of peak");
  ImGui::TableSetupColumn("bound");
  ImGui::TableSetupColumn(per_kernel ? "model error / source" : "model error");
  ImGui::TableHeadersRow();

  // The picked op (from the overview, the chart) scrolls into view once.
  int scroll_to = -1;
  if (per_kernel && ui.selected_op && ui.scroll_to_selected_op) {
    for (int i = 0; i < rows; ++i) {
      if (p.kernels[i].graph_id == ui.selected_op->first && p.kernels[i].op_id == ui.selected_op->second) scroll_to = i;
    }
    ui.scroll_to_selected_op = false;
    if (scroll_to >= 0) ImGui::SetScrollY(scroll_to * ImGui::GetTextLineHeightWithSpacing());
  }
  // Only the rows on screen are drawn (a run may have thousands of kernels);
  // the layout dump lists those.
  ImGuiListClipper clipper;
  clipper.Begin(rows);
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(i);
      std::string label, bound;
      int64_t count = 0, total = 0;
      double flops = 0, bytes = 0, ai = 0, achieved = 0, error = -1;
      json ref;
      bool selected = false;
      if (per_kernel) {
        const OpKernel& k = p.kernels[i];
        label = k.name;
        count = k.count;
        total = k.total_ns;
        if (k.has_cost) {
          flops = k.flops * double(k.count);
          bytes = k.bytes * double(k.count);
          ai = k.Intensity();
          achieved = k.AchievedFlops();
        }
        bound = k.bound;
        error = k.model_error;
        ref = k.graph_id >= 0 ? json{{"table", "ops"}, {"graph_id", k.graph_id}, {"op_id", k.op_id}}
                              : json{{"table", "slices"}, {"name", k.name}, {"kind", k.kind}};
        selected = ui.selected_op && k.graph_id >= 0 && ui.selected_op->first == k.graph_id &&
                   ui.selected_op->second == k.op_id;
      } else {
        const OpGroup& g = (*groups)[i];
        label = g.key;
        count = g.count;
        total = g.total_ns;
        flops = g.flops;
        bytes = g.bytes;
        ai = g.Intensity();
        achieved = g.AchievedFlops();
        bound = g.bound;
        error = g.model_error;
        ref = json{{"table", "kernel_stats"},
                   {grouping_ == 1 ? "opcode" : grouping_ == 2 ? "source" : "module_path", g.key}};
      }
      if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns) && per_kernel &&
          p.kernels[i].graph_id >= 0) {
        ui.selected_op = std::pair{p.kernels[i].graph_id, p.kernels[i].op_id};
      }
      if (ui.layout) {
        const ImVec2 a = ImGui::GetItemRectMin(), s = ImGui::GetItemRectSize();
        auto& item = ui.layout->Add("row", label, ref, a.x, a.y, s.x, s.y);
        item["count"] = count;
        item["total_ns"] = total;
        item["flops"] = flops;
        item["bytes"] = bytes;
        item["bound"] = bound;
        item["model_error"] = error;
        item["selected"] = selected;
      }
      ImGui::TableNextColumn();
      if (per_kernel && p.kernels[i].graph_id >= 0) ImGui::Text("graph %lld", static_cast<long long>(p.kernels[i].graph_id));
      ImGui::TableNextColumn();
      if (per_kernel) {
        ImGui::TextUnformatted(p.kernels[i].shape.c_str());
      } else {
        ImGui::Text("%lld", static_cast<long long>((*groups)[i].kernels));
      }
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(count));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(FormatDuration(double(total)).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.1f%%", p.total_ns > 0 ? 100.0 * double(total) / double(p.total_ns) : 0.0);
      const bool costed = flops > 0 || bytes > 0;
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(costed ? Si(flops, "").c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(costed ? FormatBytes(int64_t(bytes)).c_str() : "-");
      ImGui::TableNextColumn();
      if (costed && bytes > 0) {
        ImGui::Text("%.3g", ai);
      } else {
        ImGui::TextUnformatted("-");
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(flops > 0 ? Si(achieved, "FLOP/s").c_str() : "-");
      ImGui::TableNextColumn();
      if (flops > 0 && p.peak_flops > 0) {
        ImGui::Text("%.1f%%", 100 * achieved / p.peak_flops);
      } else {
        ImGui::TextUnformatted("-");
      }
      ImGui::TableNextColumn();
      ImGui::TextColored(Color(BoundColor(bound)), "%s", bound.c_str());
      ImGui::TableNextColumn();
      std::string err = error >= 0 ? absl::StrFormat("%.0f%%", 100 * error) : "-";
      if (per_kernel && !p.kernels[i].source.empty()) {
        absl::StrAppend(&err, "  ", p.kernels[i].source);
        if (!p.kernels[i].scope.empty()) absl::StrAppend(&err, " (", p.kernels[i].scope, ")");
      }
      ImGui::TextUnformatted(err.c_str());
      ImGui::PopID();
    }
  }
  ImGui::EndTable();
}

// Log-log: x arithmetic intensity (FLOP/byte), y achieved FLOP/s; the
// compute roof at the peak, the memory roof bandwidth x intensity below the
// ridge; a dot per kernel with FLOPs, its area by its share of time.
void OpsView::DrawRoofline(UiState& ui, const OpProfile& p, float height) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = ImGui::GetContentRegionAvail().x;
  ImGui::InvisibleButton("##roofline", ImVec2(width, height));
  const bool hovered_chart = ImGui::IsItemHovered() && !ui.headless;
  const bool clicked = ImGui::IsItemClicked();
  const float left = origin.x + 70, right = origin.x + width - 20, top = origin.y + 18, bottom = origin.y + height - 26;
  dl->AddRectFilled(ImVec2(left, top), ImVec2(right, bottom), kLaneEven.Packed());

  // The ranges: every dot and the ridge, in whole decades.
  double x_lo = 1e30, x_hi = 0, y_lo = 1e30, y_hi = p.peak_flops;
  for (const OpKernel& k : p.kernels) {
    if (!k.has_cost || k.flops <= 0 || k.bytes <= 0 || k.total_ns <= 0) continue;
    x_lo = std::min(x_lo, k.Intensity());
    x_hi = std::max(x_hi, k.Intensity());
    y_lo = std::min(y_lo, k.AchievedFlops());
    y_hi = std::max(y_hi, k.AchievedFlops());
  }
  const double ridge = p.peak_bytes_per_s > 0 ? p.peak_flops / p.peak_bytes_per_s : 0;
  if (ridge > 0) {
    x_lo = std::min(x_lo, ridge);
    x_hi = std::max(x_hi, ridge);
  }
  if (x_hi <= 0) {
    dl->AddText(ImVec2(left + 10, top + 10), kDimText.Packed(), "no kernel with FLOPs and bytes to place");
    return;
  }
  const double lx0 = std::floor(std::log10(x_lo)), lx1 = std::max(lx0 + 1, std::ceil(std::log10(x_hi) + 0.01));
  const double ly0 = std::floor(std::log10(std::min(y_lo, p.peak_flops / 10))),
               ly1 = std::ceil(std::log10(y_hi) + 0.01);
  auto X = [&](double v) { return float(left + (std::log10(v) - lx0) / (lx1 - lx0) * (right - left)); };
  auto Y = [&](double v) { return float(bottom - (std::log10(v) - ly0) / (ly1 - ly0) * (bottom - top)); };
  // Decade grid and labels.
  for (double d = lx0; d <= lx1; d += 1) {
    const float x = X(std::pow(10, d));
    dl->AddLine(ImVec2(x, top), ImVec2(x, bottom), kLaneOdd.Packed());
    dl->AddText(ImVec2(x - 12, bottom + 4), kDimText.Packed(), absl::StrFormat("1e%d", int(d)).c_str());
  }
  for (double d = ly0; d <= ly1; d += 1) {
    const float y = Y(std::pow(10, d));
    dl->AddLine(ImVec2(left, y), ImVec2(right, y), kLaneOdd.Packed());
    dl->AddText(ImVec2(origin.x + 4, y - 7), kDimText.Packed(), Si(std::pow(10, d), "").c_str());
  }
  dl->AddText(ImVec2(left, origin.y), kText.Packed(), "roofline: achieved FLOP/s (y) against FLOP per byte (x), log-log");
  dl->AddText(ImVec2(right - 190, bottom + 4 + 0), kDimText.Packed(), "arithmetic intensity");
  // Roofs.
  const double xa = std::pow(10, lx0), xb = std::pow(10, lx1);
  const json roof_ref = {{"table", "devices"}, {"run_id", p.run_id}};
  const uint32_t roof_color = kClockLabel.Packed();
  if (ridge > 0) {
    const double y_at_a = xa * p.peak_bytes_per_s;
    const ImVec2 a(X(xa), Y(std::max(y_at_a, std::pow(10, ly0)))), r(X(ridge), Y(p.peak_flops));
    ImVec2 a_clip = a;
    if (y_at_a < std::pow(10, ly0)) a_clip = ImVec2(X(std::pow(10, ly0) / p.peak_bytes_per_s), Y(std::pow(10, ly0)));
    dl->AddLine(a_clip, r, roof_color, 2);
    dl->AddLine(r, ImVec2(X(xb), Y(p.peak_flops)), roof_color, 2);
    if (ui.layout) {
      auto& item = ui.layout->Add("roof", "memory roof", roof_ref, a_clip.x, r.y, r.x - a_clip.x, a_clip.y - r.y);
      item["bytes_per_s"] = p.peak_bytes_per_s;
      item["ridge"] = ridge;
    }
  } else {
    dl->AddLine(ImVec2(X(xa), Y(p.peak_flops)), ImVec2(X(xb), Y(p.peak_flops)), roof_color, 2);
  }
  if (ui.layout) {
    auto& item = ui.layout->Add("roof", "compute roof", roof_ref, X(std::max(xa, ridge)), Y(p.peak_flops),
                                X(xb) - X(std::max(xa, ridge)), 0);
    item["flops_per_s"] = p.peak_flops;
  }
  dl->AddText(ImVec2(right - 200, Y(p.peak_flops) - 16), roof_color,
              absl::StrCat("peak ", Si(p.peak_flops, "FLOP/s")).c_str());

  // Dots: the picked kernel outlined; the nearest to the pointer named.
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  std::optional<size_t> nearest;
  float nearest_d2 = 12 * 12;
  dl->PushClipRect(ImVec2(left, top - 6), ImVec2(right + 6, bottom), true);
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const OpKernel& k = p.kernels[i];
    if (!k.has_cost || k.flops <= 0 || k.bytes <= 0 || k.total_ns <= 0) continue;
    const ImVec2 c(X(k.Intensity()), Y(k.AchievedFlops()));
    const float share = p.total_ns > 0 ? float(k.total_ns) / float(p.total_ns) : 0;
    const float radius = 2.5f + 14.0f * std::sqrt(share);
    dl->AddCircleFilled(c, radius, BoundColor(k.bound).Packed(200), 12);
    const bool picked = ui.selected_op && ui.selected_op->first == k.graph_id && ui.selected_op->second == k.op_id;
    if (picked) dl->AddCircle(c, radius + 2, kSelection.Packed(), 12, 2);
    if (hovered_chart) {
      const float dx = mouse.x - c.x, dy = mouse.y - c.y;
      if (dx * dx + dy * dy < nearest_d2) {
        nearest_d2 = dx * dx + dy * dy;
        nearest = i;
      }
    }
    if (ui.layout) {
      auto& item = ui.layout->Add("dot", k.name, json{{"table", "ops"}, {"graph_id", k.graph_id}, {"op_id", k.op_id}},
                                  c.x - radius, c.y - radius, 2 * radius, 2 * radius);
      item["intensity"] = k.Intensity();
      item["achieved_flops"] = k.AchievedFlops();
      item["bound"] = k.bound;
      item["total_ns"] = k.total_ns;
      item["selected"] = picked;
    }
  }
  dl->PopClipRect();
  hovered_ = nearest;
  if (nearest) {
    const OpKernel& k = p.kernels[*nearest];
    ImGui::BeginTooltip();
    ImGui::Text("%s  %s  (%s-bound)", k.name.c_str(), k.shape.c_str(), k.bound.c_str());
    ImGui::Text("%lld runs, %s, %s FLOP and %s per run", static_cast<long long>(k.count),
                FormatDuration(double(k.total_ns)).c_str(), Si(k.flops, "").c_str(),
                FormatBytes(int64_t(k.bytes)).c_str());
    ImGui::Text("%.3g FLOP/byte, achieved %s (%.1f%% of peak)", k.Intensity(), Si(k.AchievedFlops(), "FLOP/s").c_str(),
                p.peak_flops > 0 ? 100 * k.AchievedFlops() / p.peak_flops : 0.0);
    if (!k.source.empty()) ImGui::Text("%s%s%s", k.source.c_str(), k.scope.empty() ? "" : "  ", k.scope.c_str());
    ImGui::EndTooltip();
    if (clicked) {
      ui.selected_op = std::pair{k.graph_id, k.op_id};
      ui.scroll_to_selected_op = true;
      grouping_ = 0;
    }
  }
}

}  // namespace shardscope::app
