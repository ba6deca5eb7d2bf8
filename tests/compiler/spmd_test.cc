// The compiler's central test: sharded equals unsharded. Random small programs
// (elementwise ops, broadcasts, transposes, reshapes, dot_generals, reductions
// with and without an identity init, 1-D convolutions, embedding-style gathers and scatters,
// slices, concatenates, dynamic (update) slices, pads, while loops) are
// built with fixed seeds, compiled and run through runtime::Client on 1, 2, 4
// and 8 chips with random valid tiled / partially replicated shardings on
// their parameters, and compared with their single-device results. A few
// targeted tests check which collectives the partitioner chooses.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/ir.h"
#include "compiler/spmd.h"
#include "compiler/text.h"
#include "gtest/gtest.h"
#include "runtime/client.h"
#include "tests/compiler/run_on_chips.h"

namespace shardscope {
namespace {

using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;
using compiler::ReduceKind;

// ---------------------------------------------------------------- programs

struct Val {
  Instruction* i;
  double bound;  // |value| <= bound (estimate, keeps exp and products finite)
};

// Builds a random program into `m` from `seed`. Deterministic: the same seed
// gives the same program, so it can be built twice (sharded and not).
class Generator {
 public:
  Generator(uint64_t seed, Module* m) : rng_(seed), m_(*m) {}

  // Returns the op names used (global program), for the coverage printout.
  std::vector<std::string> Build() {
    int params = Uniform(1, 2);
    for (int k = 0; k < params; ++k) NewParam(RandomShape(Uniform(1, 3)));
    int ops = Uniform(3, 8);
    for (int k = 0; k < ops; ++k) Step();
    // Outputs: the last value, sometimes another one too.
    m_.AddOutput(pool_.back().i);
    if (Uniform(0, 1) == 1 && pool_.size() > 2) {
      Instruction* other = pool_[Uniform(0, static_cast<int>(pool_.size()) - 2)].i;
      m_.AddOutput(other);
    }
    return used_;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  // Mostly powers of two; the odd and the 6 make shardings that do not divide them (padded shards).
  int64_t Dim() {
    static const int64_t kDims[] = {2, 4, 8, 8, 4, 3, 6, 5};
    return kDims[Uniform(0, 7)];
  }
  std::vector<int64_t> RandomShape(int rank) {
    std::vector<int64_t> d;
    for (int k = 0; k < rank; ++k) d.push_back(Dim());
    return d;
  }
  Val& Pick() {
    // Prefer recent values.
    int n = static_cast<int>(pool_.size());
    int lo = std::max(0, n - 4);
    return pool_[Uniform(Uniform(0, 1) ? lo : 0, n - 1)];
  }
  Instruction* NewParam(std::vector<int64_t> dims) {
    Instruction* p = m_.Parameter(Shape(DType::kF32, std::move(dims)), absl::StrCat("p", m_.parameters().size()));
    pool_.push_back({p, 1.0});
    return p;
  }
  // Row indices (i32 in [0, 2), see RandomLiteral): not in the value pool.
  Instruction* NewIndices(std::vector<int64_t> dims) {
    return m_.Parameter(Shape(DType::kI32, std::move(dims)), absl::StrCat("p", m_.parameters().size()));
  }
  void Push(Instruction* i, double bound, const char* op) {
    pool_.push_back({i, bound});
    used_.push_back(op);
  }
  static int64_t Elements(const std::vector<int64_t>& d) {
    return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<>());
  }

  void Step() {
    for (int attempt = 0; attempt < 20; ++attempt)
      if (TryOne(Uniform(0, 18))) return;
  }

