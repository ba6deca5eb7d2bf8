// The layouts the SPMD partitioner (spmd.cc) works with and the rules that
// map them through ops: a sharding in full tile form (Tiles), and per op kind
// the plan of how it runs split: which layout each operand must have, the
// result's layout, and which devices combine partial results. Internal to the
// compiler.
#pragma once

#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "compiler/ir.h"

namespace shardscope::compiler::spmd_layout {

// One device's tile coordinates: small, kept off the heap (made per device
// for every layout the partitioner builds).
using Coord = absl::InlinedVector<int64_t, 8>;

inline int64_t Product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

inline int64_t Linearize(absl::Span<const int64_t> coords, const std::vector<int64_t>& sizes) {
  int64_t l = 0;
  for (size_t k = 0; k < coords.size(); ++k) l = l * sizes[k] + coords[k];
  return l;
}

// A sharding in its full tile form: one tile count per tensor dimension plus a
// trailing replication dimension, and the device at every tile position. Every
// kind of sharding the partitioner handles has this form, which keeps each
// rule a small mapping from a device's old tile coordinates to its new ones.
struct Tiles {
  // Which device sits where; shared, never changed once made: a program's
  // ops copy their operands' layouts thousands of times, and copying a
  // per-device table each time made compile time grow with the device count.
  struct Assignment {
    std::vector<int64_t> devices;  // row-major over dims
    std::vector<int64_t> coords;   // device id -> coordinates, dims.size() per device, flat
  };
  std::vector<int64_t> dims;     // rank + 1
  std::shared_ptr<const Assignment> assignment;

  int rank() const { return static_cast<int>(dims.size()) - 1; }
  int64_t repl() const { return dims.back(); }
  int64_t DataTiles() const { return Product(dims) / repl(); }
  const std::vector<int64_t>& devices() const { return assignment->devices; }
  int64_t num_devices() const { return static_cast<int64_t>(assignment->devices.size()); }
  absl::Span<const int64_t> Coords(int64_t device) const {
    return absl::Span<const int64_t>(assignment->coords.data() + device * dims.size(), dims.size());
  }

