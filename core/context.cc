#include "core/context.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "profiler/trace/recorder.h"
#include "runtime/buffer.h"
#include "runtime/dispatch.h"

namespace shardscope {
namespace {
std::unique_ptr<internal::Context> g_ctx;

// Tensors made while no context is up (a model built before Init or
// Recording::Start, or kept across a Shutdown): the next Init adopts them,
// so its mark_step cuts their updates like any other's. Without it an
// optimizer's update of such a parameter was never cut, and every step's
// graph replayed all the earlier ones (13, 37, 61, ... ops).
std::mutex g_orphans_mu;
std::vector<std::weak_ptr<TensorImpl>> g_orphans;
size_t g_orphans_pruned_at = 64;
// Ids are unique for the whole process, not per context: a tensor made
// before a Shutdown must not, when it dies, erase a newer tensor's entry.
std::atomic<int64_t> g_next_tensor_id{1};

void KeepOrphan(const std::shared_ptr<TensorImpl>& t) {
  std::lock_guard<std::mutex> l(g_orphans_mu);
  if (g_orphans.size() >= g_orphans_pruned_at) {  // the dead ones go, now and then
    std::erase_if(g_orphans, [](const std::weak_ptr<TensorImpl>& w) { return w.expired(); });
    g_orphans_pruned_at = std::max<size_t>(64, 2 * g_orphans.size());
  }
  g_orphans.push_back(t);
}
}  // namespace

namespace internal {
PreviousRuntime& Previous() {
  static PreviousRuntime p;
  return p;
}
}  // namespace internal

absl::Status Init(const InitOptions& opts) {
  if (g_ctx) Shutdown();
  runtime::TopologyOptions t;
  t.num_hosts = opts.num_hosts;
  t.chips_per_host = opts.chips_per_host;
  t.hbm_bytes = opts.hbm_bytes;
  t.interconnect = opts.topology;
  t.simulate = opts.simulate;
  t.profile = opts.profile;
  auto client = runtime::Client::Create(t);
  if (!client.ok()) return client.status();
  std::string cache_dir = opts.cache_dir;
  if (cache_dir.empty())
    if (const char* env = std::getenv("SHARDSCOPE_CACHE_DIR")) cache_dir = env;
  if (absl::Status s = (*client)->SetCacheDir(cache_dir); !s.ok()) return s;
  (*client)->set_cache_capacity(opts.cache_capacity);
  auto ctx = std::make_unique<internal::Context>();
  ctx->client = std::move(*client);
  ctx->recompile_notices = opts.recompile_notices;
  ctx->host_track = trace::NextId();
  ctx->client->RecordTopology();
  if (trace::enabled()) {
    trace::TrackRecord tr;
    tr.track_id = ctx->host_track;
    tr.name = "host 0 / main";
    tr.clock = trace::Clock::kHost;
    tr.host_id = 0;
    tr.thread_name = "main";
    trace::recorder().Record(tr);
  }
  ctx->step_start_ns = trace::HostNowNs();
  ctx->step_began_ns[0] = ctx->step_start_ns;
  g_ctx = std::move(ctx);
  std::vector<std::weak_ptr<TensorImpl>> orphans;
  {
    std::lock_guard<std::mutex> l(g_orphans_mu);
    orphans.swap(g_orphans);
    g_orphans_pruned_at = 64;
  }
  for (const auto& w : orphans)
    if (auto t = w.lock()) internal::RegisterLive(t);
  return absl::OkStatus();
}

namespace internal {
std::string GraphInput::Key() const {
  if (!name.empty()) return name;
  return created.known() ? absl::StrCat("@", created.file, ":", created.line) : "";
}
}  // namespace internal

void Shutdown() {
  if (!g_ctx) return;
  // Tensors still alive outlive the context; forget them first so their
  // destructors do not reach into a dead registry.
  auto ctx = std::move(g_ctx);
  ctx->client->Synchronize();
  // Their device buffers point at the devices about to be destroyed: bring
  // every value they reach back to the host (it moves to the devices again
  // after the next Init), so no buffer outlives its device.
  std::vector<std::shared_ptr<Node>> stack;
  for (auto& [id, weak] : ctx->live)
    if (auto t = weak.lock()) stack.push_back(t->node);
  std::set<const Node*> seen;
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (!n || !seen.insert(n.get()).second) continue;
    for (const auto& o : n->operands) stack.push_back(o);
    if (n->data && n->data->device) {
      auto value = n->data->device->Wait();
      if (value.ok()) {
        auto host = ctx->client->TransferToHost(**value);
        if (host.ok()) n->data->host = std::move(*host);
      }
      n->data->device.reset();
    }
  }
  // Values are adopted by the next Init (a model kept for the next
  // recording); a graph still pending here stays forgotten (ReadValue says so).
  for (auto& [id, weak] : ctx->live)
    if (auto t = weak.lock(); t && t->node && t->node->is_data()) KeepOrphan(t);
  ctx->live.clear();
  // Kept for one more runtime: a step that recompiles after Init on another
  // mesh is compared with what it compiled before (mesh_changed).
  internal::Previous() = {std::move(ctx->sites), ctx->client->num_devices()};
}

bool Initialized() { return g_ctx != nullptr; }

runtime::Client& GetClient() { return *g_ctx->client; }

namespace internal {
Context& Ctx() { return *g_ctx; }

void RegisterLive(const std::shared_ptr<TensorImpl>& t) {
  if (t->id == 0) t->id = g_next_tensor_id++;
  if (!g_ctx) {
    KeepOrphan(t);
    return;
  }
  std::lock_guard<std::mutex> l(g_ctx->mu);
  ++g_ctx->tensors_created;
  Node* n = t->node.get();
  if (n && !n->is_data() && n->error.ok() && !n->counted) {
    n->counted = true;
    ++g_ctx->ops_traced[n->op];
  }
  g_ctx->next_tensor_id = g_next_tensor_id;
  g_ctx->live[t->id] = t;
}
}  // namespace internal
}  // namespace shardscope
