// `replay --topology --mesh-map`: the stored run's mesh laid onto the new
// topology by the same logic as `run` (ui/cli/mesh_map.h): auto by default,
// measured on the stored programs re-partitioned for it, or as asked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/mesh_mapping.h"
#include "runtime/mesh_ranking.h"

namespace shardscope::cli {

// A stored program of the run and how often the run executed it (the
// ranking weighs each program's collectives by it).
struct ReplayProgram {
  std::string name;     // "graph 5 of run 1", for messages
  std::string ir_text;  // the global program, its shardings on the stored mesh
  int64_t runs = 1;     // how often the stored run executed it
};

struct ReplayMeshMap {
  runtime::MeshMapping mapping;
  std::optional<runtime::MeshMapChoice> ranked;  // auto, measured
  std::string request;                           // "auto", "row-major", "model=x", "--dcn-mesh 1x4"
};

// The order of `mesh` (axes `axes`) on `topology`: --dcn-mesh when given, else
// --mesh-map (auto when empty). Auto with two axes of several chips compiles
// each program once, laid on `mesh` in row-major order (from `from` in
// `from_ids` order), on a simulated client of `profile`, and prices every
// placement of the axes (runtime::ChooseMeshMap; MeshAxesByTraffic of
// `sample`/`sharding` wins ties). InvalidArgument for a map the mesh and
// topology refuse, or a program that cannot be re-partitioned for `mesh` (named);
// other errors for a program that does not compile.
absl::StatusOr<ReplayMeshMap> MapReplayMesh(const std::vector<ReplayProgram>& programs,
                                            const std::vector<int64_t>& from, const std::vector<int64_t>& from_ids,
                                            const std::vector<int64_t>& mesh, const std::vector<std::string>& axes,
                                            const std::string& sample, const std::string& sharding,
                                            const std::string& topology, const std::string& profile, bool fusion,
                                            const std::string& mesh_map, const std::string& dcn_mesh);

}  // namespace shardscope::cli
