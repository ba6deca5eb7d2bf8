// Graph simplification before partitioning: common-subexpression elimination
// (an op with the same operands and attributes as an earlier one is the same
// value) and dead-code elimination (ops no output needs are dropped). Lazy
// tracing makes both common: autograd recomputes broadcasts and constants,
// and values the user dropped are still in the graph.
#pragma once

#include <memory>

#include "compiler/ir.h"

namespace shardscope::compiler {

struct PassStats {
  int cse_removed = 0;   // duplicates merged into an earlier equal op
  int dce_removed = 0;   // ops no output depends on
};

// A simplified copy of `m`. Parameters are all kept, in order (their indices
// are the program's calling convention); outputs keep their order.
std::unique_ptr<Module> Simplify(const Module& m, PassStats* stats = nullptr);

}  // namespace shardscope::compiler
