// Graph differences aligned by content, never by position. Two graphs of one
// call site are compared op for op by a Merkle hash (an op's own fields and
// its operands' hashes), so an op inserted early does not make every later op
// look different; ops left over are paired by their fields and source line.
// What remains is reported: ops added, removed, and changed (a constant's
// value, a sharding constraint, attributes, or operands wired to other ops),
// each with its index so callers can name its line. Inputs are paired by a
// key the caller gives (a tensor's name or where it was made), so a changed
// shape, dtype or layout shows as an input difference, not as structure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir.h"

namespace shardscope::compiler {

struct OpChange {
  enum class Kind { kAdded, kRemoved, kChanged };
  Kind kind = Kind::kAdded;
  int64_t old_index = -1;  // into the old module's instructions (removed, changed)
  int64_t new_index = -1;  // into the new module's instructions (added, changed)
  // For changed ops: "opcode" (another op made by the same line), "constant",
  // "sharding constraint", "attributes" or "operands" (the same op reading
  // other values: a block moved).
  std::string what;
};

struct InputChange {
  int old_param = -1, new_param = -1;  // parameter numbers
  bool shape = false, dtype = false, sharding = false;
};

struct GraphDiff {
  std::vector<OpChange> changes;     // new-graph order; removed ops after, in old order
  std::vector<InputChange> inputs;   // paired inputs whose shape, dtype or layout differ
  std::vector<int64_t> new_to_old;   // per new instruction: its counterpart, or -1
  std::vector<int64_t> old_to_new;
  // Ops added, removed or changed plus differing inputs: how far apart the
  // graphs are (the nearest earlier graph is the one with the least).
  int64_t distance() const { return static_cast<int64_t>(changes.size() + inputs.size()); }
  bool empty() const { return changes.empty() && inputs.empty(); }
  int64_t Count(OpChange::Kind k) const;
};

// `old_keys`/`new_keys` name each parameter (in parameters() order) for
// pairing inputs; when empty, a parameter's name is its key (unnamed ones pair
// in order). Parameters that share a key pair in order. `*_tags`, per
// instruction (may be empty), are part of an op's identity: a caller's mark
// (e.g. "a user's scalar") that keeps it from pairing with an op without it.
GraphDiff DiffGraphs(const Module& old_module, const Module& new_module,
                     const std::vector<std::string>& old_keys = {}, const std::vector<std::string>& new_keys = {},
                     const std::vector<std::string>& old_tags = {}, const std::vector<std::string>& new_tags = {});

const char* OpChangeKindName(OpChange::Kind k);  // added | removed | changed

// The structural diff leaves out what follows from shapes (so that a new
// batch size keeps the graph op for op), and with it a slice's window, a
// reshape's or pad's dims and result shapes. Two graphs of one structure, op
// for op in the same order (the lowering is canonical), that differ there:
// the first such op (not a constant or an input), with what differs as text
// ("[0:8:1, 0:4:1] -> [0:8:1, 0:3:1]"). None when the graphs differ in
// structure or only in constants and inputs.
struct AttributeChange {
  int64_t index = -1;  // into both modules' instructions
  std::string old_text, new_text;
  bool chosen = false;  // the program chose the window or target (a slice, reshape, pad, gather)
};
std::optional<AttributeChange> FirstAttributeChange(const Module& old_module, const Module& new_module);
// Every op whose attributes changed, in instruction order (none when the
// modules are not the same ops in the same order).
std::vector<AttributeChange> AttributeChanges(const Module& old_module, const Module& new_module);

// The same ops in the same order, wired alike, whatever their shapes,
// attributes and constants: one program at other sizes.
bool SameOpsInOrder(const Module& a, const Module& b);

}  // namespace shardscope::compiler
