// The Timeline view: a section per clock (device, modeled, host), each with
// its own labelled ruler in that clock's time, placed on one screen axis so
// that a chip's work never shows before the host dispatched it
// (clock_alignment.h). Lanes are grouped by host under collapsible headers and
// shrink together so a pod fits the window (timeline_layout.h); counters sit in
// the host section. What a lane draws comes from TimelineLoader: summary
// columns zoomed out, raw slices (folded below a few pixels) zoomed in; every
// folded shape shows each kind's share and the busy fraction, folds stop at
// step boundaries, and step markers cross every lane. Clicking a slice selects
// it: the details panel below says what it is, and a collective shows its flow
// across the chips with the last to arrive marked. Wheel zooms around the
// mouse, dragging pans, double-click fits the run, clicking a folded shape
// zooms into it.
//
// Navigation, as Tracy's: W/S zoom and A/D pan while held; shift-drag selects
// a time range on one clock and a table below says what it covers per name
// (timeline_nav.h: from slices, or summaries past a budget, which it says);
// Ctrl+F finds slices by name in the whole run (a store query), Enter/F3 and
// Shift+Enter/Shift+F3 step through the hits; the selection stays until
// Escape, outlined, with its op (ops), its counterpart on the other clock and
// the host's dispatch of its program drawn as flows to where each chip began it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "ui/app/palette.h"
#include "ui/app/lane_texture.h"
#include "ui/app/timeline_layout.h"
#include "ui/app/timeline_loader.h"
#include "ui/app/timeline_nav.h"
#include "ui/app/trace_model.h"
#include "ui/app/ui_state.h"

namespace shardscope::app {

// Where a lane's slices were drawn in the last frame, in window pixels (top
// left origin). Screenshot mode prints these so a test can check the image.
struct LaneRect {
  int64_t track_id = 0;
  std::optional<int64_t> device_id;
  int64_t host_id = 0;
  Clock clock = Clock::kHost;
  float x = 0, y = 0, w = 0, h = 0;
  size_t blocks_drawn = 0;
  int level = 0;          // what it drew: a summary level, or -1 for slices
  bool fallback = false;  // drew coarser data than its zoom wants (still loading)
};

// The selected slice and, for a collective, its members on the other chips.
struct TimelineSelection {
  int64_t track_id = 0;
  Slice slice;
};

class TimelineView {
 public:
  TimelineView(const TraceModel& model, TimelineLoader& loader);
  ~TimelineView();
  TimelineView(const TimelineView&) = delete;
  TimelineView& operator=(const TimelineView&) = delete;

  void Draw(UiState& ui);

  // The last frame drew every visible lane at the level its zoom wants, with
  // the run's overview loaded, the selection's flow found and nothing left to
  // load: what --screenshot and --dump-layout wait for.
  bool complete() const { return complete_; }

