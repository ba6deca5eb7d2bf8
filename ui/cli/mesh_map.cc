// `run --mesh-map`, `--dcn-mesh` (see mesh_map.h).
#include "ui/cli/mesh_map.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler/cost_model.h"
#include "core/shardscope.h"

namespace shardscope::cli {

std::vector<std::string> MeshAxesByTraffic(const std::string& sample, const std::string& sharding) {
  if (sample != "llama") return {"data"};
  if (sharding == "fsdp") return {"fsdp", "data"};
  if (sharding == "dp") return {};
  return {"model"};  // tp, fsdp_tp, and auto (which splits weights over model)
}

absl::StatusOr<runtime::MeshMapping> ResolveMeshMap(const runtime::Interconnect& wiring,
                                                    const std::vector<int64_t>& shape,
                                                    const std::vector<std::string>& axes,
                                                    const std::vector<std::string>& priority,
                                                    const std::string& mesh_map, const std::string& dcn_mesh) {
  auto request = dcn_mesh.empty() ? runtime::ParseMeshMap(mesh_map.empty() ? "auto" : mesh_map)
                                  : runtime::ParseDcnMesh(dcn_mesh);
  if (!request.ok()) return request.status();
  request->priority = priority;
  return runtime::MapMesh(wiring, shape, axes, *request);
}

absl::StatusOr<runtime::MeshMapChoice> ChooseMeshMapByStep(const samples::SampleInfo& sample,
                                                           samples::SampleConfig cfg,
                                                           const runtime::Interconnect& wiring,
                                                           const std::string& topology, const std::string& profile,
                                                           bool fusion, const std::vector<std::string>& axes,
                                                           const std::vector<std::string>& fallback) {
  // One training step, no files, no callbacks: the same programs the run's
  // steps compile (the held-out evaluation, every 50 steps, left out).
  cfg.steps = 1;
  cfg.stop_at = -1;
  cfg.on_step = nullptr;
  cfg.init_path.clear();
  cfg.save_path.clear();
  cfg.data_path.clear();
  cfg.eval_every = 0;
  cfg.mesh_device_ids.clear();  // row-major: position p is chip p
  const int chips = wiring.num_chips();
  if (absl::Status s = Init({.num_hosts = wiring.num_hosts(),
                             .chips_per_host = chips / wiring.num_hosts(),
                             .hbm_bytes = int64_t{1} << 50,  // the run itself checks memory
                             .topology = topology,
                             .recompile_notices = false,
                             .simulate = true,
                             .profile = profile});
      !s.ok())
    return s;
  runtime::Client& client = GetClient();
  absl::Status st = client.SetCacheDir("");  // not $SHARDSCOPE_CACHE_DIR: these programs are not the run's
  if (st.ok()) st = client.SetProfile(profile);
  client.set_fusion(fusion);
  std::vector<runtime::StepCollective> step;
  if (st.ok()) st = sample.run(cfg).status();
  std::optional<compiler::CostModel> model;
  if (st.ok()) {
    client.Synchronize();
    model.emplace(client.profile());
    std::vector<int64_t> order(chips);
    for (int p = 0; p < chips; ++p) order[p] = p;
    for (const auto& exe : client.CachedExecutables()) {
      auto c = runtime::StepCollectivesOf(*exe->program, order);
      if (!c.ok()) {
        st = c.status();
        break;
      }
      step.insert(step.end(), c->begin(), c->end());
    }
  }
  Shutdown();
  if (!st.ok()) return st;
  return runtime::ChooseMeshMap(wiring, *model, cfg.mesh, axes,
                                step, fallback);
}

}  // namespace shardscope::cli
