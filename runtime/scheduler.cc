#include "runtime/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "profiler/trace/recorder.h"

namespace shardscope::runtime {

Scheduler::Scheduler(trace::Clock clock, std::vector<int64_t> track_ids)
    : clock_(clock),
      tracks_(std::move(track_ids)),
      free_(tracks_.size(), 0),
      ran_(tracks_.size(), false),
      moved_(tracks_.size()) {}

namespace {
size_t TotalOps(const ScheduleInput& in) {
  size_t k = 0;
  for (const auto& ops : in.per_device) k += ops.size();
  return k;
}
}  // namespace

absl::StatusOr<std::vector<DeviceSpan>> Scheduler::Schedule(const ScheduleInput& in) {
  int n = static_cast<int>(in.per_device.size());
  if (n != static_cast<int>(tracks_.size()))
    return absl::InternalError("scheduler: device count differs from its tracks");
  // Malformed input (a hand-built or stored schedule) is an error, never an
  // out-of-range read.
  for (size_t c = 0; c < in.collectives.size(); ++c) {
    const CollectiveRun& run = in.collectives[c];
    if (run.group_dur_ns.size() != run.groups.size())
      return absl::InvalidArgumentError(absl::StrCat("scheduler: collective ", c, " has ", run.groups.size(),
                                                     " groups but ", run.group_dur_ns.size(), " durations"));
    for (const auto& g : run.groups)
      for (int64_t d : g)
        if (d < 0 || d >= n)
          return absl::InvalidArgumentError(absl::StrCat("scheduler: collective ", c, " names device ", d,
                                                         ", the run has ", n, " devices"));
  }
  for (int d = 0; d < n; ++d)
    for (const DeviceOp& op : in.per_device[d])
      if (op.collective >= static_cast<int>(in.collectives.size()))
        return absl::InvalidArgumentError(absl::StrCat("scheduler: ", op.name, " on device ", d,
                                                       " refers to collective ", op.collective, " of ",
                                                       in.collectives.size()));
  std::vector<int64_t> t(n);
  std::vector<size_t> next(n, 0);
  std::vector<DeviceSpan> spans(n);
  struct Delay { int d; int64_t at, dur; };
  std::vector<Delay> delayed;
  for (int d = 0; d < n; ++d) {
    t[d] = std::max(free_[d], in.launch_ns);
    if (d < static_cast<int>(in.start_delay_ns.size()) && in.start_delay_ns[d] > 0) {
      // Preempted: the chip comes back after the delay (faults.h).
      delayed.push_back({d, t[d], in.start_delay_ns[d]});
      t[d] += in.start_delay_ns[d];
      spans[d].host_wait_ns += in.start_delay_ns[d];
    }
    spans[d].start_ns = t[d];
    // The part of the gap before this program that the host is to blame for
    // (see the header): never more than the gap, never before a first program.
    if (clock_ == trace::Clock::kDevice && ran_[d] && in.host_wait_ns > 0)
      spans[d].host_wait_ns += std::min(t[d] - free_[d] - spans[d].host_wait_ns, in.host_wait_ns);
  }
  // Asked once per run: the per-op paths below test plain bools.
  const trace::SliceDetail detail = trace::slice_detail(in.step);
  const bool kernels = detail == trace::SliceDetail::kKernels;
  const bool counters = clock_ == trace::Clock::kDevice && trace::enabled();
  const bool memory = counters && in.memory.size() == static_cast<size_t>(n);
  // The run's slices, handed to the recorder together at the end (one step for a queueing sink).
  std::vector<trace::SliceRecord> out;
  if (kernels) out.reserve(TotalOps(in) + n);
  if (detail != trace::SliceDetail::kNone) {
    for (const Delay& dl : delayed) {
      trace::SliceRecord s;
      s.slice_id = trace::NextId();
      s.track_id = tracks_[dl.d];
      s.start_ns = dl.at;
      s.dur_ns = dl.dur;
      s.name = "waiting for host";
      s.kind = trace::SliceKind::kHostWait;
      s.step = in.step;
      s.graph_id = in.graph_id;
      out.push_back(std::move(s));
    }
    for (int d = 0; d < n; ++d) {
      int64_t preempted = 0;
      for (const Delay& dl : delayed)
        if (dl.d == d) preempted = dl.dur;
      if (spans[d].host_wait_ns - preempted <= 0) continue;
      trace::SliceRecord s;
      s.slice_id = trace::NextId();
      s.track_id = tracks_[d];
      s.start_ns = t[d] - spans[d].host_wait_ns;
      s.dur_ns = spans[d].host_wait_ns - preempted;
      s.name = "waiting for host";
      s.kind = trace::SliceKind::kHostWait;
      s.step = in.step;  // the step whose program the device waited for
      s.graph_id = in.graph_id;
      out.push_back(std::move(s));
    }
  }
  auto slice = [&](int d, const DeviceOp& op, int64_t start, int64_t dur, int64_t flow, int64_t arrival) -> int64_t {
    trace::SliceRecord& s = out.emplace_back();
    s.slice_id = trace::NextId();
    s.track_id = tracks_[d];
    s.start_ns = start;
    s.dur_ns = dur;
    s.name = op.name;
    s.kind = op.kind;
    s.step = in.step;
    s.graph_id = in.graph_id;
    s.op_id = op.op_id;
    s.flow_id = flow;
    s.bytes = op.bytes;
    s.arrival_ns = arrival;
    return s.slice_id;
  };
  // When each device reached the op at which its memory peaked.
  std::vector<int64_t> peak_at(memory ? n : 0, -1);
  auto mark_peak = [&](int d) {
    if (memory && peak_at[d] < 0 && next[d] == in.memory[d].peak_op) peak_at[d] = t[d];
  };
  // Which group of each collective a device belongs to.
  std::vector<std::vector<int>> group_of(in.collectives.size(), std::vector<int>(n, -1));
  for (size_t c = 0; c < in.collectives.size(); ++c)
    for (size_t g = 0; g < in.collectives[c].groups.size(); ++g)
      for (int64_t d : in.collectives[c].groups[g])
        if (d >= 0 && d < n) group_of[c][d] = static_cast<int>(g);

  size_t remaining = 0;
  for (const auto& ops : in.per_device) remaining += ops.size();
  while (remaining > 0) {
    bool progress = false;
    for (int d = 0; d < n; ++d) {
      // Kernels and transfers run back to back.
      while (next[d] < in.per_device[d].size() && in.per_device[d][next[d]].collective < 0) {
        const DeviceOp& op = in.per_device[d][next[d]];
        mark_peak(d);
        if (kernels) slice(d, op, t[d], op.dur_ns, -1, -1);
        t[d] += op.dur_ns;
        (op.kind == trace::SliceKind::kTransfer ? spans[d].transfer_ns : spans[d].compute_ns) += op.dur_ns;
        ++next[d];
        --remaining;
        progress = true;
      }
      if (next[d] >= in.per_device[d].size()) continue;
      // A collective: start it when every member of the group has reached it.
      const DeviceOp& op = in.per_device[d][next[d]];
      int c = op.collective;
      int g = group_of[c][d];
      if (g < 0) return absl::InternalError(absl::StrCat("scheduler: device ", d, " is in no group of ", op.name));
      const auto& members = in.collectives[c].groups[g];
      bool ready = true;
      int64_t start = 0;
      for (int64_t m : members) {
        if (next[m] >= in.per_device[m].size() || in.per_device[m][next[m]].collective != c) {
          ready = false;
          break;
        }
        start = std::max(start, t[m]);
      }
      if (!ready) continue;
      int64_t dur = in.collectives[c].group_dur_ns[g];
      int64_t flow = kernels ? trace::NextId() : -1;
      const std::vector<LinkTransfer>* links =
          g < static_cast<int>(in.collectives[c].group_links.size()) ? &in.collectives[c].group_links[g] : nullptr;
      for (int64_t m : members) {
        const DeviceOp& mop = in.per_device[m][next[m]];
        if (memory && peak_at[m] < 0 && next[m] == in.memory[m].peak_op) peak_at[m] = start;
        // arrival_ns: when this member got here (t[m]); start - t[m] is its wait for the others.
        if (kernels) {
          const int64_t parent = slice(static_cast<int>(m), mop, start, dur, flow, t[m]);
          // The links this member's lane shows, inside its collective.
          if (links)
            for (const LinkTransfer& lt : *links) {
              if (lt.device != m) continue;
              trace::SliceRecord& s = out.emplace_back();
              s.slice_id = trace::NextId();
              s.track_id = tracks_[m];
              s.start_ns = start;
              s.dur_ns = lt.dur_ns;
              s.depth = 1;
              s.parent_id = parent;
              s.name = absl::StrCat("link ", lt.a, "-", lt.b);
              s.kind = trace::SliceKind::kTransfer;
              s.step = in.step;
              s.graph_id = in.graph_id;
              s.op_id = mop.op_id;
              s.bytes = lt.bytes;
            }
        }
        spans[m].collective_ns += dur;  // includes nothing of the wait: that shows as idle
        t[m] = start + dur;
        ++next[m];
        --remaining;
      }
      progress = true;
    }
    if (!progress)
      return absl::InternalError("scheduler: devices wait on collectives that never line up (mismatched programs)");
  }
  for (int d = 0; d < n; ++d) {
    spans[d].end_ns = t[d];
    free_[d] = t[d];
    ran_[d] = true;
  }
  if (detail == trace::SliceDetail::kPrograms) {
    const std::string name = absl::StrCat("graph ", in.graph_id);
    for (int d = 0; d < n; ++d) {
      if (in.per_device[d].empty()) continue;
      trace::SliceRecord s;
      s.slice_id = trace::NextId();
      s.track_id = tracks_[d];
      s.start_ns = spans[d].start_ns;
      s.dur_ns = spans[d].end_ns - spans[d].start_ns;
      s.name = name;
      s.kind = trace::SliceKind::kCompute;
      s.step = in.step;
      s.graph_id = in.graph_id;
      out.push_back(std::move(s));
    }
  }
  if (!out.empty()) trace::recorder().RecordSlices(std::move(out));
  if (counters) {
    auto counter = [&](int d, const char* name, int64_t ts, int64_t value) {
      trace::recorder().Record(trace::CounterRecord{d, name, ts, static_cast<double>(value)});
    };
    for (int d = 0; d < n; ++d) {
      if (memory && in.memory[d].peak_bytes >= 0)
        counter(d, kHbmInUseCounter, peak_at[d] >= 0 ? peak_at[d] : spans[d].end_ns, in.memory[d].peak_bytes);
      if (memory && in.memory[d].end_bytes >= 0) counter(d, kHbmInUseCounter, spans[d].end_ns, in.memory[d].end_bytes);
      Moved& mv = moved_[d];
      for (const DeviceOp& op : in.per_device[d]) {
        if (op.kind == trace::SliceKind::kTransfer) {
          mv.from_host += op.received_bytes;
        } else {
          mv.sent += op.sent_bytes;
          mv.received += op.received_bytes;
        }
      }
      // Cumulative: a sample only when the total moved, so idle chips add no rows.
      if (mv.sent != mv.sent_said) counter(d, kCollectiveSentCounter, spans[d].end_ns, mv.sent_said = mv.sent);
      if (mv.received != mv.received_said)
        counter(d, kCollectiveReceivedCounter, spans[d].end_ns, mv.received_said = mv.received);
      if (mv.from_host != mv.from_host_said)
        counter(d, kHostToDeviceCounter, spans[d].end_ns, mv.from_host_said = mv.from_host);
    }
  }
  return spans;
}

}  // namespace shardscope::runtime
