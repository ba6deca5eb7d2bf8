// The StableHLO text parser. A hand-written recursive-descent reader over the
// forms text.cc prints: a cursor with one-token lookahead, a small generic
// attribute-value reader (ints, lists, array<i64: ...>, dense<...>, strings,
// #stablehlo.gather<...>) for the generic `"op"(...) {...}` form, and one
// branch per pretty op form. Regions (reduce_window, scatter, all_reduce,
// reduce_scatter) are read loosely: the op applied inside names the ReduceKind;
// a body that returns its second argument is a replacing scatter.
//
// Instruction ids: a printed module names values %<id>, parameters %arg<k>.
// When the ids leave exactly the right number of gaps, the parameters go into
// those gaps, so Print(Parse(Print(m))) == Print(m) even for modules whose
// parameters were created between other ops; otherwise parameters come first.
#include "compiler/parser.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace shardscope::compiler {
namespace {

// A generic attribute value; which members are set depends on its form.
struct Attr {
  std::string str;                          // "..." or a bare word (true, DEFAULT)
  std::vector<int64_t> ints;                // 7, [1, 2], array<i64: 1, 2>, dense<...> flattened
  std::vector<std::vector<int64_t>> rows;   // [[0, 1], [2, 3]] (nested lists)
  std::map<std::string, Attr> fields;       // #stablehlo.gather<k = v, ...>
};
using AttrDict = std::map<std::string, Attr>;

struct Parsed {
  std::unique_ptr<Instruction> instr;
  std::string name;   // without the %
  int64_t want = -1;  // the id its name gives (Build keeps it if it can), or -1
};

class Parser {
 public:
  explicit Parser(absl::string_view text) : t_(text) {}

  absl::StatusOr<std::unique_ptr<Module>> Run() {
    if (auto s = ParseTop(); !s.ok()) return s;
    return Build();
  }

 private:
  // ------------------------------------------------------------ lexing
  absl::Status Error(const std::string& msg, size_t at) const {
    int line = 1, col = 1;
    for (size_t k = 0; k < at && k < t_.size(); ++k) {
      if (t_[k] == '\n') { ++line; col = 1; } else { ++col; }
    }
    return absl::InvalidArgumentError(absl::StrCat("parse error at line ", line, ", column ", col, ": ", msg));
  }
  absl::Status Error(const std::string& msg) { SkipWs(); return Error(msg, p_); }

  void SkipWs() {
    while (p_ < t_.size()) {
      if (std::isspace(static_cast<unsigned char>(t_[p_]))) { ++p_; continue; }
      if (t_.substr(p_, 2) == "//") { while (p_ < t_.size() && t_[p_] != '\n') ++p_; continue; }
      break;
    }
  }
  bool Peek(absl::string_view tok) { SkipWs(); return t_.substr(p_, tok.size()) == tok; }
  bool Consume(absl::string_view tok) {
    if (!Peek(tok)) return false;
    p_ += tok.size();
    return true;
  }
  absl::Status Expect(absl::string_view tok) {
    if (Consume(tok)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", tok, "'", Near()));
  }
  std::string Near() {
    SkipWs();
    size_t e = p_;
    while (e < t_.size() && e < p_ + 20 && t_[e] != '\n') ++e;
    return p_ >= t_.size() ? " at the end of the text" : absl::StrCat(" before '", t_.substr(p_, e - p_), "'");
  }
  static bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$'; }

  absl::StatusOr<std::string> Word() {
    SkipWs();
    size_t b = p_;
    while (p_ < t_.size() && IdentChar(t_[p_])) ++p_;
    if (b == p_) return Error(absl::StrCat("expected a name", Near()));
    return std::string(t_.substr(b, p_ - b));
  }
  absl::StatusOr<std::string> ValueName() {
    SkipWs();
    if (!Consume("%")) return Error(absl::StrCat("expected a value name like %0", Near()));
    size_t b = p_;
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_')) ++p_;
    if (b == p_) return Error("empty value name");
    // %7#1: result 1 of a multi-result op (a while).
    if (p_ + 1 < t_.size() && t_[p_] == '#' && std::isdigit(static_cast<unsigned char>(t_[p_ + 1]))) {
      ++p_;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
    }
    return std::string(t_.substr(b, p_ - b));
  }
  absl::StatusOr<std::string> String() {
    if (!Consume("\"")) return Error(absl::StrCat("expected a string", Near()));
    std::string out;
    const auto hex = [&](size_t at) { return at < t_.size() && std::isxdigit(static_cast<unsigned char>(t_[at])); };
    while (p_ < t_.size() && t_[p_] != '"') {
      if (t_[p_] == '\\' && hex(p_ + 1) && hex(p_ + 2)) {  // \XX: one byte, as MLIR escapes
        out += static_cast<char>(std::stoi(std::string(t_.substr(p_ + 1, 2)), nullptr, 16));
        p_ += 3;
        continue;
      }
      if (t_[p_] == '\\' && p_ + 1 < t_.size()) {
        ++p_;
        out += t_[p_] == 'n' ? '\n' : t_[p_] == 't' ? '\t' : t_[p_];
        ++p_;
        continue;
      }
      out += t_[p_++];
    }
    if (p_ >= t_.size()) return Error("unterminated string", p_);
    ++p_;
    return out;
  }
  absl::StatusOr<int64_t> Int() {
    SkipWs();
    size_t b = p_;
    if (p_ < t_.size() && (t_[p_] == '-' || t_[p_] == '+')) ++p_;
    while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
    int64_t v = 0;
    if (!absl::SimpleAtoi(t_.substr(b, p_ - b), &v)) {
      p_ = b;
      return Error(absl::StrCat("expected an integer", Near()));
    }
    return v;
  }
  // A literal element: number, true/false, nan, inf (with sign).
  absl::StatusOr<std::string> Number() {
    SkipWs();
    size_t b = p_;
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '-' ||
                              t_[p_] == '+' || t_[p_] == '.'))
      ++p_;
    if (b == p_) return Error(absl::StrCat("expected a number", Near()));
    return std::string(t_.substr(b, p_ - b));
  }
  absl::StatusOr<std::vector<int64_t>> IntList() {
    std::vector<int64_t> v;
    if (auto s = Expect("["); !s.ok()) return s;
    if (Consume("]")) return v;
    do {
      auto x = Int();
      if (!x.ok()) return x.status();
      v.push_back(*x);
    } while (Consume(","));
    if (auto s = Expect("]"); !s.ok()) return s;
    return v;
  }
  absl::StatusOr<Shape> Type() {
    if (auto s = Expect("tensor<"); !s.ok()) return s;
    Shape sh;
    while (true) {
      SkipWs();
      if (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) {
        auto d = Int();
        if (!d.ok()) return d.status();
        sh.dims.push_back(*d);
        if (auto s = Expect("x"); !s.ok()) return s;
        continue;
      }
      size_t at = p_;
      auto w = Word();
      if (!w.ok()) return w.status();
      auto t = ParseDType(*w);
      if (!t.ok()) return Error(std::string(t.status().message()), at);
      sh.dtype = *t;
      break;
    }
    if (auto s = Expect(">"); !s.ok()) return s;
    return sh;
  }

