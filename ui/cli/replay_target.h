// Where `shardscope replay --modeled` re-simulates a stored run: the chip
// profile, the topology (the one given, else the stored run's, else one made
// from its mesh for the profile) and the mesh laid on it (the stored mesh, or
// with its first axis grown or shrunk to the topology's chips, the others kept).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope::cli {

struct ReplayTarget {
  std::string profile;
  std::string topology;       // a --topology spec: "2x2", "gpu:4x8"
  std::string topology_note;  // why this topology when none was given ("" when given or stored)
  std::vector<int64_t> mesh;  // the stored mesh, or re-shaped for the topology
  bool remeshed = false;      // the mesh differs from the stored one: programs re-partitioned
};

// InvalidArgument (a usage error) for an unknown profile, a malformed topology
// or one the stored mesh cannot be laid on, each saying why.
absl::StatusOr<ReplayTarget> ChooseReplayTarget(const std::vector<int64_t>& stored_mesh,
                                                const std::vector<std::string>& axes,
                                                const std::string& stored_topology, const std::string& profile,
                                                const std::string& topology);

}  // namespace shardscope::cli
