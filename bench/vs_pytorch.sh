#!/usr/bin/env bash
# shardscope vs PyTorch (CPU) on the samples' training steps, side by side in
# one script: mlp (784-1024-1024-10, batch 64, SGD) and llama (2 layers,
# d 256, 4 heads, SwiGLU 1024, seq 128, batch 8, AdamW). Reports absolute
# steps/s of both, the ratio, and achieved FLOP/s by one fixed formula for
# both: 6*B*P for the mlp, 6*B*T*P + 12*L*B*T^2*d for llama (P: the
# matmul parameters, output head included). Needs Debian's python3-torch.
#
# These VMs' speed drifts by tens of percent within an hour, so the two run
# alternately, ROUNDS times (default 3), and the ratio reported is the median
# of the rounds' ratios; every round is printed.
#   bash bench/vs_pytorch.sh [BUILD_DIR] [STEPS]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-200}
ROUNDS=${ROUNDS:-3}
LSTEPS=${LLAMA_STEPS:-30}
HERE=$(dirname "$0")
# The machine notes' settings: OpenBLAS at full speed with 2 threads, and
# freed memory kept in the process.
unset OPENBLAS_CORETYPE
export OPENBLAS_NUM_THREADS=2 MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=536870912
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "PyTorch is missing: apt-get install python3-torch" >&2
  exit 1
fi
DB=$(mktemp -d)/bench.db

# Median steps/s of the newest run in $DB, from step $1 on (host clock).
median_sps() {
  "$BUILD/shardscope" query "$DB" \
    "SELECT 1e9 / wall_ns FROM steps WHERE run_id = (SELECT MAX(run_id) FROM runs) AND step >= $1
     ORDER BY wall_ns LIMIT 1 OFFSET (SELECT (COUNT(*) - 1) / 2 FROM steps
       WHERE run_id = (SELECT MAX(run_id) FROM runs) AND step >= $1)" | tail -1
}
median_of() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

MLP_FLOPS=$(( 6 * 64 * (784 * 1024 + 1024 * 1024 + 1024 * 10) ))
# P = per layer 4*d*d (attention) + 3*d*ffn (SwiGLU), plus the head d*256.
LLAMA_FLOPS=$(( 6 * 8 * 128 * (2 * (4 * 256 * 256 + 3 * 256 * 1024) + 256 * 256) + 12 * 2 * 8 * 128 * 128 * 256 ))
PT_VERSION=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')

# One data-parallel 2x1 run for reference (two chips sharing the two cores).
"$BUILD/shardscope" run mlp --db "$DB" --mesh 2x1 --steps "$STEPS" --change-step -1 --quiet >/dev/null
echo "shardscope mlp, mesh 2x1: $(printf '%.1f' "$(median_sps 10)") steps/s (median step, host clock; for reference)"

mlp_ratios=() llama_ratios=()
for round in $(seq 1 "$ROUNDS"); do
  "$BUILD/shardscope" run mlp --db "$DB" --mesh 1x1 --steps "$STEPS" --change-step -1 --quiet >/dev/null
  ss=$(median_sps 10)
  pt=$(/usr/bin/python3 "$HERE/pytorch_mlp.py" "$STEPS")
  "$BUILD/shardscope" run llama --db "$DB" --steps "$LSTEPS" --eval-every 0 --quiet >/dev/null
  lss=$(median_sps 3)
  lpt=$(/usr/bin/python3 "$HERE/pytorch_llama.py" "$LSTEPS")
  mlp_ratios+=("$(awk -v s="$ss" -v p="$pt" 'BEGIN { print s / p }')")
  llama_ratios+=("$(awk -v s="$lss" -v p="$lpt" 'BEGIN { print s / p }')")
  awk -v r="$round" -v s="$ss" -v p="$pt" -v f="$MLP_FLOPS" -v ls="$lss" -v lp="$lpt" -v lf="$LLAMA_FLOPS" 'BEGIN {
    printf "round %d: mlp %.1f vs %.1f steps/s (%.2fx, %.1f vs %.1f GFLOP/s); llama %.2f vs %.2f steps/s (%.2fx, %.1f vs %.1f GFLOP/s)\n",
      r, s, p, s / p, s * f / 1e9, p * f / 1e9, ls, lp, ls / lp, ls * lf / 1e9, lp * lf / 1e9 }'
done
echo "(shardscope vs PyTorch $PT_VERSION, CPU; llama: $(awk -v f="$LLAMA_FLOPS" 'BEGIN { printf "%.1f", f / 1e9 }') GFLOP per step)"
echo "ratio shardscope / PyTorch (mlp, mesh 1x1): $(printf '%.2f' "$(median_of "${mlp_ratios[@]}")")x  (median of $ROUNDS rounds)"
echo "ratio shardscope / PyTorch (llama): $(printf '%.2f' "$(median_of "${llama_ratios[@]}")")x  (median of $ROUNDS rounds)"
