// The cost model: what an op (or a fused kernel) costs — FLOPs, bytes read and
// written — and how long it would take on a target chip. Time is the roofline
// (the larger of FLOPs over peak and bytes over memory bandwidth, plus a fixed
// per-kernel overhead); collectives use an alpha-beta ring model. The runtime's
// Scheduler turns these durations into the `modeled` clock, and the store keeps
// them per op so measured and modeled time can be compared (docs/cost_model.md).
//
// Chip profiles are plain data: `cpu` (this machine, calibrated by
// bench/calibrate_cpu_bench.cc), `tpu-v4` and `h100` (public specification
// sheets, cited in cost_model.cc).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/fusion.h"
#include "compiler/ir.h"

namespace shardscope::compiler {

// What limits an op on the profile: the matrix/vector units, memory traffic,
// the interconnect, or nothing (parameters and constants cost no time).
enum class RooflineClass { kNone, kCompute, kMemory, kCollective };
const char* RooflineClassName(RooflineClass c);  // none | compute | memory | collective

// The `cpu` profile's measured collectives (runtime/cpu_collective_benchmark.h):
// the executor's all_reduce, all_gather, reduce_scatter and all_to_all, each
// timed at these amounts of traffic as InMemoryCollectiveBytes counts it. The
// other kinds are copies, priced as all_gather's.
inline constexpr int kCollectivePoints = 4;
inline constexpr int kMeasuredCollectiveKinds = 4;
inline constexpr std::array<double, kCollectivePoints> kCollectiveTraffic = {
    192.0 * 1024, 1.5 * 1024 * 1024, 12.0 * 1024 * 1024, 96.0 * 1024 * 1024};
// [kind][point]: ns at kCollectiveTraffic[point]; 0: not measured there.
using CollectiveTimes = std::array<std::array<double, kCollectivePoints>, kMeasuredCollectiveKinds>;

struct ChipProfile {
  std::string name;                // "cpu", "tpu-v4", "h100"
  std::string description;
  double peak_flops = 0;           // FLOP/s of the matrix units on our f32 programs (see .cc)
  double vector_flops = 0;         // FLOP/s of everything that is not a dot
  double hbm_bandwidth = 0;        // bytes/s between the chip and its memory
  int64_t hbm_bytes = 0;           // memory capacity
  double link_bandwidth = 0;       // bytes/s one chip pushes into a ring collective
  double link_latency_ns = 0;      // per ring step (alpha)
  double dcn_bandwidth = 0;        // the same between chips of different hosts (data-center network)
  double dcn_latency_ns = 0;
  double host_bandwidth = 0;       // bytes/s of host-to-device transfers
  double kernel_overhead_ns = 0;   // fixed cost of every kernel launch
  // cpu: GEMM FLOP/s of a chip whose intra-op gang (runtime/intra_op.h) spans
  // every core, as on a mesh with fewer chips than cores; 0 when not measured.
  double gang_peak_flops = 0;
  // cpu: collectives run as the executor runs them on this machine's virtual
  // chips — one thread's pass through memory over every member's buffers
  // (InMemoryCollectiveBytes) — not as a ring over links.
  bool collectives_in_memory = false;

