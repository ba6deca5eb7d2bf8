// `run --mesh-map` and `--dcn-mesh`: which chips of --topology each mesh axis
// gets (runtime/mesh_mapping.h), with the sample's axes ranked by how much
// they communicate, for the automatic map.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/interconnect.h"
#include "runtime/mesh_mapping.h"
#include "runtime/mesh_ranking.h"
#include "samples/samples.h"

namespace shardscope::cli {

// The sample's mesh axes, most-communicating first: tp and fsdp_tp's model
// (activations all-reduced every layer), fsdp's fsdp (weights gathered, gradients
// scattered), the data-parallel samples' data (their model axis carries
// nothing); empty (the last axis first) for llama dp, whose batch spans both.
std::vector<std::string> MeshAxesByTraffic(const std::string& sample, const std::string& sharding);

// The device order for `shape` (axes `axes`) on `wiring`: --dcn-mesh when
// given, else --mesh-map (auto when empty). Errors name the flag, the axis,
// its size and the dimensions.
absl::StatusOr<runtime::MeshMapping> ResolveMeshMap(const runtime::Interconnect& wiring,
                                                    const std::vector<int64_t>& shape,
                                                    const std::vector<std::string>& axes,
                                                    const std::vector<std::string>& priority,
                                                    const std::string& mesh_map, const std::string& dcn_mesh);

// `--mesh-map auto` measured: traces and compiles one step of `sample` as
// `cfg` sets it up, on a simulated client of `topology` with the chips in
// row-major order (nothing recorded, nothing computed; the run compiles its own
// order afterwards), reads the step's collectives back as mesh positions and
// prices every placement of the axes on `profile` (runtime/mesh_ranking.h).
// `fallback` (MeshAxesByTraffic) wins ties.
absl::StatusOr<runtime::MeshMapChoice> ChooseMeshMapByStep(const samples::SampleInfo& sample,
                                                           samples::SampleConfig cfg,
                                                           const runtime::Interconnect& wiring,
                                                           const std::string& topology, const std::string& profile,
                                                           bool fusion, const std::vector<std::string>& axes,
                                                           const std::vector<std::string>& fallback);

}  // namespace shardscope::cli
