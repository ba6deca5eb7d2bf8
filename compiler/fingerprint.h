// Graph identity and graph differences.
// The fingerprint covers ops, shapes, dtypes, shardings and inlined constants,
// never source locations or parameter names, so moving code never recompiles.
// DiffModules tells what changed between two graphs of one call site; core
// turns that into a recompilation cause.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir.h"

namespace shardscope::compiler {

// 128-bit XXH3 over every instruction's fields (what the location-free text
// shows, operands by position), as 32 hex digits. Stable across processes and
// builds of the same compiler version; ids, locations and names do not count.
std::string Fingerprint(const Module& m);

struct InputDifference {
  int index = 0;        // parameter index
  bool shape = false;   // dims differ
  bool dtype = false;
  bool sharding = false;
};

struct ModuleDiff {
  // Structure ignores shapes: opcodes, wiring and attributes that are not
  // derived from shapes. Equal structure with differing inputs means the
  // inputs caused the new graph.
  bool same_structure = true;
  int parameter_count_old = 0, parameter_count_new = 0;
  std::vector<InputDifference> inputs;
  // First instruction (index into the new module's instruction list) whose
  // structure differs, or -1. Scalar constants whose value alone differs do
  // not count as structure; the first of them is reported separately.
  int64_t first_difference = -1;
  int64_t first_constant_difference = -1;
  double old_constant = 0, new_constant = 0;
  // A rough distance for choosing the nearest earlier graph.
  int64_t distance = 0;
};

ModuleDiff DiffModules(const Module& old_module, const Module& new_module);

}  // namespace shardscope::compiler
