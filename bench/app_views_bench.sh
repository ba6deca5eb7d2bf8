#!/bin/sh
# Every view of the desktop app on a 10M-slice run that has IR (issue 16,
# "every view stays within the timeline's frame budget"). The 10M-slice run
# of bench/app_timeline_bench.sh (app_timeline_data: synthetic, and it says so
# in runs.sample) has timelines but no compiled programs, so this script
# records a real run of the stack (`shardscope run llama`, 4 chips), and
# copies its programs into the big file: graphs, ops, memory plans, peak
# buffers and liveness curves, fusion decisions, compile passes, tensors,
# shard placements and sharding decisions. Its largest program takes graph
# id 1, the id the synthetic run's program launches and compilation carry, so
# the Memory, Graph and Recompilations views show a real program launched
# 1,024 times; the others keep their own ids. A capture note in the file says
# what was copied from where.
#
# Then each view is opened under Xvfb with --bench (its frames once its model
# is built, against the empty window in the same process) and a line per
# view is printed: first finished frame, frame p50/p95, the empty window's
# p50/p95, their p95 ratio (the budget: 2x) and the vertices drawn.
#
#   bench/app_views_bench.sh [DB]        (default /tmp/app_views_bench.db)
# VIEWS="memory graph" limits the views; UI=path runs another build's binary.
set -eu
DB=${1:-/tmp/app_views_bench.db}
BUILD=${BUILD:-build}
UI=${UI:-$BUILD/shardscope-ui}
VIEWS=${VIEWS:-"timeline overview sharding recompilations graph ops memory metrics fleet"}
XVFB='xvfb-run -a -s "-screen 0 1600x900x24"'
unset OPENBLAS_CORETYPE

if [ ! -s "$DB" ] || [ "${REWRITE:-0}" = 1 ]; then
  rm -f "$DB" "$DB-wal" "$DB-shm" "$DB.tmp"
  if [ -n "${BASE:-}" ]; then
    cp "$BASE" "$DB.tmp"  # an app_timeline_bench.sh file already written
  else
    "$BUILD/bench/app_timeline_data" --out "$DB.tmp" --slices "${SLICES:-10000000}"
  fi
  REAL="$DB.real"
  rm -f "$REAL" "$REAL-wal" "$REAL-shm"
  "$BUILD/shardscope" run llama --mesh 2x2 --steps 2 --db "$REAL" --quiet
  # The real run's largest program becomes graph 1.
  BIG=$(sqlite3 "$REAL" "SELECT graph_id FROM graphs WHERE run_id = 1 ORDER BY op_count DESC, graph_id LIMIT 1")
  TARGET=$(sqlite3 "$DB.tmp" "SELECT max(run_id) FROM runs")
  if [ "$BIG" != 1 ] && [ "$(sqlite3 "$REAL" "SELECT count(*) FROM graphs WHERE graph_id = 1")" != 0 ]; then
    echo "app_views_bench: $REAL has a graph 1 besides its largest ($BIG); graph 1 must be free" >&2
    exit 1
  fi
  # A file written before memory_curves existed gets the table (as a writer opening it would).
  SQL="$(sed -n '/CREATE TABLE IF NOT EXISTS memory_curves/,/^);/p' store/schema.sql) ATTACH '$REAL' AS r;"
  # (Placements and decisions as stored since schema version 4: spans, texts, rows.)
  for T in graphs ops memory_plans peak_buffers memory_curves fusion_decisions compile_passes tensors \
           shard_placement_spans sharding_texts sharding_decision_rows; do
    COLS=$(sqlite3 "$REAL" "SELECT group_concat(name, ',') FROM pragma_table_info('$T')")
    [ -n "$COLS" ] || continue
    EXPRS=$(sqlite3 "$REAL" "SELECT group_concat(CASE name WHEN 'run_id' THEN '$TARGET'
      WHEN 'graph_id' THEN 'CASE graph_id WHEN $BIG THEN 1 ELSE graph_id END' ELSE name END, ',')
      FROM pragma_table_info('$T')")
    SQL="$SQL INSERT OR REPLACE INTO main.$T ($COLS) SELECT $EXPRS FROM r.$T WHERE run_id = 1;"
  done
  SQL="$SQL UPDATE main.graphs SET call_site = (SELECT call_site FROM main.compilations WHERE run_id = $TARGET
    AND graph_id = 1 LIMIT 1) WHERE run_id = $TARGET AND graph_id = 1;"
  NOTE="compiled programs copied from a real llama run on 2x2 chips (bench/app_views_bench.sh): its graph $BIG is graph 1"
  SQL="$SQL UPDATE main.runs SET capture_note = coalesce(capture_note || '; ', '') || '$NOTE' WHERE run_id = $TARGET;"
  sqlite3 "$DB.tmp" "$SQL"
  mv "$DB.tmp" "$DB"
  rm -f "$DB.tmp-wal" "$DB.tmp-shm"
  echo "copied the programs of $REAL (llama, 2x2, its graph $BIG as graph 1) into run $TARGET of $DB"
fi
ls -l "$DB"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-15s %12s %18s %18s %9s %9s\n' view complete_ms "frame p50/p95" "empty p50/p95" "p95 ratio" vertices
for V in $VIEWS; do
  OUT=$(eval "$XVFB" "$UI" "$DB" --view "$V" --bench 2>&1) || { echo "$V: failed"; echo "$OUT" | tail -3; continue; }
  echo "$OUT" | awk -v v="$V" '
    /^bench first_frame_ms/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); m[kv[1]] = kv[2] } }
    /^bench frame_ms empty_p50/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); m[kv[1]] = kv[2] } }
    END {
      ratio = m["empty_p95"] > 0 ? m["whole_run_p95"] / m["empty_p95"] : 0
      printf "%-15s %12s %18s %18s %8.2fx %9s\n", v, m["complete_ms"], m["whole_run_p50"] "/" m["whole_run_p95"],
             m["empty_p50"] "/" m["empty_p95"], ratio, m["vertices"]
    }'
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
