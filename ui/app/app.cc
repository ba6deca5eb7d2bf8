// The desktop shell; see app.h. Everything that touches GLFW or OpenGL lives
// here, so the views stay plain ImGui.
#include "ui/app/app.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <GL/gl.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "store/reader.h"
#include "ui/app/app_menu.h"
#include "ui/app/lane_texture.h"
#include "ui/app/layout_dump.h"
#include "ui/app/palette.h"
#include "ui/app/timeline_nav.h"
#include "ui/app/trace_model.h"
#include "ui/app/workstation.h"

namespace shardscope::app {

namespace {

// The timeline's lane images as OpenGL textures (lane_texture.h): nearest
// texels, no mipmaps; the images are opaque, so they are drawn with blending
// off (the software renderer then need not read what is under them).
class GlTextureHost : public TextureHost {
 public:
  ImTextureID Create() override {
    GLuint tex = 0;
    glGenTextures(1, &tex);
    glBindTexture(GL_TEXTURE_2D, tex);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(tex));
  }
  void Upload(ImTextureID id, int w, int h, const uint32_t* pixels) override {
    glBindTexture(GL_TEXTURE_2D, Name(id));
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, pixels);
  }
  void UploadRows(ImTextureID id, int w, int y0, int rows, const uint32_t* pixels) override {
    glBindTexture(GL_TEXTURE_2D, Name(id));
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, y0, w, rows, GL_RGBA, GL_UNSIGNED_BYTE, pixels);
  }
  void Release(ImTextureID id) override {
    GLuint tex = Name(id);
    glDeleteTextures(1, &tex);
  }
  ImDrawCallback OpaqueBegin() const override {
    return [](const ImDrawList*, const ImDrawCmd*) { glDisable(GL_BLEND); };
  }

 private:
  static GLuint Name(ImTextureID id) { return static_cast<GLuint>(reinterpret_cast<intptr_t>(id)); }
};

// --follow: the newest run and how many steps of it have landed (each step's
// slices arrive in the same transaction as its row, so a reload never shows
// half a step). nullopt when the file cannot be read just now.
std::optional<std::pair<int64_t, int64_t>> FollowState(const std::string& path) {
  auto r = store::Reader::Open(path);
  if (!r.ok()) return std::nullopt;
  auto q = r->Query(
      "SELECT r.run_id AS run, (SELECT count(*) FROM steps s WHERE s.run_id = r.run_id) AS steps"
      " FROM runs r ORDER BY r.run_id DESC LIMIT 1");
  if (!q.ok() || q->rows.empty()) return std::nullopt;
  return std::pair{q->Int(0, "run"), q->Int(0, "steps")};
}

}  // namespace
namespace {

// Frames drawn before a screenshot: ImGui sizes windows and tables from the
// previous frame, so the first frames are not yet laid out.
constexpr int kScreenshotFrames = 4;

// "3, 5, 9" or "0-7": what a run has, for an error that names what it lacks.
std::string Listing(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) return "none";
  if (ids.back() - ids.front() + 1 == static_cast<int64_t>(ids.size()) && ids.size() > 2)
    return absl::StrCat(ids.front(), "-", ids.back());
  std::string out;
  for (size_t i = 0; i < ids.size() && i < 12; ++i) absl::StrAppend(&out, i ? ", " : "", ids[i]);
  if (ids.size() > 12) absl::StrAppend(&out, " ... (", ids.size(), ")");
  return out;
}

