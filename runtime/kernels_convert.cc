// bf16/f16 storage: the conversions the kernels use to compute 16-bit float
// ops in f32 (kernels.cc widens operands, runs the f32 kernel and narrows the
// result). Eigen's half/bfloat16 types round to nearest even, like the
// hardware; they are independent of Literal's scalar conversions, which the
// reference interpreter uses, so the ops test checks one against the other.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 false positive in Eigen's AVX-512 code
#include <Eigen/Core>

#include "runtime/kernels_internal.h"

namespace shardscope::runtime::internal {

void HalfToF32(DType t, const void* src, float* dst, int64_t n) {
  Eigen::Map<Eigen::ArrayXf> out(dst, n);
  if (t == DType::kBF16) {
    out = Eigen::Map<const Eigen::Array<Eigen::bfloat16, Eigen::Dynamic, 1>>(
              static_cast<const Eigen::bfloat16*>(src), n).cast<float>();
  } else {
    out = Eigen::Map<const Eigen::Array<Eigen::half, Eigen::Dynamic, 1>>(
              static_cast<const Eigen::half*>(src), n).cast<float>();
  }
}

void F32ToHalf(DType t, const float* src, void* dst, int64_t n) {
  Eigen::Map<const Eigen::ArrayXf> in(src, n);
  if (t == DType::kBF16) {
    Eigen::Map<Eigen::Array<Eigen::bfloat16, Eigen::Dynamic, 1>>(static_cast<Eigen::bfloat16*>(dst), n) =
        in.cast<Eigen::bfloat16>();
  } else {
    Eigen::Map<Eigen::Array<Eigen::half, Eigen::Dynamic, 1>>(static_cast<Eigen::half*>(dst), n) =
        in.cast<Eigen::half>();
  }
}

}  // namespace shardscope::runtime::internal
