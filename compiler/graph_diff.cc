#include "compiler/graph_diff.h"

#include <xxhash.h>

#include <deque>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "compiler/fingerprint.h"

namespace shardscope::compiler {
namespace {

// Per module: each instruction's own keys and Merkle hash.
struct Side {
  const std::vector<std::unique_ptr<Instruction>>* instrs = nullptr;
  absl::flat_hash_map<const Instruction*, int64_t> index;
  std::vector<int> param_number;  // per instruction: its parameter number, or -1
  std::vector<uint64_t> own_structure, own_full, merkle;
};

uint64_t Mix(const std::vector<uint64_t>& words) { return XXH3_64bits(words.data(), words.size() * sizeof(uint64_t)); }

Side Analyse(const Module& m, const std::vector<std::string>& keys, const std::vector<std::string>& tags) {
  Side s;
  s.instrs = &m.instructions();
  const auto& instrs = m.instructions();
  const size_t n = instrs.size();
  s.index.reserve(n);
  for (size_t k = 0; k < n; ++k) s.index[instrs[k].get()] = static_cast<int64_t>(k);
  s.param_number.assign(n, -1);
  for (size_t p = 0; p < m.parameters().size(); ++p) s.param_number[s.index.at(m.parameters()[p])] = static_cast<int>(p);
  s.own_structure.resize(n);
  s.own_full.resize(n);
  s.merkle.resize(n);
  absl::flat_hash_map<std::string, int> seen;  // parameter key -> occurrences so far
  for (size_t k = 0; k < n; ++k) {
    const Instruction& i = *instrs[k];
    if (s.param_number[k] >= 0) {
      // An input is known by its key (and which occurrence of it), never by
      // its shape, dtype or layout: those are input differences.
      const int p = s.param_number[k];
      const std::string key = p < static_cast<int>(keys.size()) ? keys[p] : i.name;
      const int occurrence = seen[key]++;
      const uint64_t h = XXH3_64bits_withSeed(key.data(), key.size(), 0x9a7a + occurrence);
      s.own_structure[k] = s.own_full[k] = s.merkle[k] = h;
      continue;
    }
    s.own_structure[k] = OwnStructureKey(i);
    s.own_full[k] = OwnFullKey(i);
    if (k < tags.size() && !tags[k].empty()) {  // a tagged op never pairs with an untagged one
      const uint64_t t = XXH3_64bits(tags[k].data(), tags[k].size());
      s.own_structure[k] = Mix({s.own_structure[k], t});
      s.own_full[k] = Mix({s.own_full[k], t});
    }
    std::vector<uint64_t> w = {s.own_full[k]};
    for (const Instruction* o : i.operands) w.push_back(s.merkle[s.index.at(o)]);
    s.merkle[k] = Mix(w);
  }
  return s;
}

std::string LocKey(const Instruction& i) { return absl::StrCat(i.loc.file, ":", i.loc.line); }

}  // namespace

const char* OpChangeKindName(OpChange::Kind k) {
  switch (k) {
    case OpChange::Kind::kAdded: return "added";
    case OpChange::Kind::kRemoved: return "removed";
    case OpChange::Kind::kChanged: return "changed";
  }
  return "changed";
}

int64_t GraphDiff::Count(OpChange::Kind k) const {
  int64_t n = 0;
  for (const auto& c : changes) n += c.kind == k;
  return n;
}

namespace {
// One alignment. `line_first`: equal subgraphs pair only when the same line
// made them, before ops pair by line alone; else equal subgraphs pair
// wherever they were made, first.
GraphDiff Align(const Module& old_module, const Module& new_module, const Side& a, const Side& b, bool line_first) {
  const auto& A = old_module.instructions();
  const auto& B = new_module.instructions();
  GraphDiff d;
  d.old_to_new.assign(A.size(), -1);
  d.new_to_old.assign(B.size(), -1);
  const auto pair = [&](int64_t o, int64_t n) {
    d.old_to_new[o] = n;
    d.new_to_old[n] = o;
  };

  // 1. Equal subgraphs (equal Merkle hashes) made by the same line, the k-th
  // old with the k-th new; inputs by their key alone. Within a run the code
  // does not change, so the line that made an op says which op it is: an op
  // inserted before another of the same kind has its content but not its line.
  const auto pair_equal = [&](bool same_line) {
    absl::flat_hash_map<std::pair<uint64_t, std::string>, std::deque<int64_t>> by_merkle;
    const auto key = [&](const Instruction& i, uint64_t m, bool param) {
      return std::pair{m, same_line && !param ? LocKey(i) : std::string()};
    };
    for (size_t o = 0; o < A.size(); ++o)
      if (d.old_to_new[o] < 0) by_merkle[key(*A[o], a.merkle[o], a.param_number[o] >= 0)].push_back(static_cast<int64_t>(o));
    for (size_t n = 0; n < B.size(); ++n) {
      if (d.new_to_old[n] >= 0) continue;
      auto it = by_merkle.find(key(*B[n], b.merkle[n], b.param_number[n] >= 0));
      if (it == by_merkle.end()) continue;
      while (!it->second.empty() && d.old_to_new[it->second.front()] >= 0) it->second.pop_front();
      if (it->second.empty()) continue;
      pair(it->second.front(), static_cast<int64_t>(n));
      it->second.pop_front();
    }
  };
  pair_equal(/*same_line=*/line_first);

  // Whether old op `o` stands for new op `n`: paired, or an equal subgraph.
  const auto corresponds = [&](const Instruction* o, const Instruction* n) {
    const int64_t oi = a.index.at(o), ni = b.index.at(n);
    return d.new_to_old[ni] == oi || a.merkle[oi] == b.merkle[ni];
  };
  const auto operands_corresponding = [&](int64_t o, int64_t n) {
    int count = 0;
    const auto& x = A[o]->operands;
    const auto& y = B[n]->operands;
    for (size_t p = 0; p < x.size() && p < y.size(); ++p) count += corresponds(x[p], y[p]);
    return count;
  };

  // 2. Ops left over, in the new graph's order (operands first, so pairs made
  // here let their users pair too): the same op at the same line (its
  // constant, constraint or attributes may differ), else the same op reading
  // corresponding operands (moved to another line).
  using LineKey = std::tuple<int64_t, std::string>;  // opcode, file:line
  absl::flat_hash_map<uint64_t, std::vector<int64_t>> by_structure;
  std::map<LineKey, std::vector<int64_t>> by_line;
  for (size_t o = 0; o < A.size(); ++o) {
    if (d.old_to_new[o] >= 0 || a.param_number[o] >= 0) continue;
    by_structure[a.own_structure[o]].push_back(static_cast<int64_t>(o));
    by_line[{static_cast<int64_t>(A[o]->op), LocKey(*A[o])}].push_back(static_cast<int64_t>(o));
  }
  // Same line first, over the whole graph: an op inserted before one of the
  // same kind must not take its place.
  for (size_t n = 0; n < B.size(); ++n) {
    if (d.new_to_old[n] >= 0 || b.param_number[n] >= 0) continue;
    const Instruction& i = *B[n];
    if (!i.loc.known()) continue;
    auto it = by_line.find({static_cast<int64_t>(i.op), LocKey(i)});
    if (it == by_line.end()) continue;
    int64_t best = -1;
    int best_score = -1;
    for (int64_t o : it->second) {
      if (d.old_to_new[o] >= 0 || A[o]->operands.size() != i.operands.size()) continue;
      // The same structure first, then most operands corresponding.
      const int score = (a.own_structure[o] == b.own_structure[n] ? 1000 : 0) + operands_corresponding(o, n);
      if (score > best_score) best = o, best_score = score;
    }
    if (best >= 0) pair(best, static_cast<int64_t>(n));
  }
  // Equal subgraphs made by other lines (code that moved), then the same op
  // reading corresponding operands.
  if (line_first) pair_equal(/*same_line=*/false);  // else done first, above
  for (size_t n = 0; n < B.size(); ++n) {
    if (d.new_to_old[n] >= 0 || b.param_number[n] >= 0 || B[n]->operands.empty()) continue;
    auto it = by_structure.find(b.own_structure[n]);
    if (it == by_structure.end()) continue;
    for (int64_t o : it->second) {
      if (d.old_to_new[o] >= 0) continue;
      if (operands_corresponding(o, n) == static_cast<int>(B[n]->operands.size())) {
        pair(o, static_cast<int64_t>(n));
        break;
      }
    }
  }

  // Another op in place of one: the only op left at a line on each side (of
  // one arity), reading the same values (exp(x) where tanh(x) was).
  {
    std::map<LineKey, std::vector<int64_t>> olds, news;  // (arity, line) -> ops left
    for (size_t o = 0; o < A.size(); ++o)
      if (d.old_to_new[o] < 0 && a.param_number[o] < 0 && A[o]->loc.known())
        olds[{static_cast<int64_t>(A[o]->operands.size()), LocKey(*A[o])}].push_back(static_cast<int64_t>(o));
    for (size_t n = 0; n < B.size(); ++n)
      if (d.new_to_old[n] < 0 && b.param_number[n] < 0 && B[n]->loc.known())
        news[{static_cast<int64_t>(B[n]->operands.size()), LocKey(*B[n])}].push_back(static_cast<int64_t>(n));
    for (const auto& [key, ns] : news) {
      auto it = olds.find(key);
      if (ns.size() != 1 || it == olds.end() || it->second.size() != 1) continue;
      const int64_t o = it->second.front(), n = ns.front();
      if (!B[n]->operands.empty() && operands_corresponding(o, n) == static_cast<int>(B[n]->operands.size()))
        pair(o, n);
    }
  }

  // 3. What is left to report.
  for (size_t n = 0; n < B.size(); ++n) {
    const int64_t o = d.new_to_old[n];
    if (o < 0) {
      d.changes.push_back({OpChange::Kind::kAdded, -1, static_cast<int64_t>(n), ""});
      continue;
    }
    if (b.param_number[n] >= 0) {
      const Instruction& p = *A[o];
      const Instruction& q = *B[n];
      InputChange c{a.param_number[o], b.param_number[n]};
      c.shape = p.shape.dims != q.shape.dims;
      c.dtype = p.shape.dtype != q.shape.dtype;
      c.sharding = p.sharding.value_or(Sharding()) != q.sharding.value_or(Sharding());
      if (c.shape || c.dtype || c.sharding) d.inputs.push_back(c);
      continue;
    }
    if (a.merkle[o] == b.merkle[n]) continue;
    const Instruction& x = *A[o];
    const Instruction& y = *B[n];
    std::string what;
    if (x.op != y.op) {
      what = "opcode";
    } else if (a.own_structure[o] != b.own_structure[n]) {
      what = "attributes";
    } else if (a.own_full[o] != b.own_full[n]) {
      what = x.sharding.value_or(Sharding()) != y.sharding.value_or(Sharding()) || x.sharding.has_value() != y.sharding.has_value()
                 ? "sharding constraint"
                 : "constant";
    } else {
      // Operands that are neither the counterparts of the old ones nor
      // explained by an op added or removed there: the op was rewired.
      for (size_t p = 0; p < x.operands.size() && p < y.operands.size(); ++p) {
        const int64_t xo = a.index.at(x.operands[p]), yo = b.index.at(y.operands[p]);
        if (corresponds(x.operands[p], y.operands[p])) continue;
        if (d.new_to_old[yo] < 0 || d.old_to_new[xo] < 0) continue;
        what = "operands";
        break;
      }
    }
    if (!what.empty()) d.changes.push_back({OpChange::Kind::kChanged, o, static_cast<int64_t>(n), what});
  }
  for (size_t o = 0; o < A.size(); ++o)
    if (d.old_to_new[o] < 0) d.changes.push_back({OpChange::Kind::kRemoved, static_cast<int64_t>(o), -1, ""});
  return d;
}
}  // namespace

GraphDiff DiffGraphs(const Module& old_module, const Module& new_module, const std::vector<std::string>& old_keys,
                     const std::vector<std::string>& new_keys, const std::vector<std::string>& old_tags,
                     const std::vector<std::string>& new_tags) {
  const Side a = Analyse(old_module, old_keys, old_tags), b = Analyse(new_module, new_keys, new_tags);
  // Within a run the same line makes the same op, and an op inserted before
  // another of its kind has that one's content, not its line: line first. But
  // code that moved (another call site's copy of a step) keeps content and
  // changes lines: then aligning by content first finds far fewer differences
  // (less than half), and wins. Otherwise line first: a moved op is one op
  // rewired, not an op removed and one added that happen to count less.
  GraphDiff by_line = Align(old_module, new_module, a, b, /*line_first=*/true);
  if (by_line.empty()) return by_line;
  GraphDiff by_content = Align(old_module, new_module, a, b, /*line_first=*/false);
  return 2 * by_content.distance() < by_line.distance() ? by_content : by_line;
}

namespace {

std::string Ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) absl::StrAppend(&s, k ? "," : "", v[k]);
  return s + "]";
}