  static Tiles Replicated(int rank, int n) {
    std::vector<int64_t> d(rank + 1, 1);
    d.back() = n;
    std::vector<int64_t> devs(n);
    std::iota(devs.begin(), devs.end(), 0);
    return Make(d, devs);
  }
  static Tiles Make(std::vector<int64_t> dims, std::vector<int64_t> devices) {
    auto a = std::make_shared<Assignment>();
    const size_t stride = dims.size();
    a->coords.assign(devices.size() * stride, 0);
    for (size_t lin = 0; lin < devices.size(); ++lin) {
      int64_t* c = a->coords.data() + devices[lin] * stride;
      int64_t l = static_cast<int64_t>(lin);
      for (int k = static_cast<int>(stride) - 1; k >= 0; --k) {
        c[k] = l % dims[k];
        l /= dims[k];
      }
    }
    a->devices = std::move(devices);
    return Tiles{std::move(dims), std::move(a)};
  }
  // Builds tiles of shape `new_dims` where each device sits at `place(device)`.
  template <typename F>
  static Tiles Build(std::vector<int64_t> new_dims, int n, F place) {
    auto a = std::make_shared<Assignment>();
    a->devices.assign(n, -1);
    const size_t stride = new_dims.size();
    a->coords.resize(static_cast<size_t>(n) * stride);
    for (int d = 0; d < n; ++d) {
      const auto c = place(d);
      std::copy(c.begin(), c.end(), a->coords.begin() + d * stride);
      a->devices[Linearize(c, new_dims)] = d;
    }
    return Tiles{std::move(new_dims), std::move(a)};
  }
  static absl::StatusOr<Tiles> From(const Sharding& s, int rank, int n) {
    switch (s.kind()) {
      case Sharding::Kind::kReplicated:
        return Replicated(rank, n);
      case Sharding::Kind::kTiled: {
        if (absl::Status st = s.Validate(rank, n); !st.ok()) return st;
        if (static_cast<int64_t>(s.devices().size()) != n)
          return absl::InvalidArgumentError(absl::StrCat("sharding ", s.ToString(), " covers ",
                                                         s.devices().size(), " devices, the mesh has ", n));
        std::vector<int64_t> d = s.tile_dims();
        if (!s.last_tile_dim_replicate()) d.push_back(1);
        return Make(d, s.devices());
      }
      default:
        return absl::UnimplementedError(
            absl::StrCat("sharding ", s.ToString(), " is not supported by the partitioner yet"));
    }
  }
  Sharding ToSharding() const {
    auto s = Sharding::Tiled(dims, devices(), true);
    return s.ok() ? *s : Sharding();
  }
  // The same layout with `whole` dims no longer split: their tiles join the
  // replication dimension (each device keeps its other coordinates).
  Tiles Unsplit(const std::vector<int64_t>& whole) const {
    std::vector<int64_t> nd = dims, moved_sizes;
    for (int64_t d : whole) {
      moved_sizes.push_back(dims[d]);
      nd[d] = 1;
    }
    moved_sizes.push_back(repl());
    nd.back() = Product(moved_sizes);
    std::vector<int64_t> devs(num_devices(), -1);
    for (int64_t dev = 0; dev < num_devices(); ++dev) {
      const auto old = Coords(dev);
      std::vector<int64_t> c(old.begin(), old.end()), mc;
      for (int64_t d : whole) {
        mc.push_back(c[d]);
        c[d] = 0;
      }
      mc.push_back(c.back());
      c.back() = Linearize(mc, moved_sizes);
      devs[Linearize(c, nd)] = static_cast<int64_t>(dev);
    }
    return Make(std::move(nd), std::move(devs));
  }
  // Same data on every device (replication order does not matter).
  bool SameLayout(const Tiles& o) const {
    if (rank() != o.rank()) return false;
    if (assignment == o.assignment && dims == o.dims) return true;
    for (int k = 0; k < rank(); ++k)
      if (dims[k] != o.dims[k]) return false;
    for (int64_t d = 0; d < num_devices(); ++d)
      for (int k = 0; k < rank(); ++k)
        if (Coords(d)[k] != o.Coords(d)[k]) return false;
    return true;
  }
};

// Devices grouped by their coordinates outside `varying`; within a group,
// ordered by their coordinates on `varying`.
std::vector<std::vector<int64_t>> GroupsVarying(const Tiles& t, const std::vector<int>& varying);

// How a dot_general is split: which operand drives, what the other must be,
// the result's tiles, and the groups that sum partial results.
struct DotPlan {
  Tiles lhs, rhs, out;
  bool partial = false;
  std::vector<std::vector<int64_t>> groups;
};

DotPlan PlanDot(const Instruction& i, const Tiles& tl, const Tiles& tr, int n);

// Reduce: kept dims keep their split; reduced split dims become partial sums.
struct ReducePlan {
  Tiles out;
  std::vector<std::vector<int64_t>> groups;
};

ReducePlan PlanReduce(const Instruction& i, const Tiles& t, int n);

// convolution (one group), split one of two ways; anything else is computed whole:
//  - by the input's batch dim, the kernel whole: each device convolves its
//    share of the batch and the result keeps the split on its batch dim
//    (the forward pass and the input gradient of data-parallel training);
//  - by the input's feature dim, the kernel split alike on its input-feature
//    dim: each device sums over its share of the features and an all-reduce
//    adds the partial results (the kernel gradient, which contracts the batch).
struct ConvPlan {
  Tiles lhs, rhs, out;
  std::vector<std::vector<int64_t>> groups;  // partial sums to add (feature split)
};

std::optional<ConvPlan> PlanConv(const Instruction& i, const Tiles& tl, int n);

// gather, split one of two ways (otherwise computed whole):
//  - by the indices' batch dims, the operand whole: each device looks up its
//    share of the indices (an embedding lookup of data-parallel training);
//  - by operand dims that every slice takes whole (not indexed, not
//    collapsed), the indices whole: each device gathers its columns (an
//    embedding table split on its feature dim).
struct GatherPlan {
  Tiles operand, indices, out;
};

std::optional<GatherPlan> PlanGather(const Instruction& i, const Tiles& to, const Tiles& ti, int n);

// scatter, split by the indices' batch dims (the updates' scatter dims alike):
// each device scatters its share of the updates, and the devices that hold
// different shares combine their results. Sums scatter into zeros, are added
// up by an all-reduce and then added to the operand once; max and min scatter
// into the operand itself (combining it twice changes nothing). Other
// combiners, and a replacing scatter, are computed whole.
struct ScatterPlan {
  Tiles indices, updates;
  std::vector<std::vector<int64_t>> groups;
};

std::optional<ScatterPlan> PlanScatter(const Instruction& i, const Tiles& ti, const Tiles& tu, int n);

// pad keeps the operand's split on the dims it does not pad.
bool PadKeepsSplit(const Instruction& i, const Tiles& t);
// reduce_window keeps a split where its window is one element wide.
bool WindowKeepsSplit(const Instruction& i, const Tiles& t);
// broadcast_in_dim: operand dims keep their split where the size is kept.
Tiles BroadcastOut(const Instruction& i, const Tiles& t, int n);
// The operand tiles a broadcast needs to produce `out` locally.
Tiles BroadcastOperandFor(const Instruction& i, const Tiles& out, int n);
Tiles TransposeOut(const Instruction& i, const Tiles& t, int n);
// The layout a reshape keeps, or none (the operand must be whole).
std::optional<Tiles> ReshapeOut(const Instruction& i, const Tiles& t, int n);
// A value that is zero everywhere: a zero constant, or a broadcast of one.
bool IsZero(const Instruction* i);
// Slice-like ops (slice, concatenate, dynamic_slice, dynamic_update_slice):
// the dims they cut or join along, and the layout they compute in.
std::vector<int64_t> PartialDims(const Instruction& i);
Tiles SliceLayout(const Instruction& i, const std::vector<Tiles>& sh);

}  // namespace shardscope::compiler::spmd_layout
