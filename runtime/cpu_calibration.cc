// The measured `cpu` profile (see cpu_calibration.h).
#include "runtime/cpu_calibration.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "compiler/ir.h"
#include "runtime/gemm.h"
#include "runtime/intra_op.h"
#include "runtime/kernels.h"

namespace shardscope::runtime {
namespace {

constexpr char kPinEnv[] = "SHARDSCOPE_CPU_PROFILE";
// The cache file's layout. 2 added the op-class figures (cpu_op_benchmarks.h),
// 3 the small-kernel overhead, the reduce figure and the chip spread
// (cpu_spread_benchmark.h): a cache entry of an older format is measured
// again; a pinned file of an older format still loads, without the figures it
// lacks (the plain roofline for those ops, no wait at collectives; said in
// Describe); 4 the executor's collectives (cpu_collective_benchmark.h); 5
// the skinny GEMM with its weight stored [out, in] (a Linear's forward), the
// input gradient of a strided convolution, and convolution FLOPs counted by
// the taps on input elements (the convolution rate changed with them); 6 the
// speed probes of each pass (cpu_speed_probe.h): an entry whose passes have
// none cannot say which ran at the speed now; 7 the host's stalls
// (host_stall_per_s, host_stall_mean_ns: cpu_spread_benchmark.h).
constexpr int kFormat = 7;
constexpr const char* kCollectiveKeys[compiler::kMeasuredCollectiveKinds] = {"all_reduce", "all_gather",
                                                                             "reduce_scatter", "all_to_all"};

bool Measured(const compiler::CollectiveTimes& t) { return t[0][0] > 0; }

// "1 pass", "3 passes".
std::string PassCount(int n) { return absl::StrCat(n, n == 1 ? " pass" : " passes"); }

// The op-class figures by their JSON names.
std::vector<std::pair<const char*, double OpClassFigures::*>> OpFields() {
  return {{"conv_flops", &OpClassFigures::conv_flops},
          {"conv_dilated_flops", &OpClassFigures::conv_dilated_flops},
          {"cold_bandwidth", &OpClassFigures::cold_bandwidth},
          {"window_read_ns", &OpClassFigures::window_read_ns},
          {"transcendental_ns", &OpClassFigures::transcendental_ns},
          {"strided_broadcast_ns", &OpClassFigures::strided_broadcast_ns},
          {"gemm8_flops", &OpClassFigures::gemm8_flops},
          {"gemm32_flops", &OpClassFigures::gemm32_flops},
          {"gemm128_flops", &OpClassFigures::gemm128_flops},
          {"gemm8k_flops", &OpClassFigures::gemm8k_flops},
          {"gemm32k_flops", &OpClassFigures::gemm32k_flops},
          {"gemm128k_flops", &OpClassFigures::gemm128k_flops},
          {"gemm8t_flops", &OpClassFigures::gemm8t_flops},
          {"gemm32t_flops", &OpClassFigures::gemm32t_flops},
          {"gemm128t_flops", &OpClassFigures::gemm128t_flops},
          {"gemm8_narrow_flops", &OpClassFigures::gemm8_narrow_flops},
          {"gemm32_narrow_flops", &OpClassFigures::gemm32_narrow_flops},
          {"gemm128_narrow_flops", &OpClassFigures::gemm128_narrow_flops},
          {"gemm8k_narrow_flops", &OpClassFigures::gemm8k_narrow_flops},
          {"gemm32k_narrow_flops", &OpClassFigures::gemm32k_narrow_flops},
          {"gemm128k_narrow_flops", &OpClassFigures::gemm128k_narrow_flops},
          {"gemm8t_narrow_flops", &OpClassFigures::gemm8t_narrow_flops},
          {"gemm32t_narrow_flops", &OpClassFigures::gemm32t_narrow_flops},
          {"gemm128t_narrow_flops", &OpClassFigures::gemm128t_narrow_flops},
          {"cold_kernel_overhead_ns", &OpClassFigures::cold_kernel_overhead_ns},
          {"reduce_read_ns", &OpClassFigures::reduce_read_ns},
          {"fused_op_ns", &OpClassFigures::fused_op_ns},
          {"chip_spread_ns", &OpClassFigures::chip_spread_ns},
          {"host_stall_per_s", &OpClassFigures::host_stall_per_s},
          {"host_stall_mean_ns", &OpClassFigures::host_stall_mean_ns},
          {"beside_compute", &OpClassFigures::beside_compute},
          {"beside_memory", &OpClassFigures::beside_memory}};
}

std::string ReadFirstLine(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (prefix.empty()) return std::string(absl::StripAsciiWhitespace(line));
    if (line.rfind(prefix, 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? "" : std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "";
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Operands in [-0.8, 0.8]: kernel times do not depend on the values, and a
// pattern fills 16 Mi elements far faster than a random generator would.
Literal Filled(const Shape& s) {
  Literal l(s);
  float* p = l.as<float>();
  for (int64_t i = 0; i < l.elements(); ++i) p[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
  return l;
}

// Median device time of one kernel call, after a warm-up call: thread CPU
// time, plus the helpers' critical-path excess when `gang` runs it (as the
// executor times a chip with a gang).
double MedianNs(const compiler::Instruction& i, const std::vector<const Literal*>& ops, Literal* out, int reps,
                Gang* gang) {
  GangScope scope(gang);
  (void)EvalInstruction(i, ops, 0, out);  // valid by construction: a square dot, an add
  if (gang) gang->TakeExtraNs();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const int64_t t0 = ThreadCpuNs();
    (void)EvalInstruction(i, ops, 0, out);
    t.push_back(static_cast<double>(ThreadCpuNs() - t0 + (gang ? gang->TakeExtraNs() : 0)));
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string IsoUtc(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

absl::Status MakeDirs(const std::string& dir) {
  for (size_t p = 1; p <= dir.size(); ++p) {
    if (p != dir.size() && dir[p] != '/') continue;
    const std::string part = dir.substr(0, p);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      return absl::PermissionDeniedError(absl::StrCat("cannot create ", part, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

SpeedProbe CpuCalibration::Speed() const { return SpeedProbe::Midpoint(probe_before, probe_after); }

bool CpuCalibration::Steady() const {
  return probe_before.measured() && probe_after.measured() &&
         probe_before.DistanceTo(probe_after) <= kSameSpeedDistance;
}

std::vector<int> PassesAtSpeed(const std::vector<CpuCalibration>& passes, const SpeedProbe& speed, int n) {
  // Newest first: within the tolerance the probes' own scatter decides which
  // is nearer, and the machine drifts over a day.
  std::vector<int> out;
  for (int i = static_cast<int>(passes.size()) - 1; i >= 0 && static_cast<int>(out.size()) < n; --i)
    if (passes[i].Steady() && passes[i].Speed().DistanceTo(speed) <= kSameSpeedDistance) out.push_back(i);
  return out;
}

compiler::ChipProfile CpuCalibration::Profile() const {
  compiler::ChipProfile p = compiler::CpuProfile(peak_flops, gang_peak_flops, hbm_bandwidth, kernel_overhead_ns);
  p.conv_flops = ops.conv_flops;
  p.conv_dilated_flops = ops.conv_dilated_flops;
  p.cold_bandwidth = ops.cold_bandwidth;
  p.window_read_ns = ops.window_read_ns;
  p.transcendental_ns = ops.transcendental_ns;
  p.strided_broadcast_ns = ops.strided_broadcast_ns;
  p.gemm8_flops = ops.gemm8_flops;
  p.gemm32_flops = ops.gemm32_flops;
  p.gemm128_flops = ops.gemm128_flops;
  p.gemm8k_flops = ops.gemm8k_flops;
  p.gemm32k_flops = ops.gemm32k_flops;
  p.gemm128k_flops = ops.gemm128k_flops;
  p.gemm8t_flops = ops.gemm8t_flops;
  p.gemm32t_flops = ops.gemm32t_flops;
  p.gemm128t_flops = ops.gemm128t_flops;
  p.gemm_narrow_flops = {ops.gemm8_narrow_flops,  ops.gemm32_narrow_flops,  ops.gemm128_narrow_flops,
                         ops.gemm8k_narrow_flops, ops.gemm32k_narrow_flops, ops.gemm128k_narrow_flops,
                         ops.gemm8t_narrow_flops, ops.gemm32t_narrow_flops, ops.gemm128t_narrow_flops};
  p.cold_kernel_overhead_ns = ops.cold_kernel_overhead_ns;
  p.reduce_read_ns = ops.reduce_read_ns;
  p.fused_op_ns = ops.fused_op_ns;
  p.chip_spread_ns = ops.chip_spread_ns;
  p.host_stall_per_s = ops.host_stall_per_s;
  p.host_stall_mean_ns = ops.host_stall_mean_ns;
  p.beside_compute = ops.beside_compute;
  p.beside_memory = ops.beside_memory;
  p.collective_ns = collectives;
  return p;
}

std::string CpuCalibration::ProvenanceJson() const {
  nlohmann::json j = {{"name", "cpu"},
                      {"source", source},
                      {"peak_flops", peak_flops},
                      {"gang_peak_flops", gang_peak_flops},
                      {"gang_width", gang_width},
                      {"hbm_bandwidth", hbm_bandwidth},
                      {"kernel_overhead_ns", kernel_overhead_ns}};
  if (ops.measured())
    for (const auto& [key, field] : OpFields()) j[key] = ops.*field;
  if (Measured(collectives))
    for (int k = 0; k < compiler::kMeasuredCollectiveKinds; ++k)
      j["collective_ns"][kCollectiveKeys[k]] = collectives[k];
  if (!path.empty()) j["path"] = path;
  if (!machine.empty()) j["machine"] = machine;
  // The speed the passes were chosen for, and how many (a later simulation
  // calibrated from this run chooses its passes for the same speed).
  if (speed.measured()) j["speed"] = nlohmann::json::parse(speed.Json());
  if (!speed_note.empty()) {
    j["passes_used"] = UsedPasses();
    j["speed_note"] = speed_note;
  }
  if (measured_at_unix_s > 0) j["measured_at"] = IsoUtc(measured_at_unix_s);
  return j.dump();
}

std::string CpuCalibration::Describe() const {
  const std::string values =
      absl::StrFormat("GEMM %.1f GFLOP/s (gang of %d: %.1f), stream %.2f GB/s, kernel overhead %.0f ns",
                      peak_flops / 1e9, gang_width, gang_peak_flops / 1e9, hbm_bandwidth / 1e9,
                      kernel_overhead_ns) +
      (ops.measured()
           ? absl::StrFormat("; convolution %.1f GFLOP/s", ops.conv_flops / 1e9) +
                 (ops.conv_dilated_flops > 0
                      ? absl::StrFormat(" (input dilated %.1f)", ops.conv_dilated_flops / 1e9)
                      : std::string()) +
                 absl::StrFormat(", cold stream %.2f GB/s, window %.2f ns per read, "
                             "transcendental %.2f ns, strided broadcast %.2f ns per element, skinny GEMM "
                             "%.1f/%.1f/%.1f GFLOP/s at 8/32/128",
                             ops.cold_bandwidth / 1e9, ops.window_read_ns,
                             ops.transcendental_ns, ops.strided_broadcast_ns, ops.gemm8_flops / 1e9,
                             ops.gemm32_flops / 1e9, ops.gemm128_flops / 1e9) +
                 (ops.gemm8k_flops > 0
                      ? absl::StrFormat(" (contracted %.1f/%.1f/%.1f)", ops.gemm8k_flops / 1e9,
                                        ops.gemm32k_flops / 1e9, ops.gemm128k_flops / 1e9)
                      : std::string()) +
                 (ops.gemm8t_flops > 0
                      ? absl::StrFormat(" (W^T %.1f/%.1f/%.1f)", ops.gemm8t_flops / 1e9, ops.gemm32t_flops / 1e9,
                                        ops.gemm128t_flops / 1e9)
                      : std::string()) +
                 (ops.beside_compute > 0 ? absl::StrFormat(", beside a busy core: GEMMs x%.2f, streams x%.2f",
                                                           ops.beside_compute, ops.beside_memory)
                                         : std::string()) +
                 (ops.chip_spread_ns > 0 || ops.reduce_read_ns > 0
                      ? absl::StrFormat(
                            "; small kernel %.2f us over its traffic, reduce %.2f ns per element, "
                            "fused loop %.3f ns per element per op, chip spread %.0f ns (variance per ns "
                            "of a segment), host stalls %.2f a core-second of %.2f ms",
                            ops.cold_kernel_overhead_ns / 1e3, ops.reduce_read_ns, ops.fused_op_ns,
                            ops.chip_spread_ns, ops.host_stall_per_s, ops.host_stall_mean_ns / 1e6)
                      : std::string("; no small-kernel, reduce or chip-spread figures (format 2: no wait at "
                                    "collectives)"))
           : std::string(
                 "; no op-class figures (convolutions, cold streams, windows, transcendentals, skinny "
                 "GEMMs priced by the plain roofline)"));
  const std::string collective_text =
      Measured(collectives)
          ? absl::StrFormat(
                "; all-reduce %.1f/%.1f GB/s at %.1f/%.0f MiB of traffic (the executor's, measured)",
                compiler::kCollectiveTraffic[1] / collectives[0][1],
                compiler::kCollectiveTraffic.back() / std::max(1.0, collectives[0].back()),
                compiler::kCollectiveTraffic[1] / (1 << 20), compiler::kCollectiveTraffic.back() / (1 << 20))
          : std::string(ops.measured()
                            ? "; collectives not measured (format 3 or older: priced at the cold stream)"
                            : "");
  if (source == "fixed")
    return absl::StrCat("fixed values of compiler/cost_model.cc ($", kPinEnv, "=fixed): ", values,
                        collective_text);
  std::string when = IsoUtc(measured_at_unix_s);
  if (UsedPasses() > 1) {
    int64_t oldest = measured_at_unix_s;
    for (int i = 0; i < UsedPasses(); ++i)
      oldest = std::min(oldest, passes[used.empty() ? i : used[i]].measured_at_unix_s);
    when += absl::StrFormat("; median of %d passes from %s", UsedPasses(), IsoUtc(oldest).substr(11, 8)) +
            (earlier_passes > 0 ? absl::StrFormat(", %d of them from earlier calibrations", earlier_passes)
                                : std::string());
  }
  if (!speed_note.empty()) when += "; " + speed_note;
  if (source == "measured")
    return absl::StrCat("measured now (", when, "), cached at ", path, ": ", values, collective_text);
  if (source == "cache")
    return absl::StrCat("measured ", when, ", read from the cache ", path, ": ", values, collective_text);
  return absl::StrCat("pinned by $", kPinEnv, "=", path, " (measured ", when, "): ", values, collective_text);
}

std::string MachineKey() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  return absl::StrCat("cpu=", ReadFirstLine("/proc/cpuinfo", "model name"),
                      ";cores=", std::thread::hardware_concurrency(), ";host=", host,
                      ";boot=", ReadFirstLine("/proc/sys/kernel/random/boot_id", ""),
                      ";gemm=", ChosenGemmBackend().use_blas ? "openblas" : "eigen",
                      ";openblas_coretype=", core ? core : "");
}

std::string CpuProfileCachePath() {
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = x;
  else if (const char* h = std::getenv("HOME"); h && *h) dir = absl::StrCat(h, "/.cache");
  else dir = "/tmp";
  return absl::StrFormat("%s/shardscope/cpu-profile-%016x.json", dir, Fnv1a(MachineKey()));
}

namespace {

// One pass of every microbenchmark.
CpuCalibration MeasurePass(const CalibrationPlan& plan) {
  CpuCalibration c;
  c.probe_before = plan.probe ? plan.probe() : MeasureSpeedProbe();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  std::optional<Gang> gang;
  if (cores > 1) gang.emplace(cores - 1);
  c.gang_width = gang ? gang->width() : 1;
  for (Gang* g : {static_cast<Gang*>(nullptr), gang ? &*gang : nullptr}) {
    if (g == nullptr && !c.rows.empty()) break;  // no gang on one core
    c.rows.push_back(absl::StrFormat("GEMM (dot_general f32 [n,n]x[n,n], device time, median) on %d thread(s)",
                                     g ? g->width() : 1));
    double& peak = g ? c.gang_peak_flops : c.peak_flops;
    for (int64_t n : plan.gemm_sizes) {
      compiler::Module m;
      auto* a = m.Parameter(Shape(DType::kF32, {n, n}), "a");
      auto* b = m.Parameter(Shape(DType::kF32, {n, n}), "b");
      compiler::DotDims dd;
      dd.lhs_contracting = {1};
      dd.rhs_contracting = {0};
      auto* dot = m.DotGeneral(a, b, dd);
      Literal la = Filled(a->shape), lb = Filled(b->shape), out(dot->shape);
      const double ns = MedianNs(*dot, {&la, &lb}, &out, n >= 1024 ? 7 : 21, g);
      const double rate = 2.0 * n * n * n / ns * 1e9;
      peak = std::max(peak, rate);
      c.rows.push_back(absl::StrFormat("  n=%-5d %10.1f us  %6.1f GFLOP/s", n, ns / 1e3, rate / 1e9));
    }
  }
  c.rows.push_back("stream (add f32, 3 x 4 bytes per element, thread CPU time, median)");
  // Weighted least squares of t = c + b * x (x bytes, b = 1/bandwidth) with
  // weights 1/t^2: minimises the summed squared relative error, the error
  // the model is scored on, so small and large kernels weigh alike.
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
  for (int64_t e = plan.stream_min; e <= plan.stream_max; e *= 4) {
    compiler::Module m;
    auto* a = m.Parameter(Shape(DType::kF32, {e}), "a");
    auto* b = m.Parameter(Shape(DType::kF32, {e}), "b");
    auto* add = m.Binary(compiler::Opcode::kAdd, a, b);
    Literal la = Filled(a->shape), lb = Filled(b->shape), out(add->shape);
    const double ns = MedianNs(*add, {&la, &lb}, &out, e >= (1 << 22) ? 7 : 41, nullptr);
    const double x = 12.0 * static_cast<double>(e);
    c.rows.push_back(absl::StrFormat("  %9d elements %10.2f us  %6.2f GB/s", e, ns / 1e3, x / ns));
    const double w = 1.0 / (ns * ns);
    s00 += w;
    s01 += w * x;
    s11 += w * x * x;
    r0 += w * ns;
    r1 += w * x * ns;
  }
  c.ops = MeasureOpClasses(plan.ops, &c.rows);
  c.collectives = MeasureCollectives(plan.collectives, &c.rows);
  c.ops.chip_spread_ns = MeasureChipSpread(plan.spread, &c.rows).variance_ns;
  if (plan.spread.measure && plan.spread.stall_seconds > 0) {
    const HostStalls stalls = MeasureHostStalls(plan.spread.stall_seconds, &c.rows);
    c.ops.host_stall_per_s = stalls.per_s;
    c.ops.host_stall_mean_ns = stalls.mean_ns;
  }
  const double det = s00 * s11 - s01 * s01;
  const double per_byte = det != 0 ? (s00 * r1 - s01 * r0) / det : 0;
  c.kernel_overhead_ns = det != 0 ? std::max(0.0, (r0 * s11 - r1 * s01) / det) : 0;
  c.hbm_bandwidth = per_byte > 0 ? 1e9 / per_byte : 0;
  c.probe_after = plan.probe ? plan.probe() : MeasureSpeedProbe();
  c.measured_at_unix_s = UnixNow();
  return c;
}

}  // namespace

std::vector<CpuCalibration> MeasurePasses(const CalibrationPlan& plan) {
  std::vector<CpuCalibration> each;
  for (int p = 0; p < std::max(1, plan.passes); ++p) {
    each.push_back(MeasurePass(plan));
    each.back().rows.insert(each.back().rows.begin(),
                            absl::StrFormat("pass %d of %d", p + 1, std::max(1, plan.passes)));
  }
  return each;
}

CpuCalibration CombinePasses(const std::vector<CpuCalibration>& passes) {
  // Each figure the median of the passes: on a shared VM one benchmark's
  // figure moved by 2x between calibrations a minute apart (another process's
  // burst, the host's clock), and the samples' modeled steps with it.
  CpuCalibration c = passes.back();
  c.rows.clear();
  for (const CpuCalibration& e : passes) c.rows.insert(c.rows.end(), e.rows.begin(), e.rows.end());
  c.passes.clear();
  for (CpuCalibration e : passes) {
    e.rows.clear();
    e.passes.clear();
    c.passes.push_back(std::move(e));
  }
  if (passes.size() > 1) {
    auto median = [&](const std::function<double(const CpuCalibration&)>& get) {
      std::vector<double> v;
      for (const CpuCalibration& e : passes) v.push_back(get(e));
      return MedianOf(v);
    };
    c.peak_flops = median([](const CpuCalibration& e) { return e.peak_flops; });
    c.gang_peak_flops = median([](const CpuCalibration& e) { return e.gang_peak_flops; });
    c.hbm_bandwidth = median([](const CpuCalibration& e) { return e.hbm_bandwidth; });
    c.kernel_overhead_ns = median([](const CpuCalibration& e) { return e.kernel_overhead_ns; });
    for (const auto& [key, field] : OpFields())
      c.ops.*field = median([f = field](const CpuCalibration& e) { return e.ops.*f; });
    // A stall's length over the passes that saw one (a pass that saw none says nothing of it).
    std::vector<double> lengths;
    for (const CpuCalibration& e : passes)
      if (e.ops.host_stall_per_s > 0) lengths.push_back(e.ops.host_stall_mean_ns);
    c.ops.host_stall_mean_ns = MedianOf(lengths);
    for (int k = 0; k < compiler::kMeasuredCollectiveKinds; ++k)
      for (int p = 0; p < compiler::kCollectivePoints; ++p) {
        c.collectives[k][p] = median([&](const CpuCalibration& e) { return e.collectives[k][p]; });
        if (p > 0 && c.collectives[k][p] > 0)
          c.collectives[k][p] = std::max(c.collectives[k][p], c.collectives[k][p - 1]);
      }
    // What moved between the passes, and the figure kept.
    std::string when = absl::StrFormat("  %-30s", "pass measured at (UTC)");
    for (const CpuCalibration& e : passes)
      when += absl::StrFormat(" %9s", IsoUtc(e.measured_at_unix_s).substr(11, 8));
    c.rows.push_back("the figures of each pass, and their median (the profile's)");
    c.rows.push_back(when);
    auto row = [&](const char* name, const char* unit, double scale,
                   const std::function<double(const CpuCalibration&)>& get) {
      std::string line = absl::StrFormat("  %-30s", name);
      for (const CpuCalibration& e : passes) line += absl::StrFormat(" %9.2f", get(e) * scale);
      c.rows.push_back(line + absl::StrFormat("  -> %9.2f %s", get(c) * scale, unit));
    };
    row("GEMM, one core", "GFLOP/s", 1e-9, [](const CpuCalibration& e) { return e.peak_flops; });
    row("stream", "GB/s", 1e-9, [](const CpuCalibration& e) { return e.hbm_bandwidth; });
    row("convolution", "GFLOP/s", 1e-9, [](const CpuCalibration& e) { return e.ops.conv_flops; });
    row("cold stream", "GB/s", 1e-9, [](const CpuCalibration& e) { return e.ops.cold_bandwidth; });
    row("transcendental", "ns", 1, [](const CpuCalibration& e) { return e.ops.transcendental_ns; });
    row("skinny GEMM at 32", "GFLOP/s", 1e-9, [](const CpuCalibration& e) { return e.ops.gemm32_flops; });
    row("all_reduce of 12 MiB traffic", "us", 1e-3,
        [](const CpuCalibration& e) { return e.collectives[0][2]; });
    row("chip spread", "ns", 1, [](const CpuCalibration& e) { return e.ops.chip_spread_ns; });
    row("host stalls a core-second", "", 1, [](const CpuCalibration& e) { return e.ops.host_stall_per_s; });
    row("host stall, mean", "ms (of those seen)", 1e-6,
        [](const CpuCalibration& e) { return e.ops.host_stall_mean_ns; });
    row("GEMMs beside other chips", "x", 1, [](const CpuCalibration& e) { return e.ops.beside_compute; });
    row("streams beside other chips", "x", 1, [](const CpuCalibration& e) { return e.ops.beside_memory; });
    // The machine's speed around each pass (its probes' midpoint; 0: none): the
    // figures above are of that speed.
    for (auto [name, unit, scale, get] :
         {std::tuple<const char*, const char*, double, double (*)(const CpuCalibration&)>{
              "speed probe: stream", "GB/s (median)", 1e-9,
              [](const CpuCalibration& e) { return e.Speed().stream_bytes; }},
          {"speed probe: exp", "ns (median)", 1.0, [](const CpuCalibration& e) { return e.Speed().exp_ns; }}}) {
      std::string line = absl::StrFormat("  %-30s", name);
      for (const CpuCalibration& e : passes) line += absl::StrFormat(" %9.2f", get(e) * scale);
      c.rows.push_back(line + absl::StrFormat("  -> %9.2f %s", median(get) * scale, unit));
    }
  }
  c.source = "measured";
  c.machine = MachineKey();
  c.measured_at_unix_s = passes.back().measured_at_unix_s;
  return c;
}

CpuCalibration MeasureCpu(const CalibrationPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  CpuCalibration c = CombinePasses(MeasurePasses(plan));
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

namespace {

// The measured figures of a profile or of one pass, as the file holds them.
nlohmann::json FiguresJson(const CpuCalibration& c) {
  nlohmann::json j = {{"peak_flops", c.peak_flops},
                      {"gang_peak_flops", c.gang_peak_flops},
                      {"hbm_bandwidth", c.hbm_bandwidth},
                      {"kernel_overhead_ns", c.kernel_overhead_ns}};
  for (const auto& [key, field] : OpFields()) j[key] = c.ops.*field;
  if (Measured(c.collectives)) {
    j["collective_traffic"] = compiler::kCollectiveTraffic;
    for (int k = 0; k < compiler::kMeasuredCollectiveKinds; ++k)
      j["collective_ns"][kCollectiveKeys[k]] = c.collectives[k];
  }
  return j;
}

// The figures FiguresJson writes; errors start with `where` (the file, and the pass).
absl::Status ReadFigures(const nlohmann::json& j, const std::string& where, CpuCalibration* c) {
  for (auto [key, field] : {std::pair<const char*, double*>{"peak_flops", &c->peak_flops},
                            {"gang_peak_flops", &c->gang_peak_flops},
                            {"hbm_bandwidth", &c->hbm_bandwidth},
                            {"kernel_overhead_ns", &c->kernel_overhead_ns}}) {
    if (!j.contains(key) || !j[key].is_number())
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", key, "' is missing or not a number"));
    *field = j[key].get<double>();
    const bool may_be_zero = std::string(key) == "gang_peak_flops" || std::string(key) == "kernel_overhead_ns";
    if (!(*field > 0) && !(may_be_zero && *field == 0))
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", key, "' is ", *field, ", not a positive number"));
  }
  for (const auto& [key, field] : OpFields()) {
    if (!j.contains(key)) continue;  // format 1: none of them
    if (!j[key].is_number() || !(j[key].get<double>() >= 0))
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", key, "' is not a number >= 0"));
    c->ops.*field = j[key].get<double>();
  }
  if (j.contains("collective_ns")) {
    const auto& t = j["collective_ns"];
    for (int k = 0; k < compiler::kMeasuredCollectiveKinds; ++k) {
      const char* key = kCollectiveKeys[k];
      if (!t.is_object() || !t.contains(key) || !t[key].is_array() ||
          t[key].size() != static_cast<size_t>(compiler::kCollectivePoints))
        return absl::InvalidArgumentError(absl::StrCat(where, ": 'collective_ns' needs '", key, "' as ",
                                                       compiler::kCollectivePoints, " numbers"));
      for (int p = 0; p < compiler::kCollectivePoints; ++p) {
        if (!t[key][p].is_number() || !(t[key][p].get<double>() >= 0))
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": 'collective_ns' '", key, "' [", p, "] is not a number >= 0"));
        c->collectives[k][p] = t[key][p].get<double>();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CpuCalibration> ReadCpuProfileFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cpu profile file ", path, ": cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return absl::InvalidArgumentError(absl::StrCat("cpu profile file ", path, ": not a JSON object"));
  CpuCalibration c;
  c.path = path;
  const std::string where = absl::StrCat("cpu profile file ", path);
  if (absl::Status s = ReadFigures(j, where, &c); !s.ok()) return s;
  // The passes the figures are the median of (format 5 files written before
  // calibrations kept them have none).
  if (j.contains("passes")) {
    if (!j["passes"].is_array())
      return absl::InvalidArgumentError(absl::StrCat(where, ": 'passes' is not a list"));
    for (size_t p = 0; p < j["passes"].size(); ++p) {
      const nlohmann::json& e = j["passes"][p];
      CpuCalibration pass;
      const std::string at = absl::StrCat(where, ": passes[", p, "]");
      if (!e.is_object()) return absl::InvalidArgumentError(absl::StrCat(at, " is not an object"));
      if (absl::Status s = ReadFigures(e, at, &pass); !s.ok()) return s;
      if (!e.contains("measured_at_unix_s") || !e["measured_at_unix_s"].is_number_integer())
        return absl::InvalidArgumentError(
            absl::StrCat(at, ": 'measured_at_unix_s' is missing or not an integer"));
      pass.measured_at_unix_s = e["measured_at_unix_s"].get<int64_t>();
      for (auto [key, probe] : {std::pair<const char*, SpeedProbe*>{"probe_before", &pass.probe_before},
                                {"probe_after", &pass.probe_after}})
        if (e.contains(key) && !SpeedProbe::FromJson(e[key].dump(), probe))
          return absl::InvalidArgumentError(
              absl::StrCat(at, ": '", key, "' is not a speed probe (four positive figures)"));
      c.passes.push_back(std::move(pass));
    }
  }
  c.gang_width = j.value("gang_width", 1);
  c.machine = j.value("machine", "");
  c.measured_at_unix_s = j.value("measured_at_unix_s", int64_t{0});
  c.seconds = j.value("seconds", 0.0);
  if (j.contains("rows") && j["rows"].is_array())
    for (const auto& r : j["rows"])
      if (r.is_string()) c.rows.push_back(r.get<std::string>());
  c.format = j.value("format", 1);
  if (c.format < 1 || c.format > kFormat)
    return absl::InvalidArgumentError(absl::StrCat("cpu profile file ", path, ": format ", j.value("format", 0),
                                                   ", this build reads formats 1 to ", kFormat));
  return c;
}

absl::Status WriteCpuProfileFile(const std::string& path, const CpuCalibration& c) {
  if (auto slash = path.rfind('/'); slash != std::string::npos && slash > 0)
    if (absl::Status s = MakeDirs(path.substr(0, slash)); !s.ok()) return s;
  nlohmann::json j = {{"format", kFormat},
                      {"machine", c.machine},
                      {"measured_at", IsoUtc(c.measured_at_unix_s)},
                      {"measured_at_unix_s", c.measured_at_unix_s},
                      {"seconds", c.seconds},
                      {"gang_width", c.gang_width},
                      {"rows", c.rows}};
  j.update(FiguresJson(c));
  if (!c.passes.empty()) {
    j["passes"] = nlohmann::json::array();
    for (const CpuCalibration& p : c.passes) {
      nlohmann::json e = FiguresJson(p);
      e["measured_at_unix_s"] = p.measured_at_unix_s;
      if (p.probe_before.measured()) e["probe_before"] = nlohmann::json::parse(p.probe_before.Json());
      if (p.probe_after.measured()) e["probe_after"] = nlohmann::json::parse(p.probe_after.Json());
      j["passes"].push_back(std::move(e));
    }
  }
  // Written aside and renamed: two processes calibrating at once never leave half a file.
  const std::string tmp = absl::StrCat(path, ".", getpid(), ".tmp");
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write the cpu profile cache ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot write the cpu profile cache ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<CpuCalibration> ResolveCpuCalibration(const std::string& pin, const std::string& cache_path,
                                                     bool remeasure, const CalibrationPlan& plan) {
  if (!pin.empty() && !remeasure) {
    if (pin == "fixed") {
      const compiler::ChipProfile p = *compiler::FindProfile("cpu");
      CpuCalibration c;
      c.peak_flops = p.peak_flops;
      c.gang_peak_flops = p.gang_peak_flops;
      c.gang_width = 2;  // measured on the 2-core build machine
      c.hbm_bandwidth = p.hbm_bandwidth;
      c.kernel_overhead_ns = p.kernel_overhead_ns;
      c.source = "fixed";
      return c;
    }
    auto c = ReadCpuProfileFile(pin);
    if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat("$", kPinEnv, ": ", c.status().message()));
    c->source = "file";
    return c;
  }
  // The cache entry, or why there is none to use (said when measuring).
  std::optional<CpuCalibration> cached;
  std::string unusable;
  if (auto c = ReadCpuProfileFile(cache_path); !c.ok())
    unusable = c.status().code() == absl::StatusCode::kNotFound ? "no cache entry yet"
                                                                 : std::string(c.status().message());
  else if (c->format != kFormat)
    unusable = absl::StrFormat("the cache entry is of format %d, this build's is %d", c->format, kFormat);
  else
    cached = *std::move(c);
  // Its passes of this machine within the age limit, oldest first.
  auto kept_of = [&](int64_t now) {
    std::vector<CpuCalibration> kept;
    if (cached && cached->machine == MachineKey())
      for (const CpuCalibration& p : cached->passes)
        if (now - p.measured_at_unix_s <= plan.history_max_age_s && p.measured_at_unix_s <= now) kept.push_back(p);
    return kept;
  };
  const bool given_speed = plan.at_speed.measured();
  const char* whose = given_speed ? "the recorded run's speed" : "the machine's speed now";
  const std::string within = absl::StrFormat("within %.0f%%", 100 * (std::exp(kSameSpeedDistance) - 1));
  // When no pass ran at `speed`: the `n` nearest it, steady ones first (indices).
  auto nearest_to = [](const std::vector<CpuCalibration>& passes, const SpeedProbe& speed, int n) {
    std::vector<std::tuple<bool, double, int>> order;
    for (int i = 0; i < static_cast<int>(passes.size()); ++i)
      order.push_back({!passes[i].Steady(), passes[i].Speed().DistanceTo(speed), i});
    std::sort(order.begin(), order.end());
    std::vector<int> out;
    for (const auto& [unsteady, d, i] : order)
      if (static_cast<int>(out.size()) < n) out.push_back(i);
    return out;
  };
  // The profile of the kept passes `use` (indices), read from the cache.
  auto from_cache = [&](std::vector<CpuCalibration> kept, const std::vector<int>& use) {
    std::vector<CpuCalibration> chosen;
    for (int i : use) chosen.push_back(kept[i]);
    CpuCalibration c = CombinePasses(chosen);
    c.source = "cache";
    c.path = cache_path;
    c.format = cached->format;
    c.seconds = cached->seconds;
    c.measured_at_unix_s = cached->measured_at_unix_s;
    c.gang_width = cached->gang_width;
    c.passes = std::move(kept);
    c.used = use;
    return c;
  };
  int passes_now = std::max(1, plan.passes);
  if (!remeasure && cached) {
    std::vector<CpuCalibration> kept = kept_of(UnixNow());
    if (kept.empty()) {
      unusable = "the cache entry has no pass of this machine from the last day";
    } else if (!plan.any_speed.empty()) {
      // The passes at each speed the run had, as many of each; none at
      // either: the newest, whatever their speed.
      std::vector<int> use;
      std::vector<std::string> counts;
      const int each = std::max(1, plan.history / std::max<int>(1, static_cast<int>(plan.mixed.size())));
      for (size_t k = 0; k < plan.mixed.size(); ++k) {
        int added = 0;
        for (int i : PassesAtSpeed(kept, plan.mixed[k], each))
          if (std::find(use.begin(), use.end(), i) == use.end()) use.push_back(i), ++added;
        counts.push_back(absl::StrCat(added, k == 0 ? " at its start's speed" : " at its end's"));
      }
      std::string which;
      if (use.empty()) {
        for (int i = std::max(0, static_cast<int>(kept.size()) - std::max(1, plan.history));
             i < static_cast<int>(kept.size()); ++i)
          use.push_back(i);
        which = absl::StrFormat("no kept pass ran at its speeds: the newest %d of the %d kept, of any speed",
                                use.size(), kept.size());
      } else {
        std::sort(use.begin(), use.end());
        which = absl::StrFormat("%d of the %d kept passes (%s)", use.size(), kept.size(),
                                absl::StrJoin(counts, ", "));
      }
      CpuCalibration c = from_cache(std::move(kept), use);
      c.speed_note = absl::StrCat(which, ": ", plan.any_speed);
      return c;
    } else {
      const SpeedProbe speed = given_speed ? plan.at_speed : plan.probe ? plan.probe() : MeasureSpeedProbe();
      std::vector<int> at = PassesAtSpeed(kept, speed, static_cast<int>(kept.size()));
      const int all_at = static_cast<int>(at.size());
      at.resize(std::min<size_t>(at.size(), std::max(1, plan.history)));  // the newest, up to plan.history
      // A recorded run's speed: one pass at it will do, as a measurement now
      // would be at the machine's speed now, which need not be the run's.
      const int need = std::min(given_speed ? 1 : std::min<int>(plan.min_at_speed, static_cast<int>(kept.size())),
                                std::max(1, plan.history));
      const int nearest = nearest_to(kept, speed, 1)[0];
      // "GEMM x1.18, ..." of the speed against the nearest pass's.
      const std::string against = speed.RatiosTo(kept[nearest].Speed());
      if (static_cast<int>(at.size()) >= need && !at.empty()) {
        CpuCalibration c = from_cache(std::move(kept), at);
        c.speed = speed;
        c.speed_note =
            static_cast<int>(at.size()) < all_at
                ? absl::StrFormat("the newest %d of the %d kept passes that ran at %s (%s; %d kept)", at.size(),
                                  all_at, whose, speed.Describe(), c.passes.size())
                : absl::StrFormat("%d of the %d kept passes ran at %s (%s)", at.size(), c.passes.size(), whose,
                                  speed.Describe());
        return c;
      }
      if (given_speed) {
        const std::vector<int> use = nearest_to(kept, speed, std::max(1, std::min(plan.min_at_speed, plan.history)));
        CpuCalibration c = from_cache(std::move(kept), use);
        c.speed = speed;
        c.speed_note = absl::StrFormat(
            "no kept pass ran %s of %s (%s): the %d nearest of the %d kept (its speed against the nearest's: %s)",
            within, whose, speed.Describe(), use.size(), c.passes.size(), against);
        return c;
      }
      // Too few passes ran at this speed: the figures would be another speed's.
      // Only the passes missing at this speed are measured: 7 s each.
      passes_now = std::max(1, std::min(plan.passes, plan.min_at_speed - all_at));
      unusable = absl::StrFormat("%s (%s) is not that of the cache entry's passes (%d of %d %s; against the "
                                 "nearest's: %s)",
                                 whose, speed.Describe(), all_at, kept.size(), within, against);
    }
  }

  // A measurement nobody asked for takes about 20 s: said before it starts.
  if (!remeasure)
    std::fprintf(stderr,
                 "note: measuring this machine's cpu profile for the modeled clock (%d pass%s, about %d s; "
                 "docs/cost_model.md): %s%s\n",
                 passes_now, passes_now > 1 ? "es" : "", 7 * passes_now,
                 unusable.c_str(), given_speed ? " (measured at the machine's speed now, not the recorded run's)" : "");
  const auto start = std::chrono::steady_clock::now();
  CalibrationPlan now_plan = plan;
  now_plan.passes = passes_now;
  std::vector<CpuCalibration> fresh = MeasurePasses(now_plan);
  const int64_t now = fresh.back().measured_at_unix_s;
  // The speed the profile is for: the one asked, else the machine's just after
  // the passes (their last probe).
  const SpeedProbe speed = given_speed ? plan.at_speed : fresh.back().probe_after;
  std::vector<CpuCalibration> all = kept_of(now);
  const int earlier_count = static_cast<int>(all.size());
  all.insert(all.end(), fresh.begin(), fresh.end());
  // The passes measured at that speed, this calibration's and earlier ones,
  // newest first, up to plan.history: one calibration taken in a noisy minute
  // moves the profile by a share, one taken at another speed of the machine
  // (or while it changed speed) not at all. plan.history at most this
  // calibration's passes (--fresh): chosen among those alone.
  const bool fresh_only = plan.history <= plan.passes;
  const int first = fresh_only ? earlier_count : 0;
  const std::vector<CpuCalibration> candidates(all.begin() + first, all.end());
  std::vector<int> use = PassesAtSpeed(candidates, speed, fresh_only ? static_cast<int>(fresh.size()) : plan.history);
  std::string fallback;
  if (use.empty()) {
    use = nearest_to(candidates, speed,
                     fresh_only ? static_cast<int>(fresh.size()) : std::max(1, std::min(plan.min_at_speed, plan.history)));
    fallback = absl::StrFormat("no pass held that speed %s: the %d nearest; ", within, use.size());
  }
  for (int& i : use) i += first;
  std::sort(use.begin(), use.end());  // oldest first, as the table prints them
  std::vector<CpuCalibration> chosen;
  int earlier_used = 0;
  for (int i : use) {
    chosen.push_back(all[i]);
    if (i < earlier_count) ++earlier_used;
  }
  CpuCalibration c = CombinePasses(chosen);
  c.earlier_passes = earlier_used;
  c.gang_width = fresh.back().gang_width;  // kept passes do not carry it
  c.measured_at_unix_s = now;
  // This calibration's passes set aside (another speed, or the speed moved
  // while they ran): their tables still print, said so.
  int set_aside = 0;
  std::vector<std::string> aside_rows;
  for (int i = earlier_count; i < static_cast<int>(all.size()); ++i)
    if (std::find(use.begin(), use.end(), i) == use.end()) {
      ++set_aside;
      aside_rows.push_back(absl::StrFormat("(the pass below is set aside: %s)",
                                           all[i].Steady() ? "it ran at another speed"
                                                           : "the machine changed speed while it ran"));
      aside_rows.insert(aside_rows.end(), all[i].rows.begin(), all[i].rows.end());
    }
  c.rows.insert(c.rows.begin(), aside_rows.begin(), aside_rows.end());
  // The entry keeps the newest plan.kept passes of any speed, and the ones used.
  const int drop = std::max(0, static_cast<int>(all.size()) - std::max(plan.kept, static_cast<int>(fresh.size())));
  c.passes.clear();
  c.used.clear();
  for (int i = 0; i < static_cast<int>(all.size()); ++i) {
    const bool used = std::find(use.begin(), use.end(), i) != use.end();
    if (i < drop && !used) continue;
    if (used) c.used.push_back(static_cast<int>(c.passes.size()));
    c.passes.push_back(all[i]);
  }
  c.speed = speed;
  c.speed_note = absl::StrFormat(
      "%s%s for %s (%s): %s%d of the %d measured now%s, %d of %d earlier ones",
      remeasure || unusable.empty() ? "" : unusable + "; ", PassCount(static_cast<int>(chosen.size())), whose,
      speed.Describe(), fallback, static_cast<int>(chosen.size()) - earlier_used, fresh.size(),
      set_aside > 0 ? absl::StrFormat(" (%d set aside: another speed, or it moved while they ran)", set_aside)
                    : std::string(),
      earlier_used, fresh_only ? 0 : earlier_count);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c.path = cache_path;
  if (absl::Status s = WriteCpuProfileFile(cache_path, c); !s.ok())
    c.path = absl::StrCat("(not cached: ", s.message(), ")");
  return c;
}

namespace {
std::mutex current_mu;
std::optional<CpuCalibration> current;  // the process's, once resolved
SpeedProbe run_at_start, run_at_end;     // ChooseCpuPassesFor's
}  // namespace

void ChoosePassesFor(const SpeedProbe& at_start, const SpeedProbe& at_end, CalibrationPlan* plan) {
  plan->at_speed = SpeedProbe();
  plan->any_speed.clear();
  plan->mixed.clear();
  if (!at_start.measured()) return;
  if (!at_end.measured() || at_start.DistanceTo(at_end) <= kSameSpeedDistance) {
    plan->at_speed = SpeedProbe::Midpoint(at_start, at_end);
    return;
  }
  plan->any_speed = absl::StrCat("the recorded run's machine changed speed while it ran (at its start ",
                                 at_start.Describe(), "; at its end ", at_end.RatiosTo(at_start),
                                 "): its steps mix two speeds");
  plan->mixed = {at_start, at_end};
}

void ChooseCpuPassesFor(const SpeedProbe& at_start, const SpeedProbe& at_end) {
  std::lock_guard<std::mutex> lock(current_mu);
  current.reset();
  run_at_start = at_start;
  run_at_end = at_end;
}

absl::StatusOr<CpuCalibration> CurrentCpuCalibration(bool remeasure, bool fresh) {
  std::lock_guard<std::mutex> lock(current_mu);
  if (current && !remeasure) return *current;
  const char* pin = std::getenv(kPinEnv);
  CalibrationPlan plan;
  ChoosePassesFor(run_at_start, run_at_end, &plan);
  if (fresh) plan.history = plan.kept = 0;
  auto c = ResolveCpuCalibration(pin ? pin : "", CpuProfileCachePath(), remeasure, plan);
  if (c.ok()) current = *c;
  return c;
}

absl::StatusOr<compiler::ChipProfile> ResolveProfile(const std::string& name, std::string* provenance_json) {
  if (name != "cpu") {
    auto p = compiler::FindProfile(name);
    if (p.ok() && provenance_json)
      *provenance_json = nlohmann::json({{"name", name}, {"source", "builtin"}, {"peak_flops", p->peak_flops},
                                         {"hbm_bandwidth", p->hbm_bandwidth},
                                         {"kernel_overhead_ns", p->kernel_overhead_ns}}).dump();
    return p;
  }
  auto c = CurrentCpuCalibration();
  if (!c.ok()) return c.status();
  if (provenance_json) *provenance_json = c->ProvenanceJson();
  return c->Profile();
}

absl::StatusOr<compiler::ChipProfile> ResolveProfile(const std::string& name) { return ResolveProfile(name, nullptr); }

}  // namespace shardscope::runtime