// An op's attributes the structure key leaves out, as its diff shows them.
std::string AttributeText(const Instruction& i) {
  switch (i.op) {
    case Opcode::kSlice: {
      std::string s = "[";
      for (size_t k = 0; k < i.slice.start.size(); ++k)
        absl::StrAppend(&s, k ? ", " : "", i.slice.start[k], ":",
                        k < i.slice.limit.size() ? i.slice.limit[k] : 0, ":",
                        k < i.slice.stride.size() ? i.slice.stride[k] : 1);
      return s + "]";
    }
    case Opcode::kPad:
      return absl::StrCat("low ", Ints(i.pad.low), " high ", Ints(i.pad.high), " interior ",
                          Ints(i.pad.interior));
    case Opcode::kGather:
      return absl::StrCat("slice sizes ", Ints(i.gather.slice_sizes), ", result ", i.shape.ToString());
    case Opcode::kDynamicSlice:
      return absl::StrCat("slice sizes ", Ints(i.dims));
    case Opcode::kReduceWindow:
      return absl::StrCat("window ", Ints(i.window.dimensions), " strides ", Ints(i.window.strides));
    default:
      return i.shape.ToString();  // a reshape's target, any op's result
  }
}

}  // namespace

bool SameOpsInOrder(const Module& old_module, const Module& new_module) {
  const auto& a = old_module.instructions();
  const auto& b = new_module.instructions();
  if (a.size() != b.size()) return false;
  absl::flat_hash_map<int64_t, int64_t> pos_a, pos_b;
  for (size_t k = 0; k < a.size(); ++k) {
    pos_a[a[k]->id] = static_cast<int64_t>(k);
    pos_b[b[k]->id] = static_cast<int64_t>(k);
  }
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k]->op != b[k]->op || a[k]->operands.size() != b[k]->operands.size()) return false;
    for (size_t o = 0; o < a[k]->operands.size(); ++o)
      if (pos_a.at(a[k]->operands[o]->id) != pos_b.at(b[k]->operands[o]->id)) return false;
  }
  return true;
}

