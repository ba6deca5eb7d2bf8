#include "compiler/fusion.h"

#include <algorithm>
#include <queue>

#include "absl/strings/str_cat.h"

namespace shardscope::compiler {
namespace {

// Bounds the scratch a kernel needs (one block per member).
constexpr size_t kMaxMembers = 48;

std::string Short(const Instruction& i) {
  std::string n = OpcodeName(i.op);
  if (n.rfind("stablehlo.", 0) == 0) n = n.substr(10);
  return n;
}

std::string Name(const Instruction& i) { return absl::StrCat(Short(i), ".", i.id); }

bool IsF32OrPred(DType t) { return t == DType::kF32 || t == DType::kI1; }

// Ops the fused loop implements, with the element types it implements them
// for; "" when fusible, else why not.
std::string WhyNotLoopOp(const Instruction& i) {
  const DType t = i.shape.dtype;
  switch (i.op) {
    case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply: case Opcode::kDivide:
    case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kPower: case Opcode::kNegate:
    case Opcode::kExponential: case Opcode::kLog: case Opcode::kAbs: case Opcode::kLogistic:
    case Opcode::kTanh: case Opcode::kSqrt: case Opcode::kRsqrt: case Opcode::kClamp:
      return t == DType::kF32 ? "" : absl::StrCat("element type ", DTypeName(t), " is not fused (f32 only)");
    case Opcode::kCompare:
      return i.operands[0]->shape.dtype == DType::kF32
                 ? ""
                 : absl::StrCat("compares ", DTypeName(i.operands[0]->shape.dtype), " (f32 only)");
    case Opcode::kSelect:
      return t == DType::kF32 ? "" : absl::StrCat("selects ", DTypeName(t), " (f32 only)");
    case Opcode::kConvert:
      return IsF32OrPred(t) && IsF32OrPred(i.operands[0]->shape.dtype)
                 ? ""
                 : absl::StrCat("converts ", DTypeName(i.operands[0]->shape.dtype), " to ", DTypeName(t),
                                " (f32 and i1 only)");
    case Opcode::kBroadcastInDim: case Opcode::kReshape:
      return IsF32OrPred(t) ? "" : absl::StrCat("element type ", DTypeName(t), " is not fused");
    case Opcode::kParameter: return "a parameter: read in place";
    case Opcode::kConstant: return "a constant: read in place";
    case Opcode::kDotGeneral: return "dot_general runs as a GEMM library call";
    case Opcode::kConvolution: return "convolution runs as its own kernel";
    case Opcode::kReduce: return "a reduce ends a kernel (its result is smaller than its operand)";
    case Opcode::kTranspose: return "transpose reorders memory (not fused)";
    default:
      if (IsCollective(i.op)) return "a collective is a kernel boundary";
      return absl::StrCat(Short(i), " is not a loop op");
  }
}

// Kernel members are kept in program order, root last.
void SortByProgramOrder(std::vector<const Instruction*>* members, const std::vector<int64_t>& index_of) {
  std::sort(members->begin(), members->end(),
            [&](const Instruction* a, const Instruction* b) { return index_of[a->id] < index_of[b->id]; });
}

constexpr char kCopied[] = "fused (a copy: this broadcast is recomputed in each kernel that reads it)";

// A broadcast whose operand is smaller than its result.
bool Expands(const Instruction& i) {
  return i.op == Opcode::kBroadcastInDim && i.operands[0]->shape.elements() < i.shape.elements();
}

// A reduce over leading or trailing dims of an f32 operand can end a kernel.
bool ReduceRoot(const Instruction& i) {
  if (i.op != Opcode::kReduce || i.shape.dtype != DType::kF32) return false;
  const int r = i.operands[0]->shape.rank();
  std::vector<int64_t> d = i.dims;
  std::sort(d.begin(), d.end());
  if (d.empty()) return false;
  bool prefix = true, suffix = true;
  for (size_t k = 0; k < d.size(); ++k) {
    prefix &= d[k] == static_cast<int64_t>(k);
    suffix &= d[k] == r - static_cast<int64_t>(d.size()) + static_cast<int64_t>(k);
  }
  return prefix || suffix;
}

constexpr char kEpilogue[] = "fused: the GEMM accumulates into the broadcast bias (its epilogue)";

// add(dot, broadcast(bias)) kernels become GEMMs that accumulate into the
// bias: an f32 dot on f32 operands whose only user is the add, and a bias
// broadcast along the result's last dim (or a scalar).
void GemmEpilogues(const std::vector<std::vector<const Instruction*>>& users, const std::vector<int64_t>& index_of,
                   const std::vector<bool>& is_output, FusionPlan* plan) {
  for (size_t k = 0; k < plan->kernels.size(); ++k) {
    FusedKernel& kernel = plan->kernels[k];
    const Instruction& add = *kernel.root;
    if (kernel.kind != FusedKernel::Kind::kLoop || add.op != Opcode::kAdd || kernel.members.size() != 2) continue;
    const Instruction* bias = kernel.members[0];
    if (bias->op != Opcode::kBroadcastInDim) continue;
    const Instruction* dot = add.operands[0] == bias ? add.operands[1] : add.operands[0];
    if (add.operands[0] != bias && add.operands[1] != bias) continue;
    const int rank = add.shape.rank();
    const bool along_last = bias->dims.size() == 1 && bias->dims[0] == rank - 1;
    if (!(along_last || bias->operands[0]->shape.elements() == 1)) continue;
    if (dot->op != Opcode::kDotGeneral || dot->shape != add.shape || dot->shape.dtype != DType::kF32 ||
        dot->operands[0]->shape.dtype != DType::kF32 || dot->operands[1]->shape.dtype != DType::kF32 ||
        users[dot->id].size() != 1 || is_output[dot->id] || plan->kernel_of[dot->id] >= 0 || plan->Absorbed(dot->id))
      continue;
    kernel.kind = FusedKernel::Kind::kGemmBias;
    kernel.gemm = dot;
    kernel.bias = bias;
    kernel.members.insert(kernel.members.begin(), dot);
    SortByProgramOrder(&kernel.members, index_of);
    plan->kernel_of[dot->id] = static_cast<int>(k);
    plan->absorbed[dot->id] = true;
    for (auto& d : plan->decisions)
      if (d.producer_id == dot->id && d.consumer_id == add.id) {
        d.fused = true;
        d.reason = kEpilogue;
        d.kernel = kernel.name();
      }
  }
}

constexpr char kRecomputed[] = "fused (a copy: recomputed in each kernel that reads it, never written out)";
constexpr size_t kMaxCopies = 4;  // kernels one value may be recomputed in

// Second phase: an elementwise op left on its own only because its users sit
// in different kernels (or are loop ops on their own) is recomputed in each of
// them, when its operands are written out anyway; then it is never written.
// SwiGLU's logistic(gate) and silu(gate) are the typical case: forward and
// backward both read them. Values are visited latest first, so a value's
// users have reached their final kernels when it is decided; a loop op on its
// own becomes a one-op kernel to take copies.
void CopyCheapProducers(const std::vector<std::unique_ptr<Instruction>>& instrs,
                        const std::vector<std::vector<const Instruction*>>& users,
                        const std::vector<int64_t>& index_of, const std::vector<bool>& is_output, FusionPlan* plan) {
  auto loop_size = [](const FusedKernel& k) {
    return k.kind == FusedKernel::Kind::kReduce ? k.root->operands[0]->shape.elements() : k.root->shape.elements();
  };
  auto in_kernel = [&](int k, const Instruction* i) {
    const auto& m = plan->kernels[k].members;
    return std::find(m.begin(), m.end(), i) != m.end();
  };
  for (int64_t pos = static_cast<int64_t>(instrs.size()) - 1; pos >= 0; --pos) {
    const Instruction* p = instrs[pos].get();
    if (!IsElementwise(p->op) || !WhyNotLoopOp(*p).empty() || plan->kernel_of[p->id] >= 0 ||
        plan->Absorbed(p->id) || is_output[p->id] || users[p->id].empty())
      continue;
    // Its operands must be written out anyway (copied broadcasts come along).
    bool ok = true;
    std::vector<const Instruction*> bring = {p};
    for (const Instruction* o : p->operands) {
      if (!plan->Absorbed(o->id)) continue;
      if (Expands(*o) && plan->kernel_of[o->id] < 0) bring.push_back(o);
      else ok = false;
    }
    // Where each user is computed: kernels only.
    std::vector<int> targets;
    std::vector<const Instruction*> hosts;  // loop ops on their own that become one-op kernels
    for (const Instruction* u : users[p->id]) {
      if (!ok) break;
      if (u->op == Opcode::kBroadcastInDim) ok = false;  // reads its operand whole
      std::vector<int> at;
      if (plan->kernel_of[u->id] >= 0) {
        at.push_back(plan->kernel_of[u->id]);
      } else if (plan->Absorbed(u->id)) {
        at = plan->copied_into[u->id];
      } else if (WhyNotLoopOp(*u).empty() && u->shape.elements() == p->shape.elements()) {
        if (std::find(hosts.begin(), hosts.end(), u) == hosts.end()) hosts.push_back(u);
        continue;
      } else {
        ok = false;
      }
      for (int k : at) {
        if (plan->kernels[k].kind == FusedKernel::Kind::kGemmBias) ok = false;
        if (loop_size(plan->kernels[k]) != p->shape.elements()) ok = false;
        if (std::find(targets.begin(), targets.end(), k) == targets.end()) targets.push_back(k);
      }
    }
    if (!ok || targets.size() + hosts.size() > kMaxCopies) continue;
    for (int k : targets)
      if (plan->kernels[k].members.size() + bring.size() > kMaxMembers) ok = false;
    if (!ok) continue;
    for (const Instruction* h : hosts) {
      FusedKernel kernel;
      kernel.root = h;
      kernel.members = {h};
      plan->kernel_of[h->id] = static_cast<int>(plan->kernels.size());
      targets.push_back(static_cast<int>(plan->kernels.size()));
      plan->kernels.push_back(std::move(kernel));
    }
    for (int k : targets) {
      FusedKernel& kernel = plan->kernels[k];
      for (const Instruction* b : bring) {
        if (in_kernel(k, b)) continue;
        kernel.members.push_back(b);
        plan->copied_into[b->id].push_back(k);
      }
      SortByProgramOrder(&kernel.members, index_of);
    }
    plan->absorbed[p->id] = true;
    for (auto& d : plan->decisions)
      if (d.producer_id == p->id) {
        const int k = plan->kernel_of[d.consumer_id] >= 0 ? plan->kernel_of[d.consumer_id] : -1;
        d.fused = true;
        d.reason = kRecomputed;
        if (k >= 0) d.kernel = plan->kernels[k].name();
      }
  }
}

}  // namespace

std::string FusedKernel::name() const { return absl::StrCat("fusion.", root->id); }

int64_t FusionPlan::fused_ops() const {
  int64_t n = 0;
  for (const auto& k : kernels) n += static_cast<int64_t>(k.members.size()) - 1;
  return n;
}

std::vector<const Instruction*> FusionPlan::EvaluatedAt(const Instruction& i) const {
  std::vector<const Instruction*> at;
  if (const FusedKernel* k = KernelOf(i.id)) return {k->root};
  if (!Absorbed(i.id)) at.push_back(&i);
  if (i.id >= 0 && i.id < static_cast<int64_t>(copied_into.size()))
    for (int k : copied_into[i.id]) at.push_back(kernels[k].root);
  return at;
}

std::string KernelName(const Instruction& i, const FusionPlan* plan) {
  if (plan) {
    const FusedKernel* k = plan->KernelOf(i.id);
    if (k && k->root == &i) return k->name();
  }
  return Name(i);
}

FusionPlan PlanFusion(const Module& program) {
  FusionPlan plan;
  const auto& instrs = program.instructions();
  int64_t max_id = -1;
  for (const auto& i : instrs) max_id = std::max(max_id, i->id);
  plan.kernel_of.assign(max_id + 1, -1);
  plan.copied_into.assign(max_id + 1, {});
  plan.absorbed.assign(max_id + 1, false);
  std::vector<int64_t> index_of(max_id + 1, -1);
  std::vector<std::vector<const Instruction*>> users(max_id + 1);
  std::vector<bool> is_output(max_id + 1, false);
  for (size_t k = 0; k < instrs.size(); ++k) {
    index_of[instrs[k]->id] = static_cast<int64_t>(k);
    for (const Instruction* o : instrs[k]->operands) users[o->id].push_back(instrs[k].get());
  }
  for (const Instruction* o : program.outputs()) is_output[o->id] = true;

  std::vector<bool> member(max_id + 1, false), queued(max_id + 1, false);
  for (int64_t k = static_cast<int64_t>(instrs.size()) - 1; k >= 0; --k) {
    const Instruction& root = *instrs[k];
    if (plan.kernel_of[root.id] >= 0) continue;
    const bool reduce = ReduceRoot(root);
    if (!reduce && !WhyNotLoopOp(root).empty()) continue;
    FusedKernel kernel;
    kernel.kind = reduce ? FusedKernel::Kind::kReduce : FusedKernel::Kind::kLoop;
    kernel.root = &root;
    const int64_t loop = reduce ? root.operands[0]->shape.elements() : root.shape.elements();
    const int kernel_index = static_cast<int>(plan.kernels.size());
    const std::string kernel_name = kernel.name();
    std::vector<const Instruction*> members = {&root};
    member[root.id] = true;
    // Producers are decided latest-first: by then every member that could use
    // one has been taken in, so "all users inside the kernel" is final.
    std::priority_queue<std::pair<int64_t, const Instruction*>> candidates;
    std::vector<std::pair<const Instruction*, const Instruction*>> edges;  // (consumer, producer)
    auto offer = [&](const Instruction& consumer) {
      for (size_t j = 0; j < consumer.operands.size(); ++j) {
        const Instruction* p = consumer.operands[j];
        if (consumer.op == Opcode::kReduce && j == 1) continue;  // the init value: a scalar read once
        if (std::find(edges.begin(), edges.end(), std::pair<const Instruction*, const Instruction*>(&consumer, p)) == edges.end())
          edges.push_back({&consumer, p});
        if (!queued[p->id] && !member[p->id]) {
          queued[p->id] = true;
          candidates.push({index_of[p->id], p});
        }
      }
    };
    offer(root);
    std::vector<std::pair<const Instruction*, std::string>> verdicts;  // producer, reason ("" = fused)
    std::vector<const Instruction*> copies;  // broadcasts copied into this kernel
    while (!candidates.empty()) {
      const Instruction* p = candidates.top().second;
      candidates.pop();
      std::string why = WhyNotLoopOp(*p);
      bool copy = false;
      if (why.empty()) {
        bool only_broadcast_users = true;  // read through a broadcast's index map
        for (const Instruction* u : users[p->id])
          if (member[u->id] && u->op != Opcode::kBroadcastInDim) only_broadcast_users = false;
        if (only_broadcast_users) why = "read through a broadcast's index map (a smaller operand)";
        else if (p->shape.elements() != loop)
          why = absl::StrCat("has ", p->shape.elements(), " elements, the loop ", loop);
        else if (is_output[p->id]) why = "is a program output (it must be written)";
        else if (plan.kernel_of[p->id] >= 0)
          why = absl::StrCat("already in ", plan.kernels[plan.kernel_of[p->id]].name());
        else if (members.size() >= kMaxMembers) why = absl::StrCat("the kernel is full (", kMaxMembers, " ops)");
        else {
          for (const Instruction* u : users[p->id]) {
            if (!member[u->id]) {
              why = absl::StrCat("also used by ", Name(*u), " outside the kernel");
              break;
            }
            if (u->op == Opcode::kBroadcastInDim) {
              why = "also read through a broadcast inside the kernel";
              break;
            }
          }
        }
      }
      // A broadcast expanding a smaller operand that cannot join as an
      // ordinary member (other users, or already copied elsewhere) is copied.
      if (!why.empty() && Expands(*p) && p->shape.elements() == loop && members.size() < kMaxMembers &&
          plan.kernel_of[p->id] < 0) {
        bool read_in_place = false;  // by a broadcast member, which reads operands as values
        for (const Instruction* u : users[p->id])
          if (member[u->id] && u->op == Opcode::kBroadcastInDim) read_in_place = true;
        if (!read_in_place) {
          why.clear();
          copy = true;
        }
      }
      verdicts.push_back({p, copy ? std::string(kCopied) : why});
      if (why.empty()) {
        member[p->id] = true;
        members.push_back(p);
        if (copy) copies.push_back(p);
        else offer(*p);
      }
    }
    for (const Instruction* m : members) member[m->id] = false;
    for (const auto& [p, why] : verdicts) queued[p->id] = false;
    const bool alone = members.size() == 1;
    for (const auto& [c, p] : edges) {
      FusionDecision d;
      d.producer_id = p->id;
      d.consumer_id = c->id;
      d.producer = Name(*p);
      d.consumer = Name(*c);
      d.kernel = alone ? "" : kernel_name;
      for (const auto& [vp, why] : verdicts)
        if (vp == p) {
          d.fused = why.empty() || why == kCopied;
          d.reason = why.empty() ? "fused" : why;
        }
      plan.decisions.push_back(std::move(d));
    }
    if (alone) continue;
    SortByProgramOrder(&members, index_of);
    for (const Instruction* m : members)
      if (std::find(copies.begin(), copies.end(), m) == copies.end()) plan.kernel_of[m->id] = kernel_index;
    for (const Instruction* c : copies) plan.copied_into[c->id].push_back(kernel_index);
    kernel.members = std::move(members);
    plan.kernels.push_back(std::move(kernel));
  }
  // Absorbed: non-root members, and copied broadcasts whose every user is in
  // a kernel holding a copy.
  for (const auto& k : plan.kernels)
    for (const Instruction* m : k.members)
      if (m != k.root && plan.kernel_of[m->id] >= 0) plan.absorbed[m->id] = true;
  for (const auto& i : instrs) {
    const auto& into = plan.copied_into[i->id];
    if (into.empty() || is_output[i->id]) continue;
    bool covered = true;
    for (const Instruction* u : users[i->id]) {
      const int k = plan.kernel_of[u->id];
      if (k < 0 || std::find(into.begin(), into.end(), k) == into.end()) covered = false;
    }
    plan.absorbed[i->id] = covered;
  }
  GemmEpilogues(users, index_of, is_output, &plan);
  CopyCheapProducers(instrs, users, index_of, is_output, &plan);
  return plan;
}

}  // namespace shardscope::compiler
