// The Recompilations view: every compilation of the run in one table (step,
// cache outcome, cause, the user's source line, duration), with the picked
// one's full cause and call site below. A compile marker clicked on the
// timeline opens here with its row selected.
#pragma once

#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

class CompilationsView {
 public:
  explicit CompilationsView(const TraceModel& model) : model_(model) {}
  void Draw(UiState& ui);

 private:
  const TraceModel& model_;
  bool misses_only_ = false;
};

}  // namespace shardscope::app
