// The cost model (see cost_model.h) and the built-in chip profiles. Every
// number of a profile says where it comes from: a public specification sheet,
// a measurement on this machine, or an assumption named as such.
#include "compiler/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardscope::compiler {

const char* RooflineClassName(RooflineClass c) {
  switch (c) {
    case RooflineClass::kNone: return "none";
    case RooflineClass::kCompute: return "compute";
    case RooflineClass::kMemory: return "memory";
    case RooflineClass::kCollective: return "collective";
  }
  return "none";
}

namespace {

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;
constexpr int64_t kGiB = int64_t{1} << 30;

}  // namespace

ChipProfile CpuProfile(double peak_flops, double gang_peak_flops, double hbm_bandwidth, double kernel_overhead_ns) {
  ChipProfile cpu;
  cpu.name = "cpu";
  cpu.description = "this machine: one core per chip, or a gang of cores when the mesh leaves them idle (calibrated)";
  cpu.peak_flops = peak_flops;
  cpu.gang_peak_flops = gang_peak_flops;
  cpu.vector_flops = cpu.peak_flops;   // derived: the same SIMD units (not a separate parameter)
  cpu.hbm_bandwidth = hbm_bandwidth;
  cpu.hbm_bytes = 16 * kGiB;           // the runtime's default device budget (core InitOptions)
  cpu.link_bandwidth = cpu.hbm_bandwidth;  // derived: collectives here are in-memory copies
  cpu.kernel_overhead_ns = kernel_overhead_ns;
  cpu.link_latency_ns = cpu.kernel_overhead_ns;  // derived: a ring step is one more kernel call
  cpu.host_bandwidth = cpu.hbm_bandwidth;        // derived: a "transfer" is a memcpy
  cpu.dcn_bandwidth = cpu.link_bandwidth;        // derived: virtual hosts share this machine's memory
  cpu.dcn_latency_ns = cpu.link_latency_ns;
  // The virtual chips' collectives are one thread's copies through memory
  // (runtime/collectives.cc): priced as such, at the stream bandwidth.
  cpu.collectives_in_memory = true;
  return cpu;
}

