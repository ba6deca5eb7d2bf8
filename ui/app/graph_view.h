// The Graph view: one compiled program's IR around one op — its
// neighbourhood to a chosen depth (operands and users), never the whole
// program at once — as traced or after partitioning, fused kernels folded
// into one row each (click to expand), and per op its cost (FLOPs, bytes, the
// cost model's time), its measured time on the device clock, its sharding and
// the user's line (graph_model.h). A kernel picked on the timeline opens here
// at its op (UiState::graph_focus); an op picked here has its slices marked
// on the timeline (UiState::highlight_op).
#pragma once

#include <functional>
#include <set>

#include "ui/app/graph_model.h"
#include "ui/app/timeline_nav.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

class GraphView {
 public:
  GraphView(const TraceModel& model, std::function<void()> wake = {}) : model_(model), wake_(std::move(wake)) {}
  void Draw(UiState& ui);
  bool complete() const { return started_ && !list_job_.pending() && !graph_job_.pending() && settle_frames_ == 0; }
  // What the view shows (tests).
  int64_t graph_id() const { return graph_id_; }
  int64_t center_id() const { return center_id_; }
  int depth() const { return depth_; }

  struct Listing {
    std::vector<GraphSummary> graphs;
    std::string no_ir;  // one line when the run has no IR (an imported trace)
  };

 private:
  void Load();
  void DrawOps(UiState& ui, const GraphModel& g);

  const TraceModel& model_;
  std::function<void()> wake_;
  bool started_ = false;
  Background<Listing> list_job_;
  Background<GraphModel> graph_job_;
  int64_t graph_id_ = -1;
  bool partitioned_ = true;
  int64_t center_id_ = -1;  // an op id of the program shown; -1: the costliest
  bool center_from_option_ = false;  // center_id_ came from --graph G:OP
  int depth_ = 2;
  std::set<int64_t> expanded_;  // kernel roots shown op by op
  std::pair<int64_t, bool> loaded_{-1, true};
  int settle_frames_ = 0;  // frames until a program that arrived is laid out
};

}  // namespace shardscope::app
