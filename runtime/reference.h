// The reference interpreter: every op as one short, obviously-correct loop
// that mirrors the StableHLO spec, computing in double. It shares nothing with
// the fast kernels but Literal and Shape, so running both on the same inputs
// (tests/runtime/ops_table_test.cc) checks the kernels' layouts, fast paths
// and 16-bit handling against the spec's plain meaning. Slow by design: use it
// for tests and small inputs only.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "compiler/ir.h"
#include "compiler/literal.h"

namespace shardscope::runtime {

// Evaluates one non-collective instruction. `out` must be allocated with the
// instruction's type; every element is written. Errors name the op.
absl::Status EvalReference(const compiler::Instruction& instr, const std::vector<const Literal*>& operands,
                           int64_t partition_id, Literal* out);

}  // namespace shardscope::runtime