  bool TryOne(int kind) {
    Val a = Pick();
    const Shape& s = a.i->shape;
    switch (kind) {
      case 0: {  // binary elementwise
        if (s.rank() == 0 && Uniform(0, 1)) return false;
        Val b{nullptr, 0};
        if (Uniform(0, 2) > 0) {
          std::vector<Val> same;
          for (const Val& v : pool_)
            if (v.i->shape == s) same.push_back(v);
          b = same[Uniform(0, static_cast<int>(same.size()) - 1)];
        }
        if (!b.i) b = {NewParam(s.dims), 1.0};
        static const Opcode kOps[] = {Opcode::kAdd, Opcode::kSubtract, Opcode::kMultiply, Opcode::kMaximum};
        static const char* kNames[] = {"add", "subtract", "multiply", "maximum"};
        int o = Uniform(0, 3);
        double bound = o == 2 ? a.bound * b.bound : o == 3 ? std::max(a.bound, b.bound) : a.bound + b.bound;
        if (bound > 1e4) return false;
        Push(m_.Binary(kOps[o], a.i, b.i), bound, kNames[o]);
        return true;
      }
      case 1: {  // exp
        if (a.bound > 3) return false;
        Push(m_.Unary(Opcode::kExponential, a.i), std::exp(a.bound), "exponential");
        return true;
      }
      case 2: {  // broadcast_in_dim: insert a new dimension (or broadcast a scalar)
        if (s.rank() > 2) return false;
        int at = Uniform(0, s.rank());
        std::vector<int64_t> out = s.dims, bd;
        out.insert(out.begin() + at, Dim());
        if (Elements(out) > 2048) return false;
        for (int k = 0; k < s.rank(); ++k) bd.push_back(k < at ? k : k + 1);
        Push(m_.BroadcastInDim(a.i, out, bd), a.bound, "broadcast_in_dim");
        return true;
      }
      case 3: {  // transpose
        if (s.rank() < 2) return false;
        std::vector<int64_t> perm(s.rank());
        std::iota(perm.begin(), perm.end(), 0);
        while (std::is_sorted(perm.begin(), perm.end())) std::shuffle(perm.begin(), perm.end(), rng_);
        Push(m_.Transpose(a.i, perm), a.bound, "transpose");
        return true;
      }
      case 4: {  // reshape: merge two adjacent dims, or split one
        std::vector<int64_t> out = s.dims;
        if (s.rank() >= 2 && Uniform(0, 1)) {
          int k = Uniform(0, s.rank() - 2);
          out[k] *= out[k + 1];
          out.erase(out.begin() + k + 1);
        } else {
          if (s.rank() == 0 || s.rank() > 2) return false;
          int k = Uniform(0, s.rank() - 1);
          if (out[k] < 4 || out[k] % 2 != 0) return false;
          int64_t f = Uniform(0, 1) ? 2 : out[k] / 2;
          out[k] /= f;
          out.insert(out.begin() + k + 1, f);
        }
        Push(m_.Reshape(a.i, out), a.bound, "reshape");
        return true;
      }
      case 5: {  // dot_general
        if (s.rank() < 1) return false;
        int ca = Uniform(0, s.rank() - 1);
        int64_t k_size = s.dims[ca];
        compiler::DotDims dd;
        dd.lhs_contracting = {ca};
        Val b{nullptr, 0};
        // Batched: a second matching dimension of a becomes a batch dim.
        if (s.rank() >= 2 && Uniform(0, 2) == 0) {
          int ba = Uniform(0, s.rank() - 1);
          if (ba == ca) return false;
          std::vector<int64_t> bdims = {s.dims[ba], k_size};
          if (Uniform(0, 1)) bdims.push_back(Dim());
          std::shuffle(bdims.begin() + (Uniform(0, 1) ? 0 : 1), bdims.end(), rng_);
          b = {NewParam(bdims), 1.0};
          // Find which dims of b are the batch and contracting ones.
          const auto& bd = b.i->shape.dims;
          int rb = -1, rc = -1;
          for (int k = 0; k < static_cast<int>(bd.size()); ++k) {
            if (rb < 0 && bd[k] == s.dims[ba]) rb = k;
            else if (rc < 0 && bd[k] == k_size) rc = k;
          }
          if (rb < 0 || rc < 0) return false;
          dd.lhs_batch = {ba};
          dd.rhs_batch = {rb};
          dd.rhs_contracting = {rc};
        } else {
          if (Uniform(0, 1)) {
            std::vector<std::pair<Val, int>> cands;
            for (const Val& v : pool_)
              for (int k = 0; k < v.i->shape.rank(); ++k)
                if (v.i->shape.dims[k] == k_size) cands.push_back({v, k});
            auto [v, k] = cands[Uniform(0, static_cast<int>(cands.size()) - 1)];
            b = v;
            dd.rhs_contracting = {k};
          } else {
            std::vector<int64_t> bdims = {k_size};
            if (Uniform(0, 3) > 0) bdims.insert(bdims.begin() + Uniform(0, 1), Dim());
            b = {NewParam(bdims), 1.0};
            dd.rhs_contracting = {static_cast<int64_t>(
                std::find(b.i->shape.dims.begin(), b.i->shape.dims.end(), k_size) - b.i->shape.dims.begin())};
          }
        }
        double bound = a.bound * b.bound * static_cast<double>(k_size);
        if (bound > 1e4) return false;
        Instruction* r = m_.DotGeneral(a.i, b.i, dd);
        if (r->shape.rank() > 4 || r->shape.elements() > 4096) {
          return false;  // left unused; the verifier does not mind dead code
        }
        Push(r, bound, "dot_general");
        return true;
      }
      case 6: {  // reduce sum / max over a random non-empty subset of dims
        if (s.rank() < 1) return false;
        std::vector<int64_t> dims;
        for (int k = 0; k < s.rank(); ++k)
          if (Uniform(0, 1)) dims.push_back(k);
        if (dims.empty()) dims.push_back(Uniform(0, s.rank() - 1));
        bool is_max = Uniform(0, 2) == 0;
        double count = 1;
        for (int64_t d : dims) count *= static_cast<double>(s.dims[d]);
        // A sum's init is sometimes not its identity: it counts once, however split.
        const double init_value = is_max ? -std::numeric_limits<double>::infinity() : Uniform(0, 1) ? 0.0 : 0.75;
        double bound = is_max ? a.bound : a.bound * count + init_value;
        if (bound > 1e4) return false;
        Instruction* init = m_.ScalarConstant(DType::kF32, init_value);
        Push(m_.Reduce(a.i, init, dims, is_max ? ReduceKind::kMax : ReduceKind::kSum), bound,
             is_max ? "reduce_max" : "reduce_sum");
        return true;
      }
      case 7: {  // normalise: x - broadcast(reduce(x)) over one dimension (softmax-like)
        if (s.rank() < 1) return false;
        int64_t d = Uniform(0, s.rank() - 1);
        bool is_max = Uniform(0, 1);
        Instruction* init =
            m_.ScalarConstant(DType::kF32, is_max ? -std::numeric_limits<double>::infinity() : 0.0);
        Instruction* r = m_.Reduce(a.i, init, {d}, is_max ? ReduceKind::kMax : ReduceKind::kSum);
        std::vector<int64_t> kept;
        for (int k = 0; k < s.rank(); ++k)
          if (k != d) kept.push_back(k);
        Instruction* b = m_.BroadcastInDim(r, s.dims, kept);
        double rb = is_max ? a.bound : a.bound * static_cast<double>(s.dims[d]);
        if (a.bound + rb > 1e4) return false;
        used_.push_back(is_max ? "reduce_max" : "reduce_sum");
        used_.push_back("broadcast_in_dim");
        Push(m_.Binary(Opcode::kSubtract, a.i, b), a.bound + rb, "subtract");
        return true;
      }
      case 8: {  // a non-splat constant or an iota combined with a value
        if (s.rank() < 1 || s.elements() > 1024) return false;
        Instruction* c;
        if (Uniform(0, 1)) {
          Literal l(s);
          for (int64_t k = 0; k < l.elements(); ++k) l.as<float>()[k] = static_cast<float>((k * 7) % 11) / 11.f;
          c = m_.Constant(std::move(l));
          used_.push_back("constant");
        } else {
          c = m_.Iota(s, Uniform(0, s.rank() - 1));
          Instruction* scale = m_.BroadcastInDim(m_.ScalarConstant(DType::kF32, 0.125), s.dims, {});
          c = m_.Binary(Opcode::kMultiply, c, scale);
          used_.push_back("iota");
        }
        Push(m_.Binary(Opcode::kAdd, a.i, c), a.bound + 1 + static_cast<double>(s.elements()) / 8, "add");
        return true;
      }
      case 9: {  // gather: rows of a [V, D] table by indices of shape [B] or [B, T] (an embedding lookup)
        if (s.rank() != 2) return false;
        std::vector<int64_t> ids = {Dim()};
        if (Uniform(0, 1)) ids.push_back(Dim());
        if (Elements(ids) * s.dims[1] > 4096) return false;
        Instruction* indices = NewIndices(ids);
        compiler::GatherDims g;
        g.offset_dims = {static_cast<int64_t>(ids.size())};
        g.collapsed_slice_dims = {0};
        g.start_index_map = {0};
        g.index_vector_dim = static_cast<int64_t>(ids.size());
        g.slice_sizes = {1, s.dims[1]};
        Push(m_.Gather(a.i, indices, g), a.bound, "gather");
        return true;
      }
      case 10: {  // scatter: rows of [B(, T), D] updates into a [V, D] operand (an embedding gradient)
        if (s.rank() != 2) return false;
        std::vector<int64_t> ids = {Dim()};
        if (Uniform(0, 1)) ids.push_back(Dim());
        std::vector<int64_t> up = ids;
        up.push_back(s.dims[1]);
        if (Elements(up) > 4096) return false;
        Instruction* indices = NewIndices(ids);
        Instruction* updates = NewParam(up);
        pool_.pop_back();  // only this scatter reads it
        compiler::ScatterDims sd;
        sd.update_window_dims = {static_cast<int64_t>(ids.size())};
        sd.inserted_window_dims = {0};
        sd.scatter_dims_to_operand_dims = {0};
        sd.index_vector_dim = static_cast<int64_t>(ids.size());
        // Into zeros (as autograd makes the gradient) or into a value; adding or taking the max.
        const bool into_zeros = Uniform(0, 1);
        const bool is_max = Uniform(0, 2) == 0;
        Instruction* base =
            into_zeros ? m_.BroadcastInDim(m_.ScalarConstant(DType::kF32, 0.0), s.dims, {}) : a.i;
        double bound = (into_zeros ? 0 : a.bound) + (is_max ? 1.0 : static_cast<double>(Elements(ids)));
        if (bound > 1e4) return false;
        Push(m_.Scatter(base, indices, updates, sd, is_max ? ReduceKind::kMax : ReduceKind::kSum), bound,
             is_max ? "scatter_max" : "scatter_add");
        return true;
      }
      case 11: {  // slice: half of one dim (a contiguous half, or every other element), the others whole
        if (s.rank() < 1) return false;
        const int d = Uniform(0, s.rank() - 1);
        if (s.dims[d] < 4) return false;  // dims stay powers of two, at least 2
        compiler::SliceDims sd;
        for (int k = 0; k < s.rank(); ++k) {
          sd.start.push_back(0);
          sd.limit.push_back(s.dims[k]);
          sd.stride.push_back(1);
        }
        if (Uniform(0, 1)) {
          sd.start[d] = Uniform(0, 1) * s.dims[d] / 2;
          sd.limit[d] = sd.start[d] + s.dims[d] / 2;
        } else {
          sd.start[d] = Uniform(0, 1);
          sd.stride[d] = 2;
        }
        Push(m_.Slice(a.i, sd), a.bound, "slice");
        return true;
      }
      case 12: {  // concatenate with a value of the same shape
        if (s.rank() < 1 || s.elements() > 2048) return false;
        std::vector<Val> same;
        for (const Val& v : pool_)
          if (v.i->shape == s) same.push_back(v);
        Val b = Uniform(0, 1) ? same[Uniform(0, static_cast<int>(same.size()) - 1)] : Val{NewParam(s.dims), 1.0};
        Push(m_.Concatenate({a.i, b.i}, Uniform(0, s.rank() - 1)), std::max(a.bound, b.bound), "concatenate");
        return true;
      }
      case 13: {  // dynamic_slice: half of one dim at a constant start, the others whole
        if (s.rank() < 1) return false;
        const int d = Uniform(0, s.rank() - 1);
        if (s.dims[d] < 2) return false;
        std::vector<int64_t> sizes = s.dims;
        sizes[d] /= 2;
        std::vector<Instruction*> starts;
        for (int k = 0; k < s.rank(); ++k)
          starts.push_back(m_.ScalarConstant(DType::kI32, k == d ? Uniform(0, 3) : 0));
        Push(m_.DynamicSlice(a.i, starts, sizes), a.bound, "dynamic_slice");
        return true;
      }
      case 14: {  // dynamic_update_slice: a new value over half of one dim
        if (s.rank() < 1) return false;
        const int d = Uniform(0, s.rank() - 1);
        if (s.dims[d] < 2) return false;
        std::vector<int64_t> sizes = s.dims;
        sizes[d] /= 2;
        Instruction* update = NewParam(sizes);
        pool_.pop_back();
        std::vector<Instruction*> starts;
        for (int k = 0; k < s.rank(); ++k)
          starts.push_back(m_.ScalarConstant(DType::kI32, k == d ? Uniform(0, 3) : 0));
        Push(m_.DynamicUpdateSlice(a.i, update, starts), std::max(a.bound, 1.0), "dynamic_update_slice");
        return true;
      }
      case 15: {  // pad one dim to twice its size (edges, or one element after each)
        if (s.rank() < 1 || s.elements() > 2048) return false;
        const int d = Uniform(0, s.rank() - 1);
        compiler::PadDims pd;
        pd.low.assign(s.rank(), 0);
        pd.high.assign(s.rank(), 0);
        pd.interior.assign(s.rank(), 0);
        if (Uniform(0, 1)) {
          pd.low[d] = Uniform(0, 1) * s.dims[d];
          pd.high[d] = s.dims[d] - pd.low[d];
        } else {
          pd.interior[d] = 1;
          pd.high[d] = 1;
        }
        Push(m_.Pad(a.i, m_.ScalarConstant(DType::kF32, 0.5), pd), std::max(a.bound, 0.5), "pad");
        return true;
      }
      case 18: {  // a weight gradient: contract a [m, k] with a new [m, n] over m, plus a new [k, n]
        if (s.rank() != 2 || a.bound > 100) return false;
        Instruction* b = NewParam({s.dims[0], Dim()});
        compiler::DotDims dd;
        dd.lhs_contracting = dd.rhs_contracting = {0};
        Instruction* g = m_.DotGeneral(a.i, b, dd);
        Instruction* w = NewParam(g->shape.dims);
        Push(m_.Binary(Opcode::kAdd, g, w), a.bound * static_cast<double>(s.dims[0]) + 1, "dot_general");
        return true;
      }
      case 17: {  // convolution: a rank-3 value as [batch, features, width] with a new kernel
        if (s.rank() != 3 || s.elements() > 1024) return false;
        const int64_t width = std::min<int64_t>(s.dims[2], Uniform(1, 3));
        const double bound = a.bound * static_cast<double>(s.dims[1] * width);
        if (bound > 1e4) return false;
        compiler::ConvDims c;
        c.input_spatial = c.kernel_spatial = c.output_spatial = {2};
        if (Uniform(0, 1)) c.padding = {{width / 2, width - 1 - width / 2}};  // "same"
        if (Uniform(0, 3) == 0) c.window_strides = {2};
        Instruction* kernel = NewParam({Dim(), s.dims[1], width});
        Push(m_.Convolution(a.i, kernel, c), bound, "convolution");
        return true;
      }
      case 16: {  // while: a counter to 1..3 and two carried values of a's shape
        if (s.rank() < 1 || s.elements() > 1024) return false;
        const int trips = Uniform(1, 3);
        const int body_kind = Uniform(0, 2);
        const int d = Uniform(0, s.rank() - 1);
        auto cond = std::make_shared<Module>("cond");
        auto body = std::make_shared<Module>("body");
        const Shape counter(DType::kI32, {});
        for (Module* r : {cond.get(), body.get()}) {
          r->Parameter(counter, "i");
          r->Parameter(s, "x");
          r->Parameter(s, "y");
        }
        cond->AddOutput(cond->Compare(cond->parameters()[0], cond->ScalarConstant(DType::kI32, trips),
                                      compiler::CompareDirection::kLT));
        Instruction* i = body->parameters()[0];
        Instruction* x = body->parameters()[1];
        Instruction* y = body->parameters()[2];
        Instruction* next = nullptr;
        double bound = 0;
        Instruction* init_x = a.i;
        if (body_kind == 0) {  // x = tanh(x) + y / 2
          Instruction* half = body->BroadcastInDim(body->ScalarConstant(DType::kF32, 0.5), s.dims, {});
          next = body->Binary(Opcode::kAdd, body->Unary(Opcode::kTanh, x), body->Binary(Opcode::kMultiply, y, half));
          bound = 1 + a.bound / 2;
        } else if (body_kind == 1) {  // x = x / 2 + the mean of x along d (a collective when d is split)
          Instruction* sum = body->Reduce(x, body->ScalarConstant(DType::kF32, 0), {d}, ReduceKind::kSum);
          std::vector<int64_t> keep;
          for (int k = 0; k < s.rank(); ++k)
            if (k != d) keep.push_back(k);
          Instruction* mean = body->Binary(
              Opcode::kMultiply, body->BroadcastInDim(sum, s.dims, keep),
              body->BroadcastInDim(body->ScalarConstant(DType::kF32, 1.0 / static_cast<double>(s.dims[d])), s.dims, {}));
          Instruction* half = body->BroadcastInDim(body->ScalarConstant(DType::kF32, 0.5), s.dims, {});
          next = body->Binary(Opcode::kAdd, body->Binary(Opcode::kMultiply, x, half), mean);
          bound = a.bound * std::pow(1.5, trips);
        } else {  // an accumulator from zeros: x = x + y (y = a)
          init_x = m_.BroadcastInDim(m_.ScalarConstant(DType::kF32, 0), s.dims, {});
          next = body->Binary(Opcode::kAdd, x, y);
          bound = a.bound * trips;
        }
        body->AddOutput(body->Binary(Opcode::kAdd, i, body->ScalarConstant(DType::kI32, 1)));
        body->AddOutput(next);
        body->AddOutput(y);
        std::vector<Instruction*> out =
            m_.While({m_.ScalarConstant(DType::kI32, 0), init_x, a.i}, std::move(cond), std::move(body));
        Push(out[1], bound, "while");
        return true;
      }
    }
    return false;
  }