// What the command line asks of the run that the loaded model can answer at
// once (the timeline answers --select, --range and --search when they land).
std::vector<std::string> OptionsNotInRun(const AppOptions& o, const TraceModel& m) {
  std::vector<std::string> errors;
  const std::string run = absl::StrCat("run ", m.run.run_id);
  std::vector<int64_t> compiles, graphs, steps(m.steps.begin(), m.steps.end()), chips;
  for (const Compilation& c : m.compilations) compiles.push_back(c.compile_id), graphs.push_back(c.graph_id);
  for (const Track& t : m.tracks)
    if (t.device_id) chips.push_back(*t.device_id);
  auto has = [](const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  if (o.compile_id && !has(compiles, *o.compile_id))
    errors.push_back(absl::StrCat("--compile ", *o.compile_id, ": ", run, " has no compilation ", *o.compile_id,
                                  " (it has ", Listing(compiles), ")"));
  if (o.graph_op && !has(graphs, o.graph_op->first))
    errors.push_back(absl::StrCat("--graph ", o.graph_op->first, ": ", run, " compiled no graph ", o.graph_op->first,
                                  " (it has ", Listing(graphs), ")"));
  if (o.step && !has(steps, *o.step))
    errors.push_back(
        absl::StrCat("--step ", *o.step, ": ", run, " has no step ", *o.step, " (it has ", Listing(steps), ")"));
  if (o.chip && !has(chips, *o.chip))
    errors.push_back(
        absl::StrCat("--chip ", *o.chip, ": ", run, " has no chip ", *o.chip, " (it has ", Listing(chips), ")"));
  if (auto range = ParseRangeArg(o.range); !o.range.empty() && range.ok() && !m.HasClock(range->clock))
    errors.push_back(absl::StrCat("--range ", o.range, ": ", run, " has no timeline on the ", ClockLabel(range->clock)));
  return errors;
}

// A file the store's writer has made but not yet given its schema (it is
// being created this moment), or an empty one.
bool NoTablesYet(const std::string& path) {
  sqlite3* db = nullptr;
  bool empty = false;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      empty = sqlite3_column_int64(st, 0) == 0;
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return empty;
}

std::string g_glfw_error;
// glfwInit has returned: from then on other threads may post empty events.
std::atomic<bool> g_glfw_ready{false};

void OnGlfwError(int code, const char* description) {
  g_glfw_error = absl::StrFormat("%s (GLFW error %#x)", description, code);
}

// A readable font when the system has one; ImGui's built-in bitmap font is
// small on today's screens. Checked first: ImGui asserts on a missing file.
void LoadFont(ImGuiIO& io) {
  for (const char* path : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                           "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
                           "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      if (io.Fonts->AddFontFromFileTTF(path, 15.0f)) return;
    }
  }
  io.Fonts->AddFontDefault();
}

void ApplyStyle() {
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0;
  style.FrameRounding = 3;
  style.TabRounding = 3;
  style.Colors[ImGuiCol_WindowBg] =
      ImVec4(kBackground.r / 255.f, kBackground.g / 255.f, kBackground.b / 255.f, 1);
}

// Reads the back buffer just rendered and writes it as a PNG, top row first.
bool WriteScreenshot(const std::string& path, int width, int height) {
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  // OpenGL's rows run bottom-up; PNG's top-down.
  std::vector<unsigned char> flipped(pixels.size());
  const size_t stride = static_cast<size_t>(width) * 3;
  for (int y = 0; y < height; ++y) {
    std::copy_n(&pixels[(height - 1 - y) * stride], stride, &flipped[y * stride]);
  }
  return stbi_write_png(path.c_str(), width, height, 3, flipped.data(),
                        static_cast<int>(stride)) != 0;
}

// One line per lane drawn: the screenshot test reads these to know where each
// device's slices should be and in which colour.
void PrintLanes(const Workstation& ws, float scale_x, float scale_y) {
  const Rgb compute = KindColor(SliceKind::kCompute);
  for (const LaneRect& lane : ws.timeline().lanes()) {
    std::string who = lane.device_id ? absl::StrFormat("device=%d", *lane.device_id)
                                     : absl::StrFormat("host=%d", lane.host_id);
    std::printf("lane %s track=%lld clock=%s x=%d y=%d w=%d h=%d color=%02x%02x%02x blocks=%zu\n",
                who.c_str(), static_cast<long long>(lane.track_id), ClockName(lane.clock),
                static_cast<int>(lane.x * scale_x), static_cast<int>(lane.y * scale_y),
                static_cast<int>(lane.w * scale_x), static_cast<int>(lane.h * scale_y), compute.r,
                compute.g, compute.b, lane.blocks_drawn);
  }
}

bool HaveDisplay() {
  const char* x = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  return (x && *x) || (wayland && *wayland);
}

// Input seen since the last frame. Set by GLFW callbacks installed before
// ImGui's, which chain to them, so the loop knows an empty event (data from
// the loader: one frame) from input (a few frames, for ImGui to settle).
std::atomic<bool> g_input{false};

