// Fault specs and what they do to the device clock (see faults.h).
#include "runtime/faults.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/mix.h"

namespace shardscope::runtime {

namespace {

constexpr int64_t kDefaultPauseNs = 200'000'000;  // host-preempt: 200 ms
constexpr int64_t kMaxPauseMs = 3'600'000;        // an hour
constexpr int kMaxStep = 1'000'000'000;
// The slowest a chip or link may be made: 1/1000 of its speed. Below that the
// scaled durations leave int64 nanoseconds (1e-300 made a chip's kernels take
// no time at all) and no real fault looks like it.
constexpr double kMinShare = 0.001;

const char kForms[] =
    "slow-chip:C:S (0.001<=S<1), link:A-B:F (A<B, 0.001<=F<1), jitter:J (0<J<1), fail-chip:C@N, "
    "host-preempt:H@N[:MS]";

absl::Status Bad(const std::string& spec, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--fault '", spec, "': ", why, " (forms: ", kForms, ")"));
}

// A whole number in [lo, hi] named `what` in errors.
absl::StatusOr<int> Whole(const std::string& spec, const std::string& text, const char* what, int64_t lo,
                          int64_t hi) {
  int64_t v = 0;
  // Digits only: " 3" and "+3" are not how a chip or step is written.
  const bool digits = !text.empty() && absl::c_all_of(text, absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(text, &v) || v < lo || v > hi)
    return Bad(spec, absl::StrCat(what, " '", text, "' is not a whole number from ", lo, " to ", hi));
  return static_cast<int>(v);
}

// Digits with at most one point, then an optional exponent ("0.5", ".5",
// "5e-1"): how a speed or share is written. SimpleAtod also takes spaces
// around it, a sign and hex ("0x1p-1"), which were stored as typed.
bool PlainDecimal(const std::string& text) {
  size_t i = 0, digits = 0;
  bool point = false;
  for (; i < text.size(); ++i) {
    if (absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) ++digits;
    else if (text[i] == '.' && !point) point = true;
    else break;
  }
  if (digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    const size_t exp = i;
    while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == exp) return false;
  }
  return i == text.size();
}

// A fraction strictly between 0 and 1 named `what`; with `min` > 0, at least `min`.
absl::StatusOr<double> Fraction(const std::string& spec, const std::string& text, const char* what,
                                double min = 0) {
  double v = 0;
  if (!PlainDecimal(text))
    return Bad(spec, absl::StrCat(what, " '", text,
                                  "' is not a number written plainly (digits and a point, e.g. 0.5: no spaces, "
                                  "signs or hex)"));
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v <= 0 || v >= 1)
    return Bad(spec, absl::StrCat(what, " '", text, "' is not a number strictly between 0 and 1"));
  if (v < min)
    return Bad(spec, absl::StrCat(what, " '", text, "' is below ", min, ": at most ", 1 / min,
                                  " times slower (a fault that slow is a failure: fail-chip:C@N)"));
  return v;
}

