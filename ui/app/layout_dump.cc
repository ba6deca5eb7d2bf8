// The layout dump; see layout_dump.h.
#include "ui/app/layout_dump.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "store/json_text.h"

namespace shardscope::app {
namespace {

// Whole pixels are what a test can compare; sub-pixel noise is not.
double Px(float v) { return std::round(static_cast<double>(v) * 10) / 10; }

}  // namespace

void LayoutDump::Begin(std::string_view view) {
  doc_ = {{"view", std::string(view)}, {"items", nlohmann::json::array()}};
}

nlohmann::json& LayoutDump::Add(std::string_view type, std::string_view label, nlohmann::json ref,
                                float x, float y, float w, float h) {
  nlohmann::json item = {{"type", std::string(type)},
                         {"label", std::string(label)},
                         {"ref", std::move(ref)},
                         {"x", Px(x)},
                         {"y", Px(y)},
                         {"w", Px(w)},
                         {"h", Px(h)}};
  auto& items = doc_["items"];
  items.push_back(std::move(item));
  return items.back();
}

std::string LayoutDump::view() const { return doc_["view"].get<std::string>(); }

absl::Status LayoutDump::WriteFile(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  // Names from a trace may hold any bytes; replace what is not UTF-8 rather than throw.
  out << store::JsonText(doc_, 1) << "\n";
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace shardscope::app
