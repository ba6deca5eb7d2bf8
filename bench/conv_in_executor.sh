#!/usr/bin/env bash
# Rounds of conv_in_executor_bench (see its header) each beside a real cnn
# run, with that run's own forward convolutions: three prices of one kernel
# in the same minute.   bash bench/conv_in_executor.sh [BUILD_DIR] [ROUNDS]
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
  run=$("$BUILD/shardscope" query "$DIR/c$i.db" "SELECT round(avg(mean_ns) / 1e3, 1) FROM kernel_stats
      WHERE opcode = 'stablehlo.convolution' AND shape = 'f32[4,16,32,32]' AND round(flops / 1e6, 1) = 18.1" | tail -1)
  echo "$(date -u +%H:%M:%S) $bench  cnn_run_forward_conv_us $run"
done
