#include "compiler/passes.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "compiler/text.h"

namespace shardscope::compiler {

namespace {

// The value every element of `i` has when `i` is a constant or a broadcast of
// one whose elements are all equal; nullopt otherwise.
std::optional<double> SplatValue(const Instruction& i) {
  const Instruction* c = &i;
  if (c->op == Opcode::kBroadcastInDim) c = c->operands[0];
  if (c->op != Opcode::kConstant || !c->literal || c->literal->elements() == 0) return std::nullopt;
  const double v = c->literal->GetDouble(0);
  for (int64_t k = 1; k < c->literal->elements(); ++k)
    if (c->literal->GetDouble(k) != v) return std::nullopt;
  return v;
}

bool Is(const Instruction& i, double v) {
  auto s = SplatValue(i);
  return s && *s == v;
}

bool IsIdentityPerm(const std::vector<int64_t>& d) {
  for (size_t k = 0; k < d.size(); ++k)
    if (d[k] != static_cast<int64_t>(k)) return false;
  return true;
}

bool IsF32OrF64(DType t) { return t == DType::kF32 || t == DType::kF64; }

// Algebraic identities that make `i` one of its operands: x+0, x-0, x*1, x/1,
// -(-x), and reshapes, transposes, broadcasts and converts that change
// nothing. Float x*0 is not x-free (NaN and inf), so it stays.
const Instruction* Identity(const Instruction& i) {
  auto same = [&](const Instruction* o) { return o->shape == i.shape ? o : nullptr; };
  const auto& op = i.operands;
  switch (i.op) {
    case Opcode::kAdd:
      if (Is(*op[1], 0)) return same(op[0]);
      if (Is(*op[0], 0)) return same(op[1]);
      return nullptr;
    case Opcode::kSubtract: return Is(*op[1], 0) ? same(op[0]) : nullptr;
    case Opcode::kMultiply:
      if (Is(*op[1], 1)) return same(op[0]);
      if (Is(*op[0], 1)) return same(op[1]);
      return nullptr;
    case Opcode::kDivide: return Is(*op[1], 1) ? same(op[0]) : nullptr;
    case Opcode::kNegate: return op[0]->op == Opcode::kNegate ? same(op[0]->operands[0]) : nullptr;
    case Opcode::kReshape: case Opcode::kConvert: return same(op[0]);
    case Opcode::kTranspose: return IsIdentityPerm(i.dims) ? same(op[0]) : nullptr;
    case Opcode::kBroadcastInDim: return IsIdentityPerm(i.dims) ? same(op[0]) : nullptr;
    case Opcode::kSelect: return op[1] == op[2] ? same(op[1]) : nullptr;
    default: return nullptr;
  }
}

// Folds a float elementwise op whose operands are all splat constants into
// one scalar; nullopt when it does not apply. Computed in double and rounded
// to the element type once, as the constant is stored.
std::optional<double> Fold(const Instruction& i) {
  if (!IsElementwise(i.op) || !IsF32OrF64(i.shape.dtype) || i.op == Opcode::kCompare || i.op == Opcode::kSelect ||
      i.op == Opcode::kConvert)
    return std::nullopt;
  std::vector<double> v;
  for (const Instruction* o : i.operands) {
    if (!IsF32OrF64(o->shape.dtype)) return std::nullopt;
    auto s = SplatValue(*o);
    if (!s) return std::nullopt;
    v.push_back(*s);
  }
  switch (i.op) {
    case Opcode::kAdd: return v[0] + v[1];
    case Opcode::kSubtract: return v[0] - v[1];
    case Opcode::kMultiply: return v[0] * v[1];
    case Opcode::kDivide: return v[0] / v[1];
    case Opcode::kMaximum: return std::isnan(v[0]) || v[0] > v[1] ? v[0] : v[1];
    case Opcode::kMinimum: return std::isnan(v[0]) || v[0] < v[1] ? v[0] : v[1];
    case Opcode::kPower: return std::pow(v[0], v[1]);
    case Opcode::kNegate: return -v[0];
    case Opcode::kAbs: return std::fabs(v[0]);
    case Opcode::kExponential: return std::exp(v[0]);
    case Opcode::kLog: return std::log(v[0]);
    case Opcode::kSqrt: return std::sqrt(v[0]);
    case Opcode::kRsqrt: return 1.0 / std::sqrt(v[0]);
    case Opcode::kTanh: return std::tanh(v[0]);
    case Opcode::kLogistic: return 1.0 / (1.0 + std::exp(-v[0]));
    case Opcode::kClamp: return std::min(std::max(v[1], v[0]), v[2]);
    default: return std::nullopt;
  }
}

// dot_general(transpose(x)) reads x directly with its dimension numbers
// mapped through the permutation, when that keeps the order of the operand's
// free dims (so the result's layout is unchanged). The GEMM then reads x in
// place as a transposed matrix instead of copying it first. Returns whether
// `dot` (a copy whose operands are representatives) was rewritten.
bool FoldTransposeIntoDot(Instruction* dot) {
  if (dot->op != Opcode::kDotGeneral) return false;
  bool changed = false;
  for (int side = 0; side < 2; ++side) {
    const Instruction* t = dot->operands[side];
    if (t->op != Opcode::kTranspose) continue;
    auto& batch = side == 0 ? dot->dot.lhs_batch : dot->dot.rhs_batch;
    auto& contracting = side == 0 ? dot->dot.lhs_contracting : dot->dot.rhs_contracting;
    const int rank = t->shape.rank();
    int64_t last_free = -1;
    bool keeps_order = true;
    for (int d = 0; d < rank && keeps_order; ++d) {
      if (std::count(batch.begin(), batch.end(), d) || std::count(contracting.begin(), contracting.end(), d)) continue;
      keeps_order = t->dims[d] > last_free;
      last_free = t->dims[d];
    }
    if (!keeps_order) continue;
    for (auto& d : batch) d = t->dims[d];
    for (auto& d : contracting) d = t->dims[d];
    dot->operands[side] = t->operands[0];
    changed = true;
  }
  return changed;
}

}  // namespace

std::unique_ptr<Module> Simplify(const Module& m, PassStats* stats) {
  PassStats local;
  PassStats& st = stats ? *stats : local;
  const auto& instrs = m.instructions();
  // CSE: an instruction's identity is its printed form (op, attributes, types)
  // with operands replaced by their representatives. Printing covers every
  // attribute, so no attribute can be forgotten in the comparison. Before
  // that, algebraic identities map an op to one of its operands, and float
  // ops on splat constants fold into a new constant (broadcast when the
  // result is not a scalar). `order` lists the representatives, new
  // constants included, in a valid program order.
  std::unordered_map<const Instruction*, const Instruction*> rep;
  std::unordered_map<std::string, const Instruction*> seen;
  std::vector<std::unique_ptr<Instruction>> made_here;  // folded constants and their broadcasts
  std::vector<const Instruction*> order;
  const PrintOptions key_opts{.locations = false, .names = false};
  auto key_of = [&](const Instruction& i) {
    Instruction probe = i;
    probe.id = 0;  // the line's own id is not part of the identity
    std::string key = PrintInstruction(probe, key_opts);
    return key.substr(key.find(" = ") + 3);
  };
  // Registers `stands_for` under the printed identity of `as_printed` (whose
  // operands are representatives); returns the representative.
  auto intern = [&](const Instruction& as_printed, const Instruction* stands_for) -> const Instruction* {
    auto [it, fresh] = seen.try_emplace(key_of(as_printed), stands_for);
    if (fresh) order.push_back(stands_for);
    return it->second;
  };
  // New instructions get ids past the module's, so printed identities stay distinct.
  int64_t next_id = 0;
  for (const auto& ip : instrs) next_id = std::max(next_id, ip->id + 1);
  for (const auto& ip : instrs) {
    const Instruction& i = *ip;
    if (i.op == Opcode::kParameter) {
      rep[&i] = &i;
      order.push_back(&i);
      continue;
    }
    Instruction probe = i;  // a copy whose operands are representatives
    for (auto& o : probe.operands) o = const_cast<Instruction*>(rep.at(o));
    const bool simplified_regions = probe.op == Opcode::kWhile && probe.cond && probe.body;
    if (simplified_regions) {  // regions keep their parameters and results
      probe.cond = Simplify(*probe.cond, &st);
      probe.body = Simplify(*probe.body, &st);
    }
    // A value the user annotated stays, with its sharding.
    if (const Instruction* same = probe.sharding ? nullptr : Identity(probe)) {
      // -(-x) reaches past a representative to its original operand.
      rep[&i] = rep.count(same) ? rep.at(same) : same;
      ++st.algebraic_simplified;
      continue;
    }
    if (auto v = probe.sharding ? std::nullopt : Fold(probe)) {
      auto c = std::make_unique<Instruction>();
      c->op = Opcode::kConstant;
      c->shape = Shape(i.shape.dtype, {});
      c->literal = Literal::Scalar(i.shape.dtype, *v);
      c->loc = i.loc;
      c->scope = i.scope;
      c->id = next_id++;
      const Instruction* value = intern(*c, c.get());
      if (value == c.get()) made_here.push_back(std::move(c));
      if (i.shape.rank() > 0) {
        auto b = std::make_unique<Instruction>();
        b->op = Opcode::kBroadcastInDim;
        b->shape = i.shape;
        b->operands = {const_cast<Instruction*>(value)};
        b->loc = i.loc;
        b->scope = i.scope;
        b->dims = {};
        b->id = next_id++;
        const Instruction* bv = intern(*b, b.get());
        if (bv == b.get()) made_here.push_back(std::move(b));
        value = bv;
      }
      rep[&i] = value;
      ++st.constants_folded;
      continue;
    }
    const bool folded = FoldTransposeIntoDot(&probe);
    if (folded || simplified_regions) {
      auto d = std::make_unique<Instruction>(probe);
      d->id = next_id++;
      const Instruction* r = intern(*d, d.get());
      if (r == d.get()) made_here.push_back(std::move(d));
      rep[&i] = r;
      st.algebraic_simplified += folded;
      continue;
    }
    const Instruction* r = intern(probe, &i);
    rep[&i] = r;
    if (r != &i) ++st.cse_removed;
  }
  // DCE: keep what the outputs need (through representatives) and every parameter.
  std::unordered_map<const Instruction*, bool> live;
  std::vector<const Instruction*> stack;
  for (const Instruction* o : m.outputs()) stack.push_back(rep.at(o));
  while (!stack.empty()) {
    const Instruction* i = stack.back();
    stack.pop_back();
    if (live[i]) continue;
    live[i] = true;
    // Operands of originals are remapped through `rep`; made-here ones are
    // representatives already.
    for (const Instruction* o : i->operands) stack.push_back(rep.count(o) ? rep.at(o) : o);
  }
  auto out = std::make_unique<Module>(m.name());
  out->set_num_partitions(m.num_partitions());
  std::unordered_map<const Instruction*, Instruction*> made;
  for (const Instruction* ip : order) {
    const Instruction& i = *ip;
    if (i.op != Opcode::kParameter && !live[&i]) {
      ++st.dce_removed;
      continue;
    }
    auto copy = std::make_unique<Instruction>(i);
    for (auto& o : copy->operands) o = made.at(rep.count(o) ? rep.at(o) : o);
    made[&i] = out->Add(std::move(copy));
  }
  std::vector<Instruction*> outs;
  for (const Instruction* o : m.outputs()) outs.push_back(made.at(rep.at(o)));
  out->SetOutputs(outs);
  out->output_shardings() = m.output_shardings();
  return out;
}

}  // namespace shardscope::compiler
