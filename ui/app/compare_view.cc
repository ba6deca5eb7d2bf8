// The Compare view; see compare_view.h.
#include "ui/app/compare_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

using analysis::Change;
using nlohmann::json;

ImVec4 Color(Rgb c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

Rgb ChangeColor(Change c) {
  switch (c) {
    case Change::kAdded: return {110, 170, 230};
    case Change::kRemoved: return kDimText;
    case Change::kFaster: return {110, 200, 120};
    case Change::kSlower: return kWarning;
    case Change::kUnchanged: return kText;
  }
  return kText;
}

std::string Ns(double ns) { return ns > 0 || ns < 0 ? FormatDuration(ns) : std::string("0"); }
std::string Signed(double ns) { return ns >= 0 ? absl::StrCat("+", Ns(ns)) : absl::StrCat("-", Ns(-ns)); }

std::string SpreadText(const analysis::Spread& s) {
  if (s.n == 0) return "-";
  return absl::StrFormat("%s (p10 %s, p90 %s; %d steps)", Ns(s.median), Ns(s.p10), Ns(s.p90), s.n);
}

std::string RunName(const analysis::RunHeader& h) {
  return absl::StrFormat("%s run %d (%s, %d chips)", std::filesystem::path(h.db_path).filename().string(), h.run_id,
                         h.sample, h.num_devices);
}

}  // namespace

void CompareView::SetTarget(CompareTarget target) {
  job_.Cancel();
  picked_.reset();
  drawn_ = 0;
  target_ = std::move(target);
  defaulted_ = true;
}

void CompareView::StartLoading() {
  if (!target_ || job_.started()) return;
  const int64_t run_b = model_.run.run_id;
  const std::string this_path = model_.path;
  CompareTarget t = *target_;
  const std::vector<int64_t> runs = model_.run_ids;
  job_.Start(
      this_path,
      [t, run_b, this_path, runs](const store::Reader& this_file) -> absl::StatusOr<analysis::RunComparison> {
        if (t.path.empty() || t.path == this_path) {
          int64_t run_a = -1;
          if (t.run_id) {
            run_a = *t.run_id;
          } else {
            for (int64_t id : runs) {
              if (id < run_b) run_a = id;
            }
          }
          if (run_a < 0) return absl::NotFoundError("this file holds no run before this one to compare with");
          return analysis::CompareRuns(this_file, run_a, this_file, run_b);
        }
        auto other = store::Reader::Open(t.path);
        if (!other.ok()) return other.status();
        int64_t run_a = 0;
        if (t.run_id) {
          run_a = *t.run_id;
        } else {
          auto latest = other->LatestRunId();
          if (!latest.ok()) return latest.status();
          run_a = *latest;
        }
        return analysis::CompareRuns(*other, run_a, this_file, run_b);
      },
      wake_);
}

