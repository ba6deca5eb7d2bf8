// The Timeline view; see timeline_view.h. Lanes are drawn straight into the
// window's draw list over one invisible button that owns the mouse, so zoom,
// pan and hover cost nothing per slice beyond what is on screen. Each frame
// asks the loader for the windows it lacks and draws the best it has
// meanwhile (coarser summaries, never nothing once the overview is in).
#include "ui/app/timeline_view.h"

#include <imgui.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ui/app/format.h"
#include "ui/app/layout_dump.h"
#include "ui/app/lod.h"
#include "ui/app/palette.h"

namespace shardscope::app {
namespace {

constexpr float kLabelWidth = 170;
constexpr float kFoldPx = 3;      // slices narrower than this fold
constexpr float kColumnPx = 3;    // summary columns are this wide
constexpr float kMinStepPx = 12;  // step markers closer than this are thinned
constexpr float kDetailsHeight = 110;
constexpr int kKeyW = 'W', kKeyA = 'A', kKeyS = 'S', kKeyD = 'D', kKeyF = 'F';
constexpr int kKeyF3 = 292;  // GLFW_KEY_F3: the GLFW backend indexes keys by GLFW's codes
constexpr size_t kMaxHitMarks = 2000;
constexpr float kRangeTableHeight = 190;

constexpr float kSmallFont = 12.5f;

using nlohmann::json;

bool InRect(const ImVec2& p, float x0, float y0, float x1, float y1) {
  return p.x >= x0 && p.x < x1 && p.y >= y0 && p.y < y1;
}

void SmallText(ImDrawList* dl, float x, float y, Rgb color, const std::string& text, float size = kSmallFont,
               const ImVec4* clip = nullptr) {
  dl->AddText(ImGui::GetFont(), size, ImVec2(x, y), color.Packed(), text.c_str(), nullptr, 0, clip);
}

// A disclosure triangle: pointing right when collapsed, down when open.
void DrawDisclosure(ImDrawList* dl, float x, float y, float size, bool collapsed, Rgb color) {
  const float h = size * 0.5f;
  if (collapsed) {
    dl->AddTriangleFilled(ImVec2(x, y), ImVec2(x + h * 1.4f, y + h), ImVec2(x, y + 2 * h), color.Packed());
  } else {
    dl->AddTriangleFilled(ImVec2(x, y + h * 0.3f), ImVec2(x + 2 * h, y + h * 0.3f), ImVec2(x + h, y + h * 1.7f),
                          color.Packed());
  }
}

// Draw-list channels: labels and backgrounds first (0), then the lanes'
// images (1, opaque: blending off where the shell can), then what is drawn
// over them (2: names, step markers, rulers, counters, flows) under one clip
// rect (the slice area), so a frame is a handful of draw calls rather than a
// few per lane: the software renderer pays for each call.
constexpr int kImageChannel = 1;
constexpr int kOverlayChannel = 2;
constexpr int kNumChannels = 3;

class DataLayer {
 public:
  DataLayer(ImDrawList* dl, ImVec2 min, ImVec2 max, int channel = kOverlayChannel) : dl_(dl) {
    dl_->ChannelsSetCurrent(channel);
    dl_->PushClipRect(min, max, false);
  }
  ~DataLayer() {
    dl_->PopClipRect();
    dl_->ChannelsSetCurrent(0);
  }

 private:
  ImDrawList* dl_;
};

json KindsJson(const KindNs& kind_ns) {
  json kinds = json::object();
  for (int k = 0; k < kNumSliceKinds; ++k) {
    if (kind_ns[k] > 0) kinds[SliceKindName(static_cast<SliceKind>(k))] = kind_ns[k];
  }
  return kinds;
}

// How a fold or summary column is drawn: its extent as a dim background, and
// from the bottom a bar as tall as its busy fraction, split into each kind's
// share (stacked) or, in rows too short to show shares, the dominant kind.
struct Shape {
  int filled_px = 0;
  std::array<int, kNumSliceKinds> kind_px{};  // stacked: each kind's pixels
  SliceKind dominant = SliceKind::kCompute;
  bool operator==(const Shape&) const = default;
};

Shape ShapeOf(const KindNs& kind_ns, double busy_fraction, float height, bool stacked) {
  Shape s;
  s.dominant = DominantKind(kind_ns);
  const double busy = std::clamp(busy_fraction, 0.0, 1.0);
  s.filled_px = busy > 0 ? std::max(1, static_cast<int>(std::lround(busy * height))) : 0;
  if (stacked) {
    int64_t total = 0;
    for (int64_t v : kind_ns) total += v;
    if (total > 0) {
      // Largest remainders, so the parts add up to the bar exactly.
      int used = 0;
      std::array<double, kNumSliceKinds> rest{};
      for (int k = 0; k < kNumSliceKinds; ++k) {
        const double px = static_cast<double>(kind_ns[k]) / total * s.filled_px;
        s.kind_px[k] = static_cast<int>(px);
        rest[k] = px - s.kind_px[k];
        used += s.kind_px[k];
      }
      while (used < s.filled_px) {
        int best = 0;
        for (int k = 1; k < kNumSliceKinds; ++k) {
          if (rest[k] > rest[best]) best = k;
        }
        ++s.kind_px[best];
        rest[best] = -1;
        ++used;
      }
    }
  } else {
    s.kind_px[static_cast<int>(s.dominant)] = s.filled_px;
  }
  return s;
}

// Step markers closer than kMinStepPx are thinned to every k-th step (1, 2,
// 5, 10, 20, 50, ...).
int StepEvery(const std::vector<StepSpan>& steps, double ns_per_px) {
  const double mean_px =
      steps.size() > 1 ? (double(steps.back().start_ns - steps.front().start_ns) / (steps.size() - 1)) / ns_per_px : 1e9;
  // Steps that do not advance (a damaged step_bounds: every step at one
  // time) would never space out: one marker.
  if (!(mean_px > 0)) return std::max<int>(1, static_cast<int>(std::min<size_t>(steps.size(), INT32_MAX)));
  int every = 1;
  for (int m = 1; mean_px * every < kMinStepPx && m <= 100000000; m *= 10) {
    for (int k : {1, 2, 5}) {
      every = k * m;
      if (mean_px * every >= kMinStepPx) break;
    }
  }
  return every;
}

// Blends `color` at `alpha` over column x of rows [y0, y1).
void BlendColumn(LaneImage& img, int x, int y0, int y1, Rgb color, int alpha) {
  if (x < 0 || x >= img.w) return;
  for (int y = std::max(0, y0); y < std::min(img.h, y1); ++y) {
    uint32_t& p = img.px[static_cast<size_t>(y) * img.w + x];
    auto mix = [&](int shift, uint8_t c) {
      const int under = (p >> shift) & 255;
      return static_cast<uint32_t>((c * alpha + under * (255 - alpha)) / 255) << shift;
    };
    p = (p & 0xff000000u) | mix(0, color.r) | mix(8, color.g) | mix(16, color.b);
  }
}

// A counter's value as its name suggests: bytes for *bytes*, else a number.
std::string FormatCounter(const std::string& name, double v) {
  if (absl::StrContains(name, "bytes")) return FormatBytes(static_cast<int64_t>(v));
  return absl::StrFormat("%.6g", v);
}

std::string LaneTitle(const Track& track) {
  if (track.device_id) return absl::StrCat("chip ", *track.device_id);
  std::string thread = track.thread_name.empty() ? track.name : track.thread_name;
  return absl::StrCat("host ", track.host_id, ": ", thread);
}

std::string KindSummary(const KindNs& kind_ns) {
  int64_t total = 0;
  for (int64_t v : kind_ns) total += v;
  std::string out;
  if (total <= 0) return out;
  for (int k = 0; k < kNumSliceKinds; ++k) {
    if (kind_ns[k] <= 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", SliceKindName(static_cast<SliceKind>(k)), " ",
                    absl::StrFormat("%.0f%%", 100.0 * kind_ns[k] / total));
  }
  return out;
}

}  // namespace

// One frame's geometry and mapping between each clock's time and screen x.
struct TimelineView::Frame {
  ImDrawList* dl = nullptr;
  float left = 0, right = 0, area_left = 0, top = 0;
  float clip_top = 0, clip_bottom = 0;
  ImVec2 DataMin() const { return ImVec2(area_left, clip_top); }
  ImVec2 DataMax() const { return ImVec2(right, clip_bottom); }
  ImVec2 mouse;
  float atlas_x = 0;  // screen x of the atlas's left edge (whole pixels)
  double view_t0 = 0, ns_per_px = 1;
  std::array<double, kNumClocks> offset{};

