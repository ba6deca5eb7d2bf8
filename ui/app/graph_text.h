// A stored program's IR text (graphs.ir_text, graphs.ir_text_after) read as
// ops the views can walk: each top-level op's id, opcode, operands, result
// type and the user's line (its `loc`), and the inputs with their names. The
// store keeps text, not IR classes (DESIGN.md), so the app reads the printed
// form (compiler/text.cc's) rather than linking the compiler.
//
// AlignGraphs lays two graphs of one call site side by side the way the
// recompilation's stored diff (compile_diffs, made by compiler/graph_diff.h:
// ops paired by content, never by position) pairs them: the ops it lists as
// added or removed stand alone, every other op pairs with the other side's in
// program order (the diff's pairing keeps order), so the rows show each
// difference opposite what it replaced.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope::app {

struct IrOp {
  int64_t id = -1;          // %N, or the instruction id a parameter holds
  int param = -1;           // k of %argK for an input, else -1
  int line = 0;             // 0-based line of the text it is printed on
  std::string text;         // that line, without its indentation
  std::string opcode;       // "stablehlo.add"; "parameter" for an input
  std::string name;         // an input's shardscope.name (x, l1.weight)
  std::string type;         // the result type, e.g. tensor<64x1024xf32>
  std::string sharding;     // an input's mhlo.sharding, or the op's, if printed
  std::string source_file;  // from loc("file":line:col)
  int64_t source_line = 0;
  std::string scope;        // the module path of loc("l1"(...))
  std::vector<int64_t> operands;  // ids of the values it reads, in order

  std::string SourceLocation() const;
};

struct IrProgram {
  // In instruction order (by id; inputs fill the ids the ops leave free), so
  // an op's index here is its position, as compile_diffs.op_index counts.
  std::vector<IrOp> ops;
  int num_lines = 0;
  // Index of the op with `id`, or -1.
  int Find(int64_t id) const;
  // Indexes of the ops that read op `index`'s value.
  std::vector<int> Users(int index) const;
};

IrProgram ParseIr(std::string_view text);

// One row of compile_diffs.
struct DiffRow {
  std::string change;  // added | removed | changed
  std::string opcode;
  int64_t op_index = -1;  // the new graph's position (added, changed), the old's (removed)
  std::string what;
  std::string source_file;
  int64_t source_line = 0;
  std::string via;
};

// One row of two programs side by side.
struct AlignedRow {
  int old_index = -1, new_index = -1;  // into IrProgram::ops; -1: none on that side
  // added | removed | changed (the stored diff's), input (an input whose type
  // or layout changed), or "" (the same op on both sides).
  std::string change;
  std::string what;  // the diff's `what`, or for an input what changed
  const DiffRow* diff = nullptr;
};

struct Alignment {
  std::vector<AlignedRow> rows;
  // False when the stored diff was cut short (compile_diffs keeps at most 200
  // rows) or does not fit the programs: pairs are then by order only.
  bool from_diff = true;
  int differences = 0;  // rows with a change
};

Alignment AlignGraphs(const IrProgram& old_program, const IrProgram& new_program, const std::vector<DiffRow>& diffs);

}  // namespace shardscope::app
