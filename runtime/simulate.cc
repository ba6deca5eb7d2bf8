// Simulated mode (see simulate.h).
#include "runtime/simulate.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "runtime/collectives.h"

namespace shardscope::runtime {
namespace {

using compiler::CollectiveKind;

bool Untimed(const compiler::Instruction& i) {
  // As the executor: parameters, constants and partition ids take no time, and
  // a while's results are handed over, not computed.
  return i.op == compiler::Opcode::kParameter || i.op == compiler::Opcode::kConstant ||
         i.op == compiler::Opcode::kPartitionId || i.op == compiler::Opcode::kGetTupleElement;
}

}  // namespace

CollectivePricer::CollectivePricer(const compiler::CostModel& model, const Interconnect* ic, const FaultPlan& faults)
    : model_(model), ic_(ic) {
  if (!ic_) return;
  const size_t links = ic_->links().size();
  factor_.assign(links, 1);
  for (size_t l = 0; l < links; ++l) {
    factor_[l] = faults.LinkFactor(*ic_, static_cast<int>(l));
    faulted_ = faulted_ || factor_[l] != 1;
  }
  if (faulted_) healthy_.assign(links, 1);
  busy_.assign(links, 0);
  bytes_.assign(links, 0);
  shown_by_.assign(links, -1);
}

double CollectivePricer::Phase(const std::vector<Transfer>& transfers, int steps, double chunk) {
  if (transfers.empty() || steps <= 0) return 0;
  const compiler::ChipProfile& p = model_.profile();
  std::vector<std::pair<int, int>> load;  // (link, transfers crossing it), small: sorted insert
  double latency = 0;
  for (const Transfer& t : transfers) {
    double lat = 0;
    for (int l : ic_->Route(t.src, t.dst)) {
      if (l < 0) continue;
      lat += ic_->links()[l].dcn ? p.dcn_latency_ns : p.link_latency_ns;
      auto it = std::lower_bound(load.begin(), load.end(), std::make_pair(l, 0));
      if (it != load.end() && it->first == l) ++it->second;
      else load.insert(it, {l, 1});
      if (shown_by_[l] < 0) {
        shown_by_[l] = t.src;
        touched_.push_back(l);
      }
    }
    latency = std::max(latency, lat);
  }
  double worst = 0;
  for (const auto& [l, k] : load) {
    const double bw = (ic_->links()[l].dcn ? p.dcn_bandwidth : p.link_bandwidth) * factor_[l];
    const double ns = bw > 0 ? k * chunk / bw * 1e9 : 0;
    worst = std::max(worst, ns);
    busy_[l] += steps * ns;
    bytes_[l] += steps * k * chunk;
  }
  return steps * (latency + worst);
}

CollectivePrice CollectivePricer::Finish(const std::string& algorithm, double ns) {
  CollectivePrice out;
  out.algorithm = algorithm;
  out.dur_ns = std::llround(ns);
  std::sort(touched_.begin(), touched_.end());
  for (int l : touched_) {
    const Link& link = ic_->links()[l];
    trace::SimLinkUse u;
    u.a = link.a;
    u.b = link.b;
    u.device = shown_by_[l];
    u.bytes = std::llround(bytes_[l]);
    u.busy_ns = std::llround(busy_[l]);
    out.links.push_back(u);
    busy_[l] = bytes_[l] = 0;
    shown_by_[l] = -1;
  }
  touched_.clear();
  return out;
}

bool CollectivePricer::SubGrid(const std::vector<int>& members, std::vector<int>* spanned) const {
  const auto& dims = ic_->dims();
  std::vector<std::set<int64_t>> seen(dims.size());
  for (int m : members)
    for (size_t k = 0; k < dims.size(); ++k) seen[k].insert(ic_->coords(m)[k]);
  int64_t product = 1;
  spanned->clear();
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t s = static_cast<int64_t>(seen[k].size());
    if (s != 1 && s != dims[k]) return false;
    if (s > 1) spanned->push_back(static_cast<int>(k));
    product *= s;
  }
  return product == static_cast<int64_t>(members.size()) && !spanned->empty();
}