  const std::vector<LaneRect>& lanes() const { return lanes_; }
  // Shapes drawn in the last frame (slices, folds and summary columns), as
  // pixels of the lanes' images.
  size_t shapes_drawn() const { return shapes_drawn_; }
  // What the last frame cost the renderer for the lanes: image quads drawn
  // (one per visible lane), lanes whose image was redrawn, and texture
  // uploads so far.
  size_t quads_drawn() const { return quads_drawn_; }
  size_t lanes_rasterized() const { return lanes_rasterized_; }
  size_t uploads() const { return uploads_; }
  // The lanes' images (an atlas covering the visible slice area and a margin
  // either side), for tests; (atlas_x(), atlas_y()) is where its top left
  // corner was drawn.
  const LaneImage& atlas() const { return atlas_.image; }
  float atlas_x() const { return atlas_x_; }
  float atlas_y() const { return atlas_y_; }
  // One shape of a lane (timeline_view.cc).
  struct LaneShape;
  // The view on the shared axis (host-clock time): time at the slice area's
  // left edge, and the zoom.
  double offset_ns() const { return view_t0_; }
  double ns_per_px() const { return ns_per_px_; }
  // Moves the view right by `px` pixels' worth of time (--bench pans with it).
  void PanPixels(float px) {
    view_t0_ += px * ns_per_px_;
    moved_ = true;
  }
  // Zooms by `factor` (> 1: in) around the middle of the slice area (--bench).
  void ZoomBy(double factor) {
    const double mid = view_t0_ + area_w_ / 2 * ns_per_px_;
    ns_per_px_ /= factor;
    view_t0_ = mid - area_w_ / 2 * ns_per_px_;
    moved_ = true;
  }
  // What the user is looking at, kept across a reload of the same run
  // (--follow, as steps land).
  struct ViewState {
    double t0 = 0, ns_per_px = 0;
    bool moved = false;  // zoomed or panned since the view last fit the run
    double last_step_ns = 0;  // where the newest step started then, on the shared axis
    float area_w = 0;
    absl::flat_hash_set<std::string> collapsed;
    bool has_collapsed = false;
  };
  ViewState SaveView() const;
  // Applies `state` once the reloaded run's overview is in: a view the user
  // never moved fits the run again; one showing the start of the newest step
  // (the live edge) keeps its zoom and moves on with the newest step; any
  // other stays where it was.
  void RestoreView(ViewState state) { restore_ = std::move(state); }
  // Shows [t0, t1) of `clock` (its own times) across the slice area.
  void ShowWindow(Clock clock, int64_t t0, int64_t t1);
  // Where a click on a summary column or fold starting at t0 zooms to: its
  // end, but never more than a quarter of the window shown now (a zoom in).
  int64_t ZoomInEnd(int64_t t0, int64_t t1) const;
  // Selects a slice by id (it is looked up in the background) and shows its step.
  void SelectSliceId(int64_t slice_id);
  const std::optional<TimelineSelection>& selection() const { return selection_; }
  // Selects [t0, t1) of `clock` (its own times) as the range whose table is
  // shown, over every lane of that clock (shift-drag; --range).
  void SetRange(Clock clock, int64_t t0, int64_t t1);
  void ClearRange();
  const std::optional<RangeStats>& range_stats() const { return range_stats_; }
  // Finds slices named like `text` in the whole run (Ctrl+F; --search); the
  // first hit is selected once found when `select_first`.
  void Search(const std::string& text, bool select_first = true);
  // The --select and --range the app was started with: a slice the run
  // lacks, or a range outside its steps, is said in UiState::option_errors.
  void CheckOnArrival(std::string select_flag, std::string range_flag) {
    select_flag_ = std::move(select_flag), range_flag_ = std::move(range_flag);
  }
  // Marks the slices of op `op_id` of graph `graph_id` as the hits (an op
  // picked in the Graph view), found in the whole run.
  void SearchOp(int64_t graph_id, int64_t op_id);
  // Selects the next (+1) or previous (-1) hit and shows it.
  void StepSearch(int direction);
  struct SearchHit {
    int64_t track_id = 0;
    Slice slice;
    double axis_ns = 0;  // start on the shared axis, the hits' order
  };
  const std::vector<SearchHit>& search_hits() const { return hits_; }
  int search_index() const { return hit_index_; }
  // The selected op's row of `ops`, once looked up.
  const std::optional<OpInfo>& selected_op() const { return op_; }
  // The rows of the last frame (for tests: collapsed groups, heights).
  const RowLayout& layout() const { return layout_; }
  void SetCollapsed(const std::string& key, bool collapsed);
  const absl::flat_hash_set<std::string>& collapsed() const { return collapsed_; }
  void SetCollapsed(absl::flat_hash_set<std::string> keys) { collapsed_ = std::move(keys); }

 private:
  struct Hover;
  struct Frame;

