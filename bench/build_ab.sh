#!/bin/bash
# Two builds side by side, interleaved: each sample's device step (the
# median step as --calibrate-from measures it), its kernels per chip-step and
# the mean time of its kernels under 4 KiB, run by run, A then B each round.
#   bash bench/build_ab.sh OLD_BUILD NEW_BUILD [rounds]   (default 3)
# Build the old one from a worktree: git worktree add /tmp/old REV &&
# cmake -S /tmp/old -B /tmp/old/build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
# cmake --build /tmp/old/build --target shardscope
set -euo pipefail
A=${1:?old build directory}
B=${2:?new build directory}
ROUNDS=${3:-3}
unset OPENBLAS_CORETYPE
for b in "$A" "$B"; do [ -x "$b/shardscope" ] || { echo "no $b/shardscope" >&2; exit 1; }; done
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
declare -A BATCH=([mlp]=64 [cnn]=32 [llama]=8) STEPS=([mlp]=20 [cnn]=10 [llama]=10)
printf '%-5s %-6s %-4s %14s %22s %16s\n' round sample side device_step_ms kernels_ms_per_chipstep small_kernel_us
for r in $(seq 1 "$ROUNDS"); do
  for s in mlp cnn llama; do
    for side in A B; do
      bin="$A/shardscope"; [ "$side" = B ] && bin="$B/shardscope"
      extra=(); [ "$s" = mlp ] && extra=(--change-step -1)
      rm -f "$DIR/r.db" "$DIR/s.db"
      flags=(--mesh 8x1 --topology 2x4 --batch "${BATCH[$s]}" "${extra[@]}" --quiet)
      "$bin" run "$s" "${flags[@]}" --steps "${STEPS[$s]}" --db "$DIR/r.db" > /dev/null
      # Both sides' steps measured by the same (new) reader.
      "$B/shardscope" run "$s" "${flags[@]}" --steps 2 --simulate --calibrate-from "$DIR/r.db" --db "$DIR/s.db" > /dev/null
      step=$("$B/shardscope" query "$DIR/s.db" "SELECT round(recorded_step_ns / 1e6, 2) FROM sim_calibrations" | tail -1)
      kern=$("$B/shardscope" query "$DIR/r.db" "SELECT round(sum(total_ns) / 8.0 / ${STEPS[$s]} / 1e6, 2) FROM kernel_stats" | tail -1)
      small=$("$B/shardscope" query "$DIR/r.db" \
        "SELECT round(sum(total_ns) * 1.0 / sum(count) / 1e3, 2) FROM kernel_stats WHERE count > 0 AND bytes < 4096" | tail -1)
      printf '%-5s %-6s %-4s %14s %22s %16s\n' "$r" "$s" "$side" "$step" "$kern" "$small"
    done
  done
done
