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

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "ui/app/palette.h"
#include "ui/app/trace_model.h"
#include "ui/app/workstation.h"

namespace shardscope::app {
namespace {

// Frames drawn before a screenshot: ImGui sizes windows and tables from the
// previous frame, so the first frames are not yet laid out.
constexpr int kScreenshotFrames = 4;

std::string g_glfw_error;

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

}  // namespace

int RunApp(const AppOptions& options) {
  // The file first: a wrong path is the likelier mistake, and it is reported
  // the same with or without a display.
  auto model = LoadTraceModel(options.db_path, options.run_id);
  if (!model.ok()) {
    std::fprintf(stderr, "shardscope-ui: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  if (!HaveDisplay()) {
    std::fprintf(stderr,
                 "shardscope-ui: no display (DISPLAY is unset); run under xvfb-run or use "
                 "`shardscope report %s`\n",
                 options.db_path.c_str());
    return 2;
  }
  glfwSetErrorCallback(OnGlfwError);
  if (!glfwInit()) {
    const char* display = std::getenv("DISPLAY");
    std::fprintf(stderr,
                 "shardscope-ui: cannot open the display (DISPLAY=%s): %s; run under xvfb-run "
                 "or use `shardscope report %s`\n",
                 display ? display : "", g_glfw_error.c_str(), options.db_path.c_str());
    return 2;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  auto workstation =
      std::make_unique<Workstation>(std::make_unique<TraceModel>(*std::move(model)));
  GLFWwindow* window = glfwCreateWindow(options.width, options.height,
                                        workstation->Title().c_str(), nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "shardscope-ui: cannot create an OpenGL 3.3 window: %s\n",
                 g_glfw_error.c_str());
    glfwTerminate();
    return 2;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(options.screenshot_path.empty() ? 1 : 0);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // no imgui.ini next to whatever the user opened
  LoadFont(io);
  ApplyStyle();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  const bool screenshot = !options.screenshot_path.empty();
  workstation->ui().headless = screenshot && !options.mouse;
  if (options.view == "recompilations") workstation->ui().bring_to_front = ViewId::kRecompilations;
  if (options.view == "sharding") workstation->ui().bring_to_front = ViewId::kSharding;
  int exit_code = 0;
  for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (screenshot) {
      // Xvfb's pointer sits mid-screen; a screenshot must not depend on it.
      io.MousePos = options.mouse ? ImVec2(options.mouse->first, options.mouse->second)
                                  : ImVec2(-FLT_MAX, -FLT_MAX);
    }
    ImGui::NewFrame();
    workstation->Draw();
    ImGui::Render();
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(kBackground.r / 255.f, kBackground.g / 255.f, kBackground.b / 255.f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

    if (screenshot && frame + 1 >= kScreenshotFrames) {
      if (!WriteScreenshot(options.screenshot_path, fb_w, fb_h)) {
        std::fprintf(stderr, "shardscope-ui: cannot write %s\n", options.screenshot_path.c_str());
        exit_code = 1;
      } else {
        int win_w = 0, win_h = 0;
        glfwGetWindowSize(window, &win_w, &win_h);
        std::printf("screenshot %s %dx%d\n", options.screenshot_path.c_str(), fb_w, fb_h);
        PrintLanes(*workstation, win_w > 0 ? float(fb_w) / win_w : 1,
                   win_h > 0 ? float(fb_h) / win_h : 1);
      }
      break;
    }
    glfwSwapBuffers(window);

    if (auto run = workstation->ui().switch_to_run) {
      workstation->ui().switch_to_run.reset();
      auto next = LoadTraceModel(options.db_path, *run);
      if (next.ok()) {
        workstation->SetModel(std::make_unique<TraceModel>(*std::move(next)));
        glfwSetWindowTitle(window, workstation->Title().c_str());
      } else {
        workstation->ui().selection_text = std::string(next.status().message());
      }
    }
  }

  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return exit_code;
}

}  // namespace shardscope::app