void InstallInputFlags(GLFWwindow* window) {
  glfwSetCursorPosCallback(window, [](GLFWwindow*, double, double) { g_input = true; });
  glfwSetMouseButtonCallback(window, [](GLFWwindow*, int, int, int) { g_input = true; });
  glfwSetScrollCallback(window, [](GLFWwindow*, double, double) { g_input = true; });
  glfwSetKeyCallback(window, [](GLFWwindow*, int, int, int, int) { g_input = true; });
  glfwSetCharCallback(window, [](GLFWwindow*, unsigned int) { g_input = true; });
  glfwSetWindowFocusCallback(window, [](GLFWwindow*, int) { g_input = true; });
  glfwSetCursorEnterCallback(window, [](GLFWwindow*, int) { g_input = true; });
  glfwSetWindowSizeCallback(window, [](GLFWwindow*, int, int) { g_input = true; });
  glfwSetWindowRefreshCallback(window, [](GLFWwindow*) { g_input = true; });
}

// CPU seconds this process has used (all threads).
double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Resident and peak resident memory of this process, in MiB.
std::pair<double, double> MemoryMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  double rss = 0, hwm = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::atof(line.c_str() + 6) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::atof(line.c_str() + 6) / 1024;
  }
  return {rss, hwm};
}

std::pair<double, double> P50P95(std::vector<double> ms) {
  if (ms.empty()) return {0, 0};
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * (ms.size() - 1) + 0.5))]; };
  return {at(0.5), at(0.95)};
}

// Where a frame's time goes (--bench): building the UI (ImGui, the views),
// handing its draw lists to OpenGL, the renderer finishing (llvmpipe
// rasterizes here), and the swap.
struct FramePhases {
  double ui_ms = 0, submit_ms = 0;
};
FramePhases g_phases;

// When each step of opening finished, in seconds since the start (--bench).
struct OpenSteps {
  double model = 0, glfw = 0, window = 0, imgui = 0;
};
OpenSteps g_open;

// Pixels the renderer shades for `data`: each triangle's area clipped to its
// command's clip rect (a bounding-box clip, so an upper bound for clipped
// triangles). A software renderer pays per pixel shaded and blended.
double ShadedPixels(const ImDrawData* data) {
  double total = 0;
  for (int l = 0; l < data->CmdListsCount; ++l) {
    const ImDrawList* list = data->CmdLists[l];
    for (const ImDrawCmd& cmd : list->CmdBuffer) {
      if (cmd.UserCallback) continue;
      for (unsigned i = 0; i + 2 < cmd.ElemCount; i += 3) {
        ImVec2 p[3];
        for (int k = 0; k < 3; ++k) p[k] = list->VtxBuffer[cmd.VtxOffset + list->IdxBuffer[cmd.IdxOffset + i + k]].pos;
        const double area = 0.5 * std::fabs((p[1].x - p[0].x) * (p[2].y - p[0].y) - (p[2].x - p[0].x) * (p[1].y - p[0].y));
        float x0 = std::min({p[0].x, p[1].x, p[2].x}), x1 = std::max({p[0].x, p[1].x, p[2].x});
        float y0 = std::min({p[0].y, p[1].y, p[2].y}), y1 = std::max({p[0].y, p[1].y, p[2].y});
        const double box = double(x1 - x0) * (y1 - y0);
        const double cx = std::max(0.0f, std::min(x1, cmd.ClipRect.z) - std::max(x0, cmd.ClipRect.x));
        const double cy = std::max(0.0f, std::min(y1, cmd.ClipRect.w) - std::max(y0, cmd.ClipRect.y));
        total += box > 0 ? area * (cx * cy / box) : 0;
      }
    }
  }
  return total;
}

