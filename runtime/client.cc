#include "runtime/client.h"

#include <time.h>

#include <algorithm>
#include <new>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/fingerprint.h"
#include "compiler/passes.h"
#include "compiler/text.h"
#include "profiler/trace/recorder.h"
#include "runtime/collectives.h"
#include "runtime/compile_cache.h"
#include "runtime/cpu_calibration.h"
#include "runtime/executor.h"
#include "runtime/gemm.h"
#include "runtime/heap.h"

namespace shardscope::runtime {

trace::GraphRecord GraphRecordOf(const Executable& exe, const std::string& call_site) {
  trace::GraphRecord g;
  g.graph_id = exe.graph_id;
  g.fingerprint = exe.fingerprint;
  g.call_site = call_site;
  g.ir_text = exe.ir_before;
  g.ir_text_after = exe.ir_after;
  g.op_count = exe.op_count;
  g.flops = exe.flops;
  g.bytes = exe.bytes;
  return g;
}

namespace {

// Each output's layout followed back along propagation (each decision's
// `from`) to where it started: a parameter, or a value the user constrained.
std::vector<LayoutOrigin> OutputLayoutOrigins(const compiler::Module& m, const compiler::SpmdResult& spmd) {
  std::unordered_map<int64_t, const compiler::ShardingDecision*> decision;
  for (const auto& d : spmd.decisions) decision[d.instruction_id] = &d;
  std::unordered_map<int64_t, const compiler::Instruction*> by_id;
  for (const auto& i : m.instructions()) by_id[i->id] = i.get();
  std::vector<LayoutOrigin> origins;
  for (const compiler::Instruction* out : m.outputs()) {
    LayoutOrigin o;
    int64_t at = out->id;
    std::set<int64_t> seen;
    while (seen.insert(at).second) {
      auto d = decision.find(at);
      if (d == decision.end() || d->second->source != "propagated" || d->second->from < 0) break;
      at = d->second->from;
    }
    auto d = decision.find(at);
    auto i = by_id.find(at);
    if (d != decision.end() && d->second->source == "annotated" && i != by_id.end()) {
      if (i->second->op == compiler::Opcode::kParameter) {
        o.param_index = i->second->param_index;
      } else if (i->second->sharding) {
        o.loc = i->second->loc;
        o.sharding = i->second->sharding->ToString();
      }
    }
    origins.push_back(std::move(o));
  }
  return origins;
}

}  // namespace

const char* CacheOutcomeName(CacheOutcome c) {
  switch (c) {
    case CacheOutcome::kMiss: return "miss";
    case CacheOutcome::kMemoryHit: return "memory_hit";
    case CacheOutcome::kDiskHit: return "disk_hit";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const TopologyOptions& opts) {
  auto topo = Topology::Create(opts);
  if (!topo.ok()) return topo.status();
  // Before the chips allocate: a page faulted in a kernel is device time.
  KeepFreedMemory();
  auto c = std::unique_ptr<Client>(new Client());
  c->topology_ = std::move(*topo);
  int n = c->topology_->num_devices();
  int threads = std::max(1, std::min<int>(n, static_cast<int>(std::thread::hardware_concurrency())));
  if (opts.simulate) threads = 1;  // nothing is computed
  c->pool_ = std::make_unique<ThreadPool>(threads);
  // Cores the mesh leaves idle help each device's big kernels (intra_op.h).
  const int helpers = static_cast<int>(std::thread::hardware_concurrency()) / n - 1;
  if (helpers > 0 && !opts.simulate)
    for (int d = 0; d < n; ++d) c->gangs_.push_back(std::make_unique<Gang>(helpers));
  if (!opts.simulate) ChosenGemmBackend();  // measured now, on the host, not inside the first kernel
  for (int d = 0; d < n; ++d) c->device_tracks_.push_back(trace::NextId());
  c->device_clock_ = std::make_unique<Scheduler>(trace::Clock::kDevice, c->device_tracks_);
  auto profile = ResolveProfile(opts.profile);
  if (!profile.ok()) return profile.status();
  c->modeled_clock_ = std::make_unique<ModeledClock>(compiler::CostModel(c->ChipProfileHere(*profile)), n);
  c->pending_transfers_.assign(n, {});
  for (int d = 0; d < n; ++d) c->host_of_.push_back(c->topology_->device(d).host_id());
  if (opts.simulate) c->simulator_ = std::make_unique<Simulator>(n, c->host_of_, c->topology_->interconnect());
  return c;
}

void Client::RecordTopology(const std::string&) {
  if (!trace::enabled()) return;
  auto& r = trace::recorder();
  for (int h = 0; h < topology_->num_hosts(); ++h) r.Record(trace::HostRecord{h, absl::StrCat("host ", h)});
  for (int d = 0; d < num_devices() && !simulated(); ++d) {  // a simulated run has no device clock
    trace::TrackRecord t;
    t.track_id = device_tracks_[d];
    t.name = absl::StrCat("chip ", d);
    t.clock = trace::Clock::kDevice;
    t.device_id = d;
    t.host_id = topology_->device(d).host_id();
    r.Record(t);
  }
  modeled_clock_->RecordTracks(*topology_);
}

absl::StatusOr<CompileResult> Client::Compile(const compiler::Module& global) {
  int64_t t0 = trace::HostNowNs();
  std::string key = absl::StrCat(compiler::Fingerprint(global), "/", num_devices(), fusion_enabled_ ? "" : "/unfused");
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      cache_use_.remove(key);
      cache_use_.push_back(key);
      CompileResult hit;
      hit.executable = it->second;
      hit.cache = CacheOutcome::kMemoryHit;
      hit.duration_ns = trace::HostNowNs() - t0;
      return hit;
    }
  }
  CompileResult result;
  {
    std::lock_guard<std::mutex> l(mu_);
    result.evicted = evicted_.count(key) > 0;
  }
  std::shared_ptr<Executable> exe;
  const std::string disk_key = CompileCacheKey(key);
  if (disk_cache_) {
    auto loaded = disk_cache_->Load(disk_key);
    if (!loaded.ok()) result.disk_error = std::string(loaded.status().message());
    else if (*loaded) exe = **loaded;
  }
  compiler::PassStats pass_stats;
  if (exe) {
    result.cache = CacheOutcome::kDiskHit;
  } else {
    // CSE and DCE first: the partitioner and the executor see the smaller graph.
    std::unique_ptr<compiler::Module> simplified = compiler::Simplify(global, &pass_stats);
    auto spmd = compiler::SpmdPartition(*simplified, num_devices());
    if (!spmd.ok()) return spmd.status();
    exe = std::make_shared<Executable>();
    exe->fingerprint = key.substr(0, key.find('/'));
    for (const auto* p : global.parameters()) exe->param_shapes.push_back(p->shape);
    for (const auto* o : global.outputs()) exe->output_shapes.push_back(o->shape);
    exe->param_shardings = spmd->param_shardings;
    exe->output_shardings = spmd->output_shardings;
    exe->sharding = ShardingRows(*simplified, *spmd);
    exe->output_layout_origins = OutputLayoutOrigins(*simplified, *spmd);
    exe->rematerializations = std::move(spmd->rematerializations);
    exe->moved_values = std::move(spmd->moved_values);
    exe->program = std::move(spmd->local);
    exe->ir_before = compiler::PrintModule(global);
    exe->ir_after = compiler::PrintModule(*exe->program);
    exe->op_count = static_cast<int>(global.instructions().size());
    if (disk_cache_) {
      // Best effort: a cache that cannot be written costs the next run a compile, nothing more.
      disk_cache_->Store(disk_key, *exe).IgnoreError();
    }
  }
  exe->graph_id = trace::NextId();
  exe->flops = 0;
  for (const auto& i : exe->program->instructions()) exe->flops += compiler::InstructionFlops(*i);
  exe->bytes = 0;
  for (const auto& s : exe->param_shapes) exe->bytes += s.bytes();
  for (const auto& s : exe->output_shapes) exe->bytes += s.bytes();
  if (fusion_enabled_) exe->fusion = compiler::PlanFusion(*exe->program);
  exe->memory = compiler::PlanMemory(*exe->program, &exe->fusion);
  if (trace::enabled()) {
    const compiler::MemoryPlan& mp = exe->memory;
    trace::MemoryPlanRecord r;
    r.graph_id = exe->graph_id;
    r.peak_bytes = mp.peak_bytes;
    r.parameter_bytes = mp.parameter_bytes;
    r.arena_bytes = mp.arena_bytes;
    r.unshared_bytes = mp.unshared_bytes;
    r.peak_op = mp.peak_index >= 0 ? mp.buffers[mp.peak_index].op : "";
    for (int k = 0; k < static_cast<int>(mp.live_at_peak.size()) && k < 10; ++k) {
      const compiler::BufferInfo& b = mp.buffers[mp.live_at_peak[k]];
      r.live_at_peak.push_back({k, b.instruction_id, b.op, b.bytes, b.parameter, b.loc.file, b.loc.line, b.scope});
    }
    // The curve over the ops that run (as the `ops` table lists them): an op
    // absorbed into a kernel starts no buffer, so the live bytes there never
    // exceed those at the kernel before it, and the curve keeps the peak.
    for (size_t k = 0; k < mp.buffers.size() && k < mp.live_bytes.size(); ++k) {
      if (exe->fusion.Absorbed(mp.buffers[k].instruction_id)) continue;
      r.curve_op_ids.push_back(mp.buffers[k].instruction_id);
      r.curve_live_bytes.push_back(mp.live_bytes[k]);
    }
    trace::recorder().Record(r);
  }
  exe->op_costs = modeled_clock_->model().ProgramCosts(*exe->program, &exe->fusion);
  exe->cost_profile = modeled_clock_->model().profile().name;
  modeled_clock_->RecordOps(exe->graph_id, *exe->program, exe->op_costs, &exe->fusion, exe->moved_values);
  RecordFusion(exe->graph_id, *exe->program, exe->fusion);
  if (trace::enabled()) {
    trace::ShardingRecord rows = exe->sharding;
    rows.graph_id = exe->graph_id;
    trace::recorder().Record(rows);
  }
  if (trace::enabled() && result.cache == CacheOutcome::kMiss) {
    const int64_t ops_after = static_cast<int64_t>(exe->program->instructions().size());
    const std::pair<const char*, int64_t> passes[] = {
        {"algebraic", pass_stats.algebraic_simplified}, {"constant_folding", pass_stats.constants_folded},
        {"cse", pass_stats.cse_removed},                {"dce", pass_stats.dce_removed},
        {"fusion", exe->fusion.fused_ops()}};
    for (const auto& [name, changed] : passes)
      trace::recorder().Record(trace::PassRecord{exe->graph_id, name, changed, ops_after});
  }
  std::lock_guard<std::mutex> l(mu_);
  cache_[key] = exe;
  cache_use_.push_back(key);
  evicted_.erase(key);
  while (cache_capacity_ > 0 && cache_.size() > cache_capacity_) {
    cache_.erase(cache_use_.front());
    evicted_.insert(cache_use_.front());
    cache_use_.pop_front();
  }
  result.executable = exe;
  result.duration_ns = trace::HostNowNs() - t0;
  return result;
}

