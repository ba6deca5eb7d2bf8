// The lazy Tensor. Ops on tensors are recorded, not run: each op adds a node
// (an IR op with the caller's source line) to a pending graph. mark_step()
// cuts the graph, compiles it (cached) and runs it on the mesh; reading a
// value (to_host, item) forces the same. A user's mistake in an op (a shape
// mismatch, say) poisons the result instead of aborting; the error, naming
// the op and its line, comes back from mark_step or the read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir.h"
#include "compiler/literal.h"
#include "compiler/sharding.h"
#include "compiler/types.h"

namespace shardscope {

namespace runtime { class AsyncArray; }
namespace internal { struct RematRegion; }

using compiler::SourceLoc;
// Where `l` is, as stored: a file under the source root (SetSourceRoot) is
// named relative to it, one under shardscope's own source tree relative to
// that (samples/mlp.cc), any other as the compiler named it (less a leading
// "../": ccache's base_dir compiles by relative paths). Inside a library call
// (an optimizer's step, a layer) it is the user's line that made that call.
SourceLoc Loc(const std::source_location& l);
// The directory a user's source files are named relative to ("" for none).
// Set it before tracing: ops traced earlier keep the names they had.
void SetSourceRoot(std::string dir);
std::string SourceRoot();

namespace internal {
// While alive, every op made on this thread is attributed to `loc`, the
// user's line that called the library function `via` ("optim::AdamW::step"),
// so that a recompilation cause never points into the library's own code.
// Nested calls keep the outermost (a layer inside a layer is the user's call).
class LibraryCall {
 public:
  LibraryCall(const char* via, const std::source_location& loc);
  ~LibraryCall();
  LibraryCall(const LibraryCall&) = delete;
  LibraryCall& operator=(const LibraryCall&) = delete;
};
}  // namespace internal

// A value computed on the devices, or waiting on the host to be moved there.
struct DeviceData {
  std::shared_ptr<runtime::AsyncArray> device;   // set once on the devices (may still be computing)
  std::optional<Literal> host;                   // set until uploaded
  Sharding sharding;
  std::string sharding_source = "default";       // annotated | propagated | default
  SourceLoc sharding_loc;
  // A propagated layout's driver: the mark_sharding whose layout propagation
  // carried here, and what it annotated (a tensor's name, or "" for a value
  // constrained inside the step).
  SourceLoc layout_from_loc;
  std::string layout_from;
  std::string layout_from_by = "mark_sharding";  // the call at layout_from_loc
};

// One node of the pending graph: an IR op with operands, or device data.
struct Node {
  compiler::Opcode op = compiler::Opcode::kParameter;  // kParameter = data
  Shape shape;
  std::vector<std::shared_ptr<Node>> operands;
  std::vector<int64_t> dims;
  compiler::DotDims dot;
  compiler::SliceDims slice;
  compiler::PadDims pad;
  compiler::GatherDims gather;
  compiler::ScatterDims scatter;
  compiler::ConvDims conv;      // convolution
  compiler::WindowDims window;  // reduce_window
  compiler::ReduceKind reduce = compiler::ReduceKind::kSum;
  compiler::CompareDirection compare = compiler::CompareDirection::kEQ;
  std::optional<Literal> literal;  // constants
  SourceLoc loc;
  std::string scope;

  // Op nodes: a sharding the user fixed with mark_sharding (a constraint the
  // partitioner keeps); with `shard_gradient`, backward gives this value's
  // gradient the same one (mark_sharding_with_gradients).
  std::optional<Sharding> annotation;
  bool shard_gradient = false;

  std::shared_ptr<DeviceData> data;  // data nodes only
  std::string name;                  // data nodes: the tensor's name
  SourceLoc created;                 // data nodes: where the value was made
  bool shape_from_data = false;      // data nodes: made by an op whose shape depends on values (nonzero)

  bool requires_grad = false;
  SourceLoc requires_grad_loc;             // the requires_grad_ call that set it
  // Op nodes: the line that shaped this op beyond the one that made it: the
  // mark_sharding that constrained it (its `via` names the mesh the spec was
  // written on), the AutocastGuard under which this convert was made, the
  // Tensor::scalar that inlined this constant.
  SourceLoc note_loc;
  struct TensorImpl* grad_leaf = nullptr;  // set while the node is a leaf of `grad_leaf`
  absl::Status error;                      // poisoned: the first error upstream

  // Gradient checkpointing (core/remat.h): set on the outputs of a block whose
  // activations backward recomputes; `seq` tells which op nodes a block made.
  std::shared_ptr<internal::RematRegion> remat;
  int remat_output = -1;  // which of the block's outputs this node is
  uint64_t seq = 0;
  bool counted = false;  // in the per-op counters (an op node counts once, however many tensors hold it)

  // Autograd across a cut: autograd's graph outlives the lazy graph (as in
  // PyTorch/XLA, where reading a value before backward is allowed). A data
  // node a cut made from a pending op node that needed gradients keeps that
  // op node as its one gradient edge (identity), and the op node points back
  // at the data, so backward reads the computed value instead of recomputing.
  // A backward pass frees both (PyTorch's retain_graph=False): an op node
  // it went through is `backward_done` (a later cut keeps no history for it),
  // a data node whose history it used is `history_freed` (a second backward
  // reaching it is an error, not a silently missing gradient).
  std::vector<std::shared_ptr<Node>> grad_through;
  std::weak_ptr<Node> materialized;
  bool backward_done = false;
  bool history_freed = false;

  bool is_data() const { return op == compiler::Opcode::kParameter; }
};

struct TensorImpl {
  int64_t id = 0;
  std::shared_ptr<Node> node;
  std::string name;
  bool requires_grad = false;
  SourceLoc requires_grad_loc;  // the requires_grad_ call that set it
  std::shared_ptr<TensorImpl> grad;
  ~TensorImpl();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<Node> node);

  // A host value made into a tensor (moved to the devices at the next cut).
  static Tensor from_host(Literal value, std::string name = "",
                          std::source_location loc = std::source_location::current());
  // A scalar. By the scalar rule, 0 and 1 are inlined into the graph as
  // constants; any other value is passed as data, so a changing value (a
  // learning rate) never recompiles.
  static Tensor scalar(double value, DType dtype = DType::kF32,
                       std::source_location loc = std::source_location::current());
  static Tensor zeros(std::vector<int64_t> dims, DType dtype = DType::kF32,
                      std::source_location loc = std::source_location::current());

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  DType dtype() const { return shape().dtype; }
  int rank() const { return shape().rank(); }
  int64_t dim(int d) const { return shape().dims[d]; }
  const std::string& name() const;
  Tensor& set_name(std::string name);
  // Status of the value: an error if an op that made it was invalid.
  const absl::Status& status() const;

  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true, std::source_location loc = std::source_location::current());
  // The gradient left by backward(); undefined when none.
  Tensor grad() const;
  void zero_grad();

  // Reads the value: runs what is pending (a cut, recorded as a value read).
  absl::StatusOr<Literal> to_host(std::source_location loc = std::source_location::current()) const;
  absl::StatusOr<double> item(std::source_location loc = std::source_location::current()) const;

  // Replaces this tensor's value with `value` (same shape and dtype), keeping
  // its identity: how optimizers update parameters in place.
  absl::Status assign(const Tensor& value);

  const std::shared_ptr<Node>& node() const;
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Disables gradient recording while alive (optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
 private:
  bool prev_;
};
bool GradEnabled();

}  // namespace shardscope
