// shardscope-ui: the desktop workstation. `shardscope-ui PATH [--run N]`
// opens a stored run; `--screenshot FILE.png` and `--dump-layout FILE.json`
// render it once loaded and exit.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "ui/app/app.h"
#include "ui/app/fleet_model.h"
#include "ui/app/timeline_nav.h"
#include "ui/app/ui_state.h"
#include "ui/app/workstation.h"

namespace {

constexpr char kUsage[] =
    "usage: shardscope-ui PATH [options]\n"
    "\n"
    "Opens a shardscope database in the desktop workstation: a timeline per chip\n"
    "(device clock) and per host thread (host clock), where each tensor's shards\n"
    "live, and the run's compilations.\n"
    "\n"
    "options:\n"
    "  --run N             show run N (default: the latest run in the file)\n"
    "  --view NAME         start on a view: overview, timeline (default), sharding,\n"
    "                      recompilations, graph, ops, memory, metrics, compare or fleet\n"
    "  --compare OTHER.db  the Compare view compares this run with OTHER.db's latest run\n"
    "  --compare-run N     ... with its run N (without --compare: run N of this file)\n"
    "  --width W           window width in pixels (default 1600)\n"
    "  --height H          window height in pixels (default 900)\n"
    "  --follow            follow the newest run as its steps land (the store is\n"
    "                      read once a second; a run being written shows whole steps)\n"
    "  --screenshot FILE   render the window once the view has loaded (the timeline:\n"
    "                      its whole-run level of detail), write it as a PNG, print\n"
    "                      each timeline lane's rectangle, and exit\n"
    "  --dump-layout FILE  write what that frame draws as JSON (items with the stored\n"
    "                      row each shows; docs/app.md) and exit; with or without\n"
    "                      --screenshot\n"
    "  --select SLICE_ID   select that slice at open and show its step (a collective:\n"
    "                      its flow across the chips)\n"
    "  --range [CLOCK:]T0:T1  select that time range of CLOCK (device, modeled or\n"
    "                      host; default device) at open and show its table: per\n"
    "                      name the count, total, mean, p50 and p90 of the slices\n"
    "                      starting in it; times as 1.5ms, 200us, 2s or ns\n"
    "  --search NAME       find slices whose name contains NAME in the whole run and\n"
    "                      select the first (in the app: Ctrl+F, Enter/F3 next)\n"
    "  --compile ID        pick compilation ID in Recompilations (opening it): its\n"
    "                      graph beside the one it was compared with\n"
    "  --graph G[:OP]      open the Graph view on graph G (after partitioning) around\n"
    "                      op OP (default: its costliest kernel)\n"
    "  --step N            put the playhead at step N (Fleet shows it, the timeline\n"
    "                      shows it, Metrics marks it; in the app: Space plays,\n"
    "                      , and . step)\n"
    "  --metric NAME       the Fleet view's heatmap: step_time, compute_share,\n"
    "                      collective_wait, arrival_lateness (default), hbm_peak or mfu\n"
    "  --chip D            the Sharding view lists what chip D holds of every tensor\n"
    "  --mouse X,Y         with --screenshot: put the pointer there (shows a tooltip)\n"
    "  --exit-after SEC    quit after SEC seconds (measuring idle CPU)\n"
    "  --bench             print open time, memory and frame times, and exit\n"
    "  --help              this text\n"
    "\n"
    "Needs a display; headless, run under `xvfb-run -a` or use `shardscope report PATH`.\n";

// The mistake and where to read more: the whole text would bury the one
// line that matters under the display advice at its end.
int UsageError(const std::string& message) {
  std::fprintf(stderr, "shardscope-ui: %s\nusage: shardscope-ui PATH [options]  (shardscope-ui --help lists them)\n",
               message.c_str());
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  shardscope::app::AppOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--follow") {
      options.follow = true;
      continue;
    }
    if (arg == "--bench") {
      options.bench = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!options.db_path.empty()) return UsageError("more than one database given: " + arg);
      options.db_path = arg;
      continue;
    }
    // Accept both `--flag value` and `--flag=value`.
    std::string value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return UsageError(arg + " needs a value");
    }
    if (arg == "--run") {
      int64_t run = 0;
      if (!absl::SimpleAtoi(value, &run)) return UsageError("--run wants a run id, got '" + value + "'");
      options.run_id = run;
    } else if (arg == "--width" || arg == "--height") {
      int px = 0;
      if (!absl::SimpleAtoi(value, &px) || px < 200 || px > 16384) {
        return UsageError(arg + " wants pixels between 200 and 16384, got '" + value + "'");
      }
      (arg == "--width" ? options.width : options.height) = px;
    } else if (arg == "--compare") {
      options.compare_path = value;
    } else if (arg == "--compare-run") {
      int64_t run = 0;
      if (!absl::SimpleAtoi(value, &run)) return UsageError("--compare-run wants a run id, got '" + value + "'");
      options.compare_run = run;
    } else if (arg == "--screenshot") {
      options.screenshot_path = value;
    } else if (arg == "--dump-layout") {
      options.dump_layout_path = value;
    } else if (arg == "--select") {
      int64_t id = 0;
      if (!absl::SimpleAtoi(value, &id)) return UsageError("--select wants a slice id, got '" + value + "'");
      options.select_slice = id;
    } else if (arg == "--range") {
      if (auto range = shardscope::app::ParseRangeArg(value); !range.ok()) {
        return UsageError(std::string(range.status().message()));
      }
      options.range = value;
    } else if (arg == "--compile") {
      int64_t id = 0;
      if (!absl::SimpleAtoi(value, &id)) return UsageError("--compile wants a compile id, got '" + value + "'");
      options.compile_id = id;
    } else if (arg == "--graph") {
      int64_t graph = 0, op = -1;
      const size_t colon = value.find(':');
      if (!absl::SimpleAtoi(value.substr(0, colon), &graph) ||
          (colon != std::string::npos && !absl::SimpleAtoi(value.substr(colon + 1), &op))) {
        return UsageError("--graph wants GRAPH_ID or GRAPH_ID:OP_ID, got '" + value + "'");
      }
      options.graph_op = std::pair{graph, op};
    } else if (arg == "--search") {
      if (value.empty()) return UsageError("--search wants a name (or part of one)");
      options.search = value;
    } else if (arg == "--exit-after") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || seconds <= 0) {
        return UsageError("--exit-after wants seconds, got '" + value + "'");
      }
      options.exit_after_s = seconds;
    } else if (arg == "--view") {
      auto view = shardscope::app::ViewFromName(value);
      if (!view) {
        std::string names;
        for (const auto& v : shardscope::app::kViews) names += std::string(names.empty() ? "" : ", ") + v.name;
        return UsageError("--view is one of " + names + "; got '" + value + "'");
      }
      if (!shardscope::app::Workstation::Builds(*view)) {
        return UsageError("--view " + value + ": that view is not built yet in this version of shardscope-ui");
      }
      options.view = value;
    } else if (arg == "--step") {
      int step = 0;
      if (!absl::SimpleAtoi(value, &step) || step < 0) return UsageError("--step wants a step number, got '" + value + "'");
      options.step = step;
    } else if (arg == "--metric") {
      if (!shardscope::app::FleetMetricFromName(value)) {
        std::string names;
        for (int i = 0; i < shardscope::app::kNumFleetMetrics; ++i)
          names += std::string(i ? ", " : "") +
                   shardscope::app::FleetMetricName(static_cast<shardscope::app::FleetMetric>(i));
        return UsageError("--metric is one of " + names + "; got '" + value + "'");
      }
      options.fleet_metric = value;
    } else if (arg == "--chip") {
      int64_t chip = 0;
      if (!absl::SimpleAtoi(value, &chip) || chip < 0) return UsageError("--chip wants a device id, got '" + value + "'");
      options.chip = chip;
    } else if (arg == "--mouse") {
      float x = 0, y = 0;
      if (std::sscanf(value.c_str(), "%f,%f", &x, &y) != 2) {
        return UsageError("--mouse wants X,Y, got '" + value + "'");
      }
      options.mouse = std::pair{x, y};
    } else {
      return UsageError("unknown option " + arg);
    }
  }
  if (options.db_path.empty()) return UsageError("no database given");
  return shardscope::app::RunApp(options);
}