  std::mt19937_64 rng_;
  Module& m_;
  std::vector<Val> pool_;
  std::vector<std::string> used_;
};

// A random valid sharding of `dims` over n devices: per dimension a tile count
// up to its size (not always dividing it: a padded last shard), their product
// dividing n, the rest replicated; devices in a random order.
Sharding RandomSharding(const std::vector<int64_t>& dims, int n, std::mt19937_64& rng) {
  if (std::uniform_int_distribution<int>(0, 5)(rng) == 0) return Sharding::Replicated();
  std::vector<int64_t> tiles(dims.size(), 1);
  int64_t left = n;
  std::vector<int> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int d : order) {
    std::vector<int64_t> options;
    for (int64_t t = 1; t <= left; t *= 2)
      if (t <= dims[d] && left % t == 0) options.push_back(t);
    tiles[d] = options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
    left /= tiles[d];
  }
  std::vector<int64_t> devices(n);
  std::iota(devices.begin(), devices.end(), 0);
  if (std::uniform_int_distribution<int>(0, 2)(rng) > 0) std::shuffle(devices.begin(), devices.end(), rng);
  bool repl = left > 1;
  if (repl) tiles.push_back(left);
  auto s = Sharding::Tiled(tiles, devices, repl);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Sharding();
}

// f32 values in [-1, 1]; i32 values are row indices in [0, 2) (every dim is >= 2).
Literal RandomLiteral(const Shape& shape, std::mt19937_64& rng) {
  Literal l(shape);
  if (shape.dtype == DType::kI32) {
    std::uniform_int_distribution<int32_t> row(0, 1);
    for (int64_t k = 0; k < l.elements(); ++k) l.as<int32_t>()[k] = row(rng);
    return l;
  }
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t k = 0; k < l.elements(); ++k) l.as<float>()[k] = u(rng);
  return l;
}