  // ------------------------------------------------------------ attributes
  // Nested [..] lists of numbers: flattened into `a.ints`, rows kept when 2-D.
  absl::Status NestedInts(Attr* a, int depth) {
    if (Consume("[")) {
      if (Consume("]")) return absl::OkStatus();
      do {
        if (auto s = NestedInts(a, depth + 1); !s.ok()) return s;
      } while (Consume(","));
      return Expect("]");
    }
    auto n = Number();
    if (!n.ok()) return n.status();
    int64_t v = 0;
    if (*n == "true") v = 1;
    else if (*n == "false") v = 0;
    else if (!absl::SimpleAtoi(*n, &v)) return Error(absl::StrCat("expected an integer, got '", *n, "'"));
    a->ints.push_back(v);
    return absl::OkStatus();
  }
  // Reads a list like [[0, 1], [2, 3]] into rows (and flat ints).
  absl::Status Rows(Attr* a) {
    size_t save = p_;
    if (!Consume("[")) return Error("expected '['");
    SkipWs();
    if (!Peek("[")) {  // flat
      p_ = save;
      return NestedInts(a, 0);
    }
    do {
      Attr row;
      if (auto s = NestedInts(&row, 0); !s.ok()) return s;
      a->rows.push_back(row.ints);
      a->ints.insert(a->ints.end(), row.ints.begin(), row.ints.end());
    } while (Consume(","));
    return Expect("]");
  }
  absl::StatusOr<Attr> Value() {
    Attr a;
    SkipWs();
    if (Peek("\"")) {
      auto s = String();
      if (!s.ok()) return s.status();
      a.str = *s;
      return a;
    }
    if (Consume("array<")) {
      auto w = Word();
      if (!w.ok()) return w.status();
      if (Consume(":")) {
        do {
          auto x = Int();
          if (!x.ok()) return x.status();
          a.ints.push_back(*x);
        } while (Consume(","));
      }
      if (auto s = Expect(">"); !s.ok()) return s;
      return a;
    }
    if (Consume("dense<")) {
      if (Peek("[")) {
        if (auto s = Rows(&a); !s.ok()) return s;
      } else {
        if (auto s = NestedInts(&a, 0); !s.ok()) return s;
      }
      if (auto s = Expect(">"); !s.ok()) return s;
      if (Consume(":")) {
        if (auto t = Type(); !t.ok()) return t.status();
      }
      return a;
    }
    if (Consume("#")) {  // #stablehlo.gather<k = v, ...>
      auto w = Word();
      if (!w.ok()) return w.status();
      a.str = *w;
      if (auto s = Expect("<"); !s.ok()) return s;
      if (!Consume(">")) {
        do {
          auto k = Word();
          if (!k.ok()) return k.status();
          if (auto s = Expect("="); !s.ok()) return s;
          auto v = Value();
          if (!v.ok()) return v.status();
          a.fields[*k] = *v;
        } while (Consume(","));
        if (auto s = Expect(">"); !s.ok()) return s;
      }
      return a;
    }
    if (Peek("[")) {
      if (auto s = Rows(&a); !s.ok()) return s;
      return a;
    }
    SkipWs();
    if (p_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[p_])) || t_[p_] == '-')) {
      auto x = Int();
      if (!x.ok()) return x.status();
      a.ints.push_back(*x);
      if (Consume(":")) {  // "1 : i64"
        if (auto w = Word(); !w.ok()) return w.status();
      }
      return a;
    }
    auto w = Word();
    if (!w.ok()) return w.status();
    a.str = *w;
    if (*w == "true") a.ints = {1};
    if (*w == "false") a.ints = {0};
    return a;
  }
  absl::StatusOr<AttrDict> Dict() {
    AttrDict d;
    if (auto s = Expect("{"); !s.ok()) return s;
    if (Consume("}")) return d;
    do {
      auto k = Word();
      if (!k.ok()) return k.status();
      if (auto s = Expect("="); !s.ok()) return s;
      auto v = Value();
      if (!v.ok()) return v.status();
      d[*k] = *v;
    } while (Consume(","));
    if (auto s = Expect("}"); !s.ok()) return s;
    return d;
  }

  // loc("file":line:col), loc("scope"("file":line:col)), loc(unknown).
  absl::Status Loc(Instruction* i) {
    if (!Consume("loc(")) return absl::OkStatus();
    if (Consume("unknown")) return Expect(")");
    auto first = String();
    if (!first.ok()) return first.status();
    if (Consume("(")) {
      i->scope = *first;
      auto file = String();
      if (!file.ok()) return file.status();
      first = file;
      if (auto s = LineCol(i); !s.ok()) return s;
      if (auto s = Expect(")"); !s.ok()) return s;
    } else if (auto s = LineCol(i); !s.ok()) {
      return s;
    }
    i->loc.file = *first;
    return Expect(")");
  }
  absl::Status LineCol(Instruction* i) {
    if (auto s = Expect(":"); !s.ok()) return s;
    auto line = Int();
    if (!line.ok()) return line.status();
    i->loc.line = static_cast<int>(*line);
    if (Consume(":")) {
      if (auto c = Int(); !c.ok()) return c.status();
    }
    return absl::OkStatus();
  }

  absl::Status ShardingFrom(const AttrDict& d, std::optional<Sharding>* out, size_t at) {
    auto it = d.find("mhlo.sharding");
    if (it == d.end()) return absl::OkStatus();
    auto s = Sharding::Parse(it->second.str);
    if (!s.ok()) return Error(absl::StrCat("bad mhlo.sharding: ", s.status().message()), at);
    *out = *s;
    return absl::OkStatus();
  }

  // ------------------------------------------------------------ structure
  absl::Status ParseTop() {
    if (auto s = Expect("module"); !s.ok()) return s;
    if (Consume("@")) {
      auto n = Word();
      if (!n.ok()) return n.status();
      module_name_ = *n;
    }
    if (Consume("attributes")) {
      auto d = Dict();
      if (!d.ok()) return d.status();
      auto it = d->find("mhlo.num_partitions");
      if (it != d->end() && !it->second.ints.empty()) num_partitions_ = static_cast<int>(it->second.ints[0]);
    }
    if (auto s = Expect("{"); !s.ok()) return s;
    if (auto s = Expect("func.func"); !s.ok()) return s;
    if (auto s = Expect("@"); !s.ok()) return s;
    if (auto n = Word(); !n.ok()) return n.status();
    if (auto s = ParseSignature(); !s.ok()) return s;
    if (auto s = Expect("{"); !s.ok()) return s;
    while (true) {
      SkipWs();
      if (Consume("return") || Consume("func.return") || Consume("stablehlo.return")) break;
      if (p_ >= t_.size()) return Error("missing return");
      if (auto s = ParseInstruction(); !s.ok()) return s;
    }
    if (auto s = ParseReturn(); !s.ok()) return s;
    if (auto s = Expect("}"); !s.ok()) return s;
    if (auto s = Expect("}"); !s.ok()) return s;
    SkipWs();
    if (p_ != t_.size()) return Error("unexpected text after the module");
    return absl::OkStatus();
  }

  // After `return`: `%a, %b : T, T` (or nothing) into outputs_.
  absl::Status ParseReturn() {
    if (!Peek("%")) return absl::OkStatus();
    do {
      size_t at = (SkipWs(), p_);
      auto n = ValueName();
      if (!n.ok()) return n.status();
      auto v = Lookup(*n, at);
      if (!v.ok()) return v.status();
      outputs_.push_back(*v);
    } while (Consume(","));
    if (auto s = Expect(":"); !s.ok()) return s;
    for (size_t k = 0; k < outputs_.size(); ++k) {
      if (k && !Consume(",")) return Error("expected ','");
      size_t at = (SkipWs(), p_);
      auto t = Type();
      if (!t.ok()) return t.status();
      if (*t != outputs_[k]->shape)
        return Error(absl::StrCat("return type ", t->ToMlir(), " differs from the value's ",
                                  outputs_[k]->shape.ToMlir()), at);
    }
    return absl::OkStatus();
  }

  // The value named %name in the region being read. Our while regions are
  // closed: a value of an enclosing region must come in as a carried value.
  absl::StatusOr<Instruction*> Lookup(const std::string& name, size_t at) {
    auto it = values_.find(name);
    if (it != values_.end() && it->second->op == Opcode::kWhile)
      return Error(absl::StrCat("%", name, " is a while with ", it->second->operands.size(),
                                " results: read one as %", name, "#k"), at);
    if (it != values_.end()) return it->second;
    for (const auto& outer : outer_)
      if (outer.count(name))
        return Error(absl::StrCat("%", name, " is defined outside this while region; regions here see only ",
                                  "their carried values, so pass it in as one"), at);
    return Error(absl::StrCat("use of undefined value %", name), at);
  }

  absl::Status ParseSignature() {
    if (auto s = Expect("("); !s.ok()) return s;
    if (!Consume(")")) {
      do {
        size_t at = (SkipWs(), p_);
        auto n = ValueName();
        if (!n.ok()) return n.status();
        if (values_.count(*n)) return Error(absl::StrCat("%", *n, " is defined twice"), at);
        if (auto s = Expect(":"); !s.ok()) return s;
        auto t = Type();
        if (!t.ok()) return t.status();
        auto p = std::make_unique<Instruction>();
        p->op = Opcode::kParameter;
        p->shape = *t;
        if (Peek("{")) {
          size_t dat = p_;
          auto d = Dict();
          if (!d.ok()) return d.status();
          if (auto s = ShardingFrom(*d, &p->sharding, dat); !s.ok()) return s;
          auto it = d->find("shardscope.name");
          if (it != d->end()) p->name = it->second.str;
        }
        if (auto s = Loc(p.get()); !s.ok()) return s;
        values_[*n] = p.get();
        params_.push_back({std::move(p), *n});
      } while (Consume(","));
      if (auto s = Expect(")"); !s.ok()) return s;
    }
    if (auto s = Expect("->"); !s.ok()) return s;
    // Result attributes only inside parentheses: after a bare result type
    // the '{' opens the function body.
    auto result = [&](bool attrs) -> absl::Status {
      auto t = Type();
      if (!t.ok()) return t.status();
      std::optional<Sharding> sh;
      if (attrs && Peek("{")) {
        size_t at = p_;
        auto d = Dict();
        if (!d.ok()) return d.status();
        if (auto s = ShardingFrom(*d, &sh, at); !s.ok()) return s;
      }
      if (sh && out_shardings_.size() == result_count_) out_shardings_.push_back(*sh);
      ++result_count_;
      return absl::OkStatus();
    };
    if (Consume("(")) {
      if (!Consume(")")) {
        do {
          if (auto s = result(true); !s.ok()) return s;
        } while (Consume(","));
        if (auto s = Expect(")"); !s.ok()) return s;
      }
    } else if (auto s = result(false); !s.ok()) {
      return s;
    }
    return absl::OkStatus();
  }

  // `%a, %b, ...` (at least one). A comma followed by something other than a
  // value introduces an attribute and is left for the caller.
  absl::StatusOr<std::vector<Instruction*>> Operands() {
    std::vector<Instruction*> ops;
    while (true) {
      size_t at = (SkipWs(), p_);
      auto n = ValueName();
      if (!n.ok()) return n.status();
      auto v = Lookup(*n, at);
      if (!v.ok()) return v.status();
      ops.push_back(*v);
      size_t save = p_;
      if (Consume(",") && Peek("%")) continue;
      p_ = save;
      return ops;
    }
  }

  // ": (T1, T2) -> R" or ": T" (every operand and the result T; compare: i1).
  absl::Status Types(Instruction* i) {
    if (auto s = Expect(":"); !s.ok()) return s;
    size_t at = (SkipWs(), p_);
    std::vector<Shape> in;
    if (Consume("(")) {
      if (!Consume(")")) {
        do {
          auto t = Type();
          if (!t.ok()) return t.status();
          in.push_back(*t);
        } while (Consume(","));
        if (auto s = Expect(")"); !s.ok()) return s;
      }
      if (auto s = Expect("->"); !s.ok()) return s;
      auto r = Type();
      if (!r.ok()) return r.status();
      i->shape = *r;
    } else {
      auto t = Type();
      if (!t.ok()) return t.status();
      in.assign(i->operands.size(), *t);
      i->shape = i->op == Opcode::kCompare ? Shape(DType::kI1, t->dims) : *t;
    }
    if (in.size() != i->operands.size())
      return Error(absl::StrCat("the type lists ", in.size(), " operands; the op has ", i->operands.size()), at);
    for (size_t k = 0; k < in.size(); ++k)
      if (in[k] != i->operands[k]->shape)
        return Error(absl::StrCat("operand ", k, " is ", i->operands[k]->shape.ToMlir(), " but the type says ",
                                  in[k].ToMlir()), at);
    return absl::OkStatus();
  }

  // The op in a region body: "stablehlo.add" -> kSum, or a return of the
  // second block argument -> replace.
  absl::Status Region(Instruction* i, bool* replace) {
    size_t at = (SkipWs(), p_);
    if (auto s = Expect("({"); !s.ok()) return s;
    int depth = 1;
    size_t b = p_;
    while (p_ < t_.size() && depth > 0) {
      if (t_[p_] == '{') ++depth;
      if (t_[p_] == '}') --depth;
      ++p_;
    }
    if (depth) return Error("unterminated region", at);
    std::string body(t_.substr(b, p_ - 1 - b));
    if (auto s = Expect(")"); !s.ok()) return s;
    static const std::pair<const char*, ReduceKind> kinds[] = {
        {"stablehlo.add", ReduceKind::kSum}, {"stablehlo.maximum", ReduceKind::kMax},
        {"stablehlo.minimum", ReduceKind::kMin}, {"stablehlo.multiply", ReduceKind::kProd}};
    for (const auto& [name, k] : kinds) {
      if (absl::StrContains(body, absl::StrCat("= ", name, " "))) {
        i->reduce = k;
        *replace = false;
        return absl::OkStatus();
      }
    }
    // No combining op: the body must return one of its arguments (the update).
    size_t args = body.find("^bb0(");
    size_t ret = body.find("stablehlo.return");
    if (args != std::string::npos && ret != std::string::npos) {
      size_t comma = body.find(',', args);
      size_t pct = body.find('%', comma == std::string::npos ? args : comma);
      size_t colon = body.find(':', pct);
      std::string second = pct == std::string::npos ? "" : body.substr(pct, colon - pct);
      std::string returned = body.substr(ret + 16);
      returned = std::string(absl::StripAsciiWhitespace(returned.substr(0, returned.find(':'))));
      if (!second.empty() && returned == second) {
        *replace = true;
        return absl::OkStatus();
      }
    }
    return Error("region body must apply stablehlo.add/maximum/minimum/multiply or return its second argument", at);
  }

  static absl::Status Need(const AttrDict& d, const char* key) {
    if (d.count(key)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("missing attribute ", key));
  }
  // Appends the single integer `key` holds to `out`.
  static absl::Status OneInt(const AttrDict& d, const char* key, std::vector<int64_t>* out) {
    auto it = d.find(key);
    if (it == d.end()) return absl::InvalidArgumentError(absl::StrCat("missing attribute ", key));
    if (it->second.ints.size() != 1)
      return absl::InvalidArgumentError(absl::StrCat(key, " must be one integer"));
    out->push_back(it->second.ints[0]);
    return absl::OkStatus();
  }
  static std::vector<std::pair<int64_t, int64_t>> PairsOf(const Attr& a) {
    std::vector<std::pair<int64_t, int64_t>> v;
    for (size_t k = 0; k + 1 < a.ints.size(); k += 2) v.push_back({a.ints[k], a.ints[k + 1]});
    return v;
  }
  static std::vector<int64_t> Field(const Attr& a, const char* key) {
    auto it = a.fields.find(key);
    return it == a.fields.end() ? std::vector<int64_t>{} : it->second.ints;
  }
  static bool Flag(const AttrDict& d, const char* key) {
    auto it = d.find(key);
    return it != d.end() && !it->second.ints.empty() && it->second.ints[0] != 0;
  }

  // `"stablehlo.op"(%a, ...) ({region})? {attrs}? : types`
  absl::Status Generic(Instruction* i, size_t at) {
    auto name = String();
    if (!name.ok()) return name.status();
    if (!LookupOp(*name, &i->op)) return Error(absl::StrCat("unknown op '", *name, "'"), at);
    if (auto s = Expect("("); !s.ok()) return s;
    if (!Consume(")")) {
      auto ops = Operands();
      if (!ops.ok()) return ops.status();
      i->operands = *ops;
      if (auto s = Expect(")"); !s.ok()) return s;
    }
    bool replace = false;
    const bool had_region = Peek("({");
    if (had_region) {
      if (auto s = Region(i, &replace); !s.ok()) return s;
    }
    AttrDict d;
    size_t dat = (SkipWs(), p_);
    if (Peek("{")) {
      auto dd = Dict();
      if (!dd.ok()) return dd.status();
      d = *dd;
    }
    absl::Status missing = absl::OkStatus();
    switch (i->op) {
      case Opcode::kReduceWindow: {
        missing = Need(d, "window_dimensions");
        if (!missing.ok()) break;
        WindowDims& w = i->window;
        w.dimensions = d["window_dimensions"].ints;
        if (d.count("window_strides")) w.strides = d["window_strides"].ints;
        if (d.count("base_dilations")) w.base_dilations = d["base_dilations"].ints;
        if (d.count("window_dilations")) w.window_dilations = d["window_dilations"].ints;
        if (d.count("padding")) w.padding = PairsOf(d["padding"]);
        break;
      }
      case Opcode::kGather: {
        missing = Need(d, "dimension_numbers");
        if (missing.ok()) missing = Need(d, "slice_sizes");
        if (!missing.ok()) break;
        const Attr& dn = d["dimension_numbers"];
        GatherDims& g = i->gather;
        g.offset_dims = Field(dn, "offset_dims");
        g.collapsed_slice_dims = Field(dn, "collapsed_slice_dims");
        g.start_index_map = Field(dn, "start_index_map");
        auto iv = Field(dn, "index_vector_dim");
        g.index_vector_dim = iv.empty() ? 0 : iv[0];
        g.slice_sizes = d["slice_sizes"].ints;
        g.indices_are_sorted = Flag(d, "indices_are_sorted");
        break;
      }
      case Opcode::kScatter: {
        missing = Need(d, "scatter_dimension_numbers");
        if (!missing.ok()) break;
        const Attr& dn = d["scatter_dimension_numbers"];
        ScatterDims& s = i->scatter;
        s.update_window_dims = Field(dn, "update_window_dims");
        s.inserted_window_dims = Field(dn, "inserted_window_dims");
        s.scatter_dims_to_operand_dims = Field(dn, "scatter_dims_to_operand_dims");
        auto iv = Field(dn, "index_vector_dim");
        s.index_vector_dim = iv.empty() ? 0 : iv[0];
        s.indices_are_sorted = Flag(d, "indices_are_sorted");
        s.unique_indices = Flag(d, "unique_indices");
        s.replace = replace;
        break;
      }
      case Opcode::kAllReduce:
      case Opcode::kAllGather:
      case Opcode::kReduceScatter:
      case Opcode::kAllToAll:
      case Opcode::kCollectiveBroadcast:
        if (d.count("replica_groups")) i->replica_groups = d["replica_groups"].rows;
        if (i->replica_groups.empty() && d.count("replica_groups") && !d["replica_groups"].ints.empty())
          i->replica_groups = {d["replica_groups"].ints};
        if (i->op == Opcode::kAllGather) missing = OneInt(d, "all_gather_dim", &i->dims);
        if (i->op == Opcode::kReduceScatter) {
          // The body names the reduction; without one the op means nothing.
          if (!had_region || replace)
            missing =
                absl::InvalidArgumentError("needs a region applying stablehlo.add/maximum/minimum/multiply");
          if (missing.ok()) missing = OneInt(d, "scatter_dimension", &i->dims);
        }
        if (i->op == Opcode::kAllToAll) {
          for (const char* key : {"split_dimension", "concat_dimension", "split_count"})
            if (missing.ok()) missing = OneInt(d, key, &i->dims);
        }
        break;
      case Opcode::kCollectivePermute: {
        missing = Need(d, "source_target_pairs");
        if (!missing.ok()) break;
        const Attr& pairs = d["source_target_pairs"];
        // A single pair may come flat (dense<[0, 1]>); rows otherwise.
        std::vector<std::vector<int64_t>> rows = pairs.rows;
        if (rows.empty() && !pairs.ints.empty()) rows = {pairs.ints};
        for (const auto& row : rows) {
          if (row.size() != 2) {
            missing = absl::InvalidArgumentError(absl::StrCat(
                "source_target_pairs rows must be [source, target], got ", row.size(), " values"));
            break;
          }
          i->source_target_pairs.push_back({row[0], row[1]});
        }
        break;
      }
      default:
        break;
    }
    if (!missing.ok()) return Error(absl::StrCat(*name, ": ", missing.message()), dat);
    if (auto s = ShardingFrom(d, &i->sharding, dat); !s.ok()) return s;
    return Types(i);
  }

  static bool LookupOp(const std::string& name, Opcode* op) {
    static const std::map<std::string, Opcode> table = [] {
      std::map<std::string, Opcode> m;
#define SHARDSCOPE_OP_LOOKUP(e, n, arity) m[n] = Opcode::e;
      SHARDSCOPE_OPCODES(SHARDSCOPE_OP_LOOKUP)
#undef SHARDSCOPE_OP_LOOKUP
      return m;
    }();
    auto it = table.find(name);
    if (it == table.end() || it->second == Opcode::kParameter || it->second == Opcode::kGetTupleElement)
      return false;
    *op = it->second;
    return true;
  }

  absl::Status Literal(Instruction* i) {
    if (auto s = Expect("dense<"); !s.ok()) return s;
    std::vector<std::string> vals;
    std::function<absl::Status()> elems = [&]() -> absl::Status {
      if (Consume("[")) {
        if (Consume("]")) return absl::OkStatus();
        do {
          if (auto s = elems(); !s.ok()) return s;
        } while (Consume(","));
        return Expect("]");
      }
      auto n = Number();
      if (!n.ok()) return n.status();
      vals.push_back(*n);
      return absl::OkStatus();
    };
    if (auto s = elems(); !s.ok()) return s;
    if (auto s = Expect(">"); !s.ok()) return s;
    if (auto s = Expect(":"); !s.ok()) return s;
    size_t at = (SkipWs(), p_);
    auto t = Type();
    if (!t.ok()) return t.status();
    i->shape = *t;
    shardscope::Literal lit(*t);
    const int64_t n = t->elements();
    if (static_cast<int64_t>(vals.size()) != n && vals.size() != 1)
      return Error(absl::StrCat("constant has ", vals.size(), " values; ", t->ToMlir(), " needs ", n), at);
    for (int64_t k = 0; k < n; ++k) {
      const std::string& v = vals.size() == 1 ? vals[0] : vals[k];
      std::string lower = absl::AsciiStrToLower(v);
      if (t->dtype == DType::kI64 || t->dtype == DType::kI32) {
        int64_t x = 0;
        if (!absl::SimpleAtoi(v, &x)) return Error(absl::StrCat("'", v, "' is not an integer"), at);
        if (t->dtype == DType::kI64) lit.as<int64_t>()[k] = x;
        else lit.as<int32_t>()[k] = static_cast<int32_t>(x);
        continue;
      }
      if (absl::StartsWith(lower, "0x")) {  // MLIR's hex form: the element's bit pattern
        uint64_t bits = 0;
        if (!absl::SimpleHexAtoi(v.substr(2), &bits)) return Error(absl::StrCat("'", v, "' is not a hex value"), at);
        std::memcpy(lit.as<uint8_t>() + k * DTypeBytes(t->dtype), &bits, static_cast<size_t>(DTypeBytes(t->dtype)));
        continue;
      }
      double x = 0;
      if (lower == "true") x = 1;
      else if (lower == "false") x = 0;
      else if (lower == "nan" || lower == "-nan") x = std::numeric_limits<double>::quiet_NaN();
      else if (lower == "inf" || lower == "+inf") x = std::numeric_limits<double>::infinity();
      else if (lower == "-inf") x = -std::numeric_limits<double>::infinity();
      else if (!absl::SimpleAtod(v, &x)) return Error(absl::StrCat("'", v, "' is not a number"), at);
      lit.SetDouble(k, x);
    }
    i->literal = std::move(lit);
    return absl::OkStatus();
  }

  // "[b, f, 0, 1]" -> positions of the two letters and of each spatial index.
  absl::Status ConvLayout(char x, int64_t* xd, char y, int64_t* yd, std::vector<int64_t>* spatial) {
    if (auto s = Expect("["); !s.ok()) return s;
    std::map<int64_t, int64_t> sp;
    int64_t pos = 0;
    *xd = *yd = -1;
    do {
      auto w = Word();
      if (!w.ok()) return w.status();
      int64_t k = 0;
      if (*w == std::string(1, x)) *xd = pos;
      else if (*w == std::string(1, y)) *yd = pos;
      else if (absl::SimpleAtoi(*w, &k) && k >= 0) sp[k] = pos;
      else return Error(absl::StrCat("unexpected '", *w, "' in dim_numbers"));
      ++pos;
    } while (Consume(","));
    spatial->clear();
    for (int64_t k = 0; k < static_cast<int64_t>(sp.size()); ++k) {
      if (!sp.count(k)) return Error("dim_numbers spatial dims must be 0..n-1");
      spatial->push_back(sp[k]);
    }
    if (*xd < 0 || *yd < 0) return Error(absl::StrCat("dim_numbers needs '", std::string(1, x), "' and '", std::string(1, y), "'"));
    return Expect("]");
  }

  absl::Status Convolution(Instruction* i) {
    if (auto s = Expect("("); !s.ok()) return s;
    auto ops = Operands();
    if (!ops.ok()) return ops.status();
    i->operands = *ops;
    if (auto s = Expect(")"); !s.ok()) return s;
    ConvDims& c = i->conv;
    if (auto s = Expect("dim_numbers"); !s.ok()) return s;
    if (auto s = Expect("="); !s.ok()) return s;
    if (auto s = ConvLayout('b', &c.input_batch, 'f', &c.input_feature, &c.input_spatial); !s.ok()) return s;
    if (auto s = Expect("x"); !s.ok()) return s;
    if (auto s = ConvLayout('o', &c.kernel_output_feature, 'i', &c.kernel_input_feature, &c.kernel_spatial); !s.ok())
      return s;
    if (auto s = Expect("->"); !s.ok()) return s;
    if (auto s = ConvLayout('b', &c.output_batch, 'f', &c.output_feature, &c.output_spatial); !s.ok()) return s;
    if (Consume(",")) {
      if (auto s = Expect("window"); !s.ok()) return s;
      if (auto s = Expect("="); !s.ok()) return s;
      auto d = Dict();
      if (!d.ok()) return d.status();
      if (d->count("stride")) c.window_strides = (*d)["stride"].ints;
      if (d->count("pad")) c.padding = PairsOf((*d)["pad"]);
      if (d->count("lhs_dilate")) c.lhs_dilation = (*d)["lhs_dilate"].ints;
      if (d->count("rhs_dilate")) c.rhs_dilation = (*d)["rhs_dilate"].ints;
    }
    if (Peek("{")) {
      auto d = Dict();
      if (!d.ok()) return d.status();
      if (d->count("feature_group_count")) c.feature_group_count = (*d)["feature_group_count"].ints.at(0);
      if (d->count("batch_group_count")) c.batch_group_count = (*d)["batch_group_count"].ints.at(0);
    }
    return Types(i);
  }

  // One `%name = ...` line.
  absl::Status ParseInstruction() {
    size_t at = (SkipWs(), p_);
    auto name = ValueName();
    if (!name.ok()) return name.status();
    if (values_.count(*name)) return Error(absl::StrCat("%", *name, " is defined twice"), at);
    int64_t results = 1;  // %7:2 = ...
    if (Consume(":")) {
      auto r = Int();
      if (!r.ok()) return r.status();
      results = *r;
    }
    if (auto s = Expect("="); !s.ok()) return s;
    auto i = std::make_unique<Instruction>();
    size_t op_at = (SkipWs(), p_);
    if (Peek("\"")) {
      if (auto s = Generic(i.get(), op_at); !s.ok()) return s;
    } else {
      auto opname = Word();
      if (!opname.ok()) return opname.status();
      if (!LookupOp(*opname, &i->op)) return Error(absl::StrCat("unknown op '", *opname, "'"), op_at);
      absl::Status s = i->op == Opcode::kWhile ? While(i.get(), *name) : Pretty(i.get());
      if (!s.ok()) return s;
    }
    if ((i->op == Opcode::kWhile ? static_cast<int64_t>(i->operands.size()) : 1) != results)
      return Error(absl::StrCat(OpcodeName(i->op), " gives ", i->op == Opcode::kWhile ? i->operands.size() : 1,
                                " results, the name says ", results), at);
    SkipWs();
    if (Peek("{")) {
      size_t dat = p_;
      auto d = Dict();
      if (!d.ok()) return d.status();
      if (auto s = ShardingFrom(*d, &i->sharding, dat); !s.ok()) return s;
    }
    if (auto s = Loc(i.get()); !s.ok()) return s;
    // The types must agree with what the op implies; say so at the op's line.
    auto inferred = InferShape(*i);
    if (!inferred.ok()) return Error(absl::StrCat(OpcodeName(i->op), ": ", inferred.status().message()), op_at);
    if (*inferred != i->shape)
      return Error(absl::StrCat(OpcodeName(i->op), ": result type ", i->shape.ToMlir(), " differs from the ",
                                inferred->ToMlir(), " its operands imply"), op_at);
    // Printed ids are kept where they can be (Build): a while's results take
    // the ids after its own, as Module::While gives them.
    int64_t want = -1;
    if (absl::StartsWith(*name, id_prefix_)) {
      int64_t id = 0;
      if (absl::SimpleAtoi(absl::string_view(*name).substr(id_prefix_.size()), &id)) want = id;
    }
    Instruction* made = i.get();
    values_[*name] = made;
    body_.push_back({std::move(i), *name, want});
    if (made->op == Opcode::kWhile) {
      for (int64_t k = 0; k < results; ++k) {
        auto g = std::make_unique<Instruction>();
        g->op = Opcode::kGetTupleElement;
        g->operands = {made};
        g->dims = {k};
        g->shape = made->operands[k]->shape;
        g->loc = made->loc;
        g->scope = made->scope;
        std::string gname = results == 1 ? *name : absl::StrCat(*name, "#", k);
        values_[gname] = g.get();
        body_.push_back({std::move(g), gname, want < 0 ? -1 : want + 1 + k});
      }
    }
    return absl::OkStatus();
  }

  // `(%a = %x, ...) : T, ... cond { ... } do { ... }`, after `stablehlo.while`.
  absl::Status While(Instruction* w, const std::string& name) {
    if (auto s = Expect("("); !s.ok()) return s;
    std::vector<std::string> args;
    if (!Consume(")")) {
      do {
        size_t at = (SkipWs(), p_);
        auto a = ValueName();
        if (!a.ok()) return a.status();
        if (auto s = Expect("="); !s.ok()) return s;
        size_t vat = (SkipWs(), p_);
        auto v = ValueName();
        if (!v.ok()) return v.status();
        auto init = Lookup(*v, vat);
        if (!init.ok()) return init.status();
        if (std::count(args.begin(), args.end(), *a)) return Error(absl::StrCat("%", *a, " is defined twice"), at);
        args.push_back(*a);
        w->operands.push_back(*init);
      } while (Consume(","));
      if (auto s = Expect(")"); !s.ok()) return s;
    }
    if (auto s = Expect(":"); !s.ok()) return s;
    for (size_t k = 0; k < w->operands.size(); ++k) {
      if (k && !Consume(",")) return Error("expected ','");
      size_t at = (SkipWs(), p_);
      auto t = Type();
      if (!t.ok()) return t.status();
      if (*t != w->operands[k]->shape)
        return Error(absl::StrCat("carried value ", k, " is ", w->operands[k]->shape.ToMlir(), " but the type says ",
                                  t->ToMlir()), at);
    }
    // Our printer names region values after the while (%w7_c3 in its cond);
    // Build keeps those ids when the names follow that form.
    int64_t id = 0;
    const std::string base = absl::SimpleAtoi(name, &id) ? absl::StrCat("w", name, "_") : absl::StrCat(name, "_");
    if (auto s = Expect("cond"); !s.ok()) return s;
    auto cond = WhileRegion(args, w->operands, base + "c");
    if (!cond.ok()) return cond.status();
    if (auto s = Expect("do"); !s.ok()) return s;
    auto body = WhileRegion(args, w->operands, base + "b");
    if (!body.ok()) return body.status();
    w->cond = *std::move(cond);
    w->body = *std::move(body);
    w->shape = WhilePlaceholderShape();
    return absl::OkStatus();
  }

  // `{ ops... stablehlo.return ... }`: one of a while's regions, a module of
  // its own whose parameters are the carried values.
  absl::StatusOr<std::shared_ptr<const Module>> WhileRegion(const std::vector<std::string>& args,
                                                            const std::vector<Instruction*>& init,
                                                            const std::string& id_prefix) {
    if (auto s = Expect("{"); !s.ok()) return s;
    outer_.push_back(std::move(values_));
    auto saved_params = std::move(params_);
    auto saved_body = std::move(body_);
    auto saved_outputs = std::move(outputs_);
    std::string saved_prefix = id_prefix_;
    values_.clear();
    params_.clear();
    body_.clear();
    outputs_.clear();
    id_prefix_ = id_prefix;
    for (size_t k = 0; k < args.size(); ++k) {
      auto p = std::make_unique<Instruction>();
      p->op = Opcode::kParameter;
      p->shape = init[k]->shape;
      values_[args[k]] = p.get();
      params_.push_back({std::move(p), args[k], -1});
    }
    while (true) {
      SkipWs();
      if (Consume("stablehlo.return") || Consume("return")) break;
      if (p_ >= t_.size()) return Error("missing stablehlo.return in a while region");
      if (auto s = ParseInstruction(); !s.ok()) return s;
    }
    if (auto s = ParseReturn(); !s.ok()) return s;
    if (auto s = Expect("}"); !s.ok()) return s;
    auto m = Build(/*region=*/true);
    values_ = std::move(outer_.back());
    outer_.pop_back();
    params_ = std::move(saved_params);
    body_ = std::move(saved_body);
    outputs_ = std::move(saved_outputs);
    id_prefix_ = saved_prefix;
    if (!m.ok()) return m.status();
    return std::shared_ptr<const Module>(*std::move(m));
  }

  // The pretty forms, after the op name.
  absl::Status Pretty(Instruction* i) {
    switch (i->op) {
      case Opcode::kConstant: return Literal(i);
      case Opcode::kIota: {
        if (auto s = Expect("dim"); !s.ok()) return s;
        if (auto s = Expect("="); !s.ok()) return s;
        auto d = Int();
        if (!d.ok()) return d.status();
        i->dims = {*d};
        return Types(i);
      }
      case Opcode::kPartitionId: return Types(i);
      case Opcode::kConvolution: return Convolution(i);
      case Opcode::kCompare: {
        auto dir = Word();
        if (!dir.ok()) return dir.status();
        bool found = false;
        for (CompareDirection d : {CompareDirection::kEQ, CompareDirection::kNE, CompareDirection::kLT,
                                   CompareDirection::kLE, CompareDirection::kGT, CompareDirection::kGE})
          if (*dir == CompareDirectionName(d)) { i->compare = d; found = true; }
        if (!found) return Error(absl::StrCat("unknown comparison direction '", *dir, "'"));
        if (auto s = Expect(","); !s.ok()) return s;
        break;
      }
      case Opcode::kReduce: {
        if (auto s = Expect("("); !s.ok()) return s;
        auto a = Operands();
        if (!a.ok()) return a.status();
        if (auto s = Expect("init:"); !s.ok()) return s;
        auto b = Operands();
        if (!b.ok()) return b.status();
        if (auto s = Expect(")"); !s.ok()) return s;
        i->operands = {(*a)[0], (*b)[0]};
        if (auto s = Expect("applies"); !s.ok()) return s;
        auto body = Word();
        if (!body.ok()) return body.status();
        bool found = false;
        for (ReduceKind k : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin, ReduceKind::kProd})
          if (*body == ReduceKindOp(k)) { i->reduce = k; found = true; }
        if (!found) return Error(absl::StrCat("reduce cannot apply '", *body, "'"));
        if (auto s = Expect("across"); !s.ok()) return s;
        if (auto s = Expect("dimensions"); !s.ok()) return s;
        if (auto s = Expect("="); !s.ok()) return s;
        auto dims = IntList();
        if (!dims.ok()) return dims.status();
        i->dims = *dims;
        return Types(i);
      }
      default: break;
    }
    auto ops = Operands();
    if (!ops.ok()) return ops.status();
    i->operands = *ops;
    auto key = [&](const char* k) -> absl::Status {
      if (auto s = Expect(","); !s.ok()) return s;
      if (auto s = Expect(k); !s.ok()) return s;
      return Expect("=");
    };
    switch (i->op) {
      case Opcode::kBroadcastInDim: case Opcode::kTranspose: case Opcode::kDynamicSlice: {
        if (auto s = key(i->op == Opcode::kDynamicSlice ? "sizes" : "dims"); !s.ok()) return s;
        auto d = IntList();
        if (!d.ok()) return d.status();
        i->dims = *d;
        break;
      }
      case Opcode::kConcatenate: {
        if (auto s = key("dim"); !s.ok()) return s;
        auto d = Int();
        if (!d.ok()) return d.status();
        i->dims = {*d};
        break;
      }
      case Opcode::kDotGeneral: {
        if (auto s = Expect(","); !s.ok()) return s;
        if (Consume("batching_dims")) {
          if (auto s = Expect("="); !s.ok()) return s;
          auto l = IntList();
          if (!l.ok()) return l.status();
          if (auto s = Expect("x"); !s.ok()) return s;
          auto r = IntList();
          if (!r.ok()) return r.status();
          i->dot.lhs_batch = *l;
          i->dot.rhs_batch = *r;
          if (auto s = Expect(","); !s.ok()) return s;
        }
        if (auto s = Expect("contracting_dims"); !s.ok()) return s;
        if (auto s = Expect("="); !s.ok()) return s;
        auto l = IntList();
        if (!l.ok()) return l.status();
        if (auto s = Expect("x"); !s.ok()) return s;
        auto r = IntList();
        if (!r.ok()) return r.status();
        i->dot.lhs_contracting = *l;
        i->dot.rhs_contracting = *r;
        break;
      }
      case Opcode::kSlice: {
        if (auto s = Expect("["); !s.ok()) return s;
        if (!Consume("]")) {
          do {
            auto a = Int();
            if (!a.ok()) return a.status();
            if (auto s = Expect(":"); !s.ok()) return s;
            auto b = Int();
            if (!b.ok()) return b.status();
            int64_t st = 1;
            if (Consume(":")) {
              auto c = Int();
              if (!c.ok()) return c.status();
              st = *c;
            }
            i->slice.start.push_back(*a);
            i->slice.limit.push_back(*b);
            i->slice.stride.push_back(st);
          } while (Consume(","));
          if (auto s = Expect("]"); !s.ok()) return s;
        }
        break;
      }
      case Opcode::kPad: {
        for (auto [k, v] : {std::pair{"low", &i->pad.low}, std::pair{"high", &i->pad.high},
                            std::pair{"interior", &i->pad.interior}}) {
          if (auto s = key(k); !s.ok()) return s;
          auto d = IntList();
          if (!d.ok()) return d.status();
          *v = *d;
        }
        break;
      }
      case Opcode::kRngBitGenerator: {
        if (auto s = key("algorithm"); !s.ok()) return s;
        if (auto w = Word(); !w.ok()) return w.status();
        break;
      }
      default:
        break;
    }
    return Types(i);
  }

  // ------------------------------------------------------------ building
  absl::StatusOr<std::unique_ptr<Module>> Build(bool region = false) {
    auto m = std::make_unique<Module>(region ? "region" : module_name_);
    m->set_num_partitions(num_partitions_);
    const size_t total = params_.size() + body_.size();
    // Can the printed ids be kept? They must be distinct numbers below
    // `total`, increasing in text order, leaving the parameters' slots free.
    std::vector<int> slot_of(total, -1);  // -1: a parameter's slot
    bool keep = true;
    int64_t last = -1;
    for (size_t k = 0; k < body_.size() && keep; ++k) {
      const int64_t id = body_[k].want;
      keep = id > last && id < static_cast<int64_t>(total);
      if (keep) slot_of[id] = static_cast<int>(k);
      last = id;
    }
    std::vector<std::unique_ptr<Instruction>*> order;
    if (keep) {
      size_t next_param = 0;
      for (size_t s = 0; s < total; ++s)
        order.push_back(slot_of[s] < 0 ? &params_[next_param++].instr : &body_[slot_of[s]].instr);
    } else {
      for (auto& p : params_) order.push_back(&p.instr);
      for (auto& b : body_) order.push_back(&b.instr);
    }
    for (auto* i : order) m->Add(std::move(*i));
    m->SetOutputs(outputs_);
    m->output_shardings() = out_shardings_;
    if (absl::Status s = Verify(*m); !s.ok()) return s;
    return m;
  }

  absl::string_view t_;
  size_t p_ = 0;
  std::string module_name_ = "main";
  int num_partitions_ = 1;
  std::map<std::string, Instruction*> values_;
  std::vector<std::map<std::string, Instruction*>> outer_;  // enclosing regions' values
  std::string id_prefix_;  // what precedes a printed id in this region's names
  std::vector<Parsed> params_, body_;
  std::vector<Instruction*> outputs_;
  std::vector<Sharding> out_shardings_;
  size_t result_count_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> ParseModule(absl::string_view text) {
  Parser p(text);
  return p.Run();
}

}  // namespace shardscope::compiler