  float ToX(Clock c, double raw_ns) const {
    return area_left + static_cast<float>((raw_ns + offset[static_cast<int>(c)] - view_t0) / ns_per_px);
  }
  double RawAt(Clock c, float x) const {
    return view_t0 + (x - area_left) * ns_per_px - offset[static_cast<int>(c)];
  }
  // The visible window of clock `c`, in its own times.
  std::pair<int64_t, int64_t> Window(Clock c) const {
    return {static_cast<int64_t>(std::floor(RawAt(c, area_left))),
            static_cast<int64_t>(std::ceil(RawAt(c, right))) + 1};
  }
};

// What the mouse is over this frame; filled while drawing, shown after.
struct TimelineView::Hover {
  enum What { kNone, kSlice, kFold, kColumn, kCompile, kCounter, kHeader } what = kNone;
  const Track* track = nullptr;
  Slice slice;
  DrawBlock block;
  Column column;
  int level = 0;
  const Compilation* compile = nullptr;
  const CounterTrack* counter = nullptr;
  CounterColumn counter_column;
  const Row* header = nullptr;
};

// One shape of a lane: a slice, a fold of slices or a summary column, where
// it lies in the atlas and what it holds.
struct TimelineView::LaneShape {
  float x0 = 0, x1 = 0;  // atlas pixels
  float y0 = 0, y1 = 0;  // from the lane's top
  int depth = 0;
  bool column = false;   // a summary column; else slices (one, or a fold)
  DrawBlock block;
  Slice first;           // the block's first slice
  int64_t last_slice_id = 0;
  Column col;
  Shape shape;           // how a fold or column fills its rectangle
};

namespace {

// A shape's pixels in the lane image whose top row is `top`: a slice in its
// kind's colour (a chip waiting for the host muted and hatched); a fold or
// column as its extent, dim, under a bar as tall as its busy fraction split
// into each kind's share. Each pixel is written once.
void PaintShape(LaneImage& img, const TimelineView::LaneShape& s, int top) {
  const int x0 = static_cast<int>(std::floor(s.x0 + 0.5f));
  const int x1 = std::max(x0 + 1, static_cast<int>(std::floor(s.x1 + 0.5f)));
  const int y0 = top + static_cast<int>(std::lround(s.y0)), y1 = top + static_cast<int>(std::lround(s.y1));
  if (!s.column && !s.block.folded()) {
    img.Fill(x0, x1, y0, y1, KindColor(s.block.kind).Packed());
    if (s.block.kind == SliceKind::kHostWait) {
      // Diagonal lines every 8 px.
      const uint32_t hatch = kHostWaitHatch.Packed();
      for (int y = std::max(0, y0); y < std::min(img.h, y1); ++y) {
        for (int x = std::max(0, x0); x < std::min(img.w, x1); ++x) {
          if (((x - x0 + (y1 - 1 - y)) & 7) == 0) img.px[static_cast<size_t>(y) * img.w + x] = hatch;
        }
      }
    }
    return;
  }
  const Shape& sh = s.shape;
  // The background only above the bar, and not in rows too short for it to
  // read (there the bar's height says it).
  if (y1 - sh.filled_px > y0 && y1 - y0 >= 10) img.Fill(x0, x1, y0, y1 - sh.filled_px, kFoldBackground.Packed());
  int y = y1;
  // Host waits last (on top, muted): the work is what the eye should find.
  for (int k = 0; k < kNumSliceKinds; ++k) {
    if (sh.kind_px[k] <= 0) continue;
    const int bar_top = std::max(y0, y - sh.kind_px[k]);
    img.Fill(x0, x1, bar_top, y, KindColor(static_cast<SliceKind>(k)).Packed());
    y = bar_top;
  }
}

}  // namespace

TimelineView::TimelineView(const TraceModel& model, TimelineLoader& loader)
    : model_(model), loader_(loader) {
  sections_ = BuildSections(model_, nullptr);
}

TimelineView::~TimelineView() {
  if (host_ && atlas_.tex) host_->Release(atlas_.tex);
}

void TimelineView::PrepareAtlas(const Frame& f) {
  // As tall as the slice area shows, three screen widths wide (within what a
  // texture may be), at the frame's zoom; panning within the margin reuses it.
  const int want_h = std::max(1, static_cast<int>(std::ceil(f.clip_bottom - f.clip_top)));
  const float area_w = f.right - f.area_left;
  const int want_w = std::min(kMaxAtlasWidth, std::max(static_cast<int>(std::ceil(area_w)) + 4,
                                                       static_cast<int>(std::ceil(3 * area_w))));
  const double vis0 = f.view_t0, vis1 = f.view_t0 + area_w * f.ns_per_px;
  const bool fresh = atlas_.image.w != want_w || atlas_.image.h != want_h || atlas_.ns_per_px != f.ns_per_px ||
                     atlas_.offset != f.offset || vis0 < atlas_.t0 + f.ns_per_px ||
                     vis1 > atlas_.t0 + (atlas_.image.w - 1) * atlas_.ns_per_px;
  if (fresh) {
    atlas_.image.Resize(want_w, want_h);
    atlas_.ns_per_px = f.ns_per_px;
    atlas_.offset = f.offset;
    const double margin_px = std::floor((want_w - area_w) / 2);
    atlas_.t0 = std::floor(vis0 / f.ns_per_px - margin_px) * f.ns_per_px;
    ++atlas_.gen;
    atlas_.full = true;
  }
  if (host_ && !atlas_.tex) {
    atlas_.tex = host_->Create();
    atlas_.full = true;
  }
}

int TimelineView::StepColumn(Clock clock, int64_t start_ns) const {
  return static_cast<int>(std::floor((double(start_ns) + atlas_.offset[static_cast<int>(clock)] - atlas_.t0) / atlas_.ns_per_px));
}

void TimelineView::UploadAtlas() {
  if (host_ && atlas_.tex && (atlas_.full || atlas_.dirty_lo < atlas_.dirty_hi)) {
    if (atlas_.full) {
      host_->Upload(atlas_.tex, atlas_.image.w, atlas_.image.h, atlas_.image.px.data());
    } else {
      host_->UploadRows(atlas_.tex, atlas_.image.w, atlas_.dirty_lo, atlas_.dirty_hi - atlas_.dirty_lo,
                        &atlas_.image.px[static_cast<size_t>(atlas_.dirty_lo) * atlas_.image.w]);
    }
    ++uploads_;
  }
  atlas_.full = false;
  atlas_.dirty_lo = std::numeric_limits<int>::max();
  atlas_.dirty_hi = -1;
}

std::string TimelineView::Name(int32_t name_id) const {
  std::string name = loader_.Name(name_id);
  return name.empty() ? absl::StrCat("name #", name_id) : name;
}

double TimelineView::Offset(Clock clock) const {
  return overview_ ? static_cast<double>(overview_->alignment.offset_ns[static_cast<int>(clock)]) : 0.0;
}

void TimelineView::EnsureSections() {
  if (overview_) return;
  overview_ = loader_.overview();
  if (!overview_) return;
  sections_ = BuildSections(model_, overview_);
  collapsed_ = DefaultCollapsed(sections_);
  // The run's extent on the shared axis, from every clock that has events.
  lo_ns_ = std::numeric_limits<double>::max();
  hi_ns_ = std::numeric_limits<double>::lowest();
  for (int c = 0; c < kNumClocks; ++c) {
    if (!overview_->extent[c]) continue;
    lo_ns_ = std::min(lo_ns_, double(overview_->extent[c]->first + overview_->alignment.offset_ns[c]));
    hi_ns_ = std::max(hi_ns_, double(overview_->extent[c]->second + overview_->alignment.offset_ns[c]));
  }
  if (lo_ns_ > hi_ns_) lo_ns_ = 0, hi_ns_ = 1e6;
  ns_per_px_ = 0;  // fit once the extent is known
  if (restore_) {
    // A reload of the run being followed: keep what the user was looking at.
    if (restore_->has_collapsed) collapsed_ = restore_->collapsed;
    if (restore_->moved && restore_->ns_per_px > 0 && restore_->area_w > 0) {
      const bool at_edge = restore_->t0 + restore_->area_w * restore_->ns_per_px >= restore_->last_step_ns;
      ns_per_px_ = restore_->ns_per_px;
      fit_ns_per_px_ = std::max(1000.0, hi_ns_ - lo_ns_) * 1.02 / restore_->area_w;
      view_t0_ = at_edge ? restore_->t0 + std::max(0.0, LastStepNs() - restore_->last_step_ns) : restore_->t0;
      moved_ = true;
    }
    restore_.reset();
  }
}

void TimelineView::SetCollapsed(const std::string& key, bool collapsed) {
  if (collapsed) collapsed_.insert(key);
  else collapsed_.erase(key);
}

void TimelineView::Fit() {
  const double span = std::max(1000.0, hi_ns_ - lo_ns_);
  const float w = std::max(area_w_, 50.0f);
  ns_per_px_ = span * 1.02 / w;
  fit_ns_per_px_ = ns_per_px_;
  moved_ = false;
  // Never left of time 0: no axis shows times before the run started.
  view_t0_ = std::max(std::min(0.0, lo_ns_), lo_ns_ - span * 0.01);
}

double TimelineView::LastStepNs() const {
  double last = lo_ns_;
  for (int c = 0; overview_ && c < kNumClocks; ++c) {
    const auto& steps = overview_->steps[c];
    if (!steps.empty()) last = std::max(last, double(steps.back().start_ns + overview_->alignment.offset_ns[c]));
  }
  return last;
}

TimelineView::ViewState TimelineView::SaveView() const {
  if (restore_ && !overview_) return *restore_;  // reloaded again before it loaded
  ViewState s;
  s.t0 = view_t0_;
  s.ns_per_px = ns_per_px_;
  s.moved = moved_ && overview_ && ns_per_px_ > 0;
  s.last_step_ns = LastStepNs();
  s.area_w = area_w_;
  s.collapsed = collapsed_;
  s.has_collapsed = overview_ != nullptr;
  return s;
}

void TimelineView::ShowWindow(Clock clock, int64_t t0, int64_t t1) {
  if (area_w_ <= 0 || !overview_) {
    pending_window_ = std::pair{clock, std::pair{t0, t1}};
    return;
  }
  pending_window_.reset();  // the latest request wins
  const double span = std::max<double>(100, double(t1 - t0));
  ns_per_px_ = span * 1.1 / area_w_;
  view_t0_ = double(t0) + Offset(clock) - span * 0.05;
  moved_ = true;
}

int64_t TimelineView::ZoomInEnd(int64_t t0, int64_t t1) const {
  const double shown = ns_per_px_ * area_w_;  // the window's span now
  return shown > 0 ? std::min<int64_t>(t1, t0 + static_cast<int64_t>(shown / 4)) : t1;
}

void TimelineView::SelectSliceId(int64_t slice_id) {
  loader_.RequestLocate(slice_id);
  awaiting_located_ = true;
}

void TimelineView::Select(int64_t track_id, const Slice& slice, UiState& ui) {
  selection_ = TimelineSelection{track_id, slice};
  flow_requested_ = false;
  StartSelectionJobs();
  const Track* track = model_.FindTrack(track_id);
  if (slice.flow_id >= 0 && track) {
    // The other members overlap this one in time on chips of the same clock.
    std::vector<int64_t> tracks;
    for (const Track& t : model_.tracks) {
      if (t.clock == track->clock && t.is_device() == track->is_device()) tracks.push_back(t.track_id);
    }
    const int64_t pad = std::max<int64_t>(1, slice.dur_ns);
    loader_.RequestFlow(slice.flow_id, std::move(tracks), slice.start_ns - pad, slice.end_ns() + pad);
    flow_requested_ = true;
  }
  if (track) {
    ui.selection_text = absl::StrFormat(
        "selection: %s, %s, %s, %s (%s)%s", Name(slice.name_id), SliceKindName(slice.kind), LaneTitle(*track),
        FormatDuration(double(slice.dur_ns)), ClockLabel(track->clock),
        slice.step >= 0 ? absl::StrCat(", step ", slice.step) : std::string());
  }
}

// Where a section's header is drawn: in its place, or, once that has
// scrolled above the visible top while the section's lanes still show, pinned
// there over them (its ruler stays in sight when a lane deep in a pod is
// opened), pushed up by the section's end.
float TimelineView::SectionHeaderY(const Row& header, const Frame& f) const {
  const float natural = f.top + header.y;
  if (natural >= f.clip_top || header.collapsed) return natural;
  float bottom = natural + header.h;
  for (const Row& row : layout_.rows)
    if (row.section == header.section) bottom = std::max(bottom, f.top + row.y + row.h);
  return std::max(natural, std::min(f.clip_top, bottom - header.h));
}

void TimelineView::DrawSectionHeader(const Row& row, const Frame& f, UiState& ui, bool pinned) {
  const Section& s = sections_[row.section];
  const float y = pinned ? SectionHeaderY(row, f) : f.top + row.y;
  ImDrawList* dl = f.dl;
  // Pinned, it is drawn over the lanes' images: in the overlay channel.
  if (pinned) {
    dl->ChannelsSetCurrent(kOverlayChannel);
    dl->PushClipRect(ImVec2(f.left, f.clip_top), ImVec2(f.right, f.clip_bottom), false);
  }
  dl->AddRectFilled(ImVec2(f.left, y), ImVec2(f.right, y + row.h), kSectionHeader.Packed());
  DrawDisclosure(dl, f.left + 5, y + 4, 10, row.collapsed, kClockLabel);
  dl->AddText(ImVec2(f.left + 20, y + 1), kClockLabel.Packed(), ClockLabel(s.clock));
  const int c = static_cast<int>(s.clock);
  std::string note;
  if (overview_) {
    note = overview_->alignment.note[c];
    if (s.clock == Clock::kHost) note = "the process's wall time since the run started";
    if (s.clock == Clock::kModeled) absl::StrAppend(&note, note.empty() ? "" : "; ", "cost model on profile ", model_.run.profile);
  }
  if (row.collapsed) {
    size_t lanes = 0;
    for (const LaneGroup& g : s.groups) lanes += g.lanes.size();
    absl::StrAppend(&note, note.empty() ? "" : "  \xC2\xB7  ", lanes, " lanes hidden; click to show");
  }
  SmallText(dl, f.area_left, y + 2, kDimText, note);
  if (ui.layout) {
    auto& item = ui.layout->Add("axis", ClockLabel(s.clock), json{{"table", "tracks"}, {"clock", ClockName(s.clock)}},
                                f.left, y, f.right - f.left, row.h);
    item["clock"] = ClockName(s.clock);
    item["offset_ns"] = overview_ ? overview_->alignment.offset_ns[c] : 0;
    item["note"] = note;
    item["collapsed"] = row.collapsed;
    item["pinned"] = pinned;
  }
  dl->AddLine(ImVec2(f.left, y + row.h - 1), ImVec2(f.right, y + row.h - 1), Rgb{70, 74, 82}.Packed());
  if (pinned) dl->PopClipRect();
  if (row.collapsed) {
    if (pinned) dl->ChannelsSetCurrent(0);
    return;
  }
  // Ruler in this clock's own time; no ticks before its zero.
  const float ruler_y = y + 29;
  const double step = NiceStep(f.ns_per_px * 90);
  const double t_left = f.RawAt(s.clock, f.area_left), t_right = f.RawAt(s.clock, f.right);
  {
  DataLayer layer(dl, f.DataMin(), f.DataMax());
  for (double t = std::max(0.0, std::floor(t_left / step) * step); t <= t_right; t += step) {
    const float x = f.ToX(s.clock, t);
    dl->AddLine(ImVec2(x, y + row.h - 5), ImVec2(x, y + row.h), kDimText.Packed());
    const std::string label = FormatTick(t, step);
    SmallText(dl, x + 3, ruler_y, kDimText, label);
    if (ui.layout) {
      auto& item = ui.layout->Add("text", label, json{{"table", "tracks"}, {"clock", ClockName(s.clock)}}, x, ruler_y,
                                  ImGui::CalcTextSize(label.c_str()).x, kSmallFont);
      item["role"] = "tick";
      item["clock"] = ClockName(s.clock);
      item["t_ns"] = t;
    }
  }
  }
}

void TimelineView::DrawGroupHeader(const Row& row, const Frame& f, UiState& ui) {
  const LaneGroup& g = sections_[row.section].groups[row.group];
  const float y = f.top + row.y;
  f.dl->AddRectFilled(ImVec2(f.left, y), ImVec2(f.right, y + row.h), kGroupHeader.Packed());
  std::string label = g.label;
  if (row.collapsed) absl::StrAppend(&label, " (", g.lanes.size(), " lanes hidden)");
  DrawDisclosure(f.dl, f.left + 5, y + 3, 9, row.collapsed, kText);
  SmallText(f.dl, f.left + 18, y + 1, kText, label);
  if (ui.layout) {
    json ref = json{{"table", "hosts"}, {"clock", ClockName(sections_[row.section].clock)}};
    if (!g.lanes.empty() && g.lanes.front().type == RowType::kLane) {
      ref["host_id"] = model_.tracks[g.lanes.front().index].host_id;
    } else {
      ref = json{{"table", "counters"}, {"group", g.key}};
    }
    auto& item = ui.layout->Add("group", g.label, std::move(ref), f.left, y, f.right - f.left, row.h);
    item["collapsed"] = row.collapsed;
    item["lanes"] = g.lanes.size();
  }
}

void TimelineView::DrawLane(const Row& row, const Frame& f, Hover& hover, UiState& ui,
                            std::vector<WindowKey>& wanted) {
  const Track& t = model_.tracks[row.lane.index];
  ImDrawList* dl = f.dl;
  const float y0 = f.top + row.y, y1 = y0 + row.h;
  const bool odd = (&row - layout_.rows.data()) % 2;
  // Stripes in the label column; across the slices (in the lane's image)
  // only where lanes are tall enough for them to help.
  dl->AddRectFilled(ImVec2(f.left, y0), ImVec2(f.area_left, y1), (odd ? kLaneOdd : kLaneEven).Packed());

  LaneRect rect{t.track_id, t.device_id, t.host_id, t.clock, f.area_left, y0, f.right - f.area_left, row.h, 0, 0, false};
  // Label: every lane when there is room, else every k-th (the others are
  // named by their neighbours and the group header).
  const float label_size = std::clamp(row.h - 1, 10.0f, 14.0f);
  const int every = std::max(1, static_cast<int>(std::ceil(11.0f / row.h)));
  if ((row.lane.index % every) == 0) {
    ImVec4 clip(f.left, y0 - 6, f.area_left - 4, y1 + 6);
    SmallText(dl, f.left + 14, y0 + (row.h - label_size) / 2 - 1, kText, row.label, label_size, &clip);
  }

  const int c = static_cast<int>(t.clock);
  const auto& ext = overview_ ? overview_->extent[c] : std::nullopt;
  auto [r0, r1] = f.Window(t.clock);
  int desired = LevelForZoom(f.ns_per_px, kColumnPx);
  std::shared_ptr<const WindowData> data;
  int64_t v0 = r0, v1 = r1;
  // A view wholly outside its clock's extent (a step only the host clock
  // reached, as the one a hang stopped) has nothing of this lane to load: a
  // request there could never cover the view, and the timeline never finished.
  if (ext && r1 > ext->first && r0 < ext->second) {
    v0 = std::max(r0, ext->first);
    v1 = std::min(r1, ext->second);
    if (v1 <= v0) v1 = v0 + 1;
    auto [w0, w1] = LoadWindow(r0, r1, ext->first, ext->second);
    WindowKey key{t.track_id, desired, w0, w1};
    if (desired < 0) {
      // Too many slices for one window: draw the finest summaries instead.
      if (auto got = loader_.Get(key); got && got->truncated) key.level = desired = 0;
    }
    data = loader_.Best(t.track_id, desired, v0, v1);
    if (!data || data->key.level > desired) {
      wanted.push_back(key);
      rect.fallback = true;
    }
  }
  rect.level = data ? data->key.level : desired;

  const int rows_shown = row.rows_shown;
  const float row_h = (row.h - 2) / rows_shown;
  const bool labels = row_h >= 12;
  const bool stripe = row.h >= 16;
  // The lane's rows in the atlas (which covers the visible part of the timeline).
  const int slot_y0 = static_cast<int>(std::lround(y0 - f.clip_top));
  const int slot_y1 = static_cast<int>(std::lround(y1 - f.clip_top));
  LaneCache& lc = lane_cache_[t.track_id];
  lc.frame = frame_;
  if (lc.data != data.get() || lc.atlas_gen != atlas_.gen || lc.slot_y0 != slot_y0 || lc.slot_y1 != slot_y1 ||
      lc.rows_shown != rows_shown || lc.stripe != stripe || lc.odd != odd) {
    // Redraw this lane's image: what its data holds over the atlas's span.
    lc = LaneCache{};
    lc.frame = frame_;
    lc.data = data.get();
    lc.hold = data;
    lc.atlas_gen = atlas_.gen;
    lc.slot_y0 = slot_y0;
    lc.slot_y1 = slot_y1;
    lc.rows_shown = rows_shown;
    lc.stripe = stripe;
    lc.odd = odd;
    LaneImage& img = atlas_.image;
    const int top = std::max(0, slot_y0), bottom = std::min(img.h, slot_y1);
    img.Fill(0, img.w, top, bottom, (stripe ? (odd ? kLaneOdd : kLaneEven) : kBackground).Packed());
    if (top < bottom) {
      atlas_.dirty_lo = std::min(atlas_.dirty_lo, top);
      atlas_.dirty_hi = std::max(atlas_.dirty_hi, bottom);
    }
    if (data && ext) {
      const double a0 = atlas_.t0 - f.offset[c];
      lc.t0 = std::max<int64_t>(static_cast<int64_t>(std::floor(a0)), ext->first);
      lc.t1 = std::min<int64_t>(static_cast<int64_t>(std::ceil(a0 + img.w * atlas_.ns_per_px)) + 1, ext->second);
      if (lc.t1 <= lc.t0) lc.t1 = lc.t0 + 1;
      std::vector<LaneShape> shapes;
      LaneShapes(t, *data, lc.t0, lc.t1, f, row.h, rows_shown, shapes);
      lc.marks.assign(rows_shown, {});
      for (const LaneShape& s : shapes) {
        PaintShape(img, s, slot_y0);
        lc.marks[s.depth].emplace_back(s.x0, s.x1);
        if (!labels) continue;
        if (s.column) {
          if (s.x1 - s.x0 > 60 && s.col.longest_name_id != 0 && s.shape.filled_px >= s.y1 - s.y0 - 1) {
            // Named by its longest slice, and how many more it holds: a
            // column of 54 read as one all_reduce.550.
            lc.labels.push_back(LaneCache::Label{s.x0, s.x1, s.y0, s.y1, s.col.longest_name_id, 0, Rgb{15, 15, 20},
                                                 60, std::max<int64_t>(0, s.col.count - 1)});
          }
        } else if (s.x1 - s.x0 > 30) {
          const Rgb color = s.block.folded() ? kText : s.block.kind == SliceKind::kHostWait ? kDimText : Rgb{15, 15, 20};
          lc.labels.push_back(LaneCache::Label{s.x0, s.x1, s.y0, s.y1, s.first.name_id,
                                               s.block.folded() ? static_cast<int64_t>(s.block.count) : 0, color, 30});
        }
      }
    }
    // The section's step markers cross the lane.
    if (overview_) {
      const auto& steps = overview_->steps[c];
      if (!steps.empty()) {
        const int every = StepEvery(steps, atlas_.ns_per_px);
        const double a0 = atlas_.t0 - f.offset[c], a1 = a0 + img.w * atlas_.ns_per_px;
        for (const StepSpan& s : steps) {
          if (s.start_ns < a0 || s.start_ns > a1 || s.step % every != 0) continue;
          BlendColumn(img, StepColumn(t.clock, s.start_ns), top, bottom, kStepMarker, 150);
        }
      }
    }
    ++lanes_rasterized_;
  }

  // The image: one quad, its pixels drawn above.
  const float ax0 = f.area_left - f.atlas_x, ax1 = f.right - f.atlas_x;  // the screen in atlas pixels
  if (host_ && atlas_.tex) {
    const int top = std::max(0, slot_y0), bottom = std::min(atlas_.image.h, slot_y1);
    if (top < bottom) {
      DataLayer layer(dl, f.DataMin(), f.DataMax(), kImageChannel);
      // Only the part on screen: a quad three screens wide, clipped, costs
      // the renderer more to set up.
      const float w = static_cast<float>(atlas_.image.w), h = static_cast<float>(atlas_.image.h);
      const float sx0 = std::max(f.atlas_x, std::floor(f.area_left)), sx1 = std::min(f.atlas_x + w, std::ceil(f.right));
      dl->AddImage(atlas_.tex, ImVec2(sx0, f.clip_top + top), ImVec2(sx1, f.clip_top + bottom),
                   ImVec2((sx0 - f.atlas_x) / w, top / h), ImVec2((sx1 - f.atlas_x) / w, bottom / h));
      ++quads_drawn_;
    }
  }
  for (const auto& marks : lc.marks) {
    // Shapes in a row are in start order; those overlapping the screen are drawn.
    auto first = std::partition_point(marks.begin(), marks.end(), [&](const auto& m) { return m.second <= ax0; });
    auto last = std::partition_point(first, marks.end(), [&](const auto& m) { return m.first < ax1; });
    rect.blocks_drawn += static_cast<size_t>(last - first);
  }
  {
    DataLayer layer(dl, f.DataMin(), f.DataMax());
    // Slices of one depth may overlap (a chip's links busy at once in one
    // collective): a label starts after the text of the one before it on
    // its row, rather than over it.
    std::map<float, float> text_end;  // row top -> x where its last label's text ends
    const float small = kSmallFont / ImGui::GetFontSize();
    for (const LaneCache::Label& l : lc.labels) {
      const float x0 = f.atlas_x + l.x0, x1 = f.atlas_x + l.x1;
      if (x1 <= f.area_left || x0 >= f.right) continue;
      const float visible_w = std::min(x1, f.right) - std::max(x0, f.area_left);
      if (l.min_width == 30 && visible_w <= 30) continue;  // a slice: named when 30 px of it show
      const float ry0 = y0 + l.y0, ry1 = y0 + l.y1;
      float tx = std::max(x0, f.area_left) + 4;
      if (auto it = text_end.find(ry0); it != text_end.end() && tx < it->second) tx = it->second + 6;
      const float right = std::min(x1, f.right) - 2;
      if (tx + 12 > right) continue;  // no room left for a name
      std::string text = l.count > 0    ? absl::StrCat(l.count, " slices")
                         : l.others > 0 ? absl::StrCat(Name(l.name_id), " +", l.others)
                                        : Name(l.name_id);
      ImVec4 clip(tx - 2, ry0, right, ry1);
      SmallText(dl, tx, ry0 + (ry1 - ry0 - kSmallFont) / 2, l.color, text, kSmallFont, &clip);
      text_end[ry0] = std::min(right, tx + ImGui::CalcTextSize(text.c_str()).x * small);
    }
  }

  // Hover and --dump-layout need each shape with what it holds: made again
  // for this lane only (hover) or for a recorded frame, the same way.
  const bool mouse_here = InRect(f.mouse, f.area_left, y0, f.right, y1 + 1);
  if (data && ext && (mouse_here || ui.layout)) {
    std::vector<LaneShape> shapes;
    LaneShapes(t, *data, lc.t0, lc.t1, f, row.h, rows_shown, shapes);
    const int64_t level_width = data->key.level >= 0 ? store::kLevel0WidthNs << (2 * data->key.level) : 1;
    for (const LaneShape& s : shapes) {
      const float x0 = f.atlas_x + s.x0, x1 = f.atlas_x + s.x1;
      const float ry0 = y0 + s.y0, ry1 = y0 + s.y1;
      if (x1 <= f.area_left - 1 || x0 >= f.right + 1) continue;
      if (!s.column && InRect(f.mouse, std::max(x0 - 1, f.area_left), ry0, x1 + 1, ry1 + 1)) {
        hover.what = s.block.folded() ? Hover::kFold : Hover::kSlice;
        hover.track = &t;
        hover.slice = s.first;
        hover.block = s.block;
      } else if (s.column && InRect(f.mouse, std::max(x0, f.area_left), ry0, x1, ry1 + 1)) {
        hover.what = Hover::kColumn;
        hover.track = &t;
        hover.column = s.col;
        hover.level = data->key.level;
      }
      if (!ui.layout) continue;
      // Clamped to just outside the slice area, as the shapes are drawn.
      const float cx0 = std::max(x0, f.area_left - 1), cx1 = std::min(x1, f.right + 1);
      if (!s.column) {
        const DrawBlock& b = s.block;
        json ref = b.folded() ? json{{"table", "slices"}, {"track_id", t.track_id}, {"first_slice_id", s.first.slice_id},
                                     {"last_slice_id", s.last_slice_id}, {"count", b.count}}
                              : json{{"table", "slices"}, {"slice_id", s.first.slice_id}};
        auto& item = ui.layout->Add("rect", b.folded() ? absl::StrCat(b.count, " slices") : Name(s.first.name_id),
                                    std::move(ref), cx0, ry0, cx1 - cx0, ry1 - ry0);
        item["track_id"] = t.track_id;
        item["clock"] = ClockName(t.clock);
        item["depth"] = s.depth;
        item["level"] = -1;
        item["kind"] = SliceKindName(b.kind);
        item["kinds"] = KindsJson(b.kind_ns);
        item["busy_fraction"] = b.busy_fraction();
        item["first_step"] = b.step;
        item["last_step"] = b.step;
        item["start_ns"] = b.start_ns;
        item["end_ns"] = b.end_ns;
      } else {
        const Column& m = s.col;
        json ref = {{"table", "slice_summaries"}, {"track_id", t.track_id}, {"level", data->key.level},
                    {"depth", s.depth}, {"bucket", m.start_ns / level_width},
                    {"bucket_end", (m.end_ns - 1) / level_width}};
        auto& item = ui.layout->Add("rect", absl::StrCat(m.count, " slices"), std::move(ref), cx0, ry0, cx1 - cx0,
                                    ry1 - ry0);
        item["track_id"] = t.track_id;
        item["clock"] = ClockName(t.clock);
        item["depth"] = s.depth;
        item["level"] = data->key.level;
        item["kind"] = SliceKindName(m.dominant);
        item["kinds"] = KindsJson(m.kind_ns);
        item["busy_fraction"] = m.busy_fraction();
        item["count"] = m.count;
        item["first_step"] = m.first_step;
        item["last_step"] = m.last_step;
        item["start_ns"] = m.start_ns;
        item["end_ns"] = m.end_ns;
      }
    }
  }
  if (ui.layout) {
    json ref = {{"table", "tracks"}, {"track_id", t.track_id}};
    auto& item = ui.layout->Add("lane", LaneTitle(t), std::move(ref), f.area_left, y0, f.right - f.area_left, row.h);
    item["clock"] = ClockName(t.clock);
    item["host_id"] = t.host_id;
    if (t.device_id) item["device_id"] = *t.device_id;
    if (auto stop = t.device_id ? model_.run.stopped.find(*t.device_id) : model_.run.stopped.end();
        stop != model_.run.stopped.end())
      item["stopped_at_step"] = stop->second;  // its label says "chip N · stopped at step S"
    item["level"] = rect.level;
    item["fallback"] = rect.fallback;
    item["shapes"] = rect.blocks_drawn;
    item["rows_shown"] = rows_shown;
    // The shapes are pixels of the lane's image, drawn as one textured quad.
    item["drawn_as"] = "image";
  }
  shapes_drawn_ += rect.blocks_drawn;
  lanes_.push_back(rect);
}

void TimelineView::LaneShapes(const Track& t, const WindowData& data, int64_t v0, int64_t v1, const Frame& f,
                              float lane_h, int rows_shown, std::vector<LaneShape>& out) const {
  const float row_h = (lane_h - 2) / rows_shown;
  const bool stacked = row_h >= 12;
  const double ns = f.ns_per_px;
  const double off = f.offset[static_cast<int>(t.clock)];
  // Atlas pixels, clamped just outside the image: far ends would lose all
  // precision as floats.
  const double limit = atlas_.image.w + 2.0;
  auto ax = [&](double raw) { return static_cast<float>(std::clamp((raw + off - atlas_.t0) / ns, -2.0, limit)); };
  for (int d = 0; d < rows_shown; ++d) {
    const float ry0 = 1 + d * row_h;
    const float ry1 = ry0 + row_h - (row_h >= 8 ? 1 : 0);
    if (data.key.level < 0) {
      if (static_cast<size_t>(d) >= data.rows.size()) break;
      const SliceRow& srow = data.rows[d];
      for (const DrawBlock& b : FoldRow(srow, v0, v1, kFoldPx * ns)) {
        LaneShape s;
        s.x0 = ax(double(b.start_ns));
        s.x1 = ax(double(b.end_ns));
        if (s.x1 - s.x0 < 1) s.x1 = s.x0 + 1;
        s.y0 = ry0;
        s.y1 = ry1;
        s.depth = d;
        s.block = b;
        s.first = srow.slices[b.first];
        s.last_slice_id = srow.slices[b.first + b.count - 1].slice_id;
        if (b.folded()) s.shape = ShapeOf(b.kind_ns, b.busy_fraction(), ry1 - ry0, stacked);
        out.push_back(s);
      }
    } else {
      if (static_cast<size_t>(d) >= data.depths.size()) break;
      const std::vector<Column> columns = SummaryColumns(data.depths[d], v0, v1, kColumnPx * ns);
      // Neighbouring columns that look the same are one rectangle.
      for (size_t i = 0; i < columns.size();) {
        const Column& head = columns[i];
        const Shape shape = ShapeOf(head.kind_ns, head.busy_fraction(), ry1 - ry0, stacked);
        Column merged = head;
        size_t j = i + 1;
        while (j < columns.size() && columns[j].start_ns == merged.end_ns &&
               ShapeOf(columns[j].kind_ns, columns[j].busy_fraction(), ry1 - ry0, stacked) == shape) {
          const Column& n = columns[j];
          merged.end_ns = n.end_ns;
          merged.count += n.count;
          for (int k = 0; k < kNumSliceKinds; ++k) merged.kind_ns[k] += n.kind_ns[k];
          merged.busy_ns += n.busy_ns;
          merged.num_buckets += n.num_buckets;
          if (n.first_step >= 0 && (merged.first_step < 0 || n.first_step < merged.first_step)) merged.first_step = n.first_step;
          merged.last_step = std::max(merged.last_step, n.last_step);
          if (n.longest_dur_ns > merged.longest_dur_ns) {
            merged.longest_dur_ns = n.longest_dur_ns;
            merged.longest_slice_id = n.longest_slice_id;
            merged.longest_name_id = n.longest_name_id;
          }
          ++j;
        }
        merged.dominant = DominantKind(merged.kind_ns);
        LaneShape s;
        s.column = true;
        s.x0 = ax(double(merged.start_ns));
        s.x1 = ax(double(merged.end_ns));
        if (s.x1 - s.x0 < 1) s.x1 = s.x0 + 1;
        s.y0 = ry0;
        s.y1 = ry1;
        s.depth = d;
        s.col = merged;
        s.shape = shape;
        out.push_back(s);
        i = j;
      }
    }
  }
}

void TimelineView::DrawCompiles(const Row& row, const Frame& f, Hover& hover, UiState& ui) {
  ImDrawList* dl = f.dl;
  const float y = f.top + row.y, h = row.h;
  dl->AddRectFilled(ImVec2(f.left, y), ImVec2(f.right, y + h), Rgb{44, 36, 38}.Packed());
  SmallText(dl, f.left + 14, y + std::max(0.0f, (h - kSmallFont) / 2), kText, "compilations");
  const float my0 = y + 2, my1 = y + h - 2;
  std::optional<DataLayer> layer(std::in_place, dl, f.DataMin(), f.DataMax());
  const auto& compiles = model_.compilations;
  for (size_t i = 0; i < compiles.size(); ++i) {
    const Compilation& c = compiles[i];
    float x0 = f.ToX(Clock::kHost, double(c.host_start_ns));
    float x1 = f.ToX(Clock::kHost, double(c.host_start_ns + c.duration_ns));
    if (x1 < f.area_left - 400 || x0 > f.right) continue;
    // A marker stays at least a few pixels wide: compilations are rare and
    // each one matters, so none may vanish at any zoom.
    if (x1 - x0 < 4) x1 = x0 + 4;
    const Rgb color = CompileColor(c.is_miss());
    dl->AddRectFilled(ImVec2(x0, my0), ImVec2(x1, my1), color.Packed());
    std::string text = c.is_miss() ? absl::StrCat("compile #", c.compile_id, ": ", c.cause_kind.empty() ? "miss" : c.cause_kind)
                                   : absl::StrCat("#", c.compile_id, " ", c.cache);
    if (!c.SourceLocation().empty() && c.is_miss()) absl::StrAppend(&text, " at ", c.SourceLocation());
    // The label may run on to the right until the next marker.
    float next_x = f.right;
    if (i + 1 < compiles.size()) next_x = std::min(next_x, f.ToX(Clock::kHost, double(compiles[i + 1].host_start_ns)) - 4);
    ImVec4 clip(x0 + 2, y, std::max(x1, next_x), y + h);
    const bool inside = x1 - x0 > ImGui::CalcTextSize(text.c_str()).x + 8;
    if (h >= 12) {
      const float size = std::min(kSmallFont, h - 2);  // a squeezed row's label, smaller but whole
      SmallText(dl, inside ? x0 + 4 : x1 + 4, y + std::max(0.0f, (h - size) / 2),
                inside ? Rgb{15, 15, 20} : color.Scaled(1.2f), text, size, &clip);
    }
    if (InRect(f.mouse, x0 - 2, my0, x1 + 2, my1)) {
      hover.what = Hover::kCompile;
      hover.compile = &c;
    }
    if (ui.layout) {
      auto& item = ui.layout->Add("marker", text, json{{"table", "compilations"}, {"compile_id", c.compile_id}}, x0, my0,
                                  x1 - x0, my1 - my0);
      item["clock"] = "host";
      item["cache"] = c.cache;
    }
  }
  layer.reset();
}

void TimelineView::DrawCounter(const Row& row, const Frame& f, Hover& hover, UiState& ui,
                               std::vector<WindowKey>& wanted) {
  const CounterTrack& ct = overview_->counters[row.lane.index];
  ImDrawList* dl = f.dl;
  const float y0 = f.top + row.y, y1 = y0 + row.h;
  dl->AddRectFilled(ImVec2(f.left, y0), ImVec2(f.right, y1), kLaneEven.Packed());
  {
    ImVec4 clip(f.left, y0, f.area_left - 4, y1);
    const float size = std::clamp(row.h - 1, 10.0f, kSmallFont);
    SmallText(dl, f.left + 14, y0 + std::max(0.0f, (row.h - size) / 2), kCounterLine, row.label, size, &clip);
  }
  // The counter's data: the window at the zoom's level when loaded, else whole-run.
  auto [r0, r1] = f.Window(Clock::kHost);
  const int level = std::max(0, LevelForZoom(f.ns_per_px, kColumnPx));
  const auto& ext = overview_->extent[static_cast<int>(Clock::kHost)];
  const std::vector<store::CounterBucket>* buckets = &ct.whole_run;
  if (ext && level < ct.whole_run_level) {
    auto [w0, w1] = LoadWindow(r0, r1, ext->first, ext->second);
    WindowKey key{0, level, w0, w1, row.lane.index};
    if (auto got = loader_.Get(key)) buckets = &got->counter_buckets;
    else wanted.push_back(key);
  }
  const std::vector<CounterColumn> columns = CounterColumns(*buckets, r0, r1, kColumnPx * f.ns_per_px);
  const double lo = std::min(0.0, ct.min), hi = ct.max > lo ? ct.max : lo + 1;
  auto y_of = [&](double v) { return y1 - 2 - static_cast<float>((v - lo) / (hi - lo)) * (row.h - 4); };
  std::optional<DataLayer> layer(std::in_place, dl, f.DataMin(), f.DataMax());
  std::vector<ImVec2> line;
  line.reserve(columns.size() * 2);
  for (const CounterColumn& col : columns) {
    const float x0 = f.ToX(Clock::kHost, double(col.start_ns)), x1 = f.ToX(Clock::kHost, double(col.end_ns));
    // The band where a column holds several samples; the line steps at each
    // last sample's own time (buckets are coarser than sparse samples).
    if (col.count > 1) {
      dl->AddRectFilled(ImVec2(x0, y_of(col.max)), ImVec2(std::max(x1, x0 + 1), y_of(col.min) + 1), kCounterBand.Packed());
    }
    const float xl = f.ToX(Clock::kHost, double(col.last_ts_ns));
    if (!line.empty()) line.emplace_back(xl, line.back().y);
    line.emplace_back(xl, y_of(col.last));
    if (InRect(f.mouse, x0, y0, x1, y1)) {
      hover.what = Hover::kCounter;
      hover.counter = &ct;
      hover.counter_column = col;
    }
  }
  if (!line.empty() && ext) line.emplace_back(f.ToX(Clock::kHost, double(ext->second)), line.back().y);
  if (line.size() >= 2) dl->AddPolyline(line.data(), static_cast<int>(line.size()), kCounterLine.Packed(), 0, 1.0f);
  // The scale: the lane runs from 0 (or the minimum, if negative) to the run's maximum.
  if (row.h >= 12) SmallText(dl, f.area_left + 4, y0 + 1, kDimText, absl::StrCat("max ", FormatCounter(ct.name, ct.max)), 11);
  layer.reset();
  if (ui.layout) {
    json ref = {{"table", "counters"}, {"name", ct.name}};
    ref["device_id"] = ct.device_id ? json(*ct.device_id) : json(nullptr);
    auto& item = ui.layout->Add("counter", row.label, std::move(ref), f.area_left, y0, f.right - f.area_left, row.h);
    item["clock"] = "host";
    item["min"] = ct.min;
    item["max"] = ct.max;
    item["columns"] = columns.size();
  }
  shapes_drawn_ += columns.size();
}

void TimelineView::DrawStepMarkers(const Frame& f, UiState& ui) {
  if (!overview_) return;
  // Each section's lanes, top to bottom.
  for (size_t si = 0; si < sections_.size(); ++si) {
    const Clock clock = sections_[si].clock;
    float top = std::numeric_limits<float>::max(), bottom = 0;
    const Row* header = nullptr;
    for (const Row& row : layout_.rows) {
      if (row.section != static_cast<int>(si)) continue;
      if (row.type == RowType::kSection) {
        header = &row;
        continue;
      }
      top = std::min(top, f.top + row.y);
      bottom = std::max(bottom, f.top + row.y + row.h);
    }
    if (!header || header->collapsed || top >= bottom) continue;
    const auto& steps = overview_->steps[static_cast<int>(clock)];
    if (steps.empty()) continue;
    const int every = StepEvery(steps, f.ns_per_px);
    const double mean_px = steps.size() > 1
                               ? (double(steps.back().start_ns - steps.front().start_ns) / (steps.size() - 1)) / f.ns_per_px
                               : 1e9;
    const bool label_steps = mean_px * every >= 44;
    auto [r0, r1] = f.Window(clock);
    const float label_y = SectionHeaderY(*header, f) + 15;
    // Lanes have the markers in their images (PaintLane); the section's other
    // rows that show time (counters, compilations) get them drawn here, as
    // one pixel wide rects, not anti-aliased lines (twice the pixels).
    std::vector<std::pair<float, float>> spans;
    for (const Row& row : layout_.rows) {
      if (row.section != static_cast<int>(si) || (row.type != RowType::kCounter && row.type != RowType::kCompiles)) continue;
      const float y0 = f.top + row.y, y1 = y0 + row.h;
      if (!spans.empty() && spans.back().second == y0) spans.back().second = y1;
      else spans.emplace_back(y0, y1);
    }
    DataLayer layer(f.dl, f.DataMin(), f.DataMax());
    // Steps of uneven length (a long warm-up, then short ones) put labels on
    // top of each other: a label is left out where the one before still is.
    float labels_end = -FLT_MAX;
    const float small = kSmallFont / ImGui::GetFontSize();
    for (const StepSpan& s : steps) {
      if (s.start_ns < r0 || s.start_ns > r1 || s.step % every != 0) continue;
      const float x = f.atlas_x + static_cast<float>(StepColumn(clock, s.start_ns)) + 0.5f;
      for (auto [y0, y1] : spans) f.dl->AddRectFilled(ImVec2(x - 0.5f, y0), ImVec2(x + 0.5f, y1), kStepMarker.Packed(150));
      const std::string label = absl::StrCat("step ", s.step);
      const bool labelled = label_steps && x + 2 >= labels_end;
      if (labelled) {
        SmallText(f.dl, x + 2, label_y, kStepMarker, label);
        labels_end = x + 2 + ImGui::CalcTextSize(label.c_str()).x * small + 6;
      }
      if (ui.layout) {
        auto& item = ui.layout->Add("marker", absl::StrCat("step ", s.step),
                                    json{{"table", "slices"}, {"step", s.step}, {"clock", ClockName(clock)}}, x, top, 0,
                                    bottom - top);
        item["role"] = "step";
        item["clock"] = ClockName(clock);
        item["start_ns"] = s.start_ns;
        item["end_ns"] = s.end_ns;
        item["labelled"] = labelled;
      }
    }
  }
}

void TimelineView::DrawFlow(const Frame& f, UiState& ui) {
  if (!selection_) return;
  // Where each track's lane is this frame.
  auto lane_of = [&](int64_t track_id) -> const Row* {
    for (const Row& row : layout_.rows) {
      if (row.type == RowType::kLane && model_.tracks[row.lane.index].track_id == track_id) return &row;
    }
    return nullptr;
  };
  auto slice_rect = [&](int64_t track_id, const Slice& s, ImVec2& a, ImVec2& b) {
    const Row* row = lane_of(track_id);
    const Track* track = model_.FindTrack(track_id);
    if (!row || !track) return false;
    const int rows_shown = row->rows_shown;
    const float row_h = (row->h - 2) / rows_shown;
    const int d = std::min<int>(s.depth, rows_shown - 1);
    a = ImVec2(f.ToX(track->clock, double(s.start_ns)), f.top + row->y + 1 + d * row_h);
    b = ImVec2(std::max(a.x + 2, f.ToX(track->clock, double(s.end_ns()))), a.y + row_h - 1);
    return true;
  };
  ImDrawList* dl = f.dl;
  DataLayer layer(dl, f.DataMin(), f.DataMax());
  ImVec2 a, b;
  if (slice_rect(selection_->track_id, selection_->slice, a, b)) {
    dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), kSelection.Packed(), 0, 0, 2.0f);
  }
  const FlowMembers flow = loader_.flow();
  if (selection_->slice.flow_id >= 0 && flow.flow_id == selection_->slice.flow_id && flow.done) {
    // The last member to arrive held everyone else up (arrival_ns; without
    // it recorded, nobody is marked).
    const std::pair<int64_t, Slice>* last = nullptr;
    int64_t first_arrival = std::numeric_limits<int64_t>::max();
    for (const auto& m : flow.members) {
      if (m.second.arrival_ns < 0) continue;
      first_arrival = std::min(first_arrival, m.second.arrival_ns);
      if (!last || m.second.arrival_ns > last->second.arrival_ns) last = &m;
    }
    // Chips that all arrived together held nobody up.
    if (last && last->second.arrival_ns == first_arrival) last = nullptr;
    const std::string name = Name(selection_->slice.name_id);
    ImVec2 prev;
    const Slice* prev_slice = nullptr;
    for (const auto& [track_id, s] : flow.members) {
      ImVec2 p0, p1;
      if (!slice_rect(track_id, s, p0, p1)) continue;
      const Track* track = model_.FindTrack(track_id);
      const ImVec2 anchor(p0.x, (p0.y + p1.y) / 2);
      // Where this chip arrived: it waited from there to the start.
      if (s.arrival_ns >= 0 && track) {
        const float ax = f.ToX(track->clock, double(s.arrival_ns));
        dl->AddLine(ImVec2(ax, anchor.y), anchor, kFlow.Packed(200), 1.0f);
        dl->AddCircleFilled(ImVec2(ax, anchor.y), 2.5f, kFlow.Packed());
      }
      if (prev_slice) {
        dl->AddLine(prev, anchor, kFlow.Packed(220), 1.5f);
        if (ui.layout) {
          auto& item = ui.layout->Add("flow", name, json{{"table", "slices"}, {"flow_id", s.flow_id}}, std::min(prev.x, anchor.x),
                                      std::min(prev.y, anchor.y), std::fabs(anchor.x - prev.x), std::fabs(anchor.y - prev.y));
          item["from"] = json{{"table", "slices"}, {"slice_id", prev_slice->slice_id}};
          item["to"] = json{{"table", "slices"}, {"slice_id", s.slice_id}};
          item["x0"] = prev.x;
          item["y0"] = prev.y;
          item["x1"] = anchor.x;
          item["y1"] = anchor.y;
        }
      }
      if (last && last->first == track_id && last->second.slice_id == s.slice_id) {
        const float ax = track ? f.ToX(track->clock, double(s.arrival_ns)) : anchor.x;
        dl->AddTriangleFilled(ImVec2(ax - 5, p0.y - 1), ImVec2(ax + 5, p0.y - 1), ImVec2(ax, p0.y + 6), kLastArrival.Packed());
        dl->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1), kLastArrival.Packed(), 0, 0, 2.0f);
        if (ui.layout) {
          auto& item = ui.layout->Add("marker", "last to arrive", json{{"table", "slices"}, {"slice_id", s.slice_id}},
                                      ax - 5, p0.y - 1, 10, 7);
          item["role"] = "last_arrival";
          item["track_id"] = track_id;
          item["arrival_ns"] = s.arrival_ns;
        }
      }
      prev = anchor;
      prev_slice = &s;
    }
  }
}

