// Convolution, pooling, dropout and batch normalisation, with the gradients
// of the two new IR ops they record (convolution, reduce_window). Everything
// else here is built from ops that already have gradients.
//
// The gradients stay inside the IR the compiler has, without a reverse or a
// select_and_scatter op:
//  - d input of a convolution is a convolution of the output gradient, dilated
//    by the stride (lhs_dilation), with the kernel flipped in space and its
//    feature dims swapped. The flip is a product with a constant anti-identity
//    matrix over the flattened window (KH*KW x KH*KW: 81 entries for 3x3).
//  - d kernel is a convolution of the input (batch and feature dims swapped, so
//    that the batch is contracted) with the output gradient as the kernel,
//    dilated by the stride (rhs_dilation).
//  - a windowed sum sends each output's gradient back to its window: repeated
//    over the window (broadcast + reshape) when windows do not overlap, else
//    the gradient dilated by the stride and padded by window - 1, summed over
//    the same window with stride 1.
//  - a windowed max with windows that do not overlap: each window's gradient
//    goes to its first element equal to the max, found by comparing the input
//    with the max repeated over its window (broadcast + reshape).
#include "core/ops_cnn.h"

#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/autocast.h"
#include "core/ops.h"

namespace shardscope {
namespace {
using compiler::Opcode;
using compiler::ReduceKind;

std::string At(const SourceLoc& loc) {
  return loc.known() ? absl::StrCat(" (at ", loc.file, ":", loc.line, ")") : "";
}

std::string Describe(const Tensor& t) {
  return t.name().empty() ? t.shape().ToString() : absl::StrCat("'", t.name(), "' ", t.shape().ToString());
}

Tensor Fail(const std::string& op, const std::string& why, const SourceLoc& loc, Shape shape) {
  return internal::Error(absl::InvalidArgumentError(absl::StrCat(op, ": ", why, At(loc))), std::move(shape));
}

// The first undefined or poisoned operand, as an error tensor; undefined when all are fine.
Tensor Poisoned(const std::string& op, std::initializer_list<const Tensor*> ts, const SourceLoc& loc) {
  for (const Tensor* t : ts) {
    if (!t->defined()) return Fail(op, "an operand is an undefined tensor", loc, Shape());
    if (!t->status().ok()) return internal::Error(t->status(), t->shape());
  }
  return Tensor();
}

Tensor Full(const Shape& s, double v, const SourceLoc& loc) {
  return internal::Broadcast(internal::Constant(v, s.dtype, loc), s.dims, {}, loc);
}

Tensor ConstantOf(Literal l, const SourceLoc& loc) {
  auto n = std::make_shared<Node>();
  n->op = Opcode::kConstant;
  n->shape = l.shape();
  n->literal = std::move(l);
  n->loc = loc;
  n->scope = internal::CurrentScope();
  return Tensor(std::move(n));
}

// pad with an arbitrary value (internal::Pad pads with zeros).
Tensor PadWith(const Tensor& a, double value, compiler::PadDims p, const SourceLoc& loc) {
  bool none = true;
  for (int d = 0; d < a.rank(); ++d) none &= p.low[d] == 0 && p.high[d] == 0 && p.interior[d] == 0;
  if (none) return a;
  std::vector<int64_t> out;
  for (int d = 0; d < a.rank(); ++d)
    out.push_back(a.dim(d) + p.low[d] + p.high[d] + std::max<int64_t>(a.dim(d) - 1, 0) * p.interior[d]);
  Tensor t = internal::MakeOp(Opcode::kPad, Shape(a.dtype(), out), {a, internal::Constant(value, a.dtype(), loc)}, loc);
  if (t.status().ok()) t.node()->pad = std::move(p);
  return t;
}

Tensor ReduceWindow(const Tensor& a, compiler::WindowDims w, ReduceKind k, double init, const SourceLoc& loc) {
  std::vector<int64_t> out;
  for (int d = 0; d < a.rank(); ++d) {
    int64_t lo = d < static_cast<int>(w.padding.size()) ? w.padding[d].first : 0;
    int64_t hi = d < static_cast<int>(w.padding.size()) ? w.padding[d].second : 0;
    int64_t s = d < static_cast<int>(w.strides.size()) ? w.strides[d] : 1;
    out.push_back((a.dim(d) + lo + hi - w.dimensions[d]) / s + 1);
  }
  Tensor t = internal::MakeOp(Opcode::kReduceWindow, Shape(a.dtype(), out), {a, internal::Constant(init, a.dtype(), loc)},
                              loc);
  if (t.status().ok()) {
    t.node()->window = std::move(w);
    t.node()->reduce = k;
  }
  return t;
}

// Each element of `a` repeated k[d] times along dim d: [.., D, ..] -> [.., D*k, ..].
Tensor Upsample(const Tensor& a, const std::vector<int64_t>& k, const SourceLoc& loc) {
  std::vector<int64_t> wide, bdims, flat;
  for (int d = 0; d < a.rank(); ++d) {
    bdims.push_back(static_cast<int64_t>(wide.size()));
    wide.push_back(a.dim(d));
    if (k[d] > 1) wide.push_back(k[d]);
    flat.push_back(a.dim(d) * k[d]);
  }
  return internal::Reshape(internal::Broadcast(a, wide, bdims, loc), flat, loc);
}

// The kernel [O, I, K...] reversed in every spatial dim: reversing each of
// the spatial dims reverses their row-major flattening, which is a product
// with the anti-identity matrix.
Tensor FlipSpatial(const Tensor& w, const SourceLoc& loc) {
  int64_t window = 1;
  for (int d = 2; d < w.rank(); ++d) window *= w.dim(d);
  if (window == 1) return w;
  Literal j(Shape(w.dtype(), {window, window}));
  for (int64_t a = 0; a < window; ++a) j.SetDouble(a * window + (window - 1 - a), 1.0);
  Tensor flat = internal::Reshape(w, {w.dim(0) * w.dim(1), window}, loc);
  Tensor flipped = internal::Dot(flat, ConstantOf(std::move(j), loc), {{}, {}, {1}, {0}}, loc);
  return internal::Reshape(flipped, w.shape().dims, loc);
}

// A window over the two spatial dims of [N, C, H, W] (1 over batch and channels).
compiler::WindowDims Window4(int64_t kernel, int64_t stride, int64_t padding) {
  compiler::WindowDims w;
  w.dimensions = {1, 1, kernel, kernel};
  w.strides = {1, 1, stride, stride};
  w.padding = {{0, 0}, {0, 0}, {padding, padding}, {padding, padding}};
  return w;
}

Tensor Pool(const char* op, const Tensor& x, int64_t kernel, int64_t stride, int64_t padding, ReduceKind kind,
            const SourceLoc& loc) {
  if (Tensor e = Poisoned(op, {&x}, loc); e.defined()) return e;
  if (stride == 0) stride = kernel;
  if (x.rank() != 4) return Fail(op, absl::StrCat("input ", Describe(x), " must be [N, C, H, W]"), loc, x.shape());
  if (!IsFloat(x.dtype())) return Fail(op, absl::StrCat("input ", Describe(x), " must be floating point"), loc, x.shape());
  if (kernel < 1 || stride < 1 || padding < 0 || 2 * padding > kernel)
    return Fail(op,
                absl::StrCat("kernel ", kernel, ", stride ", stride, ", padding ", padding,
                             ": need kernel >= 1, stride >= 1 and 0 <= padding <= kernel / 2"),
                loc, x.shape());
  if (x.dim(2) + 2 * padding < kernel || x.dim(3) + 2 * padding < kernel)
    return Fail(op, absl::StrCat("a ", kernel, "x", kernel, " window does not fit input ", Describe(x),
                                 " padded by ", padding),
                loc, x.shape());
  const double init = kind == ReduceKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
  return ReduceWindow(x, Window4(kernel, stride, padding), kind, init, loc);
}

}  // namespace

// ---------------------------------------------------------------- convolution

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t stride, int64_t padding,
              std::source_location sl) {
  const SourceLoc loc = Loc(sl);
  if (Tensor e = Poisoned("conv2d", {&x, &w}, loc); e.defined()) return e;
  if (x.rank() != 4 || w.rank() != 4)
    return Fail("conv2d", absl::StrCat("input ", Describe(x), " must be [N, C, H, W] and weight ", Describe(w),
                                       " [O, C, KH, KW]"),
                loc, x.shape());
  if (x.dtype() != w.dtype() || !IsFloat(x.dtype()))
    return Fail("conv2d", absl::StrCat("input ", Describe(x), " and weight ", Describe(w),
                                       " need the same floating-point type"),
                loc, x.shape());
  if (x.dim(1) != w.dim(1))
    return Fail("conv2d", absl::StrCat("input ", Describe(x), " has ", x.dim(1), " channels but weight ", Describe(w),
                                       " expects ", w.dim(1), " (only groups = 1 is supported)"),
                loc, x.shape());
  if (stride < 1 || padding < 0)
    return Fail("conv2d", absl::StrCat("stride ", stride, " must be >= 1 and padding ", padding, " >= 0"), loc,
                x.shape());
  const int64_t oh = (x.dim(2) + 2 * padding - w.dim(2)), ow = (x.dim(3) + 2 * padding - w.dim(3));
  if (oh < 0 || ow < 0)
    return Fail("conv2d", absl::StrCat("kernel ", w.dim(2), "x", w.dim(3), " does not fit input ", Describe(x),
                                       " padded by ", padding),
                loc, x.shape());
  // Under autocast (core/autocast.h) the operands become bf16/f16 converts
  // and the convolution returns f32, accumulated in f32.
  Tensor xc = x, wc = w;
  absl::StatusOr<DType> result_type = internal::AutocastOperands(&xc, &wc, loc);
  if (!result_type.ok()) return internal::Error(result_type.status(), x.shape());
  Shape out(*result_type, {x.dim(0), w.dim(0), oh / stride + 1, ow / stride + 1});
  compiler::ConvDims c;  // NCHW x OIHW -> NCHW
  c.input_batch = 0, c.input_feature = 1, c.input_spatial = {2, 3};
  c.kernel_output_feature = 0, c.kernel_input_feature = 1, c.kernel_spatial = {2, 3};
  c.output_batch = 0, c.output_feature = 1, c.output_spatial = {2, 3};
  c.window_strides = {stride, stride};
  c.padding = {{padding, padding}, {padding, padding}};
  Tensor y = internal::MakeOp(Opcode::kConvolution, out, {xc, wc}, loc);
  if (y.status().ok()) y.node()->conv = std::move(c);
  internal::NoteAutocastOff(&y);
  if (!bias.defined()) return y;
  if (!bias.status().ok()) return internal::Error(bias.status(), out);
  if (bias.shape() != Shape(x.dtype(), {w.dim(0)}))
    return Fail("conv2d", absl::StrCat("bias ", Describe(bias), " must be [", w.dim(0), "] of the input's type"), loc,
                out);
  return internal::Binary(Opcode::kAdd, y, internal::Broadcast(bias, out.dims, {1}, loc), loc);
}

