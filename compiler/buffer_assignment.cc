#include "compiler/buffer_assignment.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardscope::compiler {

std::string FormatBytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; ++u; }
  return u == 0 ? absl::StrCat(b, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

namespace {
std::string OpName(const Instruction& i) {
  if (i.op == Opcode::kParameter && !i.name.empty()) return i.name;  // inputs by their tensor's name
  std::string n = OpcodeName(i.op);
  if (n.rfind("stablehlo.", 0) == 0) n = n.substr(10);
  return absl::StrCat(n, ".", i.id);
}
}  // namespace

MemoryPlan PlanMemory(const Module& program, const FusionPlan* fusion) {
  MemoryPlan plan;
  const auto& instrs = program.instructions();
  const int64_t n = static_cast<int64_t>(instrs.size());
  std::vector<int64_t> index_of_id;  // instruction id -> position
  for (int64_t k = 0; k < n; ++k) {
    if (instrs[k]->id >= static_cast<int64_t>(index_of_id.size())) index_of_id.resize(instrs[k]->id + 1, -1);
    index_of_id[instrs[k]->id] = k;
  }
  plan.buffers.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    const Instruction& i = *instrs[k];
    BufferInfo& b = plan.buffers[k];
    b.instruction_id = i.id;
    b.op = fusion ? KernelName(i, fusion) : OpName(i);
    // An op fused into a kernel makes no buffer; the kernel reads its
    // operands when it runs, at its root.
    const bool absorbed = fusion && fusion->Absorbed(i.id);
    b.bytes = absorbed ? 0 : i.shape.bytes();
    int64_t at = k;
    if (fusion) {
      at = -1;
      for (const Instruction* e : fusion->EvaluatedAt(i)) at = std::max(at, index_of_id[e->id]);
    }
    b.first = b.last = k;
    b.parameter = i.op == Opcode::kParameter;
    b.loc = i.loc;
    b.scope = i.scope;
    for (const Instruction* o : i.operands) {
      BufferInfo& ob = plan.buffers[index_of_id[o->id]];
      ob.last = std::max(ob.last, at);
    }
  }
  for (const Instruction* o : program.outputs()) {
    BufferInfo& b = plan.buffers[index_of_id[o->id]];
    b.output = true;
    b.last = n;
  }
  for (auto& b : plan.buffers) {
    if (b.parameter) {
      b.first = 0;
      b.last = n;
      plan.parameter_bytes += b.bytes;
    } else {
      plan.unshared_bytes += b.bytes;
    }
  }

  // Live bytes at each instruction: a sweep over interval starts and ends.
  std::vector<int64_t> delta(n + 2, 0);
  for (const auto& b : plan.buffers) {
    delta[b.first] += b.bytes;
    delta[b.last + 1] -= b.bytes;
  }
  int64_t live = 0;
  plan.live_bytes.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    live += delta[k];
    plan.live_bytes[k] = live;
    if (live > plan.peak_bytes) {
      plan.peak_bytes = live;
      plan.peak_index = k;
    }
  }
  for (int i = 0; i < static_cast<int>(plan.buffers.size()); ++i) {
    const auto& b = plan.buffers[i];
    if (b.first <= plan.peak_index && plan.peak_index <= b.last && b.bytes > 0) plan.live_at_peak.push_back(i);
  }
  std::stable_sort(plan.live_at_peak.begin(), plan.live_at_peak.end(),
                   [&](int a, int b) { return plan.buffers[a].bytes > plan.buffers[b].bytes; });

  // Offsets: largest first, each at the lowest offset free for its lifetime.
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(plan.buffers.size()); ++i)
    if (!plan.buffers[i].parameter && plan.buffers[i].bytes > 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return plan.buffers[a].bytes > plan.buffers[b].bytes; });
  std::vector<int> placed;
  for (int i : order) {
    BufferInfo& b = plan.buffers[i];
    std::vector<std::pair<int64_t, int64_t>> taken;  // address ranges of overlapping lifetimes
    for (int j : placed) {
      const BufferInfo& o = plan.buffers[j];
      if (o.first <= b.last && b.first <= o.last) taken.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + b.bytes <= lo) break;
      offset = std::max(offset, hi);
    }
    b.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + b.bytes);
    placed.push_back(i);
  }
  return plan;
}

std::string MemoryPlan::DescribeLargestAtPeak(int n) const {
  std::string s;
  for (int k = 0; k < n && k < static_cast<int>(live_at_peak.size()); ++k) {
    const BufferInfo& b = buffers[live_at_peak[k]];
    absl::StrAppend(&s, k ? ", " : "", FormatBytes(b.bytes), " ", b.op, b.parameter ? " (input" : " (");
    std::string where;
    if (b.loc.known()) where = absl::StrCat(b.loc.file, ":", b.loc.line);
    if (!b.scope.empty()) where += absl::StrCat(where.empty() ? "" : ", ", b.scope);
    absl::StrAppend(&s, b.parameter && !where.empty() ? " made at " : "", where, ")");
  }
  return s;
}

}  // namespace shardscope::compiler
