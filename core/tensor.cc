#include "core/tensor.h"

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "core/context.h"
#include "core/lazy.h"
#include "runtime/buffer.h"

namespace shardscope {

namespace {
// The outermost library call active on this thread (internal::LibraryCall).
thread_local int g_call_depth = 0;
thread_local SourceLoc g_call_loc;
std::mutex g_source_root_mu;
std::string g_source_root;  // empty, or ending in '/'

SourceLoc Plain(const std::source_location& l) {
  std::string file = l.file_name();
  // A default argument is evaluated where the call is written: a module made
  // through std::make_unique or emplace_back gets a line of the standard
  // library's headers, never the user's. Unknown is honest; a wrong line is not.
  if (file.find("/include/c++/") != std::string::npos) return SourceLoc{};
  {
    std::lock_guard<std::mutex> lock(g_source_root_mu);
    if (!g_source_root.empty() && file.rfind(g_source_root, 0) == 0)
      return SourceLoc{file.substr(g_source_root.size()), static_cast<int>(l.line()), ""};
  }
  constexpr const char* kRoot = SHARDSCOPE_SOURCE_DIR;
  if (file.rfind(kRoot, 0) == 0) {
    file = file.substr(std::strlen(kRoot));
  } else {
    // Compiled by a relative path (ccache's base_dir rewrites paths so): the
    // name relative to the build directory, "../samples/mlp.cc", is shown as
    // the source tree's "samples/mlp.cc".
    size_t k = 0;
    while (file.compare(k, 3, "../") == 0 || file.compare(k, 2, "./") == 0) k += file[k] == '.' && file[k + 1] == '/' ? 2 : 3;
    file = file.substr(k);
  }
  return SourceLoc{std::move(file), static_cast<int>(l.line()), ""};
}
}  // namespace

SourceLoc Loc(const std::source_location& l) {
  if (g_call_depth > 0) return g_call_loc;
  return Plain(l);
}

namespace internal {
LibraryCall::LibraryCall(const char* via, const std::source_location& loc) {
  if (g_call_depth++ == 0) {
    g_call_loc = Plain(loc);
    g_call_loc.via = via;
  }
}
LibraryCall::~LibraryCall() { --g_call_depth; }
}  // namespace internal

void SetSourceRoot(std::string dir) {
  if (!dir.empty() && dir.back() != '/') dir += '/';
  std::lock_guard<std::mutex> lock(g_source_root_mu);
  g_source_root = std::move(dir);
}

std::string SourceRoot() {
  std::lock_guard<std::mutex> lock(g_source_root_mu);
  return g_source_root;
}

namespace {
thread_local bool g_grad_enabled = true;
const Shape kEmptyShape;
const std::string kEmptyName;
const absl::Status kNoTensor = absl::FailedPreconditionError("undefined tensor");
}  // namespace

NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }
bool GradEnabled() { return g_grad_enabled; }

TensorImpl::~TensorImpl() {
  if (node && node->grad_leaf == this) node->grad_leaf = nullptr;
  if (Initialized()) {
    auto& ctx = internal::Ctx();
    std::lock_guard<std::mutex> l(ctx.mu);
    ctx.live.erase(id);
  }
}

Tensor::Tensor(std::shared_ptr<Node> node) {
  impl_ = std::make_shared<TensorImpl>();
  impl_->node = std::move(node);
  internal::RegisterLive(impl_);
}

Tensor Tensor::from_host(Literal value, std::string name, std::source_location loc) {
  auto n = std::make_shared<Node>();
  n->op = compiler::Opcode::kParameter;
  n->shape = value.shape();
  n->data = std::make_shared<DeviceData>();
  n->data->host = std::move(value);
  n->name = name;
  n->created = Loc(loc);
  n->loc = n->created;
  Tensor t(std::move(n));
  t.impl_->name = std::move(name);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype, std::source_location loc) {
  if (value == 0.0 || value == 1.0) {
    auto n = std::make_shared<Node>();
    n->op = compiler::Opcode::kConstant;
    n->shape = Shape(dtype, {});
    n->literal = Literal::Scalar(dtype, value);
    n->loc = Loc(loc);
    n->note_loc = n->loc;  // a user's scalar, inlined by the scalar rule
    return Tensor(std::move(n));
  }
  return from_host(Literal::Scalar(dtype, value), absl::StrCat("scalar@", Loc(loc).file, ":", loc.line()), loc);
}

Tensor Tensor::zeros(std::vector<int64_t> dims, DType dtype, std::source_location loc) {
  return from_host(Literal(Shape(dtype, std::move(dims))), "", loc);
}

const Shape& Tensor::shape() const { return impl_ ? impl_->node->shape : kEmptyShape; }
const std::string& Tensor::name() const { return impl_ ? impl_->name : kEmptyName; }

Tensor& Tensor::set_name(std::string name) {
  if (impl_) {
    impl_->name = name;
    if (impl_->node->is_data()) impl_->node->name = std::move(name);
  }
  return *this;
}

const absl::Status& Tensor::status() const { return impl_ ? impl_->node->error : kNoTensor; }

bool Tensor::requires_grad() const { return impl_ && impl_->node->requires_grad; }

Tensor& Tensor::requires_grad_(bool on, std::source_location loc) {
  if (!impl_) return *this;
  impl_->requires_grad = on;
  impl_->requires_grad_loc = Loc(loc);
  impl_->node->requires_grad = on;
  impl_->node->requires_grad_loc = impl_->requires_grad_loc;
  impl_->node->grad_leaf = on ? impl_.get() : nullptr;
  return *this;
}

Tensor Tensor::grad() const {
  Tensor g;
  if (impl_ && impl_->grad) g.impl_ = impl_->grad;
  return g;
}

void Tensor::zero_grad() {
  if (impl_) impl_->grad.reset();
}

const std::shared_ptr<Node>& Tensor::node() const { return impl_->node; }

absl::Status Tensor::assign(const Tensor& value) {
  if (!impl_ || !value.impl_) return absl::InvalidArgumentError("assign: undefined tensor");
  if (value.shape() != shape())
    return absl::InvalidArgumentError(absl::StrCat("assign: tensor '", name(), "' is ", shape().ToString(),
                                                   ", the new value is ", value.shape().ToString()));
  auto n = value.impl_->node;
  if (impl_->requires_grad) {
    // The new value is a leaf of this tensor: gradients stop here.
    if (n->grad_leaf || n->is_data()) {
      auto copy = std::make_shared<Node>(*n);
      n = copy;
    }
    n->requires_grad = true;
    n->grad_leaf = impl_.get();
  }
  if (n->is_data() && n->name.empty()) n->name = impl_->name;
  if (impl_->node->grad_leaf == impl_.get()) impl_->node->grad_leaf = nullptr;
  impl_->node = n;
  return absl::OkStatus();
}

absl::StatusOr<Literal> Tensor::to_host(std::source_location loc) const {
  if (!impl_) return kNoTensor;
  return internal::ReadValue(*this, Loc(loc));
}

absl::StatusOr<double> Tensor::item(std::source_location loc) const {
  if (!impl_) return kNoTensor;
  if (shape().elements() != 1)
    return absl::InvalidArgumentError(absl::StrCat("item: tensor '", name(), "' has ", shape().elements(),
                                                   " elements ", shape().ToString(), "; item() needs one (at ",
                                                   Loc(loc).file, ":", loc.line(), ")"));
  auto v = internal::ReadValue(*this, Loc(loc));
  if (!v.ok()) return v.status();
  return v->GetDouble(0);
}

}  // namespace shardscope
