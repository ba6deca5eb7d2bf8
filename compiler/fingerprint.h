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

// The order in which to lower a graph's outputs so that the same graph built
// in another order lowers to the same module (and fingerprint). `topo` holds
// every instruction the outputs reach, operands before users, in any such
// order; outputs[j] is one of them. Returns a permutation of 0..outputs.size()
// -1: emit outputs[order[0]] first. Outputs are sorted by a key of their
// whole subgraph that ignores creation order, ids, locations and names: first
// its structure (what DiffModules compares, so a new shape or an inlined
// scalar keeps the order and the diagnosis), then, when structures tie, how
// the subgraph's values are used by the rest of the graph, then shapes,
// dtypes, shardings and constants; outputs equal in all of these keep their
// given order (they lower alike unless the graph is symmetric in a way these
// keys miss).
std::vector<size_t> CanonicalOutputOrder(const std::vector<const Instruction*>& topo,
                                         const std::vector<const Instruction*>& outputs);

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
