#include "compiler/sharding.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace shardscope {

Sharding Sharding::Replicated() { return Sharding(); }

Sharding Sharding::Maximal(int64_t device) {
  Sharding s;
  s.kind_ = Kind::kMaximal;
  s.maximal_device_ = device;
  return s;
}

Sharding Sharding::Manual() {
  Sharding s;
  s.kind_ = Kind::kManual;
  return s;
}

absl::StatusOr<Sharding> Sharding::Tiled(std::vector<int64_t> tile_dims,
                                        std::vector<int64_t> devices,
                                        bool last_tile_dim_replicate) {
  int64_t n = 1;
  for (int64_t t : tile_dims) {
    if (t < 1) return absl::InvalidArgumentError("sharding: tile dimensions must be >= 1");
    n *= t;
  }
  if (n != static_cast<int64_t>(devices.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding: tile assignment [", absl::StrJoin(tile_dims, ","), "] has ", n,
        " tiles but ", devices.size(), " devices are listed"));
  }
  if (std::set<int64_t>(devices.begin(), devices.end()).size() != devices.size()) {
    return absl::InvalidArgumentError("sharding: a device appears twice in the tile assignment");
  }
  Sharding s;
  int data_tiles = 1;
  for (size_t i = 0; i + (last_tile_dim_replicate ? 1 : 0) < tile_dims.size(); ++i)
    data_tiles *= tile_dims[i];
  if (data_tiles == 1) return Replicated();  // nothing is actually split
  s.kind_ = Kind::kTiled;
  s.tile_dims_ = std::move(tile_dims);
  s.devices_ = std::move(devices);
  s.last_tile_dim_replicate_ = last_tile_dim_replicate;
  if (last_tile_dim_replicate && s.tile_dims_.back() == 1) {
    s.tile_dims_.pop_back();
    s.last_tile_dim_replicate_ = false;
  }
  return s;
}

namespace {
absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view text, absl::string_view what) {
  std::vector<int64_t> out;
  if (absl::StripAsciiWhitespace(text).empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v)) {
      return absl::InvalidArgumentError(absl::StrCat("sharding: bad number '", part, "' in ", what));
    }
    out.push_back(v);
  }
  return out;
}
}  // namespace

absl::StatusOr<Sharding> Sharding::Parse(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("sharding '", text, "': ", why));
  };
  if (!absl::ConsumePrefix(&t, "{") || !absl::ConsumeSuffix(&t, "}")) return bad("expected {...}");
  t = absl::StripAsciiWhitespace(t);
  if (t == "replicated") return Replicated();
  if (t == "manual") return Manual();
  if (absl::ConsumePrefix(&t, "maximal device=")) {
    int64_t d;
    if (!absl::SimpleAtoi(t, &d)) return bad("bad device id");
    return Maximal(d);
  }
  if (!absl::ConsumePrefix(&t, "devices=[")) return bad("expected replicated, maximal or devices=");
  size_t close = t.find(']');
  if (close == absl::string_view::npos) return bad("missing ']' after tile dimensions");
  auto tile = ParseIntList(t.substr(0, close), "tile dimensions");
  if (!tile.ok()) return bad(tile.status().message());
  t.remove_prefix(close + 1);
  bool replicate = false;
  if (absl::ConsumeSuffix(&t, "last_tile_dim_replicate")) replicate = true;
  t = absl::StripAsciiWhitespace(t);
  std::vector<int64_t> devices;
  if (absl::ConsumePrefix(&t, "<=[")) {
    // Iota form: devices = iota(prod(reshape)) reshaped, optionally transposed.
    size_t rclose = t.find(']');
    if (rclose == absl::string_view::npos) return bad("missing ']' in iota reshape dims");
    auto reshape = ParseIntList(t.substr(0, rclose), "iota reshape dims");
    if (!reshape.ok()) return bad(reshape.status().message());
    t.remove_prefix(rclose + 1);
    std::vector<int64_t> perm(reshape->size());
    std::iota(perm.begin(), perm.end(), 0);
    if (absl::ConsumePrefix(&t, "T(")) {
      size_t pclose = t.find(')');
      if (pclose == absl::string_view::npos) return bad("missing ')' in transpose");
      auto p = ParseIntList(t.substr(0, pclose), "transpose permutation");
      if (!p.ok()) return bad(p.status().message());
      perm = *p;
      if (perm.size() != reshape->size()) return bad("transpose rank differs from reshape rank");
      if (std::set<int64_t>(perm.begin(), perm.end()).size() != perm.size())
        return bad("bad permutation (a dimension appears twice)");
    }
    int64_t n = 1;
    for (int64_t d : *reshape) n *= d;
    std::vector<int64_t> tdims(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(perm.size())) return bad("bad permutation");
      tdims[i] = (*reshape)[perm[i]];
    }
    std::vector<int64_t> src_strides = Strides(*reshape);
    std::vector<int64_t> idx(perm.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t src = 0;
      for (size_t i = 0; i < perm.size(); ++i) src += idx[i] * src_strides[perm[i]];
      devices.push_back(src);
      for (int i = static_cast<int>(idx.size()) - 1; i >= 0; --i) {
        if (++idx[i] < tdims[i]) break;
        idx[i] = 0;
      }
    }
  } else {
    auto d = ParseIntList(t, "device list");
    if (!d.ok()) return bad(d.status().message());
    devices = *d;
  }
  auto s = Tiled(*tile, devices, replicate);
  if (!s.ok()) return bad(s.status().message());
  return s;
}