namespace {

std::vector<ChipProfile> MakeProfiles() {
  std::vector<ChipProfile> p;

  // cpu: one virtual chip is one core of this machine (the executor runs each
  // device's kernels on one pool thread and times them on that thread's CPU
  // clock), or, on a mesh with fewer chips than cores, that thread plus a
  // gang of helpers (ForGangWidth). Calibrated on microbenchmarks only — never on the samples — with
  //   OPENBLAS_CORETYPE= build-cost/bench/calibrate_cpu_bench
  // (AMD EPYC Zen 5 VM, 2 cores; docs/cost_model.md has the full output).
  // Four parameters: GEMM FLOP/s on one core and on a gang spanning every
  // core, stream bandwidth, per-kernel overhead. These are the *fixed* values
  // (2026-11-23), which tests pin; a run measures its own
  // (runtime/cpu_calibration.h).
  p.push_back(CpuProfile(206.7 * kGiga,    // measured: dot_general GEMM through the runtime's kernels, one core
                         385.0 * kGiga,    // measured: the same GEMM split over a gang of 2 (both cores)
                         37.64 * kGiga,    // measured: elementwise add stream through the runtime's kernels
                         1693));           // measured: intercept of the stream fit (tiny kernels)

  // tpu-v4: Google Cloud TPU v4 system architecture,
  // https://cloud.google.com/tpu/docs/v4 ("Peak compute per chip 275 teraflops
  // (bf16 or int8)", "HBM2 capacity and bandwidth 32 GiB, 1200 GBps").
  ChipProfile tpu;
  tpu.name = "tpu-v4";
  tpu.description = "TPU-v4-like chip (Cloud TPU v4 specification)";
  // XLA runs f32 dots at DEFAULT precision as single bf16 MXU passes, so the
  // bf16 peak is the one our f32 programs would see.
  tpu.peak_flops = 275 * kTera;
  // Not on the specification sheet. Assumption: the vector units of the two
  // TensorCores, 8 x 128 lanes each at the 1050 MHz clock of the TPU v4 paper
  // (Jouppi et al., ISCA 2023), one FMA (2 FLOPs) per lane per cycle.
  tpu.vector_flops = 2 * 8 * 128 * 2 * 1.05e9;  // ~4.3 TFLOP/s
  tpu.hbm_bandwidth = 1200 * kGiga;
  tpu.hbm_bytes = 32 * kGiB;
  // ICI: 6 links of 50 GB/s per chip (TPU v4 paper; "2400 Gbps" per chip in
  // Google's TPU comparison tables). A torus all-reduce drives all six links,
  // so the chip's total is the beta term (an upper bound).
  tpu.link_bandwidth = 300 * kGiga;
  tpu.link_latency_ns = 1000;          // assumption: ~1 us per ring step (hop + sync)
  // Between pods (multislice): assumption, a 200 Gbit/s NIC per host of 4
  // chips, 6.25 GB/s per chip, ~10 us per step.
  tpu.dcn_bandwidth = 6.25 * kGiga;
  tpu.dcn_latency_ns = 10000;
  tpu.host_bandwidth = 16 * kGiga;     // assumption: PCIe Gen3 x16 host link per chip
  tpu.kernel_overhead_ns = 500;        // assumption: a fusion boundary in one XLA program, no launch
  p.push_back(tpu);

  // h100: NVIDIA H100 Tensor Core GPU datasheet, SXM5 column,
  // https://www.nvidia.com/en-us/data-center/h100/ ("FP32 67 teraFLOPS",
  // "TF32 Tensor Core 989 teraFLOPS" with sparsity, i.e. 494.7 dense;
  // "GPU memory 80GB", "GPU memory bandwidth 3.35TB/s", "NVLink 900GB/s",
  // "PCIe Gen5 128GB/s").
  ChipProfile h100;
  h100.name = "h100";
  h100.description = "H100-like GPU (NVIDIA H100 SXM5 datasheet)";
  // XLA lets f32 dots use TF32 tensor cores on Ampere and later: dense TF32.
  h100.peak_flops = 494.7 * kTera;
  h100.vector_flops = 66.9 * kTera;    // FP32 on the CUDA cores
  h100.hbm_bandwidth = 3350 * kGiga;
  h100.hbm_bytes = 80'000'000'000;     // "80GB" (decimal, as on the sheet)
  h100.link_bandwidth = 450 * kGiga;   // NVLink 900 GB/s is both directions together
  h100.link_latency_ns = 2000;         // assumption: NCCL ring step latency over NVLink, ~2 us
  // Between hosts: assumption, one 400 Gbit/s InfiniBand NIC per GPU (as in
  // DGX H100), 50 GB/s, ~5 us per step.
  h100.dcn_bandwidth = 50 * kGiga;
  h100.dcn_latency_ns = 5000;
  h100.host_bandwidth = 64 * kGiga;    // PCIe Gen5 128 GB/s is both directions together
  h100.kernel_overhead_ns = 2000;      // assumption: CUDA kernel launch, ~2 us
  p.push_back(h100);
  return p;
}

bool IsMatrixOp(const Instruction& i) {
  // By name, so a convolution added to the op set later is a matrix op too.
  std::string_view n = OpcodeName(i.op);
  return i.op == Opcode::kDotGeneral || n == "stablehlo.convolution";
}

// Ops a device does not spend time on: bound at launch or baked into the program.
bool Free(const Instruction& i) {
  return i.op == Opcode::kParameter || i.op == Opcode::kConstant || i.op == Opcode::kPartitionId ||
         i.op == Opcode::kGetTupleElement;  // a while's result, handed over
}

void Accumulate(OpCost* total, const OpCost& c, double times) {
  total->flops += c.flops * times;
  total->bytes_read += std::llround(static_cast<double>(c.bytes_read) * times);
  total->bytes_written += std::llround(static_cast<double>(c.bytes_written) * times);
  total->compute_ns += c.compute_ns * times;
  total->memory_ns += c.memory_ns * times;
  total->network_ns += c.network_ns * times;
  total->modeled_ns += std::llround(static_cast<double>(c.modeled_ns) * times);
}

}  // namespace

