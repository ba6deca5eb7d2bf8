// ModeledClock and ModeledInput (see modeled_clock.h).
#include "runtime/modeled_clock.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "profiler/trace/recorder.h"

namespace shardscope::runtime {

namespace {
std::vector<int64_t> NewTracks(int n) {
  std::vector<int64_t> t;
  for (int d = 0; d < n; ++d) t.push_back(trace::NextId());
  return t;
}

int64_t CostOf(const std::vector<compiler::OpCost>& costs, int64_t op_id, const compiler::CostModel& model) {
  if (op_id >= 0 && op_id < static_cast<int64_t>(costs.size())) return costs[op_id].modeled_ns;
  return static_cast<int64_t>(model.profile().kernel_overhead_ns);
}
}  // namespace

std::string ModeledOpName(const compiler::Instruction& i) { return compiler::KernelName(i, nullptr); }

ScheduleInput ModeledInput(const ScheduleInput& measured, const std::vector<compiler::OpCost>& costs,
                           const compiler::CostModel& model) {
  ScheduleInput m = measured;
  const int devices = static_cast<int>(m.per_device.size());
  // A while's slices are its regions' ops, each priced as itself per iteration.
  auto cost_of = [&](const DeviceOp& op) {
    return op.region_op ? model.InstructionCost(*op.region_op, devices).modeled_ns : CostOf(costs, op.op_id, model);
  };
  // Per collective and device: the modeled work since that device's previous
  // collective, for the wait at it for the slowest chip (ChipWaitNs).
  std::vector<std::vector<double>> segment(m.collectives.size(), std::vector<double>(devices, 0));
  for (int d = 0; d < devices; ++d) {
    double since = 0;
    for (DeviceOp& op : m.per_device[d]) {
      if (op.collective >= 0 && op.collective < static_cast<int>(m.collectives.size())) {
        // Every group of one collective instruction moves the same bytes.
        for (int64_t& g : m.collectives[op.collective].group_dur_ns) g = cost_of(op);
        segment[op.collective][d] = since;
        since = 0;
      } else if (op.kind == trace::SliceKind::kTransfer) {
        op.dur_ns = model.TransferCost(op.bytes).modeled_ns;
      } else {
        op.dur_ns = cost_of(op);
        since += static_cast<double>(op.dur_ns);
      }
    }
  }
  if (model.profile().chip_waits)
    for (size_t c = 0; c < m.collectives.size(); ++c) {
      CollectiveRun& run = m.collectives[c];
      for (size_t g = 0; g < run.groups.size() && g < run.group_dur_ns.size(); ++g) {
        double mean = 0;
        int members = 0;
        for (int64_t d : run.groups[g])
          if (d >= 0 && d < devices) mean += segment[c][d], ++members;
        if (members > 1) run.group_dur_ns[g] += std::llround(model.ChipWaitNs(mean / members, members));
      }
    }
  return m;
}

ModeledClock::ModeledClock(compiler::CostModel model, int num_devices)
    : model_(std::move(model)), tracks_(NewTracks(num_devices)), scheduler_(trace::Clock::kModeled, tracks_) {}

void ModeledClock::RecordTracks(const Topology& topology) const {
  if (!trace::enabled()) return;
  for (int d = 0; d < static_cast<int>(tracks_.size()); ++d) {
    trace::TrackRecord t;
    t.track_id = tracks_[d];
    t.name = absl::StrCat("chip ", d, " (modeled)");
    t.clock = trace::Clock::kModeled;
    t.device_id = d;
    t.host_id = topology.device(d).host_id();
    trace::recorder().Record(t);
  }
}

void ModeledClock::RecordOps(int64_t graph_id, const compiler::Module& program,
                             const std::vector<compiler::OpCost>& costs,
                             const compiler::FusionPlan* fusion,
                             const std::vector<std::pair<int64_t, int64_t>>& moved_values) const {
  if (!trace::enabled()) return;
  std::map<int64_t, int64_t> moves(moved_values.begin(), moved_values.end());
  for (const auto& i : program.instructions()) {
    // One row per kernel that runs: absorbed ops are inside their kernel's row.
    if (fusion && fusion->Absorbed(i->id)) continue;
    const bool fused_root = fusion && fusion->KernelOf(i->id);
    trace::OpRecord r;
    r.graph_id = graph_id;
    r.op_id = i->id;
    r.name = compiler::KernelName(*i, fusion);
    r.opcode = fused_root ? "fusion" : compiler::OpcodeName(i->op);
    r.shape = i->shape.ToString();
    if (i->id >= 0 && i->id < static_cast<int64_t>(costs.size())) {
      const compiler::OpCost& c = costs[i->id];
      r.flops = c.flops;
      r.bytes_read = c.bytes_read;
      r.bytes_written = c.bytes_written;
      r.modeled_ns = c.modeled_ns;
      r.roofline = compiler::RooflineClassName(c.roofline);
    }
    r.profile = model_.profile().name;
    r.source_file = i->loc.file;
    r.source_line = i->loc.line;
    r.scope = i->scope;
    if (auto it = moves.find(i->id); it != moves.end()) r.moves_op_id = it->second;
    trace::recorder().Record(r);
  }
}

absl::StatusOr<std::vector<DeviceSpan>> ModeledClock::Schedule(const ScheduleInput& measured,
                                                               const compiler::Module& program,
                                                               const std::vector<compiler::OpCost>& costs,
                                                               const std::string& profile,
                                                               const compiler::FusionPlan* fusion) {
  if (profile == model_.profile().name) return scheduler_.Schedule(ModeledInput(measured, costs, model_));
  return scheduler_.Schedule(ModeledInput(measured, model_.ProgramCosts(program, fusion), model_));
}

}  // namespace shardscope::runtime
