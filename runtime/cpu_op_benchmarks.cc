// The op-class microbenchmarks of the `cpu` profile (see cpu_op_benchmarks.h).
#include "runtime/cpu_op_benchmarks.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/fusion.h"
#include "compiler/ir.h"
#include "runtime/intra_op.h"
#include "runtime/kernels.h"

namespace shardscope::runtime {
namespace {

using compiler::Instruction;
using compiler::Module;
using compiler::Opcode;

// Values in [-0.8, 0.8] (positive for log): times do not depend on them.
Literal Filled(const Shape& s, bool positive = false) {
  Literal l(s);
  float* p = l.as<float>();
  for (int64_t i = 0; i < l.elements(); ++i)
    p[i] = positive ? 0.1f + static_cast<float>(i % 17) * 0.1f : static_cast<float>(i % 17) * 0.1f - 0.8f;
  return l;
}

// Copies of one call's operands and result, enough to rotate over
// `cold_bytes`: each call finds its operands evicted by the others.
struct Rotation {
  std::vector<std::vector<Literal>> operands;  // [copy][operand]
  std::vector<Literal> outs;
  Rotation(const std::vector<Shape>& shapes, const Shape& out, int64_t cold_bytes, bool positive = false) {
    int64_t bytes = out.bytes();
    for (const Shape& s : shapes) bytes += s.bytes();
    const int64_t copies = std::clamp<int64_t>((cold_bytes + bytes - 1) / std::max<int64_t>(bytes, 1), 2, 256);
    for (int64_t c = 0; c < copies; ++c) {
      operands.emplace_back();
      for (const Shape& s : shapes) operands.back().push_back(Filled(s, positive));
      outs.emplace_back(out);
    }
  }
  int copies() const { return static_cast<int>(outs.size()); }
  std::vector<const Literal*> Ops(int c) const {
    std::vector<const Literal*> v;
    for (const Literal& l : operands[c]) v.push_back(&l);
    return v;
  }
};

// Median thread CPU time of `call(copy)` over `reps` calls, the copies taken
// in turn, after one untimed pass over every copy (its first touch of the
// results' pages is not the kernel's).
double RotatingMedianNs(const std::function<void(int)>& call, int copies, int reps) {
  for (int c = 0; c < copies; ++c) call(c);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const int64_t t0 = ThreadCpuNs();
    call(r % copies);
    t.push_back(static_cast<double>(ThreadCpuNs() - t0));
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// One instruction of `m`, cold, through EvalInstruction.
double ColdInstructionNs(const Instruction& i, const OpClassPlan& plan, int reps, bool positive = false) {
  std::vector<Shape> shapes;
  for (const Instruction* o : i.operands) shapes.push_back(o->shape);
  Rotation rot(shapes, i.shape, plan.cold_bytes, positive);
  return RotatingMedianNs(
      [&](int c) { (void)EvalInstruction(i, rot.Ops(c), 0, &rot.outs[c]); },  // valid by construction
      rot.copies(), reps);
}

// Several kernels timed in turn, one call of each per round, so that a noisy
// moment of the machine (another process's burst) falls on all of them alike
// instead of shifting one figure by a third; each kernel's median over the
// rounds. Each has its own operand copies (Rotation), so every call is cold.
class Interleaved {
 public:
  explicit Interleaved(const OpClassPlan& plan) : plan_(plan) {}
  // A kernel of its own module (kept alive here).
  const Instruction* Add(std::unique_ptr<Module> m, const Instruction* i) {
    std::vector<Shape> shapes;
    for (const Instruction* o : i->operands) shapes.push_back(o->shape);
    rotations_.push_back(std::make_unique<Rotation>(shapes, i->shape, plan_.cold_bytes));
    kernels_.push_back(i);
    modules_.push_back(std::move(m));
    return i;
  }
  const Instruction& kernel(size_t k) const { return *kernels_[k]; }
  std::vector<double> MedianNs(int rounds) {
    const size_t n = kernels_.size();
    for (size_t k = 0; k < n; ++k)  // first touch of every result's pages, untimed
      for (int c = 0; c < rotations_[k]->copies(); ++c) Call(k, c);
    std::vector<std::vector<double>> t(n);
    for (int r = 0; r < rounds; ++r)
      for (size_t k = 0; k < n; ++k) {
        const int64_t t0 = ThreadCpuNs();
        Call(k, r % rotations_[k]->copies());
        t[k].push_back(static_cast<double>(ThreadCpuNs() - t0));
      }
    std::vector<double> out;
    for (auto& v : t) {
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      out.push_back(v[v.size() / 2]);
    }
    return out;
  }

 private:
  void Call(size_t k, int c) {
    (void)EvalInstruction(*kernels_[k], rotations_[k]->Ops(c), 0, &rotations_[k]->outs[c]);  // valid by construction
  }
  const OpClassPlan& plan_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::vector<std::unique_ptr<Rotation>> rotations_;
  std::vector<const Instruction*> kernels_;
};

// Convolutions as the cnn sample's chips run them: 3x3, stride 1, padding 1,
// NCHW/OIHW, forward at three widths and one kernel gradient (the batch
// contracted, the output gradient as the window).
// Convolutions: three forward shapes and a kernel gradient, whose median rate
// is `conv_flops`; and the input gradient of a stride-2 convolution (its
// input dilated by 2, which the runtime runs as four plain convolutions by
// output phase), `conv_dilated_flops`: in the cnn it ran at 0.3-0.5 of the
// others' rate counted by the taps that land on input elements.
void MeasureConv(const OpClassPlan& plan, OpClassFigures* f, std::vector<std::string>* rows) {
  rows->push_back(
      "convolution (3x3, f32, operands cold, device time, median, interleaved; FLOPs of the taps on input "
      "elements)");
  Interleaved bench(plan);
  std::vector<std::string> labels;
  const int64_t n = plan.conv_batch;
  for (auto [c, hw] : {std::pair<int64_t, int64_t>{16, 32}, {32, 16}, {64, 8}}) {
    auto m = std::make_unique<Module>();
    auto* in = m->Parameter(Shape(DType::kF32, {n, c, hw, hw}), "in");
    auto* k = m->Parameter(Shape(DType::kF32, {c, c, 3, 3}), "k");
    compiler::ConvDims d;
    d.input_spatial = {2, 3};
    d.kernel_spatial = {2, 3};
    d.output_spatial = {2, 3};
    d.window_strides = {1, 1};
    d.padding = {{1, 1}, {1, 1}};
    auto* conv = m->Convolution(in, k, d);
    bench.Add(std::move(m), conv);
    labels.push_back(absl::StrFormat("forward [%d,%d,%d,%d] x [%d,%d,3,3]", n, c, hw, hw, c, c));
  }
  {
    // The kernel gradient of the first: input [N,C,H,W] read as batch C,
    // feature N; the output gradient [N,O,H,W] as a window of H x W.
    const int64_t c = 16, hw = 32;
    auto m = std::make_unique<Module>();
    auto* in = m->Parameter(Shape(DType::kF32, {n, c, hw, hw}), "in");
    auto* g = m->Parameter(Shape(DType::kF32, {n, c, hw, hw}), "grad");
    compiler::ConvDims d;
    d.input_batch = 1;
    d.input_feature = 0;
    d.input_spatial = {2, 3};
    d.kernel_input_feature = 0;
    d.kernel_output_feature = 1;
    d.kernel_spatial = {2, 3};
    d.output_batch = 0;
    d.output_feature = 1;
    d.output_spatial = {2, 3};
    d.window_strides = {1, 1};
    d.padding = {{1, 1}, {1, 1}};
    auto* conv = m->Convolution(in, g, d);
    bench.Add(std::move(m), conv);
    labels.push_back(absl::StrCat("kernel gradient -> ", conv->shape.ToString()));
  }
  {
    // The input gradient of [N,16,32,32] x [32,16,3,3] stride 2: the output
    // gradient [N,32,16,16] dilated by 2, the kernel read as [i, o].
    const int64_t c = 16, hw = 32;
    auto m = std::make_unique<Module>();
    auto* g = m->Parameter(Shape(DType::kF32, {n, 2 * c, hw / 2, hw / 2}), "grad");
    auto* k = m->Parameter(Shape(DType::kF32, {2 * c, c, 3, 3}), "k");
    compiler::ConvDims d;
    d.input_spatial = {2, 3};
    d.kernel_input_feature = 0;
    d.kernel_output_feature = 1;
    d.kernel_spatial = {2, 3};
    d.output_spatial = {2, 3};
    d.window_strides = {1, 1};
    d.padding = {{1, 2}, {1, 2}};
    d.lhs_dilation = {2, 2};
    auto* conv = m->Convolution(g, k, d);
    bench.Add(std::move(m), conv);
    labels.push_back(absl::StrCat("input gradient, stride 2 -> ", conv->shape.ToString()));
  }
  const std::vector<double> ns = bench.MedianNs(15);
  std::vector<double> rates;
  for (size_t k = 0; k < ns.size(); ++k) {
    const double rate = compiler::InstructionFlops(bench.kernel(k)) / ns[k] * 1e9;
    if (k + 1 < ns.size()) rates.push_back(rate);
    rows->push_back(absl::StrFormat("  %-44s %9.1f us %6.1f GFLOP/s", labels[k], ns[k] / 1e3, rate / 1e9));
  }
  f->conv_flops = MedianOf(rates);
  f->conv_dilated_flops = compiler::InstructionFlops(bench.kernel(ns.size() - 1)) / ns.back() * 1e9;
}

// f32 add with operands out of cache, 12 bytes per element: a chip's
// operands after the other chips' kernels have run on its core. (Measured on
// every core at once it came out 40% slower, which overpriced the samples'
// big streams: the chips of a mesh do not all stream at the same moment.)
double MeasureColdStream(const OpClassPlan& plan, std::vector<std::string>* rows) {
  rows->push_back("cold stream (add f32, 3 x 4 bytes per element, operands out of cache, median, interleaved)");
  Interleaved bench(plan);
  std::vector<int64_t> sizes;
  for (int64_t e = plan.elements; e <= plan.elements * 16; e *= 4) {
    auto m = std::make_unique<Module>();
    auto* a = m->Parameter(Shape(DType::kF32, {e}), "a");
    auto* b = m->Parameter(Shape(DType::kF32, {e}), "b");
    auto* add = m->Binary(Opcode::kAdd, a, b);
    bench.Add(std::move(m), add);
    sizes.push_back(e);
  }
  const std::vector<double> ns = bench.MedianNs(21);
  std::vector<double> bw;
  for (size_t k = 0; k < ns.size(); ++k) {
    bw.push_back(12.0 * static_cast<double>(sizes[k]) / ns[k] * 1e9);
    rows->push_back(absl::StrFormat("  %9d elements %10.2f us  %6.2f GB/s", sizes[k], ns[k] / 1e3, bw.back() / 1e9));
  }
  return MedianOf(bw);
}

// Pooling windows: 2x2 stride 2 (max) and 3x3 stride 1 padded (sum); the
// time per element read, each output reading its whole window.
double MeasureWindow(const OpClassPlan& plan, std::vector<std::string>* rows) {
  rows->push_back("reduce_window (f32 [4,16,32,32], operands cold, median): per window element read");
  std::vector<double> per_read;
  struct W {
    int64_t size, stride, pad;
    compiler::ReduceKind kind;
  };
  for (const W& w : {W{2, 2, 0, compiler::ReduceKind::kMax}, W{3, 1, 1, compiler::ReduceKind::kSum}}) {
    Module m;
    auto* a = m.Parameter(Shape(DType::kF32, {4, 16, 32, 32}), "a");
    auto* init = m.Constant(Literal::Scalar(DType::kF32, 0));
    compiler::WindowDims d;
    d.dimensions = {1, 1, w.size, w.size};
    d.strides = {1, 1, w.stride, w.stride};
    d.padding = {{0, 0}, {0, 0}, {w.pad, w.pad}, {w.pad, w.pad}};
    auto* rw = m.ReduceWindow(a, init, d, w.kind);
    Rotation rot({a->shape}, rw->shape, plan.cold_bytes);
    const Literal init_value = Literal::Scalar(DType::kF32, 0);
    const double ns = RotatingMedianNs(
        [&](int c) { (void)EvalInstruction(*rw, {&rot.operands[c][0], &init_value}, 0, &rot.outs[c]); },
        rot.copies(), 21);
    const double reads = static_cast<double>(rw->shape.elements() * w.size * w.size);
    per_read.push_back(ns / reads);
    rows->push_back(absl::StrFormat("  %dx%d stride %d -> %s %9.1f us  %6.2f ns per read", w.size, w.size, w.stride,
                                    rw->shape.ToString(), ns / 1e3, per_read.back()));
  }
  return MedianOf(per_read);
}

double MeasureTranscendental(const OpClassPlan& plan, std::vector<std::string>* rows) {
  // exp and logistic (FlushedExp per element) make the figure; log and tanh,
  // near the stream's speed, are shown for comparison (the roofline prices them).
  rows->push_back("transcendentals (f32, operands cold, median): per element");
  std::vector<double> per;
  for (Opcode op : {Opcode::kExponential, Opcode::kLogistic, Opcode::kLog, Opcode::kTanh}) {
    Module m;
    auto* a = m.Parameter(Shape(DType::kF32, {plan.elements}), "a");
    auto* u = m.Unary(op, a);
    const double ns =
        ColdInstructionNs(*u, plan, 21, /*positive=*/op == Opcode::kLog) / static_cast<double>(plan.elements);
    const bool scalar = op == Opcode::kExponential || op == Opcode::kLogistic;
    if (scalar) per.push_back(ns);
    rows->push_back(absl::StrFormat("  %-22s %6.2f ns per element%s", compiler::OpcodeName(op), ns,
                                    scalar ? "" : " (near the stream: priced by the roofline)"));
  }
  return MedianOf(per);
}

// A fused multiply by a broadcast, as batch norm scales NCHW per channel:
// the channel broadcast (dim 1 of 4) is gathered element by element, a
// trailing-block broadcast is copied in runs. The difference per element.
double MeasureStridedBroadcast(const OpClassPlan& plan, std::vector<std::string>* rows) {
  rows->push_back("fused loop: multiply by a broadcast (f32 [4,16,32,32], operands cold, median)");
  double ns[2] = {0, 0};
  const Shape full(DType::kF32, {4, 16, 32, 32});
  for (int strided = 0; strided < 2; ++strided) {
    Module m;
    auto* x = m.Parameter(full, "x");
    // Against a broadcast of one value, which the fused loop reads as a scalar: the same
    // traffic, and no broadcast to pay for (a trailing block's runs are copied, and cost).
    auto* v = strided ? m.Parameter(Shape(DType::kF32, {16}), "v") : m.Parameter(Shape(DType::kF32, {}), "v");
    auto* b = m.BroadcastInDim(v, full.dims, strided ? std::vector<int64_t>{1} : std::vector<int64_t>{});
    auto* mul = m.Binary(Opcode::kMultiply, x, b);
    const compiler::FusionPlan fusion = compiler::PlanFusion(m);
    const compiler::FusedKernel* k = fusion.KernelOf(mul->id);
    if (!k) {
      rows->push_back("  (the fusion pass did not fuse the broadcast: not measured)");
      return 0;
    }
    Rotation rot({full, v->shape}, full, plan.cold_bytes);
    std::vector<const Literal*> values(static_cast<size_t>(mul->id + 1), nullptr);
    ns[strided] = RotatingMedianNs(
        [&](int c) {
          values[x->id] = &rot.operands[c][0];
          values[v->id] = &rot.operands[c][1];
          (void)EvalFusedKernel(*k, values, &rot.outs[c]);
        },
        rot.copies(), 21);
    rows->push_back(absl::StrFormat("  %-30s %9.1f us", strided ? "per channel (strided)" : "one value",
                                    ns[strided] / 1e3));
  }
  const double per = std::max(0.0, (ns[1] - ns[0]) / static_cast<double>(full.elements()));
  rows->push_back(absl::StrFormat("  strided over one value: %.2f ns per element", per));
  return per;
}

// A fused loop's time per element for each arithmetic member beyond the
// first: two kernels over the same three cold operands, one of 2 ops and one
// of 12 (an optimizer's mix: multiplies, adds, a subtract, a sqrt and a
// divide), the difference over 10 ops per element. The roofline prices a
// fused loop by its traffic alone; an optimizer's update of 12 ops per
// element ran at half the cold stream's bandwidth.
double MeasureFusedOps(const OpClassPlan& plan, std::vector<std::string>* rows) {
  rows->push_back(absl::StrFormat("fused loop of 2 ops and of 12 ops (f32 [%d], three operands cold, median)",
                                  plan.elements * 4));
  const Shape s(DType::kF32, {plan.elements * 4});
  double ns[2] = {0, 0};
  constexpr int kOps[2] = {2, 12};
  for (int chain = 0; chain < 2; ++chain) {
    Module m;
    auto* x = m.Parameter(s, "x");
    auto* y = m.Parameter(s, "y");
    auto* z = m.Parameter(s, "z");
    auto bin = [&](Opcode op, Instruction* a, Instruction* b) { return m.Binary(op, a, b); };
    Instruction* t = bin(Opcode::kAdd, bin(Opcode::kMultiply, x, y), z);  // 2 ops
    if (chain == 1) {
      t = bin(Opcode::kSubtract, bin(Opcode::kMultiply, t, x), y);  // 4
      auto* norm = m.Unary(
          Opcode::kSqrt, bin(Opcode::kAdd, bin(Opcode::kMultiply, z, z), bin(Opcode::kMultiply, y, y)));  // 8
      t = bin(Opcode::kDivide, t,
              bin(Opcode::kAdd, bin(Opcode::kAdd, norm, bin(Opcode::kMultiply, x, x)), y));  // 12
    }
    const compiler::FusionPlan fusion = compiler::PlanFusion(m);
    const compiler::FusedKernel* k = fusion.KernelOf(t->id);
    if (!k) {
      rows->push_back("  (the fusion pass did not fuse the chain: not measured)");
      return 0;
    }
    Rotation rot({s, s, s}, s, plan.cold_bytes);
    std::vector<const Literal*> values(static_cast<size_t>(t->id + 1), nullptr);
    values[x->id] = &rot.operands[0][0];
    values[y->id] = &rot.operands[0][1];
    values[z->id] = &rot.operands[0][2];
    if (absl::Status st = EvalFusedKernel(*k, values, &rot.outs[0]); !st.ok()) {
      rows->push_back(absl::StrFormat("  (the %d-op kernel of %d members failed: %s; not measured)",
                                      kOps[chain], static_cast<int>(k->members.size()), st.message()));
      return 0;
    }
    ns[chain] = RotatingMedianNs(
        [&](int c) {
          values[x->id] = &rot.operands[c][0];
          values[y->id] = &rot.operands[c][1];
          values[z->id] = &rot.operands[c][2];
          (void)EvalFusedKernel(*k, values, &rot.outs[c]);
        },
        rot.copies(), 21);
    rows->push_back(absl::StrFormat("  %2d ops %10.1f us", kOps[chain], ns[chain] / 1e3));
  }
  const double per = std::max(0.0, (ns[1] - ns[0]) / static_cast<double>(s.elements()) / (kOps[1] - kOps[0]));
  rows->push_back(absl::StrFormat("  per element per op beyond the first: %.3f ns", per));
  return per;
}

// [s, D] x [D, D], the weight matrix cold: the GEMM of a few rows (a
// layer's input gradient); [s, D] x [D, D]^T, the same with the weight
// stored [out, in] as a Linear layer keeps it (its forward: 1.1-1.3x the
// time of the first at s = 8 and 32, the weight read across its rows); and
// [s, D]^T x [s, D], a weight gradient with s contracted; at D = the plan's
// other dim and a quarter of it (the llama's 256 beside the mlp's 1024: the
// same s ran 20-35% slower with the narrower other dims).
void MeasureSkinnyGemm(const OpClassPlan& plan, OpClassFigures* f, std::vector<std::string>* rows) {
  const int64_t wide = plan.gemm_other_dim, narrow = std::max<int64_t>(1, plan.gemm_other_dim / 4);
  rows->push_back(absl::StrFormat(
      "skinny GEMM (dot_general f32, operands cold, median, interleaved): [s,D]x[D,D] (few rows), "
      "[s,D]x[D,D]^T (few rows, W^T) and [s,D]^T x [s,D] (a weight gradient: s contracted), D = %d and %d",
      wide, narrow));
  Interleaved bench(plan);
  enum Form { kRows, kContracted, kTransposed };
  constexpr const char* kFormNames[] = {"rows", "contracted", "rows, W^T"};
  struct Case {
    int64_t s, d;
    Form form;
    double* out;
  };
  const std::vector<Case> cases = {{8, wide, kRows, &f->gemm8_flops},
                                   {32, wide, kRows, &f->gemm32_flops},
                                   {128, wide, kRows, &f->gemm128_flops},
                                   {8, wide, kContracted, &f->gemm8k_flops},
                                   {32, wide, kContracted, &f->gemm32k_flops},
                                   {128, wide, kContracted, &f->gemm128k_flops},
                                   {8, wide, kTransposed, &f->gemm8t_flops},
                                   {32, wide, kTransposed, &f->gemm32t_flops},
                                   {128, wide, kTransposed, &f->gemm128t_flops},
                                   {8, narrow, kRows, &f->gemm8_narrow_flops},
                                   {32, narrow, kRows, &f->gemm32_narrow_flops},
                                   {128, narrow, kRows, &f->gemm128_narrow_flops},
                                   {8, narrow, kContracted, &f->gemm8k_narrow_flops},
                                   {32, narrow, kContracted, &f->gemm32k_narrow_flops},
                                   {128, narrow, kContracted, &f->gemm128k_narrow_flops},
                                   {8, narrow, kTransposed, &f->gemm8t_narrow_flops},
                                   {32, narrow, kTransposed, &f->gemm32t_narrow_flops},
                                   {128, narrow, kTransposed, &f->gemm128t_narrow_flops}};
  for (const Case& c : cases) {
    auto m = std::make_unique<Module>();
    compiler::DotDims dd;
    auto* a = m->Parameter(Shape(DType::kF32, {c.s, c.d}), "a");
    auto* b = m->Parameter(c.form == kContracted ? Shape(DType::kF32, {c.s, c.d}) : Shape(DType::kF32, {c.d, c.d}),
                           "b");
    dd.lhs_contracting = {c.form == kContracted ? 0 : 1};
    dd.rhs_contracting = {c.form == kTransposed ? 1 : 0};  // W^T: the weight stored [out, in]
    auto* dot = m->DotGeneral(a, b, dd);
    bench.Add(std::move(m), dot);
  }
  const std::vector<double> ns = bench.MedianNs(11);
  for (size_t k = 0; k < ns.size(); ++k) {
    const Case& c = cases[k];
    *c.out = 2.0 * static_cast<double>(c.s * c.d * c.d) / ns[k] * 1e9;
    rows->push_back(absl::StrFormat("  s=%-4d D=%-5d %-11s %10.1f us  %6.1f GFLOP/s", c.s, c.d, kFormNames[c.form],
                                    ns[k] / 1e3, *c.out / 1e9));
  }
}

// Kernels of a few KiB as the executor runs them among other chips: operands
// cold, the result a fresh buffer allocated just before the timed span (as
// ExecuteProgram does), timed on the thread's CPU clock. A fused loop of
// three ops and a lone add; each one's time less its traffic at the cold
// stream is a per-kernel overhead, and the figure is their mean.
double MeasureSmallKernels(const OpClassPlan& plan, double cold_bandwidth, std::vector<std::string>* rows) {
  const int64_t e = plan.small_elements;
  rows->push_back(absl::StrFormat("small kernels (f32 [%d], operands cold, a fresh result each call, median)", e));
  const Shape s(DType::kF32, {e});
  std::vector<double> overheads;
  for (int fused = 1; fused >= 0; --fused) {
    Module m;
    auto* x = m.Parameter(s, "x");
    auto* y = m.Parameter(s, "y");
    auto* z = m.Parameter(s, "z");
    Instruction* root = fused ? m.Binary(Opcode::kMaximum, m.Binary(Opcode::kAdd, m.Binary(Opcode::kMultiply, x, y), z), x)
                              : m.Binary(Opcode::kAdd, x, y);
    const compiler::FusionPlan fusion = compiler::PlanFusion(m);
    const compiler::FusedKernel* k = fused ? fusion.KernelOf(root->id) : nullptr;
    if (fused && !k) continue;
    const int operands = fused ? 3 : 2;
    Rotation rot(std::vector<Shape>(operands, s), s, plan.cold_bytes);
    std::vector<const Literal*> values(static_cast<size_t>(root->id + 1), nullptr);
    auto call = [&](int c, Literal* out) {
      if (k) {
        values[x->id] = &rot.operands[c][0];
        values[y->id] = &rot.operands[c][1];
        values[z->id] = &rot.operands[c][2];
        (void)EvalFusedKernel(*k, values, out);
      } else {
        (void)EvalInstruction(*root, rot.Ops(c), 0, out);
      }
    };
    for (int c = 0; c < rot.copies(); ++c) call(c, &rot.outs[c]);
    std::vector<double> t;
    for (int r = 0; r < 201; ++r) {
      Literal out = Literal::Uninitialized(s);
      const int64_t t0 = ThreadCpuNs();
      call(r % rot.copies(), &out);
      t.push_back(static_cast<double>(ThreadCpuNs() - t0));
    }
    const double ns = MedianOf(t);
    const double traffic = cold_bandwidth > 0 ? (operands + 1) * s.bytes() / cold_bandwidth * 1e9 : 0;
    overheads.push_back(std::max(0.0, ns - traffic));
    rows->push_back(absl::StrFormat("  %-26s %8.2f us, %6.2f us over its traffic", fused ? "fused loop of 3 ops" : "add",
                                    ns / 1e3, overheads.back() / 1e3));
  }
  double sum = 0;
  for (double o : overheads) sum += o;
  return overheads.empty() ? 0 : sum / static_cast<double>(overheads.size());
}

// Reduce kernels as the samples run them on their own: batch norm's
// statistics ([4,16,32,32] over 0, 2, 3) and a bias gradient ([128,1024]
// over 0); time per operand element, the mean of the two.
double MeasureReduce(const OpClassPlan& plan, std::vector<std::string>* rows) {
  rows->push_back("reduce (sum, f32, operands cold, median): per operand element");
  std::vector<double> per;
  for (auto [dims, over] : {std::pair<std::vector<int64_t>, std::vector<int64_t>>{{4, 16, 32, 32}, {0, 2, 3}},
                            {{128, 1024}, {0}}}) {
    Module m;
    auto* a = m.Parameter(Shape(DType::kF32, dims), "a");
    auto* r = m.Reduce(a, m.ScalarConstant(DType::kF32, 0), over, compiler::ReduceKind::kSum);
    const double elements = static_cast<double>(a->shape.elements());
    per.push_back(ColdInstructionNs(*r, plan, 21) / elements);
    rows->push_back(absl::StrFormat("  %s -> %-14s %6.2f ns per element", a->shape.ToString(), r->shape.ToString(),
                                    per.back()));
  }
  return (per[0] + per[1]) / 2;
}

// A kernel run over and over on another thread until stopped: a chip on the
// other core.
class Neighbour {
 public:
  Neighbour(const Instruction& kernel, const Rotation& rot) {
    thread_ = std::thread([&kernel, &rot, this] {
      GangScope no_gang(nullptr);
      std::vector<Literal> outs;
      for (int c = 0; c < rot.copies(); ++c) outs.emplace_back(kernel.shape);
      for (int c = 0; !stop_.load(std::memory_order_relaxed); c = (c + 1) % rot.copies())
        (void)EvalInstruction(kernel, rot.Ops(c), 0, &outs[c]);  // valid by construction
    });
  }
  ~Neighbour() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A compute-bound and a memory-bound kernel of a chip, each timed alone,
// beside a core running the other chips' compute-bound kernel and beside one
// streaming (cores > 1). Sets beside_compute and beside_memory to the
// slowdowns with the other core doing each half the time: on this VM a GEMM
// ran 25% slower beside a stream than alone, and about as fast beside
// another GEMM, so which one the run's chips overlap decides; half and half
// is the assumption (the matrix is printed).
void MeasureBeside(const OpClassPlan& plan, OpClassFigures* f, std::vector<std::string>* rows) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores < 2) return;
  rows->push_back(
      "beside a busy core, over alone (a GEMM [128,256]x[256,1024] and an add of 1 Mi elements, "
      "operands cold, median)");
  Module m;
  auto* a = m.Parameter(Shape(DType::kF32, {128, 256}), "a");
  auto* b = m.Parameter(Shape(DType::kF32, {256, 1024}), "b");
  compiler::DotDims dd;
  dd.lhs_contracting = {1};
  dd.rhs_contracting = {0};
  const Instruction* kernels[2] = {m.DotGeneral(a, b, dd), nullptr};
  auto* x = m.Parameter(Shape(DType::kF32, {int64_t{1} << 20}), "x");
  kernels[1] = m.Binary(Opcode::kAdd, x, x);
  auto shapes = [](const Instruction* k) {
    std::vector<Shape> v;
    for (const Instruction* o : k->operands) v.push_back(o->shape);
    return v;
  };
  // The timed kernels' copies and the neighbours' own.
  std::vector<std::unique_ptr<Rotation>> timed, theirs;
  for (const Instruction* k : kernels) {
    timed.push_back(std::make_unique<Rotation>(shapes(k), k->shape, plan.cold_bytes));
    theirs.push_back(std::make_unique<Rotation>(shapes(k), k->shape, plan.cold_bytes / 2));
  }
  // [timed kernel][0 alone, 1 beside compute, 2 beside memory]: times of two rounds, pooled.
  std::vector<double> t[2][3];
  for (int round = 0; round < 2; ++round)
    for (int beside = 0; beside < 3; ++beside) {
      std::unique_ptr<Neighbour> n;
      if (beside > 0) n = std::make_unique<Neighbour>(*kernels[beside - 1], *theirs[beside - 1]);
      for (int k = 0; k < 2; ++k) {
        Rotation& rot = *timed[k];
        for (int r = 0; r < 11; ++r) {
          const int c = r % rot.copies();
          const int64_t t0 = ThreadCpuNs();
          (void)EvalInstruction(*kernels[k], rot.Ops(c), 0, &rot.outs[c]);  // valid by construction
          t[k][beside].push_back(static_cast<double>(ThreadCpuNs() - t0));
        }
      }
    }
  double slow[2][2];
  for (int k = 0; k < 2; ++k) {
    const double alone = MedianOf(t[k][0]);
    for (int beside = 0; beside < 2; ++beside)
      slow[k][beside] = alone > 0 ? MedianOf(t[k][beside + 1]) / alone : 0;
    rows->push_back(absl::StrFormat("  %-6s %8.1f us alone, x%.2f beside a GEMM, x%.2f beside a stream",
                                    k == 0 ? "GEMM" : "stream", alone / 1e3, slow[k][0], slow[k][1]));
  }
  f->beside_compute = (slow[0][0] + slow[0][1]) / 2;
  f->beside_memory = (slow[1][0] + slow[1][1]) / 2;
  rows->push_back(absl::StrFormat("  the other core half compute, half streaming: GEMMs x%.3f, streams x%.3f",
                                  f->beside_compute, f->beside_memory));
}

}  // namespace

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

OpClassFigures MeasureOpClasses(const OpClassPlan& plan, std::vector<std::string>* rows) {
  OpClassFigures f;
  if (!plan.measure) return f;
  // One thread, no gang: a chip of a mesh with at least as many chips as cores.
  GangScope no_gang(nullptr);
  MeasureConv(plan, &f, rows);
  f.cold_bandwidth = MeasureColdStream(plan, rows);
  f.window_read_ns = MeasureWindow(plan, rows);
  f.transcendental_ns = MeasureTranscendental(plan, rows);
  f.strided_broadcast_ns = MeasureStridedBroadcast(plan, rows);
  MeasureSkinnyGemm(plan, &f, rows);
  f.cold_kernel_overhead_ns = MeasureSmallKernels(plan, f.cold_bandwidth, rows);
  f.reduce_read_ns = MeasureReduce(plan, rows);
  f.fused_op_ns = MeasureFusedOps(plan, rows);
  if (plan.beside) MeasureBeside(plan, &f, rows);
  return f;
}

}  // namespace shardscope::runtime
