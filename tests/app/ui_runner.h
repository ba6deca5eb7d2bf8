// Running the shardscope-ui binary in tests: under a private X server, its
// --dump-layout read back as JSON, and the items of one type and role.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace shardscope::app::testing {

struct UiResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;  // stdout and stderr
};

inline UiResult RunShell(const std::string& command) {
  UiResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline bool HaveXvfb() {
  return std::system("command -v xvfb-run >/dev/null 2>&1") == 0 &&
         std::system("command -v xauth >/dev/null 2>&1") == 0;
}

// `ui` with `args` under Xvfb; a hung GL driver fails the test after 120 s.
// The X authority file is ours (-f): left to itself, xvfb-run makes a temporary
// directory and, when removing it fails at exit, replaces the app's exit code
// with 5, which made a test of the app's exit code flaky under CI.
inline UiResult RunUi(const std::string& ui, const std::string& args) {
  static int runs = 0;
  const std::string dir = "/tmp/shardscope_app_tests";
  std::filesystem::create_directories(dir);
  const std::string auth = absl::StrCat(dir, "/xauth.", getpid(), ".", runs++);
  std::ofstream(auth).close();
  UiResult result = RunShell(
      absl::StrCat("timeout 120 xvfb-run -a -f ", auth, " -s \"-screen 0 1600x900x24\" ", ui, " ", args));
  std::error_code ignored;
  for (const char* suffix : {"", "-c", "-l", "-n"}) std::filesystem::remove(auth + suffix, ignored);
  return result;
}

inline nlohmann::json ReadLayout(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// Items of `type`; with `role` given, only those with that role ("-": none).
inline std::vector<nlohmann::json> LayoutItems(const nlohmann::json& doc, const std::string& type,
                                               const std::string& role = "") {
  std::vector<nlohmann::json> out;
  if (!doc.contains("items")) return out;
  for (const nlohmann::json& item : doc["items"]) {
    if (item["type"] != type) continue;
    const std::string r = item.value("role", "");
    if (role.empty() || (role == "-" ? r.empty() : r == role)) out.push_back(item);
  }
  return out;
}

}  // namespace shardscope::app::testing