// --bench: frame times of an empty window, the whole run, and panning, in
// this process, with glFinish so the software renderer's work is counted.
template <typename DrawFrame>
void RunBench(GLFWwindow* window, Workstation& ws, DrawFrame& draw_frame, double first_frame_s, double complete_s,
              const std::string& view) {
  struct Split {
    std::vector<double> ms, ui, submit, finish, swap;
  };
  std::map<std::string, Split> splits;
  // `frames` frames of `body`, measured after `warmup` unmeasured ones.
  auto timed = [&](const char* name, auto&& body, int frames = 60, int warmup = 0) {
    Split& split = splits[name];
    for (int i = 0; i < warmup + frames; ++i) {
      const auto t = std::chrono::steady_clock::now();
      glfwPollEvents();
      g_phases = {};
      body(i);
      const auto t_finish = std::chrono::steady_clock::now();
      glFinish();
      const auto t_swap = std::chrono::steady_clock::now();
      glfwSwapBuffers(window);
      if (i < warmup) continue;
      split.ms.push_back(Seconds(t) * 1e3);
      split.ui.push_back(g_phases.ui_ms);
      split.submit.push_back(g_phases.submit_ms);
      split.finish.push_back(std::chrono::duration<double, std::milli>(t_swap - t_finish).count());
      split.swap.push_back(Seconds(t_swap) * 1e3);
    }
    return P50P95(split.ms);
  };
  auto [mem_rss, mem_hwm] = MemoryMiB();
  auto empty_frame = [&](int) {
    const auto t0 = std::chrono::steady_clock::now();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImGui::GetMainViewport()->WorkPos);
    ImGui::SetNextWindowSize(ImGui::GetMainViewport()->WorkSize);
    ImGui::Begin("empty", nullptr, ImGuiWindowFlags_NoDecoration);
    ImGui::End();
    ImGui::Render();
    const auto t1 = std::chrono::steady_clock::now();
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    g_phases.ui_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    g_phases.submit_ms = Seconds(t1) * 1e3;
  };
  timed("empty", empty_frame, 1);
  const int empty_vertices = ImGui::GetDrawData()->TotalVtxCount;
  const double empty_pixels = ShadedPixels(ImGui::GetDrawData());
  double pixels = 0, chrome_pixels = 0;
  size_t shapes = 0, quads = 0, rasterized = 0;
  int vertices = 0, commands = 0;
  auto whole_frame = [&](int) {
    draw_frame(false);
    shapes = std::max(shapes, ws.timeline().shapes_drawn());
    quads = ws.timeline().quads_drawn();
    vertices = ImGui::GetDrawData()->TotalVtxCount;
    pixels = ShadedPixels(ImGui::GetDrawData());
    commands = 0;
    for (int i = 0; i < ImGui::GetDrawData()->CmdListsCount; ++i) commands += ImGui::GetDrawData()->CmdLists[i]->CmdBuffer.Size;
  };
  auto pan_frame = [&](int) {
    ws.timeline().PanPixels(7);
    draw_frame(false);
    rasterized += ws.timeline().lanes_rasterized();
  };
  // The empty window, the whole run and panning take turns of 10 frames
  // (after 2 unmeasured): the machine's load moves while a benchmark runs,
  // and turns let the three see the same load. 60 frames each.
  splits.clear();
  std::pair<double, double> empty, whole, pan;
  for (int turn = 0; turn < 6; ++turn) {
    empty = timed("empty", empty_frame, 10, 2);
    whole = timed("whole_run", whole_frame, 10, 2);
    pan = timed("pan", pan_frame, 10, 2);
  }
  // Zooming in and out by 25% every frame: every lane's image is redrawn
  // and uploaded each frame (the worst case for drawing lanes into images).
  const auto zoom = timed("zoom", [&](int i) {
    ws.timeline().ZoomBy(i % 2 ? 1 / 1.25 : 1.25);
    draw_frame(false);
  });
  // The same window with every clock's section collapsed: the workstation's
  // chrome (tabs, toolbar, headers) without a lane, to tell its cost from the lanes'.
  const auto keep = ws.timeline().collapsed();
  for (const char* key : {"device", "modeled", "host"}) ws.timeline().SetCollapsed(key, true);
  const auto chrome = timed("chrome", [&](int) {
    draw_frame(false);
    chrome_pixels = ShadedPixels(ImGui::GetDrawData());
  });
  ws.timeline().SetCollapsed(keep);
  std::printf("bench first_frame_ms=%.0f complete_ms=%.0f rss_mib=%.0f peak_rss_mib=%.0f\n", first_frame_s * 1e3,
              complete_s * 1e3, mem_rss, mem_hwm);
  std::printf("bench open_ms model=%.0f glfw_init=%.0f window=%.0f imgui=%.0f first_frame=%.0f\n", g_open.model * 1e3,
              g_open.glfw * 1e3, g_open.window * 1e3, g_open.imgui * 1e3, first_frame_s * 1e3);
  std::printf("bench frame_ms empty_p50=%.1f empty_p95=%.1f chrome_p50=%.1f chrome_p95=%.1f whole_run_p50=%.1f "
              "whole_run_p95=%.1f pan_p50=%.1f pan_p95=%.1f shapes=%zu vertices=%d (empty %d) draw_calls=%d\n",
              empty.first, empty.second, chrome.first, chrome.second, whole.first, whole.second, pan.first, pan.second,
              shapes, vertices, empty_vertices, commands);
  // whole_run is a frame of the view in front: say which, with its own name.
  std::printf("bench view=%s frame_ms p50=%.1f p95=%.1f (the whole_run frames above: the window with this view in "
              "front)\n",
              view.c_str(), whole.first, whole.second);
  std::printf("bench frame_ms zoom_p50=%.1f zoom_p95=%.1f (every lane redrawn each frame)\n", zoom.first, zoom.second);
  std::printf("bench lanes image_quads=%zu lanes_redrawn_while_panning=%zu texture_uploads=%zu\n", quads, rasterized,
              ws.timeline().uploads());
  std::printf("bench shaded_kpx empty=%.0f chrome=%.0f whole_run=%.0f\n", empty_pixels / 1e3, chrome_pixels / 1e3,
              pixels / 1e3);
  // Medians of each phase: what to work on.
  for (const auto& [name, split] : splits) {
    std::printf("bench phases %s ui_p50=%.1f submit_p50=%.1f finish_p50=%.1f swap_p50=%.1f\n", name.c_str(),
                P50P95(split.ui).first, P50P95(split.submit).first, P50P95(split.finish).first,
                P50P95(split.swap).first);
  }
}

}  // namespace

