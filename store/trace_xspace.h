// Reader of XLA's profiler output (internal to store/, used by trace_json.cc):
// an XSpace protobuf, the `*.xplane.pb` that jax.profiler, TensorFlow and
// PyTorch/XLA write into `plugins/profile/RUN/`. Its events are handed over as
// the TraceEvents that XLA's own conversion to Perfetto JSON gives (a process
// per plane, a thread per line, a complete event per XEvent, its stats as
// args), so the importer treats both forms of one profile alike; unlike the
// JSON, the XSpace keeps the profile's start on the wall clock, which lines up
// the hosts of a multi-host job.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "store/trace_json.h"

namespace shardscope::store::internal {

// Whether `head` (a file's first bytes, inflated) starts as an XSpace: its
// first field a plane whose id or name comes first. A Perfetto trace starts
// with a TracePacket (the same tag), whose first field is never either.
bool LooksLikeXSpace(std::string_view head);

// Hands over the events of the XSpace in `bytes` (the whole message,
// inflated), calling `on_progress` with the bytes parsed so far. A message cut
// short keeps the planes that are whole (out->truncated says what was lost);
// bytes that are not an XSpace are an error naming the plane and the byte.
absl::Status ReadXSpace(std::string_view bytes, const std::string& path, TraceFileInfo* info, ParseOutcome* out,
                        const std::function<void(TraceEvent&)>& on_event,
                        const std::function<void(uint64_t)>& on_progress);

}  // namespace shardscope::store::internal
