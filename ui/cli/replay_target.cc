// The profile, topology and mesh of a modeled replay (see replay_target.h).
#include "ui/cli/replay_target.h"

#include <functional>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/cost_model.h"
#include "runtime/interconnect.h"

namespace shardscope::cli {
namespace {

int64_t Product(const std::vector<int64_t>& v, size_t from = 0) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(std::min(from, v.size())), v.end(), int64_t{1},
                         std::multiplies<>());
}

std::string AxisName(const std::vector<std::string>& axes, size_t a) {
  return a < axes.size() ? absl::StrCat("'", axes[a], "'") : absl::StrCat("axis ", a);
}

// A topology for `chips` when the stored run named none: GPUs come in hosts
// of up to 8 (NVLink inside, rails between); other chips as a torus of the
// mesh's own shape, so neighbours on the mesh are neighbours on the links.
std::string DefaultTopology(const std::vector<int64_t>& mesh, const std::string& profile) {
  const int64_t chips = Product(mesh);
  if (profile == "h100") {
    int64_t per_host = 8;
    while (chips % per_host != 0) per_host /= 2;
    return absl::StrCat("gpu:", chips / per_host, "x", per_host);
  }
  return absl::StrJoin(mesh, "x");
}

}  // namespace

absl::StatusOr<ReplayTarget> ChooseReplayTarget(const std::vector<int64_t>& stored_mesh,
                                                const std::vector<std::string>& axes,
                                                const std::string& stored_topology, const std::string& profile,
                                                const std::string& topology) {
  ReplayTarget t;
  t.profile = profile;
  if (auto p = compiler::FindProfile(profile); !p.ok())
    return absl::InvalidArgumentError(absl::StrCat("--profile: ", p.status().message()));
  t.topology = topology;
  if (t.topology.empty() && !stored_topology.empty()) t.topology = stored_topology;
  if (t.topology.empty()) {
    t.topology = DefaultTopology(stored_mesh, profile);
    t.topology_note = absl::StrCat("the stored run named no topology: ", t.topology,
                                   profile == "h100" ? " (its chips as GPU hosts of up to 8)"
                                                     : " (a torus of the mesh's shape)",
                                   "; --topology T picks another");
  }
  auto ic = runtime::Interconnect::Parse(t.topology);
  if (!ic.ok()) return absl::InvalidArgumentError(std::string(ic.status().message()));
  const int64_t chips = ic->num_chips(), stored = Product(stored_mesh);
  t.mesh = stored_mesh;
  if (chips == stored) return t;
  // Another number of chips: the first axis (data) takes them, the others keep their size.
  const int64_t kept = Product(stored_mesh, 1);
  const std::string mesh_text = absl::StrJoin(stored_mesh, "x");
  if (chips % kept != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "--topology ", t.topology, " has ", chips, " chips; the stored mesh ", mesh_text, " keeps ", kept,
        " chips on its other axes, which do not divide them (use a topology of a multiple of ", kept, " chips)"));
  if (stored_mesh[0] == 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "--topology ", t.topology, " has ", chips, " chips but the stored mesh ", mesh_text, " splits nothing over ",
        AxisName(axes, 0), " (size 1), so its programs do not say what more chips there would hold; replay on a "
        "topology of ", stored, " chips, or record the run with a larger ", AxisName(axes, 0), " axis"));
  t.mesh[0] = chips / kept;
  t.remeshed = true;
  return t;
}

}  // namespace shardscope::cli
