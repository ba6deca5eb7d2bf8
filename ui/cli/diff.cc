// `shardscope diff`: two stored runs compared (profiler/analysis/compare.h),
// printed, with an optional CI gate on the step time.
#include "ui/cli/diff.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "profiler/analysis/compare.h"
#include "store/json_text.h"
#include "store/reader.h"

namespace shardscope::cli {

const char kDiffHelp[] =
    "usage: shardscope diff A.db [B.db] [--runs A,B] [--clock device|modeled|host]\n"
    "                      [--format text|md|html|json] [--fail-if-slower PCT]\n"
    "  Compares run B against run A: step time on each clock (median, p10-p90),\n"
    "  compilations, memory peak, each op's time per step classed as added, removed,\n"
    "  faster, slower or unchanged (unchanged: within the noise measured from the\n"
    "  runs' own steps), sharding changes, and a one-line verdict.\n"
    "  Two files: the newest run of each (--runs A,B picks run A in the first file\n"
    "  and run B in the second). One file: --runs A,B is required.\n"
    "  --clock C           the clock of op times, of the verdict and of the gate:\n"
    "                      device (default; modeled when a side has no device steps\n"
    "                      and both have modeled ones: simulated runs), modeled\n"
    "                      (deterministic: for CI), or host\n"
    "                      (the gate only: host steps; ops stay on the device clock)\n"
    "  --format F          text (default), md, html (one self-contained file) or json\n"
    "  --fail-if-slower P  exit 3 when B's median step on the clock is more than P\n"
    "                      percent slower than A's (0 <= P <= 1000)\n"
    "  A run B that did not finish (a hang, a failure, a killed process) fails the gate.\n"
    "  Exit: 0 compared, 1 a file or run cannot be read (or, with the gate, the runs are\n"
    "  different workloads or have no steps on its clock), 2 bad arguments, 3 the gate failed.\n";

namespace {

int Usage(std::ostream& err, const std::string& problem) {
  err << "error: " << problem << "\n" << kDiffHelp;
  return 2;
}

// The newest run of a file, or `wanted` when given.
std::optional<int64_t> PickRun(const store::Reader& r, std::optional<int64_t> wanted, std::ostream& err) {
  if (wanted) return wanted;
  auto latest = r.LatestRunId();
  if (!latest.ok()) {
    err << "error: " << latest.status().message() << "\n";
    return std::nullopt;
  }
  return *latest;
}

}  // namespace

int RunDiffCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  std::vector<std::string> paths;
  std::string format = "text", clock, runs;  // clock: empty lets the comparison pick
  std::optional<double> gate;
  const std::set<std::string> flags = {"--runs", "--clock", "--format", "--fail-if-slower"};
  std::set<std::string> given;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() < 3) {
      paths.push_back(a);
      continue;
    }
    std::string name = a, value;
    if (size_t eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else {
      if (!flags.count(name)) return Usage(err, absl::StrCat("unknown option '", name, "'"));
      if (i + 1 >= argv.size()) return Usage(err, absl::StrCat("option ", name, " needs a value"));
      value = argv[++i];
    }
    if (!flags.count(name)) return Usage(err, absl::StrCat("unknown option '", name, "'"));
    if (!given.insert(name).second)  // the last one silently won
      return Usage(err, absl::StrCat("option ", name, " is given twice"));
    if (name == "--runs") runs = value;
    if (name == "--clock") {
      // An empty value is no clock: refused like any other, not taken as "let the comparison pick".
      if (value.empty()) return Usage(err, "--clock is device, modeled or host, not ''");
      clock = value;
    }
    if (name == "--format") format = value;
    if (name == "--fail-if-slower") {
      double pct = 0;
      if (!absl::SimpleAtod(value, &pct) || !std::isfinite(pct) || pct < 0 || pct > 1000)
        return Usage(err, absl::StrCat("--fail-if-slower takes a percentage 0..1000, not '", value, "'"));
      gate = pct + 0.0;  // -0 is 0: the limit prints "+0%", not "+-0%"
    }
  }
  if (format != "text" && format != "md" && format != "html" && format != "json")
    return Usage(err, absl::StrCat("--format is text, md, html or json, not '", format, "'"));
  if (!clock.empty() && clock != "device" && clock != "modeled" && clock != "host")
    return Usage(err, absl::StrCat("--clock is device, modeled or host, not '", clock, "'"));
  if (paths.empty() || paths.size() > 2) return Usage(err, "diff takes one or two database files");
  std::optional<int64_t> run_a, run_b;
  if (!runs.empty()) {
    std::vector<std::string> parts = absl::StrSplit(runs, ',');
    int64_t x = 0, y = 0;
    // Digits only: "+2" and " 1" are not run ids as `runs` prints them.
    const auto digits = [](const std::string& t) {
      return !t.empty() && std::all_of(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    };
    if (parts.size() != 2 || !digits(parts[0]) || !digits(parts[1]) || !absl::SimpleAtoi(parts[0], &x) ||
        !absl::SimpleAtoi(parts[1], &y) || x < 1 || y < 1)
      return Usage(err, absl::StrCat("--runs takes two run ids, A,B (e.g. 1,2), not '", runs, "'"));
    run_a = x;
    run_b = y;
  } else if (paths.size() == 1) {
    return Usage(err, "one file needs --runs A,B: which two of its runs to compare");
  }
  auto ra = store::Reader::Open(paths[0], store::Reader::Threads::kOneThread);
  if (!ra.ok()) {
    err << "error: " << ra.status().message() << "\n";
    return 1;
  }
  std::optional<store::Reader> rb_own;
  if (paths.size() == 2) {
    auto rb = store::Reader::Open(paths[1], store::Reader::Threads::kOneThread);
    if (!rb.ok()) {
      err << "error: " << rb.status().message() << "\n";
      return 1;
    }
    rb_own = *std::move(rb);
  }
  const store::Reader& rb = rb_own ? *rb_own : *ra;
  run_a = PickRun(*ra, run_a, err);
  if (!run_a) return 1;
  run_b = PickRun(rb, run_b, err);
  if (!run_b) return 1;
  analysis::CompareOptions options;
  options.clock = clock.empty() ? "auto" : clock == "modeled" ? "modeled" : "device";
  auto c = analysis::CompareRuns(*ra, *run_a, rb, *run_b, options);
  if (!c.ok()) {
    err << "error: " << c.status().message() << "\n";
    return 1;
  }
  // The gate: B's median step on `clock` against A's (the comparison's own clock when not given),
  // named in JSON's "gate" as the clock it used.
  const bool clock_given = !clock.empty();
  if (!clock_given) clock = c->op_clock;
  const auto on_both = [&](const std::string& k) {
    const analysis::StepClockDelta* d = c->StepsOn(k);
    return d && d->a.n > 0 && d->b.n > 0;
  };
  // As the verdict compares: runs without steps on that clock (an imported CPU-only trace) are
  // gated on their wall time, said so; a simulated run's host clock times the simulator, never.
  std::string gate_note;
  if (gate && !clock_given && !on_both(clock) && on_both("host") && !c->a.simulated && !c->b.simulated) {
    const analysis::StepClockDelta* s = c->StepsOn(clock);
    gate_note = absl::StrCat("note: --fail-if-slower: ", !s || s->a.n == 0 ? "A" : "B", " has no steps on the ",
                             clock, " clock, so the gate is on the host clock (wall time), as the verdict compares\n");
    clock = "host";
  }
  if (format == "json") {
    nlohmann::json j = analysis::ComparisonToJson(*c);
    if (gate) j["gate"] = {{"clock", clock}, {"fail_if_slower_pct", *gate}};
    out << store::JsonText(j, 2) << "\n";
  } else if (format == "md") {
    out << analysis::RenderComparisonMarkdown(*c);
  } else if (format == "html") {
    out << analysis::RenderComparisonHtml(*c);
  } else {
    out << analysis::RenderComparisonText(*c);
  }
  if (!gate) return 0;
  // B did not finish (a hang, a failure, a killed process): whatever its
  // recorded steps' median, it is not a run that passes (a hung B passed at +0.00%).
  if (const std::string ended = analysis::RunEndedEarly(c->b); !ended.empty()) {
    err << "gate: B did not finish (" << ended << "): FAILED\n";
    return 3;
  }
  err << gate_note;
  // Two workloads' steps do not compare: the verdict gives none, and neither
  // does the gate (it failed mlp against cnn at +180%, after "no verdict").
  if (!c->different_workloads.empty()) {
    err << "error: --fail-if-slower: " << c->different_workloads
        << ", different workloads: their steps do not compare, so the gate cannot be checked\n";
    return 1;
  }
  // A simulated run's host clock times the simulator, not the program.
  const bool simulated_side = c->a.simulated || c->b.simulated;
  if (clock == "host" && simulated_side) {
    err << "error: --fail-if-slower: " << (c->a.simulated ? "A" : "B")
        << " is simulated, and its host clock times the simulator, not the program: there is no host step to gate"
        << (on_both("modeled") ? " (both have steps on the modeled clock: --clock modeled)" : "") << "\n";
    return 1;
  }
  const analysis::StepClockDelta* s = c->StepsOn(clock);
  if (!on_both(clock)) {
    err << "error: --fail-if-slower: " << (!s || s->a.n == 0 ? "A" : "B") << " has no steps on the " << clock
        << " clock, so the gate cannot be checked";
    for (const std::string other : {"modeled", "host"})
      if (other != clock && on_both(other) && !(other == "host" && simulated_side)) {
        err << " (both have steps on the " << other << " clock: --clock " << other << ")";
        break;
      }
    err << "\n";
    return 1;
  }
  const double pct = 100 * s->Relative();
  err << "gate: B's median " << clock << " step is " << absl::StrFormat("%+.2f%%", pct) << " against A's (limit +"
      << *gate << "%): " << (pct > *gate ? "FAILED" : "passed") << "\n";
  // The gate is a plain threshold; say when its trip is within what the runs' own steps vary.
  // --clock modeled is offered only where both runs have modeled steps (an imported trace has none).
  if (pct > *gate && s->delta.change == analysis::Change::kUnchanged)
    err << "note: that change is within the noise measured from the runs' own steps (±"
        << absl::StrFormat("%.1f%%", 100 * s->delta.threshold / s->a.median) << " on the " << clock
        << " clock): a rerun may pass"
        << (clock != "modeled" && on_both("modeled") ? "; --clock modeled is deterministic (docs/diff.md)" : "")
        << "\n";
  return pct > *gate ? 3 : 0;
}

}  // namespace shardscope::cli
