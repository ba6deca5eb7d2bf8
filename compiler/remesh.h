// A global program's shardings laid again on a mesh of another size (what
// `shardscope replay --topology` needs to re-partition a stored run for more
// or fewer chips). Each tiled sharding is read back as the mesh axes that
// split each tensor dimension (the one assignment that Sharding::OnMesh maps
// to it on the stored mesh), then made again with the same axes on the new
// mesh: a batch split over 'data' on a 2x2 mesh is split over 'data' on a
// 16x2 mesh, the same global program over more chips.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir.h"
#include "compiler/sharding.h"

namespace shardscope::compiler {

// The mesh axes splitting each of `rank` tensor dims under `s` on a mesh of
// `mesh` (devices 0..N-1 row-major); axes of size 1 are taken as unused.
// NotFound when no assignment of axes gives `s` (a layout not made on that mesh).
absl::StatusOr<std::vector<std::vector<int>>> MeshAxesOf(const Sharding& s, const std::vector<int64_t>& mesh, int rank);

// `s` (on `from`) made again on `to` (the same number of axes) with the same
// axes per dim; replicated and manual stay as they are, a maximal one must
// name a chip `to` has. `what` names the value in errors.
absl::StatusOr<Sharding> Remesh(const Sharding& s, const std::vector<int64_t>& from, const std::vector<int64_t>& to,
                                int rank, const std::string& what);

// Every sharding of `m` (parameters, instructions, outputs) laid again on `to`,
// and its partition count set to the new chip count. Refused, naming the
// instruction: hand-written collectives (their replica groups name the old
// chips), shardings inside a while's regions, a split dim smaller than its
// tiles on the new mesh (chips that would hold nothing but padding).
absl::Status RemeshModule(Module& m, const std::vector<int64_t>& from, const std::vector<int64_t>& to);
// The same with each mesh's chips in a given order (the chip at each position,
// row-major over the mesh, as meshes.device_ids keeps it; empty: 0..N-1): what
// `replay --topology` needs to lay a run onto another mesh map
// (runtime/mesh_mapping.h), whether or not the mesh's size changes.
absl::Status RemeshModule(Module& m, const std::vector<int64_t>& from, const std::vector<int64_t>& from_ids,
                          const std::vector<int64_t>& to, const std::vector<int64_t>& to_ids);

}  // namespace shardscope::compiler