int CollectiveGroupSize(const Instruction& i, int default_group_size) {
  if (i.op == Opcode::kCollectivePermute) {
    // The devices a permute names; one (a device sending to itself) or none moves nothing.
    std::set<int64_t> devices;
    for (const auto& [source, target] : i.source_target_pairs) devices.insert({source, target});
    return static_cast<int>(devices.size());
  }
  size_t n = 0;
  for (const auto& g : i.replica_groups) n = std::max(n, g.size());
  return n > 0 ? static_cast<int>(n) : std::max(1, default_group_size);
}

int64_t CollectiveBytes(const Instruction& i) {
  return std::max(i.shape.bytes(), i.operands.empty() ? 0 : i.operands[0]->shape.bytes());
}

namespace {

int64_t OperandBytes(const Instruction& i) {
  int64_t b = 0;
  for (const Instruction* o : i.operands) b += o->shape.bytes();
  return b;
}

}  // namespace

ChipProfile ChipProfile::ForGangWidth(int width) const {
  if (width <= 1 || gang_peak_flops <= 0) return *this;
  ChipProfile p = *this;
  p.peak_flops = gang_peak_flops;
  p.vector_flops = gang_peak_flops;
  p.description = absl::StrCat(description, "; this chip's kernels split over ", width, " cores");
  return p;
}

ChipProfile ChipProfile::ForSharedCores(int chips, int cores) const {
  if (chips <= cores || (cold_bandwidth <= 0 && chip_spread_ns <= 0)) return *this;
  ChipProfile p = *this;
  p.cold_operands = cold_bandwidth > 0;
  p.chip_waits = chip_spread_ns > 0;
  if (beside_compute > 0) {
    for (double* rate : {&p.peak_flops, &p.vector_flops, &p.conv_flops, &p.conv_dilated_flops, &p.gemm8_flops,
                         &p.gemm32_flops, &p.gemm128_flops, &p.gemm8k_flops, &p.gemm32k_flops, &p.gemm128k_flops,
                         &p.gemm8t_flops, &p.gemm32t_flops, &p.gemm128t_flops})
      *rate /= beside_compute;
    for (double& rate : p.gemm_narrow_flops) rate /= beside_compute;
    p.transcendental_ns *= beside_compute;
    p.window_read_ns *= beside_compute;
    p.fused_op_ns *= beside_compute;
  }
  if (beside_memory > 0) {
    p.hbm_bandwidth /= beside_memory;
    p.cold_bandwidth /= beside_memory;
    p.reduce_read_ns *= beside_memory;
    p.strided_broadcast_ns *= beside_memory;
  }
  p.description = absl::StrCat(
      description, "; ", chips, " chips share ", cores,
      " cores:", p.cold_operands ? " operands stream cold" : "",
      beside_compute > 0
          ? absl::StrFormat(", kernels beside the other cores' chips (GEMMs x%.2f, streams x%.2f)",
                            beside_compute, beside_memory)
          : "",
      p.chip_waits ? ", each collective waits for the slowest chip" : "");
  return p;
}

double ExpectedMaxOfNormals(int n) {
  if (n <= 1) return 0;
  static std::mutex mu;
  static std::map<int, double> memo;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = memo.find(n); it != memo.end()) return it->second;
  // E[max] = integral of x * n phi(x) Phi(x)^(n-1) dx, by the midpoint rule.
  const double dx = 1e-3, pi = 3.14159265358979323846;
  double e = 0;
  for (double x = -9 + dx / 2; x < 9; x += dx) {
    const double phi = std::exp(-x * x / 2) / std::sqrt(2 * pi);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    e += x * n * phi * std::pow(cdf, n - 1) * dx;
  }
  return memo[n] = e;
}