  // cpu: figures of op classes the roofline above misses, each measured
  // through the runtime's own kernel (runtime/cpu_calibration.h); 0: not
  // measured (a fixed or older profile), the plain roofline applies.
  double conv_flops = 0;            // convolution FLOP/s (im2col + GEMM, representative shapes)
  double conv_dilated_flops = 0;    // ... with its input dilated (a strided conv's input gradient); 0: conv_flops
  double cold_bandwidth = 0;        // stream bytes/s with operands out of cache
  double window_read_ns = 0;        // reduce_window: per element of each output's window
  double transcendental_ns = 0;     // exp, logistic: per element
  double strided_broadcast_ns = 0;  // a fused loop's broadcast that is not a leading/trailing block: per element
  // GEMM FLOP/s whose smallest dim (rows, columns or contraction) is 8, 32 and
  // 128, the other two 1024, operands cold: a skinny GEMM reads a weight
  // matrix for a few rows. Dots between these sizes and 256 are interpolated
  // in log2 of that dim; from 256 up, the peak.
  double gemm8_flops = 0, gemm32_flops = 0, gemm128_flops = 0;
  // The same where the small dim is the contraction ([s,1024]^T x [s,1024], a
  // weight gradient), which reads and writes the whole [1024,1024] result for
  // s of work per element; 0: not measured, the rows' figures serve.
  double gemm8k_flops = 0, gemm32k_flops = 0, gemm128k_flops = 0;
  // The rows' form with the big operand's contracted dim its minor one (a
  // Linear's forward, x W^T with W stored [out, in]), which reads the weight
  // across its rows; 0: not measured, the rows' figures serve.
  double gemm8t_flops = 0, gemm32t_flops = 0, gemm128t_flops = 0;
  // All nine again with the other two dims 256 instead of 1024 (few rows at
  // 8, 32, 128, then contracted, then W^T): a dot's rate is interpolated in
  // log2 of its middle dim between the two; 0: not measured, the 1024
  // figures serve.
  std::array<double, 9> gemm_narrow_flops{};
  static constexpr double kNarrowDim = 256, kWideDim = 1024;
  // The per-kernel overhead of a kernel of a few KiB as the executor runs it
  // when chips share the cores (operands cold, a fresh result buffer), its
  // traffic at cold_bandwidth taken out: in place of kernel_overhead_ns where
  // larger, with cold_operands.
  double cold_kernel_overhead_ns = 0;
  double reduce_read_ns = 0;        // a reduce kernel: per element of its operand
  // A fused loop: per element for each arithmetic member beyond the first
  // (exp and logistic are priced by transcendental_ns instead).
  double fused_op_ns = 0;
  // The executor's collectives as measured on this machine (operands cold):
  // in place of InMemoryCollectiveBytes at cold_bandwidth, interpolated between
  // the points (CostModel::MeasuredCollectiveNs). All 0: not measured.
  CollectiveTimes collective_ns{};
  // Chip-to-chip spread when chips time-share the cores: the variance of a
  // chip's time over a segment of T ns is chip_spread_ns * T
  // (runtime/cpu_spread_benchmark.h). 0: not measured.
  double chip_spread_ns = 0;
  // The spread's tail: the host takes a core for milliseconds now and then
  // (runtime/cpu_spread_benchmark.h, MeasureHostStalls), per second of a
  // core's work and their mean length. 0: not measured.
  double host_stall_per_s = 0, host_stall_mean_ns = 0;
  // A kernel's time when the other cores run chips too, over alone: compute-
  // bound (GEMMs) and memory-bound (streams), measured beside a thread running
  // them (runtime/cpu_op_benchmarks.h). ForSharedCores applies them. 0: not measured.
  double beside_compute = 0, beside_memory = 0;
  // Kernels' memory traffic, and collectives in memory, at cold_bandwidth:
  // set by ForSharedCores when more chips than cores time-share the caches.
  bool cold_operands = false;
  // Each collective waits for the slowest of its chips (CostModel::ChipWaitNs):
  // set by ForSharedCores when more chips than cores and chip_spread_ns > 0.
  bool chip_waits = false;

  // This profile for a chip that runs its big kernels on `width` threads: the
  // gang's measured peak replaces the one-core peak (matrix and vector).
  ChipProfile ForGangWidth(int width) const;
  // This profile for `chips` virtual chips on `cores` cores: with more chips
  // than cores, each chip's operands are evicted by the others between its
  // kernels, so kernels stream at cold_bandwidth and pay
  // cold_kernel_overhead_ns; every core runs a chip at once, so kernels are
  // slower by beside_compute and beside_memory than the one-thread figures
  // (collectives run alone, one thread per group: unchanged); and the chips'
  // times spread, so each collective waits for the slowest (chip_waits),
  // where those figures were measured.
  ChipProfile ForSharedCores(int chips, int cores) const;

