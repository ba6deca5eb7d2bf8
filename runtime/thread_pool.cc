#include "runtime/thread_pool.h"

namespace shardscope::runtime {

ThreadPool::ThreadPool(int threads) {
  for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::ParallelFor(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  std::unique_lock<std::mutex> l(mu_);
  fn_ = &fn;
  next_ = 0;
  total_ = n;
  finished_ = 0;
  cv_.notify_all();
  done_cv_.wait(l, [&] { return finished_ == total_; });
  fn_ = nullptr;
  total_ = 0;
}

void ThreadPool::Work() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || (fn_ && next_ < total_); });
    if (stop_) return;
    int i = next_++;
    const auto* fn = fn_;
    l.unlock();
    (*fn)(i);
    l.lock();
    if (++finished_ == total_) done_cv_.notify_all();
  }
}

}  // namespace shardscope::runtime
