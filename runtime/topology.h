// The machine a run executes on: hosts x chips of virtual devices, each with
// an HBM budget, and how devices are laid out on hosts.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/interconnect.h"

namespace shardscope::runtime {

// A virtual chip. Memory is accounted, not reserved: buffers charge their bytes
// against the budget so an oversized program fails like it would on a chip.
class Device {
 public:
  Device(int id, int host_id, int64_t hbm_bytes) : id_(id), host_id_(host_id), hbm_bytes_(hbm_bytes) {}
  int id() const { return id_; }
  int host_id() const { return host_id_; }
  int64_t hbm_bytes() const { return hbm_bytes_; }
  int64_t in_use() const { return in_use_.load(); }
  int64_t peak() const { return peak_.load(); }
  // Charges `bytes`; ResourceExhausted (naming the device, the request and what
  // is in use) when the budget would be exceeded.
  absl::Status Allocate(int64_t bytes, const std::string& what);
  void Release(int64_t bytes);

 private:
  int id_;
  int host_id_;
  int64_t hbm_bytes_;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
};

struct TopologyOptions {
  int num_hosts = 1;
  int chips_per_host = 4;
  int64_t hbm_bytes = int64_t{16} << 30;  // per chip
  // How the chips are wired (interconnect.h: "2x4", "gpu:2x4"); empty: not
  // said (no coordinates, no links). When set, it decides the hosts: it must
  // have num_hosts * chips_per_host chips, and its own hosts replace num_hosts.
  std::string interconnect{};
  // Simulated mode (runtime/simulate.h): no values are computed, every run is
  // laid out on the modeled clock only, and the topology may have thousands of chips.
  bool simulate = false;
  // The modeled clock's chip profile (compiler/cost_model.h); `cpu` is
  // measured on this machine when first needed (cpu_calibration.h).
  std::string profile = "cpu";
};

class Topology {
 public:
  static absl::StatusOr<std::unique_ptr<Topology>> Create(const TopologyOptions& opts);
  int num_devices() const { return static_cast<int>(devices_.size()); }
  int num_hosts() const { return opts_.num_hosts; }
  Device& device(int id) { return *devices_[id]; }
  const Device& device(int id) const { return *devices_[id]; }
  // "1 host x 4 chips"
  std::string ToString() const;
  // The wiring, when the run named one (--topology); null otherwise.
  const Interconnect* interconnect() const { return interconnect_ ? &*interconnect_ : nullptr; }
  bool simulated() const { return opts_.simulate; }

 private:
  TopologyOptions opts_;
  std::optional<Interconnect> interconnect_;
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace shardscope::runtime