CollectivePrice CollectivePricer::InMemory(CollectivePrice over_links, double ns) {
  // The device clock's rule (faults.cc): the collective's time is spread over
  // the links the chosen algorithm uses by their share of its traffic; a
  // faulted link takes 1/F as long, and the collective lasts as long as its
  // slowest link.
  double healthiest = 0;
  for (const trace::SimLinkUse& u : over_links.links)
    healthiest = std::max(healthiest, u.busy_ns * factor_[ic_->FindLink(u.a, u.b)]);
  double slowest = ns;
  for (trace::SimLinkUse& u : over_links.links) {
    const double f = factor_[ic_->FindLink(u.a, u.b)];
    const double busy = healthiest > 0 ? ns * (u.busy_ns * f) / healthiest / f : 0;
    u.busy_ns = std::llround(busy);
    slowest = std::max(slowest, busy);
  }
  over_links.dur_ns = std::llround(slowest);
  over_links.algorithm = "memory";
  return over_links;
}

CollectivePrice CollectivePricer::Price(CollectiveKind kind, int64_t bytes, const std::vector<int>& members) {
  const int n = static_cast<int>(members.size());
  if (n <= 1) return {0, "none", {}};
  if (!ic_) {
    return {std::llround(model_.CollectiveNs(kind, bytes, n)), "alpha-beta", {}};
  }
  // The algorithm is chosen on the healthy links, as NCCL's tuning and XLA's
  // pick from the nominal topology and not from a degraded link's speed; a
  // slow link then slows the algorithm chosen. Chosen on the faulted links,
  // a slow link had a tree all-reduce switch to a ring whose records hid the
  // link's cost, and fleet's what-if said fixing it saved 2 us of 146.
  size_t chosen = 0;
  if (faulted_) {
    std::swap(factor_, healthy_);
    chosen = Cheapest(Candidates(kind, bytes, members));
    std::swap(factor_, healthy_);
  }
  std::vector<CollectivePrice> candidates = Candidates(kind, bytes, members);
  if (!faulted_) chosen = Cheapest(candidates);
  if (model_.profile().collectives_in_memory)
    return InMemory(std::move(candidates[chosen]), model_.CollectiveNs(kind, bytes, n));
  return std::move(candidates[chosen]);
}

size_t CollectivePricer::Cheapest(const std::vector<CollectivePrice>& candidates) {
  size_t best = 0;
  for (size_t k = 1; k < candidates.size(); ++k)
    if (candidates[k].dur_ns < candidates[best].dur_ns) best = k;
  return best;
}

std::vector<CollectivePrice> CollectivePricer::Candidates(CollectiveKind kind, int64_t bytes,
                                                          const std::vector<int>& members) {
  const int n = static_cast<int>(members.size());
  const double b = static_cast<double>(bytes);
  std::vector<CollectivePrice> candidates;
  if (kind != CollectiveKind::kCollectiveBroadcast) {
    std::vector<Transfer> ring;
    for (int k = 0; k < n; ++k) ring.push_back({members[k], members[(k + 1) % n]});
    double ns = 0;
    switch (kind) {
      case CollectiveKind::kAllReduce: ns = Phase(ring, 2 * (n - 1), b / n); break;
      case CollectiveKind::kCollectivePermute: ns = Phase(ring, 1, b); break;
      default: ns = Phase(ring, n - 1, b / n); break;
    }
    candidates.push_back(Finish("ring", ns));
  }
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kCollectiveBroadcast) {
    std::vector<std::vector<Transfer>> rounds;
    for (int span = 1; span < n; span *= 2) {
      std::vector<Transfer> r;
      for (int i = 0; i < span && i + span < n; ++i) r.push_back({members[i], members[i + span]});
      rounds.push_back(std::move(r));
    }
    double ns = 0;
    if (kind == CollectiveKind::kAllReduce)  // reduce up the tree, then broadcast down
      for (auto it = rounds.rbegin(); it != rounds.rend(); ++it) {
        std::vector<Transfer> up;
        for (const Transfer& t : *it) up.push_back({t.dst, t.src});
        ns += Phase(up, 1, b);
      }
    for (const auto& r : rounds) ns += Phase(r, 1, b);
    candidates.push_back(Finish("tree", ns));
  }
  std::vector<int> spanned;
  if (!ic_->gpu() &&
      (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather ||
       kind == CollectiveKind::kReduceScatter) &&
      SubGrid(members, &spanned)) {
    const auto& dims = ic_->dims();
    auto along = [&](int d) {  // every member to its next neighbour along dimension d
      std::vector<Transfer> t;
      for (int m : members) {
        std::vector<int64_t> x = ic_->coords(m);
        x[d] = (x[d] + 1) % dims[d];
        int id = 0;
        for (size_t k = 0; k < dims.size(); ++k) id = id * static_cast<int>(dims[k]) + static_cast<int>(x[k]);
        t.push_back({m, id});
      }
      return t;
    };
    double ns = 0;
    if (kind == CollectiveKind::kAllGather) {
      double cur = b / n;
      for (auto it = spanned.rbegin(); it != spanned.rend(); ++it) {
        const int nd = static_cast<int>(dims[*it]);
        ns += Phase(along(*it), nd - 1, cur);
        cur *= nd;
      }
    } else {
      double cur = b;
      for (int d : spanned) {
        const int nd = static_cast<int>(dims[d]);
        ns += Phase(along(d), nd - 1, cur / nd);
        cur /= nd;
      }
      if (kind == CollectiveKind::kAllReduce)
        for (auto it = spanned.rbegin(); it != spanned.rend(); ++it) {
          const int nd = static_cast<int>(dims[*it]);
          ns += Phase(along(*it), nd - 1, cur);
          cur *= nd;
        }
    }
    candidates.push_back(Finish("torus", ns));
  }
  return candidates;
}

