#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "runtime/collectives.h"
#include "runtime/kernels.h"
#include "runtime/mix.h"

namespace shardscope::runtime {

namespace {
// The number of the next segment any program runs (see SegmentRotation).
std::atomic<uint64_t> g_segment_rotation{0};
}  // namespace

int SegmentRotation(uint64_t segment, int chips) {
  if (chips <= 1) return 0;
  // Each run of `chips` segments starts every chip once, in an order drawn
  // afresh for each run: balanced within a step as a counter is, and tied to
  // no place in it. (Drawn segment by segment, a step's chips could get
  // unequal turns, and their step-to-step spread grow.)
  const uint64_t n = static_cast<uint64_t>(chips), block = segment / n, place = segment % n;
  absl::InlinedVector<int, 64> order(chips);
  for (int c = 0; c < chips; ++c) order[c] = c;
  uint64_t state = SplitMix64(block);
  for (uint64_t k = n - 1; k > 0; --k) {  // Fisher-Yates, far enough to fix `place`
    state = SplitMix64(state);
    std::swap(order[k], order[state % (k + 1)]);
    if (k == place) break;
  }
  return order[place];
}

namespace {

std::string OpName(const compiler::Instruction& i) { return compiler::KernelName(i, nullptr); }

// Ops that a real device would not spend time on (bound or baked in).
bool Untimed(compiler::Opcode op) {
  return op == compiler::Opcode::kParameter || op == compiler::Opcode::kConstant ||
         op == compiler::Opcode::kPartitionId;
}

// One device's live values during a run.
struct Frame {
  std::vector<Literal> owned;
  std::vector<const Literal*> value;
  std::vector<int64_t> charged;
  // A finished while's results (by the while's id) until its get_tuple_elements take them.
  std::map<int64_t, std::vector<std::shared_ptr<DeviceBuffer>>> results;
};

// Runs while `w` on every device from its carried values `carried[d]` until
// its condition is false, leaving the results in `carried`. The regions run
// as programs of their own (collectives in the body included); their
// kernels are appended to `timing` under the while's id. Every device must
// agree on the condition, as they run one program in lockstep.
absl::Status RunWhile(const compiler::Instruction& w, Topology& topology, ThreadPool& pool,
                      std::vector<std::vector<std::shared_ptr<DeviceBuffer>>>& carried, ScheduleInput* timing,
                      const std::vector<std::unique_ptr<Gang>>* gangs) {
  const int n = topology.num_devices();
  const std::string where = absl::StrCat("stablehlo.while (%", w.id, ")",
                                         w.loc.known() ? absl::StrCat(" at ", w.loc.file, ":", w.loc.line) : "");
  // Each region's instructions by id, for naming what its slices ran (made once, not per iteration).
  std::map<int64_t, const compiler::Instruction*> cond_ops, body_ops;
  for (const auto& i : w.cond->instructions()) cond_ops[i->id] = i.get();
  for (const auto& i : w.body->instructions()) body_ops[i->id] = i.get();
  auto run = [&](const compiler::Module& region, const char* what)
      -> absl::StatusOr<std::vector<std::vector<std::shared_ptr<DeviceBuffer>>>> {
    std::vector<std::vector<const Literal*>> args(n);
    for (int d = 0; d < n; ++d)
      for (const auto& b : carried[d]) args[d].push_back(&b->literal());
    ScheduleInput sub;
    auto out = ExecuteProgram(region, topology, pool, args, &sub, gangs, nullptr);
    if (!out.ok()) return absl::Status(out.status().code(), absl::StrCat(where, ", its ", what, ": ", out.status().message()));
    const int offset = static_cast<int>(timing->collectives.size());
    const auto& by_id = &region == w.cond.get() ? cond_ops : body_ops;
    for (int d = 0; d < n; ++d) {
      // The region's memory peak, at its op's place among the while's ops.
      if (d < static_cast<int>(sub.memory.size()) && d < static_cast<int>(timing->memory.size()) &&
          sub.memory[d].peak_bytes > timing->memory[d].peak_bytes)
        timing->memory[d] = {sub.memory[d].peak_bytes, timing->per_device[d].size() + sub.memory[d].peak_op, -1};
      for (DeviceOp& op : sub.per_device[d]) {
        if (!op.region_op) {  // a nested loop's op keeps its own
          auto it = by_id.find(op.op_id);
          op.region_op = it == by_id.end() ? nullptr : it->second;
        }
        op.op_id = w.id;
        op.name = absl::StrCat("while.", w.id, "/", what, "/", op.name);
        if (op.collective >= 0) op.collective += offset;
        timing->per_device[d].push_back(std::move(op));
      }
    }
    for (CollectiveRun& c : sub.collectives) timing->collectives.push_back(std::move(c));
    return out;
  };
  for (int64_t trip = 0;; ++trip) {
    auto go = run(*w.cond, "cond");
    if (!go.ok()) return go.status();
    const bool first = (*go)[0][0]->literal().GetDouble(0) != 0;
    for (int d = 1; d < n; ++d)
      if (((*go)[d][0]->literal().GetDouble(0) != 0) != first)
        return absl::FailedPreconditionError(absl::StrCat(
            where, ": the devices disagree on its condition at iteration ", trip, " (device 0 says ", first,
            ", device ", d, " says ", !first, "); a loop's condition must be the same on every device"));
    if (!first) return absl::OkStatus();
    auto next = run(*w.body, "body");
    if (!next.ok()) return next.status();
    carried = *std::move(next);
  }
}

}  // namespace

absl::StatusOr<std::vector<std::vector<std::shared_ptr<DeviceBuffer>>>> ExecuteProgram(
    const compiler::Module& program, Topology& topology, ThreadPool& pool,
    const std::vector<std::vector<const Literal*>>& args, ScheduleInput* timing,
    const std::vector<std::unique_ptr<Gang>>* gangs, const compiler::FusionPlan* fusion) {
  using compiler::Instruction;
  using compiler::Opcode;
  const auto& instrs = program.instructions();
  const int n = topology.num_devices();
  const size_t count = instrs.size();
  if (static_cast<int>(args.size()) != n)
    return absl::InvalidArgumentError("execute: arguments are not given for every device");

  // Last use of every value, so intermediates are freed as soon as possible.
  // A fused kernel reads all its members' outside operands when it runs, at
  // its root's place.
  std::vector<int64_t> index_of(count, -1);
  for (size_t k = 0; k < count; ++k) index_of[instrs[k]->id] = static_cast<int64_t>(k);
  auto kernel_of = [&](const Instruction& i) { return fusion ? fusion->KernelOf(i.id) : nullptr; };
  std::vector<int64_t> last_use(count, -1);
  for (size_t k = 0; k < count; ++k) {
    const Instruction& i = *instrs[k];
    int64_t at = static_cast<int64_t>(k);
    if (fusion) {
      at = -1;
      for (const Instruction* e : fusion->EvaluatedAt(i)) at = std::max(at, index_of[e->id]);
    }
    for (const Instruction* o : i.operands) last_use[o->id] = std::max(last_use[o->id], at);
  }
  for (const Instruction* o : program.outputs()) last_use[o->id] = static_cast<int64_t>(count);

  std::vector<Frame> frames(n);
  for (int d = 0; d < n; ++d) {
    frames[d].owned.resize(count);
    frames[d].value.assign(count, nullptr);
    frames[d].charged.assign(count, 0);
    if (args[d].size() != program.parameters().size())
      return absl::InvalidArgumentError(absl::StrCat("execute: device ", d, " got ", args[d].size(),
                                                     " arguments, the program takes ",
                                                     program.parameters().size()));
    for (const Instruction* p : program.parameters()) {
      const Literal* a = args[d][p->param_index];
      if (a->shape() != p->shape)
        return absl::InvalidArgumentError(absl::StrCat("execute: argument ", p->param_index, " ('", p->name,
                                                       "') on device ", d, " is ", a->shape().ToString(),
                                                       ", the program expects ", p->shape.ToString()));
      frames[d].value[p->id] = a;
    }
  }
  // Whatever is still charged when this returns (an error part way through
  // included) goes back to the devices' budgets.
  struct ReleaseCharges {
    std::vector<Frame>& frames;
    Topology& topology;
    ~ReleaseCharges() {
      for (size_t d = 0; d < frames.size(); ++d)
        for (int64_t& c : frames[d].charged)
          if (c > 0) {
            topology.device(static_cast<int>(d)).Release(c);
            c = 0;
          }
    }
  } release_charges{frames, topology};
  timing->per_device.assign(n, {});
  timing->memory.assign(n, {});
  std::vector<absl::Status> errors(n);
  // HBM in use on device d just after an allocation of this run: the run's
  // peak, and the op it belongs to (the next one pushed for the Scheduler).
  // One atomic load per kernel.
  auto note_memory = [&](int d) {
    const int64_t now = topology.device(d).in_use();
    MemorySamples& m = timing->memory[d];
    if (now > m.peak_bytes) {
      m.peak_bytes = now;
      m.peak_op = timing->per_device[d].size();
    }
  };

  // A while's result may be read by more than one get_tuple_element: the last takes it.
  std::vector<bool> last_of_result(count, false);
  {
    std::map<std::pair<int64_t, int64_t>, int64_t> last;
    for (const auto& i : instrs)
      if (i->op == Opcode::kGetTupleElement) last[{i->operands[0]->id, i->dims[0]}] = i->id;
    for (const auto& [key, id] : last) last_of_result[id] = true;
  }

  auto release_operands = [&](Frame& f, int d, const Instruction& i, size_t k) {
    for (const Instruction* o : i.operands) {
      if (o->op == Opcode::kWhile && last_use[o->id] == static_cast<int64_t>(k)) f.results.erase(o->id);
      if (last_use[o->id] == static_cast<int64_t>(k) && f.charged[o->id] > 0) {
        topology.device(d).Release(f.charged[o->id]);
        f.charged[o->id] = 0;
        f.owned[o->id] = Literal();
        f.value[o->id] = nullptr;
      }
    }
  };
  auto release = [&](Frame& f, int d, size_t k) {
    if (const compiler::FusedKernel* kern = kernel_of(*instrs[k])) {
      for (const Instruction* m : kern->members) release_operands(f, d, *m, k);
    } else {
      release_operands(f, d, *instrs[k], k);
    }
  };

  size_t k = 0;
  while (k < count) {
    // Run every device up to the next collective.
    size_t end = k;
    while (end < count && !compiler::IsCollective(instrs[end]->op) && instrs[end]->op != Opcode::kWhile) ++end;
    // The chips go to the cores in a rotating order: the first ones after a
    // collective find the caches full of its data, and measured that made the
    // same chips ~8% slower on the device clock in every step (chips 0 and 1
    // on 2 cores), which a fleet diagnosis would blame on them.
    // (Drawn, not counted: a counter would line up with the segments of a step.)
    const int rotation = SegmentRotation(g_segment_rotation.fetch_add(1, std::memory_order_relaxed), n);
    pool.ParallelFor(n, [&](int i) {
      const int d = (i + rotation) % n;
      Frame& f = frames[d];
      Device& dev = topology.device(d);
      Gang* gang = gangs && d < static_cast<int>(gangs->size()) ? (*gangs)[d].get() : nullptr;
      GangScope gang_scope(gang);
      for (size_t j = k; j < end && errors[d].ok(); ++j) {
        const Instruction& i = *instrs[j];
        if (i.op == Opcode::kParameter) continue;
        if (fusion && fusion->Absorbed(i.id)) continue;  // runs inside its kernel, at the root
        const compiler::FusedKernel* kern = kernel_of(i);
        const std::string name = compiler::KernelName(i, fusion);
        absl::Status s = dev.Allocate(i.shape.bytes(), name);
        if (!s.ok()) { errors[d] = s; break; }
        f.charged[i.id] = i.shape.bytes();
        note_memory(d);
        if (i.op == Opcode::kGetTupleElement) {  // a while's result: handed over, not computed
          auto& held = f.results[i.operands[0]->id][i.dims[0]];
          f.owned[i.id] = last_of_result[i.id] ? held->Take() : held->literal();
          f.value[i.id] = &f.owned[i.id];
          release(f, d, j);
          continue;
        }
        // A reshape of a value at its last use takes that value's buffer: no copy.
        const Instruction* src = i.op == Opcode::kReshape && !kern ? i.operands[0] : nullptr;
        const bool take = src && last_use[src->id] == static_cast<int64_t>(j) &&
                          f.value[src->id] == &f.owned[src->id] && f.owned[src->id].shape().dtype == i.shape.dtype &&
                          f.owned[src->id].bytes() == i.shape.bytes();
        if (!take) f.owned[i.id] = Literal::Uninitialized(i.shape);
        // Thread CPU time costs a system call (~1.3 us in a VM): read it twice per kernel.
        int64_t t0 = 0;
        if (take) {
          t0 = ThreadCpuNs();
          f.owned[i.id] = Literal::Reinterpreted(std::move(f.owned[src->id]), i.shape);
          f.value[src->id] = nullptr;
        } else if (kern) {
          t0 = ThreadCpuNs();
          s = EvalFusedKernel(*kern, f.value, &f.owned[i.id]);
        } else {
          std::vector<const Literal*> ops;
          for (const Instruction* o : i.operands) ops.push_back(f.value[o->id]);
          t0 = ThreadCpuNs();
          s = EvalInstruction(i, ops, d, &f.owned[i.id]);
        }
        int64_t dur = ThreadCpuNs() - t0 + (gang ? gang->TakeExtraNs() : 0);
        if (!s.ok()) { errors[d] = s; break; }
        f.value[i.id] = &f.owned[i.id];
        if (!Untimed(i.op)) timing->per_device[d].push_back({i.id, name, trace::SliceKind::kCompute, dur, -1, 0});
        release(f, d, j);
      }
    });
    for (const auto& e : errors)
      if (!e.ok()) return e;
    if (end >= count) break;

    if (instrs[end]->op == Opcode::kWhile) {
      const Instruction& w = *instrs[end];
      std::vector<std::vector<std::shared_ptr<DeviceBuffer>>> carried(n);
      for (int d = 0; d < n; ++d)
        for (const Instruction* o : w.operands) {
          auto b = DeviceBuffer::Create(topology.device(d), *frames[d].value[o->id], OpName(w));
          if (!b.ok()) return b.status();
          carried[d].push_back(*std::move(b));
        }
      if (absl::Status s = RunWhile(w, topology, pool, carried, timing, gangs); !s.ok()) return s;
      for (int d = 0; d < n; ++d) {
        frames[d].results[w.id] = std::move(carried[d]);
        release(frames[d], d, end);
      }
      k = end + 1;
      continue;
    }

    // The collective: each group of participants (replica groups; for
    // collective_permute the devices linked by its pairs, see
    // ParticipantGroups) runs on one pool thread, and every member gets its
    // own result.
    const Instruction& c = *instrs[end];
    int cidx = static_cast<int>(timing->collectives.size());
    auto groups = ParticipantGroups(c, n);
    if (!groups.ok())
      return absl::Status(groups.status().code(), absl::StrCat(OpName(c), ": ", groups.status().message()));
    CollectiveRun run;
    run.groups = *std::move(groups);
    run.group_dur_ns.assign(run.groups.size(), 0);
    std::vector<absl::Status> gerr(run.groups.size());
    for (int d = 0; d < n; ++d) {
      absl::Status s = topology.device(d).Allocate(c.shape.bytes(), OpName(c));
      if (!s.ok()) return s;
      frames[d].charged[c.id] = c.shape.bytes();
      frames[d].owned[c.id] = Literal::Uninitialized(c.shape);
      note_memory(d);
    }
    // The groups start in an order that turns with each collective: the
    // group a pool worker takes first after waking runs slower (a few us on
    // an all-reduce of a few KB: 5.4 against 3.2-3.8 us), and always group 0,
    // it made one virtual link read up to 2x its peers in healthy runs.
    const int num_groups = static_cast<int>(run.groups.size());
    const int first_group = num_groups > 0 ? cidx % num_groups : 0;
    pool.ParallelFor(num_groups, [&](int i) {
      const int g = (i + first_group) % num_groups;
      const auto& members = run.groups[g];
      std::vector<const Literal*> in;
      std::vector<Literal*> out;
      for (int64_t m : members) {
        in.push_back(frames[m].value[c.operands[0]->id]);
        out.push_back(&frames[m].owned[c.id]);
      }
      int64_t t0 = ThreadCpuNs();
      gerr[g] = RunCollective(c, members, in, out);
      run.group_dur_ns[g] = ThreadCpuNs() - t0;
    });
    for (const auto& e : gerr)
      if (!e.ok()) return absl::Status(e.code(), absl::StrCat(OpName(c), ": ", e.message()));
    // What each device put on its links and took off them (the device clock's counters).
    std::vector<LinkBytes> moved(n);
    for (const auto& members : run.groups)
      for (size_t p = 0; p < members.size(); ++p)
        if (members[p] >= 0 && members[p] < n) moved[members[p]] = CollectiveLinkBytes(c, members, p);
    for (int d = 0; d < n; ++d) {
      frames[d].value[c.id] = &frames[d].owned[c.id];
      DeviceOp op{c.id, OpName(c), trace::SliceKind::kCollective, 0, cidx, c.operands[0]->shape.bytes()};
      op.sent_bytes = moved[d].sent;
      op.received_bytes = moved[d].received;
      timing->per_device[d].push_back(std::move(op));
      release(frames[d], d, end);
    }
    timing->collectives.push_back(std::move(run));
    k = end + 1;
  }

  std::vector<std::vector<std::shared_ptr<DeviceBuffer>>> out(n);
  for (int d = 0; d < n; ++d) {
    Frame& f = frames[d];
    std::vector<int> uses(count, 0);
    for (const Instruction* o : program.outputs()) ++uses[o->id];
    for (const Instruction* o : program.outputs()) {
      // Move an owned output out of the frame when it is listed once; copy otherwise.
      bool movable = f.value[o->id] == &f.owned[o->id] && --uses[o->id] == 0;
      Literal v = movable ? std::move(f.owned[o->id]) : *f.value[o->id];
      auto b = DeviceBuffer::Create(topology.device(d), std::move(v), OpName(*o));
      if (!b.ok()) return b.status();
      out[d].push_back(*b);
    }
    for (size_t j = 0; j < count; ++j)
      if (f.charged[j] > 0) {
        topology.device(d).Release(f.charged[j]);
        f.charged[j] = 0;
      }
  }
  return out;
}

}  // namespace shardscope::runtime