// Max |a-b| relative to the reference's scale.
std::string CompareLiterals(const Literal& got, const Literal& want, double rtol) {
  if (got.shape() != want.shape()) return absl::StrCat("shape ", got.shape().ToString(), " vs ", want.shape().ToString());
  double scale = 1e-6;
  for (int64_t k = 0; k < want.elements(); ++k) scale = std::max(scale, std::abs(want.GetDouble(k)));
  for (int64_t k = 0; k < want.elements(); ++k) {
    double g = got.GetDouble(k), w = want.GetDouble(k);
    if (std::isnan(g) != std::isnan(w) || std::abs(g - w) > rtol * scale + 1e-6 * std::abs(w))
      return absl::StrCat("element ", k, ": got ", g, ", want ", w, " (scale ", scale, ")");
  }
  return "";
}

TEST(ShardedEqualsUnsharded, RandomPrograms) {
  constexpr int kSeeds = 500;
  std::map<std::string, int> op_programs, op_count;
  std::map<std::string, int> coll_programs, coll_count;
  std::map<int, int> programs_per_n;
  int programs = 0, failures = 0, uneven_runs = 0;
  for (int seed = 0; seed < kSeeds; ++seed) {
    Module ref;
    std::vector<std::string> used = Generator(seed, &ref).Build();
    ASSERT_TRUE(compiler::Verify(ref).ok()) << compiler::Verify(ref) << "\n" << compiler::PrintModule(ref);
    std::mt19937_64 rng(1000 + seed);
    std::vector<Literal> inputs;
    for (const Instruction* p : ref.parameters()) inputs.push_back(RandomLiteral(p->shape, rng));
    std::vector<Sharding> repl(inputs.size());
    auto want = RunProgram(ClientFor(1), ref, repl, inputs);
    ASSERT_TRUE(want.ok()) << "seed " << seed << ": " << want.status() << "\n" << compiler::PrintModule(ref);

    for (int n : {1, 2, 4, 8}) {
      // A few sharding draws per program and device count (one on one device).
      for (int draw = 0; draw < (n == 1 ? 1 : 2); ++draw) {
        Module m;
        Generator(seed, &m).Build();
        std::vector<Sharding> shardings;
        bool uneven = false;
        for (Instruction* p : m.parameters()) {
          shardings.push_back(RandomSharding(p->shape.dims, n, rng));
          p->sharding = shardings.back();
          for (int d = 0; d < p->shape.rank(); ++d) uneven |= p->shape.dims[d] % shardings.back().TilesInDim(d) != 0;
        }
        uneven_runs += uneven;
        std::shared_ptr<const runtime::Executable> exe;
        auto got = RunProgram(ClientFor(n), m, shardings, inputs, &exe);
        ++programs;
        ++programs_per_n[n];
        std::string ctx = absl::StrCat("seed ", seed, " on ", n, " devices\n", compiler::PrintModule(m));
        if (!got.ok()) {
          ++failures;
          ADD_FAILURE() << got.status() << "\n" << ctx;
          continue;
        }
        ASSERT_EQ(got->size(), want->size());
        for (size_t k = 0; k < got->size(); ++k) {
          std::string diff = CompareLiterals((*got)[k], (*want)[k], 1e-4);
          if (!diff.empty()) {
            ++failures;
            ADD_FAILURE() << "output " << k << ": " << diff << "\n" << ctx << "\nlocal program:\n"
                          << compiler::PrintModule(*exe->program);
          }
        }
        std::map<std::string, int> here;
        // The program and its loops' regions (collectives there run every iteration).
        std::function<void(const Module&)> count = [&](const Module& prog) {
          for (const auto& i : prog.instructions()) {
            if (i->op == Opcode::kWhile) {
              bool split = false;
              for (const Instruction* p : i->body->parameters())
                for (int d = 0; d < p->shape.rank() && p->sharding; ++d) split |= p->sharding->TilesInDim(d) > 1;
              here["while_split"] += split;
              for (const auto& b : i->body->instructions()) here["while_body_collective"] += compiler::IsCollective(b->op);
              count(*i->cond);
              count(*i->body);
            }
            if (i->op == Opcode::kAllReduce) ++here["all_reduce"];
            if (i->op == Opcode::kAllGather) ++here["all_gather"];
            if (i->op == Opcode::kReduceScatter) ++here["reduce_scatter"];
            if (i->op == Opcode::kAllToAll) ++here["all_to_all"];
            if (i->op == Opcode::kCollectivePermute) ++here["collective_permute"];
            if (i->op == Opcode::kDynamicSlice) ++here["dynamic_slice"];
          }
        };
        count(*exe->program);
        for (auto& [k, v] : here) {
          if (v == 0) continue;
          ++coll_programs[k];
          coll_count[k] += v;
        }
        std::map<std::string, int> ops_here;
        for (const auto& o : used) ++ops_here[o];
        for (auto& [k, v] : ops_here) {
          ++op_programs[k];
          op_count[k] += v;
        }
      }
    }
  }
  std::printf("sharded-equals-unsharded: %d random programs, %d partitioned runs (%d on 1, %d on 2, %d on 4, %d on 8 "
              "devices), %d failures\n",
              kSeeds, programs, programs_per_n[1], programs_per_n[2], programs_per_n[4], programs_per_n[8], failures);
  std::printf("  runs with a parameter split unevenly (padded shards): %d\n", uneven_runs);
  std::printf("  ops in the global programs (sharded runs using it / total uses):\n");
  for (auto& [k, v] : op_programs) std::printf("    %-18s %4d / %4d\n", k.c_str(), v, op_count[k]);
  std::printf("  collectives in the compiled per-device programs (programs / total):\n");
  for (const char* k : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute", "dynamic_slice"})
    std::printf("    %-18s %4d / %4d\n", k, coll_programs[k], coll_count[k]);
  std::printf("  while loops carrying a split value: %d programs; collectives inside loop bodies: %d programs / %d\n",
              coll_programs["while_split"], coll_programs["while_body_collective"], coll_count["while_body_collective"]);
  EXPECT_GE(programs, 3000);
  EXPECT_GE(uneven_runs, 300);
  EXPECT_GT(coll_programs["all_reduce"], 0);
  EXPECT_GT(coll_programs["all_gather"], 0);
  EXPECT_GT(coll_programs["reduce_scatter"], 0);
  EXPECT_GT(coll_programs["all_to_all"], 0);
  EXPECT_GT(coll_programs["collective_permute"], 0);
  EXPECT_GT(coll_programs["dynamic_slice"], 0);
  EXPECT_GT(coll_programs["while_split"], 0);
  EXPECT_GT(coll_programs["while_body_collective"], 0);
  for (const char* op : {"add", "subtract", "multiply", "maximum", "exponential", "broadcast_in_dim", "transpose",
                         "reshape", "dot_general", "reduce_sum", "reduce_max", "constant", "iota", "gather",
                         "scatter_add", "scatter_max", "slice", "concatenate", "dynamic_slice",
                         "dynamic_update_slice", "pad", "convolution", "while"})
    EXPECT_GT(op_programs[op], 0) << op;
}

// ---------------------------------------------------------------- targeted

int CountOps(const Module& m, Opcode op) {
  int c = 0;
  for (const auto& i : m.instructions()) c += i->op == op;
  return c;
}

TEST(SpmdTest, DataParallelMatmulNeedsNoCollective) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 4}), "x");
  x->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  Instruction* w = m.Parameter(Shape(DType::kF32, {4, 6}), "w");
  m.AddOutput(m.DotGeneral(x, w, {{}, {}, {1}, {0}}));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->collectives, 0);
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllReduce), 0);
  EXPECT_EQ(r->output_shardings[0].ToString(), "{devices=[4,1]0,1,2,3}");
  EXPECT_EQ(r->local->parameters()[0]->shape, Shape(DType::kF32, {2, 4}));
}

