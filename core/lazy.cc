#include "core/lazy.h"

#include <execinfo.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/fingerprint.h"
#include "core/context.h"
#include "core/recompile.h"
#include "core/symbols.h"
#include "profiler/trace/recorder.h"
#include "runtime/dispatch.h"

namespace shardscope {
namespace internal {
namespace {
using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;

std::string At(const SourceLoc& l) { return absl::StrCat(l.file, ":", l.line); }

// The user's stack above core: the call-site identity beyond the cut's line.
struct CallSite {
  std::string key;   // identity: the line plus the return addresses
  std::string text;  // for people: "samples/mlp.cc:88 mark_step <- RunMlp <- main"
};

// A frame's function name, looked up once per address (demangling every
// frame of every cut would cost more than the cut's bookkeeping).
std::string NameOfFrame(void* addr) {
  static std::mutex mu;
  static auto* names = new std::unordered_map<void*, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = names->find(addr);
  if (it == names->end()) it = names->emplace(addr, internal::FunctionName(addr)).first;
  return it->second;
}

CallSite CaptureCallSite(const SourceLoc& loc, const char* what) {
  void* frames[24];
  int n = backtrace(frames, 24);
  CallSite cs;
  cs.key = At(loc);
  cs.text = absl::StrCat(At(loc), " ", what);
  // Skip this function and the cut; then the library's own frames up to the
  // public entry point (mark_step, item(), a compile()d step) are left out of
  // the text, however many the compiler inlined.
  int shown = 0;
  bool in_library = true;
  for (int k = 2; k < n; ++k) {
    const std::string s = NameOfFrame(frames[k]);
    // Keyed by what the user can tell apart, the functions on the stack, not
    // by return addresses: a step helper called from two lines of one
    // function is one call site (its text would read the same twice), so its
    // second graph is a recompilation with a cause, not a first compile.
    absl::StrAppend(&cs.key, "|", s);
    if (shown >= 4) continue;
    bool library = s.empty();
    for (const char* own : {"shardscope::Cut", "shardscope::CaptureCallSite", "shardscope::internal::",
                            "shardscope::mark_step", "shardscope::Tensor::", "shardscope::CompiledFn"})
      library = library || s.rfind(own, 0) == 0;
    if (in_library && library) continue;
    in_library = false;
    if (!s.empty() && s.rfind("__libc", 0) != 0 && s.rfind("std::", 0) != 0 && s != "_start") {
      absl::StrAppend(&cs.text, " <- ", s);
      ++shown;
    }
  }
  return cs;
}

void HostSlice(const char* name, trace::SliceKind kind, int64_t start, int64_t end, int depth, int64_t parent,
               int64_t graph_id, int64_t id = 0) {
  // Host slices are step and program slices: kept unless capture is off for this step.
  if (trace::slice_detail(Ctx().step) == trace::SliceDetail::kNone) return;
  trace::SliceRecord s;
  s.slice_id = id ? id : trace::NextId();
  s.track_id = Ctx().host_track;
  s.start_ns = start;
  s.dur_ns = end - start;
  s.depth = depth;
  s.parent_id = parent;
  s.name = name;
  s.kind = kind;
  s.step = Ctx().step;
  s.graph_id = graph_id;
  trace::recorder().Record(s);
}

// Builds the IR of `outputs` (pending nodes), the same module whatever order
// the user built the graph in: outputs are lowered in the canonical order of
// compiler::CanonicalOutputOrder, each operands-first in operand order, and
// data nodes become parameters in first-visit order.
struct Lowered {
  std::unique_ptr<Module> module;
  std::vector<std::shared_ptr<Node>> params;  // data node of each parameter
  std::vector<size_t> order;                  // module output j is outputs[order[j]]
  std::vector<SourceLoc> notes;               // per instruction: its node's note_loc
};

std::unique_ptr<Instruction> LowerNode(const Node& n,
                                       const std::unordered_map<const Node*, Instruction*>& done) {
  auto i = std::make_unique<Instruction>();
  i->op = n.op;
  i->shape = n.shape;
  if (n.is_data()) {
    i->name = n.name;
    i->loc = n.created;
    i->sharding = n.data->sharding;
    return i;
  }
  for (const auto& o : n.operands) i->operands.push_back(done.at(o.get()));
  i->dims = n.dims;
  i->dot = n.dot;
  i->slice = n.slice;
  i->pad = n.pad;
  i->gather = n.gather;
  i->scatter = n.scatter;
  i->conv = n.conv;
  i->window = n.window;
  i->reduce = n.reduce;
  i->compare = n.compare;
  i->literal = n.literal;
  i->loc = n.loc;
  i->scope = n.scope;
  i->sharding = n.annotation;
  return i;
}

Lowered Lower(const std::vector<std::shared_ptr<Node>>& outputs) {
  // Every node the outputs reach, as an instruction not yet in a module, operands first.
  std::unordered_map<const Node*, Instruction*> done;
  // Each instruction until the module takes it, and the data node of each parameter.
  struct Built {
    std::unique_ptr<Instruction> first;
    std::shared_ptr<Node> second;  // data nodes
    const Node* node = nullptr;
  };
  std::unordered_map<const Instruction*, Built> built;
  std::vector<const Instruction*> topo;
  std::vector<Instruction*> outs;
  for (const auto& out : outputs) {
    std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{out, 0}};
    while (!stack.empty()) {
      auto [n, k] = stack.back();
      if (done.count(n.get())) { stack.pop_back(); continue; }
      if (k < n->operands.size()) {
        stack.back().second++;
        const auto& c = n->operands[k];
        if (!done.count(c.get())) stack.push_back({c, 0});
        continue;
      }
      std::unique_ptr<Instruction> owned = LowerNode(*n, done);
      Instruction* i = owned.get();
      done[n.get()] = i;
      topo.push_back(i);
      built[i] = {std::move(owned), n->is_data() ? n : nullptr, n.get()};
      stack.pop_back();
    }
    outs.push_back(done.at(out.get()));
  }
  // Into the module in the canonical order: outputs sorted, each subgraph operands-first.
  Lowered L;
  L.order = compiler::CanonicalOutputOrder(topo, {outs.begin(), outs.end()});
  L.module = std::make_unique<Module>("graph");
  Module& m = *L.module;
  for (size_t j : L.order) {
    std::vector<std::pair<Instruction*, size_t>> stack{{outs[j], 0}};
    while (!stack.empty()) {
      auto [i, k] = stack.back();
      auto it = built.find(i);
      if (it == built.end() || !it->second.first) {  // added already
        stack.pop_back();
        continue;
      }
      if (k < i->operands.size()) {
        stack.back().second++;
        stack.push_back({i->operands[k], 0});
        continue;
      }
      if (it->second.second) L.params.push_back(std::move(it->second.second));
      L.notes.push_back(it->second.node->note_loc);
      m.Add(std::move(it->second.first));
      stack.pop_back();
    }
    m.AddOutput(outs[j]);
  }
  return L;
}

// The user's call that set a value's layout, by its sharding source.
const char* LayoutCall(const DeviceData& d) {
  return d.sharding_source == "annotated" ? "mark_sharding"
         : d.sharding_source == "auto"    ? "apply_auto_sharding"
                                          : "clear_sharding";
}

// The mark_sharding behind each output's layout, when propagation carried it
// from an annotated input (or one whose own layout had such a driver) or from
// a value constrained in this graph: a later step's changed input layout is
// the user's annotation, not the op (often opt.step()) that made the value.
struct LayoutDriver {
  SourceLoc loc;
  std::string from;
  std::string by = "mark_sharding";
};
std::vector<LayoutDriver> LayoutDrivers(const runtime::Executable& exe, const Lowered& L) {
  std::vector<LayoutDriver> drivers(exe.output_layout_origins.size());
  for (size_t j = 0; j < drivers.size(); ++j) {
    const runtime::LayoutOrigin& o = exe.output_layout_origins[j];
    if (o.param_index >= 0 && o.param_index < static_cast<int64_t>(L.params.size())) {
      const Node& p = *L.params[o.param_index];
      const DeviceData& d = *p.data;
      if (d.sharding_source != "propagated" && d.sharding_loc.known())  // the user's call laid it out
        drivers[j] = {d.sharding_loc, p.name, LayoutCall(d)};
      else if (d.layout_from_loc.known())
        drivers[j] = {d.layout_from_loc, d.layout_from, d.layout_from_by};
    } else if (o.loc.known() && L.module) {
      // The constrained value, found by where it was made and its constraint;
      // its mark_sharding line is the instruction's note. Two candidates with
      // different notes blame neither.
      const auto& instrs = L.module->instructions();
      std::optional<SourceLoc> note;
      bool ambiguous = false;
      for (size_t k = 0; k < instrs.size() && k < L.notes.size(); ++k) {
        const Instruction& i = *instrs[k];
        if (i.op == Opcode::kParameter || !i.sharding || i.loc.file != o.loc.file || i.loc.line != o.loc.line ||
            !L.notes[k].known() || i.sharding->ToString() != o.sharding)
          continue;
        if (note && (note->file != L.notes[k].file || note->line != L.notes[k].line)) ambiguous = true;
        note = L.notes[k];
      }
      if (note && !ambiguous) drivers[j] = {*note, ""};
    }
  }
  return drivers;
}

nlohmann::json Signature(const std::vector<GraphInput>& inputs) {
  nlohmann::json sig = nlohmann::json::array();
  for (const auto& in : inputs) {
    sig.push_back({{"name", in.name},
                   {"shape", in.shape.ToString()},
                   {"dtype", DTypeName(in.shape.dtype)},
                   {"sharding", in.sharding.ToString()},
                   {"source", in.created.known() ? At(in.created) : ""}});
    if (in.requires_grad) sig.back()["trained"] = true;  // a model's parameter, not data
  }
  return sig;
}

enum class CutReason { kMarkStep, kValueRead };

// What a compiled program depends on besides its graph (the compile cache's
// key has them too), for the options_changed cause.
std::string CompileOptions(const runtime::Client& client) {
  return absl::StrCat(client.num_devices(), " chips, fusion ", client.fusion() ? "on" : "off", ", profile ",
                      client.profile().name);
}

// The one-line notice at a recompilation, as PT_XLA_DEBUG prints.
void Notice(int step, const RecompileCause& c) {
  std::string detail = c.detail.size() > 200 ? c.detail.substr(0, 197) + "..." : c.detail;
  for (char& ch : detail)
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  // A read's cut is its call site's first graph: an extra program, not a recompilation.
  std::fprintf(stderr, "shardscope: step %d %s: %s%s%s at %s:%d: %s\n", step,
               c.kind == "value_read_cut" ? "compiled a program a value read cut off" : "recompiled",
               c.kind.c_str(), c.subkind.empty() ? "" : "/", c.subkind.c_str(), c.loc.file.c_str(),
               c.loc.line, detail.c_str());
}

// The pending live tensors, oldest first; the first error of an op that made one.
absl::StatusOr<std::vector<std::shared_ptr<TensorImpl>>> PendingTensors() {
  Context& ctx = Ctx();
  std::vector<std::shared_ptr<TensorImpl>> pending;
  {
    std::lock_guard<std::mutex> l(ctx.mu);
    for (auto it = ctx.live.begin(); it != ctx.live.end();) {
      auto t = it->second.lock();
      if (!t) { it = ctx.live.erase(it); continue; }
      if (!t->node->is_data() && t->node->op != Opcode::kConstant) pending.push_back(t);
      else if (!t->node->is_data() && !t->node->error.ok()) pending.push_back(t);
      ++it;
    }
  }
  for (const auto& t : pending)
    if (!t->node->error.ok()) return t->node->error;
  return pending;
}

absl::Status Cut(CutReason reason, const SourceLoc& loc, const CallSite* fixed_site = nullptr) {
  Context& ctx = Ctx();
  ctx.last_cut = {};
  // An earlier step that failed on the devices reports here, at the next cut.
  if (absl::Status s = ctx.client->TakeAsyncError(); !s.ok()) return s;
  int64_t t_begin = trace::HostNowNs();
  int64_t root_id = trace::NextId();
  auto found = PendingTensors();
  if (!found.ok()) return found.status();
  const std::vector<std::shared_ptr<TensorImpl>>& pending = *found;
  if (pending.empty()) return absl::OkStatus();
  ctx.step_cut = true;

  const char* what = reason == CutReason::kMarkStep ? "mark_step" : "value read";
  CallSite site = fixed_site ? *fixed_site : CaptureCallSite(loc, what);
  std::vector<std::shared_ptr<Node>> outs;
  for (const auto& t : pending) outs.push_back(t->node);
  Lowered L = Lower(outs);
  int64_t t_traced = trace::HostNowNs();

  // Inputs on the devices (host values move now).
  runtime::Client& client = *ctx.client;
  std::vector<GraphInput> inputs;
  for (const auto& p : L.params) {
    DeviceData& d = *p->data;
    if (!d.device) {
      auto a = client.TransferToDevices(*d.host, d.sharding, p->name.empty() ? "input" : p->name);
      if (!a.ok()) return a.status();
      d.device = runtime::AsyncArray::Ready(std::move(*a));
      d.host.reset();
    }
    GraphInput in;
    in.name = p->name;
    in.shape = p->shape;
    in.sharding = d.sharding;
    in.created = p->created;
    in.shape_from_data = p->shape_from_data;
    if (d.sharding_loc.known() && d.sharding_source != "propagated") {  // laid out by the user's call
      in.sharding_loc = d.sharding_loc;
      in.sharding_by = LayoutCall(d);
    } else {
      in.layout_from_loc = d.layout_from_loc;
      in.layout_from = d.layout_from;
      in.layout_from_by = d.layout_from_by;
    }
    in.requires_grad = p->requires_grad;
    in.requires_grad_loc = p->requires_grad_loc;
    inputs.push_back(std::move(in));
  }
  int64_t t_transferred = trace::HostNowNs();

  // Compile through the cache; on a miss, diagnose why against this call site's graphs.
  auto compiled = client.Compile(*L.module);
  if (!compiled.ok()) return compiled.status();
  int64_t t_compiled = trace::HostNowNs();
  const runtime::Executable& exe = *compiled->executable;
  const std::vector<LayoutDriver> drivers = LayoutDrivers(exe, L);
  auto& seen = ctx.sites[site.key];
  // Why it compiled (a miss): recorded, and kept for compile()'s guard.
  RecompileCause cause;
  // Only a new program is diagnosed or kept: a cache hit (every steady step) needs no options text.
  const std::string options =
      compiled->cache == runtime::CacheOutcome::kMemoryHit ? std::string() : CompileOptions(client);
  // A value read earlier in this step cut it: the graphs of this step's later
  // cuts are what is left of the step.
  const SourceLoc read_before = ctx.step_read;
  if (reason == CutReason::kValueRead && !ctx.step_read.known()) ctx.step_read = loc;
  if (compiled->cache == runtime::CacheOutcome::kMiss) {
    DiagnosisInput di;
    di.graph = L.module.get();
    di.inputs = &inputs;
    di.notes = &L.notes;
    di.earlier = &seen;
    // The first graph here since Init on another mesh: compared with what
    // this call site compiled on the mesh before.
    PreviousRuntime& prev = Previous();
    if (seen.empty() && prev.chips != client.num_devices() && prev.sites.count(site.key))
      di.earlier = &prev.sites[site.key];
    if (seen.empty())
      for (const auto& [key, graphs] : ctx.sites)
        if (key != site.key)
          for (const auto& g : graphs) di.elsewhere.push_back(&g);
    di.value_read = reason == CutReason::kValueRead;
    di.cut_loc = loc;
    di.read_before = read_before;
    di.options = options;
    cause = DiagnoseCause(di);
    if (!compiled->disk_error.empty()) {  // compiled before, but its stored copy was damaged
      cause.kind = "disk_cache_unreadable";
      cause.subkind.clear();
      cause.detail = compiled->disk_error;
      cause.loc = loc;
    } else if (compiled->evicted) {
      cause.loc = loc;
      cause.kind = "cache_evicted";
      cause.subkind.clear();
      cause.detail =
          absl::StrCat("this graph was compiled before and evicted from the in-memory cache (it keeps ",
                       client.cache_capacity(), client.cache_capacity() == 1 ? " program" : " programs",
                       "); raise the capacity (--cache-capacity, RecordingOptions::cache_capacity), or keep "
                       "programs on disk (--cache-dir, RecordingOptions::cache_dir)");
    }
  }
  ctx.last_cut = {exe.fingerprint, compiled->cache == runtime::CacheOutcome::kMiss, cause.kind, cause.detail};
  if (ctx.recompile_notices && compiled->cache == runtime::CacheOutcome::kMiss && cause.kind != "first_compile")
    Notice(ctx.step, cause);
  if (trace::enabled()) {
    trace::CompilationRecord c;
    c.compile_id = trace::NextId();
    c.step = ctx.step;
    c.graph_id = exe.graph_id;
    c.cache = runtime::CacheOutcomeName(compiled->cache);
    c.duration_ns = compiled->duration_ns;
    c.call_site = site.text;
    c.host_start_ns = t_transferred;
    if (compiled->cache == runtime::CacheOutcome::kMiss) {
      c.cause_kind = cause.kind;
      c.cause_subkind = cause.subkind;
      c.cause_detail = cause.detail;
      c.diff = std::move(cause.diff);
      c.diff_total = cause.diff_total;
      c.source_file = cause.loc.file;
      c.source_line = cause.loc.line;
      c.prev_graph_id = cause.prev_graph_id;
    }
    if (compiled->cache != runtime::CacheOutcome::kMemoryHit) {  // a program new to this process
      trace::recorder().Record(runtime::GraphRecordOf(exe, site.text));
    }
    trace::recorder().Record(c);
  }
  // A site's history holds every graph it ran, also one it found compiled by
  // another site (a second loop over the same step): its next miss is then
  // compared with what it ran, not taken for its first graph.
  const bool known_here = std::any_of(seen.begin(), seen.end(),
                                      [&](const SeenGraph& g) { return g.graph_id == exe.graph_id; });
  if (compiled->cache != runtime::CacheOutcome::kMemoryHit || !known_here) {
    seen.push_back({exe.graph_id, std::move(L.module), inputs, std::move(L.notes), read_before, options, site.text});
  }

  // Run on the mesh.
  std::vector<std::shared_ptr<runtime::AsyncArray>> args;
  for (const auto& p : L.params) args.push_back(p->data->device);
  runtime::ExecuteOptions eo;
  eo.step = ctx.step;
  eo.launch_ns = t_compiled;
  auto results = client.ExecuteAsync(compiled->executable, std::move(args), eo);
  int64_t t_executed = trace::HostNowNs();

  // Inputs first, so a tensor's first record says where its sharding came from.
  // An input the user left unnamed is still placed on the chips: it is listed
  // by where it was made ("tensor@train.cc:41"), as an unnamed scalar is.
  for (const auto& p : L.params)
    RecordTensor(p->name.empty() && p->created.known()
                     ? absl::StrCat("tensor@", p->created.file, ":", p->created.line)
                     : p->name,
                 p->shape, p->data->sharding, p->data->sharding_source,
                 p->data->sharding_source == "annotated" ? p->data->sharding_loc : p->created);
  // Every pending tensor now holds device data: result j is pending[L.order[j]]'s.
  for (size_t j = 0; j < L.order.size(); ++j) {
    auto& t = pending[L.order[j]];
    auto n = std::make_shared<Node>();
    n->op = Opcode::kParameter;
    n->shape = t->node->shape;
    n->data = std::make_shared<DeviceData>();
    n->data->sharding = exe.output_shardings[j];
    n->data->sharding_source = "propagated";
    if (j < drivers.size()) {
      n->data->layout_from_loc = drivers[j].loc;
      n->data->layout_from = drivers[j].from;
      n->data->layout_from_by = drivers[j].by;
    }
    n->data->device = results[j];
    n->name = t->name;
    n->created = t->node->loc;
    n->requires_grad_loc = t->requires_grad_loc;
    if (t->requires_grad) {
      n->requires_grad = true;
      n->grad_leaf = t.get();
    } else if (t->node->requires_grad && !t->node->grad_leaf) {
      // A value read before backward must not cut the gradient's path; after
      // backward went through it, the path is not kept (it would hold the
      // step's graph and its old weights alive as long as the tensor lives).
      n->requires_grad = true;
      if (t->node->backward_done) {
        n->history_freed = true;
      } else {
        n->grad_through = {t->node};
        t->node->materialized = n;
      }
    }
    if (t->node->grad_leaf == t.get()) t->node->grad_leaf = nullptr;
    t->node = n;
    RecordTensor(t->name, n->shape, n->data->sharding, "propagated", n->created);
  }

  if (trace::enabled()) {
    trace::ExecutionRecord e;
    e.execution_id = trace::NextId();
    e.step = ctx.step;
    e.graph_id = exe.graph_id;
    e.cache = runtime::CacheOutcomeName(compiled->cache);
    // Names are the user's bytes: one that is not UTF-8 becomes U+FFFD, not an abort.
    e.input_signature = Signature(inputs).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    e.cause = reason == CutReason::kMarkStep ? "mark_step" : "value_read";
    e.source_file = loc.file;
    e.source_line = loc.line;
    e.host_start_ns = t_compiled;
    e.host_dur_ns = t_executed - t_compiled;
    trace::recorder().Record(e);
    HostSlice(what, trace::SliceKind::kHost, t_begin, t_executed, 0, -1, exe.graph_id, root_id);
    HostSlice("trace", trace::SliceKind::kHost, t_begin, t_traced, 1, root_id, exe.graph_id);
    if (t_transferred > t_traced)
      HostSlice("transfer to device", trace::SliceKind::kHost, t_traced, t_transferred, 1, root_id, exe.graph_id);
    HostSlice(compiled->cache == runtime::CacheOutcome::kMiss ? "compile" : "compile (cache hit)",
              trace::SliceKind::kCompile, t_transferred, t_compiled, 1, root_id, exe.graph_id);
    HostSlice("dispatch", trace::SliceKind::kHost, t_compiled, t_executed, 1, root_id, exe.graph_id);
  }
  return absl::OkStatus();
}

}  // namespace

void RecordTensor(const std::string& name, const Shape& shape, const Sharding& sharding,
                  const std::string& source, const SourceLoc& loc) {
  if (!trace::enabled() || name.empty()) return;
  auto& ctx = Ctx();
  std::string key = absl::StrCat(name, "|", shape.ToString(), "|", sharding.ToString());
  if (ctx.recorded_tensors.count(key)) return;
  int64_t id = trace::NextId();
  ctx.recorded_tensors[key] = id;
  trace::TensorRecord t;
  t.tensor_id = id;
  t.name = name;
  t.shape = shape.DimsString();
  t.dtype = DTypeName(shape.dtype);
  t.sharding = sharding.ToString();
  t.sharding_source = source;
  t.source_file = loc.file;
  t.source_line = loc.line;
  t.step = ctx.step;
  trace::recorder().Record(t);
  // Consecutive chips with the same shard go as one span: a replicated
  // tensor on a 4096-chip pod is one record, not 4096.
  trace::ShardPlacementRecord p;
  for (int d = 0; d < ctx.client->num_devices(); ++d) {
    std::vector<IndexRange> ranges = sharding.ShardRanges(shape, d);
    std::string text = RangesToString(ranges);
    int64_t bytes = DTypeBytes(shape.dtype);
    for (const auto& r : ranges) bytes *= r.end - r.begin;
    if (d > 0 && text == p.index_ranges && bytes == p.bytes) {
      p.last_device_id = d;
      continue;
    }
    if (d > 0) trace::recorder().Record(p);
    p.tensor_id = id;
    p.tensor_name = name;
    p.device_id = d;
    p.last_device_id = d;
    p.index_ranges = std::move(text);
    p.bytes = bytes;
  }
  if (ctx.client->num_devices() > 0) trace::recorder().Record(p);
}

absl::StatusOr<Literal> ReadValue(const Tensor& t, const SourceLoc& loc) {
  if (!Initialized())
    return absl::FailedPreconditionError(
        absl::StrCat("value read at ", At(loc),
                     ": no recording is open (Recording::Start was not called, or Finish already "
                     "was; a program without a recording calls Init): read values before Finish"));
  if (!t.status().ok()) return t.status();
  // A value read right after a mark_step, before the next step traced
  // anything (the loss logged after the step): it belongs to the step that
  // computed it, not to one that may never run.
  bool after_step = false;
  {
    Context& ctx = Ctx();
    std::lock_guard<std::mutex> l(ctx.mu);
    after_step = t.node()->is_data() && ctx.step > 0 && !ctx.step_cut && ctx.tensors_created == ctx.tensors_at_step;
    // Counted as it happens, timeline or not (metrics' ValueRead).
    if (trace::enabled())
      trace::recorder().Record(
          trace::CounterRecord{-1, "ValueRead", trace::HostNowNs(), static_cast<double>(++ctx.value_reads)});
  }
  if (!t.node()->is_data() || !t.node()->data->device) {
    if (!t.node()->is_data()) {
      if (absl::Status s = Cut(CutReason::kValueRead, loc); !s.ok()) return s;
    }
  }
  const auto& n = t.node();
  if (n->op == Opcode::kConstant && n->literal) return *n->literal;
  if (!n->data)
    return absl::FailedPreconditionError(absl::StrCat(
        "value read at ", At(loc), ": tensor '", t.name(), "' is the pending result of an op made at ", At(n->loc),
        " before the last Shutdown/Init; its graph was forgotten (read or mark_step before Shutdown)"));
  if (n->data->host) return *n->data->host;
  // The value may still be computing: wait for it, visibly on the host track.
  int64_t t0 = trace::HostNowNs();
  auto value = n->data->device->Wait();
  if (!value.ok()) return value.status();
  auto host = Ctx().client->TransferToHost(**value);
  const int step = Ctx().step;
  if (after_step) Ctx().step = step - 1;
  HostSlice("read value", trace::SliceKind::kHost, t0, trace::HostNowNs(), 0, -1, -1);
  Ctx().step = step;
  return host;
}

}  // namespace internal