void Client::set_cache_capacity(size_t programs) {
  std::lock_guard<std::mutex> l(mu_);
  cache_capacity_ = programs;
}

absl::Status Client::SetCacheDir(const std::string& dir) {
  if (dir.empty()) {
    disk_cache_.reset();
    return absl::OkStatus();
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    return absl::InvalidArgumentError(absl::StrCat("compile cache directory '", dir,
                                                   "' is not a directory; pass a directory to --cache-dir"));
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("compile cache directory '", dir, "' cannot be created: ",
                                                   ec.message()));
  auto cache = CompileCache::Open(dir);
  if (!cache.ok()) return cache.status();
  disk_cache_ = std::move(*cache);
  return absl::OkStatus();
}

std::string Client::CompileCacheKey(const std::string& key) const {
  // Everything that decides the program: the graph (fingerprint: ops, shapes,
  // dtypes, shardings, inlined constants), the device count and fusion (in
  // `key`), how devices sit on hosts, the target profile and the compiler's version.
  return absl::StrCat(key, "/hosts=", topology_->num_hosts(), "/profile=", modeled_clock_->model().profile().name, "/",
                      kCompilerVersion);
}

trace::ShardingRecord Client::ShardingRows(const compiler::Module& global, const compiler::SpmdResult& spmd) {
  std::vector<const compiler::Instruction*> by_id;
  for (const auto& i : global.instructions()) {
    if (i->id >= static_cast<int64_t>(by_id.size())) by_id.resize(i->id + 1, nullptr);
    by_id[i->id] = i.get();
  }
  auto name = [](const compiler::Instruction& i) {
    return i.op == compiler::Opcode::kParameter && !i.name.empty() ? i.name : compiler::KernelName(i, nullptr);
  };
  trace::ShardingRecord r;
  for (const auto& d : spmd.decisions) {
    const compiler::Instruction* i = d.instruction_id < static_cast<int64_t>(by_id.size()) ? by_id[d.instruction_id]
                                                                                           : nullptr;
    if (!i) continue;
    // Beyond the chips a machine computes (a simulated pod), the device list in
    // its iota form: "<=[4096]", not 4096 numbers in every row.
    const bool long_list = d.sharding.kind() == Sharding::Kind::kTiled && d.sharding.devices().size() > 64;
    r.decisions.push_back({d.instruction_id, name(*i), long_list ? d.sharding.ToIotaString() : d.sharding.ToString(),
                           d.source, d.via, i->loc.file,
                           i->loc.line, d.from});
  }
  for (const auto& m : spmd.rematerializations) {
    const compiler::Instruction* i = m.instruction_id < static_cast<int64_t>(by_id.size()) ? by_id[m.instruction_id]
                                                                                           : nullptr;
    r.rematerializations.push_back(
        {m.instruction_id, i ? name(*i) : "?", m.op, m.bytes, m.loc.file, m.loc.line});
  }
  return r;
}