int RunApp(const AppOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  // The run's small tables (and the workstation over them), ImGui's context
  // and its font atlas are made on another thread while this one opens the
  // display and makes the window, the longest step (a software renderer
  // loads LLVM): the first frame waits for the slower of the two, not for
  // both. The timeline's loader starts once the window is made: run
  // alongside, it would take the cores the window is being made with.
  absl::StatusOr<TraceModel> model = absl::UnknownError("not loaded");
  std::unique_ptr<Workstation> workstation;
  std::atomic<bool> stop_waiting{false};  // no display after all: --follow's wait ends
  std::thread opener([&] {
    model = LoadTraceModel(options.db_path, options.run_id);
    // --follow started before the run (no file yet, or no run in it yet): wait
    // for its first run, as `tail -F` waits for its file, instead of exiting.
    auto not_yet = [&] { return absl::IsNotFound(model.status()) || NoTablesYet(options.db_path); };
    if (options.follow && !options.run_id && !model.ok() && not_yet()) {
      std::fprintf(stderr, "shardscope-ui: %s; waiting for a run to start (--follow)\n",
                   std::string(model.status().message()).c_str());
      while (!model.ok() && not_yet() && !stop_waiting &&
             (options.exit_after_s <= 0 || Seconds(started) < options.exit_after_s)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        model = LoadTraceModel(options.db_path, std::nullopt);
      }
    }
    g_open.model = Seconds(started);
    if (model.ok()) {
      // The loader's thread wakes the idle loop when data arrives.
      workstation = std::make_unique<Workstation>(
          std::make_unique<TraceModel>(*std::move(model)), [] { if (g_glfw_ready) glfwPostEmptyEvent(); },
          /*start_loading=*/false);
    }
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // no imgui.ini next to whatever the user opened
    LoadFont(io);
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas
    ApplyStyle();
  });
  // The file's errors first: a wrong path is the likelier mistake, and it is
  // reported the same with or without a display.
  auto fail = [&](int code, const std::string& message) {
    stop_waiting = true;
    if (opener.joinable()) opener.join();
    if (!model.ok() && !workstation) {
      std::fprintf(stderr, "shardscope-ui: %s\n", std::string(model.status().message()).c_str());
      code = 1;
    } else {
      std::fprintf(stderr, "shardscope-ui: %s\n", message.c_str());
    }
    workstation.reset();
    ImGui::DestroyContext();
    return code;
  };
  if (!HaveDisplay()) {
    return fail(2, absl::StrFormat("no display (DISPLAY is unset); run under xvfb-run or use `shardscope report %s`",
                                   options.db_path));
  }
  glfwSetErrorCallback(OnGlfwError);
  if (!glfwInit()) {
    const char* display = std::getenv("DISPLAY");
    return fail(2, absl::StrFormat("cannot open the display (DISPLAY=%s): %s; run under xvfb-run or use `shardscope "
                                   "report %s`",
                                   display ? display : "", g_glfw_error, options.db_path));
  }
  g_glfw_ready = true;
  g_open.glfw = Seconds(started);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  // Shown once the file is known to open: a wrong path flashes no window.
  glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  GLFWwindow* window = glfwCreateWindow(options.width, options.height, "shardscope", nullptr, nullptr);
  g_open.window = Seconds(started);
  opener.join();
  if (!window || !workstation) {
    const std::string why = absl::StrFormat("cannot create an OpenGL 3.3 window: %s", g_glfw_error);
    if (window) glfwDestroyWindow(window);
    const int code = fail(2, why);
    g_glfw_ready = false;
    glfwTerminate();
    return code;
  }
  glfwSetWindowTitle(window, workstation->Title().c_str());
  glfwShowWindow(window);
  workstation->StartLoading();  // the window is made: the cores are free for it
  glfwMakeContextCurrent(window);
  const bool capture = !options.screenshot_path.empty() || !options.dump_layout_path.empty();
  glfwSwapInterval(capture || options.bench ? 0 : 1);
  InstallInputFlags(window);

  ImGuiIO& io = ImGui::GetIO();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  g_open.imgui = Seconds(started);

  GlTextureHost textures;  // outlives the workstation (reset below, before the window goes)
  workstation->ui().textures = &textures;
  workstation->ui().headless = capture && !options.mouse;
  if (auto view = ViewFromName(options.view); view && Workstation::Builds(*view)) {
    workstation->ui().bring_to_front = *view;
  }
  workstation->ui().option_errors = OptionsNotInRun(options, workstation->model());
  // --range was checked by main.cc; a clock the run lacks is an option error already.
  const auto range = options.range.empty() ? absl::StatusOr<RangeArg>(absl::NotFoundError("")) : ParseRangeArg(options.range);
  const bool range_clock = range.ok() && workstation->model().HasClock(range->clock);
  workstation->timeline().CheckOnArrival(
      options.select_slice ? absl::StrCat("--select ", *options.select_slice) : "",
      range_clock ? absl::StrCat("--range ", options.range) : "");
  if (options.select_slice) workstation->timeline().SelectSliceId(*options.select_slice);
  if (range.ok()) {
    workstation->timeline().SetRange(range->clock, range->t0, range->t1);
    workstation->timeline().ShowWindow(range->clock, range->t0 - (range->t1 - range->t0) / 4,
                                       range->t1 + (range->t1 - range->t0) / 4);
  }
  if (!options.search.empty()) workstation->timeline().Search(options.search, /*select_first=*/true);
  // --compile and --graph open their view unless --view named another.
  const bool view_named = options.view != "timeline";
  if (options.compile_id) {
    workstation->ui().selected_compile_id = *options.compile_id;
    workstation->ui().scroll_to_selected_compile = true;
    if (!view_named) workstation->ui().bring_to_front = ViewId::kRecompilations;
  }
  if (options.graph_op) {
    workstation->ui().graph_focus = GraphFocus{options.graph_op->first, options.graph_op->second, true};
    if (!view_named) workstation->ui().bring_to_front = ViewId::kGraph;
  }
  if (options.step) workstation->ui().playhead_step = *options.step;
  if (options.fleet_metric)
    if (auto metric = FleetMetricFromName(*options.fleet_metric)) workstation->fleet().SetMetric(*metric);
  if (options.chip) workstation->placement().SelectChip(*options.chip);
  // Recent files (File menu): the files a person opened, not a script's captures.
  auto remember = [&](const std::string& path) {
    if (capture || options.bench) return;
    if (absl::Status st = AddRecentFile(path); !st.ok()) workstation->ui().selection_text = std::string(st.message());
  };
  remember(options.db_path);
  if (!options.compare_path.empty() || options.compare_run) {
    workstation->compare().SetTarget({options.compare_path, options.compare_run});
  }
  LayoutDump dump;
  int exit_code = 0;
  double first_frame_s = -1, complete_s = -1, complete_cpu_s = 0;
  // Frames still to draw before sleeping until the next event: input needs a
  // few (ImGui settles hover and clicks over two or three), data one.
  int frames_left = 3;
  size_t option_errors_shown = 0;
  auto draw_frame = [&](bool record) {
    const auto t0 = std::chrono::steady_clock::now();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (capture) {
      // Xvfb's pointer sits mid-screen; a screenshot must not depend on it.
      io.MousePos = options.mouse ? ImVec2(options.mouse->first, options.mouse->second) : ImVec2(-FLT_MAX, -FLT_MAX);
    }
    workstation->ui().layout = record ? &dump : nullptr;
    if (UiState& ui = workstation->ui(); ui.option_errors.size() > option_errors_shown) {
      ui.selection_text = absl::StrJoin(ui.option_errors, "; ");
      option_errors_shown = ui.option_errors.size();
    }
    ImGui::NewFrame();
    workstation->Draw();
    ImGui::Render();
    workstation->ui().layout = nullptr;
    const auto t1 = std::chrono::steady_clock::now();
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(kBackground.r / 255.f, kBackground.g / 255.f, kBackground.b / 255.f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    g_phases.ui_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    g_phases.submit_ms = Seconds(t1) * 1e3;
  };
  double followed_s = Seconds(started);
  std::optional<std::pair<int64_t, int64_t>> following;
  if (options.follow) following = FollowState(options.db_path);
  for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
    if (capture || options.bench || frames_left > 0) {
      glfwPollEvents();
    } else if (options.exit_after_s > 0) {
      glfwWaitEventsTimeout(std::max(0.01, options.follow ? std::min(1.0, options.exit_after_s - Seconds(started))
                                                          : options.exit_after_s - Seconds(started)));
    } else if (options.follow) {
      glfwWaitEventsTimeout(1.0);  // the store is looked at once a second
    } else if (workstation->playback().playing()) {
      glfwWaitEventsTimeout(std::max(0.01, workstation->playback().NextWakeS()));  // the playhead's next step
    } else {
      glfwWaitEvents();
    }
    if (options.follow && Seconds(started) - followed_s >= 1.0) {
      followed_s = Seconds(started);
      if (auto now = FollowState(options.db_path); now && *now != following) {
        // A newer run, or more steps of this one: the view shows what has landed.
        auto next = LoadTraceModel(options.db_path, now->first);
        if (next.ok()) {
          std::printf("following run %lld: %lld steps\n", static_cast<long long>(now->first),
                      static_cast<long long>(now->second));
          std::fflush(stdout);
          // More steps of the same run: the user's zoom, place and collapsed
          // groups stay (following the end if it was on screen).
          const bool same_run = following && following->first == now->first;
          auto view = workstation->timeline().SaveView();
          workstation->SetModel(std::make_unique<TraceModel>(*std::move(next)));
          if (same_run) workstation->timeline().RestoreView(std::move(view));
          following = *now;
          glfwSetWindowTitle(window, workstation->Title().c_str());
          frames_left = 3;
        }
      }
    }
    if (options.exit_after_s > 0 && Seconds(started) >= options.exit_after_s) break;
    if (g_input.exchange(false)) frames_left = std::max(frames_left, 3);
    frames_left = std::max(frames_left, 1);  // woken: something changed

    draw_frame(capture);
    if (first_frame_s < 0) first_frame_s = Seconds(started);
    const bool complete = (frame + 1 >= kScreenshotFrames || !capture) && workstation->complete();
    if (complete && complete_s < 0) {
      complete_s = Seconds(started);
      complete_cpu_s = CpuSeconds();
    }

    if (capture && frame + 1 >= kScreenshotFrames) {
      // The captured frame is the finished one: the whole-run level of
      // detail drawn, not the progress frame. A loader that never finishes
      // (a damaged file) still gets a picture, with a warning.
      const bool give_up = Seconds(started) > 120;
      if (!complete && !give_up) {
        workstation->WaitForData(0.5);
        continue;
      }
      if (!complete) std::fprintf(stderr, "shardscope-ui: the view did not finish loading its data in 120 s (the timeline, or a view computing from the whole run); capturing what there is\n");
      for (const std::string& e : workstation->ui().option_errors) std::fprintf(stderr, "shardscope-ui: %s\n", e.c_str());
      if (!workstation->ui().option_errors.empty()) exit_code = 1;
      for (const std::string& e : workstation->ui().data_errors)
        std::fprintf(stderr, "shardscope-ui: %s\n", e.c_str());
      if (!workstation->ui().data_errors.empty()) {
        // Errors that name their file's check (the Compare view's other file) need no other.
        const bool named =
            std::all_of(workstation->ui().data_errors.begin(), workstation->ui().data_errors.end(),
                        [](const std::string& e) { return e.find("shardscope check") != std::string::npos; });
        if (!named)
          std::fprintf(stderr,
                       "shardscope-ui: the capture shows what could be read; `shardscope check %s` names the "
                       "damage\n",
                       options.db_path.c_str());
        exit_code = 1;
      }
      int fb_w = 0, fb_h = 0, win_w = 0, win_h = 0;
      glfwGetFramebufferSize(window, &fb_w, &fb_h);
      glfwGetWindowSize(window, &win_w, &win_h);
      if (!options.screenshot_path.empty()) {
        if (!WriteScreenshot(options.screenshot_path, fb_w, fb_h)) {
          std::fprintf(stderr, "shardscope-ui: cannot write %s\n", options.screenshot_path.c_str());
          exit_code = 1;
        } else {
          std::printf("screenshot %s %dx%d\n", options.screenshot_path.c_str(), fb_w, fb_h);
        }
      }
      if (!options.dump_layout_path.empty()) {
        if (auto st = dump.WriteFile(options.dump_layout_path); !st.ok()) {
          std::fprintf(stderr, "shardscope-ui: %s\n", std::string(st.message()).c_str());
          exit_code = 1;
        } else {
          std::printf("layout %s view=%s items=%zu\n", options.dump_layout_path.c_str(), dump.view().c_str(),
                      dump.size());
        }
      }
      PrintLanes(*workstation, win_w > 0 ? float(fb_w) / win_w : 1, win_h > 0 ? float(fb_h) / win_h : 1);
      std::printf("timing first_frame_ms=%.0f complete_ms=%.0f\n", first_frame_s * 1e3, complete_s * 1e3);
      break;
    }
    if (options.bench && complete) {
      RunBench(window, *workstation, draw_frame, first_frame_s, complete_s, options.view);
      break;
    }
    glfwSwapBuffers(window);
    --frames_left;
    // A text field blinks its cursor.
    if (io.WantTextInput && frames_left <= 0) glfwWaitEventsTimeout(0.5);

    if (auto path = workstation->ui().open_path) {
      workstation->ui().open_path.reset();
      auto next = LoadTraceModel(*path, std::nullopt);
      if (next.ok()) {
        workstation->SetModel(std::make_unique<TraceModel>(*std::move(next)));
        glfwSetWindowTitle(window, workstation->Title().c_str());
        remember(*path);
      } else {
        workstation->ui().selection_text = absl::StrCat(*path, ": ", next.status().message());
      }
      frames_left = 3;
    }
    if (auto run = workstation->ui().switch_to_run) {
      workstation->ui().switch_to_run.reset();
      auto next = LoadTraceModel(workstation->model().path, *run);
      if (next.ok()) {
        workstation->SetModel(std::make_unique<TraceModel>(*std::move(next)));
        glfwSetWindowTitle(window, workstation->Title().c_str());
      } else {
        workstation->ui().selection_text = std::string(next.status().message());
      }
      frames_left = 3;
    }
  }

  if (options.exit_after_s > 0 && complete_s >= 0) {
    // What the window cost while nothing changed: from its first finished frame to now.
    const double wall = Seconds(started) - complete_s, cpu = CpuSeconds() - complete_cpu_s;
    std::printf("idle cpu_s=%.3f wall_s=%.2f cpu_percent=%.2f\n", cpu, wall, wall > 0 ? 100 * cpu / wall : 0.0);
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  workstation.reset();  // stops the loader before the display goes
  glfwDestroyWindow(window);
  glfwTerminate();
  return exit_code;
}

}  // namespace shardscope::app