std::vector<AttributeChange> AttributeChanges(const Module& old_module, const Module& new_module) {
  std::vector<AttributeChange> out;
  if (!SameOpsInOrder(old_module, new_module)) return out;  // another structure
  const auto& a = old_module.instructions();
  const auto& b = new_module.instructions();
  // Ops whose window or target the program chose (a slice, a reshape) come
  // before ops whose result shape only follows them (a broadcast of a mean's
  // divisor to the narrower slice), whatever the order they were lowered in.
  const auto chosen = [](Opcode op) {
    return op == Opcode::kSlice || op == Opcode::kReshape || op == Opcode::kPad || op == Opcode::kGather ||
           op == Opcode::kDynamicSlice || op == Opcode::kReduceWindow;
  };
  for (size_t k = 0; k < a.size(); ++k) {
    const Instruction& x = *a[k];
    if (x.op == Opcode::kConstant || x.op == Opcode::kParameter) continue;
    std::string old_text = AttributeText(x), new_text = AttributeText(*b[k]);
    if (old_text == new_text) continue;
    out.push_back({static_cast<int64_t>(k), std::move(old_text), std::move(new_text), chosen(x.op)});
  }
  return out;
}

std::optional<AttributeChange> FirstAttributeChange(const Module& old_module, const Module& new_module) {
  std::vector<AttributeChange> all = AttributeChanges(old_module, new_module);
  if (all.empty()) return std::nullopt;
  for (const AttributeChange& c : all)
    if (c.chosen) return c;
  return all.front();
}

}  // namespace shardscope::compiler