void Client::RecordFusion(int64_t graph_id, const compiler::Module& program,
                          const compiler::FusionPlan& plan) const {
  if (!trace::enabled() || plan.decisions.empty()) return;
  std::vector<const compiler::Instruction*> by_id(plan.kernel_of.size(), nullptr);
  for (const auto& i : program.instructions()) by_id[i->id] = i.get();
  trace::FusionRecord r;
  r.graph_id = graph_id;
  for (const auto& d : plan.decisions) {
    const compiler::Instruction& c = *by_id[d.consumer_id];
    r.edges.push_back({d.producer_id, d.consumer_id, d.producer, d.consumer, d.fused, d.kernel, d.reason,
                       c.loc.file, c.loc.line, c.scope});
  }
  trace::recorder().Record(r);
}

absl::StatusOr<DeviceArray> Client::TransferToDevices(const Literal& value, const Sharding& sharding,
                                                      const std::string& name) {
  if (absl::Status s = sharding.Validate(value.shape().rank(), num_devices()); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", s.message()));
  DeviceArray a{value.shape(), sharding, {}};
  Shape local = sharding.ShardShape(value.shape());
  if (simulated()) {
    // One shard (device 0's), shared by every chip: its values are never computed on.
    std::vector<IndexRange> r = sharding.ShardRanges(value.shape(), 0);
    std::vector<int64_t> off;
    for (const auto& x : r) off.push_back(x.begin);
    Literal shard(local);
    ExtractBlock(value, off, &shard);
    auto b = DeviceBuffer::Create(topology_->device(0), std::move(shard), name);
    if (!b.ok()) return b.status();
    a.shards.assign(num_devices(), *b);
    std::lock_guard<std::mutex> l(mu_);
    pending_sim_transfers_.push_back({.name = absl::StrCat("transfer ", name),
                                      .kind = trace::SliceKind::kTransfer,
                                      .dur_ns = modeled_clock_->model().TransferCost(local.bytes()).modeled_ns,
                                      .bytes = local.bytes()});
    return a;
  }
  bool padded = false;
  for (int d = 0; d < value.shape().rank(); ++d) padded |= value.shape().dims[d] % sharding.TilesInDim(d) != 0;
  for (int d = 0; d < num_devices(); ++d) {
    int64_t t0 = ThreadCpuNs();
    std::vector<IndexRange> r = sharding.ShardRanges(value.shape(), d);
    std::vector<int64_t> off;
    for (const auto& x : r) off.push_back(x.begin);
    Literal shard(local);
    if (poison_padding_ && padded) {
      const double poison = IsFloat(local.dtype) ? std::nan("") : local.dtype == DType::kI1 ? 1 : 1e9;
      for (int64_t k = 0; k < shard.elements(); ++k) shard.SetDouble(k, poison);
    }
    // A maximal value is on its one device; the others hold zeros.
    if (sharding.kind() != Sharding::Kind::kMaximal || d == sharding.maximal_device())
      ExtractBlock(value, off, &shard);
    auto b = DeviceBuffer::Create(topology_->device(d), std::move(shard), name);
    if (!b.ok()) return b.status();
    a.shards.push_back(*b);
    std::lock_guard<std::mutex> l(mu_);
    pending_transfers_[d].push_back(
        {.op_id = -1,
         .name = absl::StrCat("transfer ", name),
         .kind = trace::SliceKind::kTransfer,
         .dur_ns = ThreadCpuNs() - t0,
         .collective = -1,
         .bytes = local.bytes(),
         .received_bytes = local.bytes()});
  }
  return a;
}

absl::StatusOr<Literal> Client::TransferToHost(const DeviceArray& a) {
  Literal out(a.shape);
  if (a.sharding.IsReplicated() || a.sharding.kind() == Sharding::Kind::kManual) {
    if (a.shards.empty()) return absl::InternalError("device array without shards");
    return a.shards[0]->literal();
  }
  for (int d = 0; d < static_cast<int>(a.shards.size()); ++d) {
    std::vector<IndexRange> r = a.sharding.ShardRanges(a.shape, d);
    std::vector<int64_t> off;
    for (const auto& x : r) off.push_back(x.begin);
    if (a.sharding.kind() == Sharding::Kind::kMaximal && d != a.sharding.maximal_device()) continue;
    CopyBlock(a.shards[d]->literal(), off, &out);
  }
  return out;
}

absl::StatusOr<std::vector<DeviceArray>> Client::Execute(const Executable& exe,
                                                         const std::vector<const DeviceArray*>& args,
                                                         const ExecuteOptions& opts, ExecuteStats* stats) {
  int64_t t0 = trace::HostNowNs();
  int n = num_devices();
  if (std::vector<Fault> failed = faults_.FailuresBy(opts.step); !failed.empty())
    return FailedChips(exe, opts.step, failed);
  if (simulated()) return Simulate(exe, args, opts, stats);
  if (args.size() != exe.param_shapes.size())
    return absl::InvalidArgumentError(absl::StrCat("execute: program takes ", exe.param_shapes.size(),
                                                   " arguments, got ", args.size()));
  // Will the program fit? Its inputs are already on the chips; the rest of its
  // peak must fit in what is free. Say which buffers make the peak.
  const int64_t extra = exe.memory.peak_bytes - exe.memory.parameter_bytes;
  for (int d = 0; d < n; ++d) {
    const Device& dev = topology_->device(d);
    if (dev.in_use() + extra > dev.hbm_bytes())
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of memory on chip ", d, ": graph ", exe.graph_id, " needs ", compiler::FormatBytes(extra),
          " beyond its inputs at its peak (at ", exe.memory.buffers[exe.memory.peak_index].op, "), but ",
          compiler::FormatBytes(dev.hbm_bytes() - dev.in_use()), " of ", compiler::FormatBytes(dev.hbm_bytes()),
          " are free; largest live buffers at the peak: ", exe.memory.DescribeLargestAtPeak(4)));
  }
  std::vector<std::vector<const Literal*>> per_device(n);
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k]->sharding != exe.param_shardings[k] || args[k]->shape != exe.param_shapes[k])
      return absl::InvalidArgumentError(absl::StrCat(
          "execute: argument ", k, " is ", args[k]->shape.ToString(), " ", args[k]->sharding.ToString(),
          ", the program expects ", exe.param_shapes[k].ToString(), " ", exe.param_shardings[k].ToString()));
    for (int d = 0; d < n; ++d) per_device[d].push_back(&args[k]->shards[d]->literal());
  }
  ScheduleInput timing;
  // Out of host memory in a kernel: an error the run ends with ("failed after
  // step N"), not an abort that leaves the run "ended abnormally".
  absl::StatusOr<std::vector<std::vector<std::shared_ptr<DeviceBuffer>>>> outs =
      absl::InternalError("not executed");
  try {
    outs = ExecuteProgram(*exe.program, *topology_, *pool_, per_device, &timing, &gangs_, &exe.fusion);
  } catch (const std::bad_alloc&) {
    outs = absl::ResourceExhaustedError(absl::StrCat(
        "out of host memory executing graph ", exe.graph_id, " on ", n,
        " chips (this machine's memory, or the process's limit: ulimit -v): use a smaller --batch or fewer chips"));
  }
  if (!outs.ok()) return outs.status();
  {
    std::lock_guard<std::mutex> l(mu_);
    // Transfers made for this run go first on each device's timeline; an
    // asynchronous run brings the ones taken when it was enqueued.
    for (int d = 0; d < n; ++d) {
      auto& ops = timing.per_device[d];
      const size_t before = ops.size();
      if (opts.transfers) {
        if (d < static_cast<int>(opts.transfers->size()))
          ops.insert(ops.begin(), (*opts.transfers)[d].begin(), (*opts.transfers)[d].end());
      } else {
        ops.insert(ops.begin(), pending_transfers_[d].begin(), pending_transfers_[d].end());
        pending_transfers_[d].clear();
      }
      // The memory peak's op moved back by the transfers put before it.
      if (d < static_cast<int>(timing.memory.size())) {
        timing.memory[d].peak_op += ops.size() - before;
        timing.memory[d].end_bytes = topology_->device(d).in_use();
      }
    }
  }
  timing.step = opts.step;
  timing.graph_id = exe.graph_id;
  timing.launch_ns = opts.launch_ns;
  timing.host_wait_ns = opts.host_wait_ns;
  // Faults change what the device clock composes, not what was measured: the
  // modeled clock below gets the run as measured.
  const Interconnect* wiring = topology_->interconnect();
  std::optional<ScheduleInput> faulted;
  if (!faults_.empty() || wiring) {
    faulted = timing;
    faults_.Apply(&*faulted, host_of_);
    if (wiring) {
      AddLinkTraffic(&*faulted, *wiring, faults_);
      std::lock_guard<std::mutex> l(mu_);
      links_used_.resize(wiring->links().size(), false);
      for (const CollectiveRun& run : faulted->collectives)
        for (const auto& group : run.group_links)
          for (const LinkTransfer& t : group)
            if (const int link = wiring->FindLink(t.a, t.b); link >= 0) links_used_[link] = true;
    }
  }
  auto spans = device_clock_->Schedule(faulted ? *faulted : timing);
  if (!spans.ok()) return spans.status();
  if (auto m = modeled_clock_->Schedule(timing, *exe.program, exe.op_costs, exe.cost_profile, &exe.fusion); !m.ok())
    return m.status();
  std::vector<DeviceArray> result;
  for (size_t k = 0; k < exe.output_shapes.size(); ++k) {
    DeviceArray a{exe.output_shapes[k], exe.output_shardings[k], {}};
    for (int d = 0; d < n; ++d) a.shards.push_back((*outs)[d][k]);
    result.push_back(std::move(a));
  }
  if (stats) {
    stats->spans = *spans;
    stats->host_ns = trace::HostNowNs() - t0;
  }
  return result;
}