// ---------------------------------------------------------------- pooling

Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding, std::source_location sl) {
  return Pool("max_pool2d", x, kernel, stride, padding, ReduceKind::kMax, Loc(sl));
}

Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding, std::source_location sl) {
  const SourceLoc loc = Loc(sl);
  Tensor s = Pool("avg_pool2d", x, kernel, stride, padding, ReduceKind::kSum, loc);
  if (!s.status().ok()) return s;
  // The divisor follows from the window: part of the graph, not data.
  return internal::Binary(Opcode::kDivide, s, Full(s.shape(), static_cast<double>(kernel * kernel), loc), loc);
}

Tensor global_avg_pool2d(const Tensor& x, std::source_location sl) {
  const SourceLoc loc = Loc(sl);
  if (Tensor e = Poisoned("global_avg_pool2d", {&x}, loc); e.defined()) return e;
  if (x.rank() != 4)
    return Fail("global_avg_pool2d", absl::StrCat("input ", Describe(x), " must be [N, C, H, W]"), loc, x.shape());
  return mean(x, {2, 3}, false, sl);
}

// ---------------------------------------------------------------- dropout

Generator::Generator(uint64_t seed, std::string name, std::source_location loc) : name_(std::move(name)) {
  manual_seed(seed, loc);
}

void Generator::manual_seed(uint64_t seed, std::source_location loc) {
  Literal s(Shape(DType::kI64, {2}));
  s.as<int64_t>()[0] = static_cast<int64_t>(seed);
  state_ = Tensor::from_host(std::move(s), name_ + ".state", loc);
}