void TimelineView::DrawTooltip(const Hover& hover, const Frame& f) {
  if (hover.what == Hover::kNone || hover.what == Hover::kHeader) return;
  ImGui::BeginTooltip();
  if (hover.what == Hover::kCompile) {
    const Compilation& c = *hover.compile;
    ImGui::Text("compile #%lld, step %lld: %s", static_cast<long long>(c.compile_id), static_cast<long long>(c.step),
                c.cache.c_str());
    if (!c.cause_kind.empty()) ImGui::Text("cause: %s", c.cause_kind.c_str());
    if (!c.cause_detail.empty()) ImGui::TextWrapped("%s", c.cause_detail.c_str());
    if (!c.SourceLocation().empty()) ImGui::Text("at %s", c.SourceLocation().c_str());
    ImGui::Text("duration %s (host clock)", FormatDuration(double(c.duration_ns)).c_str());
    ImGui::TextDisabled("click: open in Recompilations");
  } else if (hover.what == Hover::kCounter) {
    const CounterColumn& c = hover.counter_column;
    ImGui::Text("%s%s", hover.counter->name.c_str(),
                hover.counter->device_id ? absl::StrCat(", chip ", *hover.counter->device_id).c_str() : " (process)");
    ImGui::Text("at %s (host clock): last %s, min %s, max %s over %lld samples", FormatDuration(double(c.start_ns)).c_str(),
                FormatCounter(hover.counter->name, c.last).c_str(), FormatCounter(hover.counter->name, c.min).c_str(),
                FormatCounter(hover.counter->name, c.max).c_str(), static_cast<long long>(c.count));
  } else if (hover.what == Hover::kColumn) {
    const Column& c = hover.column;
    const Track& t = *hover.track;
    ImGui::Text("%lld slices start here (summary level %d)", static_cast<long long>(c.count), hover.level);
    ImGui::Text("%s, %s", LaneTitle(t).c_str(), ClockLabel(t.clock));
    ImGui::Text("from %s for %s; busy %.0f%%", FormatDuration(double(c.start_ns)).c_str(),
                FormatDuration(double(c.end_ns - c.start_ns)).c_str(), 100 * c.busy_fraction());
    if (std::string kinds = KindSummary(c.kind_ns); !kinds.empty()) ImGui::Text("%s", kinds.c_str());
    if (c.first_step >= 0) {
      ImGui::Text(c.first_step == c.last_step ? "step %d" : "steps %d-%d", c.first_step, c.last_step);
    }
    if (c.longest_name_id) ImGui::Text("longest: %s, %s", Name(c.longest_name_id).c_str(), FormatDuration(double(c.longest_dur_ns)).c_str());
    ImGui::TextDisabled("click or wheel: zoom in");
  } else if (hover.what == Hover::kFold) {
    const DrawBlock& b = hover.block;
    const Track& t = *hover.track;
    ImGui::Text("%zu slices folded here (each under %.0f px)", b.count, kFoldPx);
    ImGui::Text("%s, %s", LaneTitle(t).c_str(), ClockLabel(t.clock));
    ImGui::Text("from %s for %s; busy %.0f%%", FormatDuration(double(b.start_ns)).c_str(),
                FormatDuration(double(b.end_ns - b.start_ns)).c_str(), 100 * b.busy_fraction());
    if (std::string kinds = KindSummary(b.kind_ns); !kinds.empty()) ImGui::Text("%s", kinds.c_str());
    if (b.step >= 0) ImGui::Text("step %d", b.step);
    ImGui::TextDisabled("click or wheel: zoom in");
  } else if (hover.what == Hover::kSlice) {
    const Slice& s = hover.slice;
    const Track& t = *hover.track;
    ImGui::TextUnformatted(Name(s.name_id).c_str());
    ImGui::Separator();
    ImGui::Text("kind: %s", SliceKindName(s.kind));
    if (s.kind == SliceKind::kHostWait)
      ImGui::TextWrapped("the chip had finished its last program and sat idle until the host enqueued this "
                         "step's: the host (tracing, compiling, reading values) was slower than the chips");
    ImGui::Text("%s", t.device_id ? absl::StrCat("device: chip ", *t.device_id, " (host ", t.host_id, ")").c_str()
                                  : absl::StrCat("thread: ", LaneTitle(t)).c_str());
    ImGui::Text("start %s, duration %s (%s)", FormatDuration(double(s.start_ns)).c_str(),
                FormatDuration(double(s.dur_ns)).c_str(), ClockLabel(t.clock));
    if (s.step >= 0) ImGui::Text("step %d", s.step);
    if (s.bytes > 0) ImGui::Text("bytes: %s", FormatBytes(s.bytes).c_str());
    if (const std::string* moved = model_.MovedValue(s.graph_id, s.op_id)) ImGui::Text("moves: %s", moved->c_str());
    if (s.flow_id >= 0) ImGui::TextDisabled("click: select it and show its flow across the chips");
  }
  ImGui::EndTooltip();
}

