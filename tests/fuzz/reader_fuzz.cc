// libFuzzer target over the read side (-DSHARDSCOPE_FUZZ=ON, clang): any bytes
// as a database file, read by the reader, `check` and the reports. See
// tests/fuzz/README.md for how to run it.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/read_any_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardscope::fuzz::ReadAnyBytes(data, size);
  return 0;
}
