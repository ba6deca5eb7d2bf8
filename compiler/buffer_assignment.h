// Buffer assignment by liveness. Every value of a per-device program lives
// from the op that makes it to its last use (outputs to the end, parameters
// throughout, as the executor holds them). Buffers whose lifetimes do not
// overlap share memory: offsets in one arena are chosen greedily, largest
// first. The plan gives each program's peak memory per device and the live
// buffers at that peak, so an out-of-memory error can name them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/fusion.h"
#include "compiler/ir.h"

namespace shardscope::compiler {

struct BufferInfo {
  int64_t instruction_id = 0;
  std::string op;        // e.g. "dot_general.7"
  int64_t bytes = 0;
  int64_t offset = -1;   // in the arena; -1 for parameters (owned by the caller)
  int64_t first = 0;     // index of the defining instruction
  int64_t last = 0;      // index of the last use (the program's length for outputs)
  bool parameter = false;
  bool output = false;
  SourceLoc loc;
  std::string scope;
};

struct MemoryPlan {
  std::vector<BufferInfo> buffers;   // one per instruction, in program order
  int64_t parameter_bytes = 0;       // inputs, resident before the run
  int64_t arena_bytes = 0;           // everything else, with reuse
  int64_t unshared_bytes = 0;        // what the arena would take without reuse
  int64_t peak_bytes = 0;            // most bytes live at once, parameters included
  int64_t peak_index = -1;           // instruction index where the peak is reached
  std::vector<int64_t> live_bytes;   // per instruction, in program order: bytes live there (its maximum is peak_bytes)
  std::vector<int> live_at_peak;     // indices into `buffers`, largest first

  // "1.0 MiB dot_general.7 (samples/mlp.cc:41, l1), 512 KiB ..." — the n largest at the peak.
  std::string DescribeLargestAtPeak(int n) const;
};

// With `fusion`, ops absorbed into a kernel take no memory and a kernel's
// outside operands live until the kernel runs.
MemoryPlan PlanMemory(const Module& program, const FusionPlan* fusion = nullptr);

// "3.1 MiB"
std::string FormatBytes(int64_t bytes);

}  // namespace shardscope::compiler
