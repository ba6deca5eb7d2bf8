#include "core/mesh.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/context.h"
#include "runtime/dispatch.h"

namespace shardscope {

AxisSpec AxisSpec::Tuple(const std::vector<AxisSpec>& parts) {
  AxisSpec t(none);
  for (const AxisSpec& p : parts) t.axes_.insert(t.axes_.end(), p.axes_.begin(), p.axes_.end());
  return t;
}

std::string AxisSpec::ToString() const {
  if (axes_.empty()) return "none";
  std::vector<std::string> parts;
  for (const Axis& a : axes_) parts.push_back(a.name ? absl::StrCat("'", *a.name, "'") : absl::StrCat(a.index));
  return parts.size() == 1 ? parts[0] : absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

absl::StatusOr<Mesh> Mesh::Create(std::vector<int64_t> device_ids, std::vector<int64_t> shape,
                                  std::vector<std::string> axis_names) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 1) return absl::InvalidArgumentError("Mesh: every axis needs at least one device");
    n *= s;
  }
  if (n != static_cast<int64_t>(device_ids.size()))
    return absl::InvalidArgumentError(absl::StrCat("Mesh: shape [", absl::StrJoin(shape, ","), "] holds ", n,
                                                   " devices but ", device_ids.size(), " ids are given"));
  if (std::set<int64_t>(device_ids.begin(), device_ids.end()).size() != device_ids.size())
    return absl::InvalidArgumentError("Mesh: a device id appears twice");
  if (axis_names.size() != shape.size())
    return absl::InvalidArgumentError(absl::StrCat("Mesh: ", shape.size(), " axes but ", axis_names.size(), " names"));
  if (std::set<std::string>(axis_names.begin(), axis_names.end()).size() != axis_names.size())
    return absl::InvalidArgumentError("Mesh: an axis name appears twice");
  Mesh m;
  m.ids_ = std::move(device_ids);
  m.shape_ = std::move(shape);
  m.names_ = std::move(axis_names);
  return m;
}