std::vector<Client::FaultWithoutEffect> Client::FaultsWithoutEffect() const {
  std::vector<FaultWithoutEffect> out;
  const Interconnect* ic = topology_->interconnect();
  if (!ic) return out;
  std::vector<bool> used;
  if (simulator_) {
    used.assign(ic->links().size(), false);
    for (const auto& [graph, program] : simulator_->programs())
      for (const trace::SimCollective& c : program.collectives)
        for (const auto& group : c.group_links)
          for (const trace::SimLinkUse& u : group)
            if (const int link = ic->FindLink(u.a, u.b); link >= 0 && (u.bytes > 0 || u.busy_ns > 0))
              used[link] = true;
  } else {
    std::lock_guard<std::mutex> l(mu_);
    used = links_used_;
  }
  used.resize(ic->links().size(), false);
  for (size_t k = 0; k < faults_.faults().size(); ++k) {
    const Fault& f = faults_.faults()[k];
    if (f.kind != Fault::kLink) continue;
    const int link = ic->FindLink(f.a, f.b);
    if (link < 0 || used[link]) continue;
    // The links that did carry traffic, those of its two chips first: where the collectives went instead.
    std::vector<std::string> near, far;
    int64_t count = 0;
    for (size_t l = 0; l < used.size(); ++l) {
      if (!used[l]) continue;
      ++count;
      const Link& x = ic->links()[l];
      const bool mine = x.a == f.a || x.b == f.a || x.a == f.b || x.b == f.b;
      (mine ? near : far).push_back(absl::StrCat(x.a, "-", x.b));
    }
    near.insert(near.end(), far.begin(), far.end());
    if (near.size() > 8) near.resize(8);
    FaultWithoutEffect& w = out.emplace_back();
    w.stored = absl::StrCat("faults[", k, "] had no effect: its link carried no traffic in this run (no collective's "
                            "route crossed it)");
    w.said = (absl::StrCat(
        "--fault '", f.spec, "': link ", f.a, "-", f.b, " carried no traffic in this run (no collective's route ",
        "crossed it), so the fault had no effect",
        count == 0 ? "; no link carried any"
                   : absl::StrCat("; links that did (", count, " in all",
                                  static_cast<int64_t>(near.size()) < count ? ", the first few" : "",
                                  ", those of chips ", f.a, " and ", f.b, " first): ", absl::StrJoin(near, ", "))));
  }
  return out;
}

