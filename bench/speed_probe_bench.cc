// How far the speed probe (runtime/cpu_speed_probe.h) scatters while the
// machine keeps one speed, against how far it moves when the machine changes
// speed: kSameSpeedDistance sits between the two. Prints one probe per line,
// with its distance from the first and from the one before.
//   build/bench/speed_probe_bench [count] [seconds between]   (default 10, 1)
// Run it across minutes on a shared VM to see the stretches (docs/cost_model.md,
// "The machine's speed moves").
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "runtime/cpu_speed_probe.h"

int main(int argc, char** argv) {
  using shardscope::runtime::SpeedProbe;
  const int count = argc > 1 ? std::atoi(argv[1]) : 10;
  const double gap_s = argc > 2 ? std::atof(argv[2]) : 1.0;
  SpeedProbe first, last;
  for (int i = 0; i < count; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const SpeedProbe p = shardscope::runtime::MeasureSpeedProbe();
    const double took_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0) first = last = p;
    std::printf("probe %2d  %s  (%.0f ms)  from first %.3f  from previous %.3f\n", i, p.Describe().c_str(), took_ms,
                p.DistanceTo(first), p.DistanceTo(last));
    std::fflush(stdout);
    last = p;
    if (i + 1 < count) std::this_thread::sleep_for(std::chrono::duration<double>(gap_s));
  }
  return 0;
}