absl::StatusOr<PendingGraph> pending_graph() {
  auto pending = internal::PendingTensors();
  if (!pending.ok()) return pending.status();
  std::vector<std::shared_ptr<Node>> outs;
  for (const auto& t : *pending) outs.push_back(t->node);
  internal::Lowered L = internal::Lower(outs);
  PendingGraph g{std::move(L.module), {}};
  for (const auto& p : L.params) g.inputs.emplace_back(p);
  return g;
}

namespace internal {
namespace {
// A mark_step: the cut (at `site`, else the caller's line and stack), the
// samples of the CreateTensor counter and of the per-op counters that moved
// ("TracedOp:stablehlo.add": op tensors traced so far), and the next step number.
absl::Status Step(const SourceLoc& loc, const CallSite* site) {
  if (!Initialized())
    return absl::FailedPreconditionError(
        absl::StrCat("mark_step at ", At(loc),
                     ": no recording is open (Recording::Start was not called, or Finish already "
                     "was; a program without a recording calls Init)"));
  Context& ctx = Ctx();
  absl::Status s = Cut(CutReason::kMarkStep, loc, site);
  if (trace::enabled()) {
    std::lock_guard<std::mutex> l(ctx.mu);
    const int64_t now = trace::HostNowNs();
    trace::recorder().Record(
        trace::CounterRecord{-1, "CreateTensor", now, static_cast<double>(ctx.tensors_created)});
    trace::recorder().Record(trace::CounterRecord{-1, "MarkStep", now, static_cast<double>(++ctx.mark_steps)});
    for (const auto& [op, n] : ctx.ops_traced) {
      int64_t& sampled = ctx.ops_traced_sampled[op];
      if (sampled == n) continue;
      sampled = n;
      trace::recorder().Record(
          trace::CounterRecord{-1, absl::StrCat(trace::kTracedOpCounterPrefix, compiler::OpcodeName(op)), now,
                               static_cast<double>(n)});
    }
  }
  // A mark_step with nothing to run since the last (a second one in a row)
  // ends no step: counted as a step it got a step row of a few us, and the
  // real steps' losses landed on every other number.
  if (!ctx.step_cut) return s;
  ++ctx.step;
  ctx.step_began_ns.try_emplace(ctx.step, trace::HostNowNs());
  ctx.step_read = {};
  ctx.step_cut = false;
  ctx.tensors_at_step = ctx.tensors_created;
  return s;
}
}  // namespace

absl::Status MarkStepAt(const SourceLoc& loc, const std::string& name) {
  const CallSite site{absl::StrCat("compile:", name, "@", At(loc)), absl::StrCat(At(loc), " compile(", name, ")")};
  return Step(loc, &site);
}
}  // namespace internal

