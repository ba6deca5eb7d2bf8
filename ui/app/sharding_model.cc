// The Sharding view's reads; see sharding_model.h.
#include "ui/app/sharding_model.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "store/index_ranges.h"

namespace shardscope::app {
namespace {

// "[8,1]" or "8,1" -> {8, 1}.
std::vector<int64_t> Ints(absl::string_view text) {
  absl::ConsumePrefix(&text, "[");
  absl::ConsumeSuffix(&text, "]");
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v)) return {};
    out.push_back(v);
  }
  return out;
}

}  // namespace

absl::StatusOr<ShardingChips> LoadShardingChips(const store::Reader& reader, int64_t run_id) {
  ShardingChips out;
  const std::string run = absl::StrCat(run_id);
  auto mesh = reader.Query("SELECT shape, axis_names, device_ids FROM meshes WHERE run_id = ?1 ORDER BY mesh_id LIMIT 1",
                           {run});
  if (!mesh.ok()) return mesh.status();
  if (!mesh->rows.empty()) {
    for (int64_t v : Ints(mesh->Text(0, "shape"))) out.mesh.shape.push_back(static_cast<int>(v));
    out.mesh.axes = absl::StrSplit(mesh->Text(0, "axis_names"), ',', absl::SkipEmpty());
    out.mesh.devices = Ints(mesh->Text(0, "device_ids"));
  }
  // Placements summed per chip from their spans: a replicated tensor is one
  // span over every chip (a join per chip had scanned every placement once a
  // chip, 37 s at 2048 chips).
  auto chips = reader.Query("SELECT device_id AS d, hbm_bytes AS hbm FROM devices WHERE run_id = ?1 ORDER BY device_id",
                            {run});
  if (!chips.ok()) return chips.status();
  std::map<int64_t, size_t> at;
  for (size_t i = 0; i < chips->rows.size(); ++i) {
    at.emplace(chips->Int(i, "d"), out.chips.size());
    out.chips.push_back({chips->Int(i, "d"), 0, 0, chips->Int(i, "hbm")});
  }
  auto spans = store::PlacementSpansSql(reader);
  if (!spans.ok()) return spans.status();
  absl::Status read = reader.ForEachIntRow(
      absl::StrCat("SELECT first_device, last_device, bytes FROM ", *spans, " WHERE run_id = ?1"), {run}, 0,
      [&](const std::vector<int64_t>& row) {
        // A damaged span (backwards, or past the run's chips) is left out, as
        // the Sharding view's table leaves it out and says so.
        if (row[1] < row[0] || at.empty() || row[1] > at.rbegin()->first) return;
        for (auto it = at.lower_bound(row[0]); it != at.end() && it->first <= row[1]; ++it) {
          out.chips[it->second].bytes += row[2];
          ++out.chips[it->second].tensors;
        }
      });
  if (!read.ok()) return read;
  return out;
}

absl::StatusOr<std::vector<ChipShard>> LoadChipShards(const store::Reader& reader, int64_t run_id, int64_t device_id) {
  auto spans = store::PlacementSpansSql(reader);
  if (!spans.ok()) return spans.status();
  auto q = reader.Query(
      absl::StrCat("SELECT p.tensor_name AS name, t.dtype AS dtype, t.shape AS shape, t.sharding AS sharding,"
      " p.index_ranges AS ranges, p.bytes AS bytes FROM ", *spans, " p JOIN tensors t"
      " ON t.run_id = p.run_id AND t.tensor_id = p.tensor_id"
      " WHERE p.run_id = ?1 AND p.first_device <= ?2 AND p.last_device >= ?2"
      " AND p.last_device < (SELECT num_devices FROM runs WHERE run_id = ?1)"
      " ORDER BY p.bytes DESC, p.tensor_name"),
      {absl::StrCat(run_id), absl::StrCat(device_id)});
  if (!q.ok()) return q.status();
  if (q->rows.empty()) {
    auto chips = reader.Query("SELECT count(*) AS n FROM devices WHERE run_id = ?1 AND device_id = ?2",
                              {absl::StrCat(run_id), absl::StrCat(device_id)});
    if (!chips.ok()) return chips.status();
    if (chips->Int(0, "n") == 0)
      return absl::NotFoundError(absl::StrCat("run ", run_id, " of ", reader.path(), " has no chip ", device_id));
  }
  std::vector<ChipShard> out;
  for (size_t i = 0; i < q->rows.size(); ++i) {
    // A damaged placement is left out here as in the view's table (which says so).
    auto ranges = store::ParseIndexRanges(q->Text(i, "ranges"));
    const int rank = store::ShapeRank(q->Text(i, "shape"));
    if (!ranges.ok() || (rank >= 0 && static_cast<size_t>(rank) != ranges->size())) continue;
    out.push_back({q->Text(i, "name"), q->Text(i, "dtype"), q->Text(i, "shape"), q->Text(i, "sharding"),
                   q->Text(i, "ranges"), q->Int(i, "bytes")});
  }
  return out;
}

std::vector<std::string> SplitAxisNames(const analysis::TensorTiles& t, const MeshInfo& mesh) {
  std::vector<std::string> out(t.split_dims.size());
  if (mesh.shape.empty() || mesh.axes.size() != mesh.shape.size()) return out;
  // A chip's coordinates in the mesh (row-major over its shape, in device order).
  auto coords = [&](int64_t chip) {
    std::vector<int> c(mesh.shape.size(), -1);
    auto it = std::find(mesh.devices.begin(), mesh.devices.end(), chip);
    if (it == mesh.devices.end()) return c;
    int64_t rest = it - mesh.devices.begin();
    for (size_t k = mesh.shape.size(); k-- > 0;) {
      c[k] = static_cast<int>(rest % mesh.shape[k]);
      rest /= mesh.shape[k];
    }
    return c;
  };
  // Tiles are row-major over the split dims: dim j's stride.
  size_t stride = 1;
  for (size_t j = t.split_dims.size(); j-- > 0;) {
    if (t.ranges[j].size() > 1 && stride < t.tile_chips.size() && !t.tile_chips[0].empty() &&
        !t.tile_chips[stride].empty()) {
      const std::vector<int> a = coords(t.tile_chips[0].front()), b = coords(t.tile_chips[stride].front());
      std::vector<std::string> names;
      for (size_t k = 0; k < a.size(); ++k)
        if (a[k] >= 0 && b[k] >= 0 && a[k] != b[k]) names.push_back(mesh.axes[k]);
      out[j] = absl::StrJoin(names, "+");
    }
    stride *= t.ranges[j].size();
  }
  return out;
}

}  // namespace shardscope::app
