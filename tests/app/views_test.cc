// Tests of the workstation's views driven through ImGui without a display or
// GL: ImGui runs on a bare context (a built font atlas and a display size are
// all it needs), the timeline's loader runs for real over fixture databases,
// and the tests feed mouse input frame by frame. What a frame drew is read
// from its layout dump (--dump-layout's items), so the checks are about
// content: lanes per chip, step markers on every lane, folds within a step,
// clocks aligned, flows of a collective with the last to arrive marked.
#include <imgui.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/app/fixture.h"
#include "ui/app/background.h"
#include "ui/app/lane_texture.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"
#include "ui/app/workstation.h"

namespace shardscope::app {
namespace {

using nlohmann::json;

// Textures as the GL shell would keep them: what was uploaded last, so a test
// can read the pixels a lane's image would show.
class FakeTextures : public TextureHost {
 public:
  ImTextureID Create() override { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(++created)); }
  void Upload(ImTextureID, int width, int height, const uint32_t* pixels) override {
    ++uploads;
    w = width;
    h = height;
    px.assign(pixels, pixels + static_cast<size_t>(w) * h);
  }
  void UploadRows(ImTextureID, int width, int y0, int rows, const uint32_t* pixels) override {
    ++uploads;
    EXPECT_EQ(width, w);
    EXPECT_LE(y0 + rows, h);
    std::copy(pixels, pixels + static_cast<size_t>(width) * rows, px.begin() + static_cast<size_t>(y0) * w);
  }
  void Release(ImTextureID) override { ++released; }
  // The texel under window pixel (x, y) of the image drawn with its top left at (x0, y0).
  uint32_t At(float x0, float y0, float x, float y) const {
    const int tx = static_cast<int>(std::floor(x - x0)), ty = static_cast<int>(std::floor(y - y0));
    if (tx < 0 || ty < 0 || tx >= w || ty >= h) return 0;
    return px[static_cast<size_t>(ty) * w + tx];
  }

  int created = 0, uploads = 0, released = 0;
  int w = 0, h = 0;
  std::vector<uint32_t> px;
};

class ViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1400, 860);
    io.DeltaTime = 1.0f / 60;
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas
  }
  void TearDown() override {
    if (HasFailure() && ws_) {
      const std::string path = testing::TempPath("failed.json");
      (void)dump_.WriteFile(path);
      std::printf("last frame's layout: %s\n", path.c_str());
    }
    ws_.reset();
    ImGui::DestroyContext();
  }

  void Open(const testing::FixtureRun& run) {
    run_ = run;
    std::string db = testing::TempPath("views.db");
    ASSERT_TRUE(testing::WriteFixtureDb(db, {run}).ok());
    auto model = LoadTraceModel(db, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status();
    ws_ = std::make_unique<Workstation>(std::make_unique<TraceModel>(*std::move(model)));
    ws_->ui().textures = &textures_;
    Settle();
  }

  // As Open, with `sql` run on the file first: what the fixture's Writer leaves
  // out (a capture note, a simulated run's flags).
  void OpenEdited(const testing::FixtureRun& run, const std::string& sql, ViewId view) {
    run_ = run;
    std::string db = testing::TempPath("views.db");
    ASSERT_TRUE(testing::WriteFixtureDb(db, {run}).ok());
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(h);
    auto model = LoadTraceModel(db, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status();
    ws_ = std::make_unique<Workstation>(std::make_unique<TraceModel>(*std::move(model)));
    ws_->ui().textures = &textures_;
    ws_->ui().bring_to_front = view;
    Settle();
  }

  // Frames until the timeline has drawn everything it asked for.
  void Settle() {
    for (int i = 0; i < 50; ++i) {
      Frame();
      if (i >= 2 && ws_->complete()) return;
      ws_->loader().WaitIdle(10);
      // Views that read on threads of their own (Recompilations) wake the
      // loop as the loader does; a test has no loop to wake.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "the view never finished loading";
  }

  // One frame with the mouse at `pos`, the left button as given, and a wheel;
  // what it drew lands in dump_.
  void Frame(ImVec2 pos = ImVec2(-FLT_MAX, -FLT_MAX), bool down = false, float wheel = 0) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = pos;
    io.MouseDown[0] = down;
    io.MouseWheel = wheel;
    ws_->ui().layout = &dump_;
    ImGui::NewFrame();
    ws_->Draw();
    ImGui::Render();
    ws_->ui().layout = nullptr;
  }

  void Click(ImVec2 pos) {
    Frame(pos);
    Frame(pos, true);
    Frame(pos, false);
  }

  std::vector<json> Items(const std::string& type) const {
    std::vector<json> out;
    for (const json& item : dump_.doc()["items"]) {
      if (item["type"] == type) out.push_back(item);
    }
    return out;
  }

  const json* SliceRect(int64_t slice_id) const {
    for (const json& item : dump_.doc()["items"]) {
      if (item["type"] == "rect" && item["ref"].value("slice_id", int64_t{-1}) == slice_id) return &item;
    }
    return nullptr;
  }

  const LaneRect& DeviceLane(int device) {
    for (const LaneRect& lane : ws_->timeline().lanes()) {
      if (lane.device_id == device) return lane;
    }
    ADD_FAILURE() << "no lane for device " << device;
    return ws_->timeline().lanes().front();
  }

  testing::FixtureRun run_;
  FakeTextures textures_;  // outlives ws_
  std::unique_ptr<Workstation> ws_;
  LayoutDump dump_;
};

ImVec2 Center(const json& item) {
  return ImVec2(item["x"].get<float>() + item["w"].get<float>() / 2, item["y"].get<float>() + item["h"].get<float>() / 2);
}

TEST_F(ViewsTest, OneLanePerDeviceThenHostThreads) {
  Open({.num_devices = 5, .num_hosts = 2});
  const auto& lanes = ws_->timeline().lanes();
  ASSERT_EQ(lanes.size(), 7u);
  for (int d = 0; d < 5; ++d) {
    EXPECT_EQ(lanes[d].device_id, d);
    EXPECT_EQ(lanes[d].clock, Clock::kDevice);
    EXPECT_GT(lanes[d].blocks_drawn, 0u);
    EXPECT_FALSE(lanes[d].fallback);
  }
  EXPECT_EQ(lanes[5].clock, Clock::kHost);
  EXPECT_GT(lanes[5].y, lanes[4].y + lanes[4].h - 1);
  EXPECT_EQ(dump_.view(), "timeline");
  // Two host groups of chips (host 0: chips 0-1, host 1: chips 2-4) with headers.
  auto groups = Items("group");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1]["label"], "host 1 \xC2\xB7 chips 3-4");
}

