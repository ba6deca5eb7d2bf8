#include "store/index_ranges.h"

#include <algorithm>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/reader.h"

namespace shardscope::store {

absl::StatusOr<std::string> PlacementSpansSql(const Reader& reader) {
  // By what shard_placements is: a writer makes the spans table (empty) a
  // moment before it migrates the old table's rows into it, and a reader in
  // between, or after a writer killed there, must read the old table.
  auto q = reader.Query("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'shard_placements'");
  if (!q.ok()) return q.status();
  if (q->Int(0, "n") == 0) return std::string("shard_placement_spans");
  return std::string(
      "(SELECT run_id, tensor_id, tensor_name, device_id AS first_device, device_id AS last_device, index_ranges,"
      " bytes FROM shard_placements)");
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> ParseIndexRanges(std::string_view text) {
  // At most 80 characters of a damaged value are quoted: it may be anything.
  auto bad = [&](const std::string& why) {
    std::string shown(text.substr(0, 80));
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return absl::DataLossError(
        absl::StrCat("shard_placements.index_ranges '", shown, text.size() > 80 ? "..." : "", "' ", why));
  };
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return bad("is not [b:e,...]");
  std::vector<std::pair<int64_t, int64_t>> out;
  const std::string_view inner = text.substr(1, text.size() - 2);
  if (inner.empty()) return out;
  for (absl::string_view part : absl::StrSplit(absl::string_view(inner.data(), inner.size()), ',')) {
    std::vector<absl::string_view> be = absl::StrSplit(part, ':');
    int64_t b = 0, e = 0;
    if (be.size() != 2 || !absl::SimpleAtoi(be[0], &b) || !absl::SimpleAtoi(be[1], &e))
      return bad("is not [b:e,...]");
    if (b < 0 || e < b) return bad(absl::StrCat("has a range ", b, ":", e, " that ends before it begins"));
    out.push_back({b, e});
  }
  return out;
}

int ShapeRank(std::string_view shape) {
  if (shape.size() < 2 || shape.front() != '[' || shape.back() != ']') return -1;
  const std::string_view inner = shape.substr(1, shape.size() - 2);
  if (inner.empty()) return 0;
  int rank = 0;
  for (absl::string_view part : absl::StrSplit(absl::string_view(inner.data(), inner.size()), ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0) return -1;
    ++rank;
  }
  return rank;
}

}  // namespace shardscope::store
