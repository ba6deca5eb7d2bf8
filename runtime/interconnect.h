// How the chips of a topology are wired (`--topology`): a 2D or 3D torus like a
// TPU pod slice ("4x4", "4x4x4"; wraparound links; hosts of 4 chips), or a
// GPU-style cluster ("gpu:NxM": N hosts of M chips, every pair of chips of a
// host linked (NVLink/NVSwitch), and chip k of every host linked to chip k of
// every other host (one NIC per chip, a "rail" of the data-center network)).
// Each chip has coordinates, each link an id "A-B" (A < B) and a kind (ici
// inside the fast fabric, dcn between hosts), and a message from one chip to
// another follows a fixed route over links (dimension-order on a torus; rail
// then NVLink on a GPU cluster). The bandwidth and latency of each kind come
// from the chip profile (compiler::ChipProfile).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope::runtime {

struct Link {
  int a = 0, b = 0;        // a < b
  bool dcn = false;        // between hosts over the data-center network (gpu:NxM rails)
  std::string id() const;  // "3-4"
};

class Interconnect {
 public:
  // "2x4", "4x4x4" (a torus of 1 to 3 dimensions, each 1..64), "gpu:2x4".
  // Errors name the bad part: "--topology '4x0': dimension 2 is 0 ...".
  static absl::StatusOr<Interconnect> Parse(const std::string& spec);

  const std::string& spec() const { return spec_; }
  bool gpu() const { return gpu_; }
  int num_chips() const { return static_cast<int>(coords_.size()); }
  int num_hosts() const { return hosts_; }
  int chips_per_host() const { return num_chips() / hosts_; }
  int host_of(int chip) const { return chip / chips_per_host(); }
  const std::vector<int64_t>& dims() const { return dims_; }
  // Torus: [x, y(, z)]; gpu: [host, chip in host]. "[0,1,3]".
  const std::vector<int64_t>& coords(int chip) const { return coords_[chip]; }
  std::string CoordsText(int chip) const;
  const std::vector<Link>& links() const { return links_; }
  // The index of link a-b (either order) in links(), or -1 when the chips are not linked.
  int FindLink(int a, int b) const;
  // The links a message from `from` to `to` crosses, in order (empty when from == to).
  std::vector<int> Route(int from, int to) const;
  // "2x4 torus (2 hosts x 4 chips, 12 links)".
  std::string Describe() const;

 private:
  std::string spec_;
  bool gpu_ = false;
  int hosts_ = 1;
  std::vector<int64_t> dims_;
  std::vector<std::vector<int64_t>> coords_;
  std::vector<Link> links_;
  std::unordered_map<int64_t, int> link_of_;  // a * chips + b (a < b) -> index in links_
};

}  // namespace shardscope::runtime
