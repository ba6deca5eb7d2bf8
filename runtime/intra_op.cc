#include "runtime/intra_op.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace shardscope::runtime {
namespace {
thread_local Gang* current_gang = nullptr;
}  // namespace

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

// Waking a blocked thread costs ~25 us here (a futex round trip in a VM), as
// much as a small kernel. So both sides spin briefly before blocking: helpers
// for the gap between one kernel and the next, the caller for the helpers'
// last parts, yielding now and then so that a host thread waiting for this
// core runs first. Spinning is not counted as device time (only parts are).
constexpr auto kHelperSpin = std::chrono::microseconds(100);
constexpr auto kCallerSpin = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until done() or `limit` has passed; true when done.
template <typename Done>
bool SpinUntil(Done done, std::chrono::microseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (int i = 0;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() >= until) return done();
      sched_yield();  // a runnable host thread on this core goes first
    }
  }
}

constexpr uint64_t Ticket(uint32_t gen, int parts, int next) {
  return (static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(parts) << 16) | static_cast<uint64_t>(next);
}

}  // namespace

Gang::Gang(int helpers) {
  for (int h = 0; h < helpers; ++h) helpers_.emplace_back([this] { Work(); });
}

Gang::~Gang() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> l(mu_);
  }
  cv_.notify_all();
  for (auto& t : helpers_) t.join();
}

int64_t Gang::Drain(uint32_t gen, bool helper) {
  int64_t spent = 0;
  uint64_t t = ticket_.load();
  for (;;) {
    const int parts = static_cast<int>((t >> 16) & 0xffff), next = static_cast<int>(t & 0xffff);
    if (static_cast<uint32_t>(t >> 32) != gen || next >= parts) break;
    if (!ticket_.compare_exchange_weak(t, t + 1)) continue;
    // A claimed part keeps its run (and fn) alive until done_ counts it.
    const int64_t t0 = ThreadCpuNs();
    try {
      (*fn_.load())(next);
    } catch (...) {  // thrown again by Run, in the caller (a helper's exception ended the process)
      std::lock_guard<std::mutex> l(mu_);
      if (!error_) error_ = std::current_exception();
    }
    spent += ThreadCpuNs() - t0;
    if (helper) {
      int64_t m = helper_max_ns_.load();
      while (spent > m && !helper_max_ns_.compare_exchange_weak(m, spent)) {
      }
    }
    if (done_.fetch_add(1) + 1 == parts && helper && caller_sleeping_.load()) {
      { std::lock_guard<std::mutex> l(mu_); }
      done_cv_.notify_all();
    }
    t = ticket_.load();
  }
  return spent;
}

void Gang::Run(int parts, const std::function<void(int)>& fn) {
  if (parts <= 0) return;
  if (helpers_.empty() || parts == 1 || parts > 0xffff) {
    for (int i = 0; i < parts; ++i) fn(i);
    return;
  }
  const uint32_t gen = generation_.load() + 1;
  fn_.store(&fn);
  done_.store(0);
  helper_max_ns_.store(0);
  ticket_.store(Ticket(gen, parts, 0));
  generation_.store(gen);
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> l(mu_); }
    cv_.notify_all();
  }
  const int64_t own = Drain(gen, false);
  auto all_done = [&] { return done_.load() == parts; };
  if (!SpinUntil(all_done, kCallerSpin)) {
    std::unique_lock<std::mutex> l(mu_);
    caller_sleeping_.store(true);
    done_cv_.wait(l, all_done);
    caller_sleeping_.store(false);
  }
  extra_ns_ += std::max<int64_t>(0, helper_max_ns_.load() - own);
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> l(mu_);
    e = std::exchange(error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

void Gang::Work() {
  uint32_t seen = 0;
  for (;;) {
    auto woken = [&] { return stop_.load() || generation_.load() != seen; };
    if (!SpinUntil(woken, kHelperSpin)) {
      std::unique_lock<std::mutex> l(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(l, woken);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    Drain(seen, true);
  }
}

int64_t Gang::TakeExtraNs() { return std::exchange(extra_ns_, 0); }

Gang* CurrentGang() { return current_gang; }

GangScope::GangScope(Gang* gang) : prev_(current_gang) { current_gang = gang; }
GangScope::~GangScope() { current_gang = prev_; }

void RunRangesOnGang(Gang& gang, int64_t n, int64_t parts, const std::function<void(int64_t, int64_t)>& fn) {
  auto part = [&](int p) {
    const int64_t b = n * p / parts, e = n * (p + 1) / parts;
    if (e > b) fn(b, e);
  };
  gang.Run(static_cast<int>(parts), std::function<void(int)>(std::ref(part)));  // a reference: no allocation
}

}  // namespace shardscope::runtime
