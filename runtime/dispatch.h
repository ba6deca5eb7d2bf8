// Asynchronous dispatch. mark_step enqueues a program run and returns, so the
// host traces step N+1 while the devices run step N. Results are AsyncArrays:
// device values that may still be computing. One dispatch thread runs queued
// programs in order, so a program's inputs made by an earlier one are ready by
// the time it runs; the host waits only when it reads a value, or when too
// many runs are in flight.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/buffer.h"

namespace shardscope::runtime {

class AsyncArray {
 public:
  static std::shared_ptr<AsyncArray> Ready(DeviceArray value);
  static std::shared_ptr<AsyncArray> Pending(Shape shape, Sharding sharding);

  // Blocks until the value is computed (or failed).
  absl::StatusOr<const DeviceArray*> Wait() const;
  bool ready() const;
  void Set(DeviceArray value);
  void SetError(absl::Status status);
  // Known before the value is: the global shape and the sharding.
  const Shape& shape() const { return shape_; }
  const Sharding& sharding() const { return sharding_; }

 private:
  Shape shape_;
  Sharding sharding_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool ready_ = false;
  absl::Status status_;
  DeviceArray value_;
};

// What the queue saw of one piece of work's arrival, on the host clock.
struct DispatchTiming {
  int64_t enqueued_ns = 0;  // when it was queued
  // How long the queue's thread had sat with nothing to run when this work
  // arrived: from the end of the previous work to this Enqueue. 0 when the
  // work queued behind earlier work (the thread was busy), and 0 for the first
  // work ever (there was no previous work to wait after).
  int64_t starved_ns = 0;
};

// A FIFO of work run on one thread, at most `max_in_flight` items queued or running.
class DispatchQueue {
 public:
  explicit DispatchQueue(int max_in_flight);
  ~DispatchQueue();  // finishes what is queued
  // Blocks while the queue is full, then enqueues. The work is told how long
  // the thread starved before it arrived (DispatchTiming).
  void Enqueue(std::function<void(const DispatchTiming&)> work);
  void Enqueue(std::function<void()> work);
  // Blocks until everything enqueued so far has run.
  void Drain();

 private:
  void Loop();
  int max_in_flight_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Item {
    std::function<void(const DispatchTiming&)> work;
    DispatchTiming timing;
  };
  std::deque<Item> queue_;
  int running_ = 0;
  int64_t last_done_ns_ = -1;  // host clock when the last work finished; -1: none yet
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace shardscope::runtime
