// The escape hatch and the guard (PyTorch/XLA's host fallbacks and
// torch_xla.compile): host_call runs user C++ on host values for what has no
// op; compile wraps a step function and refuses one that keeps producing new
// graphs.
#pragma once

#include <functional>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace shardscope {

using HostFn = std::function<absl::StatusOr<std::vector<Literal>>(const std::vector<Literal>&)>;

// Reads `inputs` (cutting the pending graph, as a value read does), runs `fn`
// on their values and returns its results as new inputs of later graphs.
// Counted as a fallback: a host slice "host_call at FILE:LINE" (the caller's
// line), which `shardscope metrics` counts and lists.
absl::StatusOr<std::vector<Tensor>> host_call(const HostFn& fn, const std::vector<Tensor>& inputs,
                                              std::source_location loc = std::source_location::current());

struct CompileOptions {
  std::string name = "step";     // for errors
  int max_different_graphs = 0;  // 0: any number
};

// A step function that records ops; each call runs it and cuts the graph it
// recorded (mark_step). Producing more distinct graphs than
// max_different_graphs is an error naming the function, the count and how
// the newest graph differs from the nearest earlier one.
class CompiledFn {
 public:
  CompiledFn(std::function<absl::Status()> fn, CompileOptions opts, std::source_location made)
      : fn_(std::move(fn)), opts_(std::move(opts)), made_(made) {}
  absl::Status operator()();
  int distinct_graphs() const { return static_cast<int>(fingerprints_.size()); }

 private:
  std::function<absl::Status()> fn_;
  CompileOptions opts_;
  std::vector<std::string> fingerprints_;
  std::source_location made_;  // where compile() was called: the steps' one call site
};

inline CompiledFn compile(std::function<absl::Status()> fn, CompileOptions opts = {},
                          std::source_location loc = std::source_location::current()) {
  return CompiledFn(std::move(fn), std::move(opts), loc);
}

}  // namespace shardscope
