#include "runtime/intra_op.h"

#include <time.h>

#include <algorithm>
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

Gang::Gang(int helpers) {
  for (int h = 0; h < helpers; ++h) helpers_.emplace_back([this, h] { Work(h); });
}

Gang::~Gang() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : helpers_) t.join();
}

int64_t Gang::Drain() {
  const int64_t t0 = ThreadCpuNs();
  for (int i = next_.fetch_add(1); i < total_; i = next_.fetch_add(1)) (*fn_)(i);
  return ThreadCpuNs() - t0;
}

void Gang::Run(int parts, const std::function<void(int)>& fn) {
  if (parts <= 0) return;
  if (helpers_.empty() || parts == 1) {
    for (int i = 0; i < parts; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    fn_ = &fn;
    total_ = parts;
    next_.store(0);
    helpers_done_ = 0;
    helper_max_ns_ = 0;
    ++generation_;
  }
  cv_.notify_all();
  const int64_t own = Drain();
  std::unique_lock<std::mutex> l(mu_);
  done_cv_.wait(l, [&] { return helpers_done_ == static_cast<int>(helpers_.size()); });
  fn_ = nullptr;
  extra_ns_ += std::max<int64_t>(0, helper_max_ns_ - own);
}

void Gang::Work(int) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    l.unlock();
    const int64_t spent = Drain();
    l.lock();
    helper_max_ns_ = std::max(helper_max_ns_, spent);
    if (++helpers_done_ == static_cast<int>(helpers_.size())) done_cv_.notify_all();
  }
}

int64_t Gang::TakeExtraNs() {
  std::lock_guard<std::mutex> l(mu_);
  return std::exchange(extra_ns_, 0);
}

Gang* CurrentGang() { return current_gang; }

GangScope::GangScope(Gang* gang) : prev_(current_gang) { current_gang = gang; }
GangScope::~GangScope() { current_gang = prev_; }

void ParallelRange(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  Gang* g = current_gang;
  const int64_t max_parts = g ? g->width() : 1;
  const int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, max_parts);
  if (parts <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  g->Run(static_cast<int>(parts), [&](int p) {
    const int64_t b = n * p / parts, e = n * (p + 1) / parts;
    if (e > b) fn(b, e);
  });
}

}  // namespace shardscope::runtime
