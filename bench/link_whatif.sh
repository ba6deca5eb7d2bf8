#!/usr/bin/env bash
# What `fleet`'s what-if says fixing slow links saves, against what the faults
# cost: each case runs the simulated pod twice, without and with the faults,
# and compares the mean modeled step over the steps fleet analyses (all but
# step 0), as the what-if is such a mean (docs/fleet.md, "what-if"). Each
# line: the case, the two mean steps, the cost, and the flagged suspects'
# savings summed (each counted beyond those ranked above it).
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
)
printf '%-82s %11s %11s %10s %10s\n' case clean_us faulty_us cost_us saved_us
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
def mean_step(db):
    q = "SELECT AVG(end_ns - start_ns) FROM step_bounds WHERE clock = 'modeled' AND step >= 1"
    return sqlite3.connect(db).execute(q).fetchone()[0]
clean, slow = mean_step(sys.argv[1]), mean_step(sys.argv[2])
saved = sum(s.get("saved_ns_per_step", 0) for s in json.load(open(sys.argv[3]))["suspects"] if s["flagged"])
print(f"{sys.argv[4]:82s} {clean/1e3:11.2f} {slow/1e3:11.2f} {(slow-clean)/1e3:10.2f} {saved/1e3:10.2f}")
PY
  rm -f "$DIR"/*.db
done