std::string KernelSignature(const std::string& opcode, const std::string& shape, double flops, int64_t bytes_read,
                            int64_t bytes_written) {
  return absl::StrCat(opcode, "|", shape, "|", std::llround(flops), "|", bytes_read, "|", bytes_written);
}

absl::StatusOr<trace::SimProgram> BuildSimProgram(int64_t graph_id, const compiler::Module& program,
                                                  const compiler::FusionPlan* fusion,
                                                  const std::vector<compiler::OpCost>& costs,
                                                  const compiler::CostModel& model, int num_devices,
                                                  CollectivePricer& pricer, const RecordedOpTimes* recorded,
                                                  const std::string& fingerprint, CalibrationCounts* counts) {
  CalibrationCounts unused;
  if (!counts) counts = &unused;
  trace::SimProgram p;
  p.graph_id = graph_id;
  std::map<std::vector<std::vector<int>>, int> set_of;
  // Groups priced once per layout, kind, size and wait.
  std::map<std::tuple<int, int, int64_t, int64_t>, int> priced;
  // Modeled work since the previous collective: what the chips' spread grows
  // with (CostModel::ChipWaitNs).
  double segment_ns = 0;
  for (const auto& ip : program.instructions()) {
    const compiler::Instruction& i = *ip;
    if (Untimed(i)) continue;
    if (fusion && fusion->Absorbed(i.id)) continue;
    trace::SimOp op;
    op.op_id = i.id;
    if (compiler::IsCollective(i.op)) {
      op.name = compiler::KernelName(i, nullptr);
      auto groups = ParticipantGroups(i, num_devices);
      if (!groups.ok())
        return absl::Status(groups.status().code(), absl::StrCat(op.name, ": ", groups.status().message()));
      std::vector<std::vector<int>> layout;
      for (const auto& g : *groups) layout.emplace_back(g.begin(), g.end());
      auto [it, added] = set_of.emplace(std::move(layout), static_cast<int>(p.group_sets.size()));
      if (added) p.group_sets.push_back(it->first);
      const int set = it->second;
      const compiler::CollectiveKind kind = compiler::CollectiveKindOf(i.op);
      const int64_t bytes = compiler::CollectiveBytes(i);
      op.kind = trace::SliceKind::kCollective;
      op.bytes = i.operands.empty() ? 0 : i.operands[0]->shape.bytes();
      // The wait for the slowest chip of the largest group (every chip runs
      // the same program, so each group's members spread alike).
      size_t largest = 0;
      for (const auto& g : p.group_sets[set]) largest = std::max(largest, g.size());
      const int64_t wait = std::llround(model.ChipWaitNs(segment_ns, static_cast<int>(largest)));
      segment_ns = 0;
      auto key = std::make_tuple(set, static_cast<int>(kind), bytes, wait);
      const auto rec = recorded ? recorded->by_op.find({fingerprint, i.id}) : decltype(recorded->by_op.end()){};
      if (recorded && rec != recorded->by_op.end()) {
        // Its recorded time for every group; the links keep the model's
        // traffic, their busy time shrunk to fit inside the recorded span.
        ++counts->collectives_recorded;
        trace::SimCollective c;
        c.group_set = set;
        c.algorithm = "recorded";
        for (const auto& g : p.group_sets[set]) {
          CollectivePrice price = pricer.Price(kind, bytes, g);
          const double fit = price.dur_ns > rec->second ? static_cast<double>(rec->second) / price.dur_ns : 1.0;
          for (trace::SimLinkUse& u : price.links) u.busy_ns = std::llround(u.busy_ns * fit);
          c.group_dur_ns.push_back(g.size() > 1 ? rec->second : 0);
          c.group_links.push_back(std::move(price.links));
        }
        op.collective = static_cast<int>(p.collectives.size());
        p.collectives.push_back(std::move(c));
      } else if (auto found = priced.find(key); found != priced.end()) {
        if (recorded) ++counts->collectives_modeled;
        op.collective = found->second;
      } else {
        trace::SimCollective c;
        c.group_set = set;
        for (const auto& g : p.group_sets[set]) {
          CollectivePrice price = pricer.Price(kind, bytes, g);
          if (c.algorithm.empty() || c.algorithm == price.algorithm) c.algorithm = price.algorithm;
          else c.algorithm = "mixed";
          c.group_dur_ns.push_back(price.dur_ns + (g.size() > 1 ? wait : 0));
          c.group_links.push_back(std::move(price.links));
        }
        op.collective = priced[key] = static_cast<int>(p.collectives.size());
        p.collectives.push_back(std::move(c));
        if (recorded) ++counts->collectives_modeled;
      }
      op.coll_seq = p.num_collective_ops++;
    } else {
      op.name = compiler::KernelName(i, fusion);
      if (i.op == compiler::Opcode::kWhile) {
        op.dur_ns = model.WhileCost(i, num_devices).modeled_ns;
      } else if (i.id >= 0 && i.id < static_cast<int64_t>(costs.size())) {
        op.dur_ns = costs[i.id].modeled_ns;
      } else {
        op.dur_ns = static_cast<int64_t>(model.profile().kernel_overhead_ns);
      }
      if (recorded) {
        auto by_op = recorded->by_op.find({fingerprint, i.id});
        auto by_sig = recorded->by_signature.end();
        if (by_op == recorded->by_op.end() && i.op != compiler::Opcode::kWhile && i.id >= 0 &&
            i.id < static_cast<int64_t>(costs.size())) {
          const compiler::OpCost& c = costs[i.id];
          const bool fused_root = fusion && fusion->KernelOf(i.id);
          by_sig = recorded->by_signature.find(KernelSignature(fused_root ? "fusion" : compiler::OpcodeName(i.op),
                                                               i.shape.ToString(), c.flops, c.bytes_read,
                                                               c.bytes_written));
        }
        if (by_op != recorded->by_op.end()) {
          op.dur_ns = by_op->second;
          ++counts->kernels_by_op;
        } else if (by_sig != recorded->by_signature.end()) {
          op.dur_ns = by_sig->second;
          ++counts->kernels_by_signature;
        } else {
          ++counts->kernels_modeled;
        }
      }
      segment_ns += static_cast<double>(op.dur_ns);
    }
    p.ops.push_back(std::move(op));
  }
  p.BuildIndex(num_devices);
  return p;
}