const std::vector<ChipProfile>& BuiltinProfiles() {
  static const std::vector<ChipProfile> profiles = MakeProfiles();
  return profiles;
}

std::string ProfileNames() {
  std::string s;
  for (const ChipProfile& p : BuiltinProfiles()) absl::StrAppend(&s, s.empty() ? "" : ", ", p.name);
  return s;
}

absl::StatusOr<ChipProfile> FindProfile(const std::string& name) {
  for (const ChipProfile& p : BuiltinProfiles())
    if (p.name == name) return p;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown chip profile '", name, "' (known: ", ProfileNames(), ")"));
}

CostModel::CostModel(ChipProfile profile) : profile_(std::move(profile)) {}

double CostModel::Flops(const Instruction& i) {
  // One definition of FLOPs for the whole stack (graphs.flops uses it too).
  return InstructionFlops(i);
}

void CostModel::Bytes(const Instruction& i, int64_t* read, int64_t* written) {
  *read = 0;
  *written = i.shape.bytes();
  switch (i.op) {
    case Opcode::kParameter:
    case Opcode::kConstant:
    case Opcode::kPartitionId:
      *written = 0;
      return;
    case Opcode::kIota:
      return;  // writes only
    case Opcode::kOptimizationBarrier:  // a copy of its first operand; the rest are only waited for
      *read = i.operands.empty() ? 0 : i.operands[0]->shape.bytes();
      return;
    case Opcode::kSlice:
    case Opcode::kDynamicSlice:
    case Opcode::kGather: {
      // Read only the window (the size of the result) plus the start indices:
      // an embedding lookup touches its rows, not the whole table.
      *read = i.shape.bytes();
      for (size_t k = 1; k < i.operands.size(); ++k) *read += i.operands[k]->shape.bytes();
      return;
    }
    default:
      // Elementwise, layout, dots, reductions, collectives and any op added
      // later: every operand is read once and the result written once.
      *read = OperandBytes(i);
      return;
  }
}

OpCost CostModel::Roofline(double flops, int64_t bytes_read, int64_t bytes_written, bool matrix) const {
  return Roofline(flops, bytes_read, bytes_written, matrix ? profile_.peak_flops : profile_.vector_flops, 0);
}

OpCost CostModel::Roofline(double flops, int64_t bytes_read, int64_t bytes_written, double peak,
                           double serial_ns, double added_ns) const {
  OpCost c;
  c.flops = flops;
  c.bytes_read = bytes_read;
  c.bytes_written = bytes_written;
  const double overlapped_ns = (peak > 0 ? flops / peak * 1e9 : 0) + serial_ns;
  c.compute_ns = overlapped_ns + added_ns;
  const double bandwidth =
      profile_.cold_operands && profile_.cold_bandwidth > 0 ? profile_.cold_bandwidth : profile_.hbm_bandwidth;
  c.memory_ns = bandwidth > 0 ? static_cast<double>(bytes_read + bytes_written) / bandwidth * 1e9 : 0;
  c.roofline = c.compute_ns >= c.memory_ns && (flops > 0 || serial_ns > 0 || added_ns > 0) ? RooflineClass::kCompute
                                                                           : RooflineClass::kMemory;
  const double overhead = profile_.cold_operands ? std::max(profile_.kernel_overhead_ns, profile_.cold_kernel_overhead_ns)
                                                 : profile_.kernel_overhead_ns;
  c.modeled_ns = std::llround(std::max(overlapped_ns, c.memory_ns) + added_ns + overhead);
  return c;
}

namespace {

int64_t Product(const std::vector<int64_t>& dims, const std::vector<int64_t>& which) {
  int64_t p = 1;
  for (int64_t d : which)
    if (d >= 0 && d < static_cast<int64_t>(dims.size())) p *= dims[d];
  return p;
}

// The kernels compute these through FlushedExp (exp with its results below
// the normal range flushed), several times log's or tanh's cost, which run at
// about the stream's speed (runtime/cpu_op_benchmarks.cc prints all four), so
// the roofline prices those.
bool Transcendental(Opcode op) { return op == Opcode::kExponential || op == Opcode::kLogistic; }

}  // namespace

