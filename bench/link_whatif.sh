#!/usr/bin/env bash
# What `fleet`'s what-if says fixing slow links (and chips) saves, against
# what the faults cost: each case runs the simulated pod twice, without and
# with the faults. Two yardsticks of the cost, per step over the steps fleet
# analyses (all but step 0): the run's modeled time from the end of step 0 to
# the end of the last step (what a user waits; the what-if's measure), and the
# mean step span. They differ where a chip starts a step before a slow chip
# ends the last one: spans then overlap and their sum exceeds the run's time
# (docs/fleet.md, "what-if"). Each line: the case, the clean and faulty time
# per step, both costs, and the flagged suspects' savings summed (each counted
# beyond those ranked above it).
#   bash bench/link_whatif.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
CLI="$BUILD/shardscope"
[ -x "$CLI" ] || { echo "no $CLI: build the shardscope target first" >&2; exit 1; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
CASES=(
  "mlp|--profile h100 --topology gpu:4x8|--fault link:3-11:0.5"
  "mlp|--profile h100 --topology gpu:4x8|--fault link:0-1:0.5"
  "mlp|--profile tpu-v4 --topology 4x4|--fault link:1-2:0.5"
  "mlp|--profile tpu-v4 --topology 4x4|--fault link:0-4:0.5"
  "mlp|--profile tpu-v4 --topology 4x4|--fault link:0-1:0.5 --fault link:10-14:0.5"
  "mlp|--profile h100 --topology gpu:2x8|--fault link:0-8:0.5 --fault link:0-1:0.3"
  "llama|--profile tpu-v4 --topology 4x4x4|--fault link:0-1:0.5"
  "llama|--profile tpu-v4 --topology 4x4x4|--fault link:0-16:0.3 --fault link:0-1:0.5 --fault slow-chip:7:0.8"
  "llama|--profile h100 --topology gpu:2x8|--fault link:0-8:0.5"
  "llama|--profile tpu-v4 --topology 4x4x2 --mesh 16x2 --sharding tp|--fault link:0-1:0.3"
  "llama|--profile h100 --topology gpu:2x8 --mesh 2x8 --sharding tp|--fault link:0-8:0.3"
  "mlp|--profile h100 --topology gpu:4x4|--fault link:1-2:0.2"
  "llama|--profile tpu-v4 --topology 4x4|--fault slow-chip:5:0.6"
  "llama|--profile tpu-v4 --topology 4x4x2 --mesh 16x2 --sharding tp|--fault slow-chip:9:0.8"
)
printf '%-82s %11s %11s %10s %10s %10s\n' case clean_us faulty_us cost_us span_cost saved_us
for c in "${CASES[@]}"; do
  IFS='|' read -r sample where faults <<< "$c"
  # shellcheck disable=SC2086
  "$CLI" run "$sample" --simulate $where --steps 8 --quiet --db "$DIR/clean.db" > /dev/null
  # shellcheck disable=SC2086
  "$CLI" run "$sample" --simulate $where $faults --steps 8 --quiet --db "$DIR/slow.db" > /dev/null 2>&1
  "$CLI" fleet "$DIR/clean.db" --format json > "$DIR/clean.json"
  "$CLI" fleet "$DIR/slow.db" --format json > "$DIR/slow.json"
  python3 - "$DIR/clean.db" "$DIR/slow.db" "$DIR/slow.json" "$sample $where $faults" <<'PY'
import json, sqlite3, sys
def per_step(db):
    c = sqlite3.connect(db)
    span = c.execute("SELECT AVG(end_ns - start_ns) FROM step_bounds WHERE clock = 'modeled' AND step >= 1").fetchone()[0]
    first, last, n = c.execute("SELECT MIN(CASE WHEN step = 0 THEN end_ns END), MAX(end_ns), MAX(step) "
                               "FROM step_bounds WHERE clock = 'modeled'").fetchone()
    return (last - first) / n, span
(clean, clean_span), (slow, slow_span) = per_step(sys.argv[1]), per_step(sys.argv[2])
saved = sum(s.get("saved_ns_per_step", 0) for s in json.load(open(sys.argv[3]))["suspects"] if s["flagged"])
print(f"{sys.argv[4]:82s} {clean/1e3:11.2f} {slow/1e3:11.2f} {(slow-clean)/1e3:10.2f} "
      f"{(slow_span-clean_span)/1e3:10.2f} {saved/1e3:10.2f}")
PY
  rm -f "$DIR"/*.db
done
