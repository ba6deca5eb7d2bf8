// Producer-consumer fusion. Elementwise ops, broadcasts and reshapes that feed
// one another are grouped into loop kernels that make one pass over memory
// (no intermediate is written out), and such chains feeding a reduce become a
// reduce kernel. The plan leaves the program itself untouched — it still
// prints as StableHLO — and tells the executor which ops run together, the
// cost model what crosses each kernel's boundary, and the user, edge by edge,
// what was fused and why the rest was not.
//
// Rules (what the runtime's fused kernels implement, runtime/kernels_fused.cc):
// - members are elementwise ops, compare/select/clamp/convert, broadcast_in_dim
//   and reshape, on f32 (i1 for masks); a kernel's root may also be a reduce
//   over leading or trailing dims (f32);
// - every member but the root has the loop's element count, and all of its
//   users inside the kernel (so nothing is computed twice) and is not a
//   program output (so nothing needs writing out);
// - operands that are not members (parameters, constants, GEMM results, a
//   broadcast's smaller operand) are read where they lie;
// - the one exception to "nothing computed twice": a broadcast that expands a
//   smaller operand is copied into every kernel that uses it (re-reading the
//   small operand costs less than writing and reading the full-size result),
//   and runs on its own only if some user is not in a kernel; likewise an
//   elementwise op whose users sit in different kernels (or are loop ops on
//   their own, which become one-op kernels) and whose operands are written
//   out anyway is recomputed in each of them and never written;
// - a kernel add(dot_general, broadcast(bias)) whose dot has no other user
//   becomes kGemmBias: the GEMM accumulates into the broadcast bias.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir.h"

namespace shardscope::compiler {

struct FusedKernel {
  // kGemmBias: add(dot_general, broadcast(bias)) where the dot has no other
  // user; the result starts as the broadcast bias and the GEMM accumulates
  // into it, so the add costs no pass over memory of its own.
  enum class Kind { kLoop, kReduce, kGemmBias };
  Kind kind = Kind::kLoop;
  const Instruction* root = nullptr;          // runs at the root's place
  std::vector<const Instruction*> members;    // program order, root last
  const Instruction* gemm = nullptr;          // kGemmBias: the dot_general
  const Instruction* bias = nullptr;          // kGemmBias: the broadcast
  std::string name() const;                   // "fusion.<root id>"
};

// One producer -> consumer edge the pass looked at.
struct FusionDecision {
  int64_t producer_id = 0, consumer_id = 0;
  std::string producer, consumer;  // "multiply.12"
  bool fused = false;
  std::string kernel;              // the consumer's kernel, e.g. "fusion.40" ("" if it stayed alone)
  std::string reason;              // why (not)
};

struct FusionPlan {
  std::vector<FusedKernel> kernels;
  std::vector<int> kernel_of;  // by instruction id: index into `kernels`, or -1
  // By instruction id: kernels holding a copy of this broadcast (see above);
  // a copied broadcast has no kernel_of of its own.
  std::vector<std::vector<int>> copied_into;
  std::vector<bool> absorbed;  // by instruction id: computed only inside kernels
  std::vector<FusionDecision> decisions;

  const FusedKernel* KernelOf(int64_t id) const {
    return id >= 0 && id < static_cast<int64_t>(kernel_of.size()) && kernel_of[id] >= 0
               ? &kernels[kernel_of[id]]
               : nullptr;
  }
  // A member that runs only inside kernels (it makes no buffer of its own).
  bool Absorbed(int64_t id) const {
    return id >= 0 && id < static_cast<int64_t>(absorbed.size()) && absorbed[id];
  }
  // The instructions (kernel roots, or `i` itself) at whose place `i` is
  // computed: where its operands are read.
  std::vector<const Instruction*> EvaluatedAt(const Instruction& i) const;
  int64_t fused_ops() const;  // members absorbed into kernels (copies included)
};

// Plans fusion for a per-device program (instruction ids index `kernel_of`).
FusionPlan PlanFusion(const Module& program);

// The op's name on timelines: "fusion.<id>" for a kernel root, else
// "<opcode>.<id>" ("add.12").
std::string KernelName(const Instruction& i, const FusionPlan* plan);

}  // namespace shardscope::compiler