double CostModel::MatrixRate(const Instruction& i) const {
  const ChipProfile& p = profile_;
  if (i.op != Opcode::kDotGeneral) {
    const auto& ld = i.conv.lhs_dilation;
    const bool dilated = std::any_of(ld.begin(), ld.end(), [](int64_t d) { return d > 1; });
    if (dilated && p.conv_dilated_flops > 0) return p.conv_dilated_flops;
    return p.conv_flops > 0 ? p.conv_flops : p.peak_flops;
  }
  if (p.gemm8_flops <= 0 || p.gemm32_flops <= 0 || p.gemm128_flops <= 0 || i.operands.size() != 2) return p.peak_flops;
  // The GEMM's rows, columns and contraction; a skinny one runs at the rate
  // measured for its smallest dim.
  const auto& l = i.operands[0]->shape.dims;
  const auto& r = i.operands[1]->shape.dims;
  const int64_t k = Product(l, i.dot.lhs_contracting);
  const int64_t m = Product(l, FreeDims(static_cast<int>(l.size()), i.dot.lhs_batch, i.dot.lhs_contracting));
  const int64_t n = Product(r, FreeDims(static_cast<int>(r.size()), i.dot.rhs_batch, i.dot.rhs_contracting));
  const double s = static_cast<double>(std::max<int64_t>(1, std::min({m, n, k})));
  // A contraction as small as the smallest free dim: a weight gradient's form, when measured.
  const bool contracted =
      k <= std::min(m, n) && p.gemm8k_flops > 0 && p.gemm32k_flops > 0 && p.gemm128k_flops > 0;
  // Few rows times a weight whose contracted dim is its minor one (x W^T, W
  // stored [out, in]), when measured. Only the measured orientation: the few
  // rows on the left.
  const auto& rc = i.dot.rhs_contracting;
  const bool transposed = !contracted && m <= n && !rc.empty() &&
                          std::find(rc.begin(), rc.end(), static_cast<int64_t>(r.size()) - 1) != rc.end() &&
                          p.gemm8t_flops > 0 && p.gemm32t_flops > 0 && p.gemm128t_flops > 0;
  double g8 = contracted ? p.gemm8k_flops : transposed ? p.gemm8t_flops : p.gemm8_flops;
  double g32 = contracted ? p.gemm32k_flops : transposed ? p.gemm32t_flops : p.gemm32_flops;
  double g128 = contracted ? p.gemm128k_flops : transposed ? p.gemm128t_flops : p.gemm128_flops;
  // The other two dims: the figures at 1024 and at 256, interpolated in log2 of the middle dim.
  const auto& narrow = p.gemm_narrow_flops;
  const int base = contracted ? 3 : transposed ? 6 : 0;
  if (narrow[base] > 0 && narrow[base + 1] > 0 && narrow[base + 2] > 0) {
    const double mid = static_cast<double>(std::max({std::min(m, n), std::min(std::max(m, n), k)}));
    const double t = std::clamp(
        std::log2(mid / ChipProfile::kNarrowDim) / std::log2(ChipProfile::kWideDim / ChipProfile::kNarrowDim),
        0.0, 1.0);
    g8 = narrow[base] + t * (g8 - narrow[base]);
    g32 = narrow[base + 1] + t * (g32 - narrow[base + 1]);
    g128 = narrow[base + 2] + t * (g128 - narrow[base + 2]);
  }
  // Below 8 the weights' read dominates as at 8: the rate falls with s.
  if (s <= 8) return g8 * s / 8;
  const double pts[4][2] = {{8, g8}, {32, g32}, {128, g128}, {256, p.peak_flops}};
  for (int j = 0; j < 3; ++j)
    if (s <= pts[j + 1][0]) {
      const double t = std::log2(s / pts[j][0]) / std::log2(pts[j + 1][0] / pts[j][0]);
      return pts[j][1] + t * (pts[j + 1][1] - pts[j][1]);
    }
  return p.peak_flops;
}

