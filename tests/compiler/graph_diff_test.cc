// Aligned graph diffs on generated graphs: blocks of ops inserted, deleted
// and moved in random chains; exactly those ops must be reported (a diff by
// position would report every op after the edit).
#include <random>
#include <set>
#include <vector>

#include "compiler/graph_diff.h"
#include "compiler/ir.h"
#include "gtest/gtest.h"

namespace shardscope::compiler {
namespace {

constexpr DType kF32 = DType::kF32;

// One op of a generated chain: a unary op, or an add of the second input.
struct Step {
  Opcode op;
  int line;
};

std::unique_ptr<Module> BuildChain(const std::vector<Step>& steps) {
  auto m = std::make_unique<Module>();
  Instruction* x = m->Parameter(Shape(kF32, {4, 4}), "x", SourceLoc{"gen.cc", 1, ""});
  Instruction* w = m->Parameter(Shape(kF32, {4, 4}), "w", SourceLoc{"gen.cc", 2, ""});
  Instruction* v = x;
  for (const Step& s : steps) {
    const SourceLoc at{"gen.cc", s.line, ""};
    v = s.op == Opcode::kAdd ? m->Binary(Opcode::kAdd, v, w, at) : m->Unary(s.op, v, at);
  }
  m->AddOutput(v);
  return m;
}

std::vector<Step> RandomSteps(std::mt19937& rng, int n, int first_line) {
  const Opcode kinds[] = {Opcode::kExponential, Opcode::kTanh, Opcode::kNegate, Opcode::kAbs, Opcode::kAdd,
                          Opcode::kLogistic};
  std::vector<Step> s;
  for (int k = 0; k < n; ++k) s.push_back({kinds[rng() % 6], first_line + k});
  return s;
}

// The lines of the ops a diff reports, by kind.
std::multiset<int> Lines(const GraphDiff& d, const Module& a, const Module& b, OpChange::Kind kind) {
  std::multiset<int> lines;
  for (const auto& c : d.changes)
    if (c.kind == kind)
      lines.insert(c.new_index >= 0 ? b.instructions()[c.new_index]->loc.line : a.instructions()[c.old_index]->loc.line);
  return lines;
}

TEST(GraphDiffTest, InsertedBlocksAreExactlyWhatIsAdded) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Step> base = RandomSteps(rng, 5 + static_cast<int>(rng() % 30), 100);
    const int at = static_cast<int>(rng() % (base.size() + 1));
    std::vector<Step> block = RandomSteps(rng, 1 + static_cast<int>(rng() % 5), 1000);
    std::vector<Step> edited = base;
    edited.insert(edited.begin() + at, block.begin(), block.end());
    auto a = BuildChain(base), b = BuildChain(edited);
    GraphDiff d = DiffGraphs(*a, *b);
    std::multiset<int> want;
    for (const Step& s : block) want.insert(s.line);
    EXPECT_EQ(Lines(d, *a, *b, OpChange::Kind::kAdded), want) << "trial " << trial << " at " << at;
    EXPECT_EQ(d.changes.size(), block.size()) << "trial " << trial;
    // Deleting it again is exactly the same ops, removed.
    GraphDiff back = DiffGraphs(*b, *a);
    EXPECT_EQ(Lines(back, *b, *a, OpChange::Kind::kRemoved), want) << "trial " << trial;
    EXPECT_EQ(back.changes.size(), block.size()) << "trial " << trial;
  }
}

TEST(GraphDiffTest, MovedBlocksRewireOnlyTheirEdges) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Step> base = RandomSteps(rng, 8 + static_cast<int>(rng() % 30), 100);
    const int n = static_cast<int>(base.size());
    // Block [i, i+k) moves to after op j (j >= i+k+1, so it really moves).
    const int k = 1 + static_cast<int>(rng() % 3);
    const int i = static_cast<int>(rng() % (n - k - 1));
    const int j = i + k + static_cast<int>(rng() % (n - i - k));
    if (j <= i + k) continue;
    std::vector<Step> edited;
    for (int p = 0; p < n; ++p) {
      if (p >= i && p < i + k) continue;
      edited.push_back(base[p]);
      if (p == j) edited.insert(edited.end(), base.begin() + i, base.begin() + i + k);
    }
    if (j >= n) continue;
    auto a = BuildChain(base), b = BuildChain(edited);
    GraphDiff d = DiffGraphs(*a, *b);
    EXPECT_EQ(d.Count(OpChange::Kind::kAdded), 0) << "trial " << trial;
    EXPECT_EQ(d.Count(OpChange::Kind::kRemoved), 0) << "trial " << trial;
    // The block's first op, the op that followed the block, and the op that
    // now follows it read other values; nothing else changed.
    std::multiset<int> want = {base[i].line, base[i + k].line};
    if (j + 1 < n) want.insert(base[j + 1].line);
    EXPECT_EQ(Lines(d, *a, *b, OpChange::Kind::kChanged), want) << "trial " << trial << " i " << i << " k " << k
                                                                 << " j " << j;
    for (const auto& c : d.changes) EXPECT_EQ(c.what, "operands");
  }
}

TEST(GraphDiffTest, AnOpChangedInPlaceIsOneChange) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<Step> base = RandomSteps(rng, 5 + static_cast<int>(rng() % 20), 100);
    std::vector<Step> edited = base;
    const int at = static_cast<int>(rng() % base.size());
    // Another unary op at the same line.
    edited[at].op = base[at].op == Opcode::kNegate ? Opcode::kAbs : Opcode::kNegate;
    if (base[at].op == Opcode::kAdd) continue;  // an add and a unary op differ in arity: not one op
    auto a = BuildChain(base), b = BuildChain(edited);
    GraphDiff d = DiffGraphs(*a, *b);
    ASSERT_EQ(d.changes.size(), 1u) << "trial " << trial;
    EXPECT_EQ(d.changes[0].kind, OpChange::Kind::kChanged);
    EXPECT_EQ(d.changes[0].what, "opcode");
    EXPECT_EQ(b->instructions()[d.changes[0].new_index]->loc.line, base[at].line);
  }
}

TEST(GraphDiffTest, CodeMovedToOtherLinesIsNoDifference) {
  std::mt19937 rng(5);
  std::vector<Step> base = RandomSteps(rng, 20, 100);
  std::vector<Step> moved = base;
  for (Step& s : moved) s.line += 37;
  EXPECT_TRUE(DiffGraphs(*BuildChain(base), *BuildChain(moved)).empty());
}

}  // namespace
}  // namespace shardscope::compiler
