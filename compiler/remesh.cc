// A global program's shardings laid again on another mesh (see remesh.h).
#include "compiler/remesh.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardscope::compiler {
namespace {

int64_t Chips(const std::vector<int64_t>& mesh) {
  return std::accumulate(mesh.begin(), mesh.end(), int64_t{1}, std::multiplies<>());
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// "all_reduce.20", or a parameter's name.
std::string NameOf(const Instruction& i) {
  if (!i.name.empty()) return i.name;
  std::string op = OpcodeName(i.op);
  if (absl::StartsWith(op, "stablehlo.")) op = op.substr(10);
  return absl::StrCat(op, ".", i.id);
}

}  // namespace

// MeshAxesOf with the mesh's chips in the order `ids`.
static absl::StatusOr<std::vector<std::vector<int>>> MeshAxesOfIds(const Sharding& s, const std::vector<int64_t>& mesh,
                                                            const std::vector<int64_t>& ids, int rank) {
  const int k = static_cast<int>(mesh.size());
  // Each axis goes to one dim or none ((rank+1)^k choices); the axes of one
  // dim in every order. Meshes have a few axes, so this stays small.
  int64_t choices = 1;
  for (int a = 0; a < k; ++a) choices *= rank + 1;
  std::vector<std::vector<int>> axes(rank);
  std::function<bool(int)> orders = [&](int d) -> bool {
    if (d == rank) {
      auto made = Sharding::OnMesh(mesh, ids, axes);
      return made.ok() && *made == s;
    }
    std::sort(axes[d].begin(), axes[d].end());
    do {
      if (orders(d + 1)) return true;
    } while (std::next_permutation(axes[d].begin(), axes[d].end()));
    return false;
  };
  for (int64_t code = 0; code < choices; ++code) {
    for (auto& a : axes) a.clear();
    bool size_one_used = false;
    int64_t c = code;
    for (int a = 0; a < k; ++a, c /= rank + 1) {
      const int dim = static_cast<int>(c % (rank + 1)) - 1;  // -1: unused
      if (dim < 0) continue;
      if (mesh[a] == 1) size_one_used = true;
      axes[dim].push_back(a);
    }
    if (!size_one_used && orders(0)) return axes;
  }
  return absl::NotFoundError(absl::StrCat("sharding ", s.ToString(), " is not a layout over the axes of a ",
                                          absl::StrJoin(mesh, "x"), " mesh"));
}

absl::StatusOr<std::vector<std::vector<int>>> MeshAxesOf(const Sharding& s, const std::vector<int64_t>& mesh,
                                                         int rank) {
  return MeshAxesOfIds(s, mesh, Iota(Chips(mesh)), rank);
}

namespace {

absl::StatusOr<Sharding> RemeshIds(const Sharding& s, const std::vector<int64_t>& from,
                                   const std::vector<int64_t>& from_ids, const std::vector<int64_t>& to,
                                   const std::vector<int64_t>& to_ids, int rank, const std::string& what) {
  if (from.size() != to.size())
    return absl::InvalidArgumentError(absl::StrCat("a ", absl::StrJoin(from, "x"), " mesh cannot be laid on a ",
                                                   absl::StrJoin(to, "x"), " mesh: the axes differ"));
  if (s.kind() == Sharding::Kind::kMaximal) {
    // The same mesh position, wherever the new map puts it.
    const auto at = std::find(from_ids.begin(), from_ids.end(), s.maximal_device());
    const int64_t p = at - from_ids.begin();
    if (at == from_ids.end() || p >= static_cast<int64_t>(to_ids.size()))
      return absl::InvalidArgumentError(absl::StrCat(what, " lives on chip ", s.maximal_device(), " alone, which a ",
                                                     absl::StrJoin(to, "x"), " mesh does not have"));
    return Sharding::Maximal(to_ids[p]);
  }
  if (!s.IsTiled()) return s;
  auto axes = MeshAxesOfIds(s, from, from_ids, rank);
  if (!axes.ok()) return absl::Status(axes.status().code(), absl::StrCat(what, ": ", axes.status().message()));
  return Sharding::OnMesh(to, to_ids, *axes);
}

}  // namespace

absl::StatusOr<Sharding> Remesh(const Sharding& s, const std::vector<int64_t>& from, const std::vector<int64_t>& to,
                                int rank, const std::string& what) {
  return RemeshIds(s, from, Iota(Chips(from)), to, Iota(Chips(to)), rank, what);
}

absl::Status RemeshModule(Module& m, const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  return RemeshModule(m, from, {}, to, {});
}

absl::Status RemeshModule(Module& m, const std::vector<int64_t>& from, const std::vector<int64_t>& from_ids_in,
                          const std::vector<int64_t>& to, const std::vector<int64_t>& to_ids_in) {
  const std::vector<int64_t> from_ids = from_ids_in.empty() ? Iota(Chips(from)) : from_ids_in;
  const std::vector<int64_t> to_ids = to_ids_in.empty() ? Iota(Chips(to)) : to_ids_in;
  if (static_cast<int64_t>(from_ids.size()) != Chips(from) || static_cast<int64_t>(to_ids.size()) != Chips(to))
    return absl::InvalidArgumentError(absl::StrCat("a mesh order of ", from_ids.size(), " and ", to_ids.size(),
                                                   " chips for the ", absl::StrJoin(from, "x"), " and ",
                                                   absl::StrJoin(to, "x"), " meshes"));
  const std::string mesh = absl::StrJoin(to, "x");
  // Every tile must hold some of the value: more tiles than elements would
  // leave chips holding padding alone, which no real partitioning does.
  auto lay = [&](const Sharding& s, const Shape& shape, const std::string& what) -> absl::StatusOr<Sharding> {
    auto made = RemeshIds(s, from, from_ids, to, to_ids, shape.rank(), what);
    if (!made.ok()) return made.status();
    for (int d = 0; d < shape.rank(); ++d)
      if (made->TilesInDim(d) > shape.dims[d])
        return absl::InvalidArgumentError(absl::StrCat(what, " splits dim ", d, " of size ", shape.dims[d],
                                                       " into ", made->TilesInDim(d), " tiles on a ", mesh,
                                                       " mesh: some chips would hold nothing"));
    return made;
  };
  for (const auto& i : m.instructions()) {
    if (!i->replica_groups.empty() || !i->source_target_pairs.empty())
      return absl::FailedPreconditionError(
          absl::StrCat(NameOf(*i), " is a collective written into the program: its groups name the chips of the ",
                       absl::StrJoin(from, "x"), " mesh, so it cannot be laid on another mesh"));
    for (const auto& region : {i->cond, i->body})
      if (region)
        for (const auto& r : region->instructions())
          if (r->sharding)
            return absl::FailedPreconditionError(absl::StrCat("the loop ", NameOf(*i),
                                                              " has shardings inside its regions, which are not laid"
                                                              " on another mesh"));
    if (!i->sharding) continue;
    auto s = lay(*i->sharding, i->shape, NameOf(*i));
    if (!s.ok()) return s.status();
    i->sharding = *s;
  }
  for (size_t k = 0; k < m.output_shardings().size() && k < m.outputs().size(); ++k) {
    auto s = lay(m.output_shardings()[k], m.outputs()[k]->shape, absl::StrCat("output ", k));
    if (!s.ok()) return s.status();
    m.output_shardings()[k] = *s;
  }
  m.set_num_partitions(static_cast<int>(Chips(to)));
  return absl::OkStatus();
}

}  // namespace shardscope::compiler
