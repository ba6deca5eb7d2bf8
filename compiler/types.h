// Element types and tensor shapes, shared by the compiler, runtime and core.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardscope {

enum class DType { kF32, kF64, kBF16, kF16, kI32, kI64, kI1 };

// StableHLO spelling: f32, f64, bf16, f16, i32, i64, i1.
const char* DTypeName(DType t);
absl::StatusOr<DType> ParseDType(const std::string& s);
int64_t DTypeBytes(DType t);
bool IsFloat(DType t);

// A tensor type: element type and dimensions (row-major).
struct Shape {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;

  Shape() = default;
  Shape(DType t, std::vector<int64_t> d) : dtype(t), dims(std::move(d)) {}

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t elements() const;
  int64_t bytes() const { return elements() * DTypeBytes(dtype); }
  bool operator==(const Shape& o) const { return dtype == o.dtype && dims == o.dims; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  // "f32[64,784]" — the form used in reports and cause details.
  std::string ToString() const;
  // "tensor<64x784xf32>" — StableHLO's type syntax.
  std::string ToMlir() const;
  // "[64,784]"
  std::string DimsString() const;
};

// Row-major strides in elements.
std::vector<int64_t> Strides(const std::vector<int64_t>& dims);
// The row-major index of element `flat` of `dims`, and back.
std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& dims);
int64_t Ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims);

}  // namespace shardscope