TEST(SpmdTest, ContractingOverShardedDimAllReduces) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 4}), "x");
  x->sharding = *Sharding::Parse("{devices=[1,2]0,1}");
  Instruction* w = m.Parameter(Shape(DType::kF32, {4, 6}), "w");
  w->sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  m.AddOutput(m.DotGeneral(x, w, {{}, {}, {1}, {0}}));
  auto r = compiler::SpmdPartition(m, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllReduce), 1);
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllGather), 0);
  EXPECT_TRUE(r->output_shardings[0].IsReplicated());
}

TEST(SpmdTest, ReduceOverShardedDimAllReduces) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 4}), "x");
  x->sharding = *Sharding::Parse("{devices=[2,2]0,1,2,3}");
  Instruction* init = m.ScalarConstant(DType::kF32, 0);
  m.AddOutput(m.Reduce(x, init, {0}, ReduceKind::kSum));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(CountOps(*r->local, Opcode::kAllReduce), 1);
  for (const auto& i : r->local->instructions()) {
    if (i->op == Opcode::kAllReduce) {
      EXPECT_EQ(i->replica_groups, (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
    }
  }
  EXPECT_EQ(r->output_shardings[0].ToString(), "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}");
}

// An embedding lookup as the frontend records it: rows of a [V, D] table by ids.
compiler::GatherDims RowsOf(int64_t ids_rank, int64_t d) {
  compiler::GatherDims g;
  g.offset_dims = {ids_rank};
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = ids_rank;
  g.slice_sizes = {1, d};
  return g;
}

TEST(SpmdTest, EmbeddingLookupSplitByIdsLooksUpLocally) {
  Module m;
  Instruction* table = m.Parameter(Shape(DType::kF32, {16, 8}), "table");
  Instruction* ids = m.Parameter(Shape(DType::kI32, {8, 4}), "ids");
  ids->sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  m.AddOutput(m.Gather(table, ids, RowsOf(2, 8)));
  auto r = compiler::SpmdPartition(m, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->collectives, 0);
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllGather), 0);
  EXPECT_EQ(r->output_shardings[0].ToString(), "{devices=[2,1,1]0,1}");
  EXPECT_TRUE(r->rematerializations.empty());
}

