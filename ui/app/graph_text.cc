// Reading printed IR and aligning two programs; see graph_text.h.
#include "ui/app/graph_text.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace shardscope::app {
namespace {

// A quoted string starting at text[*pos] == '"'; moves *pos past it.
std::string Quoted(std::string_view text, size_t* pos) {
  std::string out;
  size_t i = *pos + 1;
  for (; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) ++i;
    out.push_back(text[i]);
  }
  *pos = std::min(text.size(), i + 1);
  return out;
}

int64_t Digits(std::string_view text, size_t* pos) {
  int64_t v = 0;
  bool any = false;
  while (*pos < text.size() && std::isdigit(static_cast<unsigned char>(text[*pos]))) {
    v = v * 10 + (text[*pos] - '0');
    ++*pos;
    any = true;
  }
  return any ? v : -1;
}

// loc("file":line:col) or loc("scope"("file":line:col)): the last one in `text`.
void ParseLoc(std::string_view text, IrOp& op) {
  const size_t at = text.rfind("loc(");
  if (at == std::string_view::npos) return;
  size_t i = at + 4;
  if (i >= text.size() || text[i] != '"') return;
  std::string first = Quoted(text, &i);
  if (i < text.size() && text[i] == '(') {
    op.scope = first;
    ++i;
    if (i >= text.size() || text[i] != '"') return;
    first = Quoted(text, &i);
  }
  op.source_file = first;
  if (i < text.size() && text[i] == ':') {
    ++i;
    const int64_t line = Digits(text, &i);
    if (line > 0) op.source_line = line;
  }
}

// The value of `key = "..."` in `text`, or "".
std::string Attribute(std::string_view text, std::string_view key) {
  const std::string pattern = absl::StrCat(std::string(key), " = \"");
  const size_t at = text.find(pattern);
  if (at == std::string_view::npos) return "";
  size_t i = at + key.size() + 3;
  return Quoted(text, &i);
}

// The text before the op's location, where its operands and types are.
std::string_view BeforeLoc(std::string_view text) {
  const size_t at = text.rfind(" loc(");
  return at == std::string_view::npos ? text : text.substr(0, at);
}

}  // namespace

std::string IrOp::SourceLocation() const {
  if (source_file.empty()) return "";
  return source_line > 0 ? absl::StrCat(source_file, ":", source_line) : source_file;
}