TEST_F(ViewsTest, WheelZoomsAroundTheMouse) {
  Open({.num_devices = 2});
  const TimelineView& tl = ws_->timeline();
  const LaneRect& lane = DeviceLane(1);
  const float mx = lane.x + 500, my = lane.y + lane.h / 2;
  const double before_zoom = tl.ns_per_px();
  const double t_under_mouse = tl.offset_ns() + (mx - lane.x) * tl.ns_per_px();
  Frame(ImVec2(mx, my));
  Frame(ImVec2(mx, my), false, 2.0f);  // two notches in
  EXPECT_NEAR(tl.ns_per_px(), before_zoom / (1.25 * 1.25), before_zoom * 1e-6);
  EXPECT_NEAR(tl.offset_ns() + (mx - lane.x) * tl.ns_per_px(), t_under_mouse, 1.0);
  // Zoomed in, fewer slices are on screen.
  Frame(ImVec2(mx, my), false, 10.0f);
  Settle();
  EXPECT_LT(DeviceLane(1).blocks_drawn, 18u);
}

TEST_F(ViewsTest, DragPans) {
  Open({.num_devices = 2});
  const TimelineView& tl = ws_->timeline();
  // Zoom in first: at the fit the view cannot pan past the run's start.
  Frame(ImVec2(DeviceLane(0).x + 600, DeviceLane(0).y + 4), false, 4.0f);
  const LaneRect lane = DeviceLane(0);
  const float y = lane.y + lane.h / 2;
  const double offset = tl.offset_ns(), ns_per_px = tl.ns_per_px();
  Frame(ImVec2(lane.x + 600, y));
  Frame(ImVec2(lane.x + 600, y), true);
  for (float x = 590; x >= 500; x -= 10) Frame(ImVec2(lane.x + x, y), true);
  Frame(ImVec2(lane.x + 500, y), false);
  EXPECT_NEAR(tl.offset_ns(), offset + 100 * ns_per_px, ns_per_px);
  EXPECT_DOUBLE_EQ(tl.ns_per_px(), ns_per_px);  // a pan, not a zoom
}

TEST_F(ViewsTest, ClickingACompileMarkerOpensRecompilations) {
  Open({.num_devices = 2, .num_hosts = 1});
  const Compilation& second = ws_->model().compilations[1];
  json m;
  for (const json& marker : Items("marker")) {
    if (marker["ref"].value("compile_id", int64_t{-1}) == second.compile_id) m = marker;
  }
  ASSERT_FALSE(m.is_null()) << "no marker for compilation " << second.compile_id;
  Click(ImVec2(m["x"].get<float>() + 2, Center(m).y));
  EXPECT_EQ(ws_->ui().selected_compile_id, second.compile_id);
  EXPECT_EQ(ws_->active_view(), ViewId::kTimeline);
  Frame();
  Frame();
  EXPECT_EQ(ws_->active_view(), ViewId::kRecompilations);
  Settle();  // its compilations are read on a thread of its own
  EXPECT_EQ(dump_.view(), "recompilations");
  std::vector<json> rows;
  for (const json& r : Items("row")) {
    if (r["ref"]["table"] == "compilations") rows.push_back(r);
  }
  EXPECT_EQ(rows.size(), 3u);
}

