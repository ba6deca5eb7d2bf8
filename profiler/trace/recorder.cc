#include "profiler/trace/recorder.h"

#include <chrono>

namespace shardscope::trace {
namespace {
class NullRecorder : public Recorder {
 public:
  SliceDetail Detail(int) const override { return SliceDetail::kNone; }
};
NullRecorder g_null;
std::atomic<Recorder*> g_recorder{&g_null};
std::atomic<int64_t> g_epoch_ns{0};
std::atomic<int64_t> g_next_id{1};

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

const char* ClockName(Clock c) {
  switch (c) {
    case Clock::kHost: return "host";
    case Clock::kDevice: return "device";
    case Clock::kModeled: return "modeled";
  }
  return "?";
}

const char* SliceKindName(SliceKind k) {
  switch (k) {
    case SliceKind::kCompute: return "compute";
    case SliceKind::kCollective: return "collective";
    case SliceKind::kTransfer: return "transfer";
    case SliceKind::kHost: return "host";
    case SliceKind::kCompile: return "compile";
    case SliceKind::kHostWait: return "host_wait";
  }
  return "?";
}

const char* SliceDetailName(SliceDetail d) {
  switch (d) {
    case SliceDetail::kNone: return "off";
    case SliceDetail::kPrograms: return "steps";
    case SliceDetail::kKernels: return "kernels";
  }
  return "?";
}

Recorder& recorder() { return *g_recorder.load(std::memory_order_acquire); }
bool enabled() { return g_recorder.load(std::memory_order_acquire) != &g_null; }
SliceDetail slice_detail(int step) { return g_recorder.load(std::memory_order_acquire)->Detail(step); }
void SetRecorder(Recorder* r) { g_recorder.store(r ? r : &g_null, std::memory_order_release); }

int64_t HostNowNs() {
  int64_t epoch = g_epoch_ns.load(std::memory_order_relaxed);
  if (epoch == 0) {
    int64_t now = SteadyNs();
    g_epoch_ns.compare_exchange_strong(epoch, now);
    epoch = g_epoch_ns.load();
  }
  return SteadyNs() - epoch;
}
void ResetHostClock() { g_epoch_ns.store(SteadyNs()); }

int64_t NextId() { return g_next_id.fetch_add(1, std::memory_order_relaxed); }

}  // namespace shardscope::trace
