#include "runtime/topology.h"

#include "absl/strings/str_cat.h"

namespace shardscope::runtime {

absl::Status Device::Allocate(int64_t bytes, const std::string& what) {
  int64_t now = in_use_.fetch_add(bytes) + bytes;
  if (now > hbm_bytes_) {
    in_use_.fetch_sub(bytes);
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory on chip ", id_, ": ", what, " needs ", bytes, " bytes but ", now - bytes,
        " of ", hbm_bytes_, " bytes are in use"));
  }
  int64_t p = peak_.load();
  while (now > p && !peak_.compare_exchange_weak(p, now)) {
  }
  return absl::OkStatus();
}

void Device::Release(int64_t bytes) { in_use_.fetch_sub(bytes); }

absl::StatusOr<std::unique_ptr<Topology>> Topology::Create(const TopologyOptions& opts) {
  if (opts.num_hosts < 1 || opts.chips_per_host < 1)
    return absl::InvalidArgumentError("topology: need at least one host and one chip per host");
  if (opts.num_hosts * opts.chips_per_host > 64 && !opts.simulate)
    return absl::InvalidArgumentError(absl::StrCat(
        "topology: ", opts.num_hosts * opts.chips_per_host,
        " chips do not fit this machine for real computation (at most 64)"));
  auto t = std::unique_ptr<Topology>(new Topology());
  t->opts_ = opts;
  if (!opts.interconnect.empty()) {
    auto ic = Interconnect::Parse(opts.interconnect);
    if (!ic.ok()) return ic.status();
    if (ic->num_chips() != opts.num_hosts * opts.chips_per_host)
      return absl::InvalidArgumentError(absl::StrCat("topology ", opts.interconnect, " has ", ic->num_chips(),
                                                     " chips, but ", opts.num_hosts * opts.chips_per_host,
                                                     " were asked for"));
    t->opts_.num_hosts = ic->num_hosts();
    t->opts_.chips_per_host = ic->chips_per_host();
    t->interconnect_ = *std::move(ic);
  }
  const TopologyOptions& o = t->opts_;
  for (int h = 0; h < o.num_hosts; ++h)
    for (int c = 0; c < o.chips_per_host; ++c)
      t->devices_.push_back(std::make_unique<Device>(h * o.chips_per_host + c, h, o.hbm_bytes));
  return t;
}

std::string Topology::ToString() const {
  return absl::StrCat(opts_.num_hosts, opts_.num_hosts == 1 ? " host x " : " hosts x ",
                      opts_.chips_per_host, opts_.chips_per_host == 1 ? " chip" : " chips");
}

}  // namespace shardscope::runtime
