#!/bin/bash
# Does the host's time-taking move the cnn's step? Rounds of: the gap probe
# (bench/host_gaps_bench.cc, 1 s on every core), a real cnn run on 8 chips,
# the probe again. Per round: the probes' share of time in gaps, the run's
# device step (median, as --calibrate-from measures it), its chips' kernels
# per step and their wait at collectives per step.
#   bash bench/host_gaps.sh build [rounds]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-6}
unset OPENBLAS_CORETYPE
cmake --build "$BUILD" --target host_gaps_bench shardscope > /dev/null
CLI="$BUILD/shardscope"
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
flags=(--mesh 8x1 --topology 2x4 --batch 32 --quiet)
printf '%-8s %10s %10s %14s %12s %12s\n' utc gaps_pct gaps_after device_step_ms kernels_ms wait_ms
for i in $(seq 1 "$ROUNDS"); do
  before=$("$BUILD/bench/host_gaps_bench" 1 | awk '/^host_gaps_pct/ {print $2}')
  "$CLI" run cnn "${flags[@]}" --steps 10 --db "$DIR/r$i.db" > /dev/null
  after=$("$BUILD/bench/host_gaps_bench" 1 | awk '/^host_gaps_pct/ {print $2}')
  "$CLI" run cnn "${flags[@]}" --steps 2 --simulate --calibrate-from "$DIR/r$i.db" --db "$DIR/s$i.db" > /dev/null
  step=$("$CLI" query "$DIR/s$i.db" "SELECT round(recorded_step_ns / 1e6, 2) FROM sim_calibrations" | tail -1)
  read -r kern wait < <("$CLI" query "$DIR/r$i.db" "SELECT round(sum(CASE WHEN s.kind = 'compute' THEN s.dur_ns END) / 80e6, 2),
      round(sum(CASE WHEN s.kind = 'collective' THEN s.wait_ns END) / 80e6, 2)
      FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id
      WHERE t.clock = 'device'" | tail -1 | tr ',' ' ')
  printf '%-8s %10s %10s %14s %12s %12s\n' "$(date -u +%H:%M:%S)" "$before" "$after" "$step" "$kern" "$wait"
done