TEST(SpmdTest, EmbeddingTableSplitOnFeaturesGathersItsColumns) {
  Module m;
  Instruction* table = m.Parameter(Shape(DType::kF32, {16, 8}), "table");
  table->sharding = *Sharding::Parse("{devices=[1,4]0,1,2,3}");
  Instruction* ids = m.Parameter(Shape(DType::kI32, {6}), "ids");
  m.AddOutput(m.Gather(table, ids, RowsOf(1, 8)));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->collectives, 0);
  EXPECT_EQ(r->output_shardings[0].ToString(), "{devices=[1,4]0,1,2,3}");
  for (const auto& i : r->local->instructions())
    if (i->op == Opcode::kGather) { EXPECT_EQ(i->shape, Shape(DType::kF32, {6, 2})); }
}

// The embedding gradient under data parallelism: each device scatters its
// share of the rows into zeros, one all-reduce adds them up.
TEST(SpmdTest, EmbeddingGradientSplitByIdsAllReducesOnce) {
  Module m;
  Instruction* ids = m.Parameter(Shape(DType::kI32, {8}), "ids");
  ids->sharding = *Sharding::Parse("{devices=[4]0,1,2,3}");
  Instruction* g = m.Parameter(Shape(DType::kF32, {8, 4}), "g");
  g->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  Instruction* zeros = m.BroadcastInDim(m.ScalarConstant(DType::kF32, 0), {16, 4}, {});
  compiler::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  m.AddOutput(m.Scatter(zeros, ids, g, sd, ReduceKind::kSum));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllReduce), 1);
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllGather), 0);
  EXPECT_TRUE(r->output_shardings[0].IsReplicated());

  // And the sum is right: ids 0,1,0,1,... each row of g is k + column / 10.
  std::vector<int32_t> idv(8);
  std::vector<float> gv(32);
  for (int k = 0; k < 8; ++k) {
    idv[k] = k % 2;
    for (int c = 0; c < 4; ++c) gv[k * 4 + c] = static_cast<float>(k) + static_cast<float>(c) / 10;
  }
  std::vector<Literal> in;
  in.push_back(Literal::FromI32({8}, idv));
  in.push_back(Literal::FromF32({8, 4}, gv));
  auto got = RunProgram(ClientFor(4), m, {*ids->sharding, *g->sharding}, in);
  ASSERT_TRUE(got.ok()) << got.status();
  const Literal& out = (*got)[0];
  for (int c = 0; c < 4; ++c) {
    EXPECT_FLOAT_EQ(out.as<float>()[0 * 4 + c], 0 + 2 + 4 + 6 + 0.4f * c);
    EXPECT_FLOAT_EQ(out.as<float>()[1 * 4 + c], 1 + 3 + 5 + 7 + 0.4f * c);
    EXPECT_EQ(out.as<float>()[2 * 4 + c], 0.f);
  }
}