absl::Status Client::SetFaults(FaultPlan faults) {
  for (const Fault& f : faults.faults())
    if (absl::Status s = CheckFault(f, num_devices(), topology_->num_hosts(), topology_->interconnect()); !s.ok())
      return s;
  if (absl::Status s = CheckFaultSet(faults.faults()); !s.ok()) return s;
  faults_ = std::move(faults);
  if (simulator_) simulator_->SetFaults(faults_);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DeviceArray>> Client::Simulate(const Executable& exe,
                                                          const std::vector<const DeviceArray*>& args,
                                                          const ExecuteOptions& opts, ExecuteStats* stats) {
  const int64_t t0 = trace::HostNowNs();
  if (args.size() != exe.param_shapes.size())
    return absl::InvalidArgumentError(absl::StrCat("execute: program takes ", exe.param_shapes.size(),
                                                   " arguments, got ", args.size()));
  // Will the program fit a chip of the profile? Its plan's peak, inputs included.
  const int64_t hbm = topology_->device(0).hbm_bytes();
  if (exe.memory.peak_bytes > hbm)
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory on every chip (simulated): graph ", exe.graph_id, " needs ",
        compiler::FormatBytes(exe.memory.peak_bytes), " at its peak (at ",
        exe.memory.peak_index >= 0 ? exe.memory.buffers[exe.memory.peak_index].op : "?", ") but a chip has ",
        compiler::FormatBytes(hbm), "; largest live buffers at the peak: ", exe.memory.DescribeLargestAtPeak(4)));
  std::vector<trace::SimOp> transfers;
  if (opts.sim_transfers) {
    transfers = *opts.sim_transfers;
  } else {
    std::lock_guard<std::mutex> l(mu_);
    transfers.swap(pending_sim_transfers_);
  }
  if (absl::Status s = simulator_->Run(exe.graph_id, *exe.program, &exe.fusion, exe.op_costs, modeled_clock_->model(),
                                       opts.step, std::move(transfers), exe.fingerprint);
      !s.ok())
    return s;
  std::vector<DeviceArray> result;
  for (size_t k = 0; k < exe.output_shapes.size(); ++k) {
    DeviceArray a{exe.output_shapes[k], exe.output_shardings[k], {}};
    Literal zeros(exe.output_shardings[k].ShardShape(exe.output_shapes[k]));
    auto b = DeviceBuffer::Create(topology_->device(0), std::move(zeros), "simulated output");
    if (!b.ok()) return b.status();
    a.shards.assign(num_devices(), *b);
    result.push_back(std::move(a));
  }
  if (stats) stats->host_ns = trace::HostNowNs() - t0;
  return result;
}