// The Sharding tab flags the run's rematerialization, lists its tensors, and
// draws the picked tensor's tiles with the chips holding each.
TEST_F(ViewsTest, ShardingTabDrawsTheTilesOfThePickedTensor) {
  Open({});
  ws_->ui().bring_to_front = ViewId::kSharding;
  Frame();
  Frame();
  EXPECT_EQ(ws_->active_view(), ViewId::kSharding);
  ASSERT_EQ(ws_->model().sharding.tensors.size(), 2u);
  ASSERT_EQ(ws_->model().sharding.rematerializations.size(), 1u);
  EXPECT_EQ(ws_->placement().drawn_cells(),
            (std::vector<std::string>{"chip 0", "chip 1", "chip 2", "chip 3"}));  // x: a row block each
  EXPECT_EQ(Items("cell").size(), 4u);
  ws_->placement().Select(1);
  Frame();
  EXPECT_EQ(ws_->placement().drawn_cells(), (std::vector<std::string>{"chips 0,2", "chips 1,3"}));  // w's rows
  // Drawn to scale: each tile's extent along a split dim is its range's share of that dim.
  auto cells = Items("cell");
  ASSERT_EQ(cells.size(), 2u);
  auto length = [](const json& c, const char* key) {
    const std::string r = c[key].get<std::string>();
    const size_t colon = r.find(':');
    return std::stod(r.substr(colon + 1)) - std::stod(r.substr(0, colon));
  };
  for (const json& c : cells) EXPECT_TRUE(c["scaled"].get<bool>());
  const char* key = cells[0].contains("row_range") ? "row_range" : "column_range";
  const char* extent = cells[0].contains("row_range") ? "h" : "w";
  EXPECT_NEAR(cells[0][extent].get<double>() / cells[1][extent].get<double>(), length(cells[0], key) / length(cells[1], key),
              0.02);
}

// Clicking a collective keeps the user in the timeline: it is selected, its
// flow across the chips is drawn with the last to arrive marked, and the
// details panel offers the tensor it moves.
TEST_F(ViewsTest, ClickingACollectiveSelectsItAndDrawsItsFlow) {
  Open({.num_devices = 4, .num_hosts = 2, .late_device = 2});
  const int64_t id = testing::AllReduceSliceId(run_, 1, 0);
  ASSERT_NE(SliceRect(id), nullptr) << "step 1's all-reduce on chip 0 is not drawn on its own";
  Click(Center(*SliceRect(id)));
  ASSERT_TRUE(ws_->timeline().selection());
  EXPECT_EQ(ws_->timeline().selection()->slice.slice_id, id);
  EXPECT_TRUE(absl::StrContains(ws_->ui().selection_text, "all-reduce.2")) << ws_->ui().selection_text;
  Settle();
  Frame();
  EXPECT_EQ(ws_->active_view(), ViewId::kTimeline);
  // A flow from chip to chip: four members, three segments (the program's
  // dispatch flows carry a role).
  std::vector<json> flows;
  for (const json& f : Items("flow")) {
    if (!f.contains("role")) flows.push_back(f);
  }
  ASSERT_EQ(flows.size(), 3u);
  std::set<int64_t> members;
  for (const json& f : flows) {
    members.insert(f["from"]["slice_id"].get<int64_t>());
    members.insert(f["to"]["slice_id"].get<int64_t>());
    EXPECT_EQ(f["label"], "all-reduce.2");
  }
  for (int d = 0; d < 4; ++d) EXPECT_TRUE(members.contains(testing::AllReduceSliceId(run_, 1, d))) << d;
  bool details_named_it = false;
  for (const json& t : Items("text")) details_named_it |= absl::StrContains(t["label"].get<std::string>(), "all-reduce.2");
  EXPECT_TRUE(details_named_it);
  std::vector<json> last;
  for (const json& m : Items("marker")) {
    if (m.value("role", "") == "last_arrival") last.push_back(m);
  }

  // The moved tensor opens in Sharding only when asked, from the panel.
  std::vector<json> buttons;
  for (const json& b : Items("button")) {
    if (b.value("role", "") == "open_sharding") buttons.push_back(b);
  }
  ASSERT_EQ(buttons.size(), 1u);
  EXPECT_EQ(buttons[0]["ref"]["name"], "w");
  Click(Center(buttons[0]));
  Frame();
  Frame();
  EXPECT_EQ(ws_->active_view(), ViewId::kSharding);
  EXPECT_EQ(ws_->placement().selected(), 1u);  // w

  if (last.empty()) GTEST_SKIP() << "this store does not keep arrival_ns yet";
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["ref"]["slice_id"], testing::AllReduceSliceId(run_, 1, 2));
}