Tensor Generator::next(std::source_location sl) {
  const SourceLoc loc = Loc(sl);
  Tensor current(state_.node());
  Literal one(Shape(DType::kI64, {2}));
  one.as<int64_t>()[1] = 1;
  // A fresh tensor rather than assign(): it registers with the current
  // context, so the new state is computed at the cut even if the generator
  // was made before Init (the default one) or outlived a Shutdown.
  Tensor advanced = internal::Binary(Opcode::kAdd, current, ConstantOf(std::move(one), loc), loc);
  advanced.set_name(name_ + ".state");
  state_ = advanced;
  return current;
}

Generator& default_generator(std::source_location loc) {
  static Generator* g = new Generator(0, "rng", loc);  // never destroyed: tensors may outlive main
  return *g;
}

void manual_seed(uint64_t seed, std::source_location loc) { default_generator(loc).manual_seed(seed, loc); }

Tensor dropout(const Tensor& x, double p, bool training, std::source_location sl) {
  return dropout(x, p, training, default_generator(sl), sl);
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen, std::source_location sl) {
  const SourceLoc loc = Loc(sl);
  if (Tensor e = Poisoned("dropout", {&x}, loc); e.defined()) return e;
  if (!(p >= 0 && p < 1)) return Fail("dropout", absl::StrCat("probability ", p, " must be in [0, 1)"), loc, x.shape());
  if (!IsFloat(x.dtype()))
    return Fail("dropout", absl::StrCat("input ", Describe(x), " must be floating point"), loc, x.shape());
  if (!training || p == 0) return x;
  Tensor bits = internal::MakeOp(Opcode::kRngBitGenerator, Shape(DType::kI32, x.shape().dims), {gen.next(sl)}, loc);
  // i32 bits are uniform over [-2^31, 2^31): keep those at or above the p-quantile.
  const double threshold = std::round(-2147483648.0 + p * 4294967296.0);
  // The threshold and the scale are data, as the scalar rule passes any
  // scalar but 0 and 1: a p that changes between steps (a schedule) does not
  // recompile, as a learning rate does not.
  auto scalar = [&](const char* what, double v, DType dtype, const std::vector<int64_t>& dims) {
    Tensor t = Tensor::from_host(Literal::Scalar(dtype, v),
                                 absl::StrCat("dropout.", what, "@", loc.file, ":", loc.line), sl);
    return internal::Broadcast(t, dims, {}, loc);
  };
  Tensor keep = internal::Compare(bits, scalar("threshold", threshold, DType::kI32, x.shape().dims),
                                  compiler::CompareDirection::kGE, loc);
  Tensor scaled = internal::Binary(Opcode::kMultiply, x,
                                   scalar("scale", 1.0 / (1.0 - p), x.dtype(), x.shape().dims), loc);
  return internal::Select(keep, scaled, Full(x.shape(), 0, loc), loc);
}