std::string Mesh::Describe() const {
  std::vector<std::string> parts;
  for (size_t a = 0; a < names_.size(); ++a) parts.push_back(absl::StrCat(names_[a], " (", shape_[a], ")"));
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<Sharding> Mesh::ToSharding(const std::vector<AxisSpec>& spec, int rank) const {
  if (static_cast<int>(spec.size()) != rank)
    return absl::InvalidArgumentError(absl::StrCat("spec has ", spec.size(), " entries but the tensor has rank ", rank));
  std::vector<std::vector<int>> axes_of_dim(rank);
  std::set<int> used;
  for (int d = 0; d < rank; ++d) {
    for (const AxisSpec::Axis& a : spec[d].axes()) {
      int axis = -1;
      if (a.name) {
        auto it = std::find(names_.begin(), names_.end(), *a.name);
        if (it == names_.end())
          return absl::InvalidArgumentError(absl::StrCat("spec entry ", d, " names axis '", *a.name,
                                                         "', which the mesh does not have"));
        axis = static_cast<int>(it - names_.begin());
      } else {
        axis = a.index;
        if (axis < 0 || axis >= static_cast<int>(shape_.size()))
          return absl::InvalidArgumentError(absl::StrCat("spec entry ", d, " names axis ", axis,
                                                         ", the mesh has axes 0..", shape_.size() - 1));
      }
      if (!used.insert(axis).second)
        return absl::InvalidArgumentError(absl::StrCat("mesh axis '", names_[axis], "' is used twice in the spec"));
      axes_of_dim[d].push_back(axis);
    }
  }
  return Sharding::OnMesh(shape_, ids_, axes_of_dim);
}

namespace {

// Gives a value on (or bound for) the devices a new layout; one already on
// the devices in another layout comes back to the host to be split again.
absl::Status Relayout(Tensor& t, const Sharding& s, const char* source, const SourceLoc& loc) {
  DeviceData& d = *t.node()->data;
  if (d.device && d.sharding != s) {
    auto value = d.device->Wait();
    if (!value.ok()) return value.status();
    auto host = GetClient().TransferToHost(**value);
    if (!host.ok()) return host.status();
    d.host = std::move(*host);
    d.device.reset();
  }
  d.sharding = s;
  d.sharding_source = source;
  d.sharding_loc = loc;
  d.layout_from_loc = {};  // laid out here now, not by what propagated before
  d.layout_from.clear();
  d.layout_from_by = "mark_sharding";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Mesh> HybridMesh(const std::vector<int64_t>& ici_shape, const std::vector<int64_t>& dcn_shape,
                                std::vector<std::string> axis_names) {
  if (ici_shape.size() != dcn_shape.size())
    return absl::InvalidArgumentError(absl::StrCat("HybridMesh: ici shape [", absl::StrJoin(ici_shape, ","),
                                                   "] and dcn shape [", absl::StrJoin(dcn_shape, ","),
                                                   "] have different numbers of axes"));
  std::vector<int64_t> shape(ici_shape.size());
  for (size_t a = 0; a < shape.size(); ++a) {
    if (ici_shape[a] < 1 || dcn_shape[a] < 1)
      return absl::InvalidArgumentError("HybridMesh: every axis needs at least one device in ici and dcn");
    shape[a] = ici_shape[a] * dcn_shape[a];
  }
  // Each axis is dcn blocks of ici chips: mesh coordinate = dcn * ici_size + ici.
  // A slice (host) holds prod(ici_shape) consecutive device ids.
  const int64_t per_slice = std::accumulate(ici_shape.begin(), ici_shape.end(), int64_t{1}, std::multiplies<>());
  const int64_t n = per_slice * std::accumulate(dcn_shape.begin(), dcn_shape.end(), int64_t{1}, std::multiplies<>());
  std::vector<int64_t> ids(n), coord(shape.size(), 0);
  for (int64_t at = 0; at < n; ++at) {  // row-major over the mesh
    int64_t slice = 0, chip = 0;
    for (size_t a = 0; a < shape.size(); ++a) {
      slice = slice * dcn_shape[a] + coord[a] / ici_shape[a];
      chip = chip * ici_shape[a] + coord[a] % ici_shape[a];
    }
    ids[at] = slice * per_slice + chip;
    for (int a = static_cast<int>(shape.size()) - 1; a >= 0; --a) {
      if (++coord[a] < shape[a]) break;
      coord[a] = 0;
    }
  }
  return Mesh::Create(std::move(ids), std::move(shape), std::move(axis_names));
}

absl::Status mark_sharding(Tensor& t, const Mesh& mesh, const std::vector<AxisSpec>& spec, std::source_location sl) {
  SourceLoc loc = Loc(sl);
  std::string who = t.name().empty() ? "tensor" : absl::StrCat("tensor '", t.name(), "'");
  auto fail = [&](const std::string& why) {
    const SourceLoc& made = t.defined() ? (t.node()->is_data() ? t.node()->created : t.node()->loc) : loc;
    return absl::InvalidArgumentError(absl::StrCat("mark_sharding at ", loc.file, ":", loc.line, ": ", why,
                                                   "\n  ", t.name().empty() ? "the tensor" : t.name(),
                                                   " was created at ", made.file, ":", made.line,
                                                   "\n  mesh axes: ", mesh.Describe()));
  };
  if (!t.defined()) return fail("undefined tensor");
  auto s = mesh.ToSharding(spec, t.rank());
  if (!s.ok()) return fail(absl::StrCat(s.status().message(), " (", who, " is ", t.shape().ToString(), ")"));
  if (Initialized() && mesh.size() != GetClient().num_devices())
    return fail(absl::StrCat("the mesh has ", mesh.size(), " devices but the runtime has ", GetClient().num_devices()));
  if (!t.node()->is_data()) {  // a value of the graph being recorded: a constraint the partitioner keeps
    t.node()->annotation = *s;
    t.node()->note_loc = loc;
    // Which mesh the spec was written on: its axes and its devices in order.
    t.node()->note_loc.via = absl::StrCat("mesh ", mesh.Describe(), " over devices [",
                                          absl::StrJoin(mesh.device_ids(), ","), "]");
    return absl::OkStatus();
  }
  return Relayout(t, *s, "annotated", loc);
}

absl::Status mark_sharding_with_gradients(Tensor& t, const Mesh& mesh, const std::vector<AxisSpec>& spec,
                                          std::source_location sl) {
  if (absl::Status s = mark_sharding(t, mesh, spec, sl); !s.ok()) return s;
  if (t.node()->is_data()) {
    SourceLoc loc = Loc(sl);
    return absl::InvalidArgumentError(absl::StrCat("mark_sharding_with_gradients at ", loc.file, ":", loc.line,
                                                   ": ", t.name().empty() ? "the tensor" : t.name(),
                                                   " is an input, not a value of the graph being recorded; "
                                                   "use mark_sharding (its gradient follows propagation)"));
  }
  t.node()->shard_gradient = true;
  return absl::OkStatus();
}

absl::Status apply_auto_sharding(Tensor& t, const Sharding& s, std::source_location sl) {
  SourceLoc loc = Loc(sl);
  if (!t.defined() || !t.node()->is_data())
    return absl::InvalidArgumentError(absl::StrCat("apply_auto_sharding at ", loc.file, ":", loc.line, ": ",
                                                   t.defined() ? t.name() : "undefined tensor",
                                                   " is not an input or a value on the devices"));
  if (absl::Status v = s.Validate(t.rank(), GetClient().num_devices()); !v.ok())
    return absl::InvalidArgumentError(absl::StrCat("apply_auto_sharding at ", loc.file, ":", loc.line, ": ",
                                                   t.name(), ": ", v.message()));
  return Relayout(t, s, "auto", loc);
}

absl::Status clear_sharding(Tensor& t, std::source_location sl) {
  SourceLoc loc = Loc(sl);
  if (!t.defined())
    return absl::InvalidArgumentError(absl::StrCat("clear_sharding at ", loc.file, ":", loc.line, ": undefined tensor"));
  if (!t.node()->is_data()) {
    t.node()->annotation.reset();
    t.node()->shard_gradient = false;
    // The line that shaped this value's layout now: a recompilation it causes
    // is the clear's, not the mark_sharding's before it.
    t.node()->note_loc = loc;
    t.node()->note_loc.via = "clear_sharding";
    return absl::OkStatus();
  }
  return Relayout(t, Sharding::Replicated(), "default", loc);
}

}  // namespace shardscope