// "C@N": a number and a step.
absl::Status AtStep(const std::string& spec, const std::string& text, const char* what, int* id, int* step) {
  std::vector<std::string> p = absl::StrSplit(text, '@');
  if (p.size() != 2) return Bad(spec, absl::StrCat("expected ", what, "@STEP, got '", text, "'"));
  auto i = Whole(spec, p[0], what, 0, 1 << 20);
  if (!i.ok()) return i.status();
  auto s = Whole(spec, p[1], "step", 0, kMaxStep);
  if (!s.ok()) return s.status();
  *id = *i;
  *step = *s;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Fault> ParseFault(const std::string& spec) {
  Fault f;
  f.spec = spec;
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  std::vector<std::string> p = absl::StrSplit(rest, ':');
  auto need = [&](size_t n) {
    return p.size() == n && !rest.empty()
               ? absl::OkStatus()
               : Bad(spec,
                     absl::StrCat(kind, " takes ", n, " field", n == 1 ? "" : "s", " after '", kind, ":'"));
  };
  if (kind == "slow-chip") {
    if (absl::Status s = need(2); !s.ok()) return s;
    f.kind = Fault::kSlowChip;
    auto c = Whole(spec, p[0], "chip", 0, 1 << 20);
    if (!c.ok()) return c.status();
    auto v = Fraction(spec, p[1], "speed", kMinShare);
    if (!v.ok()) return v.status();
    f.chip = *c;
    f.factor = *v;
  } else if (kind == "link") {
    if (absl::Status s = need(2); !s.ok()) return s;
    f.kind = Fault::kLink;
    std::vector<std::string> ab = absl::StrSplit(p[0], '-');
    if (ab.size() != 2) return Bad(spec, absl::StrCat("link '", p[0], "' is not of the form A-B"));
    auto a = Whole(spec, ab[0], "link end A", 0, 1 << 20);
    if (!a.ok()) return a.status();
    auto b = Whole(spec, ab[1], "link end B", 0, 1 << 20);
    if (!b.ok()) return b.status();
    if (*a == *b)
      return Bad(spec, absl::StrCat("link '", p[0], "' joins chip ", *a, " to itself: the two chips must differ"));
    if (*a > *b)
      return Bad(spec, absl::StrCat("link '", p[0], "': write the lower chip first (", *b, "-", *a, ")"));
    auto v = Fraction(spec, p[1], "bandwidth share", kMinShare);
    if (!v.ok()) return v.status();
    f.a = *a;
    f.b = *b;
    f.factor = *v;
  } else if (kind == "jitter") {
    if (absl::Status s = need(1); !s.ok()) return s;
    f.kind = Fault::kJitter;
    auto v = Fraction(spec, p[0], "jitter");
    if (!v.ok()) return v.status();
    f.factor = *v;
  } else if (kind == "fail-chip") {
    if (absl::Status s = need(1); !s.ok()) return s;
    f.kind = Fault::kFailChip;
    if (absl::Status s = AtStep(spec, p[0], "chip", &f.chip, &f.step); !s.ok()) return s;
  } else if (kind == "host-preempt") {
    if (p.empty() || rest.empty() || p.size() > 2)
      return Bad(spec, "host-preempt takes HOST@STEP and, optionally, :MS of pause");
    f.kind = Fault::kHostPreempt;
    if (absl::Status s = AtStep(spec, p[0], "host", &f.host, &f.step); !s.ok()) return s;
    f.pause_ns = kDefaultPauseNs;
    if (p.size() == 2) {
      auto ms = Whole(spec, p[1], "pause (ms)", 1, kMaxPauseMs);
      if (!ms.ok()) return ms.status();
      f.pause_ns = int64_t{*ms} * 1'000'000;
    }
  } else {
    return Bad(spec, absl::StrCat("unknown fault kind '", kind, "'"));
  }
  // One spelling per fault ("slow-chip:0005:0.5" is slow-chip:5:0.5), so that
  // stored runs compare as equal; a fraction keeps its digits as written.
  switch (f.kind) {
    case Fault::kSlowChip: f.spec = absl::StrCat(kind, ":", f.chip, ":", p[1]); break;
    case Fault::kLink: f.spec = absl::StrCat(kind, ":", f.a, "-", f.b, ":", p[1]); break;
    case Fault::kJitter: break;
    case Fault::kFailChip: f.spec = absl::StrCat(kind, ":", f.chip, "@", f.step); break;
    case Fault::kHostPreempt:
      f.spec = absl::StrCat(kind, ":", f.host, "@", f.step);
      if (p.size() == 2) absl::StrAppend(&f.spec, ":", f.pause_ns / 1'000'000);
      break;
  }
  return f;
}

absl::Status CheckFault(const Fault& f, int num_chips, int num_hosts, const Interconnect* ic) {
  // "chips 0 to 7", or "one chip (chip 0)": a range of one reads as a typo.
  auto have = [](int n, const char* one, const char* many) {
    return n == 1 ? absl::StrCat("one ", one, " (", one, " 0)") : absl::StrCat(many, " 0 to ", n - 1);
  };
  auto chip = [&](int c) {
    return c < num_chips ? absl::OkStatus()
                         : Bad(f.spec, absl::StrCat("chip ", c, " does not exist: the run has ",
                                                    have(num_chips, "chip", "chips")));
  };
  switch (f.kind) {
    case Fault::kSlowChip:
    case Fault::kFailChip:
      return chip(f.chip);
    case Fault::kLink: {
      if (absl::Status s = chip(f.b); !s.ok()) return s;
      if (!ic)
        return Bad(f.spec,
                   "links exist only in a topology: give --topology (e.g. --topology 2x4 or gpu:2x4)");
      if (ic->FindLink(f.a, f.b) < 0) {
        std::vector<std::pair<int, int>> mine;
        for (const Link& l : ic->links())
          if (l.a == f.a || l.b == f.a) mine.push_back({l.a, l.b});
        std::sort(mine.begin(), mine.end());
        std::string near;
        for (const auto& [a, b] : mine) absl::StrAppend(&near, near.empty() ? "" : ", ", a, "-", b);
        return Bad(f.spec,
                   absl::StrCat("chips ", f.a, " and ", f.b, " are not linked in --topology ", ic->spec(),
                                "; chip ", f.a, "'s links: ", near.empty() ? "none" : near));
      }
      return absl::OkStatus();
    }
    case Fault::kHostPreempt:
      if (f.host >= num_hosts)
        return Bad(f.spec, absl::StrCat("host ", f.host, " does not exist: the run has ",
                                        have(num_hosts, "host", "hosts")));
      return absl::OkStatus();
    case Fault::kJitter:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status CheckFaultStep(const Fault& f, int end_step, const std::string& end_flag) {
  if (f.kind != Fault::kFailChip && f.kind != Fault::kHostPreempt) return absl::OkStatus();
  if (f.step < end_step) return absl::OkStatus();
  return Bad(f.spec, absl::StrCat("step ", f.step, " is not a step of this run (its steps are 0 to ",
                                  end_step - 1, ", ", end_flag, "): the fault would never happen"));
}

absl::Status CheckFaultSet(const std::vector<Fault>& faults) {
  // What each fault sets; two that set the same thing contradict each other
  // (or would silently compound: two slow-chip:3:0.5 made chip 3 run at 0.25).
  auto target = [](const Fault& f) -> std::string {
    switch (f.kind) {
      case Fault::kSlowChip:
        return absl::StrCat("chip ", f.chip, "'s speed");
      case Fault::kLink:
        return absl::StrCat("link ", f.a, "-", f.b, "'s bandwidth");
      case Fault::kJitter:
        return "every kernel's jitter";
      case Fault::kFailChip:
        return absl::StrCat("when chip ", f.chip, " fails");
      case Fault::kHostPreempt:
        return absl::StrCat("host ", f.host, "'s pause at step ", f.step);
    }
    return "";
  };
  std::map<std::string, const Fault*> seen;
  for (const Fault& f : faults) {
    const std::string t = target(f);
    auto [it, fresh] = seen.try_emplace(t, &f);
    if (!fresh)
      return absl::InvalidArgumentError(absl::StrCat("--fault '", it->second->spec, "' and --fault '", f.spec,
                                                     "' both set ", t, ": give one"));
  }
  // The first chip to fail ends the run: a fault at a later step never happens.
  const Fault* first_failure = nullptr;
  for (const Fault& f : faults)
    if (f.kind == Fault::kFailChip && (!first_failure || f.step < first_failure->step)) first_failure = &f;
  if (first_failure)
    for (const Fault& f : faults) {
      if ((f.kind == Fault::kFailChip || f.kind == Fault::kHostPreempt) && f.step > first_failure->step)
        return Bad(f.spec, absl::StrCat("the run ends at step ", first_failure->step, ", when chip ",
                                        first_failure->chip, " fails (--fault '", first_failure->spec,
                                        "'), before step ", f.step, ": the fault would never happen"));
      // The failing step is never stored: a pause in it would be lost.
      if (f.kind == Fault::kHostPreempt && f.step == first_failure->step)
        return Bad(f.spec, absl::StrCat("step ", f.step, " is where chip ", first_failure->chip, " fails (--fault '",
                                        first_failure->spec, "'): the run ends in it and never stores it, so the "
                                        "pause would not be seen"));
    }
  return absl::OkStatus();
}

std::vector<Fault> FaultPlan::FailuresBy(int step) const {
  int first = INT_MAX;
  for (const Fault& f : faults_)
    if (f.kind == Fault::kFailChip && f.step <= step) first = std::min(first, f.step);
  std::vector<Fault> out;
  for (const Fault& f : faults_)
    if (f.kind == Fault::kFailChip && f.step == first) out.push_back(f);
  std::sort(out.begin(), out.end(), [](const Fault& a, const Fault& b) { return a.chip < b.chip; });
  return out;
}

void FaultPlan::Apply(ScheduleInput* in, const std::vector<int>& host_of) const {
  const int n = static_cast<int>(in->per_device.size());
  for (const Fault& f : faults_) {
    switch (f.kind) {
      case Fault::kSlowChip:
        if (f.chip < n)
          for (DeviceOp& op : in->per_device[f.chip])
            if (op.collective < 0) op.dur_ns = static_cast<int64_t>(std::llround(op.dur_ns / f.factor));
        break;
      case Fault::kJitter:
        for (int d = 0; d < n; ++d) {
          auto& ops = in->per_device[d];
          for (size_t k = 0; k < ops.size(); ++k) {
            if (ops[k].collective >= 0 || ops[k].kind != trace::SliceKind::kCompute) continue;
            const uint64_t r = SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(in->step) * 0x100000001ULL ^
                                               (static_cast<uint64_t>(d) << 40) ^ k));
            const double u = (static_cast<double>(r >> 11) * 0x1.0p-53) * 2 - 1;  // [-1, 1)
            ops[k].dur_ns = static_cast<int64_t>(std::llround(ops[k].dur_ns * (1 + f.factor * u)));
          }
        }
        break;
      case Fault::kHostPreempt:
        if (in->step != f.step) break;
        in->start_delay_ns.resize(n, 0);
        for (int d = 0; d < n; ++d)
          if (d < static_cast<int>(host_of.size()) && host_of[d] == f.host)
            in->start_delay_ns[d] += f.pause_ns;
        break;
      case Fault::kLink:
      case Fault::kFailChip:
        break;  // AddLinkTraffic; the client ends the run
    }
  }
}

double FaultPlan::LinkFactor(const Interconnect& ic, int link) const {
  double share = 1;
  for (const Fault& f : faults_)
    if (f.kind == Fault::kLink && ic.FindLink(f.a, f.b) == link) share *= f.factor;
  return share;
}

void AddLinkTraffic(ScheduleInput* in, const Interconnect& ic, const FaultPlan& faults) {
  for (CollectiveRun& run : in->collectives) {
    run.group_links.assign(run.groups.size(), {});
    for (size_t g = 0; g < run.groups.size(); ++g) {
      const auto& members = run.groups[g];
      const size_t m = members.size();
      if (m < 2) continue;
      // Hops of the ring per link, and the member whose hop first crosses it
      // (the lane its slice is drawn on).
      std::map<int, std::pair<int, int64_t>> load;  // link -> (hops, sender)
      for (size_t p = 0; p < m; ++p) {
        const int from = static_cast<int>(members[p]), to = static_cast<int>(members[(p + 1) % m]);
        if (m == 2 && p == 1) break;  // two members: one exchange, not two
        for (int l : ic.Route(from, to)) {
          if (l < 0) continue;
          auto [it, fresh] = load.try_emplace(l, 0, from);
          ++it->second.first;
        }
      }
      if (load.empty()) continue;
      int kmax = 0;
      for (const auto& [l, v] : load) kmax = std::max(kmax, v.first);
      const int64_t d = run.group_dur_ns[g];
      int64_t slowest = d;
      std::vector<LinkTransfer>& out = run.group_links[g];
      for (const auto& [l, v] : load) {
        const Link& link = ic.links()[l];
        LinkTransfer t;
        t.hops = v.first;
        t.a = link.a;
        t.b = link.b;
        t.device = static_cast<int>(v.second);
        t.dur_ns = static_cast<int64_t>(
            std::llround(static_cast<double>(d) * v.first / kmax / faults.LinkFactor(ic, l)));
        slowest = std::max(slowest, t.dur_ns);
        out.push_back(t);
      }
      run.group_dur_ns[g] = slowest;
    }
  }
  // A link's bytes: its hops times what one member puts on the ring (the same
  // for every member), from the collective's ops.
  for (size_t dev = 0; dev < in->per_device.size(); ++dev)
    for (const DeviceOp& op : in->per_device[dev]) {
      if (op.collective < 0 || op.collective >= static_cast<int>(in->collectives.size())) continue;
      CollectiveRun& run = in->collectives[op.collective];
      for (auto& group : run.group_links)
        for (LinkTransfer& t : group)
          if (t.device == static_cast<int>(dev) && t.bytes == 0)
            t.bytes = t.hops * (op.sent_bytes > 0 ? op.sent_bytes : op.bytes);
    }
}

}  // namespace shardscope::runtime
