#!/bin/sh
# The desktop app's timeline on a large run (issue 14, "Level of detail"):
# writes a synthetic run (app_timeline_data: a llama-like step replayed with
# jitter over 64 chips, 10M slices by default) through the real writer, then
# opens it in build/shardscope-ui under Xvfb with the software renderer and
# reports what the app measures of itself:
#   --bench: time to the first frame (the window with progress) and to the
#            first frame with the whole-run level of detail drawn, resident
#            memory, and frame times (empty window, whole run, panning,
#            zooming every frame: p50/p95 in the same process), with where a
#            frame's time goes (building it, the renderer finishing it) and
#            the pixels it shades;
#   --exit-after: CPU used while nothing changes, from the first finished
#            frame to the exit.
#   bench/app_timeline_bench.sh [SLICES] [DB]
# RUNS=N repeats the --bench run N times (the machine's load moves the
# figures; report the range). UI=path compares another build's binary.
set -eu
SLICES=${1:-10000000}
DB=${2:-/tmp/app_timeline_bench.db}
BUILD=${BUILD:-build}
RUNS=${RUNS:-1}
UI=${UI:-$BUILD/shardscope-ui}
XVFB='xvfb-run -a -s "-screen 0 1600x900x24"'
if [ ! -s "$DB" ] || [ "${REWRITE:-0}" = 1 ]; then
  "$BUILD/bench/app_timeline_data" --out "$DB" --slices "$SLICES"
fi
ls -l "$DB"
# A cold open each time: the kernel's page cache is what it is; say so.
i=0
while [ "$i" -lt "$RUNS" ]; do
  eval "$XVFB" "$UI" "$DB" --bench
  i=$((i + 1))
done
eval "$XVFB" "$UI" "$DB" --exit-after 14 | grep '^idle'