  void Fit();
  // The start of the newest step of any clock, on the shared axis (the
  // run's start when it has no steps).
  double LastStepNs() const;
  void EnsureSections();
  void Select(int64_t track_id, const Slice& slice, UiState& ui);
  // `pinned`: drawn over the lanes at SectionHeaderY, not in its place.
  void DrawSectionHeader(const Row& row, const Frame& f, UiState& ui, bool pinned = false);
  float SectionHeaderY(const Row& header, const Frame& f) const;
  void DrawGroupHeader(const Row& row, const Frame& f, UiState& ui);
  void DrawLane(const Row& row, const Frame& f, Hover& hover, UiState& ui, std::vector<WindowKey>& wanted);
  void UpdatePrefetch(const Frame& f);
  // The shapes of `data` over [t0, t1) of the track's clock at the frame's
  // zoom, placed in the atlas, for a lane `lane_h` tall showing `rows_shown` depths.
  void LaneShapes(const Track& t, const WindowData& data, int64_t t0, int64_t t1, const Frame& f, float lane_h,
                  int rows_shown, std::vector<LaneShape>& out) const;
  void PrepareAtlas(const Frame& f);
  // The atlas column of a step marker at `start_ns` of `clock`.
  int StepColumn(Clock clock, int64_t start_ns) const;
  void UploadAtlas();
  void DrawCompiles(const Row& row, const Frame& f, Hover& hover, UiState& ui);
  void DrawCounter(const Row& row, const Frame& f, Hover& hover, UiState& ui, std::vector<WindowKey>& wanted);
  void DrawStepMarkers(const Frame& f, UiState& ui);
  void DrawFlow(const Frame& f, UiState& ui);
  void DrawTooltip(const Hover& hover, const Frame& f);
  void DrawDetails(UiState& ui);
  // The selection's op, its other clock and its program's dispatch, as lines
  // of the details panel (each through `text`, so --dump-layout has them).
  void DrawSelectionOp(UiState& ui, const std::function<void(const std::string&, Rgb)>& text);
  void DrawRangeTable(UiState& ui);
  void DrawSearchBar(UiState& ui);
  void DrawRangeBand(const Frame& f, UiState& ui);
  void DrawSearchMarks(const Frame& f, UiState& ui);
  void DrawNavFlows(const Frame& f, UiState& ui);
  void HandleKeys(UiState& ui);
  // Starts the selection's lookups: its op, its counterpart on the other
  // clock, and where its program started on each chip.
  void StartSelectionJobs();
  void PollJobs(UiState& ui);
  // " (its steps there span 1.2 ms to 80 ms)": where a --range could land.
  std::string SpanOfClock(Clock clock) const;
  bool OverlapsSteps(Clock clock, int64_t t0, int64_t t1) const;
  bool JobsPending() const;
  const Row* LaneRow(int64_t track_id) const;
  // Opens the section and group that hold `track_id`, so its lane is drawn.
  void RevealTrack(int64_t track_id);
  std::optional<std::pair<int64_t, int64_t>> StepWindow(Clock clock, int32_t step) const;
  std::string Name(int32_t name_id) const;
  double Offset(Clock clock) const;

  const TraceModel& model_;
  TimelineLoader& loader_;
  const RunOverview* overview_ = nullptr;  // once loaded
  std::vector<Section> sections_;
  absl::flat_hash_set<std::string> collapsed_;
  RowLayout layout_;
  // The view on the shared axis; ns_per_px_ == 0: fit next frame.
  double view_t0_ = 0;
  double ns_per_px_ = 0;
  double fit_ns_per_px_ = 1;
  bool moved_ = false;  // see ViewState
  std::optional<ViewState> restore_;
  double lo_ns_ = 0, hi_ns_ = 1;  // the run's extent on the shared axis
  std::optional<std::pair<Clock, std::pair<int64_t, int64_t>>> pending_window_;
  std::optional<TimelineSelection> selection_;
  bool awaiting_located_ = false;
  std::string select_flag_, range_flag_;  // see CheckOnArrival; cleared once answered
  bool flow_requested_ = false;
  std::vector<LaneRect> lanes_;
  std::pair<size_t, size_t> prefetch_key_{~size_t{0}, 0};  // (first lane on screen, lanes) last sent
  size_t shapes_drawn_ = 0;

