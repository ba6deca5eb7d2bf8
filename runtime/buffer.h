// Device-resident data. A DeviceBuffer is one device's array, charged against
// that device's HBM budget for as long as it lives. A DeviceArray is a global
// tensor: its shape, its sharding and the buffer each device holds.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/literal.h"
#include "compiler/sharding.h"
#include "runtime/topology.h"

namespace shardscope::runtime {

class DeviceBuffer {
 public:
  // Takes `value` onto `device`, charging its bytes.
  static absl::StatusOr<std::shared_ptr<DeviceBuffer>> Create(Device& device, Literal value,
                                                              const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  const Literal& literal() const { return value_; }
  Literal& mutable_literal() { return value_; }
  // Hands the value over; the device is no longer charged for it.
  Literal Take();
  int device_id() const { return device_->id(); }

 private:
  DeviceBuffer(Device* d, Literal v) : device_(d), value_(std::move(v)) {}
  Device* device_;
  Literal value_;
};

struct DeviceArray {
  Shape shape;        // global
  Sharding sharding;
  std::vector<std::shared_ptr<DeviceBuffer>> shards;  // indexed by device id
};

}  // namespace shardscope::runtime
