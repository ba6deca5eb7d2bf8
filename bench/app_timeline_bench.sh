#!/bin/sh
# The desktop app's timeline on a large run (issue 14, "Level of detail"):
# writes a synthetic run (app_timeline_data: a llama-like step replayed with
# jitter over 64 chips, 10M slices by default) through the real writer, then
# opens it in build/shardscope-ui under Xvfb with the software renderer and
# reports what the app measures of itself:
#   --bench: time to the first frame (the window with progress) and to the
#            first frame with the whole-run level of detail drawn, resident
#            memory, and frame times (empty window, whole run, panning: p50/p95
#            in the same process);
#   --exit-after: CPU used while nothing changes, from the first finished
#            frame to the exit.
#   bench/app_timeline_bench.sh [SLICES] [DB]
set -eu
SLICES=${1:-10000000}
DB=${2:-/tmp/app_timeline_bench.db}
BUILD=${BUILD:-build}
XVFB='xvfb-run -a -s "-screen 0 1600x900x24"'
if [ ! -s "$DB" ] || [ "${REWRITE:-0}" = 1 ]; then
  "$BUILD/bench/app_timeline_data" --out "$DB" --slices "$SLICES"
fi
ls -l "$DB"
# A cold open each time: the kernel's page cache is what it is; say so.
eval "$XVFB" "$BUILD/shardscope-ui" "$DB" --bench
eval "$XVFB" "$BUILD/shardscope-ui" "$DB" --exit-after 14 | grep '^idle'