absl::Status Client::FailedChips(const Executable& exe, int step, const std::vector<Fault>& failed) const {
  // What a hang detector says: the collective the stopped chips leave
  // unfinished, and who waits in it. Every chip runs the program's collectives
  // in order; a chip blocks at the first one whose group (its replica group, or
  // its source in a permute) holds a chip stopped or blocked before it. Chips
  // of other groups go on and block later, where their group meets a blocked
  // chip, or finish the program and wait in the next. Chips that fail at the
  // same step are all named.
  const int n = num_devices();
  constexpr int kRunning = std::numeric_limits<int>::max();
  std::vector<int> blocked(n, kRunning);  // the collective (index) a chip waits in; -1: stopped
  std::vector<int> chips;
  for (const Fault& f : failed) {
    blocked[f.chip] = -1;
    chips.push_back(f.chip);
  }
  std::vector<std::string> names;  // each collective's kernel name, by index
  for (const auto& i : exe.program->instructions()) {
    if (!compiler::IsCollective(i->op)) continue;
    const int k = static_cast<int>(names.size());
    names.push_back(compiler::KernelName(*i, nullptr));
    auto held = [&](int64_t d) { return d >= 0 && d < n && blocked[d] < k; };
    auto wait = [&](int64_t d) {
      if (d >= 0 && d < n && blocked[d] == kRunning) blocked[d] = k;
    };
    if (i->op == compiler::Opcode::kCollectivePermute) {
      for (const auto& [src, dst] : i->source_target_pairs)
        if (held(src)) wait(dst);
      continue;
    }
    std::vector<std::vector<int64_t>> groups = i->replica_groups;
    if (groups.empty()) {  // one group of every chip
      groups.emplace_back();
      for (int d = 0; d < n; ++d) groups.back().push_back(d);
    }
    for (const auto& g : groups)
      if (std::any_of(g.begin(), g.end(), held))
        for (int64_t d : g) wait(d);
  }
  // "0-8,10-15"
  auto ranges = [](const std::vector<int>& v) {
    std::string out;
    for (size_t k = 0; k < v.size(); ++k) {
      size_t e = k;
      while (e + 1 < v.size() && v[e + 1] == v[e] + 1) ++e;
      absl::StrAppend(&out, out.empty() ? "" : ",", v[k], e > k ? absl::StrCat("-", v[e]) : "");
      k = e;
    }
    return out;
  };
  // The first collective anyone waits in: the one the stopped chips leave unfinished.
  int first = kRunning;
  for (int d = 0; d < n; ++d)
    if (blocked[d] >= 0) first = std::min(first, blocked[d]);
  std::vector<int> waiting, later, finishing;
  for (int d = 0; d < n; ++d) {
    if (blocked[d] < 0) continue;
    if (blocked[d] == first) waiting.push_back(d);
    else if (blocked[d] != kRunning) later.push_back(d);
    else finishing.push_back(d);
  }
  // "chip 2 (host 0)"; "chip 1 (host 0) and chip 2 (host 0)"; "chips 1 and 2".
  auto and_join = [](const std::vector<std::string>& parts) {
    std::string out;
    for (size_t k = 0; k < parts.size(); ++k)
      absl::StrAppend(&out, k == 0 ? "" : k + 1 == parts.size() ? " and " : ", ", parts[k]);
    return out;
  };
  std::vector<std::string> where_parts, ids;
  for (int c : chips) {
    where_parts.push_back(absl::StrCat("chip ", c, " (host ", topology_->device(c).host_id(), ")"));
    ids.push_back(absl::StrCat(c));
  }
  const std::string where = and_join(where_parts);
  const std::string whom = absl::StrCat(chips.size() == 1 ? "chip " : "chips ", and_join(ids));
  auto chips_text = [&](const std::vector<int>& v) {
    return absl::StrCat(v.size() == 1 ? "chip " : "chips ", ranges(v));
  };
  const std::string collective = names.empty() ? std::string() : first == kRunning ? names.front() : names[first];
  std::string message;
  if (names.empty()) {
    message = absl::StrCat("hang detected at step ", step, ": ", where, " stopped responding while running graph ",
                           exe.graph_id, ", which has no collective; its results never arrive");
  } else {
    message = absl::StrCat("hang detected at step ", step, ": ", where, " stopped responding; collective ", collective,
                           " of graph ", exe.graph_id, " never completed: ",
                           waiting.empty() ? "no chip" : chips_text(waiting), " wait", waiting.size() == 1 ? "s" : "",
                           " in it for ", whom);
    // Chips of other groups get further: say where they stop too.
    if (!later.empty()) {
      std::map<int, std::vector<int>> by_collective;
      for (int d : later) by_collective[blocked[d]].push_back(d);
      std::vector<std::string> parts;
      for (const auto& [k, v] : by_collective) parts.push_back(absl::StrCat(chips_text(v), " at ", names[k]));
      absl::StrAppend(&message, "; then ", and_join(parts), ", waiting for chips blocked before them");
    }
    if (!finishing.empty())
      absl::StrAppend(&message, "; ", chips_text(finishing), " finish", finishing.size() == 1 ? "es" : "",
                      " the graph and wait in the next");
  }
  // Recorded as the detector's finding (`hangs`, a row per chip), for the fleet to name the chips.
  for (int c : chips)
    trace::recorder().Record(trace::HangRecord{step, c, topology_->device(c).host_id(), exe.graph_id, collective,
                                               collective.empty() ? std::vector<int>{} : waiting, message});
  return absl::AbortedError(message);
}

compiler::ChipProfile Client::ChipProfileHere(const compiler::ChipProfile& p) const {
  return p.ForGangWidth(gang_width())
      .ForSharedCores(num_devices(), static_cast<int>(std::thread::hardware_concurrency()));
}

absl::Status Client::SetSimCalibration(RecordedOpTimes times) {
  if (!simulator_) return absl::FailedPreconditionError("calibration from a recorded run applies to a simulated run only");
  simulator_->SetCalibration(std::move(times));
  return absl::OkStatus();
}

absl::Status Client::SetProfile(const std::string& name) {
  if (name == modeled_clock_->model().profile().name) return absl::OkStatus();
  auto p = ResolveProfile(name);
  if (!p.ok()) return p.status();
  modeled_clock_->set_model(compiler::CostModel(ChipProfileHere(*p)));
  return absl::OkStatus();
}

size_t Client::cache_size() const {
  std::lock_guard<std::mutex> l(mu_);
  return cache_.size();
}

std::vector<std::shared_ptr<const Executable>> Client::CachedExecutables() const {
  std::vector<std::shared_ptr<const Executable>> out;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [key, exe] : cache_) out.push_back(exe);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->graph_id < b->graph_id; });
  return out;
}

}  // namespace shardscope::runtime
