#include "runtime/thread_pool.h"

#include <utility>

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
  if (std::exception_ptr e = std::exchange(error_, nullptr)) std::rethrow_exception(e);
}

void ThreadPool::Work() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || (fn_ && next_ < total_); });
    if (stop_) return;
    int i = next_++;
    const auto* fn = fn_;
    l.unlock();
    std::exception_ptr e;
    try {
      (*fn)(i);
    } catch (...) {
      e = std::current_exception();
    }
    l.lock();
    if (e && !error_) error_ = e;
    if (++finished_ == total_) done_cv_.notify_all();
  }
}

}  // namespace shardscope::runtime