bool CostModel::IsStridedBroadcast(const Instruction& b) {
  // The runtime's MapBroadcast: the operand's dims of size > 1, in order and
  // each filling its output dim, contiguous (size-1 output dims between them
  // allowed) and at the end (i % size) or the start (i / size) of the output.
  if (b.op != Opcode::kBroadcastInDim || b.operands.empty()) return false;
  const Shape& in = b.operands[0]->shape;
  const Shape& out = b.shape;
  if (in.elements() <= 1) return false;
  std::vector<int64_t> kept;
  for (size_t k = 0; k < b.dims.size() && k < in.dims.size(); ++k) {
    if (in.dims[k] == 1) continue;
    if (!kept.empty() && b.dims[k] <= kept.back()) return true;
    if (b.dims[k] < 0 || b.dims[k] >= out.rank() || in.dims[k] != out.dims[b.dims[k]]) return true;
    kept.push_back(b.dims[k]);
  }
  if (kept.empty()) return false;
  for (int64_t d = kept.front(); d <= kept.back(); ++d)
    if (out.dims[d] != 1 && std::find(kept.begin(), kept.end(), d) == kept.end()) return true;
  bool suffix = true, prefix = true;
  for (int64_t d = kept.back() + 1; d < out.rank(); ++d) suffix &= out.dims[d] == 1;
  for (int64_t d = 0; d < kept.front(); ++d) prefix &= out.dims[d] == 1;
  return !suffix && !prefix;
}

double CostModel::SerialNs(const Instruction& i, bool fused) const {
  const double elements = static_cast<double>(i.shape.elements());
  if (Transcendental(i.op)) return elements * profile_.transcendental_ns;
  if (i.op == Opcode::kReduceWindow) {
    double window = 1;
    for (int64_t d : i.window.dimensions) window *= static_cast<double>(d);
    return elements * window * profile_.window_read_ns;
  }
  // A reduce kernel of its own: the runtime's reduce over [K,R,K] and
  // [K,R] layouts (batch norm's statistics, a bias gradient), measured per
  // operand element; a fused reduce's rows are another code path.
  if (!fused && i.op == Opcode::kReduce && !i.operands.empty())
    return static_cast<double>(i.operands[0]->shape.elements()) * profile_.reduce_read_ns;
  return 0;
}

double CostModel::ChipWaitNs(double segment_ns, int group_size) const {
  if (!profile_.chip_waits || profile_.chip_spread_ns <= 0 || segment_ns <= 0 || group_size <= 1) return 0;
  // The body: the slowest of n normal deviations. The tail: the chance that
  // the host stalls a core while one of the n chips runs its segment (n * T
  // of the cores' time), times a stall's mean length.
  const double stall = profile_.host_stall_per_s > 0
                           ? (1 - std::exp(-group_size * segment_ns * profile_.host_stall_per_s / 1e9)) *
                                 profile_.host_stall_mean_ns
                           : 0;
  return ExpectedMaxOfNormals(group_size) * std::sqrt(profile_.chip_spread_ns * segment_ns) + stall;
}

CollectiveKind CollectiveKindOf(Opcode op) {
  switch (op) {
    case Opcode::kAllGather:
      return CollectiveKind::kAllGather;
    case Opcode::kReduceScatter:
      return CollectiveKind::kReduceScatter;
    case Opcode::kAllToAll:
      return CollectiveKind::kAllToAll;
    case Opcode::kCollectivePermute:
      return CollectiveKind::kCollectivePermute;
    case Opcode::kCollectiveBroadcast:
      return CollectiveKind::kCollectiveBroadcast;
    default:
      return CollectiveKind::kAllReduce;
  }
}

double CostModel::CollectiveNs(CollectiveKind kind, int64_t bytes, int group_size) const {
  return CollectiveNs(kind, bytes, group_size, ici());
}

double InMemoryCollectiveBytes(CollectiveKind kind, int64_t bytes, int n) {
  const double b = static_cast<double>(bytes);
  switch (kind) {
    case CollectiveKind::kAllReduce: return (3.0 * n - 1) * b;
    case CollectiveKind::kReduceScatter: return (n + 3.0) * b;
    default: return 2.0 * n * b;
  }
}

