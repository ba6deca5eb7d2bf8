// Tensor ops. Each records an IR node with the caller's source line; shapes
// are checked here so a mistake names the user's line. Binary ops broadcast
// like NumPy (trailing dimensions aligned).
#pragma once

#include <source_location>
#include <vector>

#include "core/tensor.h"

namespace shardscope {

using SL = std::source_location;

Tensor add(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor sub(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor mul(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor div(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor maximum(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor neg(const Tensor& a, SL loc = SL::current());
Tensor exp(const Tensor& a, SL loc = SL::current());
Tensor log(const Tensor& a, SL loc = SL::current());
Tensor relu(const Tensor& a, SL loc = SL::current());
Tensor minimum(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor pow(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor sqrt(const Tensor& a, SL loc = SL::current());
Tensor rsqrt(const Tensor& a, SL loc = SL::current());
Tensor tanh(const Tensor& a, SL loc = SL::current());
Tensor sigmoid(const Tensor& a, SL loc = SL::current());
Tensor abs(const Tensor& a, SL loc = SL::current());
Tensor silu(const Tensor& a, SL loc = SL::current());
// With a scalar: the scalar rule applies (see Tensor::scalar).
Tensor add(const Tensor& a, double b, SL loc = SL::current());
Tensor mul(const Tensor& a, double b, SL loc = SL::current());

// [.., M, K] x [K, N] -> [.., M, N]; batched when both have rank 3 with equal batch.
Tensor matmul(const Tensor& a, const Tensor& b, SL loc = SL::current());
Tensor transpose(const Tensor& a, std::vector<int64_t> perm, SL loc = SL::current());
Tensor reshape(const Tensor& a, std::vector<int64_t> dims, SL loc = SL::current());
Tensor broadcast_to(const Tensor& a, std::vector<int64_t> dims, SL loc = SL::current());
// a[..., start:limit, ...] along `dim` (stride 1).
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t limit, SL loc = SL::current());
Tensor concatenate(const std::vector<Tensor>& parts, int64_t dim, SL loc = SL::current());
// Rows of `table` [V, D] picked by integer `ids` [...]: result [..., D].
Tensor embedding_lookup(const Tensor& table, const Tensor& ids, SL loc = SL::current());

Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false, SL loc = SL::current());
Tensor sum(const Tensor& a, SL loc = SL::current());  // all elements
Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false, SL loc = SL::current());
Tensor mean(const Tensor& a, SL loc = SL::current());
Tensor max(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false, SL loc = SL::current());

Tensor log_softmax(const Tensor& logits, int64_t dim = -1, SL loc = SL::current());
Tensor softmax(const Tensor& logits, int64_t dim = -1, SL loc = SL::current());
// Mean squared error over all elements.
Tensor mse_loss(const Tensor& pred, const Tensor& target, SL loc = SL::current());
// Attention over q, k, v [..., T, Dh] (the leading dims, e.g. batch and heads,
// are batch dims): softmax(q k^T / sqrt(Dh) [+ causal mask]) v. The causal
// mask hides later positions from earlier ones.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    SL loc = SL::current());
// Rotary position embedding of x [..., T, Dh] (Dh even), rotating the two halves
// of each head dimension by position-dependent angles (base 10000).
Tensor apply_rope(const Tensor& x, SL loc = SL::current());
// Mean negative log-likelihood of integer class labels; logits [B, C], labels i32 [B].
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, SL loc = SL::current());
// Fraction of rows whose argmax equals the label (no gradient).
Tensor one_hot(const Tensor& labels, int64_t classes, DType dtype = DType::kF32, SL loc = SL::current());
Tensor convert(const Tensor& a, DType to, SL loc = SL::current());
// The indices of the nonzero elements of `a`, i32 [count, rank] (as
// torch.nonzero). Its shape depends on the values, so it reads `a` (cutting
// the graph) and computes on the host; a graph using it recompiles whenever
// the count changes, diagnosed as data_dependent_shape at this line.
absl::StatusOr<Tensor> nonzero(const Tensor& a, SL loc = SL::current());
// The value without its gradient history. Its line is noted on the value, so
// a recompilation it causes (backward no longer reaching what it fed) is
// blamed on the stop_gradient, not on the forward ops whose gradients went.
Tensor stop_gradient(const Tensor& a, SL loc = SL::current());

// Operators cannot take a default source_location, so their left operand
// converts through OpArg, whose constructor captures the caller's line.
struct OpArg {
  OpArg(const Tensor& t, SL loc = SL::current()) : tensor(t), loc(loc) {}
  const Tensor& tensor;
  SL loc;
};
inline Tensor operator+(OpArg a, const Tensor& b) { return add(a.tensor, b, a.loc); }
inline Tensor operator-(OpArg a, const Tensor& b) { return sub(a.tensor, b, a.loc); }
inline Tensor operator*(OpArg a, const Tensor& b) { return mul(a.tensor, b, a.loc); }
inline Tensor operator/(OpArg a, const Tensor& b) { return div(a.tensor, b, a.loc); }
inline Tensor operator-(OpArg a) { return neg(a.tensor, a.loc); }

namespace internal {
// Low-level node constructors shared by ops and autograd (no broadcasting).
Tensor MakeOp(compiler::Opcode op, Shape shape, std::vector<Tensor> operands, const SourceLoc& loc);
Tensor Broadcast(const Tensor& a, std::vector<int64_t> out_dims, std::vector<int64_t> bdims,
                 const SourceLoc& loc);
Tensor Reduce(const Tensor& a, std::vector<int64_t> dims, compiler::ReduceKind k, const SourceLoc& loc);
Tensor Constant(double v, DType t, const SourceLoc& loc);
Tensor Dot(const Tensor& a, const Tensor& b, compiler::DotDims dd, const SourceLoc& loc);
Tensor Compare(const Tensor& a, const Tensor& b, compiler::CompareDirection d, const SourceLoc& loc);
Tensor Select(const Tensor& p, const Tensor& t, const Tensor& f, const SourceLoc& loc);
Tensor Transpose(const Tensor& a, std::vector<int64_t> perm, const SourceLoc& loc);
Tensor Reshape(const Tensor& a, std::vector<int64_t> dims, const SourceLoc& loc);
Tensor Binary(compiler::Opcode op, const Tensor& a, const Tensor& b, const SourceLoc& loc);
Tensor Unary(compiler::Opcode op, const Tensor& a, const SourceLoc& loc);
Tensor Convert(const Tensor& a, DType t, const SourceLoc& loc);
Tensor Error(absl::Status s, Shape shape);
Tensor Slice(const Tensor& a, compiler::SliceDims s, const SourceLoc& loc);
Tensor Pad(const Tensor& a, compiler::PadDims p, const SourceLoc& loc);
Tensor Concatenate(const std::vector<Tensor>& parts, int64_t dim, const SourceLoc& loc);
Tensor Gather(const Tensor& table, const Tensor& ids, compiler::GatherDims g, Shape out, const SourceLoc& loc);
Tensor ScatterAdd(const Tensor& base, const Tensor& ids, const Tensor& updates, compiler::ScatterDims s,
                  const SourceLoc& loc);
// The current module-path scope (nn modules push their names).
const std::string& CurrentScope();
}  // namespace internal

// Names the ops created while alive with a module path ("layers.0.attn").
class NameScope {
 public:
  explicit NameScope(const std::string& name);
  ~NameScope();
 private:
  size_t prev_len_;
};

}  // namespace shardscope
