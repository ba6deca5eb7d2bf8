// Formatting helpers; see format.h.
#include "ui/app/format.h"

#include <algorithm>
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

std::string FormatTick(double t_ns, double step_ns) {
  const double a = std::fabs(t_ns);
  double unit = 1;
  const char* name = "ns";
  if (a >= 1e9) {
    unit = 1e9;
    name = "s";
  } else if (a >= 1e6) {
    unit = 1e6;
    name = "ms";
  } else if (a >= 1e3) {
    unit = 1e3;
    name = "us";
  }
  int decimals = 0;
  if (step_ns > 0 && step_ns < unit) decimals = static_cast<int>(std::ceil(std::log10(unit / step_ns) - 1e-9));
  decimals = std::clamp(decimals, 0, 9);
  return absl::StrFormat("%.*f %s", decimals, t_ns / unit, name);
}

}  // namespace shardscope::app
