// Intra-op parallelism: when the mesh has fewer virtual chips than the machine
// has cores, each chip gets a gang of helper threads on the idle cores, and a
// big kernel (a GEMM, a long elementwise loop) splits its work over them.
//
// Device time stays honest: a kernel's time is the critical path of its
// threads' CPU time. The chip's own thread measures its CPU time around the
// kernel; for every split, the gang adds how much longer its slowest helper
// part ran than the chip thread's own parts (TakeExtraNs). With dedicated
// cores that equals the kernel's wall time; with oversubscribed cores it does
// not count time spent waiting for a core.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shardscope::runtime {

class Gang {
 public:
  explicit Gang(int helpers);
  ~Gang();
  Gang(const Gang&) = delete;
  Gang& operator=(const Gang&) = delete;

  // Threads that can run parts at once: the caller plus the helpers.
  int width() const { return static_cast<int>(helpers_.size()) + 1; }
  // Runs fn(0..parts-1) on the caller and the helpers; returns when all are
  // done. Parts are claimed one at a time, so a helper that wakes late takes
  // what is left, and the caller never waits for a helper that took nothing.
  void Run(int parts, const std::function<void(int)>& fn);
  // Critical-path CPU time the helpers added beyond the caller's own since the
  // last call (see above).
  int64_t TakeExtraNs();

 private:
  void Work();
  // Claims and runs parts of run `gen` until none are left; returns this
  // thread's CPU time spent on them, and raises helper_max_ns_ when `helper`.
  int64_t Drain(uint32_t gen, bool helper);

  // A run's parts are claimed from one word: generation (32 bits), part count
  // (16) and next part (16), so a helper that still holds an old generation
  // can never claim a part of a newer run.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<const std::function<void(int)>*> fn_{nullptr};
  std::atomic<int> done_{0};            // parts finished in the current run
  std::atomic<int64_t> helper_max_ns_{0};
  std::atomic<int> sleepers_{0};        // helpers blocked on cv_
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  int64_t extra_ns_ = 0;                // caller thread only
  std::exception_ptr error_;            // the first part's exception in the current Run (under mu_)
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> helpers_;
};

// The gang of the calling thread's chip, or null (kernels then run inline).
Gang* CurrentGang();

// Makes `gang` the calling thread's gang while alive.
class GangScope {
 public:
  explicit GangScope(Gang* gang);
  ~GangScope();

 private:
  Gang* prev_;
};

// Runs fn over [0, n) in `parts` contiguous ranges on `gang` (ParallelRange's split).
void RunRangesOnGang(Gang& gang, int64_t n, int64_t parts, const std::function<void(int64_t, int64_t)>& fn);

// Splits [0, n) into contiguous ranges of at least `grain` items, at most one
// per gang thread, and runs fn(begin, end) on each; inline without a gang.
// A template so that the inline case builds no std::function: a lambda that
// captures more than two words made one allocate, and a small kernel's
// allocations took the one arena's lock against the other chip thread's
// (runtime/heap.h).
template <typename Fn>
void ParallelRange(int64_t n, int64_t grain, Fn&& fn) {
  Gang* g = CurrentGang();
  const int64_t max_parts = g ? g->width() : 1;
  const int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, max_parts);
  if (parts <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  RunRangesOnGang(*g, n, parts, std::function<void(int64_t, int64_t)>(std::ref(fn)));
}

// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns.
int64_t ThreadCpuNs();

}  // namespace shardscope::runtime
