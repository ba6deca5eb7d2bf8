#include "compiler/passes.h"

#include <unordered_map>

#include "compiler/text.h"

namespace shardscope::compiler {

std::unique_ptr<Module> Simplify(const Module& m, PassStats* stats) {
  PassStats local;
  PassStats& st = stats ? *stats : local;
  const auto& instrs = m.instructions();
  // CSE: an instruction's identity is its printed form (op, attributes, types)
  // with operands replaced by their representatives. Printing covers every
  // attribute, so no attribute can be forgotten in the comparison.
  std::unordered_map<const Instruction*, const Instruction*> rep;
  std::unordered_map<std::string, const Instruction*> seen;
  const PrintOptions key_opts{.locations = false, .names = false};
  for (const auto& ip : instrs) {
    const Instruction& i = *ip;
    if (i.op == Opcode::kParameter) {
      rep[&i] = &i;
      continue;
    }
    Instruction probe = i;  // a copy whose operands are representatives
    for (auto& o : probe.operands) o = const_cast<Instruction*>(rep.at(o));
    probe.id = 0;  // the line's own id is not part of the identity
    std::string key = PrintInstruction(probe, key_opts);
    key = key.substr(key.find(" = ") + 3);
    auto [it, fresh] = seen.try_emplace(key, &i);
    rep[&i] = it->second;
    if (!fresh) ++st.cse_removed;
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
    for (const Instruction* o : i->operands) stack.push_back(rep.at(o));
  }
  auto out = std::make_unique<Module>(m.name());
  out->set_num_partitions(m.num_partitions());
  std::unordered_map<const Instruction*, Instruction*> made;
  for (const auto& ip : instrs) {
    const Instruction& i = *ip;
    if (rep.at(&i) != &i) continue;  // merged into an earlier op
    if (i.op != Opcode::kParameter && !live[&i]) {
      ++st.dce_removed;
      continue;
    }
    auto copy = std::make_unique<Instruction>(i);
    for (auto& o : copy->operands) o = made.at(rep.at(o));
    made[&i] = out->Add(std::move(copy));
  }
  std::vector<Instruction*> outs;
  for (const Instruction* o : m.outputs()) outs.push_back(made.at(rep.at(o)));
  out->SetOutputs(outs);
  out->output_shardings() = m.output_shardings();
  return out;
}

}  // namespace shardscope::compiler
