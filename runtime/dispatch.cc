#include "runtime/dispatch.h"

#include <algorithm>

#include "profiler/trace/recorder.h"

namespace shardscope::runtime {

std::shared_ptr<AsyncArray> AsyncArray::Ready(DeviceArray value) {
  auto a = std::make_shared<AsyncArray>();
  a->shape_ = value.shape;
  a->sharding_ = value.sharding;
  a->value_ = std::move(value);
  a->ready_ = true;
  return a;
}

std::shared_ptr<AsyncArray> AsyncArray::Pending(Shape shape, Sharding sharding) {
  auto a = std::make_shared<AsyncArray>();
  a->shape_ = std::move(shape);
  a->sharding_ = std::move(sharding);
  return a;
}

absl::StatusOr<const DeviceArray*> AsyncArray::Wait() const {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return ready_; });
  if (!status_.ok()) return status_;
  return &value_;
}

bool AsyncArray::ready() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_;
}

void AsyncArray::Set(DeviceArray value) {
  {
    std::lock_guard<std::mutex> l(mu_);
    value_ = std::move(value);
    ready_ = true;
  }
  cv_.notify_all();
}

void AsyncArray::SetError(absl::Status status) {
  {
    std::lock_guard<std::mutex> l(mu_);
    status_ = std::move(status);
    ready_ = true;
  }
  cv_.notify_all();
}

DispatchQueue::DispatchQueue(int max_in_flight)
    : max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight), thread_([this] { Loop(); }) {}

DispatchQueue::~DispatchQueue() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DispatchQueue::Enqueue(std::function<void(const DispatchTiming&)> work) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return static_cast<int>(queue_.size()) + running_ < max_in_flight_; });
  DispatchTiming t;
  t.enqueued_ns = trace::HostNowNs();
  // Starved: nothing queued, nothing running, and something ran before.
  if (queue_.empty() && running_ == 0 && last_done_ns_ >= 0)
    t.starved_ns = std::max<int64_t>(0, t.enqueued_ns - last_done_ns_);
  queue_.push_back({std::move(work), t});
  cv_.notify_all();
}

void DispatchQueue::Enqueue(std::function<void()> work) {
  Enqueue([w = std::move(work)](const DispatchTiming&) { w(); });
}

void DispatchQueue::Drain() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return queue_.empty() && running_ == 0; });
}

void DispatchQueue::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    Item item = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    l.unlock();
    item.work(item.timing);
    l.lock();
    --running_;
    last_done_ns_ = trace::HostNowNs();
    cv_.notify_all();
  }
}

}  // namespace shardscope::runtime