int MeasuredCollectiveRow(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 0;
    case CollectiveKind::kReduceScatter:
      return 2;
    case CollectiveKind::kAllToAll:
      return 3;
    default:
      return 1;  // all_gather; permute and broadcast are copies as it is
  }
}

double CostModel::MeasuredCollectiveNs(CollectiveKind kind, double traffic) const {
  const auto& row = profile_.collective_ns[MeasuredCollectiveRow(kind)];
  int last = -1;  // the highest measured point (a quick plan measures fewer)
  while (last + 1 < kCollectivePoints && row[last + 1] > 0) ++last;
  if (last < 0 || traffic <= 0) return 0;
  if (traffic <= kCollectiveTraffic[0]) {
    const double overhead = std::min(profile_.kernel_overhead_ns, row[0]);
    return overhead + (row[0] - overhead) * traffic / kCollectiveTraffic[0];
  }
  if (traffic >= kCollectiveTraffic[last]) return row[last] * traffic / kCollectiveTraffic[last];
  int k = 0;
  while (traffic > kCollectiveTraffic[k + 1]) ++k;
  const double f =
      std::log(traffic / kCollectiveTraffic[k]) / std::log(kCollectiveTraffic[k + 1] / kCollectiveTraffic[k]);
  return std::exp(std::log(row[k]) + f * (std::log(row[k + 1]) - std::log(row[k])));
}

double CostModel::CollectiveNs(CollectiveKind kind, int64_t bytes, int group_size, const Link& link) const {
  if (group_size <= 1) return 0;
  if (profile_.collectives_in_memory) {
    if (const double t = MeasuredCollectiveNs(kind, InMemoryCollectiveBytes(kind, bytes, group_size)); t > 0)
      return t;
    // The pass reads and writes every member's buffer: cold when chips share the cores' caches.
    const double bandwidth =
        profile_.cold_operands && profile_.cold_bandwidth > 0 ? profile_.cold_bandwidth : profile_.hbm_bandwidth;
    return profile_.kernel_overhead_ns +
           (bandwidth > 0 ? InMemoryCollectiveBytes(kind, bytes, group_size) / bandwidth * 1e9 : 0);
  }
  const double n = group_size;
  double steps = n - 1;  // latency terms
  double volume = 1;     // multiples of `bytes` that cross a chip's link one after another
  switch (kind) {
    case CollectiveKind::kAllReduce:  // reduce-scatter then all-gather
      steps = 2 * (n - 1);
      volume = 2 * (n - 1) / n;
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:  // keeps its own block, sends the other n-1
      steps = n - 1;
      volume = (n - 1) / n;
      break;
    case CollectiveKind::kCollectivePermute:
      steps = 1;
      volume = 1;
      break;
    case CollectiveKind::kCollectiveBroadcast: {
      // Binomial tree: the holders double each step, each forwarding the whole value.
      steps = std::ceil(std::log2(n));
      volume = steps;
      break;
    }
  }
  double beta = link.bandwidth > 0 ? volume * static_cast<double>(bytes) / link.bandwidth * 1e9 : 0;
  return steps * link.latency_ns + beta;
}

OpCost CostModel::TransferCost(int64_t bytes) const {
  OpCost c;
  c.bytes_read = bytes;
  c.bytes_written = bytes;
  c.network_ns = profile_.host_bandwidth > 0 ? static_cast<double>(bytes) / profile_.host_bandwidth * 1e9 : 0;
  c.modeled_ns = std::llround(c.network_ns + profile_.kernel_overhead_ns);
  c.roofline = RooflineClass::kCollective;
  return c;
}

