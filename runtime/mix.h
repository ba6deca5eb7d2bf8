// SplitMix64's finaliser: a bijective mix of 64 bits, every output bit
// depending on every input bit. The runtime's seeded draws (jitter faults,
// rng_bit_generator, the executor's segment order) all use this one.
#pragma once

#include <cstdint>

namespace shardscope::runtime {

inline uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace shardscope::runtime