// FSDP's weight update: the gradient sums over a batch split four ways and
// meets a weight split two ways, so each device gets its block by a
// reduce_scatter (over the devices holding different blocks) and an
// all-reduce (over those holding the same one) instead of the whole sum.
TEST(SpmdTest, GradientMeetingASplitWeightIsReduceScattered) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 4}), "x");
  x->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  Instruction* dy = m.Parameter(Shape(DType::kF32, {8, 6}), "dy");
  dy->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  Instruction* w = m.Parameter(Shape(DType::kF32, {4, 6}), "w");
  w->sharding = *Sharding::Parse("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}");
  Instruction* grad = m.DotGeneral(x, dy, {{}, {}, {0}, {0}});  // [4, 6], summed over the batch
  m.AddOutput(m.Binary(Opcode::kSubtract, w, grad));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(CountOps(*r->local, Opcode::kReduceScatter), 1) << compiler::PrintModule(*r->local);
  for (const auto& i : r->local->instructions()) {
    if (i->op == Opcode::kReduceScatter) {
      EXPECT_EQ(i->replica_groups, (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
      EXPECT_EQ(i->shape, Shape(DType::kF32, {2, 6}));
    }
    if (i->op == Opcode::kAllReduce) {
      EXPECT_EQ(i->replica_groups, (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
    }
  }
  std::mt19937_64 rng(5);
  std::vector<Literal> in;
  for (const Instruction* p : m.parameters()) in.push_back(RandomLiteral(p->shape, rng));
  auto got = RunProgram(ClientFor(4), m, {*x->sharding, *dy->sharding, *w->sharding}, in);
  ASSERT_TRUE(got.ok()) << got.status();
  for (Instruction* p : {x, dy, w}) p->sharding.reset();
  auto want = RunProgram(ClientFor(1), m, {Sharding(), Sharding(), Sharding()}, in);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(CompareLiterals((*got)[0], (*want)[0], 1e-5), "");
}

// A reduce over a split dim counts its init once, not once per shard.
TEST(SpmdTest, ReduceInitCountsOnceHoweverSplit) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8}), "x");
  x->sharding = *Sharding::Parse("{devices=[4]0,1,2,3}");
  m.AddOutput(m.Reduce(x, m.ScalarConstant(DType::kF32, 10), {0}, ReduceKind::kSum));
  auto got = RunProgram(ClientFor(4), m, {*x->sharding}, {Literal::FromF32({8}, std::vector<float>(8, 1.f))});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].as<float>()[0], 18.f);
}

// Runs `m` (parameters annotated) on n chips with NaN in every padded shard,
// and unsharded, and compares the outputs.
void ExpectShardedEqualsUnsharded(Module& m, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Literal> in;
  std::vector<Sharding> shardings, repl;
  for (Instruction* p : m.parameters()) {
    in.push_back(RandomLiteral(p->shape, rng));
    shardings.push_back(p->sharding.value_or(Sharding()));
    repl.push_back(Sharding());
  }
  auto got = RunProgram(ClientFor(n), m, shardings, in);
  ASSERT_TRUE(got.ok()) << got.status();
  Module whole;  // the same program without annotations
  std::map<const Instruction*, Instruction*> same;
  for (const auto& i : m.instructions()) {
    auto c = std::make_unique<Instruction>(*i);
    c->sharding.reset();
    for (auto& o : c->operands) o = same[o];
    same[i.get()] = whole.Add(std::move(c));
  }
  for (const Instruction* o : m.outputs()) whole.AddOutput(same[o]);
  auto want = RunProgram(ClientFor(1), whole, repl, in);
  ASSERT_TRUE(want.ok()) << want.status();
  for (size_t k = 0; k < want->size(); ++k) EXPECT_EQ(CompareLiterals((*got)[k], (*want)[k], 1e-5), "") << k;
}

// 6 rows over 4 chips: ceil(6/4) = 2 each, the last chip all padding. A sum
// and a dot over the split dim mask the padding (NaN here) out.
TEST(SpmdTest, UnevenSplitsArePaddedAndMasked) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {6, 5}), "x");
  x->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  Instruction* w = m.Parameter(Shape(DType::kF32, {6, 3}), "w");
  w->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  m.AddOutput(m.Reduce(m.Unary(Opcode::kExponential, x), m.ScalarConstant(DType::kF32, 0), {0}, ReduceKind::kSum));
  m.AddOutput(m.DotGeneral(x, w, {{}, {}, {0}, {0}}));  // [5, 3], summed over the split rows
  m.AddOutput(m.Reduce(x, m.ScalarConstant(DType::kF32, -INFINITY), {0, 1}, ReduceKind::kMax));
  m.AddOutput(m.Binary(Opcode::kMultiply, x, x));  // stays split: assembled without the padding
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->local->parameters()[0]->shape, Shape(DType::kF32, {2, 5}));
  EXPECT_EQ(r->output_shardings[3].ToString(), "{devices=[4,1]0,1,2,3}");
  EXPECT_GE(CountOps(*r->local, Opcode::kSelect), 3) << compiler::PrintModule(*r->local);
  ExpectShardedEqualsUnsharded(m, 4, 11);
}

// The gradient of a [3, 5] weight split 2 ways on its 5 columns: the partial
// sums are padded to 6 columns and reduce-scattered, 3 to each chip.
TEST(SpmdTest, UnevenGradientIsReduceScattered) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {4, 3}), "x");
  x->sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  Instruction* dy = m.Parameter(Shape(DType::kF32, {4, 5}), "dy");
  dy->sharding = *Sharding::Parse("{devices=[2,1]0,1}");
  Instruction* w = m.Parameter(Shape(DType::kF32, {3, 5}), "w");
  w->sharding = *Sharding::Parse("{devices=[1,2]0,1}");
  m.AddOutput(m.Binary(Opcode::kSubtract, w, m.DotGeneral(x, dy, {{}, {}, {0}, {0}})));
  auto r = compiler::SpmdPartition(m, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(CountOps(*r->local, Opcode::kReduceScatter), 1) << compiler::PrintModule(*r->local);
  for (const auto& i : r->local->instructions()) {
    if (i->op == Opcode::kReduceScatter) {
      EXPECT_EQ(i->shape, Shape(DType::kF32, {3, 3}));
    }
  }
  ExpectShardedEqualsUnsharded(m, 2, 12);
}

