#include "core/compile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/context.h"
#include "core/lazy.h"
#include "profiler/trace/recorder.h"

namespace shardscope {

absl::StatusOr<std::vector<Tensor>> host_call(const HostFn& fn, const std::vector<Tensor>& inputs,
                                              std::source_location sl) {
  const std::string at = absl::StrCat(Loc(sl).file, ":", sl.line());
  std::vector<Literal> values;
  for (const Tensor& t : inputs) {
    auto v = t.to_host(sl);
    if (!v.ok()) return v.status();
    values.push_back(*std::move(v));
  }
  const int64_t t0 = trace::HostNowNs();
  auto out = fn(values);
  const int64_t t1 = trace::HostNowNs();
  if (!out.ok())
    return absl::Status(out.status().code(), absl::StrCat("host_call at ", at, ": ", out.status().message()));
  if (trace::slice_detail(internal::Ctx().step) != trace::SliceDetail::kNone) {
    trace::SliceRecord s;
    s.slice_id = trace::NextId();
    s.track_id = internal::Ctx().host_track;
    s.start_ns = t0;
    s.dur_ns = t1 - t0;
    s.name = absl::StrCat("host_call at ", at);
    s.kind = trace::SliceKind::kHost;
    s.step = internal::Ctx().step;
    trace::recorder().Record(s);
  }
  std::vector<Tensor> results;
  for (size_t k = 0; k < out->size(); ++k)
    results.push_back(Tensor::from_host(std::move((*out)[k]), absl::StrCat("host_call.", k), sl));
  return results;
}

absl::Status CompiledFn::operator()() {
  if (absl::Status s = fn_(); !s.ok()) return s;
  if (absl::Status s = internal::MarkStepAt(Loc(made_), opts_.name); !s.ok()) return s;
  const internal::Context::LastCut& cut = internal::Ctx().last_cut;
  if (cut.fingerprint.empty() ||
      std::find(fingerprints_.begin(), fingerprints_.end(), cut.fingerprint) != fingerprints_.end())
    return absl::OkStatus();
  fingerprints_.push_back(cut.fingerprint);
  if (opts_.max_different_graphs > 0 && distinct_graphs() > opts_.max_different_graphs)
    return absl::FailedPreconditionError(absl::StrCat(
        "compile: '", opts_.name, "' produced ", distinct_graphs(),
        " distinct graphs, more than max_different_graphs = ", opts_.max_different_graphs, "; the newest differs: ", cut.cause_kind.empty() ? "(cached)" : cut.cause_kind,
        cut.cause_detail.empty() ? "" : absl::StrCat(": ", cut.cause_detail)));
  return absl::OkStatus();
}

}  // namespace shardscope