  // The lanes' images: one atlas, each visible lane's rows in it.
  static constexpr int kMaxAtlasWidth = 8192;
  struct Atlas {
    ImTextureID tex = nullptr;
    LaneImage image;
    double t0 = 0;         // shared-axis time at x = 0
    double ns_per_px = 0;
    std::array<double, kNumClocks> offset{};
    uint64_t gen = 0;      // bumped when every lane must be redrawn
    bool full = true;      // upload all of it
    int dirty_lo = 1 << 30, dirty_hi = -1;  // rows redrawn since the last upload
  };
  // What a lane's rows of the atlas show, to know when to redraw them.
  struct LaneCache {
    const WindowData* data = nullptr;
    std::shared_ptr<const WindowData> hold;  // so `data` is not another window at the same address
    uint64_t frame = 0;                      // last drawn in this frame (others are dropped)
    uint64_t atlas_gen = 0;
    int slot_y0 = 0, slot_y1 = 0, rows_shown = 0;
    bool stripe = false, odd = false;
    int64_t t0 = 0, t1 = 0;  // the span of the track's clock drawn
    // Per depth: each shape's [x0, x1) in atlas pixels, in start order.
    std::vector<std::vector<std::pair<float, float>>> marks;
    struct Label {
      float x0, x1, y0, y1;  // atlas x, y from the lane's top
      int32_t name_id;
      int64_t count;         // a fold: "N slices"
      Rgb color;
      int min_width;         // 30: shown when that much of it is on screen; 60: a column
      int64_t others = 0;    // a column: its slices besides the longest it is named by ("name +53")
    };
    std::vector<Label> labels;
  };
  Atlas atlas_;
  absl::flat_hash_map<int64_t, LaneCache> lane_cache_;
  TextureHost* host_ = nullptr;
  float atlas_x_ = 0, atlas_y_ = 0;
  size_t quads_drawn_ = 0, lanes_rasterized_ = 0, uploads_ = 0;
  uint64_t frame_ = 0;
  bool complete_ = false;
  float area_w_ = 0;

  // Navigation (timeline_nav.h).
  struct RangeDrag {
    Clock clock = Clock::kDevice;
    float x0 = 0, x1 = 0;
  };
  std::optional<RangeDrag> range_drag_;
  std::optional<RangeStats> range_stats_;
  std::string range_error_;
  Background<RangeStats> range_job_;
  std::optional<std::pair<Clock, std::pair<int64_t, int64_t>>> range_pending_;  // until the overview is in
  char search_buf_[160] = {};
  bool focus_search_ = false;
  std::string search_text_;
  bool select_first_hit_ = false;
  Background<store::SliceSearch> search_job_;
  std::optional<store::SliceSearch> search_;
  std::string search_error_;
  std::vector<SearchHit> hits_;
  int hit_index_ = -1;
  std::optional<std::string> search_pending_;  // until the overview is in
  std::optional<std::pair<int64_t, int64_t>> highlighted_op_;  // (graph, op) whose slices are the hits
  Background<std::optional<OpInfo>> op_job_;
  std::optional<OpInfo> op_;
  Background<std::optional<Slice>> counterpart_job_;
  std::optional<std::pair<int64_t, Slice>> counterpart_;  // (track, slice) on the other clock
  int64_t counterpart_track_ = -1;
  Background<std::vector<ProgramStart>> starts_job_;
  std::vector<ProgramStart> starts_;
  std::optional<Dispatch> dispatch_;  // the host's launch of the selection's program
  UiState* ui_ = nullptr;             // the last frame's, for selections made between frames
  // A chip's lane asked for (UiState::show_chip, a chip clicked in Fleet):
  // outlined, and scrolled to once the layout has its row.
  int64_t focus_track_ = -1;
  int focus_step_ = -1;
  bool scroll_to_focus_ = false;
  int64_t scroll_track_ = -1;  // the lane scroll_to_focus_ brings into view
  std::optional<int> followed_step_;  // the playhead step last shown
  void FollowFocus(UiState& ui, float avail_h);
};

}  // namespace shardscope::app