TEST_F(ViewsTest, ShapesDrawnDependOnTheScreen) {
  Open({.num_devices = 2, .tiny_slices = 30'000});
  EXPECT_LT(ws_->timeline().shapes_drawn(), 1500u);
}

// Lanes are drawn as images, one quad each, yet the layout still lists every
// shape with the stored row it shows, and the image holds the shape's colour
// where the layout says it is.
TEST_F(ViewsTest, LanesAreImagesAndTheLayoutStillListsTheirShapes) {
  Open({.num_devices = 4, .num_hosts = 2});
  const TimelineView& tl = ws_->timeline();
  ws_->timeline().ShowWindow(Clock::kDevice, 0, 2 * testing::kStepNs);
  Settle();
  Frame();
  EXPECT_EQ(tl.quads_drawn(), tl.lanes().size());
  EXPECT_GT(textures_.uploads, 0);
  ASSERT_EQ(textures_.w, tl.atlas().w);
  for (const json& lane : Items("lane")) EXPECT_EQ(lane["drawn_as"], "image") << lane.dump();
  int checked = 0;
  for (const json& rect : Items("rect")) {
    if (!rect["ref"].contains("slice_id")) continue;  // folds and columns have no single colour
    const ImVec2 c = Center(rect);
    if (c.x < tl.lanes().front().x + 1 || rect["w"].get<float>() < 3) continue;
    const SliceKind kind = ParseSliceKind(rect["kind"].get<std::string>());
    EXPECT_EQ(textures_.At(tl.atlas_x(), tl.atlas_y(), c.x, c.y), KindColor(kind).Packed())
        << "the image does not show " << rect.dump();
    ++checked;
  }
  EXPECT_GE(checked, 4 * 2 * testing::kSlicesPerDeviceStep);
  // Clicking a slice still selects it: the shapes are found from the data, not the pixels.
  const int64_t id = testing::AllReduceSliceId(run_, 1, 3);
  ASSERT_NE(SliceRect(id), nullptr);
  Click(Center(*SliceRect(id)));
  ASSERT_TRUE(tl.selection());
  EXPECT_EQ(tl.selection()->slice.slice_id, id);
}

// A pan within the image's margin moves the quads: no lane is drawn again and
// nothing is uploaded; the shapes move with the view.
TEST_F(ViewsTest, PanningMovesTheImagesWithoutRedrawingThem) {
  Open({.num_devices = 4, .num_hosts = 2, .steps = 12});
  ws_->timeline().ShowWindow(Clock::kDevice, 2 * testing::kStepNs, 6 * testing::kStepNs);
  Settle();
  Frame();
  const int64_t id = testing::AllReduceSliceId(run_, 4, 1);
  ASSERT_NE(SliceRect(id), nullptr);
  const float x_before = (*SliceRect(id))["x"].get<float>();
  const int uploads = textures_.uploads;
  for (int i = 0; i < 10; ++i) {
    ws_->timeline().PanPixels(7);
    Frame();
    EXPECT_EQ(ws_->timeline().lanes_rasterized(), 0u) << "frame " << i;
  }
  EXPECT_EQ(textures_.uploads, uploads);
  ASSERT_NE(SliceRect(id), nullptr);
  EXPECT_NEAR((*SliceRect(id))["x"].get<float>(), x_before - 70, 1.0f);
  // A zoom draws every lane again.
  ws_->timeline().ZoomBy(1.25);
  Frame();
  EXPECT_EQ(ws_->timeline().lanes_rasterized(), ws_->timeline().lanes().size());
}

// --follow reloads the run as its steps land: a view the user never moved
// fits the longer run; one zoomed into the middle stays where it was; one
// showing the run's end (the live edge) keeps its zoom and moves with the end;
// collapsed sections stay collapsed.
TEST_F(ViewsTest, AReloadOfTheSameRunKeepsTheUsersView) {
  Open({.num_devices = 2, .num_hosts = 1, .steps = 6});
  auto reload = [&](int steps) {
    const std::string db = testing::TempPath(absl::StrCat("views_", steps, ".db"));
    ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{.num_devices = 2, .num_hosts = 1, .steps = steps}}).ok());
    auto model = LoadTraceModel(db, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status();
    TimelineView::ViewState view = ws_->timeline().SaveView();
    ws_->SetModel(std::make_unique<TraceModel>(*std::move(model)));
    ws_->timeline().RestoreView(std::move(view));
    Settle();
  };
  const double fit6 = ws_->timeline().ns_per_px();
  reload(12);
  EXPECT_GT(ws_->timeline().ns_per_px(), 1.3 * fit6) << "an unmoved view fits the longer run";

  ws_->timeline().ShowWindow(Clock::kDevice, 2 * testing::kStepNs, 4 * testing::kStepNs);
  ws_->timeline().SetCollapsed("host", true);
  Settle();
  const double t0 = ws_->timeline().offset_ns(), ns_per_px = ws_->timeline().ns_per_px();
  reload(18);
  EXPECT_DOUBLE_EQ(ws_->timeline().ns_per_px(), ns_per_px);
  EXPECT_DOUBLE_EQ(ws_->timeline().offset_ns(), t0);
  EXPECT_TRUE(ws_->timeline().collapsed().contains("host"));

  // At the live edge: the newest step (17) on screen.
  ws_->timeline().ShowWindow(Clock::kDevice, 15 * testing::kStepNs, 19 * testing::kStepNs);
  Settle();
  const double edge_t0 = ws_->timeline().offset_ns(), edge_ns_per_px = ws_->timeline().ns_per_px();
  reload(24);
  EXPECT_DOUBLE_EQ(ws_->timeline().ns_per_px(), edge_ns_per_px);
  EXPECT_NEAR(ws_->timeline().offset_ns(), edge_t0 + 6 * testing::kStepNs, 0.1 * testing::kStepNs);
}