// Moving an uneven split to another dim gathers it (the padding cut off),
// then pads the new dim to a multiple of its tiles before each chip slices.
TEST(SpmdTest, UnevenReshardCutsAndPads) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {5, 7}), "x");
  x->sharding = *Sharding::Parse("{devices=[4,1]0,1,2,3}");
  Instruction* y = m.Unary(Opcode::kNegate, x);
  y->sharding = *Sharding::Parse("{devices=[1,4]0,1,2,3}");
  m.AddOutput(m.Reduce(y, m.ScalarConstant(DType::kF32, 0), {1}, ReduceKind::kSum));
  ExpectShardedEqualsUnsharded(m, 4, 13);
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllGather), 1) << compiler::PrintModule(*r->local);
  EXPECT_EQ(CountOps(*r->local, Opcode::kPad), 1) << compiler::PrintModule(*r->local);
}

// {maximal device=2}: only chip 2 holds the value (the others zeros); the
// program broadcasts it from there before using it.
TEST(SpmdTest, MaximalParameterIsBroadcastFromItsDevice) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {2, 3}), "x");
  x->sharding = Sharding::Maximal(2);
  m.AddOutput(m.Binary(Opcode::kMultiply, x, x));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(CountOps(*r->local, Opcode::kCollectiveBroadcast), 1) << compiler::PrintModule(*r->local);
  for (const auto& i : r->local->instructions())
    if (i->op == Opcode::kCollectiveBroadcast) {
      EXPECT_EQ(i->replica_groups[0][0], 2);
    }
  EXPECT_EQ(r->param_shardings[0].ToString(), "{maximal device=2}");
  ExpectShardedEqualsUnsharded(m, 4, 14);
  Module bad;
  Instruction* y = bad.Parameter(Shape(DType::kF32, {2}), "y");
  y->sharding = Sharding::Maximal(7);
  bad.AddOutput(bad.Unary(Opcode::kNegate, y));
  auto e = compiler::SpmdPartition(bad, 4);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("parameter 'y': {maximal device=7} names a device"), std::string::npos)
      << e.status();
}

// {manual}: each chip's own value, as a per-chip program has it: the ops on
// it are left as written (no collectives, global shapes); mixing it with a
// value the partitioner lays out is an error naming the op.
TEST(SpmdTest, ManualValuesAreLeftAlone) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {4}), "x");
  x->sharding = Sharding::Manual();
  Instruction* y = m.Binary(Opcode::kAdd, x, m.BroadcastInDim(m.ScalarConstant(DType::kF32, 1), {4}, {}));
  m.AddOutput(m.Reduce(y, m.ScalarConstant(DType::kF32, 0), {0}, ReduceKind::kSum));
  auto r = compiler::SpmdPartition(m, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->collectives, 0);
  EXPECT_EQ(r->local->parameters()[0]->shape, Shape(DType::kF32, {4}));
  EXPECT_EQ(r->output_shardings[0].ToString(), "{manual}");
  Module mixed;
  Instruction* a = mixed.Parameter(Shape(DType::kF32, {4}), "a");
  a->sharding = Sharding::Manual();
  Instruction* b = mixed.Parameter(Shape(DType::kF32, {4}), "b");
  b->sharding = *Sharding::Parse("{devices=[2]0,1}");
  mixed.AddOutput(mixed.Binary(Opcode::kAdd, a, b, {"samples/m.cc", 9, ""}));
  auto e = compiler::SpmdPartition(mixed, 2);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("stablehlo.add at samples/m.cc:9 mixes manually sharded values"),
            std::string::npos)
      << e.status();
}

TEST(SpmdTest, ShardingForWrongDeviceCountIsAnError) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8}), "x");
  x->sharding = *Sharding::Parse("{devices=[2]0,1}");
  m.AddOutput(m.Unary(Opcode::kNegate, x));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("parameter 'x'"), std::string::npos) << r.status();
}

// NCHW x OIHW -> NCHW, 3x3, padding 1 (as the frontend's conv2d records).
compiler::ConvDims Nchw() {
  compiler::ConvDims c;
  c.input_spatial = c.kernel_spatial = c.output_spatial = {2, 3};
  c.padding = {{1, 1}, {1, 1}};
  return c;
}

TEST(SpmdTest, BatchSplitConvolutionPoolingAndPaddingNeedNoCollective) {
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 3, 6, 6}), "x");
  x->sharding = *Sharding::Parse("{devices=[4,1,1,1]0,1,2,3}");
  Instruction* w = m.Parameter(Shape(DType::kF32, {5, 3, 3, 3}), "w");
  Instruction* y = m.Convolution(x, w, Nchw());
  compiler::WindowDims win;
  win.dimensions = win.strides = {1, 1, 2, 2};
  Instruction* pooled = m.ReduceWindow(y, m.ScalarConstant(DType::kF32, 0), win, ReduceKind::kSum);
  m.AddOutput(m.Pad(pooled, m.ScalarConstant(DType::kF32, 0), {{0, 0, 1, 0}, {0, 0, 0, 1}, {0, 0, 1, 1}}));
  auto r = compiler::SpmdPartition(m, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->collectives, 0);
  EXPECT_EQ(r->output_shardings[0].ToString(), "{devices=[4,1,1,1]0,1,2,3}");
  for (const auto& i : r->local->instructions()) {
    if (i->op == Opcode::kConvolution) {
      EXPECT_EQ(i->shape, Shape(DType::kF32, {2, 5, 6, 6}));
    }
  }
}

TEST(SpmdTest, KernelGradientOfSplitBatchAllReduces) {
  // dw = conv(x with its batch as the feature dim, g as the kernel): the batch is contracted.
  Module m;
  Instruction* x = m.Parameter(Shape(DType::kF32, {8, 3, 6, 6}), "x");
  x->sharding = *Sharding::Parse("{devices=[2,1,1,1]0,1}");
  Instruction* g = m.Parameter(Shape(DType::kF32, {8, 5, 6, 6}), "g");
  g->sharding = *Sharding::Parse("{devices=[2,1,1,1]0,1}");
  compiler::ConvDims c = Nchw();
  c.input_batch = 1, c.input_feature = 0, c.kernel_input_feature = 0, c.kernel_output_feature = 1;
  c.output_batch = 1, c.output_feature = 0;
  Instruction* dw = m.Convolution(x, g, c);
  ASSERT_EQ(dw->shape, Shape(DType::kF32, {5, 3, 3, 3}));
  m.AddOutput(dw);
  auto r = compiler::SpmdPartition(m, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllReduce), 1);
  EXPECT_EQ(CountOps(*r->local, Opcode::kAllGather), 0);
  EXPECT_TRUE(r->output_shardings[0].IsReplicated());
}

}  // namespace
}  // namespace shardscope