int Sharding::data_rank() const {
  if (kind_ != Kind::kTiled) return 0;
  return static_cast<int>(tile_dims_.size()) - (last_tile_dim_replicate_ ? 1 : 0);
}

int64_t Sharding::TilesInDim(int d) const {
  if (kind_ != Kind::kTiled || d >= data_rank()) return 1;
  return tile_dims_[d];
}

std::vector<int64_t> Sharding::TileIndex(int64_t device) const {
  auto it = std::find(devices_.begin(), devices_.end(), device);
  if (it == devices_.end()) return {};
  int64_t linear = it - devices_.begin();
  std::vector<int64_t> idx(tile_dims_.size());
  for (int i = static_cast<int>(tile_dims_.size()) - 1; i >= 0; --i) {
    idx[i] = linear % tile_dims_[i];
    linear /= tile_dims_[i];
  }
  return idx;
}

Shape Sharding::ShardShape(const Shape& global) const {
  Shape s = global;
  for (int d = 0; d < global.rank(); ++d) {
    int64_t t = TilesInDim(d);
    s.dims[d] = (global.dims[d] + t - 1) / t;
  }
  return s;
}

std::vector<IndexRange> Sharding::ShardRanges(const Shape& global, int64_t device) const {
  std::vector<IndexRange> r(global.rank());
  std::vector<int64_t> idx = kind_ == Kind::kTiled ? TileIndex(device) : std::vector<int64_t>{};
  for (int d = 0; d < global.rank(); ++d) {
    int64_t t = TilesInDim(d);
    if (t == 1 || idx.empty()) {
      r[d] = {0, global.dims[d]};
      continue;
    }
    int64_t size = (global.dims[d] + t - 1) / t;
    r[d].begin = std::min(global.dims[d], idx[d] * size);
    r[d].end = std::min(global.dims[d], r[d].begin + size);
  }
  if (kind_ == Kind::kMaximal && device != maximal_device_) {
    for (auto& x : r) x = {0, 0};
  }
  return r;
}

absl::StatusOr<Sharding> Sharding::OnMesh(const std::vector<int64_t>& mesh_shape,
                                          const std::vector<int64_t>& device_ids,
                                          const std::vector<std::vector<int>>& axes_of_dim) {
  const int rank = static_cast<int>(axes_of_dim.size());
  std::vector<bool> used(mesh_shape.size(), false);
  for (const auto& axes : axes_of_dim)
    for (int a : axes) {
      if (a < 0 || a >= static_cast<int>(mesh_shape.size()) || used[a])
        return absl::InvalidArgumentError(absl::StrCat("mesh axis ", a, " is out of range or used twice"));
      used[a] = true;
    }
  // Tile dims follow tensor dims (a tuple's axes multiply); the mesh axes no
  // dim uses become the replication dim. The device order is the mesh
  // transposed to that order.
  std::vector<int> order;
  std::vector<int64_t> tile;
  for (int d = 0; d < rank; ++d) {
    int64_t tiles = 1;
    for (int axis : axes_of_dim[d]) {
      order.push_back(axis);
      tiles *= mesh_shape[axis];
    }
    tile.push_back(tiles);
  }
  int64_t repl = 1;
  for (int a = 0; a < static_cast<int>(mesh_shape.size()); ++a)
    if (!used[a]) {
      order.push_back(a);
      repl *= mesh_shape[a];
    }
  tile.push_back(repl);
  const std::vector<int64_t> strides = Strides(mesh_shape);
  std::vector<int64_t> osizes;
  for (int a : order) osizes.push_back(mesh_shape[a]);
  std::vector<int64_t> devices;
  std::vector<int64_t> idx(order.size(), 0);
  for (size_t k = 0; k < device_ids.size(); ++k) {
    int64_t src = 0;
    for (size_t j = 0; j < order.size(); ++j) src += idx[j] * strides[order[j]];
    devices.push_back(device_ids[src]);
    for (int j = static_cast<int>(idx.size()) - 1; j >= 0; --j) {
      if (++idx[j] < osizes[j]) break;
      idx[j] = 0;
    }
  }
  return Tiled(tile, devices, true);
}

