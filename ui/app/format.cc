// Formatting helpers; see format.h.
#include "ui/app/format.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace shardscope::app {
namespace {

std::string ThreeDigits(double value, const char* unit) {
  double a = std::fabs(value);
  if (a >= 100) return absl::StrFormat("%.0f %s", value, unit);
  if (a >= 10) return absl::StrFormat("%.1f %s", value, unit);
  return absl::StrFormat("%.2f %s", value, unit);
}

}  // namespace

std::string FormatDuration(double ns) {
  double a = std::fabs(ns);
  if (a < 1e3) return absl::StrFormat("%.0f ns", ns);
  if (a < 1e6) return ThreeDigits(ns / 1e3, "us");
  if (a < 1e9) return ThreeDigits(ns / 1e6, "ms");
  return ThreeDigits(ns / 1e9, "s");
}

std::string FormatBytes(int64_t bytes) {
  double b = static_cast<double>(bytes);
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  if (b < 1024.0 * 1024) return absl::StrFormat("%.1f KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return absl::StrFormat("%.1f MiB", b / (1024.0 * 1024));
  return absl::StrFormat("%.1f GiB", b / (1024.0 * 1024 * 1024));
}

double NiceStep(double min_ns) {
  if (!(min_ns > 0)) return 1;
  double p = std::pow(10.0, std::floor(std::log10(min_ns)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= min_ns) return m * p;
  }
  return 10 * p;
}

}  // namespace shardscope::app
