// A fixed pool of worker threads for running devices side by side. One task
// per device; each device's kernels run single-threaded inside its task.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shardscope::runtime {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  // Runs fn(0..n-1) on the pool and waits for all of them. An exception a
  // task throws (std::bad_alloc when memory runs out) is thrown again here, in
  // the caller, once every task has finished: thrown on a worker, it ended
  // the process.
  void ParallelFor(int n, const std::function<void(int)>& fn);
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void Work();
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* fn_ = nullptr;
  int next_ = 0, total_ = 0, finished_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // the first task's exception in the current ParallelFor
  std::vector<std::thread> workers_;
};

}  // namespace shardscope::runtime