int IrProgram::Find(int64_t id) const {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> IrProgram::Users(int index) const {
  std::vector<int> out;
  if (index < 0 || index >= static_cast<int>(ops.size())) return out;
  const int64_t id = ops[index].id;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (std::find(ops[i].operands.begin(), ops[i].operands.end(), id) != ops[i].operands.end()) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

IrProgram ParseIr(std::string_view text) {
  IrProgram program;
  std::vector<IrOp> params, body;
  // Operands naming an input (%argK) until the inputs have their ids.
  std::vector<std::vector<std::pair<size_t, int>>> arg_refs;
  int line_no = 0;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    const int line = line_no++;
    std::string_view s(piece.data(), piece.size());
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    if (s.starts_with("func.func @main(")) {
      // The inputs: "%argK: TYPE {attrs} loc(...)" separated by ", ".
      size_t at = s.find("%arg");
      while (at != std::string_view::npos) {
        size_t next = s.find(", %arg", at + 4);
        std::string_view part = s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
        if (next == std::string_view::npos) {
          // The last input ends at the signature's ") -> (...)" or ") {".
          const size_t end = part.find(") ->");
          if (end != std::string_view::npos) part = part.substr(0, end);
        }
        IrOp p;
        size_t i = 4;
        p.param = static_cast<int>(Digits(part, &i));
        p.line = line;
        p.opcode = "parameter";
        p.text = std::string(part);
        if (i + 2 <= part.size() && part.substr(i, 2) == ": ") {
          const size_t stop = part.find_first_of(" {", i + 2);
          p.type = std::string(part.substr(i + 2, stop == std::string_view::npos ? std::string_view::npos : stop - i - 2));
        }
        p.name = Attribute(part, "shardscope.name");
        p.sharding = Attribute(part, "mhlo.sharding");
        ParseLoc(part, p);
        if (p.param >= 0) params.push_back(std::move(p));
        at = next == std::string_view::npos ? next : next + 2;
      }
      continue;
    }
    // A top-level op: "%N = opcode ..." or "%N:K = ..." (region values are
    // named %w7_..., and belong to their while).
    if (s.size() < 4 || s[0] != '%' || !std::isdigit(static_cast<unsigned char>(s[1]))) continue;
    size_t i = 1;
    IrOp op;
    op.id = Digits(s, &i);
    if (i < s.size() && s[i] == ':') {
      ++i;
      Digits(s, &i);
    }
    if (s.substr(i, 3) != " = ") continue;
    i += 3;
    const size_t op_end = s.find_first_of(" (", i);
    op.opcode = std::string(s.substr(i, op_end == std::string_view::npos ? std::string_view::npos : op_end - i));
    // Generic form ("stablehlo.all_reduce"(%54) ({...})): the name without its quotes.
    if (op.opcode.size() >= 2 && op.opcode.front() == '"' && op.opcode.back() == '"')
      op.opcode = op.opcode.substr(1, op.opcode.size() - 2);
    op.line = line;
    op.text = std::string(s);
    const std::string_view head = BeforeLoc(s);
    std::vector<std::pair<size_t, int>> refs;
    for (size_t k = op_end == std::string_view::npos ? s.size() : op_end; k < head.size(); ++k) {
      if (head[k] != '%') continue;
      size_t j = k + 1;
      if (head.substr(j, 3) == "arg") {
        j += 3;
        const int64_t arg = Digits(head, &j);
        if (arg >= 0) {
          refs.emplace_back(op.operands.size(), static_cast<int>(arg));
          op.operands.push_back(-1);
        }
      } else {
        const int64_t id = Digits(head, &j);
        if (id >= 0) op.operands.push_back(id);
      }
      k = j - 1;
    }
    const size_t arrow = head.rfind(" -> ");
    const size_t colon = head.rfind(" : ");
    if (arrow != std::string_view::npos) op.type = std::string(head.substr(arrow + 4));
    else if (colon != std::string_view::npos) op.type = std::string(head.substr(colon + 3));
    op.sharding = Attribute(head, "mhlo.sharding");
    ParseLoc(s, op);
    arg_refs.push_back(std::move(refs));
    body.push_back(std::move(op));
  }
  program.num_lines = line_no;
  // Inputs take the instruction ids the ops leave free, in order (a traced
  // program numbers every instruction, inputs included, as it is made).
  std::set<int64_t> used;
  for (const IrOp& op : body) used.insert(op.id);
  const int64_t total = static_cast<int64_t>(params.size() + body.size());
  std::vector<int64_t> free_ids;
  for (int64_t id = 0; id < total && free_ids.size() < params.size(); ++id) {
    if (!used.contains(id)) free_ids.push_back(id);
  }
  const bool dense = free_ids.size() == params.size() && (used.empty() || *used.rbegin() < total);
  std::sort(params.begin(), params.end(), [](const IrOp& a, const IrOp& b) { return a.param < b.param; });
  const int64_t after = used.empty() ? 0 : *used.rbegin() + 1;
  std::map<int, int64_t> id_of_param;
  for (size_t k = 0; k < params.size(); ++k) {
    params[k].id = dense ? free_ids[k] : after + static_cast<int64_t>(k);
    id_of_param[params[k].param] = params[k].id;
  }
  for (size_t b = 0; b < body.size(); ++b) {
    for (const auto& [slot, arg] : arg_refs[b]) {
      auto it = id_of_param.find(arg);
      body[b].operands[slot] = it == id_of_param.end() ? -1 : it->second;
    }
  }
  program.ops = std::move(params);
  for (IrOp& op : body) program.ops.push_back(std::move(op));
  // Inputs first when their ids are not known; else by id, inputs where they were made.
  if (dense) {
    std::stable_sort(program.ops.begin(), program.ops.end(), [](const IrOp& a, const IrOp& b) { return a.id < b.id; });
  }
  return program;
}

Alignment AlignGraphs(const IrProgram& old_program, const IrProgram& new_program, const std::vector<DiffRow>& diffs) {
  Alignment out;
  const int n_old = static_cast<int>(old_program.ops.size()), n_new = static_cast<int>(new_program.ops.size());
  std::map<int, const DiffRow*> added, changed, removed;
  for (const DiffRow& d : diffs) {
    const int at = static_cast<int>(d.op_index);
    if (d.change == "added" && at >= 0 && at < n_new) added[at] = &d;
    else if (d.change == "changed" && at >= 0 && at < n_new) changed[at] = &d;
    else if (d.change == "removed" && at >= 0 && at < n_old) removed[at] = &d;
    else out.from_diff = false;  // a row that does not fit these programs
  }
  // Everything the diff did not call added (removed) pairs, in order.
  std::vector<int> new_kept, old_kept;
  for (int i = 0; i < n_new; ++i) {
    if (!added.contains(i)) new_kept.push_back(i);
  }
  for (int i = 0; i < n_old; ++i) {
    if (!removed.contains(i)) old_kept.push_back(i);
  }
  if (new_kept.size() != old_kept.size()) out.from_diff = false;
  std::vector<int> old_of_new(n_new, -1);
  for (size_t k = 0; k < std::min(new_kept.size(), old_kept.size()); ++k) old_of_new[new_kept[k]] = old_kept[k];
  std::vector<bool> old_done(n_old, false);
  int next_old = 0;
  auto flush_old_before = [&](int limit) {
    // Old ops not paired with anything, up to `limit` (in old order).
    for (; next_old < limit; ++next_old) {
      if (old_done[next_old]) continue;
      AlignedRow row;
      row.old_index = next_old;
      row.change = "removed";
      auto it = removed.find(next_old);
      if (it != removed.end()) {
        row.diff = it->second;
        row.what = it->second->what;
      }
      old_done[next_old] = true;
      out.rows.push_back(row);
    }
  };
  for (int i = 0; i < n_new; ++i) {
    AlignedRow row;
    row.new_index = i;
    const int o = old_of_new[i];
    if (o >= 0) {
      flush_old_before(o);
      row.old_index = o;
      old_done[o] = true;
      next_old = std::max(next_old, o + 1);
    }
    if (auto it = added.find(i); it != added.end()) {
      row.change = "added";
      row.diff = it->second;
      row.what = it->second->what;
    } else if (auto ch = changed.find(i); ch != changed.end()) {
      row.change = "changed";
      row.diff = ch->second;
      row.what = ch->second->what;
    } else if (o >= 0 && new_program.ops[i].param >= 0 && old_program.ops[o].param >= 0) {
      // Inputs pair by name in the diff; their type or layout is what differs.
      const IrOp& a = old_program.ops[o];
      const IrOp& b = new_program.ops[i];
      std::vector<std::string> what;
      if (a.type != b.type) what.push_back(absl::StrCat("type ", a.type, " -> ", b.type));
      if (a.sharding != b.sharding) what.push_back(absl::StrCat("sharding ", a.sharding, " -> ", b.sharding));
      if (!what.empty()) {
        row.change = "input";
        row.what = absl::StrJoin(what, "; ");
      }
    } else if (o < 0) {
      row.change = "added";  // no counterpart left (a diff cut short)
    }
    out.rows.push_back(row);
  }
  flush_old_before(n_old);
  for (const AlignedRow& r : out.rows) out.differences += !r.change.empty();
  return out;
}

}  // namespace shardscope::app
