// Human-readable numbers for the workstation's labels and tooltips.
#pragma once

#include <cstdint>
#include <string>

namespace shardscope::app {

// "850 ns", "12.4 us", "3.20 ms", "1.50 s": three significant digits.
std::string FormatDuration(double ns);
// "512 B", "4.0 KiB", "3.1 MiB", "1.2 GiB".
std::string FormatBytes(int64_t bytes);
// A tick step for a ruler: the smallest 1, 2 or 5 times a power of ten that
// is at least `min_ns`.
double NiceStep(double min_ns);
// A ruler label for time `t_ns` with ticks `step_ns` apart: in the unit of
// |t| with as many decimals as the step needs ("5.0012 s", "12 ms", "850 ns").
std::string FormatTick(double t_ns, double step_ns);

}  // namespace shardscope::app
