// How much of a spinning thread's time the host takes away, on every core at
// once: each thread reads the monotonic clock and its own CPU clock in a tight
// loop, and a jump of more than 20 us between two reads is time it did not
// run. Where its CPU clock went on through the jump, the thread was charged
// for it (an interrupt, or the hypervisor running something else on its
// vCPU: these VMs report no steal time in /proc/stat), and a kernel's device
// time includes such jumps; a jump in one chip's segment is waited for by
// every chip at the next collective (docs/simulate.md, "Small kernels paid
// for malloc's one lock"). Where its CPU clock stopped, the guest ran another
// thread: not counted as the thread's time (other work on the machine).
//   build/bench/host_gaps_bench [seconds]    (default 1)
// Prints one line per core and a total: charged jumps per second, the share
// of the time in them, the count over 100 us and 500 us, and the time the
// guest gave to other threads.
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

int64_t ClockNs(clockid_t c) {
  timespec t;
  clock_gettime(c, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

struct Gaps {
  int64_t wall_ns = 0, gap_ns = 0, longest_ns = 0, elsewhere_ns = 0;
  long over20 = 0, over100 = 0, over500 = 0;
};

Gaps Spin(int cpu, double seconds) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  Gaps g;
  const int64_t start = ClockNs(CLOCK_MONOTONIC), end = start + static_cast<int64_t>(seconds * 1e9);
  int64_t last = start, last_cpu = ClockNs(CLOCK_THREAD_CPUTIME_ID);
  while (last < end) {
    const int64_t t = ClockNs(CLOCK_MONOTONIC), cpu = ClockNs(CLOCK_THREAD_CPUTIME_ID);
    const int64_t wall_step = t - last, charged = std::min(wall_step, cpu - last_cpu);
    last = t;
    last_cpu = cpu;
    g.elsewhere_ns += wall_step - charged;
    const int64_t gap = charged;
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
    std::printf("core %d: %.0f charged jumps/s over 20 us, %.2f%% of the time in them, %ld over 100 us, %ld over "
                "500 us, longest %.2f ms; %.2f%% of the time given to other threads\n",
                c, g.over20 / (g.wall_ns / 1e9), 100.0 * g.gap_ns / g.wall_ns, g.over100, g.over500,
                g.longest_ns / 1e6, 100.0 * g.elsewhere_ns / g.wall_ns);
    all.wall_ns += g.wall_ns;
    all.elsewhere_ns += g.elsewhere_ns;
    all.gap_ns += g.gap_ns;
    all.over20 += g.over20;
    all.over100 += g.over100;
    all.over500 += g.over500;
    all.longest_ns = std::max(all.longest_ns, g.longest_ns);
  }
  std::printf("host_gaps_pct %.2f gaps_per_core_s %.0f over_500us_per_core_s %.1f longest_ms %.2f other_threads_pct %.2f\n",
              100.0 * all.gap_ns / all.wall_ns, all.over20 / (all.wall_ns / 1e9), all.over500 / (all.wall_ns / 1e9),
              all.longest_ns / 1e6, 100.0 * all.elsewhere_ns / all.wall_ns);
}