absl::Status mark_step(std::source_location sl) { return internal::Step(Loc(sl), nullptr); }

void log_step(double loss, std::optional<double> eval_loss) {
  if (!Initialized()) return;
  log_step_at(internal::Ctx().step - 1, loss, eval_loss);
}

void log_step_at(int step, double loss, std::optional<double> eval_loss) {
  if (!Initialized()) return;
  auto& ctx = internal::Ctx();
  int64_t now = trace::HostNowNs();
  // The step's own span (a loop that logs step N after enqueueing N+1 would
  // otherwise give step N the time of N+1), else the time since the last log.
  const auto began = ctx.step_began_ns.find(step);
  const auto next = ctx.step_began_ns.find(step + 1);
  const int64_t from = began != ctx.step_began_ns.end() ? began->second : ctx.step_start_ns;
  const int64_t to = next != ctx.step_began_ns.end() ? next->second : now;
  ctx.step_began_ns.erase(ctx.step_began_ns.begin(), ctx.step_began_ns.lower_bound(step));
  if (trace::enabled()) {
    trace::StepRecord r{step, loss, std::max<int64_t>(0, to - from)};
    r.has_eval_loss = eval_loss.has_value();
    r.eval_loss = eval_loss.value_or(0);
    trace::recorder().Record(r);
  }
  ctx.step_start_ns = now;
}

int current_step() { return Initialized() ? internal::Ctx().step : 0; }

void set_current_step(int step) {
  if (!Initialized()) return;
  internal::Ctx().step = step;
  internal::Ctx().step_began_ns.try_emplace(step, trace::HostNowNs());  // a resumed run's first step
  internal::Ctx().tensors_at_step = -1;  // the caller numbers its reads: ReadValue does not move them
}

}  // namespace shardscope