OpCost CostModel::WhileCost(const Instruction& w, int default_group_size) const {
  // The condition runs once more than the body. A trip count the program
  // does not make plain is taken as one iteration.
  const double trips = static_cast<double>(StaticTripCount(w).value_or(1));
  OpCost total;
  for (const auto* region : {w.cond.get(), w.body.get()}) {
    if (!region) continue;
    const double times = region == w.cond.get() ? trips + 1 : trips;
    for (const auto& i : region->instructions()) Accumulate(&total, InstructionCost(*i, default_group_size), times);
  }
  total.roofline = total.network_ns > std::max(total.compute_ns, total.memory_ns) ? RooflineClass::kCollective
                   : total.compute_ns >= total.memory_ns && total.flops > 0        ? RooflineClass::kCompute
                                                                                   : RooflineClass::kMemory;
  return total;
}

OpCost CostModel::InstructionCost(const Instruction& i, int default_group_size) const {
  if (Free(i)) return OpCost{};
  if (i.op == Opcode::kWhile) return WhileCost(i, default_group_size);
  int64_t read = 0, written = 0;
  Bytes(i, &read, &written);
  if (IsCollective(i.op)) {
    OpCost c;
    c.flops = Flops(i);
    c.bytes_read = read;
    c.bytes_written = written;
    c.network_ns = CollectiveNs(CollectiveKindOf(i.op), CollectiveBytes(i), CollectiveGroupSize(i, default_group_size));
    c.modeled_ns = std::llround(c.network_ns);
    c.roofline = RooflineClass::kCollective;
    return c;
  }
  const bool matrix = IsMatrixOp(i);
  return Roofline(Flops(i), read, written, matrix ? MatrixRate(i) : profile_.vector_flops, SerialNs(i, false));
}

OpCost CostModel::KernelCost(const std::vector<const Instruction*>& members,
                             const std::vector<const Instruction*>& outputs) const {
  std::set<const Instruction*> inside(members.begin(), members.end());
  std::set<const Instruction*> inputs;
  double flops = 0, serial_ns = 0, added_ns = 0;
  double peak = profile_.vector_flops;
  bool first_arithmetic = true;
  for (const Instruction* m : members) {
    if (Free(*m)) continue;
    flops += Flops(*m);
    if (IsMatrixOp(*m)) peak = MatrixRate(*m);  // a GEMM with its bias: the GEMM's rate
    serial_ns += SerialNs(*m, /*fused=*/true);
    // The loop's work on its cached blocks: arithmetic member by member (the
    // first one's is in the stream's measured time) and gathered broadcasts.
    const double elements = static_cast<double>(m->shape.elements());
    if (IsElementwise(m->op) && !Transcendental(m->op) && !std::exchange(first_arithmetic, false))
      added_ns += elements * profile_.fused_op_ns;
    if (IsStridedBroadcast(*m)) added_ns += elements * profile_.strided_broadcast_ns;
    for (const Instruction* o : m->operands)
      if (!inside.count(o)) inputs.insert(o);
  }
  int64_t read = 0, written = 0;
  for (const Instruction* in : inputs) read += in->shape.bytes();
  if (outputs.empty()) {
    if (!members.empty()) written = members.back()->shape.bytes();
  } else {
    for (const Instruction* o : outputs) written += o->shape.bytes();
  }
  return Roofline(flops, read, written, peak, serial_ns, added_ns);
}

std::vector<OpCost> CostModel::ProgramCosts(const Module& program, const FusionPlan* fusion) const {
  int64_t max_id = -1;
  for (const auto& i : program.instructions()) max_id = std::max(max_id, i->id);
  std::vector<OpCost> costs(static_cast<size_t>(max_id + 1));
  for (const auto& i : program.instructions()) {
    const FusedKernel* k = fusion ? fusion->KernelOf(i->id) : nullptr;
    if (fusion && fusion->Absorbed(i->id)) continue;  // its kernels carry it
    if (!k) costs[static_cast<size_t>(i->id)] = InstructionCost(*i, program.num_partitions());
    else if (k->root == i.get()) costs[static_cast<size_t>(i->id)] = KernelCost(k->members);
    // An absorbed member costs nothing of its own: its kernel carries it.
  }
  return costs;
}

}  // namespace shardscope::compiler
