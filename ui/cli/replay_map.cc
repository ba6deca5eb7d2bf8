// `replay --topology --mesh-map` (see replay_map.h).
#include "ui/cli/replay_map.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/cost_model.h"
#include "compiler/parser.h"
#include "compiler/remesh.h"
#include "runtime/client.h"
#include "runtime/interconnect.h"
#include "ui/cli/mesh_map.h"

namespace shardscope::cli {

absl::StatusOr<ReplayMeshMap> MapReplayMesh(const std::vector<ReplayProgram>& programs,
                                            const std::vector<int64_t>& from, const std::vector<int64_t>& from_ids,
                                            const std::vector<int64_t>& mesh, const std::vector<std::string>& axes,
                                            const std::string& sample, const std::string& sharding,
                                            const std::string& topology, const std::string& profile, bool fusion,
                                            const std::string& mesh_map, const std::string& dcn_mesh) {
  auto wiring = runtime::Interconnect::Parse(topology);
  if (!wiring.ok()) return wiring.status();
  const std::vector<std::string> rule = MeshAxesByTraffic(sample, sharding);
  auto m = ResolveMeshMap(*wiring, mesh, axes, rule, mesh_map, dcn_mesh);
  if (!m.ok()) return m.status();
  ReplayMeshMap out;
  out.mapping = *std::move(m);
  out.request = !dcn_mesh.empty() ? absl::StrCat("--dcn-mesh ", dcn_mesh) : mesh_map.empty() ? "auto" : mesh_map;
  int several = 0;
  for (int64_t n : mesh) several += n > 1;
  if (out.mapping.mode != "auto" || several < 2) return out;

  // Each program once, on the new mesh in chip order: its collectives name
  // mesh positions, whatever placement is priced afterwards.
  const int chips = wiring->num_chips();
  std::vector<int64_t> row_major(chips);
  std::iota(row_major.begin(), row_major.end(), 0);
  auto client = runtime::Client::Create({.num_hosts = wiring->num_hosts(),
                                         .chips_per_host = chips / wiring->num_hosts(),
                                         .hbm_bytes = int64_t{1} << 50,  // the replay itself checks memory
                                         .interconnect = topology,
                                         .simulate = true,
                                         .profile = profile});
  if (!client.ok()) return client.status();
  if (absl::Status s = (*client)->SetProfile(profile); !s.ok()) return s;
  (*client)->set_fusion(fusion);
  std::vector<runtime::StepCollective> step;
  for (const ReplayProgram& p : programs) {
    if (p.runs <= 0) continue;
    auto module = compiler::ParseModule(p.ir_text);
    if (!module.ok()) return module.status();
    if (absl::Status s = compiler::RemeshModule(**module, from, from_ids, mesh, row_major); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(p.name, " cannot be re-partitioned for a ",
                                                     absl::StrJoin(mesh, "x"), " mesh: ", s.message()));
    auto compiled = (*client)->Compile(**module);
    if (!compiled.ok()) return compiled.status();
    auto c = runtime::StepCollectivesOf(*compiled->executable->program, row_major);
    if (!c.ok()) return c.status();
    for (runtime::StepCollective& sc : *c) {
      sc.runs = p.runs;
      step.push_back(std::move(sc));
    }
  }
  const compiler::CostModel model((*client)->profile());
  // Where the chips are as many as stored, the stored order is a candidate
  // too (first: a replay keeps its mesh unless another map is faster).
  const std::vector<int64_t> keep =
      mesh == from ? (from_ids.empty() ? row_major : from_ids) : std::vector<int64_t>{};
  auto choice = runtime::ChooseMeshMap(*wiring, model, mesh, axes, step, rule, keep);
  if (!choice.ok()) return choice.status();
  choice->source = "the stored run's collectives (each program as often as the run executed it)";
  choice->per = "a chip over the run";
  out.mapping = choice->mapping;
  out.ranked = *std::move(choice);
  return out;
}

}  // namespace shardscope::cli
