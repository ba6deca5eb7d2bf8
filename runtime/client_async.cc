// Client::ExecuteAsync and friends: the runs go through one dispatch queue
// (runtime/dispatch.h) so the host never waits for the devices unless it
// reads a value.
#include "absl/strings/str_cat.h"
#include "runtime/client.h"

namespace shardscope::runtime {

namespace {
// At most this many runs queued or running: enough to overlap tracing with
// execution, few enough that memory for in-flight steps stays bounded.
constexpr int kMaxInFlight = 2;
}  // namespace

std::vector<std::shared_ptr<AsyncArray>> Client::ExecuteAsync(std::shared_ptr<const Executable> exe,
                                                              std::vector<std::shared_ptr<AsyncArray>> args,
                                                              const ExecuteOptions& opts) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!dispatch_) dispatch_ = std::make_unique<DispatchQueue>(kMaxInFlight);
  }
  ExecuteOptions run_opts = opts;
  {
    std::lock_guard<std::mutex> l(mu_);
    run_opts.transfers = std::make_shared<const std::vector<std::vector<DeviceOp>>>(std::move(pending_transfers_));
    pending_transfers_.assign(num_devices(), {});
    if (simulator_) {
      run_opts.sim_transfers = std::make_shared<const std::vector<trace::SimOp>>(std::move(pending_sim_transfers_));
      pending_sim_transfers_.clear();
    }
  }
  std::vector<std::shared_ptr<AsyncArray>> outs;
  for (size_t k = 0; k < exe->output_shapes.size(); ++k)
    outs.push_back(AsyncArray::Pending(exe->output_shapes[k], exe->output_shardings[k]));
  dispatch_->Enqueue([this, exe, args = std::move(args), outs, opts = std::move(run_opts)](const DispatchTiming& when) {
    auto fail = [&](const absl::Status& s) {
      for (const auto& o : outs) o->SetError(s);
      std::lock_guard<std::mutex> l(mu_);
      if (async_error_.ok()) async_error_ = s;
    };
    std::vector<const DeviceArray*> in;
    for (const auto& a : args) {
      auto v = a->Wait();  // made by an earlier run, which has finished
      if (!v.ok()) return fail(v.status());
      in.push_back(*v);
    }
    // Time the devices sat idle because the host had not enqueued this run
    // yet: it becomes "waiting for host" on the device clock.
    ExecuteOptions run = opts;
    run.host_wait_ns = when.starved_ns;
    auto results = Execute(*exe, in, run);
    if (!results.ok()) return fail(results.status());
    for (size_t k = 0; k < outs.size(); ++k) outs[k]->Set(std::move((*results)[k]));
  });
  return outs;
}

void Client::Synchronize() {
  std::unique_ptr<DispatchQueue>* q;
  {
    std::lock_guard<std::mutex> l(mu_);
    q = &dispatch_;
  }
  if (*q) (*q)->Drain();
}

absl::Status Client::TakeAsyncError() {
  std::lock_guard<std::mutex> l(mu_);
  absl::Status s = async_error_;
  async_error_ = absl::OkStatus();
  return s;
}

}  // namespace shardscope::runtime
