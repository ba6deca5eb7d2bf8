// Per-instruction compute kernels: evaluate one non-collective IR instruction on
// dense host arrays. This is the numerics of every (real or virtual) device; the
// executor calls it once per instruction, one device per thread, so each kernel
// is single-threaded. Eigen stays out of this header on purpose: it is included
// widely and Eigen-heavy translation units compile slowly.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "compiler/fusion.h"
#include "compiler/ir.h"
#include "compiler/literal.h"

namespace shardscope::runtime {

// Evaluates one non-collective instruction on host memory. `out` is already
// allocated with instr.shape (contents unspecified: every element is written).
// `partition_id` is this device's id (for stablehlo.partition_id).
//
// `out` must not alias an operand's storage, except for elementwise ops
// (add, negate, compare, select, convert between same-sized types, ...), which
// read element i before writing element i and so may run in place.
//
// Returns InvalidArgument (malformed instruction or operands that do not match
// it) or Unimplemented (a valid op/element-type combination this build does not
// compute, e.g. arithmetic on bf16/f16), naming the op and its source line;
// never aborts. Collectives (IsCollective) are done by the runtime's
// collectives and give InvalidArgument here.
absl::Status EvalInstruction(const compiler::Instruction& instr,
                             const std::vector<const Literal*>& operands,
                             int64_t partition_id, Literal* out);

// Runs a fused kernel (compiler/fusion.h) into `out` (the root's shape).
// values[id] must hold every value the kernel reads from outside, by
// instruction id. kernels_fused.cc.
absl::Status EvalFusedKernel(const compiler::FusedKernel& kernel, const std::vector<const Literal*>& values,
                             Literal* out);

}  // namespace shardscope::runtime
