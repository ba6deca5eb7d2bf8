// Literal: host arrays with per-element access in double (see literal.h),
// including the bf16 and IEEE f16 conversions.
#include "compiler/literal.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace shardscope {
namespace {
// bf16 keeps the top 16 bits of an f32 (round to nearest even).
uint16_t F32ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float BF16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Round to
// nearest even; overflow gives infinity, tiny values become subnormals.
uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal, in units of 2^-24
    float v;
    std::memcpy(&v, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v * 16777216.0f)));
  }
  uint32_t r = ax - 0x38000000u;  // rebias the exponent from 127 to 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}
float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(man) / 16777216.0f;
    return sign ? -v : v;
  }
  uint32_t u = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

Literal::Literal(Shape shape) : shape_(std::move(shape)), data_(shape_.bytes(), 0) {}

Literal Literal::Uninitialized(Shape shape) {
  Literal l;
  l.shape_ = std::move(shape);
  l.data_.resize(l.shape_.bytes());  // default-initialised: no zeroing pass
  return l;
}

Literal Literal::Reinterpreted(Literal&& from, Shape shape) {
  Literal l;
  l.shape_ = std::move(shape);
  l.data_ = std::move(from.data_);
  from = Literal();
  return l;
}

Literal Literal::FromF32(std::vector<int64_t> dims, const std::vector<float>& values) {
  Literal l(Shape(DType::kF32, std::move(dims)));
  std::memcpy(l.data(), values.data(), std::min<size_t>(l.bytes(), values.size() * 4));
  return l;
}

Literal Literal::FromI32(std::vector<int64_t> dims, const std::vector<int32_t>& values) {
  Literal l(Shape(DType::kI32, std::move(dims)));
  std::memcpy(l.data(), values.data(), std::min<size_t>(l.bytes(), values.size() * 4));
  return l;
}

Literal Literal::Scalar(DType t, double v) {
  Literal l(Shape(t, {}));
  l.SetDouble(0, v);
  return l;
}

double Literal::GetDouble(int64_t i) const {
  switch (shape_.dtype) {
    case DType::kF32: return as<float>()[i];
    case DType::kF64: return as<double>()[i];
    case DType::kBF16: return BF16ToF32(as<uint16_t>()[i]);
    case DType::kF16: return F16ToF32(as<uint16_t>()[i]);
    case DType::kI32: return as<int32_t>()[i];
    case DType::kI64: return static_cast<double>(as<int64_t>()[i]);
    case DType::kI1: return as<uint8_t>()[i] ? 1.0 : 0.0;
  }
  return 0;
}

void Literal::SetDouble(int64_t i, double v) {
  switch (shape_.dtype) {
    case DType::kF32: as<float>()[i] = static_cast<float>(v); break;
    case DType::kF64: as<double>()[i] = v; break;
    case DType::kBF16: as<uint16_t>()[i] = F32ToBF16(static_cast<float>(v)); break;
    case DType::kF16: as<uint16_t>()[i] = F32ToF16(static_cast<float>(v)); break;
    case DType::kI32: as<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::kI64: as<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::kI1: as<uint8_t>()[i] = v != 0; break;
  }
}

std::vector<float> Literal::ToF32Vector() const {
  std::vector<float> out(elements());
  for (int64_t i = 0; i < elements(); ++i) out[i] = static_cast<float>(GetDouble(i));
  return out;
}

std::string Literal::ToString(int max_elements) const {
  std::string s = absl::StrCat(shape_.ToString(), " {");
  int64_t n = elements();
  for (int64_t i = 0; i < n && i < max_elements; ++i) {
    absl::StrAppend(&s, i ? ", " : "", GetDouble(i));
  }
  if (n > max_elements) absl::StrAppend(&s, ", ...");
  return s + "}";
}

}  // namespace shardscope
