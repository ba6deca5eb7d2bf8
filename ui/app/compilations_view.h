// The Recompilations view: per call site (as `shardscope recompiles` groups
// them) its compilations with cache outcome, cause, subkind, detail, the
// user's line and compile time, and what would stop them (the report's
// suggestions). Picking one shows its graph beside the graph it was compared
// with, aligned by the stored diff (recompile_model.h), the differences
// highlighted and scrolled to, each op's source line on each side. A compile
// marker clicked on the timeline opens here with its row picked. Everything
// is read on a thread of its own (the report replays the run's programs).
#pragma once

#include <functional>
#include <optional>

#include "ui/app/recompile_model.h"
#include "ui/app/timeline_nav.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

class CompilationsView {
 public:
  // `wake` redraws an idle window when something it reads arrives.
  explicit CompilationsView(const TraceModel& model, std::function<void()> wake = {})
      : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  // Nothing left to load for what the last frame showed, the picked
  // compilation's first difference scrolled to (--dump-layout waits for it).
  bool complete() const {
    return started_ && !model_job_.pending() && !pair_job_.pending() && settle_frames_ == 0;
  }
  // Starts loading (the first Draw does).
  void Start();
  const RecompilesModel* recompiles() const;
  const GraphPair* pair() const;

 private:
  void DrawSites(UiState& ui);
  void DrawPair(UiState& ui);

  const TraceModel& model_;
  bool misses_only_ = false;
  bool started_ = false;
  std::function<void()> wake_;
  Background<RecompilesModel> model_job_;
  Background<GraphPair> pair_job_;
  std::optional<int64_t> pair_for_;  // the compile_id pair_job_ is (or was) about
  bool scroll_to_difference_ = false;
  int settle_frames_ = 0;  // frames until a scroll asked for has been drawn
};

}  // namespace shardscope::app