// ---------------------------------------------------------------- batch norm

Tensor batch_norm2d(const Tensor& x, Tensor& running_mean, Tensor& running_var, const Tensor& weight,
                    const Tensor& bias, bool training, double momentum, double eps, std::source_location sl) {
  const SourceLoc loc = Loc(sl);
  if (Tensor e = Poisoned("batch_norm2d", {&x, &running_mean, &running_var}, loc); e.defined()) return e;
  if (x.rank() != 4 || !IsFloat(x.dtype()))
    return Fail("batch_norm2d", absl::StrCat("input ", Describe(x), " must be floating point [N, C, H, W]"), loc,
                x.shape());
  const Shape per_channel(x.dtype(), {x.dim(1)});
  for (const Tensor* t : std::initializer_list<const Tensor*>{&running_mean, &running_var, &weight, &bias}) {
    if (!t->defined() && (t == &weight || t == &bias)) continue;
    if (!t->status().ok()) return internal::Error(t->status(), x.shape());
    if (t->shape() != per_channel)
      return Fail("batch_norm2d", absl::StrCat(Describe(*t), " must be ", per_channel.ToString(), " for input ",
                                               Describe(x)),
                  loc, x.shape());
  }
  auto channels = [&](const Tensor& c) { return internal::Broadcast(c, x.shape().dims, {1}, loc); };
  auto constant = [&](double v) { return Full(per_channel, v, loc); };
  Tensor y;
  if (training) {
    Tensor mu = mean(x, {0, 2, 3}, false, sl);
    Tensor centred = sub(x, channels(mu), sl);
    Tensor var = mean(mul(centred, centred, sl), {0, 2, 3}, false, sl);
    y = mul(centred, channels(rsqrt(add(var, constant(eps), sl), sl)), sl);
    // The running statistics follow the batch's without being differentiated.
    NoGradGuard no_grad;
    const double count = static_cast<double>(x.dim(0) * x.dim(2) * x.dim(3));
    Tensor unbiased = mul(var, constant(count / std::max(1.0, count - 1)), sl);
    // The momentum is data by the scalar rule (0 and 1 inlined), as dropout's
    // p and a learning rate are: a schedule of it never recompiles.
    auto data = [&](const char* what, double v) {
      Tensor t = v == 0.0 || v == 1.0 ? Tensor::scalar(v, x.dtype(), sl)
                                      : Tensor::from_host(Literal::Scalar(x.dtype(), v),
                                                          absl::StrCat("batch_norm.", what, "@", loc.file, ":", loc.line), sl);
      return internal::Broadcast(t, per_channel.dims, {}, loc);
    };
    Tensor m = data("momentum", momentum), keep = data("keep", 1 - momentum);
    if (absl::Status s = running_mean.assign(add(mul(running_mean, keep, sl), mul(mu, m, sl), sl)); !s.ok())
      return internal::Error(s, x.shape());
    if (absl::Status s = running_var.assign(add(mul(running_var, keep, sl), mul(unbiased, m, sl), sl)); !s.ok())
      return internal::Error(s, x.shape());
  } else {
    Tensor inv = rsqrt(add(running_var, constant(eps), sl), sl);
    y = mul(sub(x, channels(running_mean), sl), channels(inv), sl);
  }
  if (weight.defined()) y = mul(y, channels(weight), sl);
  if (bias.defined()) y = add(y, channels(bias), sl);
  return y;
}

