#!/usr/bin/env bash
# Rounds of conv_in_executor_bench (see its header) each beside a real cnn
# run, with that run's own forward convolutions (the median after its first
# step): three prices of one kernel in the same minute.
#   bash bench/conv_in_executor.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-8}
unset OPENBLAS_CORETYPE SHARDSCOPE_CPU_PROFILE
cmake --build "$BUILD" --target conv_in_executor_bench shardscope > /dev/null
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
for i in $(seq 1 "$ROUNDS"); do
  bench=$("$BUILD/bench/conv_in_executor_bench" 1)
  "$BUILD/shardscope" run cnn --mesh 8x1 --topology 2x4 --batch 32 --steps 6 --quiet --db "$DIR/c$i.db" > /dev/null
  # The median over the steps after the first (whose kernels first-touch the
  # heap: up to 10 ms for this one), device tracks only.
  sel="FROM slices s JOIN kernel_stats k ON k.run_id = s.run_id AND k.graph_id = s.graph_id AND k.op_id = s.op_id
      WHERE k.opcode = 'stablehlo.convolution' AND k.shape = 'f32[4,16,32,32]' AND round(k.flops / 1e6, 1) = 18.1
        AND s.step > 0 AND s.track_id IN (SELECT track_id FROM tracks WHERE clock = 'device')"
  run=$("$BUILD/shardscope" query "$DIR/c$i.db" "SELECT round(s.dur_ns / 1e3, 1) $sel
      ORDER BY s.dur_ns LIMIT 1 OFFSET (SELECT COUNT(*) / 2 $sel)" | tail -1)
  echo "$(date -u +%H:%M:%S) $bench  cnn_run_forward_conv_us $run"
done