  // Arithmetic intensity (FLOP/byte) above which a dot is compute-bound.
  double ridge_point() const { return hbm_bandwidth > 0 ? peak_flops / hbm_bandwidth : 0; }
};

// E[max of n independent standard normal draws]: 0 for n = 1, 0.564 for 2,
// 1.424 for 8. Scales the chip spread into the expected wait of n chips.
double ExpectedMaxOfNormals(int n);

// The `cpu` profile from its four measured values (runtime/cpu_calibration.h
// measures them); everything else is derived from them.
ChipProfile CpuProfile(double peak_flops, double gang_peak_flops, double hbm_bandwidth, double kernel_overhead_ns);

// The built-in profiles (`cpu` with the fixed values of one day's
// calibration), and one by name (an error lists the names).
const std::vector<ChipProfile>& BuiltinProfiles();
absl::StatusOr<ChipProfile> FindProfile(const std::string& name);
std::string ProfileNames();  // "cpu, tpu-v4, h100"

struct OpCost {
  double flops = 0;
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  double compute_ns = 0;    // FLOPs over the unit's peak
  double memory_ns = 0;     // bytes over HBM bandwidth
  double network_ns = 0;    // collectives and transfers: alpha-beta time
  int64_t modeled_ns = 0;   // the roofline time, overhead included, rounded
  RooflineClass roofline = RooflineClass::kNone;

  int64_t bytes() const { return bytes_read + bytes_written; }
};

enum class CollectiveKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kCollectivePermute,
  kCollectiveBroadcast,
};
// The kind of a collective opcode (all_reduce for any other op).
CollectiveKind CollectiveKindOf(Opcode op);

// The alpha-beta parameters of the links a collective runs over.
struct Link {
  double bandwidth = 0;   // bytes/s one chip pushes (beta = 1 / bandwidth)
  double latency_ns = 0;  // per step (alpha)
};

// Participants of a collective: its largest replica group, the devices a
// permute names, or `default_group_size` without explicit groups.
int CollectiveGroupSize(const Instruction& i, int default_group_size);
// The per-chip size a collective's time scales with: the larger of operand and result.
int64_t CollectiveBytes(const Instruction& i);
// The bytes the executor's one-thread collective (runtime/collectives.cc)
// reads and writes for a group of n, `bytes` as for CollectiveNs: all-reduce
// combines n buffers into one and copies it to the other n-1, (3n-1)B;
// all-gather assembles the result and copies it n-1 times, 2nB;
// reduce-scatter combines, then extracts each block, (n+3)B; all-to-all,
// permute and broadcast copy each member's part once, 2nB.
double InMemoryCollectiveBytes(CollectiveKind kind, int64_t bytes, int n);
// The row of ChipProfile::collective_ns that prices `kind`.
int MeasuredCollectiveRow(CollectiveKind kind);

class CostModel {
 public:
  explicit CostModel(ChipProfile profile);
  const ChipProfile& profile() const { return profile_; }

  // FLOPs of one instruction. Extends InstructionFlops with the ops it does
  // not count (a collective's combine, nothing for layout ops); unknown
  // opcodes fall back to InstructionFlops.
  static double Flops(const Instruction& i);
  // Bytes an instruction run as its own kernel reads and writes.
  static void Bytes(const Instruction& i, int64_t* read, int64_t* written);

  // One instruction as its own kernel. `default_group_size` is the number of
  // participants of a collective without explicit replica groups (the
  // program's partition count).
  OpCost InstructionCost(const Instruction& i, int default_group_size = 1) const;
  // A while: its regions' instructions, the body times its static trip count
  // (StaticTripCount; one when unknown), the condition once more.
  OpCost WhileCost(const Instruction& w, int default_group_size = 1) const;

  // A fused kernel: `members` run in one pass over memory, so only values
  // crossing the kernel boundary move: operands produced outside the group are
  // read once each, and `outputs` (members whose values leave the kernel;
  // empty: the last member) are written. FLOPs add up.
  OpCost KernelCost(const std::vector<const Instruction*>& members,
                    const std::vector<const Instruction*>& outputs = {}) const;

