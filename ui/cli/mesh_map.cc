// `run --mesh-map`, `--dcn-mesh` (see mesh_map.h).
#include "ui/cli/mesh_map.h"

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

}  // namespace shardscope::cli
