// Mesh axes onto a topology (`run --mesh-map`, `--dcn-mesh`; docs/simulate.md
// "Mesh axes onto the topology"): which chip sits at each position of a
// logical mesh, so that an axis's collectives ride the links meant for them.
// On a torus an axis gets whole dimensions (a ring with wraparound, or a
// sub-torus), else a contiguous block of one; on a GPU cluster (gpu:NxM) an
// axis lies within a host (NVLink) or across hosts (the data-center network),
// or both (HybridMesh's ici x dcn). Within an axis the chips are ordered as a
// snake (reflected mixed-radix), so consecutive members are neighbours and a
// ring's steps are single hops where the shape allows it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/interconnect.h"

namespace shardscope::runtime {

struct MeshMapRequest {
  enum Mode { kAuto, kRowMajor, kExplicit, kDcn };
  Mode mode = kAuto;
  // kAuto (and the axes kExplicit leaves out): the axes most-communicating
  // first; the first gets the fastest links. Empty: the last axis first.
  std::vector<std::string> priority;
  // kExplicit (torus only): axis -> its whole dimensions, "x", "yz", in the
  // order given; axes not named are placed automatically on what is left.
  std::vector<std::pair<std::string, std::string>> dims;
  // kDcn (gpu only): per mesh axis, how many hosts it spans (HybridMesh's dcn
  // shape); the rest of the axis (its ici part) lies within a host.
  std::vector<int64_t> dcn;
  // The flag's text, for messages and the record ("model=x,data=yz", "4x1").
  std::string text;
};

// "auto", "row-major" or "AXIS=DIMS,..." (e.g. "model=x,data=yz"); errors name the bad part.
absl::StatusOr<MeshMapRequest> ParseMeshMap(const std::string& text);
// "4x1": per mesh axis its DCN factor.
absl::StatusOr<MeshMapRequest> ParseDcnMesh(const std::string& text);

// What one mesh axis rides, as measured on its groups of chips.
struct MeshAxisPlacement {
  std::string axis;
  int64_t size = 1;
  std::string rides;       // "z (ici, 4 chips, ring with wraparound)", "across 4 hosts (dcn, rail)"
  int hosts_spanned = 1;   // the most hosts one group of the axis spans
  int max_hop = 0;         // the longest step (links) between consecutive members, wrap included
  std::string Describe() const { return axis + ": " + rides; }
};

struct MeshMapping {
  std::string mode;                 // auto | row-major | explicit | dcn
  std::vector<int64_t> device_ids;  // row-major over the mesh's shape: the chip at each position
  std::vector<MeshAxisPlacement> axes;
  // "model: z (ici, 4 chips, ring with wraparound); data: x,y (...)"
  std::string Describe() const;
};

// The device order of a mesh `shape` (axes `names`) on `ic`, as `request`
// asks. Errors (InvalidArgument) name the axis, its size and the dimensions:
// an axis whose size the named dimensions do not make, a dimension named
// twice or unknown, a DCN factor that does not divide the hosts or its axis.
absl::StatusOr<MeshMapping> MapMesh(const Interconnect& ic, const std::vector<int64_t>& shape,
                                    const std::vector<std::string>& names, const MeshMapRequest& request);

// What each axis of a mesh in `device_ids` order rides on `ic` (any order,
// however made).
std::vector<MeshAxisPlacement> DescribeMeshAxes(const Interconnect& ic, const std::vector<int64_t>& shape,
                                                const std::vector<std::string>& names,
                                                const std::vector<int64_t>& device_ids);

// The groups of chips of mesh axis `axis`: for each position of the other
// axes, the chips along `axis` in mesh order (what a collective over it spans).
std::vector<std::vector<int>> MeshAxisGroups(const std::vector<int64_t>& shape, const std::vector<int64_t>& device_ids,
                                             int axis);

}  // namespace shardscope::runtime
