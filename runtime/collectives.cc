#include "runtime/collectives.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardscope::runtime {
namespace {

template <typename T>
void Combine(compiler::ReduceKind k, const std::vector<const Literal*>& in, Literal* out) {
  T* o = out->as<T>();
  int64_t n = out->elements();
  std::memcpy(o, in[0]->data(), n * sizeof(T));
  for (size_t g = 1; g < in.size(); ++g) {
    const T* x = in[g]->as<T>();
    switch (k) {
      case compiler::ReduceKind::kSum: for (int64_t i = 0; i < n; ++i) o[i] += x[i]; break;
      case compiler::ReduceKind::kProd: for (int64_t i = 0; i < n; ++i) o[i] *= x[i]; break;
      case compiler::ReduceKind::kMax: for (int64_t i = 0; i < n; ++i) o[i] = std::max(o[i], x[i]); break;
      case compiler::ReduceKind::kMin: for (int64_t i = 0; i < n; ++i) o[i] = std::min(o[i], x[i]); break;
    }
  }
}

// Walks every element index of `shape`, calling fn(flat index in block, offset-shifted flat index in big).
template <typename F>
void ForEachBlockRow(const std::vector<int64_t>& block, const std::vector<int64_t>& big,
                     const std::vector<int64_t>& offsets, F fn) {
  int rank = static_cast<int>(block.size());
  if (rank == 0) { fn(0, 0, 1); return; }
  std::vector<int64_t> bs = Strides(block), gs = Strides(big);
  int64_t rows = 1;
  for (int d = 0; d + 1 < rank; ++d) rows *= block[d];
  int64_t row_len = block[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t b = 0, g = 0;
    for (int d = 0; d < rank; ++d) {
      b += idx[d] * bs[d];
      g += (idx[d] + offsets[d]) * gs[d];
    }
    fn(b, g, row_len);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < block[d]) break;
      idx[d] = 0;
    }
  }
}

// 16-bit floats are combined in f32 and rounded once, as a reduction that
// accumulates in f32 would.
void CombineHalf(compiler::ReduceKind k, const std::vector<const Literal*>& in, Literal* out) {
  std::vector<float> acc = in[0]->ToF32Vector();
  for (size_t g = 1; g < in.size(); ++g) {
    const std::vector<float> x = in[g]->ToF32Vector();
    for (size_t i = 0; i < acc.size(); ++i) {
      switch (k) {
        case compiler::ReduceKind::kSum: acc[i] += x[i]; break;
        case compiler::ReduceKind::kProd: acc[i] *= x[i]; break;
        case compiler::ReduceKind::kMax: acc[i] = std::max(acc[i], x[i]); break;
        case compiler::ReduceKind::kMin: acc[i] = std::min(acc[i], x[i]); break;
      }
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) out->SetDouble(static_cast<int64_t>(i), acc[i]);
}

}  // namespace

void CopyBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst) {
  int64_t es = DTypeBytes(src.shape().dtype);
  auto* d = static_cast<uint8_t*>(dst->data());
  auto* s = static_cast<const uint8_t*>(src.data());
  ForEachBlockRow(src.shape().dims, dst->shape().dims, offsets,
                  [&](int64_t b, int64_t g, int64_t len) { std::memcpy(d + g * es, s + b * es, len * es); });
}

void ExtractBlock(const Literal& src, const std::vector<int64_t>& offsets, Literal* dst) {
  int64_t es = DTypeBytes(src.shape().dtype);
  auto* d = static_cast<uint8_t*>(dst->data());
  auto* s = static_cast<const uint8_t*>(src.data());
  ForEachBlockRow(dst->shape().dims, src.shape().dims, offsets,
                  [&](int64_t b, int64_t g, int64_t len) { std::memcpy(d + b * es, s + g * es, len * es); });
}

absl::Status AllReduce(compiler::ReduceKind kind, const std::vector<const Literal*>& inputs,
                       Literal* out) {
  if (inputs.empty()) return absl::InvalidArgumentError("all_reduce: empty replica group");
  for (const Literal* l : inputs)
    if (l->shape() != out->shape())
      return absl::InvalidArgumentError(absl::StrCat("all_reduce: participant holds ", l->shape().ToString(),
                                                     ", expected ", out->shape().ToString()));
  switch (out->shape().dtype) {
    case DType::kF32: Combine<float>(kind, inputs, out); break;
    case DType::kF64: Combine<double>(kind, inputs, out); break;
    case DType::kI32: Combine<int32_t>(kind, inputs, out); break;
    case DType::kI64: Combine<int64_t>(kind, inputs, out); break;
    case DType::kBF16: case DType::kF16: CombineHalf(kind, inputs, out); break;
    default:
      return absl::UnimplementedError(absl::StrCat("all_reduce on ", DTypeName(out->shape().dtype)));
  }
  return absl::OkStatus();
}

absl::Status AllGather(int64_t dim, const std::vector<const Literal*>& inputs, Literal* out) {
  if (inputs.empty()) return absl::InvalidArgumentError("all_gather: empty replica group");
  std::vector<int64_t> offsets(out->shape().rank(), 0);
  for (const Literal* l : inputs) {
    CopyBlock(*l, offsets, out);
    offsets[dim] += l->shape().dims[dim];
  }
  return absl::OkStatus();
}

}  // namespace shardscope::runtime