// What a frame hands the renderer follows the screen, not the trace: a
// hundred times the slices, about the same vertices.
TEST_F(ViewsTest, AFramesVerticesDoNotGrowWithTheTrace) {
  auto vertices = [&](int tiny) {
    Open({.num_devices = 2, .tiny_slices = tiny});
    Frame();
    const ImDrawData* data = ImGui::GetDrawData();
    return data ? data->TotalVtxCount : -1;
  };
  const int small = vertices(1'000);
  const int large = vertices(100'000);
  ASSERT_GT(small, 0);
  EXPECT_LT(large, 12'000);
  EXPECT_LT(std::abs(large - small), 1'000) << small << " vs " << large;
}

// Every lane of a section is crossed by that section's step markers; folds
// hold one step; no ruler shows a time before its clock's zero.
TEST_F(ViewsTest, StepMarkersCrossEveryLaneAndFoldsStayInTheirStep) {
  Open({.num_devices = 4, .num_hosts = 2, .steps = 12});
  ws_->timeline().ShowWindow(Clock::kDevice, 0, 12 * testing::kStepNs);
  Settle();
  std::map<std::string, std::vector<json>> markers;
  for (const json& m : Items("marker")) {
    if (m.value("role", "") == "step") {
      markers[m["clock"]].push_back(m);
    }
  }
  ASSERT_EQ(markers["device"].size(), 12u);
  ASSERT_EQ(markers["host"].size(), 12u);
  for (const json& lane : Items("lane")) {
    const auto& mine = markers[lane["clock"]];
    ASSERT_FALSE(mine.empty());
    for (const json& m : mine) {
      EXPECT_LE(m["y"].get<float>(), lane["y"].get<float>());
      EXPECT_GE(m["y"].get<float>() + m["h"].get<float>(), lane["y"].get<float>() + lane["h"].get<float>());
    }
  }
  for (const json& r : Items("rect")) EXPECT_EQ(r["first_step"], r["last_step"]) << r.dump();
  for (const json& t : Items("text")) {
    if (t.value("role", "") == "tick") {
      EXPECT_GE(t["t_ns"].get<double>(), 0) << t.dump();
    }
  }
}

// The chips' clock starts at 0 and the host's at 5 s; each step's program
// must show after the host dispatched it, never before.
TEST_F(ViewsTest, DeviceWorkShowsAfterTheHostDispatchedIt) {
  Open({.num_devices = 2, .num_hosts = 1});
  std::map<int, float> device_step_x, host_mark_step_end;
  for (const json& m : Items("marker")) {
    if (m.value("role", "") == "step" && m["clock"] == "device") device_step_x[m["ref"]["step"]] = m["x"];
  }
  for (const json& r : Items("rect")) {
    // mark_step ends at the dispatch (kDispatchAfterNs after it starts).
    if (r["label"] == "mark_step") {
      host_mark_step_end[r["first_step"]] = r["x"].get<float>() + r["w"].get<float>();
    }
  }
  ASSERT_EQ(device_step_x.size(), 6u);
  ASSERT_EQ(host_mark_step_end.size(), 6u);
  for (auto [step, x] : device_step_x) {
    EXPECT_GE(x, host_mark_step_end[step] - 1.5f) << "step " << step << " runs before its dispatch";
    EXPECT_LE(x, host_mark_step_end[step] + 1.5f) << "step " << step << " drawn far from its dispatch";
  }
  bool aligned_note = false;
  for (const json& a : Items("axis")) {
    if (a["clock"] == "device") {
      EXPECT_EQ(a["offset_ns"], testing::kHostClockStart + testing::kDispatchAfterNs);
      aligned_note = absl::StrContains(a["note"].get<std::string>(), "dispatch");
    }
  }
  EXPECT_TRUE(aligned_note);
}

TEST_F(ViewsTest, SixtyFourChipsAndTheHostLanesFitTheWindow) {
  Open({.num_devices = 64, .num_hosts = 8, .steps = 3});
  const auto& lanes = ws_->timeline().lanes();
  int chips = 0, hosts = 0;
  for (const LaneRect& lane : lanes) {
    (lane.device_id ? chips : hosts)++;
    EXPECT_GE(lane.h, 6.0f);
    EXPECT_LE(lane.y + lane.h, ImGui::GetIO().DisplaySize.y) << "lane off screen";
  }
  EXPECT_EQ(chips, 64);
  EXPECT_EQ(hosts, 8);
  EXPECT_TRUE(ws_->timeline().layout().fits);

  // A host's header collapses its chips.
  const json header = Items("group").at(0);
  Click(Center(header));
  Settle();
  EXPECT_EQ(ws_->timeline().lanes().size(), 64u + 8u - 8u);
}

// The modeled clock has its own section and ruler, collapsed while measured
// device lanes are shown; opened, its lanes are placed after the host's
// dispatch like the device clock's.
TEST_F(ViewsTest, TheModeledClockHasItsOwnCollapsedSection) {
  Open({.num_devices = 2, .num_hosts = 1, .with_modeled = true});
  std::vector<json> axes = Items("axis");
  ASSERT_EQ(axes.size(), 3u);
  EXPECT_EQ(axes[1]["label"], "modeled clock");
  EXPECT_TRUE(axes[1]["collapsed"].get<bool>());
  for (const json& lane : Items("lane")) EXPECT_NE(lane["clock"], "modeled");
  Click(Center(axes[1]));
  Settle();
  int modeled = 0;
  for (const json& lane : Items("lane")) modeled += lane["clock"] == "modeled";
  EXPECT_EQ(modeled, 2);
  for (const json& a : Items("axis")) {
    if (a["clock"] == "modeled") {
      EXPECT_FALSE(a["collapsed"].get<bool>());
      EXPECT_EQ(a["offset_ns"], testing::kHostClockStart + testing::kDispatchAfterNs);
    }
  }
}

TEST_F(ViewsTest, CountersHaveLanes) {
  Open({.num_devices = 4, .num_hosts = 2, .with_counters = true});
  auto counters = Items("counter");
  ASSERT_EQ(counters.size(), 5u);
  std::set<std::string> labels;
  for (const json& c : counters) {
    labels.insert(c["label"]);
    EXPECT_GT(c["columns"].get<int>(), 0);
  }
  EXPECT_TRUE(labels.contains("hbm_bytes_in_use chip 3"));
  EXPECT_TRUE(labels.contains("CreateTensor"));
}

}  // namespace
}  // namespace shardscope::app

namespace shardscope::app {
namespace {

// The Graph view and the timeline lead to each other through UiState: a
// kernel's "Open its op in Graph" opens the Graph view at that op, and an op
// picked there marks its slices, found in the whole run, on the timeline.
TEST_F(ViewsTest, AKernelOpensInGraphAndAGraphOpMarksItsSlices) {
  Open({.num_devices = 4, .num_hosts = 2});
  const int64_t id = testing::AllReduceSliceId(run_, 2, 1);  // op 9 of graph 1
  ws_->timeline().SelectSliceId(id);
  Settle();
  json open;
  for (const json& b : Items("button")) {
    if (b.value("role", "") == "open_graph") open = b;
  }
  ASSERT_FALSE(open.is_null()) << "no Open in Graph button for the selected kernel";
  EXPECT_EQ(open["ref"]["graph_id"], 1);
  EXPECT_EQ(open["ref"]["op_id"], 9);
  Click(Center(open));
  Frame();
  Settle();
  EXPECT_EQ(ws_->active_view(), ViewId::kGraph);
  EXPECT_EQ(ws_->graph().graph_id(), 1);
  EXPECT_EQ(ws_->graph().center_id(), 9);
  // This fixture stores no IR text: the view says so in one line.
  std::vector<json> no_ir;
  for (const json& t : Items("text")) {
    if (t.value("role", "") == "no_ir") no_ir.push_back(t);
  }
  EXPECT_EQ(no_ir.size(), 1u);

  // An op picked in Graph: back on the timeline its slices are the hits.
  ws_->ui().highlight_op = GraphFocus{1, 9};
  ws_->ui().bring_to_front = ViewId::kTimeline;
  Frame();
  Settle();
  EXPECT_EQ(ws_->active_view(), ViewId::kTimeline);
  EXPECT_EQ(ws_->timeline().search_hits().size(), size_t(4 * run_.steps));
  for (const auto& hit : ws_->timeline().search_hits()) EXPECT_EQ(hit.slice.op_id, 9);
  json search;
  for (const json& t : Items("text")) {
    if (t.value("role", "") == "search") search = t;
  }
  ASSERT_FALSE(search.is_null());
  EXPECT_EQ(search["op"]["graph_id"], 1);
  EXPECT_EQ(search["op"]["op_id"], 9);
  EXPECT_EQ(search["total"], 4 * run_.steps);
}

}  // namespace
}  // namespace shardscope::app

namespace shardscope::app {
namespace {

// Fleet: a cell per chip; clicking one brings the timeline forward with that
// chip's lane outlined at the step the Fleet view showed.
TEST_F(ViewsTest, ClickingAChipInFleetOpensItsLaneAtThatStep) {
  Open({.num_devices = 4, .num_hosts = 2});
  ws_->ui().bring_to_front = ViewId::kFleet;
  ws_->fleet().SetStep(2);
  Settle();
  ASSERT_EQ(dump_.view(), "fleet");
  std::vector<json> cells = Items("chip");
  ASSERT_EQ(cells.size(), 4u);
  const json& chip = cells[2];
  EXPECT_EQ(chip["step"], 2);
  Click(Center(chip));
  EXPECT_EQ(ws_->ui().show_chip->device_id, chip["ref"]["device_id"].get<int>());
  Frame();
  Frame();
  EXPECT_EQ(ws_->active_view(), ViewId::kTimeline);
  Settle();
  Frame();
  std::vector<json> focus;
  for (const json& m : Items("marker"))
    if (m.value("role", "") == "focus") focus.push_back(m);
  ASSERT_EQ(focus.size(), 1u);
  EXPECT_EQ(focus[0]["step"], 2);
  EXPECT_EQ(focus[0]["label"], absl::StrCat("chip ", chip["ref"]["device_id"].get<int>()));
}

// A lane deep in a pod, opened from Fleet: the timeline scrolls to it, and
// its clock's header, ruler and step labels stay pinned at the top over the
// lanes instead of scrolling away with their place.
TEST_F(ViewsTest, AChipDeepInAPodOpensWithItsRulerInSight) {
  Open({.num_devices = 256, .num_hosts = 16});  // lanes past the window at their least height
  ws_->ui().bring_to_front = ViewId::kFleet;
  ws_->fleet().SetStep(2);
  Settle();
  std::vector<json> cells = Items("chip");
  ASSERT_EQ(cells.size(), 256u);
  Click(Center(cells.back()));
  Frame();
  Frame();
  ASSERT_EQ(ws_->active_view(), ViewId::kTimeline);
  Settle();
  Frame();
  json focus;
  for (const json& m : Items("marker"))
    if (m.value("role", "") == "focus") focus = m;
  ASSERT_FALSE(focus.is_null());
  std::vector<json> pinned;
  for (const json& a : Items("axis"))
    if (a.value("pinned", false)) pinned.push_back(a);
  ASSERT_EQ(pinned.size(), 1u) << "the chip's lane is far enough down that its clock's header scrolled away";
  EXPECT_EQ(pinned[0]["clock"], focus["ref"].value("clock", pinned[0]["clock"].get<std::string>()));
  EXPECT_LT(pinned[0]["y"].get<float>(), focus["y"].get<float>());  // above the lane, in sight
  int ticks = 0;
  for (const json& t : Items("text"))
    if (t.value("role", "") == "tick" && t["clock"] == pinned[0]["clock"]) {
      ++ticks;
      EXPECT_GE(t["y"].get<float>(), pinned[0]["y"].get<float>());
      EXPECT_LE(t["y"].get<float>(), pinned[0]["y"].get<float>() + pinned[0]["h"].get<float>());
    }
  EXPECT_GT(ticks, 1);
}

// What a run's capture settings left out is said above the lanes: a blank
// stretch of timeline (--trace-ring, --trace off) is never a silent gap.
TEST_F(ViewsTest, TimelineSaysWhatTheCaptureLeftOut) {
  const std::string note = "timeline kept for the last 2 steps only (a ring): steps up to 3 were dropped";
  OpenEdited({}, absl::StrCat("UPDATE runs SET capture_note = '", note, "'"), ViewId::kTimeline);
  ASSERT_EQ(dump_.view(), "timeline");
  std::vector<json> said;
  for (const json& t : Items("text"))
    if (t.value("role", "") == "capture") said.push_back(t);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0]["label"], absl::StrCat("capture: ", note));
  // Above the lanes, not over them.
  for (const json& lane : Items("lane")) EXPECT_GE(lane["y"].get<float>(), said[0]["y"].get<float>() + 10);

  Open({});  // nothing left out: nothing said
  for (const json& t : Items("text")) EXPECT_NE(t.value("role", ""), "capture");
}

// A line of the Overview wider than the window wraps inside it (a verdict or
// a note of 300 characters was cut off at the window's edge).
TEST_F(ViewsTest, OverviewLinesWrapInsideTheWindow) {
  std::string note = "steps 0-99 not captured";
  while (note.size() < 400) note += ", and a long explanation of what the capture settings left out";
  OpenEdited({}, absl::StrCat("UPDATE runs SET capture_note = '", note, "'"), ViewId::kOverview);
  ASSERT_EQ(dump_.view(), "overview");
  const float width = ImGui::GetIO().DisplaySize.x;
  bool found = false;
  for (const json& item : dump_.doc()["items"]) {
    EXPECT_LE(item["x"].get<float>() + item["w"].get<float>(), width) << item.dump();
    if (item["label"] == absl::StrCat("capture: ", note)) {
      found = true;
      EXPECT_GT(item["h"].get<float>(), 2 * ImGui::GetTextLineHeight()) << "not wrapped: " << item.dump();
    }
  }
  EXPECT_TRUE(found);
}

// Steps of uneven length: a step marker's label is left out where the one
// before it still is (the host ruler of a simulated pod read "step 1step 2").
TEST_F(ViewsTest, StepLabelsDoNotOverlap) {
  OpenEdited({}, "UPDATE step_bounds SET start_ns = start_ns - 990000 WHERE step = 3", ViewId::kTimeline);
  ASSERT_EQ(dump_.view(), "timeline");
  std::map<std::string, std::vector<json>> by_clock;
  for (const json& m : Items("marker"))
    if (m.value("role", "") == "step") by_clock[m["clock"].get<std::string>()].push_back(m);
  ASSERT_FALSE(by_clock.empty());
  int left_out = 0;
  for (auto& [clock, markers] : by_clock) {
    std::sort(markers.begin(), markers.end(),
              [](const json& a, const json& b) { return a["x"].get<float>() < b["x"].get<float>(); });
    float last = -1e9;
    for (const json& m : markers) {
      if (!m["labelled"].get<bool>()) {
        ++left_out;
        continue;
      }
      EXPECT_GE(m["x"].get<float>() - last, 40) << clock << ": " << m.dump();  // "step N" is ~40 px
      last = m["x"].get<float>();
    }
  }
  EXPECT_GT(left_out, 0);
}

// The Metrics view's warnings wrap inside the window too (a value-read
// warning on a 175-step run ran 29 px past a 1600 px window).
TEST_F(ViewsTest, MetricsWarningsWrapInsideTheWindow) {
  ImGui::GetIO().DisplaySize = ImVec2(700, 860);
  OpenEdited({}, "INSERT OR REPLACE INTO steps(run_id, step, loss, wall_ns) VALUES (1, 2, 'NaN', 1000000)",
             ViewId::kMetrics);
  ASSERT_EQ(dump_.view(), "metrics");
  const std::vector<json> warnings = Items("warning");
  ASSERT_FALSE(warnings.empty());
  for (const json& w : warnings) {
    EXPECT_LE(w["x"].get<float>() + w["w"].get<float>(), 700) << w.dump();
    EXPECT_GE(w["h"].get<float>(), 2 * ImGui::GetTextLineHeight()) << "not wrapped: " << w.dump();
  }
}

// A simulated run has no device clock: its warnings put the faults and the
// chips' times on the modeled clock.
TEST_F(ViewsTest, SimulatedRunsWarningsNameTheModeledClock) {
  OpenEdited({.with_modeled = true},
             "UPDATE runs SET simulated = 1, clock_kinds = 'host,modeled', "
             "config_json = json_set(config_json, '$.faults', json_array('slow-chip:1:0.6'))",
             ViewId::kOverview);
  ASSERT_EQ(dump_.view(), "overview");
  int faults = 0, simulated = 0;
  for (const json& w : Items("warning")) {
    const std::string text = w["label"];
    EXPECT_FALSE(absl::StrContains(text, "on the device clock") || absl::StrContains(text, "device times")) << text;
    if (absl::StrContains(text, "faults were injected on the modeled clock")) ++faults;
    if (absl::StartsWith(text, "simulated:")) ++simulated;
  }
  EXPECT_EQ(faults, 1);
  EXPECT_EQ(simulated, 1);
}

// The run line beside the menus: an imported trace has no mesh to name, and
// one chip or host is singular.
TEST(RunLineTest, SaysOnlyWhatTheRunHas) {
  RunInfo imported{.run_id = 1, .sample = "rank0.json +1", .mesh = "", .profile = "none", .num_hosts = 2,
                   .num_devices = 0, .status = "finished"};
  EXPECT_EQ(RunLine(imported), "run 1: rank0.json +1, 0 chips on 2 hosts, profile none");
  RunInfo one{.run_id = 4, .sample = "recompile_storm", .mesh = "1x1", .profile = "cpu", .num_hosts = 1,
              .num_devices = 1, .status = "ended abnormally"};
  EXPECT_EQ(RunLine(one), "run 4: recompile_storm, mesh 1x1, 1 chip on 1 host, profile cpu [ended abnormally]");
}

// A view's model reads one snapshot of a run being written (WAL): a step
// landing between two of its queries does not make them disagree (the
// Overview said "a value is read back in 189 of 187 steps" on a live run).
TEST(BackgroundModelTest, ABuildReadsOneSnapshotOfARunBeingWritten) {
  const std::string db = testing::TempPath("snapshot.db");
  ASSERT_TRUE(testing::WriteFixtureDb(db, {testing::FixtureRun{}}).ok());
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &writer), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(writer, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr), SQLITE_OK);
  BackgroundModel<std::pair<int64_t, int64_t>> job;
  job.Start(db, [writer](const store::Reader& r) -> absl::StatusOr<std::pair<int64_t, int64_t>> {
    auto before = r.Query("SELECT COUNT(*) AS n FROM steps");
    if (!before.ok()) return before.status();
    // The writer commits a step while the build is between its queries.
    if (sqlite3_exec(writer, "INSERT INTO steps(run_id, step, wall_ns) VALUES (1, 1000, 1)", nullptr, nullptr,
                     nullptr) != SQLITE_OK)
      return absl::InternalError(sqlite3_errmsg(writer));
    auto after = r.Query("SELECT COUNT(*) AS n FROM steps");
    if (!after.ok()) return after.status();
    return std::pair{before->Int(0, "n"), after->Int(0, "n")};
  });
  ASSERT_TRUE(job.Wait(30));
  ASSERT_TRUE(job.result()->ok()) << job.result()->status();
  EXPECT_EQ(job.get()->first, job.get()->second);
  sqlite3_close(writer);
}

