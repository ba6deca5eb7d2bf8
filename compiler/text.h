// StableHLO text output. Every op carries its source location as a `loc(...)`
// (with the module path as the location's name) unless disabled; the
// fingerprint prints without locations and names, so neither affects identity.
#pragma once

#include <string>

#include "compiler/ir.h"

namespace shardscope::compiler {

struct PrintOptions {
  bool locations = true;   // loc("file":line:0) on each op
  bool names = true;       // parameter names as arg attributes
  bool iota_shardings = false;  // shardings in XLA's iota form where they fit (Sharding::ToIotaString)
};

std::string PrintModule(const Module& m, const PrintOptions& opts = {});
// One instruction's line ("    %7 = stablehlo.add %3, %5 : ...").
std::string PrintInstruction(const Instruction& i, const PrintOptions& opts = {});

}  // namespace shardscope::compiler