void TimelineView::DrawDetails(UiState& ui) {
  const Slice& s = selection_->slice;
  const Track* t = model_.FindTrack(selection_->track_id);
  if (!t) return;
  std::function<void(const std::string&, Rgb)> text = [&](const std::string& line, Rgb color) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::TextColored(ImVec4(color.r / 255.f, color.g / 255.f, color.b / 255.f, 1), "%s", line.c_str());
    if (ui.layout) {
      auto& item = ui.layout->Add("text", line, json{{"table", "slices"}, {"slice_id", s.slice_id}}, p.x, p.y,
                                  ImGui::CalcTextSize(line.c_str()).x, ImGui::GetTextLineHeight());
      item["role"] = "details";
    }
  };
  text(absl::StrFormat("%s  \xC2\xB7  %s  \xC2\xB7  %s (host %d)  \xC2\xB7  %s%s", Name(s.name_id), SliceKindName(s.kind),
                       LaneTitle(*t), t->host_id, ClockLabel(t->clock),
                       s.step >= 0 ? absl::StrCat("  \xC2\xB7  step ", s.step) : std::string()),
       kClockLabel);
  text(absl::StrFormat("start %s, duration %s%s", FormatDuration(double(s.start_ns)), FormatDuration(double(s.dur_ns)),
                       s.bytes > 0 ? absl::StrCat(", ", FormatBytes(s.bytes)) : std::string()),
       kText);
  if (const std::string* moved = model_.MovedValue(s.graph_id, s.op_id)) {
    ImGui::SameLine(0, 20);
    const std::string label = absl::StrCat("Show ", *moved, "'s layout in Sharding");
    const ImVec2 p = ImGui::GetCursorScreenPos();
    if (ImGui::SmallButton(label.c_str())) {
      ui.show_value = *moved;
      ui.bring_to_front = ViewId::kSharding;
    }
    if (ui.layout) {
      auto& item = ui.layout->Add("button", label, json{{"table", "sharding_decisions"}, {"name", *moved}}, p.x, p.y,
                                  ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
      item["role"] = "open_sharding";
    }
  }
  DrawSelectionOp(ui, text);
  if (s.flow_id < 0) return;
  const FlowMembers flow = loader_.flow();
  if (flow.flow_id != s.flow_id || !flow.done) {
    text("finding the other chips of this collective...", kDimText);
    return;
  }
  // Members by arrival: the last to arrive is who the others waited for.
  std::vector<const std::pair<int64_t, Slice>*> by_arrival;
  for (const auto& m : flow.members) by_arrival.push_back(&m);
  const bool arrivals = std::any_of(by_arrival.begin(), by_arrival.end(), [](auto* m) { return m->second.arrival_ns >= 0; });
  if (!arrivals) {
    text(absl::StrFormat("collective over %d chips; arrivals were not recorded in this run, so the last to arrive "
                         "is unknown",
                         flow.members.size()),
         kDimText);
    return;
  }
  std::sort(by_arrival.begin(), by_arrival.end(),
            [](auto* a, auto* b) { return a->second.arrival_ns > b->second.arrival_ns; });
  const auto* last = by_arrival.front();
  const Track* lt = model_.FindTrack(last->first);
  int64_t first_arrival = last->second.arrival_ns;
  for (auto* m : by_arrival) {
    if (m->second.arrival_ns >= 0) first_arrival = std::min(first_arrival, m->second.arrival_ns);
  }
  if (first_arrival == last->second.arrival_ns) {
    text(absl::StrFormat("collective over %d chips; all arrived together (nobody waited)", flow.members.size()), kDimText);
    return;
  }
  text(absl::StrFormat("collective over %d chips; last to arrive: %s, %s after the first (the others waited for it)",
                       flow.members.size(), lt ? LaneTitle(*lt) : "?",
                       FormatDuration(double(last->second.arrival_ns - first_arrival))),
       kLastArrival);
  std::string waits = "waited: ";
  int shown = 0;
  for (auto it = by_arrival.rbegin(); it != by_arrival.rend() && shown < 8; ++it, ++shown) {
    const Track* mt = model_.FindTrack((*it)->first);
    absl::StrAppend(&waits, shown ? ", " : "", mt ? LaneTitle(*mt) : "?", " ",
                    FormatDuration(double((*it)->second.start_ns - (*it)->second.arrival_ns)));
  }
  if (by_arrival.size() > 8) absl::StrAppend(&waits, ", ...");
  text(waits, kDimText);
}

