// Simulated mode (`shardscope run --simulate`, docs/simulate.md): the real
// step is traced, compiled and partitioned for the whole topology, then every
// chip's program is laid out on the modeled clock without computing values.
// Kernels take the cost model's time on the run's chip profile; collectives are
// priced over the links they use (PriceCollective); faults change the chips'
// speeds, the links' bandwidth and the hosts' start times. The schedule is
// kept compactly (profiler/trace/sim_program.h) for the store, which makes any
// chip's slices again on demand.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/cost_model.h"
#include "compiler/fusion.h"
#include "compiler/ir.h"
#include "profiler/trace/sim_program.h"
#include "runtime/faults.h"
#include "runtime/interconnect.h"

namespace shardscope::runtime {

// One group's collective on the topology: how long it takes from the last
// arrival, by which algorithm, and what each link it used carried.
struct CollectivePrice {
  int64_t dur_ns = 0;
  std::string algorithm;  // ring | tree | torus | alpha-beta
  std::vector<trace::SimLinkUse> links;
};

// Prices a collective of `kind` over `members` (in order), `bytes` being the
// per-chip size of the whole value (compiler::CollectiveBytes). Candidates:
//   ring   the members in order, each hop routed over the topology; all-reduce
//          2(n-1) steps of B/n, all-gather, reduce-scatter and all-to-all n-1
//          steps of B/n, a permute one step of B;
//   tree   binomial (recursive doubling over the member order): broadcast
//          ceil(log2 n) rounds of B, all-reduce a reduce then a broadcast;
//   torus  on a torus, when the group is a sub-grid (each dimension either
//          fixed or whole): a reduce-scatter along each dimension in turn,
//          then an all-gather back (all-gather and reduce-scatter: one half),
//          each dimension's rings running at once over their own links.
// Each step of a phase lasts the longest route's latency plus the busiest
// link's time: a link carrying k transfers at once shares its bandwidth k
// ways, and a faulted link runs at its share (link_factor). The candidate
// cheapest on the healthy links is taken, as NCCL picks its algorithm from
// the nominal topology, then priced with the faults. Without a topology:
// the cost model's alpha-beta ring. On a profile whose collectives run
// through memory (`cpu`: this machine's virtual chips), the cost model's
// in-memory time, spread over the ring's links as the device clock spreads a
// measured collective (algorithm "memory").
class CollectivePricer {
 public:
  CollectivePricer(const compiler::CostModel& model, const Interconnect* ic, const FaultPlan& faults);
  CollectivePrice Price(compiler::CollectiveKind kind, int64_t bytes, const std::vector<int>& members);

 private:
  struct Transfer {
    int src = 0, dst = 0;
  };
  // One phase: `transfers` at once, `steps` times, `chunk` bytes each. Adds to
  // the links' busy time and bytes; returns the phase's time.
  double Phase(const std::vector<Transfer>& transfers, int steps, double chunk);
  CollectivePrice Finish(const std::string& algorithm, double ns);
  // Every algorithm that applies, priced on factor_'s links.
  std::vector<CollectivePrice> Candidates(compiler::CollectiveKind kind, int64_t bytes,
                                          const std::vector<int>& members);
  static size_t Cheapest(const std::vector<CollectivePrice>& candidates);
  // A profile whose collectives run through memory (ChipProfile::collectives_in_memory).
  // `over_links` (the cheapest candidate) lasting `ns` instead.
  CollectivePrice InMemory(CollectivePrice over_links, double ns);
  bool SubGrid(const std::vector<int>& members, std::vector<int>* spanned) const;

