#include "compiler/types.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardscope {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kI1: return "i1";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(const std::string& s) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32,
                  DType::kI64, DType::kI1}) {
    if (s == DTypeName(t)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown element type '", s, "'"));
}

int64_t DTypeBytes(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF64: case DType::kI64: return 8;
    case DType::kBF16: case DType::kF16: return 2;
    case DType::kI1: return 1;
  }
  return 0;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}

int64_t Shape::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string Shape::DimsString() const { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

std::string Shape::ToString() const { return absl::StrCat(DTypeName(dtype), DimsString()); }

std::string Shape::ToMlir() const {
  std::string s = "tensor<";
  for (int64_t d : dims) absl::StrAppend(&s, d, "x");
  absl::StrAppend(&s, DTypeName(dtype), ">");
  return s;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    index[i] = flat % dims[i];
    flat /= dims[i];
  }
  return index;
}

int64_t Ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  int64_t flat = 0;
  for (size_t i = 0; i < dims.size(); ++i) flat = flat * dims[i] + index[i];
  return flat;
}

}  // namespace shardscope