// The chips holding a tile, short enough to read: a tensor replicated on a
// 4096-chip pod listed every chip, 20,000 characters off the screen.
TEST(ChipsShortTest, ConsecutiveChipsAreRanges) {
  EXPECT_EQ(ChipsShort({}), "-");
  EXPECT_EQ(ChipsShort({3}), "chip 3");
  EXPECT_EQ(ChipsShort({0, 2}), "chips 0,2");
  EXPECT_EQ(ChipsShort({0, 1}), "chips 0,1");
  EXPECT_EQ(ChipsShort({0, 1, 2, 3, 8, 9, 10, 11, 13}), "chips 0-3,8-11,13");
  std::vector<int64_t> pod(4096);
  for (int i = 0; i < 4096; ++i) pod[i] = i;
  EXPECT_EQ(ChipsShort(pod), "chips 0-4095");
}

// The suspects list's colours say what the heatmap outlines: a chip under the
// threshold is listed, but neither outlined nor amber; amber is for those over
// it and not flagged.
TEST_F(ViewsTest, FleetListMarksOnlyTheOutlinedSuspects) {
  Open({.num_devices = 4, .num_hosts = 2});
  ws_->ui().bring_to_front = ViewId::kFleet;
  Settle();
  ASSERT_EQ(dump_.view(), "fleet");
  std::set<std::string> outlined;
  auto key = [](const json& j) { return absl::StrCat(j["kind"].get<std::string>(), " ", j["id"].get<std::string>()); };
  for (const json& o : Items("suspect")) outlined.insert(key(o));
  int listed = 0, below = 0;
  for (const json& t : Items("text")) {
    if (t.value("role", "") != "suspect") continue;
    ++listed;
    const bool expect = t["flagged"].get<bool>() || (t["rank"].get<int>() <= 10 && t["score"].get<double>() >= 0.08);
    EXPECT_EQ(t["outlined"].get<bool>(), expect) << t.dump();
    EXPECT_EQ(outlined.count(key(t)) > 0, expect) << t.dump();
    below += t["score"].get<double>() < 0.08 && !t["flagged"].get<bool>();
  }
  EXPECT_GT(listed, 1);
  EXPECT_GT(below, 0) << "the fixture should rank chips under the threshold";
}

}  // namespace
}  // namespace shardscope::app