void TimelineView::Draw(UiState& ui) {
  if (ui.layout) ui.layout->Begin("timeline");
  ui_ = &ui;
  lanes_.clear();
  shapes_drawn_ = 0;
  complete_ = false;
  EnsureSections();
  PollJobs(ui);
  if (awaiting_located_) {
    if (auto found = loader_.located()) {
      awaiting_located_ = false;
      select_flag_.clear();
      Select(found->first, found->second, ui);
      // Its lane in view (a chip deep in a pod lies far below the first),
      RevealTrack(found->first);
      scroll_track_ = found->first;
      scroll_to_focus_ = true;
      // and its step on its clock, or the slice itself with room around it.
      const Track* t = model_.FindTrack(found->first);
      if (t && overview_) {
        int64_t t0 = found->second.start_ns - 10 * found->second.dur_ns, t1 = found->second.end_ns() + 10 * found->second.dur_ns;
        for (const StepSpan& s : overview_->steps[static_cast<int>(t->clock)]) {
          if (s.step == found->second.step) t0 = s.start_ns, t1 = s.end_ns;
        }
        ShowWindow(t->clock, t0, t1);
      }
    } else if (!loader_.locate_error().ok()) {
      awaiting_located_ = false;
      ui.selection_text = std::string(loader_.locate_error().message());
      if (!select_flag_.empty())
        ui.option_errors.push_back(absl::StrCat(select_flag_, ": ", loader_.locate_error().message()));
      select_flag_.clear();
    }
  }

  // Toolbar: fit, the loading state, how to move.
  if (ImGui::Button("Fit")) ns_per_px_ = 0;
  ImGui::SameLine();
  DrawSearchBar(ui);
  const LoaderProgress progress = loader_.progress();
  if (!loader_.error().ok()) {
    ImGui::TextColored(ImVec4(kWarning.r / 255.f, kWarning.g / 255.f, kWarning.b / 255.f, 1), "%s",
                       std::string(loader_.error().message()).c_str());
    ui.DataError(loader_.error().message());
    ImGui::SameLine();
  } else if (!progress.overview_done) {
    ImGui::TextUnformatted("loading the run's overview (steps, extents, whole-run summaries)...");
    ImGui::SameLine();
  } else if (progress.busy()) {
    ImGui::ProgressBar(progress.total ? float(progress.done) / progress.total : 0.f, ImVec2(140, 0),
                       absl::StrFormat("%d/%d windows", progress.done, progress.total).c_str());
    ImGui::SameLine();
  } else if (progress.whole_run_done < progress.whole_run_total) {
    // A simulated pod's chips, read in the background nearest the screen first.
    ImGui::TextDisabled("chips' whole-run summaries: %zu of %zu read", progress.whole_run_done,
                        progress.whole_run_total);
    ImGui::SameLine();
  }
  ImGui::TextDisabled("W/S or wheel: zoom   A/D or drag: pan   shift-drag: range   click: select   "
                      "double-click: fit   Esc: clear");
  if (!model_.run.capture_note.empty()) {
    // Steps or kernels the capture left out are blank lanes: say why above them, as the report does.
    const std::string note = absl::StrCat("capture: ", model_.run.capture_note);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(kWarning.r / 255.f, kWarning.g / 255.f, kWarning.b / 255.f, 1), "%s", note.c_str());
    ImGui::PopTextWrapPos();
    if (ui.layout) {
      const ImVec2 size = ImGui::GetItemRectSize();
      ui.layout->Add("text", note, json{{"table", "runs"}, {"run_id", model_.run.run_id}}, p.x, p.y, size.x,
                     size.y)["role"] = "capture";
    }
  }
  HandleKeys(ui);

  const float details_h = (selection_ || range_stats_)
                              ? std::max(selection_ ? kDetailsHeight + 40 : 0.0f, range_stats_ ? kRangeTableHeight : 0.0f)
                              : ImGui::GetFrameHeightWithSpacing();
  ImGui::BeginChild("##timeline", ImVec2(0, -details_h), false, ImGuiWindowFlags_NoScrollWithMouse);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(ImGui::GetContentRegionAvail().x, kLabelWidth + 50);
  const float avail_h = ImGui::GetContentRegionAvail().y;
  Frame f;
  f.dl = ImGui::GetWindowDrawList();
  f.left = origin.x;
  f.right = origin.x + width;
  f.area_left = f.left + kLabelWidth;
  f.top = origin.y;
  area_w_ = f.right - f.area_left;
  // ImGui sizes a window from the frame before: the first frame's width is a
  // placeholder, and a fit to it would be far too wide.
  const bool sized = ImGui::GetFrameCount() > 1 && area_w_ >= 100;
  if (sized && overview_ && pending_window_) {
    auto [clock, window] = *pending_window_;
    pending_window_.reset();
    ShowWindow(clock, window.first, window.second);
  } else if (sized && overview_ && ns_per_px_ <= 0) {
    Fit();
  }
  layout_ = LayoutRows(sections_, collapsed_, avail_h);
  FollowFocus(ui, avail_h);

  // One item owns the mouse over all rows: hover, click, drag and wheel.
  ImGui::InvisibleButton("##lanes", ImVec2(width, std::max(layout_.total_h, 40.0f)));
  const bool hovered = ImGui::IsItemHovered();
  const bool active = ImGui::IsItemActive();
  ImGuiIO& io = ImGui::GetIO();
  f.mouse = ui.headless ? ImVec2(-FLT_MAX, -FLT_MAX) : io.MousePos;
  if (overview_ && ns_per_px_ > 0) {
    if (hovered && io.MouseWheel != 0 && !ui.headless) {
      if (io.KeyShift) {
        ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * 3 * kDepthRowHeight);
      } else {
        TimeAxis axis{view_t0_, ns_per_px_, f.area_left};
        ZoomAround(axis, std::max(io.MousePos.x, f.area_left), std::pow(1.25, io.MouseWheel), 0.01, fit_ns_per_px_ * 4);
        view_t0_ = axis.origin_ns;
        ns_per_px_ = axis.ns_per_px;
        moved_ = true;
      }
    }
    // Shift-drag selects a range on the clock of the lane it starts on.
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && io.KeyShift && io.MousePos.x >= f.area_left) {
      for (const Row& row : layout_.rows) {
        const float y = f.top + row.y;
        if (io.MousePos.y >= y && io.MousePos.y < y + row.h) {
          range_drag_ = RangeDrag{sections_[row.section].clock, io.MousePos.x, io.MousePos.x};
          break;
        }
      }
    }
    if (range_drag_) {
      range_drag_->x1 = std::clamp(io.MousePos.x, f.area_left, f.right);
      if (!active || ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
        if (std::fabs(range_drag_->x1 - range_drag_->x0) >= 3) {
          const Clock c = range_drag_->clock;
          const double off = Offset(c);
          const double a = view_t0_ + (std::min(range_drag_->x0, range_drag_->x1) - f.area_left) * ns_per_px_ - off;
          const double b = view_t0_ + (std::max(range_drag_->x0, range_drag_->x1) - f.area_left) * ns_per_px_ - off;
          SetRange(c, static_cast<int64_t>(std::floor(a)), static_cast<int64_t>(std::ceil(b)));
        }
        range_drag_.reset();
      }
    } else if (active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2)) {
      view_t0_ -= io.MouseDelta.x * ns_per_px_;
      moved_ = true;
    }
    if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) Fit();
    // Keep part of the run on screen, and no time before 0 at the left edge.
    const double view_ns = area_w_ * ns_per_px_;
    const double lowest = std::min(0.0, lo_ns_ - view_ns * 0.02);
    view_t0_ = std::clamp(view_t0_, lowest, std::max(lowest, hi_ns_ - 0.1 * view_ns));
  }
  const bool clicked = hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 9;
  f.view_t0 = view_t0_;
  f.ns_per_px = ns_per_px_ > 0 ? ns_per_px_ : 1;
  for (int c = 0; c < kNumClocks; ++c) f.offset[c] = Offset(static_cast<Clock>(c));
  f.clip_top = ImGui::GetWindowPos().y;
  f.clip_bottom = f.clip_top + ImGui::GetWindowSize().y;

  Hover hover;
  std::vector<WindowKey> wanted;
  bool all_exact = overview_ != nullptr;
  if (!overview_) {
    f.dl->AddText(ImVec2(f.left + 8, f.top + 8), kDimText.Packed(),
                  loader_.error().ok() ? "Loading the run's overview..." : "The timeline could not be loaded.");
  } else if (sections_.empty()) {
    f.dl->AddText(ImVec2(f.left + 8, f.top + 8), kDimText.Packed(), "This run has no timeline tracks.");
  }
  quads_drawn_ = 0;
  lanes_rasterized_ = 0;
  ++frame_;
  if (ui.textures != host_) {
    if (host_ && atlas_.tex) host_->Release(atlas_.tex);
    atlas_.tex = nullptr;
    host_ = ui.textures;
  }
  if (overview_) {
    PrepareAtlas(f);
    f.atlas_x = std::round(f.area_left + static_cast<float>((atlas_.t0 - f.view_t0) / f.ns_per_px));
    atlas_x_ = f.atlas_x;
    atlas_y_ = f.clip_top;
  }
  f.dl->ChannelsSplit(kNumChannels);
  if (host_ && host_->OpaqueBegin()) {
    f.dl->ChannelsSetCurrent(kImageChannel);
    f.dl->AddCallback(host_->OpaqueBegin(), nullptr);
    f.dl->ChannelsSetCurrent(0);
  }
  std::vector<const Row*> pinned;  // section headers drawn over their lanes, after them
  for (const Row& row : layout_.rows) {
    const float y = f.top + row.y;
    if (row.type == RowType::kSection && SectionHeaderY(row, f) != y) {
      pinned.push_back(&row);
      continue;
    }
    // Rows scrolled out of the child are skipped entirely.
    if (y + row.h < f.clip_top || y > f.clip_bottom) continue;
    if (InRect(f.mouse, f.left, y, f.right, y + row.h) && (row.type == RowType::kSection || row.type == RowType::kGroup)) {
      hover.what = Hover::kHeader;
      hover.header = &row;
    }
    switch (row.type) {
      case RowType::kSection: DrawSectionHeader(row, f, ui); break;
      case RowType::kGroup: DrawGroupHeader(row, f, ui); break;
      case RowType::kLane:
        if (overview_) {
          DrawLane(row, f, hover, ui, wanted);
          all_exact &= !lanes_.back().fallback;
        }
        break;
      case RowType::kCompiles: DrawCompiles(row, f, hover, ui); break;
      case RowType::kCounter: if (overview_) DrawCounter(row, f, hover, ui, wanted); break;
    }
  }
  for (const Row* row : pinned) {
    DrawSectionHeader(*row, f, ui, /*pinned=*/true);
    const float y = SectionHeaderY(*row, f);
    if (InRect(f.mouse, f.left, y, f.right, y + row->h)) {
      hover = Hover();
      hover.what = Hover::kHeader;
      hover.header = row;
    }
  }
  DrawStepMarkers(f, ui);
  if (focus_track_ >= 0) {
    // The chip asked for from Fleet: its lane outlined.
    for (const Row& row : layout_.rows) {
      if (row.type != RowType::kLane || model_.tracks[row.lane.index].track_id != focus_track_) continue;
      const float y = f.top + row.y;
      f.dl->AddRect(ImVec2(f.left + 1, y), ImVec2(f.right - 1, y + row.h), kSelection.Packed(), 0, 0, 2);
      if (ui.layout) {
        auto& item = ui.layout->Add("marker", row.label, nlohmann::json{{"table", "tracks"}, {"track_id", focus_track_}},
                                    f.left, y, f.right - f.left, row.h);
        item["role"] = "focus";
        item["step"] = focus_step_;
      }
    }
  }
  // What is drawn from here on (flows, the range band, search marks) goes
  // under a pinned header, not over its ruler.
  for (const Row* row : pinned) f.clip_top = std::max(f.clip_top, SectionHeaderY(*row, f) + row->h);
  DrawFlow(f, ui);
  if (overview_) {
    DrawRangeBand(f, ui);
    DrawSearchMarks(f, ui);
    DrawNavFlows(f, ui);
  }
  if (host_ && host_->OpaqueBegin()) {
    f.dl->ChannelsSetCurrent(kImageChannel);
    f.dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
    f.dl->ChannelsSetCurrent(0);
  }
  f.dl->ChannelsMerge();
  if (overview_) UploadAtlas();
  // Lanes not drawn this frame (collapsed, scrolled away) keep no window alive.
  for (auto it = lane_cache_.begin(); it != lane_cache_.end();) {
    if (it->second.frame != frame_) lane_cache_.erase(it++);
    else ++it;
  }
  loader_.Request(wanted);
  all_exact &= wanted.empty();
  if (overview_ && !overview_->lazy_tracks.empty()) UpdatePrefetch(f);

  if (hovered && !ui.headless && !active) DrawTooltip(hover, f);
  if (clicked) {
    switch (hover.what) {
      case Hover::kHeader: {
        const Row& row = *hover.header;
        const std::string& key = row.type == RowType::kSection ? sections_[row.section].key
                                                                : sections_[row.section].groups[row.group].key;
        SetCollapsed(key, !row.collapsed);
        break;
      }
      case Hover::kCompile:
        ui.selected_compile_id = hover.compile->compile_id;
        ui.bring_to_front = ViewId::kRecompilations;
        ui.scroll_to_selected_compile = true;
        break;
      case Hover::kSlice: Select(hover.track->track_id, hover.slice, ui); break;
      // Zoom in on where it starts: a column's slices can end far past the
      // window (a link's held 10.4 s in a 3.9 s view), and its whole span
      // zoomed out.
      case Hover::kFold:
        ShowWindow(hover.track->clock, hover.block.start_ns, ZoomInEnd(hover.block.start_ns, hover.block.end_ns));
        break;
      case Hover::kColumn:
        ShowWindow(hover.track->clock, hover.column.start_ns, ZoomInEnd(hover.column.start_ns, hover.column.end_ns));
        break;
      default:
        selection_.reset();
        ui.selection_text.clear();
        break;
    }
  }
  ImGui::EndChild();

  if (selection_ || range_stats_) {
    const float w = ImGui::GetContentRegionAvail().x;
    if (selection_) {
      ImGui::BeginChild("##details", ImVec2(range_stats_ ? w * 0.5f : 0, 0), true);
      DrawDetails(ui);
      ImGui::EndChild();
    }
    if (range_stats_) {
      if (selection_) ImGui::SameLine();
      ImGui::BeginChild("##range", ImVec2(0, 0), true);
      DrawRangeTable(ui);
      ImGui::EndChild();
    }
  } else if (!ui.selection_text.empty()) {
    ImGui::TextUnformatted(ui.selection_text.c_str());
  } else {
    ImGui::TextDisabled("%zu lanes; %zu shapes drawn (slices under %.0f px fold; zoomed out, %0.f px summary columns); "
                        "click a slice to select it",
                        lanes_.size(), shapes_drawn_, kFoldPx, kColumnPx);
  }
  const bool flow_pending = selection_ && selection_->slice.flow_id >= 0 &&
                            !(loader_.flow().flow_id == selection_->slice.flow_id && loader_.flow().done);
  complete_ = all_exact && !progress.busy() && !loader_.progress().busy() && !awaiting_located_ && !pending_window_ &&
              !flow_pending && ns_per_px_ > 0 && !JobsPending() && select_flag_.empty() && range_flag_.empty();
  // A loader that met damage will not bring the rest: what is drawn is all there is.
  if (!loader_.error().ok()) complete_ = true;
}

}  // namespace shardscope::app

