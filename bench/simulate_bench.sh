#!/usr/bin/env bash
# Simulated pods (docs/simulate.md): `shardscope run llama --simulate` for
# STEPS steps (default 20) with --fault jitter:0.05 (so every chip's kernels
# differ) on 64, 512 and 4096 chips (tori 4x4x4, 8x8x8, 16x16x16), each a
# data-parallel pod with one sequence per chip (or the TOPOLOGIES named,
# gpu:NxM clusters too). Reports, per size: the wall time of the whole
# command (tracing, compiling and partitioning the real step for every chip,
# scheduling, storing), chip-steps per second over it, peak RSS
# (/usr/bin/time), and the database's bytes per chip-step.
# Goal (issue 15): 4096 chips x 20 steps in at most 60 s and 4 GiB.
#   bash bench/simulate_bench.sh [BUILD_DIR] [STEPS] [TOPOLOGIES...]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-20}
shift $(( $# > 2 ? 2 : $# ))
TOPOLOGIES=("$@")
[ ${#TOPOLOGIES[@]} -eq 0 ] && TOPOLOGIES=(4x4x4 8x8x8 16x16x16)
unset OPENBLAS_CORETYPE
CLI="$BUILD/shardscope"
[ -x "$CLI" ] || { echo "no $CLI: build the shardscope target first" >&2; exit 1; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
printf '%-10s %6s %6s %9s %14s %12s %14s %s\n' topology chips steps wall_s chip_steps/s peak_rss_MiB bytes/chip-step modeled_step
for t in "${TOPOLOGIES[@]}"; do
  chips=1
  IFS=x read -ra dims <<< "${t#gpu:}"  # gpu:NxM: N hosts of M chips
  for d in "${dims[@]}"; do chips=$((chips * d)); done
  db="$DIR/sim_${t//:/_}.db"
  start=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$DIR/rss" "$CLI" run llama --simulate --topology "$t" --steps "$STEPS" \
    --fault jitter:0.05 --quiet --db "$db" > "$DIR/out" 2>&1 || { cat "$DIR/out" >&2; exit 1; }
  end=$(date +%s.%N)
  wall=$(echo "$end - $start" | bc -l)
  rss_kb=$(tail -1 "$DIR/rss")
  bytes=$(stat -c %s "$db")
  modeled=$(grep -o 'modeled step ([^)]*) median [0-9.]* ms' "$DIR/out" | grep -o '[0-9.]* ms$' || echo "?")
  printf '%-10s %6d %6d %9.2f %14.0f %12.0f %14.0f %s\n' "$t" "$chips" "$STEPS" "$wall" \
    "$(echo "$chips * $STEPS / $wall" | bc -l)" "$(echo "$rss_kb / 1024" | bc -l)" \
    "$(echo "$bytes / ($chips * $STEPS)" | bc -l)" "$modeled"
done