  const compiler::CostModel& model_;
  const Interconnect* ic_;
  std::vector<double> factor_;  // per link: bandwidth share
  bool faulted_ = false;        // a link below its bandwidth: choose on healthy_ (all 1)
  std::vector<double> healthy_;
  // Scratch of one candidate: per link busy ns and bytes, and who showed it.
  std::vector<double> busy_, bytes_;
  std::vector<int> shown_by_;
  std::vector<int> touched_;
};

// Per-op device times of a recorded run (`run --simulate --calibrate-from DB`,
// trace-driven as Lumos and Echo are): where an op of a simulated program
// matches, its recorded time replaces the cost model's estimate. Kernels match
// by (program fingerprint, op id), else by KernelSignature where the programs
// differ; collectives only by (fingerprint, op id), since their time depends
// on the group the signature does not name. The rest keep the model's time
// and are counted (CalibrationCounts).
struct RecordedOpTimes {
  std::string source;  // "DB run N", for messages
  std::map<std::pair<std::string, int64_t>, int64_t> by_op;  // (fingerprint, op id) -> ns per program run
  std::map<std::string, int64_t> by_signature;                // KernelSignature -> ns
  std::map<std::pair<std::string, int64_t>, int64_t> transfers;  // host-to-device: (name, bytes) -> ns
};
// What identifies a kernel across programs: its opcode ("fusion" for a fused
// kernel), result shape and the cost model's FLOPs and bytes.
std::string KernelSignature(const std::string& opcode, const std::string& shape, double flops, int64_t bytes_read,
                            int64_t bytes_written);
// Distinct ops of the simulated programs, by where their time came from.
struct CalibrationCounts {
  int64_t kernels_by_op = 0, kernels_by_signature = 0, kernels_modeled = 0;
  int64_t collectives_recorded = 0, collectives_modeled = 0;
  int64_t transfers_recorded = 0, transfers_modeled = 0;  // distinct (name, bytes) of host-to-device transfers
};

// The schedule of one compiled per-device program: its kernels (fused ones as
// one op at their root, a while as one op priced by WhileCost) with the costs
// of `costs`, and its collectives priced per group by `pricer`, plus, on a
// profile with chip_waits, the expected wait for the slowest chip after the
// modeled work since the previous collective (CostModel::ChipWaitNs); a
// recorded collective's time already holds its recorded wait.
absl::StatusOr<trace::SimProgram> BuildSimProgram(int64_t graph_id, const compiler::Module& program,
                                                  const compiler::FusionPlan* fusion,
                                                  const std::vector<compiler::OpCost>& costs,
                                                  const compiler::CostModel& model, int num_devices,
                                                  CollectivePricer& pricer,
                                                  const RecordedOpTimes* recorded = nullptr,
                                                  const std::string& fingerprint = {},
                                                  CalibrationCounts* counts = nullptr);

// A simulated run's state: programs, chips, and every program run so far.
class Simulator {
 public:
  Simulator(int num_devices, std::vector<int> host_of, const Interconnect* ic);
  // The chips' differences from the fault plan (slow-chip, jitter) and the
  // links' bandwidth shares; call before the first run.
  void SetFaults(const FaultPlan& faults);
  // Takes kernel and collective times from a recorded run where they match
  // (RecordedOpTimes); call before the first run. The cost model's schedule
  // is then laid out alongside, unstored, for the comparison
  // (UncalibratedStepSpans).
  void SetCalibration(RecordedOpTimes times);
  bool calibrated() const { return recorded_ != nullptr; }
  // Called (on the thread that runs programs) before the first run of each
  // new step is laid out, so every run in runs() belongs to a finished step:
  // what a recording stores as it goes.
  void SetOnStepsDone(std::function<void(const Simulator&)> fn) { on_steps_done_ = std::move(fn); }
  const CalibrationCounts& calibration_counts() const { return counts_; }
  // Lays out one run of `graph_id` (built on first use) at `step`, after
  // `transfers`; `fingerprint` is the program's (compiler/fingerprint.h), for calibration.
  absl::Status Run(int64_t graph_id, const compiler::Module& program, const compiler::FusionPlan* fusion,
                   const std::vector<compiler::OpCost>& costs, const compiler::CostModel& model, int step,
                   std::vector<trace::SimOp> transfers, const std::string& fingerprint = {});

  int num_devices() const { return n_; }
  const std::map<int64_t, trace::SimProgram>& programs() const { return programs_; }
  const std::vector<trace::SimChip>& chips() const { return chips_; }
  const std::vector<trace::SimRun>& runs() const { return runs_; }
  // Per link index of the topology: its bandwidth share (1: healthy).
  const std::vector<double>& link_factors() const { return link_factor_; }
  const Interconnect* interconnect() const { return ic_; }
  // The modeled span of each step: from the earliest start to the latest end over all chips.
  std::vector<std::pair<int, int64_t>> StepSpans() const;
  // The same for the cost model's schedule of a calibrated run (empty otherwise).
  std::vector<std::pair<int, int64_t>> UncalibratedStepSpans() const;

 private:
  int n_;
  std::vector<int> host_of_;
  const Interconnect* ic_;
  FaultPlan faults_;
  std::vector<trace::SimChip> chips_;
  std::vector<double> link_factor_;
  std::map<int64_t, trace::SimProgram> programs_;
  std::vector<trace::SimRun> runs_;
  std::vector<int64_t> free_;
  std::set<int> preempted_steps_;
  // Calibrated runs: the recorded times, and the model's schedule alongside.
  std::unique_ptr<RecordedOpTimes> recorded_;
  CalibrationCounts counts_;
  std::set<std::pair<std::string, int64_t>> transfers_seen_;  // counted once each
  std::map<int64_t, trace::SimProgram> model_programs_;
  std::vector<trace::SimRun> model_runs_;
  std::vector<int64_t> model_free_;
  std::function<void(const Simulator&)> on_steps_done_;
};

}  // namespace shardscope::runtime