// ---------------------------------------------------------------------------
// Navigation: keys, range selection, search, the selection's lookups.

namespace shardscope::app {

// A simulated pod's chips have their whole-run summaries read in the
// background, lanes nearest the screen first (outwards from the first one on
// screen), so that scrolling finds them ready. Only lanes the layout shows
// (collapsed sections and groups are left out); sent when that changes.
void TimelineView::UpdatePrefetch(const Frame& f) {
  std::vector<int64_t> lanes;
  size_t first_visible = 0;
  bool seen = false;
  for (const Row& row : layout_.rows) {
    if (row.type != RowType::kLane) continue;
    const float y = f.top + row.y;
    if (!seen && y + row.h >= f.clip_top) {
      first_visible = lanes.size();
      seen = true;
    }
    lanes.push_back(model_.tracks[row.lane.index].track_id);
  }
  const std::pair<size_t, size_t> key{first_visible, lanes.size()};
  if (key == prefetch_key_) return;
  prefetch_key_ = key;
  std::vector<int64_t> order;
  order.reserve(lanes.size());
  for (size_t d = 0; order.size() < lanes.size(); ++d) {
    if (first_visible + d < lanes.size()) order.push_back(lanes[first_visible + d]);
    if (d > 0 && d <= first_visible) order.push_back(lanes[first_visible - d]);
  }
  loader_.Prefetch(std::move(order));
}

}  // namespace shardscope::app

namespace shardscope::app {

void TimelineView::DrawSelectionOp(UiState& ui, const std::function<void(const std::string&, Rgb)>& text) {
  const Slice& s = selection_->slice;
  const Track* t = model_.FindTrack(selection_->track_id);
  // The op it ran, as compiled (ops): shape, cost, line and module path.
  if (op_) {
    const OpInfo& op = *op_;
    std::string line = absl::StrFormat("op %s (%s) %s", op.name, op.opcode, op.shape);
    if (op.flops > 0) absl::StrAppend(&line, absl::StrFormat(", %.4g FLOP", op.flops));
    if (op.bytes_read + op.bytes_written > 0)
      absl::StrAppend(&line, ", reads ", FormatBytes(op.bytes_read), ", writes ", FormatBytes(op.bytes_written));
    if (!op.roofline.empty()) absl::StrAppend(&line, ", ", op.roofline, "-bound");
    text(line, kText);
    std::string where = op.SourceLocation().empty() ? std::string("source line unknown") : op.SourceLocation();
    if (!op.scope.empty()) absl::StrAppend(&where, "  \xC2\xB7  scope ", op.scope);
    absl::StrAppend(&where, "  \xC2\xB7  graph ", op.graph_id, ", op ", op.op_id);
    text(where, kDimText);
  } else if (s.graph_id >= 0 && s.op_id >= 0 && op_job_.pending()) {
    text("looking up its op...", kDimText);
  } else if (s.graph_id >= 0 && s.op_id >= 0) {
    text(absl::StrFormat("graph %d, op %d: this file has no row for it in ops (imported, or recorded without IR)",
                         s.graph_id, s.op_id),
         kDimText);
  }
  if (s.graph_id >= 0) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const std::string label = s.op_id >= 0 ? "Open its op in Graph" : "Open its program in Graph";
    if (ImGui::SmallButton(label.c_str())) {
      ui.graph_focus = GraphFocus{s.graph_id, s.op_id};
      ui.bring_to_front = ViewId::kGraph;
    }
    if (ui.layout) {
      auto& item = ui.layout->Add("button", label, json{{"table", "ops"}, {"graph_id", s.graph_id}, {"op_id", s.op_id}},
                                  p.x, p.y, ImGui::GetItemRectSize().x, ImGui::GetItemRectSize().y);
      item["role"] = "open_graph";
    }
  }
  // Device and modeled clocks side by side: the same kernel measured and modeled.
  if (t && t->device_id && t->clock != Clock::kHost) {
    const bool measured = t->clock == Clock::kDevice;
    if (counterpart_) {
      const int64_t dev = measured ? s.dur_ns : counterpart_->second.dur_ns;
      const int64_t mod = measured ? counterpart_->second.dur_ns : s.dur_ns;
      text(absl::StrFormat("device clock %s  |  modeled clock %s (%s)  |  measured / modeled %.2fx",
                           FormatDuration(double(dev)), FormatDuration(double(mod)), model_.run.profile,
                           mod > 0 ? double(dev) / mod : 0.0),
           kClockLabel);
      const std::string key = measured ? "modeled" : "device";
      if (collapsed_.contains(key)) {
        ImGui::SameLine();
        if (ImGui::SmallButton(measured ? "Show modeled lanes" : "Show device lanes")) RevealTrack(counterpart_->first);
      }
    } else if (op_ && op_->modeled_ns >= 0 && measured) {
      text(absl::StrFormat("device clock %s  |  cost model %s on %s (no modeled lane holds this kernel)",
                           FormatDuration(double(s.dur_ns)), FormatDuration(double(op_->modeled_ns)), op_->profile),
           kClockLabel);
    }
  }
  // Who launched it: the host's dispatch of its program, and each chip's start.
  if (dispatch_) {
    std::string line = absl::StrFormat("program of graph %d, step %d: dispatched by the host at %s (host clock) in %s",
                                       dispatch_->graph_id, dispatch_->step,
                                       FormatDuration(double(dispatch_->host_start_ns)),
                                       FormatDuration(double(dispatch_->host_dur_ns)));
    if (!starts_.empty()) {
      int64_t lo = starts_.front().slice.start_ns, hi = lo;
      for (const ProgramStart& p : starts_) lo = std::min(lo, p.slice.start_ns), hi = std::max(hi, p.slice.start_ns);
      absl::StrAppend(&line, absl::StrFormat("; began on %d chips within %s", starts_.size(), FormatDuration(double(hi - lo))));
    }
    text(line, kDimText);
  }
}

namespace {


ImVec4 Vec4(Rgb c, float a = 1) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, a); }

std::string Percent(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%.1f%%", 100 * part / whole) : std::string("-");
}

}  // namespace

const Row* TimelineView::LaneRow(int64_t track_id) const {
  for (const Row& row : layout_.rows) {
    if (row.type == RowType::kLane && model_.tracks[row.lane.index].track_id == track_id) return &row;
  }
  return nullptr;
}

