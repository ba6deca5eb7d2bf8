#include "runtime/buffer.h"

namespace shardscope::runtime {

absl::StatusOr<std::shared_ptr<DeviceBuffer>> DeviceBuffer::Create(Device& device, Literal value,
                                                                   const std::string& what) {
  if (absl::Status s = device.Allocate(value.bytes(), what); !s.ok()) return s;
  return std::shared_ptr<DeviceBuffer>(new DeviceBuffer(&device, std::move(value)));
}

DeviceBuffer::~DeviceBuffer() { device_->Release(value_.bytes()); }

Literal DeviceBuffer::Take() {
  Literal v = std::move(value_);
  value_ = Literal();
  device_->Release(v.bytes());
  return v;
}

}  // namespace shardscope::runtime
