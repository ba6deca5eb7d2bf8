// Tests of the workstation's views driven through ImGui without a display or
// GL: ImGui runs on a bare context (a built font atlas and a display size are
// all it needs), and the tests feed it mouse input frame by frame, then check
// that wheel zoom keeps the time under the mouse, dragging pans, clicking a
// compile marker opens the Recompilations view, lanes are one per device, and
// the Sharding tab draws a tensor's tiles.
#include <imgui.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/app/fixture.h"
#include "ui/app/workstation.h"

namespace shardscope::app {
namespace {

class ViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1400, 800);
    io.DeltaTime = 1.0f / 60;
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas
  }
  void TearDown() override {
    ws_.reset();
    ImGui::DestroyContext();
  }

  void Open(const testing::FixtureRun& run) {
    std::string db = testing::TempPath("views.db");
    ASSERT_TRUE(testing::WriteFixtureDb(db, {run}).ok());
    auto model = LoadTraceModel(db, std::nullopt);
    ASSERT_TRUE(model.ok()) << model.status();
    ws_ = std::make_unique<Workstation>(std::make_unique<TraceModel>(*std::move(model)));
    for (int i = 0; i < 3; ++i) Frame();  // let the layout settle
  }

  // One frame with the mouse at `pos`, the left button as given, and a wheel.
  void Frame(ImVec2 pos = ImVec2(-FLT_MAX, -FLT_MAX), bool down = false, float wheel = 0) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = pos;
    io.MouseDown[0] = down;
    io.MouseWheel = wheel;
    ImGui::NewFrame();
    ws_->Draw();
    ImGui::Render();
  }

  const LaneRect& DeviceLane(int device) {
    for (const LaneRect& lane : ws_->timeline().lanes()) {
      if (lane.device_id == device) return lane;
    }
    ADD_FAILURE() << "no lane for device " << device;
    return ws_->timeline().lanes().front();
  }

  std::unique_ptr<Workstation> ws_;
};

TEST_F(ViewsTest, OneLanePerDeviceThenHostThreads) {
  Open({.num_devices = 5, .num_hosts = 2});
  const auto& lanes = ws_->timeline().lanes();
  ASSERT_EQ(lanes.size(), 7u);
  for (int d = 0; d < 5; ++d) {
    EXPECT_EQ(lanes[d].device_id, d);
    EXPECT_EQ(lanes[d].clock, Clock::kDevice);
    EXPECT_GT(lanes[d].blocks_drawn, 0u);
  }
  EXPECT_EQ(lanes[5].clock, Clock::kHost);
  EXPECT_GT(lanes[5].y, lanes[4].y + lanes[4].h - 1);
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
  EXPECT_LT(DeviceLane(1).blocks_drawn, 18u);
}

TEST_F(ViewsTest, DragPans) {
  Open({.num_devices = 2});
  const TimelineView& tl = ws_->timeline();
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
  const TimelineView& tl = ws_->timeline();
  const Compilation& second = ws_->model().compilations[1];
  auto host = ws_->model().ClockExtent(Clock::kHost);
  ASSERT_TRUE(host);
  const LaneRect& host_lane = ws_->timeline().lanes().back();
  ASSERT_EQ(host_lane.clock, Clock::kHost);
  // The compile lane sits right above the first host thread's lane.
  const float x = host_lane.x + static_cast<float>((second.host_start_ns - host->first -
                                                    tl.offset_ns()) / tl.ns_per_px()) + 2;
  const float y = host_lane.y - 20;
  Frame(ImVec2(x, y));
  Frame(ImVec2(x, y), true);
  Frame(ImVec2(x, y), false);
  EXPECT_EQ(ws_->ui().selected_compile_id, second.compile_id);
  EXPECT_EQ(ws_->active_view(), ViewId::kTimeline);
  Frame();
  Frame();
  EXPECT_EQ(ws_->active_view(), ViewId::kRecompilations);
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
  ws_->placement().Select(1);
  Frame();
  EXPECT_EQ(ws_->placement().drawn_cells(), (std::vector<std::string>{"chips 0,2", "chips 1,3"}));  // w's rows
}

// Clicking a collective on a device lane opens the Sharding tab on the
// tensor it moves (the fixture's all-reduce adds up w's gradient).
TEST_F(ViewsTest, ClickingACollectiveOpensItsTensorInSharding) {
  Open({});
  const TimelineView& tl = ws_->timeline();
  const LaneRect lane = DeviceLane(0);
  auto device = ws_->model().ClockExtent(Clock::kDevice);
  ASSERT_TRUE(device);
  // Step 1's all-reduce on chip 0 starts at 1.6 ms and lasts 0.2 ms.
  const float x = lane.x + static_cast<float>((testing::kStepNs + 700'000 - device->first - tl.offset_ns()) / tl.ns_per_px());
  const float y = lane.y + lane.h / 2;
  ASSERT_EQ(ws_->placement().selected(), 0u);  // x
  Frame(ImVec2(x, y));
  Frame(ImVec2(x, y), true);
  Frame(ImVec2(x, y), false);
  EXPECT_TRUE(absl::StrContains(ws_->ui().selection_text, "all-reduce.2")) << ws_->ui().selection_text;
  Frame();
  Frame();
  EXPECT_EQ(ws_->active_view(), ViewId::kSharding);
  EXPECT_EQ(ws_->placement().selected(), 1u);  // w
  EXPECT_EQ(ws_->placement().drawn_cells(), (std::vector<std::string>{"chips 0,2", "chips 1,3"}));
}

TEST_F(ViewsTest, ShapesDrawnDependOnTheScreen) {
  Open({.num_devices = 2, .tiny_slices = 100'000});
  EXPECT_EQ(ws_->model().num_slices, size_t(100'000 + 6 * (2 * 3 + 2 * 2)));
  EXPECT_LT(ws_->timeline().shapes_drawn(), 1500u);
}

}  // namespace
}  // namespace shardscope::app
