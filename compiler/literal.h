// A host literal: a dense row-major array with its shape. Values are stored in
// their element type; bf16/f16 as 16-bit patterns, i1 as one byte.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <string>
#include <vector>

#include "compiler/types.h"

namespace shardscope {

// Storage aligned to 64 bytes (one AVX-512 vector). Vectorised reductions
// peel elements until the data is aligned, so with malloc's varying alignment
// the same sum could round differently from run to run; fixed alignment keeps
// every result bit-for-bit reproducible.
//
// The alignment is done here, over plain malloc, not with aligned new: glibc's
// memalign asks for more than a freed block of the same size holds, so every
// big buffer came from fresh pages — a page fault per 4 KiB, every step (about
// 13 us each on these machines, MACHINE-NOTES "Two traps"). malloc hands a
// freed block of the same size straight back.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr size_t kAlign = 64;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    char* raw = static_cast<char*>(std::malloc(n * sizeof(T) + kAlign));
    if (raw == nullptr) throw std::bad_alloc();
    // malloc gives 16-byte alignment, so there are 16..64 bytes before the
    // aligned start: room to keep the block's own address.
    char* p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kAlign) & ~uintptr_t{kAlign - 1});
    reinterpret_cast<void**>(p)[-1] = raw;
    return reinterpret_cast<T*>(p);
  }
  void deallocate(T* p, size_t) {
    if (p != nullptr) std::free(reinterpret_cast<void**>(p)[-1]);
  }
  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const { return true; }
  // Default-initialise (leave bytes as they are) unless a value is given, so
  // an output buffer that a kernel will overwrite is not zeroed first.
  template <typename U>
  void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) { ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...); }
};

class Literal {
 public:
  Literal() = default;
  explicit Literal(Shape shape);  // zero-filled
  // Contents unspecified: for outputs that are about to be written whole.
  static Literal Uninitialized(Shape shape);
  // `from`'s bytes under another shape of the same size (a reshape that moves
  // the buffer instead of copying it); `from` is left empty.
  static Literal Reinterpreted(Literal&& from, Shape shape);
  static Literal FromF32(std::vector<int64_t> dims, const std::vector<float>& values);
  static Literal FromI32(std::vector<int64_t> dims, const std::vector<int32_t>& values);
  static Literal Scalar(DType t, double v);

  const Shape& shape() const { return shape_; }
  int64_t elements() const { return shape_.elements(); }
  int64_t bytes() const { return static_cast<int64_t>(data_.size()); }
  void* data() { return data_.data(); }
  const void* data() const { return data_.data(); }
  template <typename T> T* as() { return reinterpret_cast<T*>(data_.data()); }
  template <typename T> const T* as() const { return reinterpret_cast<const T*>(data_.data()); }

  // Element i converted to double, whatever the element type.
  double GetDouble(int64_t i) const;
  void SetDouble(int64_t i, double v);
  std::vector<float> ToF32Vector() const;
  // Short human-readable summary, e.g. "f32[2,2] {1, 2, 3, 4}".
  std::string ToString(int max_elements = 8) const;

 private:
  Shape shape_;
  std::vector<uint8_t, AlignedAllocator<uint8_t>> data_;
};

}  // namespace shardscope