  // The roofline of a kernel with these totals. `matrix` picks the matrix
  // units' peak (dots, convolutions) over the vector peak.
  OpCost Roofline(double flops, int64_t bytes_read, int64_t bytes_written, bool matrix) const;
  // The same with the compute rate given (`peak` FLOP/s), `serial_ns` of
  // per-element work the FLOP count does not carry (transcendentals, window
  // reads), added to the compute term, and `added_ns` of a fused loop's work
  // on its cached blocks (arithmetic beyond the first member, strided
  // broadcasts), added after the roofline: the loop streams a block in, then
  // runs its members over it, so that work does not overlap the traffic
  // (which is how the profile measures it: over a loop bound by its stream).
  OpCost Roofline(double flops, int64_t bytes_read, int64_t bytes_written, double peak, double serial_ns,
                  double added_ns = 0) const;

  // The FLOP/s a dot_general or convolution runs at on this profile: the
  // convolution figure, or the GEMM rate for the dot's smallest dim (see
  // ChipProfile::gemm8_flops); the matrix peak where not measured.
  double MatrixRate(const Instruction& i) const;
  // Per-element time of `i` beyond its FLOPs: exp and logistic elements,
  // reduce_window's window reads, a reduce kernel's operand elements (not
  // `fused`). 0 on profiles without these figures.
  double SerialNs(const Instruction& i, bool fused) const;
  // A broadcast_in_dim whose operand is neither one value nor a leading or
  // trailing block of the result: a fused loop gathers it element by element
  // (runtime/kernels_fused.cc, MapBroadcast's general mode).
  static bool IsStridedBroadcast(const Instruction& b);

  // Alpha-beta time of a collective over `group_size` chips, where `bytes` is
  // the per-chip size of the whole value (the larger of operand and result:
  // all_gather's result, reduce_scatter's operand). Rings: all-reduce moves
  // 2(n-1)/n of it in 2(n-1) steps; all-gather and reduce-scatter (n-1)/n in
  // n-1 steps. all-to-all: a pairwise exchange, (n-1)/n in n-1 steps.
  // collective-permute: one step of all the bytes. collective-broadcast: a
  // binomial tree, ceil(log2 n) steps of all the bytes. One chip: no time.
  double CollectiveNs(CollectiveKind kind, int64_t bytes, int group_size) const;
  // The same over `link` instead of the profile's chip-to-chip link (a mesh
  // axis that crosses hosts runs over the data-center network).
  double CollectiveNs(CollectiveKind kind, int64_t bytes, int group_size, const Link& link) const;
  // The executor's collective of `traffic` bytes (InMemoryCollectiveBytes) as
  // measured on this machine: log-log interpolation between the measured
  // points; above the last, its time per byte; below the first, the kernel
  // overhead plus the first's time per byte. 0: `kind` not measured.
  double MeasuredCollectiveNs(CollectiveKind kind, double traffic) const;
  Link ici() const { return {profile_.link_bandwidth, profile_.link_latency_ns}; }
  Link dcn() const { return {profile_.dcn_bandwidth, profile_.dcn_latency_ns}; }

  // The expected wait at a collective of `group_size` chips for the slowest
  // of them, after `segment_ns` of modeled work since their previous
  // collective: ExpectedMaxOfNormals(n) * sqrt(chip_spread_ns * segment_ns)
  // plus (1 - exp(-n * segment_ns * host_stall_per_s / 1e9)) *
  // host_stall_mean_ns on a profile with chip_waits, else 0.
  double ChipWaitNs(double segment_ns, int group_size) const;

  // A host-to-device copy of `bytes`.
  OpCost TransferCost(int64_t bytes) const;

  // Costs of every instruction of a program, indexed by instruction id.
  // With `fusion`, a kernel's cost sits at its root and its other members cost 0.
  std::vector<OpCost> ProgramCosts(const Module& program, const FusionPlan* fusion = nullptr) const;

 private:
  ChipProfile profile_;
};

}  // namespace shardscope::compiler