// ---------------------------------------------------------------- gradients

namespace internal {

// Gradient ops carry the forward op's module path, so a layer's backward time
// is charged to the layer (unless backward() itself runs inside a scope).
void EnterGradScope(std::optional<NameScope>& s, const Node& n) {
  if (CurrentScope().empty() && !n.scope.empty()) s.emplace(n.scope);
}

std::vector<Tensor> ConvolutionVjp(const std::shared_ptr<Node>& np, const Tensor& g) {
  const Node& n = *np;
  std::optional<NameScope> scope;
  EnterGradScope(scope, n);
  const compiler::ConvDims& c = n.conv;
  const SourceLoc& loc = n.loc;
  const int ns = static_cast<int>(c.input_spatial.size());
  // The layout conv2d records: [N, C, S...] x [O, I, K...] -> [N, O, S...].
  bool canonical = c.input_batch == 0 && c.input_feature == 1 && c.kernel_output_feature == 0 &&
                   c.kernel_input_feature == 1 && c.output_batch == 0 && c.output_feature == 1 &&
                   c.feature_group_count == 1 && c.batch_group_count == 1;
  for (int k = 0; k < ns; ++k) {
    canonical &= c.input_spatial[k] == k + 2 && c.kernel_spatial[k] == k + 2 && c.output_spatial[k] == k + 2;
    canonical &= k >= static_cast<int>(c.lhs_dilation.size()) || c.lhs_dilation[k] == 1;
    canonical &= k >= static_cast<int>(c.rhs_dilation.size()) || c.rhs_dilation[k] == 1;
  }
  const Shape& xs = n.operands[0]->shape;
  const Shape& ws = n.operands[1]->shape;
  if (!canonical) {
    auto e = Error(absl::UnimplementedError(absl::StrCat(
                       "gradient of convolution", At(loc),
                       ": only NCHW x OIHW layouts without dilation or groups (as conv2d records) are differentiated")),
                   xs);
    return {e, Error(e.status(), ws)};
  }
  Tensor x(n.operands[0]), w(n.operands[1]);
  // Under autocast the result is f32 and the operands 16-bit: the gradients
  // take the operands' type (g rounded once; the convolutions sum in f32).
  const Tensor gd = g.dtype() == xs.dtype ? g : Convert(g, xs.dtype, loc);
  std::vector<Tensor> out(2);
  auto stride = [&](int k) { return k < static_cast<int>(c.window_strides.size()) ? c.window_strides[k] : 1; };
  auto low = [&](int k) { return k < static_cast<int>(c.padding.size()) ? c.padding[k].first : 0; };
  std::vector<int64_t> spatial;
  for (int k = 0; k < ns; ++k) spatial.push_back(k + 2);
  if (n.operands[0]->requires_grad) {
    // dx[s] = sum over kernel offsets a of (g dilated by the stride)[s + lo - a] w[a]:
    // a correlation with the flipped kernel once g is padded by K - 1 - lo.
    compiler::ConvDims d;
    d.input_batch = 0, d.input_feature = 1, d.input_spatial = spatial;
    d.kernel_input_feature = 0, d.kernel_output_feature = 1, d.kernel_spatial = spatial;
    d.output_batch = 0, d.output_feature = 1, d.output_spatial = spatial;
    for (int k = 0; k < ns; ++k) {
      const int64_t K = ws.dims[k + 2], H = xs.dims[k + 2], OH = g.dim(k + 2), s = stride(k), lo = low(k);
      d.window_strides.push_back(1);
      d.lhs_dilation.push_back(s);
      d.padding.push_back({K - 1 - lo, H - (OH - 1) * s - 1 + lo});
    }
    Tensor dx = MakeOp(Opcode::kConvolution, xs, {gd, FlipSpatial(w, loc)}, loc);
    if (dx.status().ok()) dx.node()->conv = std::move(d);
    out[0] = dx;
  }
  if (n.operands[1]->requires_grad) {
    // dw[o, i, a] = sum over n and output positions p of g[n, o, p] x[n, i, p*s + a - lo]:
    // x with the batch as its feature dim, g as the kernel dilated by the stride.
    compiler::ConvDims d;
    d.input_batch = 1, d.input_feature = 0, d.input_spatial = spatial;
    d.kernel_input_feature = 0, d.kernel_output_feature = 1, d.kernel_spatial = spatial;
    d.output_batch = 1, d.output_feature = 0, d.output_spatial = spatial;
    for (int k = 0; k < ns; ++k) {
      const int64_t K = ws.dims[k + 2], H = xs.dims[k + 2], OH = g.dim(k + 2), s = stride(k), lo = low(k);
      d.window_strides.push_back(1);
      d.rhs_dilation.push_back(s);
      // The high side covers only the rows the forward windows reached.
      d.padding.push_back({lo, K - H - lo + (OH - 1) * s});
    }
    Tensor dw = MakeOp(Opcode::kConvolution, ws, {x, gd}, loc);
    if (dw.status().ok()) dw.node()->conv = std::move(d);
    out[1] = dw;
  }
  return out;
}

std::vector<Tensor> ReduceWindowVjp(const std::shared_ptr<Node>& np, const Tensor& g) {
  const Node& n = *np;
  std::optional<NameScope> scope;
  EnterGradScope(scope, n);
  const compiler::WindowDims& w = n.window;
  const SourceLoc& loc = n.loc;
  const Shape& xs = n.operands[0]->shape;
  const int r = xs.rank();
  auto at = [](const std::vector<int64_t>& v, int k) { return k < static_cast<int>(v.size()) ? v[k] : 1; };
  auto unsupported = [&](const std::string& why) {
    return std::vector<Tensor>{Error(absl::UnimplementedError(absl::StrCat(why, At(loc))), xs), Tensor()};
  };
  for (int d = 0; d < r; ++d)
    if (at(w.base_dilations, d) != 1 || at(w.window_dilations, d) != 1)
      return unsupported("gradient of reduce_window with dilations is not implemented");
  std::vector<int64_t> k(r), s(r), lo(r);
  for (int d = 0; d < r; ++d) {
    k[d] = w.dimensions[d];
    s[d] = at(w.strides, d);
    lo[d] = d < static_cast<int>(w.padding.size()) ? w.padding[d].first : 0;
  }
  // Windows that tile the input without overlapping: each window's gradient
  // repeated over it, then cropped or extended back to the input's extent.
  auto tiled_back = [&](const Tensor& per_window_grad) {
    compiler::PadDims back;
    for (int d = 0; d < r; ++d) {
      back.low.push_back(-lo[d]);
      back.high.push_back(xs.dims[d] + lo[d] - g.dim(d) * k[d]);
      back.interior.push_back(0);
    }
    return PadWith(per_window_grad, 0, std::move(back), loc);
  };
  if (n.reduce == ReduceKind::kSum && k == s) return {tiled_back(Upsample(g, k, loc)), Tensor()};
  if (n.reduce == ReduceKind::kSum) {
    // Each input element receives the gradient of every window it is in.
    compiler::PadDims p;
    compiler::WindowDims sum;
    for (int d = 0; d < r; ++d) {
      p.low.push_back(k[d] - 1 - lo[d]);
      p.interior.push_back(s[d] - 1);
      p.high.push_back(xs.dims[d] + lo[d] - 1 - (g.dim(d) - 1) * s[d]);
      sum.dimensions.push_back(k[d]);
    }
    return {ReduceWindow(PadWith(g, 0, std::move(p), loc), std::move(sum), ReduceKind::kSum, 0, loc), Tensor()};
  }
  if (n.reduce != ReduceKind::kMax)
    return unsupported(absl::StrCat("gradient of reduce_window ", compiler::ReduceKindOp(n.reduce),
                                    " is not implemented"));
  if (k != s)
    return unsupported(absl::StrCat("max_pool2d (reduce_window max): the gradient of overlapping windows (window [",
                                    absl::StrJoin(k, ","), "], stride [", absl::StrJoin(s, ","),
                                    "]) is not supported (there is no select_and_scatter op); use stride == kernel"));
  // The input padded like the forward (with -inf) and cut to the windows' extent.
  compiler::PadDims reach;
  std::vector<int64_t> span(r);
  for (int d = 0; d < r; ++d) {
    span[d] = g.dim(d) * k[d];
    reach.low.push_back(lo[d]);
    reach.high.push_back(span[d] - xs.dims[d] - lo[d]);
    reach.interior.push_back(0);
  }
  Tensor xp = PadWith(Tensor(n.operands[0]), -std::numeric_limits<double>::infinity(), std::move(reach), loc);
  Tensor hit = Compare(xp, Upsample(Tensor(np), k, loc), compiler::CompareDirection::kEQ, loc);
  // Ties: only the first maximum of a window (row-major) gets the gradient.
  const Shape pos_shape(DType::kI32, span);
  Tensor pos;
  int64_t scale = 1;
  for (int d = r - 1; d >= 0; --d) {
    if (k[d] == 1) continue;
    Tensor iota = MakeOp(Opcode::kIota, pos_shape, {}, loc);
    iota.node()->dims = {d};
    Tensor term = scale == 1 ? iota : Binary(Opcode::kMultiply, iota, Full(pos_shape, static_cast<double>(scale), loc), loc);
    pos = pos.defined() ? Binary(Opcode::kAdd, pos, term, loc) : term;
    scale *= span[d];
  }
  if (!pos.defined()) pos = Full(pos_shape, 0, loc);  // 1-element windows: nothing to break
  const double none = std::numeric_limits<int32_t>::max();
  Tensor candidates = Select(hit, pos, Full(pos_shape, none, loc), loc);
  compiler::WindowDims win;
  win.dimensions = k;
  win.strides = k;
  Tensor first = ReduceWindow(candidates, std::move(win), ReduceKind::kMin, none, loc);
  Tensor chosen = Compare(pos, Upsample(first, k, loc), compiler::CompareDirection::kEQ, loc);
  Tensor spread = Select(chosen, Upsample(g, k, loc), Full(Shape(g.dtype(), span), 0, loc), loc);
  return {tiled_back(spread), Tensor()};
}

}  // namespace internal
}  // namespace shardscope