// A chip's lane at a step, asked for by another view (UiState::show_chip),
// and the playhead's step: shown once the overview has the steps' bounds.
void TimelineView::FollowFocus(UiState& ui, float avail_h) {
  if (!overview_) return;
  if (ui.show_chip) {
    const ChipFocus want = *ui.show_chip;
    ui.show_chip.reset();
    const Track* track = nullptr;
    for (Clock c : {Clock::kDevice, Clock::kModeled})
      for (const Track& t : model_.tracks)
        if (!track && t.clock == c && t.device_id == want.device_id) track = &t;
    if (!track) {
      ui.selection_text = absl::StrCat("chip ", want.device_id, " has no lane on the device or modeled clock");
    } else {
      RevealTrack(track->track_id);
      if (auto w = StepWindow(track->clock, want.step)) ShowWindow(track->clock, w->first, w->second);
      focus_track_ = track->track_id;
      focus_step_ = want.step;
      scroll_track_ = track->track_id;
      scroll_to_focus_ = true;
      followed_step_ = want.step;
      return;  // the lane's row is in the next frame's layout
    }
  }
  if (ui.playhead_step && ui.playhead_step != followed_step_) {
    // The playhead moved: show its step on the first clock that has it.
    followed_step_ = ui.playhead_step;
    for (Clock c : {Clock::kDevice, Clock::kModeled, Clock::kHost})
      if (auto w = StepWindow(c, *ui.playhead_step)) {
        ShowWindow(c, w->first, w->second);
        break;
      }
  }
  if (scroll_to_focus_) {
    scroll_to_focus_ = false;
    for (const Row& row : layout_.rows)
      if (row.type == RowType::kLane && model_.tracks[row.lane.index].track_id == scroll_track_ &&
          (row.y < ImGui::GetScrollY() || row.y + row.h > ImGui::GetScrollY() + avail_h))
        ImGui::SetScrollY(std::max(0.0f, row.y - avail_h / 3));
  }
}

void TimelineView::RevealTrack(int64_t track_id) {
  for (const Section& s : sections_) {
    for (const LaneGroup& g : s.groups) {
      for (const LaneRef& l : g.lanes) {
        if (l.type == RowType::kLane && model_.tracks[l.index].track_id == track_id) {
          collapsed_.erase(s.key);
          collapsed_.erase(g.key);
        }
      }
    }
  }
}

std::optional<std::pair<int64_t, int64_t>> TimelineView::StepWindow(Clock clock, int32_t step) const {
  if (!overview_ || step < 0) return std::nullopt;
  for (const StepSpan& s : overview_->steps[static_cast<int>(clock)]) {
    if (s.step == step) return std::pair{s.start_ns, s.end_ns + 1};
  }
  return std::nullopt;
}

bool TimelineView::OverlapsSteps(Clock clock, int64_t t0, int64_t t1) const {
  if (!overview_) return true;
  for (const StepSpan& s : overview_->steps[static_cast<int>(clock)])
    if (s.start_ns < t1 && t0 < s.end_ns) return true;
  return false;
}

std::string TimelineView::SpanOfClock(Clock clock) const {
  if (!overview_) return "";
  const std::vector<StepSpan>& steps = overview_->steps[static_cast<int>(clock)];
  if (steps.empty()) return absl::StrCat(" (the run has no step on the ", ClockLabel(clock), ")");
  int64_t lo = steps.front().start_ns, hi = steps.front().end_ns;
  for (const StepSpan& s : steps) lo = std::min(lo, s.start_ns), hi = std::max(hi, s.end_ns);
  return absl::StrCat(" (its steps there span ", FormatDuration(double(lo)), " to ", FormatDuration(double(hi)), ")");
}

void TimelineView::SetRange(Clock clock, int64_t t0, int64_t t1) {
  if (t1 < t0) std::swap(t0, t1);
  if (!overview_) {
    range_pending_ = std::pair{clock, std::pair{t0, t1}};
    return;
  }
  std::vector<int64_t> tracks;
  for (const Track& t : model_.tracks) {
    if (t.clock == clock) tracks.push_back(t.track_id);
  }
  range_stats_.reset();
  range_error_.clear();
  const int64_t run = model_.run.run_id;
  TimelineLoader* loader = &loader_;
  range_job_.Start(
      model_.path,
      [run, clock, tracks, t0, t1](const store::Reader& r) { return ComputeRangeStats(r, run, clock, tracks, t0, t1); },
      [loader] { loader->Wake(); });
  // What is being computed shows at once; the table fills when it is done.
  RangeStats placeholder;
  placeholder.clock = clock;
  placeholder.t0 = t0;
  placeholder.t1 = t1;
  placeholder.track_ids = tracks;
  placeholder.note = "counting...";
  range_stats_ = std::move(placeholder);
}

void TimelineView::ClearRange() {
  range_job_.Reset();
  range_stats_.reset();
  range_pending_.reset();
  range_error_.clear();
}

void TimelineView::Search(const std::string& text, bool select_first) {
  std::snprintf(search_buf_, sizeof(search_buf_), "%s", text.c_str());
  if (!overview_) {
    search_pending_ = text;
    select_first_hit_ = select_first;
    return;
  }
  search_text_ = text;
  select_first_hit_ = select_first;
  if (ui_) ui_->highlight_op.reset();
  highlighted_op_.reset();
  hits_.clear();
  hit_index_ = -1;
  search_.reset();
  search_error_.clear();
  if (text.empty()) {
    search_job_.Reset();
    return;
  }
  const int64_t run = model_.run.run_id;
  TimelineLoader* loader = &loader_;
  search_job_.Start(
      model_.path, [run, text](const store::Reader& r) { return store::FindSlicesByName(r, run, text); },
      [loader] { loader->Wake(); });
}

void TimelineView::SearchOp(int64_t graph_id, int64_t op_id) {
  highlighted_op_ = std::pair{graph_id, op_id};
  search_text_ = absl::StrFormat("op %d of graph %d", op_id, graph_id);
  std::snprintf(search_buf_, sizeof(search_buf_), "%s", "");
  select_first_hit_ = false;
  hits_.clear();
  hit_index_ = -1;
  search_.reset();
  search_error_.clear();
  const int64_t run = model_.run.run_id;
  TimelineLoader* loader = &loader_;
  search_job_.Start(
      model_.path,
      [run, graph_id, op_id](const store::Reader& r) { return store::FindSlicesByOp(r, run, graph_id, op_id); },
      [loader] { loader->Wake(); });
}

void TimelineView::StepSearch(int direction) {
  if (hits_.empty() || !ui_) return;
  const int n = static_cast<int>(hits_.size());
  if (hit_index_ < 0 || hit_index_ >= n) {
    // From what is on screen: the first hit at or after its left edge, or
    // the last one before its right edge.
    const double left = view_t0_, right = view_t0_ + area_w_ * std::max(ns_per_px_, 1.0);
    if (direction > 0) {
      auto it = std::lower_bound(hits_.begin(), hits_.end(), left, [](const SearchHit& h, double t) { return h.axis_ns < t; });
      hit_index_ = it == hits_.end() ? 0 : static_cast<int>(it - hits_.begin());
    } else {
      auto it = std::upper_bound(hits_.begin(), hits_.end(), right, [](double t, const SearchHit& h) { return t < h.axis_ns; });
      hit_index_ = it == hits_.begin() ? n - 1 : static_cast<int>(it - hits_.begin()) - 1;
    }
  } else {
    hit_index_ = ((hit_index_ + direction) % n + n) % n;
  }
  const SearchHit& hit = hits_[hit_index_];
  RevealTrack(hit.track_id);
  scroll_track_ = hit.track_id;
  scroll_to_focus_ = true;
  Select(hit.track_id, hit.slice, *ui_);
  if (const Track* t = model_.FindTrack(hit.track_id)) {
    const int64_t pad = std::max<int64_t>(10 * hit.slice.dur_ns, 25'000);
    ShowWindow(t->clock, hit.slice.start_ns - pad, hit.slice.end_ns() + pad);
  }
}

void TimelineView::StartSelectionJobs() {
  op_job_.Reset();
  counterpart_job_.Reset();
  starts_job_.Reset();
  op_.reset();
  counterpart_.reset();
  counterpart_track_ = -1;
  starts_.clear();
  dispatch_.reset();
  if (!selection_) return;
  const Slice s = selection_->slice;
  const Track* track = model_.FindTrack(selection_->track_id);
  if (!track) return;
  const int64_t run = model_.run.run_id;
  TimelineLoader* loader = &loader_;
  auto wake = [loader] { loader->Wake(); };
  if (s.graph_id >= 0 && s.op_id >= 0) {
    const int64_t g = s.graph_id, o = s.op_id;
    op_job_.Start(model_.path, [run, g, o](const store::Reader& r) { return LookupOp(r, run, g, o); }, wake);
  }
  // The same kernel on the chip's other clock: measured against modeled.
  if (track->device_id && track->clock != Clock::kHost && s.step >= 0) {
    const Clock other = track->clock == Clock::kDevice ? Clock::kModeled : Clock::kDevice;
    for (const Track& t : model_.tracks) {
      if (t.clock != other || t.device_id != track->device_id) continue;
      counterpart_track_ = t.track_id;
      auto window = StepWindow(other, s.step);
      if (!window && overview_ && overview_->extent[static_cast<int>(other)]) window = *overview_->extent[static_cast<int>(other)];
      if (!window) break;
      const auto [w0, w1] = *window;
      const int64_t tid = t.track_id;
      const int32_t name_id = s.name_id;
      counterpart_job_.Start(
          model_.path, [run, tid, s, name_id, w0, w1](const store::Reader& r) { return FindCounterpart(r, run, tid, s, name_id, w0, w1); },
          wake);
      break;
    }
  }
  // The host's launch of this program, and where each chip began running it.
  if (s.step >= 0 && s.graph_id >= 0) {
    for (const Dispatch& d : model_.dispatches) {
      if (d.step == s.step && d.graph_id == s.graph_id) {
        dispatch_ = d;
        break;
      }
    }
    const Clock chips = track->clock == Clock::kHost ? Clock::kDevice : track->clock;
    std::vector<int64_t> tracks;
    for (const Track& t : model_.tracks) {
      if (t.clock == chips && t.is_device()) tracks.push_back(t.track_id);
    }
    auto window = StepWindow(chips, s.step);
    if (dispatch_ && window && !tracks.empty()) {
      const auto [w0, w1] = *window;
      const int32_t step = s.step;
      const int64_t g = s.graph_id;
      starts_job_.Start(
          model_.path,
          [run, tracks, step, g, w0, w1](const store::Reader& r) { return FindProgramStarts(r, run, tracks, step, g, w0, w1); },
          wake);
    }
  }
}

void TimelineView::PollJobs(UiState& ui) {
  // An op picked in the Graph view: its slices become the marked hits.
  if (overview_ && ui.highlight_op &&
      highlighted_op_ != std::pair{ui.highlight_op->graph_id, ui.highlight_op->op_id}) {
    SearchOp(ui.highlight_op->graph_id, ui.highlight_op->op_id);
  }
  if (overview_ && range_pending_) {
    auto [clock, window] = *range_pending_;
    range_pending_.reset();
    SetRange(clock, window.first, window.second);
  }
  if (overview_ && search_pending_) {
    std::string text = *search_pending_;
    search_pending_.reset();
    Search(text, select_first_hit_);
  }
  if (range_job_.Poll()) {
    const auto& r = *range_job_.result();
    // A range with no slice inside the run is an answer; outside its steps, a mistake.
    if (!range_flag_.empty() && (!r.ok() || (r->count == 0 && !OverlapsSteps(r->clock, r->t0, r->t1)))) {
      ui.option_errors.push_back(absl::StrCat(
          range_flag_, ": ",
          r.ok() ? absl::StrCat("no slice of run ", model_.run.run_id, " starts in it on the ", ClockLabel(r->clock),
                                SpanOfClock(r->clock))
                 : r.status().message()));
    }
    range_flag_.clear();
    if (r.ok()) {
      range_stats_ = *r;
      std::vector<std::pair<int32_t, std::string>> names;
      for (const RangeRow& row : r->rows) {
        if (row.name_id) names.emplace_back(row.name_id, row.name);
      }
      loader_.AddNames(names);
    } else {
      range_error_ = std::string(r.status().message());
    }
  }
  if (search_job_.Poll()) {
    const auto& r = *search_job_.result();
    if (r.ok()) {
      search_ = *r;
      loader_.AddNames(r->names);
      hits_.clear();
      for (const store::SliceHit& h : r->hits) {
        const Track* t = model_.FindTrack(h.track_id);
        if (!t) continue;
        Slice s = SliceFromStore(h.slice);
        hits_.push_back(SearchHit{h.track_id, s, double(s.start_ns) + Offset(t->clock)});
      }
      std::stable_sort(hits_.begin(), hits_.end(), [](const SearchHit& a, const SearchHit& b) { return a.axis_ns < b.axis_ns; });
      hit_index_ = -1;
      if (select_first_hit_ && !hits_.empty()) {
        // The run's first hit, not the first on screen.
        select_first_hit_ = false;
        hit_index_ = hits_.size() - 1;
        StepSearch(+1);
      }
    } else {
      search_error_ = std::string(r.status().message());
    }
  }
  if (op_job_.Poll()) {
    const auto& r = *op_job_.result();
    if (r.ok() && r->has_value()) op_ = **r;
  }
  if (counterpart_job_.Poll()) {
    const auto& r = *counterpart_job_.result();
    if (r.ok() && r->has_value()) counterpart_ = std::pair{counterpart_track_, **r};
  }
  if (starts_job_.Poll()) {
    const auto& r = *starts_job_.result();
    if (r.ok()) starts_ = *r;
  }
}

bool TimelineView::JobsPending() const {
  return range_job_.pending() || search_job_.pending() || op_job_.pending() || counterpart_job_.pending() ||
         starts_job_.pending() || range_pending_.has_value() || search_pending_.has_value();
}

void TimelineView::HandleKeys(UiState& ui) {
  ImGuiIO& io = ImGui::GetIO();
  if (ui.headless) return;
  if (io.KeyCtrl && ImGui::IsKeyPressed(kKeyF, false)) focus_search_ = true;
  if (ImGui::IsKeyPressed(kKeyF3)) StepSearch(io.KeyShift ? -1 : +1);
  if (io.WantTextInput) return;  // typing in the search box
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false)) {
    if (range_stats_) {
      ClearRange();
    } else {
      selection_.reset();
      StartSelectionJobs();
      ui.selection_text.clear();
    }
  }
  if (!overview_ || ns_per_px_ <= 0 || io.KeyCtrl) return;
  // While held: W/S zoom by 4x per second around the mouse (the middle when
  // it is elsewhere); A/D pan by the view's width per second.
  const float dt = std::clamp(io.DeltaTime, 0.0f, 0.1f);
  const float area_left = ImGui::GetWindowPos().x + kLabelWidth;
  const float mx = io.MousePos.x >= area_left && io.MousePos.x < area_left + area_w_ ? io.MousePos.x : area_left + area_w_ / 2;
  auto zoom = [&](double factor) {
    TimeAxis axis{view_t0_, ns_per_px_, area_left};
    ZoomAround(axis, mx, factor, 0.01, fit_ns_per_px_ * 4);
    view_t0_ = axis.origin_ns;
    ns_per_px_ = axis.ns_per_px;
    moved_ = true;
  };
  if (ImGui::IsKeyDown(kKeyW)) zoom(std::pow(4.0, dt));
  if (ImGui::IsKeyDown(kKeyS)) zoom(std::pow(4.0, -dt));
  const double pan = area_w_ * ns_per_px_ * dt;
  if (ImGui::IsKeyDown(kKeyA)) view_t0_ -= pan, moved_ = true;
  if (ImGui::IsKeyDown(kKeyD)) view_t0_ += pan, moved_ = true;
}