void CompareView::DrawPicker() {
  ImGui::TextUnformatted("Compare with:");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(160);
  std::string current = "pick a run";
  if (target_ && target_->path.empty()) {
    current = target_->run_id ? absl::StrCat("run ", *target_->run_id, " of this file") : "the run before";
  } else if (target_) {
    current = absl::StrCat(std::filesystem::path(target_->path).filename().string(),
                           target_->run_id ? absl::StrCat(" run ", *target_->run_id) : "");
  }
  if (ImGui::BeginCombo("##compare_run", current.c_str())) {
    for (int64_t id : model_.run_ids) {
      if (id == model_.run.run_id) continue;
      if (ImGui::Selectable(absl::StrCat("run ", id, " of this file").c_str())) SetTarget({"", id});
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine(0, 20);
  ImGui::SetNextItemWidth(360);
  const bool entered =
      ImGui::InputTextWithHint("##compare_path", "another database: path, then Enter", path_buf_, sizeof path_buf_,
                               ImGuiInputTextFlags_EnterReturnsTrue);
  if (entered && path_buf_[0]) SetTarget({path_buf_, std::nullopt});
}

void CompareView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("compare");
  // By default, the run before this one in the same file.
  if (!defaulted_) {
    defaulted_ = true;
    for (int64_t id : model_.run_ids) {
      if (id < model_.run.run_id) target_ = CompareTarget{"", std::nullopt};
    }
  }
  DrawPicker();
  if (!target_) {
    if (model_.run_ids.size() > 1)
      ImGui::TextDisabled("Run %lld is this file's first run: pick a run to compare it with above, open with "
                          "--compare OTHER.db, or type another database's path.",
                          static_cast<long long>(model_.run.run_id));
    else
      ImGui::TextDisabled("This file holds one run: open with --compare OTHER.db, or type another database's path above.");
    return;
  }
  StartLoading();
  const auto* result = job_.result();
  if (!result) {
    ImGui::TextDisabled("Comparing the two runs (step times, compilations, every op per step)...");
    return;
  }
  if (!result->ok()) {
    ++drawn_;
    const std::string text = absl::StrCat("Cannot compare: ", result->status().message());
    ImGui::TextColored(Color(kWarning), "%s", text.c_str());
    if (ui.layout)
      ui.layout->Add("error", text, json{{"table", "runs"}}, ImGui::GetItemRectMin().x,
                     ImGui::GetItemRectMin().y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
    // A file or run that is not there is what was asked (--compare, --compare-run,
    // the picker); damage in a file is the file's.
    if (result->status().code() == absl::StatusCode::kDataLoss) {
      // The damage may be the other file's: said with the file to check.
      const std::string other = target_->path.empty() ? model_.path : target_->path;
      ui.DataError(absl::StrCat(text, " (`shardscope check ", other, "` names the damage)"));
    } else if (std::find(ui.option_errors.begin(), ui.option_errors.end(), text) == ui.option_errors.end()) {
      ui.option_errors.push_back(text);
    }
    return;
  }
  ++drawn_;
  DrawComparison(ui, **result);
}

void CompareView::DrawComparison(UiState& ui, const analysis::RunComparison& c) {
  auto add = [&](const char* type, const std::string& label, json ref) -> json* {
    if (!ui.layout) return nullptr;
    const ImVec2 a = ImGui::GetItemRectMin(), s = ImGui::GetItemRectSize();
    return &ui.layout->Add(type, label, std::move(ref), a.x, a.y, s.x, s.y);
  };
  ImGui::Text("A (baseline): %s    B (this): %s", RunName(c.a).c_str(), RunName(c.b).c_str());
  ImGui::TextColored(Color(kClockLabel), "%s", c.verdict.c_str());
  if (json* item = add("verdict", c.verdict, json{{"table", "runs"}, {"a", c.a.run_id}, {"b", c.b.run_id}})) {
    (*item)["counts"] = {{"added", c.counts[0]},  {"removed", c.counts[1]}, {"faster", c.counts[2]},
                         {"slower", c.counts[3]}, {"unchanged", c.counts[4]}};
  }
  for (const std::string& note : c.notes) ImGui::TextColored(Color(kDimText), "note: %s", note.c_str());

  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit;
  // Step time on each clock, then compilations and memory.
  if (ImGui::BeginTable("##steps", 6, flags)) {
    for (const char* h : {"", "A median", "B median", "difference", "beyond noise at", "change"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const analysis::StepClockDelta& d : c.steps) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const std::string label = absl::StrCat("step time (", d.clock, " clock)");
      ImGui::TextUnformatted(label.c_str());
      if (json* item = add("step", label, json{{"table", "steps"}, {"clock", d.clock}})) {
        (*item)["a_median"] = d.a.median;
        (*item)["b_median"] = d.b.median;
        (*item)["change"] = analysis::ChangeName(d.delta.change);
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(d.a.n ? Ns(d.a.median).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(d.b.n ? Ns(d.b.median).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(d.a.n && d.b.n ? absl::StrFormat("%s (%+.1f%%)", Signed(d.delta.diff), 100 * d.Relative()).c_str()
                                            : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(absl::StrCat(Ns(d.delta.threshold), d.delta.noise_measured ? "" : " (fixed 10%)",
                                          d.delta.by_ranks ? absl::StrFormat(" (ranks p=%.2g)", d.delta.rank_p) : "")
                                 .c_str());
      ImGui::TableNextColumn();
      ImGui::TextColored(Color(ChangeColor(d.delta.change)), "%s", analysis::ChangeName(d.delta.change));
    }
    // An imported trace records no compilations: "-", not 0.
    const bool known_a = !(c.a.imported && c.compiles_a.count == 0), known_b = !(c.b.imported && c.compiles_b.count == 0);
    auto count_row = [&](const char* what, int64_t a, int64_t b) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(what);
      if (json* item = add("compile", what, json{{"table", "compilations"}})) {
        (*item)["a"] = known_a ? json(a) : json(nullptr);
        (*item)["b"] = known_b ? json(b) : json(nullptr);
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(known_a ? absl::StrCat(a).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(known_b ? absl::StrCat(b).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(known_a && known_b ? absl::StrFormat("%+lld", static_cast<long long>(b - a)).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
    };
    count_row("compilations (cache misses)", c.compiles_a.misses, c.compiles_b.misses);
    count_row("recompilations", c.compiles_a.recompilations, c.compiles_b.recompilations);
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("compile time (host clock)");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(known_a ? Ns(double(c.compiles_a.total_ns)).c_str() : "-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(known_b ? Ns(double(c.compiles_b.total_ns)).c_str() : "-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(known_a && known_b ? Signed(double(c.compiles_b.total_ns - c.compiles_a.total_ns)).c_str()
                                              : "-");
    ImGui::TableNextColumn();
    ImGui::TableNextColumn();
    if (c.peak_a > 0 || c.peak_b > 0) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted("largest program's peak, per chip");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(c.peak_a ? FormatBytes(c.peak_a).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(c.peak_b ? FormatBytes(c.peak_b).c_str() : "-");
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
    }
    ImGui::EndTable();
  }

  // Ops: changed first (the library's order), unchanged on request.
  ImGui::Spacing();
  ImGui::Text("Ops (%s clock, time per step, chip average): %lld added, %lld removed, %lld faster, %lld slower, "
              "%lld unchanged",
              c.op_clock.c_str(), static_cast<long long>(c.counts[0]), static_cast<long long>(c.counts[1]),
              static_cast<long long>(c.counts[2]), static_cast<long long>(c.counts[3]),
              static_cast<long long>(c.counts[4]));
  ImGui::SameLine(0, 20);
  ImGui::Checkbox("show unchanged", &show_unchanged_);
  std::vector<size_t> rows;
  for (size_t i = 0; i < c.ops.size(); ++i) {
    if (show_unchanged_ || c.ops[i].delta.change != Change::kUnchanged) rows.push_back(i);
  }
  const float detail_h = ImGui::GetTextLineHeightWithSpacing() * 5;
  const float sharding_h = c.sharding.empty() ? 0 : ImGui::GetTextLineHeightWithSpacing() * 6;
  const float table_h = std::max(100.0f, ImGui::GetContentRegionAvail().y - detail_h - sharding_h);
  if (ImGui::BeginTable("##compare_ops", 8, flags | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable,
                        ImVec2(0, table_h))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("op", ImGuiTableColumnFlags_WidthStretch);
    for (const char* h : {"shape", "change", "A per step", "B per step", "difference", "step impact", "source"}) {
      ImGui::TableSetupColumn(h);
    }
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(int(rows.size()));
    while (clipper.Step()) {
      for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
        const size_t i = rows[r];
        const analysis::OpDelta& d = c.ops[i];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::PushID(int(i));
        if (ImGui::Selectable(d.name.c_str(), picked_ == i, ImGuiSelectableFlags_SpanAllColumns)) picked_ = i;
        ImGui::PopID();
        if (json* item = add("row", d.name, json{{"table", "ops"}, {"name", d.name}, {"shape", d.shape}})) {
          (*item)["change"] = analysis::ChangeName(d.delta.change);
          (*item)["a_median"] = d.a.median;
          (*item)["b_median"] = d.b.median;
          (*item)["selected"] = picked_ == i;
        }
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(d.shape.c_str());
        ImGui::TableNextColumn();
        ImGui::TextColored(Color(ChangeColor(d.delta.change)), "%s", analysis::ChangeName(d.delta.change));
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(d.a.n ? Ns(d.a.median).c_str() : "-");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(d.b.n ? Ns(d.b.median).c_str() : "-");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(d.a.n && d.b.n ? Signed(d.delta.diff).c_str() : "-");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(Signed(d.step_impact_ns).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(d.source.empty() ? "-" : d.source.c_str());
      }
    }
    ImGui::EndTable();
  }
  // The picked op on both sides.
  if (picked_ && *picked_ < c.ops.size()) {
    const analysis::OpDelta& d = c.ops[*picked_];
    const std::string head = absl::StrFormat("%s %s (%s)%s: %s", d.name, d.shape, d.opcode,
                                             d.source.empty() ? "" : absl::StrCat(" at ", d.source),
                                             analysis::ChangeName(d.delta.change));
    ImGui::TextUnformatted(head.c_str());
    add("detail", head, json{{"table", "ops"}, {"name", d.name}, {"shape", d.shape}});
    const std::string a = absl::StrCat("A ", RunName(c.a), ": ", d.a.n ? SpreadText(d.a) : "not in this run");
    const std::string b = absl::StrCat("B ", RunName(c.b), ": ", d.b.n ? SpreadText(d.b) : "not in this run");
    ImGui::TextUnformatted(a.c_str());
    add("detail", a, json{{"table", "ops"}, {"side", "a"}, {"name", d.name}});
    ImGui::TextUnformatted(b.c_str());
    add("detail", b, json{{"table", "ops"}, {"side", "b"}, {"name", d.name}});
    if (d.a.n && d.b.n) {
      ImGui::TextDisabled("difference %s against a threshold of %s%s", Signed(d.delta.diff).c_str(),
                          Ns(d.delta.threshold).c_str(),
                          d.delta.noise_measured ? " (three standard errors of the runs' own noise)" : " (fixed 10%)");
      if (d.delta.by_ranks)
        ImGui::TextDisabled("within that threshold, but the steps' ranks part the runs (Mann-Whitney p = %.2g)",
                            d.delta.rank_p);
    }
  } else {
    ImGui::TextDisabled("Click an op to see it in both runs.");
  }
  // A chip whose change stands apart (a slow chip, a slow link's ends), which
  // the ops' means over the chips dilute.
  int chips_apart = 0;
  for (const analysis::ChipDelta& d : c.chips) chips_apart += d.compute_apart || d.comm_apart;
  if (!c.chips.empty()) {
    ImGui::TextColored(Color(kClockLabel), "Chips on the %s clock: %s", c.op_clock.c_str(),
                       chips_apart ? absl::StrCat(chips_apart, " of ", c.chips.size(), " stand apart").c_str()
                                   : absl::StrCat("no chip's change stands apart (", c.chips.size(), " chips)").c_str());
    for (const analysis::ChipDelta& d : c.chips) {
      if (!d.compute_apart && !d.comm_apart) continue;
      const std::string line = absl::StrCat(
          "chip ", d.chip, ": compute ", Ns(d.compute_a.median), " -> ", Ns(d.compute_b.median),
          absl::StrFormat(" (%+.1f%%)", 100 * d.ComputeRelative()), d.compute_apart ? " *" : "",
          ", collectives and transfers ", Ns(d.comm_a.median), " -> ", Ns(d.comm_b.median),
          absl::StrFormat(" (%+.1f%%)", 100 * d.CommRelative()), d.comm_apart ? " *" : "");
      ImGui::TextUnformatted(line.c_str());
      add("chip", line, json{{"table", "slices"}, {"device_id", d.chip}});
    }
  }
  if (!c.sharding.empty()) {
    ImGui::TextColored(Color(kClockLabel), "Sharding changes (%zu tensors)", c.sharding.size());
    for (const analysis::ShardingChange& s : c.sharding) {
      const std::string line = absl::StrCat(s.tensor, ": ", s.a.empty() ? "(absent)" : s.a, " -> ",
                                            s.b.empty() ? "(absent)" : s.b);
      ImGui::TextUnformatted(line.c_str());
      add("sharding", line, json{{"table", "tensors"}, {"name", s.tensor}});
    }
  }
}

}  // namespace shardscope::app