absl::Status Sharding::Validate(int rank, int64_t num_devices) const {
  if (kind_ == Kind::kMaximal) {
    if (maximal_device_ < 0 || maximal_device_ >= num_devices)
      return absl::InvalidArgumentError(absl::StrCat("sharding ", ToString(), ": device ",
                                                     maximal_device_, " is not in the mesh of ",
                                                     num_devices, " devices"));
    return absl::OkStatus();
  }
  if (kind_ != Kind::kTiled) return absl::OkStatus();
  if (data_rank() != rank)
    return absl::InvalidArgumentError(absl::StrCat("sharding ", ToString(), " tiles ", data_rank(),
                                                   " dimensions but the tensor has rank ", rank));
  for (int64_t d : devices_) {
    if (d < 0 || d >= num_devices)
      return absl::InvalidArgumentError(absl::StrCat("sharding ", ToString(), ": device ", d,
                                                     " is not in the mesh of ", num_devices,
                                                     " devices"));
  }
  return absl::OkStatus();
}

std::string Sharding::ToString() const {
  switch (kind_) {
    case Kind::kReplicated: return "{replicated}";
    case Kind::kManual: return "{manual}";
    case Kind::kMaximal: return absl::StrCat("{maximal device=", maximal_device_, "}");
    case Kind::kTiled:
      return absl::StrCat("{devices=[", absl::StrJoin(tile_dims_, ","), "]",
                          absl::StrJoin(devices_, ","),
                          last_tile_dim_replicate_ ? " last_tile_dim_replicate" : "", "}");
  }
  return "{?}";
}

namespace {
// Ordered factorizations of n into `parts` factors > 1.
void Factorizations(int64_t n, int parts, std::vector<int64_t>& cur, std::vector<std::vector<int64_t>>& out) {
  if (parts == 1) {
    if (n > 1) {
      cur.push_back(n);
      out.push_back(cur);
      cur.pop_back();
    }
    return;
  }
  for (int64_t f = 2; f < n; ++f) {
    if (n % f) continue;
    cur.push_back(f);
    Factorizations(n / f, parts - 1, cur, out);
    cur.pop_back();
  }
}

// "<=[a,b]T(1,0)" when `devices` is iota(n) reshaped to `dims` and transposed
// by `perm`, trying every shape of up to three factors; "" when none fits.
std::string IotaForm(const std::vector<int64_t>& devices) {
  const int64_t n = static_cast<int64_t>(devices.size());
  bool plain = n > 0;
  for (int64_t k = 0; k < n && plain; ++k) plain = devices[k] == k;
  if (plain) return absl::StrCat("<=[", n, "]");
  for (int parts = 2; parts <= 3; ++parts) {
    std::vector<int64_t> cur;
    std::vector<std::vector<int64_t>> shapes;
    Factorizations(n, parts, cur, shapes);
    for (const auto& dims : shapes) {
      std::vector<int64_t> perm(parts);
      std::iota(perm.begin(), perm.end(), 0);
      while (std::next_permutation(perm.begin(), perm.end())) {
        std::vector<int64_t> out_dims(parts);
        for (int k = 0; k < parts; ++k) out_dims[k] = dims[perm[k]];
        bool fits = true;
        for (int64_t k = 0; k < n && fits; ++k) {
          const std::vector<int64_t> r = Unravel(k, out_dims);
          std::vector<int64_t> src(parts);
          for (int j = 0; j < parts; ++j) src[perm[j]] = r[j];
          fits = devices[k] == Ravel(src, dims);
        }
        if (fits) return absl::StrCat("<=[", absl::StrJoin(dims, ","), "]T(", absl::StrJoin(perm, ","), ")");
      }
    }
  }
  return "";
}
}  // namespace

std::string Sharding::ToIotaString() const {
  const std::string iota = kind_ == Kind::kTiled ? IotaForm(devices_) : "";
  if (iota.empty()) return ToString();
  return absl::StrCat("{devices=[", absl::StrJoin(tile_dims_, ","), "]", iota,
                      last_tile_dim_replicate_ ? " last_tile_dim_replicate" : "", "}");
}

bool Sharding::operator==(const Sharding& o) const {
  return kind_ == o.kind_ && tile_dims_ == o.tile_dims_ && devices_ == o.devices_ &&
         last_tile_dim_replicate_ == o.last_tile_dim_replicate_ &&
         maximal_device_ == o.maximal_device_;
}

std::string RangesToString(const std::vector<IndexRange>& ranges) {
  std::vector<std::string> parts;
  for (const auto& r : ranges) parts.push_back(absl::StrCat(r.begin, ":", r.end));
  return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
}

}  // namespace shardscope