void TimelineView::DrawSearchBar(UiState& ui) {
  ImGui::SetNextItemWidth(200);
  if (focus_search_) {
    ImGui::SetKeyboardFocusHere();
    focus_search_ = false;
  }
  const bool enter = ImGui::InputTextWithHint("##find", "find slices by name (Ctrl+F)", search_buf_, sizeof(search_buf_),
                                              ImGuiInputTextFlags_EnterReturnsTrue);
  if (enter) {
    if (search_text_ != search_buf_ || (!search_ && !search_job_.pending())) {
      Search(search_buf_, true);
    } else {
      StepSearch(ImGui::GetIO().KeyShift ? -1 : +1);
    }
    focus_search_ = true;  // stay in the box: Enter again steps on
  }
  ImGui::SameLine(0, 2);
  if (ImGui::ArrowButton("##prev", ImGuiDir_Left)) StepSearch(-1);
  ImGui::SameLine(0, 2);
  if (ImGui::ArrowButton("##next", ImGuiDir_Right)) StepSearch(+1);
  ImGui::SameLine();
  std::string status;
  if (search_job_.pending()) {
    status = "searching the whole run...";
  } else if (!search_error_.empty()) {
    status = search_error_;
  } else if (search_) {
    if (search_->total == 0) {
      status = search_->names.empty() ? absl::StrCat("no slice name contains '", search_text_, "'")
                                      : absl::StrCat("no slices named like '", search_text_, "' in this run");
    } else {
      const std::string names = absl::StrFormat("%d name%s", search_->names.size(), search_->names.size() == 1 ? "" : "s");
      const std::string kept = search_->truncated() ? absl::StrFormat(" (the first %d kept)", hits_.size()) : "";
      if (highlighted_op_) {
        // An op picked in the Graph view: its slices are the hits.
        status = absl::StrFormat("%s (graph %d): %d slices%s; Enter: next",
                                 search_->names.empty() ? search_text_ : search_->names[0].second,
                                 highlighted_op_->first, search_->total, kept);
      } else if (hit_index_ < 0) {
        status = absl::StrFormat("%d hits%s in %s; Enter: next", search_->total, kept, names);
      } else {
        status = absl::StrFormat("%d of %d%s in %s", hit_index_ + 1, search_->total, kept, names);
      }
    }
  }
  if (!status.empty()) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::TextUnformatted(status.c_str());
    if (ui.layout && search_) {
      auto& item = ui.layout->Add("text", status, json{{"table", "slices"}, {"search", search_text_}}, p.x, p.y,
                                  ImGui::CalcTextSize(status.c_str()).x, ImGui::GetTextLineHeight());
      item["role"] = "search";
      if (highlighted_op_) item["op"] = json{{"graph_id", highlighted_op_->first}, {"op_id", highlighted_op_->second}};
      item["total"] = search_->total;
      item["hits"] = hits_.size();
      item["index"] = hit_index_;
      json names = json::array();
      for (const auto& [id, name] : search_->names) names.push_back(name);
      item["names"] = std::move(names);
    }
    ImGui::SameLine();
  }
}

void TimelineView::DrawRangeBand(const Frame& f, UiState& ui) {
  std::optional<std::tuple<Clock, double, double>> band;
  if (range_drag_) {
    const float a = std::min(range_drag_->x0, range_drag_->x1), b = std::max(range_drag_->x0, range_drag_->x1);
    band = std::tuple{range_drag_->clock, f.RawAt(range_drag_->clock, a), f.RawAt(range_drag_->clock, b)};
  } else if (range_stats_) {
    band = std::tuple{range_stats_->clock, double(range_stats_->t0), double(range_stats_->t1)};
  }
  if (!band) return;
  const auto [clock, t0, t1] = *band;
  // Across the rows of the range's clock: its section, from header to last lane.
  float y0 = std::numeric_limits<float>::max(), y1 = std::numeric_limits<float>::lowest();
  for (const Row& row : layout_.rows) {
    if (sections_[row.section].clock != clock) continue;
    y0 = std::min(y0, f.top + row.y);
    y1 = std::max(y1, f.top + row.y + row.h);
  }
  if (y0 > y1) return;
  const float x0 = f.ToX(clock, t0), x1 = std::max(x0 + 1, f.ToX(clock, t1));
  DataLayer layer(f.dl, f.DataMin(), f.DataMax());
  f.dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), kSelection.Packed(40));
  f.dl->AddLine(ImVec2(x0, y0), ImVec2(x0, y1), kSelection.Packed(220), 1.5f);
  f.dl->AddLine(ImVec2(x1, y0), ImVec2(x1, y1), kSelection.Packed(220), 1.5f);
  const std::string label = FormatDuration(t1 - t0);
  SmallText(f.dl, x0 + 4, y0 + 2, kText, label);
  if (ui.layout && !range_drag_) {
    auto& item = ui.layout->Add("marker", label, json{{"table", "slices"}, {"clock", ClockName(clock)}}, x0, y0, x1 - x0,
                                y1 - y0);
    item["role"] = "range";
    item["clock"] = ClockName(clock);
    item["start_ns"] = static_cast<int64_t>(t0);
    item["end_ns"] = static_cast<int64_t>(t1);
  }
}

void TimelineView::DrawSearchMarks(const Frame& f, UiState& ui) {
  if (hits_.empty()) return;
  const double left = f.view_t0 - 2 * f.ns_per_px, right = f.view_t0 + (f.right - f.area_left + 2) * f.ns_per_px;
  auto first = std::lower_bound(hits_.begin(), hits_.end(), left, [](const SearchHit& h, double t) { return h.axis_ns < t; });
  DataLayer layer(f.dl, f.DataMin(), f.DataMax());
  size_t drawn = 0;
  for (auto it = first; it != hits_.end() && it->axis_ns <= right && drawn < kMaxHitMarks; ++it) {
    const Row* row = LaneRow(it->track_id);
    const Track* t = model_.FindTrack(it->track_id);
    if (!row || !t) continue;
    const float x = f.ToX(t->clock, double(it->slice.start_ns));
    const float y = f.top + row->y;
    const bool current = hit_index_ >= 0 && &*it == &hits_[hit_index_];
    const Rgb color = current ? kSelection : kWarning;
    f.dl->AddTriangleFilled(ImVec2(x - 4, y), ImVec2(x + 4, y), ImVec2(x, y + 6), color.Packed());
    const float w = std::max(1.0f, static_cast<float>(it->slice.dur_ns / f.ns_per_px));
    f.dl->AddRect(ImVec2(x, y + 1), ImVec2(x + w, y + row->h - 1), color.Packed(200));
    ++drawn;
    if (ui.layout) {
      auto& item = ui.layout->Add("marker", Name(it->slice.name_id), json{{"table", "slices"}, {"slice_id", it->slice.slice_id}},
                                  x - 4, y, std::max(8.0f, w), row->h);
      item["role"] = "search_hit";
      item["track_id"] = it->track_id;
      item["start_ns"] = it->slice.start_ns;
      item["current"] = current;
    }
  }
}

void TimelineView::DrawNavFlows(const Frame& f, UiState& ui) {
  if (!selection_) return;
  auto slice_box = [&](int64_t track_id, const Slice& s, ImVec2& a, ImVec2& b) {
    const Row* row = LaneRow(track_id);
    const Track* track = model_.FindTrack(track_id);
    if (!row || !track) return false;
    const float row_h = (row->h - 2) / row->rows_shown;
    const int d = std::min<int>(s.depth, row->rows_shown - 1);
    a = ImVec2(f.ToX(track->clock, double(s.start_ns)), f.top + row->y + 1 + d * row_h);
    b = ImVec2(std::max(a.x + 2, f.ToX(track->clock, double(s.end_ns()))), a.y + row_h - 1);
    return true;
  };
  DataLayer layer(f.dl, f.DataMin(), f.DataMax());
  // The same kernel on the other clock, outlined.
  if (counterpart_) {
    ImVec2 a, b;
    if (slice_box(counterpart_->first, counterpart_->second, a, b)) {
      f.dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), kSelection.Packed(170), 0, 0, 1.5f);
      if (ui.layout) {
        auto& item = ui.layout->Add("marker", Name(counterpart_->second.name_id),
                                    json{{"table", "slices"}, {"slice_id", counterpart_->second.slice_id}}, a.x, a.y,
                                    b.x - a.x, b.y - a.y);
        item["role"] = "counterpart";
        item["track_id"] = counterpart_->first;
        item["dur_ns"] = counterpart_->second.dur_ns;
      }
    }
  }
  // The host's dispatch of the program, to where each chip began it.
  if (!dispatch_ || starts_.empty()) return;
  const Track* chip = model_.FindTrack(selection_->track_id);
  const Row* host_row = nullptr;
  for (const Track& t : model_.tracks) {
    if (t.is_device() || t.clock != Clock::kHost) continue;
    const Row* row = LaneRow(t.track_id);
    if (!row) continue;
    if (!host_row || (chip && t.host_id == chip->host_id && selection_->track_id != t.track_id)) host_row = row;
    if (chip && t.host_id == chip->host_id) break;
  }
  const float hx = f.ToX(Clock::kHost, double(dispatch_->host_start_ns));
  const float hy = host_row ? f.top + host_row->y + host_row->h / 2 : f.clip_top;
  if (host_row) f.dl->AddCircleFilled(ImVec2(hx, hy), 3.5f, kFlow.Packed());
  for (const ProgramStart& p : starts_) {
    ImVec2 a, b;
    if (!slice_box(p.track_id, p.slice, a, b)) continue;
    const ImVec2 to(a.x, (a.y + b.y) / 2);
    if (host_row) {
      // A curve from the dispatch down (or up) to the program's first kernel.
      const float mid = (hy + to.y) / 2;
      f.dl->AddBezierCubic(ImVec2(hx, hy), ImVec2(hx, mid), ImVec2(to.x, mid), to, kFlow.Packed(150), 1.2f);
    }
    if (ui.layout) {
      auto& item = ui.layout->Add("flow", "dispatch",
                                  json{{"table", "executions"}, {"step", dispatch_->step}, {"graph_id", dispatch_->graph_id}},
                                  std::min(hx, to.x), std::min(hy, to.y), std::fabs(to.x - hx), std::fabs(to.y - hy));
      item["role"] = "dispatch";
      item["from"] = json{{"table", "executions"}, {"step", dispatch_->step}, {"graph_id", dispatch_->graph_id},
                          {"host_start_ns", dispatch_->host_start_ns}};
      item["to"] = json{{"table", "slices"}, {"slice_id", p.slice.slice_id}};
      item["track_id"] = p.track_id;
      item["x0"] = hx;
      item["y0"] = hy;
      item["x1"] = to.x;
      item["y1"] = to.y;
    }
  }
}

void TimelineView::DrawRangeTable(UiState& ui) {
  const RangeStats& r = *range_stats_;
  const std::string head = absl::StrFormat("range %s - %s (%s, %s) on %d lanes", FormatDuration(double(r.t0)),
                                           FormatDuration(double(r.t1)), FormatDuration(double(r.t1 - r.t0)),
                                           ClockLabel(r.clock), r.track_ids.size());
  const ImVec2 hp = ImGui::GetCursorScreenPos();
  ImGui::TextColored(Vec4(kClockLabel), "%s", head.c_str());
  if (ui.layout) {
    auto& item = ui.layout->Add("text", head, json{{"table", "slices"}, {"clock", ClockName(r.clock)}}, hp.x, hp.y,
                                ImGui::CalcTextSize(head.c_str()).x, ImGui::GetTextLineHeight());
    item["role"] = "range";
    item["clock"] = ClockName(r.clock);
    item["start_ns"] = r.t0;
    item["end_ns"] = r.t1;
    item["exact"] = r.exact;
    item["count"] = r.count;
    item["busy_ns"] = r.busy_ns;
    item["summarized"] = r.summarized;
    item["summary_level"] = r.summary_level;
    item["pending"] = range_job_.pending();
  }
  ImGui::SameLine();
  if (ImGui::SmallButton("clear (Esc)")) {
    ClearRange();
    return;
  }
  const std::string note = range_error_.empty() ? r.note : range_error_;
  const ImVec2 np = ImGui::GetCursorScreenPos();
  ImGui::PushTextWrapPos(0);
  ImGui::TextColored(Vec4(r.exact ? kDimText : kWarning), "%s", note.c_str());
  ImGui::PopTextWrapPos();
  if (ui.layout) {
    auto& item = ui.layout->Add("text", note, json{{"table", r.exact ? "slices" : "slice_summaries"}}, np.x, np.y,
                                ImGui::GetContentRegionAvail().x, ImGui::GetTextLineHeight());
    item["role"] = "range_note";
  }
  if (range_job_.pending()) return;
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("##range", 8, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn(r.exact ? "name" : "kind", ImGuiTableColumnFlags_WidthStretch);
  for (const char* c : {"kind", "count", "total", "of range", "mean", "p50", "p90"}) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  const double span = double(r.t1 - r.t0) * std::max<size_t>(1, r.track_ids.size());
  for (const RangeRow& row : r.rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    std::string label = row.from_summaries ? absl::StrCat(row.name, " (summaries)") : row.name;
    // Clicking a name searches for it (next/previous then walk its slices).
    if (ImGui::Selectable(label.c_str(), false, ImGuiSelectableFlags_SpanAllColumns) && row.name_id) {
      Search(row.name, false);
    }
    if (ui.layout) {
      auto& item = ui.layout->Add("row", row.name,
                                  json{{"table", row.from_summaries ? "slice_summaries" : "slices"},
                                       {"clock", ClockName(r.clock)}, {"start_ns", r.t0}, {"end_ns", r.t1}},
                                  p.x, p.y, ImGui::GetContentRegionAvail().x, ImGui::GetTextLineHeight());
      item["role"] = "range_row";
      item["kind"] = SliceKindName(row.kind);
      item["count"] = row.count;
      item["total_ns"] = row.total_ns;
      item["mean_ns"] = row.count > 0 ? json(row.mean_ns()) : json(nullptr);
      item["p50_ns"] = row.p50_ns >= 0 ? json(row.p50_ns) : json(nullptr);
      item["p90_ns"] = row.p90_ns >= 0 ? json(row.p90_ns) : json(nullptr);
      item["from_summaries"] = row.from_summaries;
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(SliceKindName(row.kind));
    ImGui::TableNextColumn();
    if (row.count >= 0) ImGui::Text("%lld", static_cast<long long>(row.count));
    else ImGui::TextDisabled("-");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(FormatDuration(double(row.total_ns)).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(Percent(double(row.total_ns), span).c_str());
    for (int64_t v : {row.count > 0 ? static_cast<int64_t>(std::llround(row.mean_ns())) : int64_t{-1}, row.p50_ns, row.p90_ns}) {
      ImGui::TableNextColumn();
      if (v >= 0) ImGui::TextUnformatted(FormatDuration(double(v)).c_str());
      else ImGui::TextDisabled("-");
    }
  }
  ImGui::EndTable();
}

}  // namespace shardscope::app