Simulator::Simulator(int num_devices, std::vector<int> host_of, const Interconnect* ic)
    : n_(num_devices), host_of_(std::move(host_of)), ic_(ic), chips_(num_devices), free_(num_devices, 0) {
  if (ic_) link_factor_.assign(ic_->links().size(), 1);
}

void Simulator::SetFaults(const FaultPlan& faults) {
  faults_ = faults;
  chips_.assign(n_, {});
  for (trace::SimChip& c : chips_) c.seed = faults.seed();
  for (const Fault& f : faults.faults()) {
    if (f.kind == Fault::kSlowChip && f.chip >= 0 && f.chip < n_) chips_[f.chip].time_scale /= f.factor;
    if (f.kind == Fault::kJitter)
      for (trace::SimChip& c : chips_) c.jitter = f.factor;
  }
  if (ic_)
    for (size_t l = 0; l < link_factor_.size(); ++l) link_factor_[l] = faults.LinkFactor(*ic_, static_cast<int>(l));
}

void Simulator::SetCalibration(RecordedOpTimes times) {
  recorded_ = std::make_unique<RecordedOpTimes>(std::move(times));
  model_free_.assign(n_, 0);
}

absl::Status Simulator::Run(int64_t graph_id, const compiler::Module& program, const compiler::FusionPlan* fusion,
                            const std::vector<compiler::OpCost>& costs, const compiler::CostModel& model, int step,
                            std::vector<trace::SimOp> transfers, const std::string& fingerprint) {
  auto it = programs_.find(graph_id);
  if (it == programs_.end()) {
    CollectivePricer pricer(model, ic_, faults_);
    auto built = BuildSimProgram(graph_id, program, fusion, costs, model, n_, pricer, recorded_.get(), fingerprint,
                                 &counts_);
    if (!built.ok()) return built.status();
    it = programs_.emplace(graph_id, *std::move(built)).first;
    if (recorded_) {
      CollectivePricer model_pricer(model, ic_, faults_);
      auto modeled = BuildSimProgram(graph_id, program, fusion, costs, model, n_, model_pricer);
      if (!modeled.ok()) return modeled.status();
      model_programs_.emplace(graph_id, *std::move(modeled));
    }
  }
  if (on_steps_done_ && !runs_.empty() && runs_.back().step != step) on_steps_done_(*this);
  trace::SimRun r;
  r.seq = static_cast<int64_t>(runs_.size());
  r.step = step;
  r.graph_id = graph_id;
  r.transfers = std::move(transfers);
  r.start_ns = free_;
  if (preempted_steps_.insert(step).second)
    for (const Fault& f : faults_.faults()) {
      if (f.kind != Fault::kHostPreempt || f.step != step) continue;
      if (r.preempted_ns.empty()) r.preempted_ns.assign(n_, 0);
      for (int c = 0; c < n_; ++c)
        if (host_of_[c] == f.host) {
          r.preempted_ns[c] += f.pause_ns;
          r.start_ns[c] += f.pause_ns;
        }
    }
  if (recorded_) {  // the model's schedule, the same run from its own chips' free times
    trace::SimRun m = r;
    // The calibrated run's host-to-device transfers at their recorded times, by name and size.
    for (trace::SimOp& t : r.transfers) {
      auto found = recorded_->transfers.find({t.name, t.bytes});
      if (found != recorded_->transfers.end()) t.dur_ns = found->second;
      if (transfers_seen_.insert({t.name, t.bytes}).second)
        ++(found != recorded_->transfers.end() ? counts_.transfers_recorded : counts_.transfers_modeled);
    }
    for (int c = 0; c < n_; ++c) m.start_ns[c] = model_free_[c] + (r.preempted_ns.empty() ? 0 : r.preempted_ns[c]);
    if (absl::Status s = trace::SimSchedule(model_programs_.at(graph_id), chips_, &m); !s.ok()) return s;
    model_free_ = m.end_ns;
    model_runs_.push_back(std::move(m));
  }
  if (absl::Status s = trace::SimSchedule(it->second, chips_, &r); !s.ok()) return s;
  free_ = r.end_ns;
  runs_.push_back(std::move(r));
  return absl::OkStatus();
}

namespace {

std::vector<std::pair<int, int64_t>> Spans(const std::vector<trace::SimRun>& runs, int n) {
  std::map<int, std::pair<int64_t, int64_t>> span;
  for (const trace::SimRun& r : runs) {
    for (int c = 0; c < n; ++c) {
      const int64_t s = r.start_ns[c] - (r.preempted_ns.empty() ? 0 : r.preempted_ns[c]);
      auto [it, added] = span.emplace(r.step, std::make_pair(s, r.end_ns[c]));
      if (!added) {
        it->second.first = std::min(it->second.first, s);
        it->second.second = std::max(it->second.second, r.end_ns[c]);
      }
    }
  }
  std::vector<std::pair<int, int64_t>> out;
  for (const auto& [step, se] : span) out.push_back({step, se.second - se.first});
  return out;
}

}  // namespace

std::vector<std::pair<int, int64_t>> Simulator::StepSpans() const { return Spans(runs_, n_); }

std::vector<std::pair<int, int64_t>> Simulator::UncalibratedStepSpans() const { return Spans(model_runs_, n_); }

}  // namespace shardscope::runtime
