#include "runtime/heap.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace shardscope::runtime {

bool KeepFreedMemory() {
  static bool applied = false;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* keep = std::getenv("SHARDSCOPE_KEEP_HEAP");
    if (keep != nullptr && std::strcmp(keep, "0") == 0) return;
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    mallopt(M_ARENA_MAX, 1);
    applied = true;
  });
  return applied;
}

}  // namespace shardscope::runtime
