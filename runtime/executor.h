// Runs one SPMD program on every device of a topology. Devices run side by
// side on the thread pool, one task each, up to the next collective; the
// collective then really combines the devices' buffers, group by group, and
// the devices go on. Every kernel is timed on its thread's CPU clock and
// handed to the Scheduler as device time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/fusion.h"
#include "compiler/ir.h"
#include "runtime/buffer.h"
#include "runtime/intra_op.h"
#include "runtime/scheduler.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

namespace shardscope::runtime {

// args[d][k]: parameter k on device d. Returns outputs[d][k] as device buffers
// and fills `timing` with what each device did (for the Scheduler).
// gangs[d], when given, is device d's intra-op gang (intra_op.h); `fusion`,
// when given, runs the plan's kernels in one pass each (compiler/fusion.h).
absl::StatusOr<std::vector<std::vector<std::shared_ptr<DeviceBuffer>>>> ExecuteProgram(
    const compiler::Module& program, Topology& topology, ThreadPool& pool,
    const std::vector<std::vector<const Literal*>>& args, ScheduleInput* timing,
    const std::vector<std::unique_ptr<Gang>>* gangs = nullptr,
    const compiler::FusionPlan* fusion = nullptr);

// The chip that goes first in the `segment`-th segment the process runs, of
// `chips` (the others follow in order, wrapping round): every run of `chips`
// segments starts each chip once, in an order drawn by a mixed hash, so that
// any chip is as likely first at every place of a step. A golden-ratio step
// (a Weyl sequence) came back to the same parity every 4 segments, so in the
// mlp's 8-segment step each segment ran its odd chips first or last in every
// step, and chips 1, 3, 5 and 7 read 1-5% slower than their peers in runs
// with no fault.
int SegmentRotation(uint64_t segment, int chips);

}  // namespace shardscope::runtime
