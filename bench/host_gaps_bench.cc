// How much of a spinning thread's time the host takes away, on every core at
// once: each thread reads the monotonic clock in a tight loop, and a jump of
// more than 20 us between two reads is time it did not run (an interrupt, or
// the hypervisor running something else on its vCPU). On these VMs the
// kernel reports no steal time (/proc/stat), and the thread's CPU clock
// advances through the jumps: a kernel's device time includes them, and a
// jump in one chip's segment is waited for by every chip at the next
// collective (docs/simulate.md, "Small kernels paid for malloc's one lock").
//   build/bench/host_gaps_bench [seconds]    (default 1)
// Prints one line per core and a total: gaps per second, the share of the
// time in them, and the count over 100 us and 500 us.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

int64_t NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

struct Gaps {
  int64_t wall_ns = 0, gap_ns = 0, longest_ns = 0;
  long over20 = 0, over100 = 0, over500 = 0;
};

Gaps Spin(int cpu, double seconds) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  Gaps g;
  const int64_t start = NowNs(), end = start + static_cast<int64_t>(seconds * 1e9);
  int64_t last = start;
  while (last < end) {
    const int64_t t = NowNs(), gap = t - last;
    last = t;
    if (gap <= 20000) continue;
    ++g.over20;
    g.over100 += gap > 100000;
    g.over500 += gap > 500000;
    g.gap_ns += gap;
    g.longest_ns = std::max(g.longest_ns, gap);
  }
  g.wall_ns = last - start;
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Gaps> out(cores);
  std::vector<std::thread> threads;
  for (int c = 0; c < cores; ++c) threads.emplace_back([&, c] { out[c] = Spin(c, seconds); });
  for (auto& t : threads) t.join();
  Gaps all;
  for (int c = 0; c < cores; ++c) {
    const Gaps& g = out[c];
    std::printf("core %d: %.0f gaps/s over 20 us, %.2f%% of the time in them, %ld over 100 us, %ld over 500 us, "
                "longest %.2f ms\n",
                c, g.over20 / (g.wall_ns / 1e9), 100.0 * g.gap_ns / g.wall_ns, g.over100, g.over500,
                g.longest_ns / 1e6);
    all.wall_ns += g.wall_ns;
    all.gap_ns += g.gap_ns;
    all.over20 += g.over20;
    all.over100 += g.over100;
    all.over500 += g.over500;
    all.longest_ns = std::max(all.longest_ns, g.longest_ns);
  }
  std::printf("host_gaps_pct %.2f gaps_per_core_s %.0f over_500us_per_core_s %.1f longest_ms %.2f\n",
              100.0 * all.gap_ns / all.wall_ns, all.over20 / (all.wall_ns / 1e9), all.over500 / (all.wall_ns / 1e9),
              all.longest_ns / 1e6);
}
