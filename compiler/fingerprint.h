// Graph identity and graph differences.
// The fingerprint covers ops, shapes, dtypes, shardings and inlined constants,
// never source locations or parameter names, so moving code never recompiles.
// compiler/graph_diff.h tells what changed between two graphs of one call
// site; core turns that into a recompilation cause.
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
// its structure (what graph diffs compare, so a new shape or an inlined
// scalar keeps the order and the diagnosis), then, when structures tie, how
// the subgraph's values are used by the rest of the graph, then shapes,
// dtypes, shardings and constants; outputs equal in all of these keep their
// given order (they lower alike unless the graph is symmetric in a way these
// keys miss).
std::vector<size_t> CanonicalOutputOrder(const std::vector<const Instruction*>& topo,
                                         const std::vector<const Instruction*>& outputs);

// An op's own fields, its operands left out (for aligning graphs:
// compiler/graph_diff.h). The structure key leaves out shapes and constants'
// values, so it stays when a batch size or an inlined scalar changes; the full
// key adds constants' values and sharding constraints.
uint64_t OwnStructureKey(const Instruction& i);
uint64_t OwnFullKey(const Instruction& i);

}  // namespace shardscope::compiler
