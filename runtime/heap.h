// The process's heap kept for the chips' buffers: fresh pages fault slowly on
// these machines (MACHINE-NOTES.md), and a fault inside a kernel counts as its
// device time. A user program linking the runtime, not only `shardscope run`,
// needs this: without it, one in three of a small MLP's GEMMs took 3-4 ms of
// faults instead of 0.2 ms, and fleet flagged healthy chips.
#pragma once

namespace shardscope::runtime {

// Keeps freed memory in the process (no mmap for big blocks, no trim, one
// arena: a per-thread arena's heap is unmapped whenever it empties, and the
// chips' threads empty theirs every step). Once per process; the first call
// wins. SHARDSCOPE_KEEP_HEAP=0 leaves the process's malloc settings alone.
// Returns whether the settings were applied. One arena means one lock for
// every thread's malloc: the kernels therefore allocate nothing once warm
// (tests/runtime/kernel_alloc_test.cc); more arenas brought the faults back.
bool KeepFreedMemory();

}  // namespace shardscope::runtime
