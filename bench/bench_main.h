// What every bench program does first: keep freed memory in the heap, since
// returning it to the OS makes every later allocation page-fault it back in
// (MACHINE-NOTES, "Two traps"); and the Google Benchmark main that does so.
#pragma once

#include <malloc.h>

#include <benchmark/benchmark.h>

namespace shardscope::bench {

inline void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

inline int BenchmarkMain(int argc, char** argv) {
  KeepFreedMemory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace shardscope::bench
