// Graph simplification before partitioning: algebraic simplification (x*1,
// x+0, -(-x), reshapes/transposes/broadcasts/converts that change nothing),
// constant folding (float ops on splat constants), common-subexpression
// elimination (an op with the same operands and attributes as an earlier one
// is the same value) and dead-code elimination (ops no output needs). Lazy
// tracing makes both common: autograd recomputes broadcasts and constants,
// and values the user dropped are still in the graph.
#pragma once

#include <memory>

#include "compiler/ir.h"

namespace shardscope::compiler {

struct PassStats {
  int cse_removed = 0;   // duplicates merged into an earlier equal op
  int dce_removed = 0;   // ops no output depends on
  int algebraic_simplified = 0;  // ops that were one of their operands (x*1, x+0, a no-op reshape, ...)
  int constants_folded = 0;      // float ops on splat constants, folded into one constant
};

// A simplified copy of `m`. Parameters are all kept, in order (their indices
// are the program's calling convention); outputs keep their order.
std::unique_ptr<Module> Simplify(const Module& m, PassStats* stats = nullptr);

}  // namespace shardscope::compiler
