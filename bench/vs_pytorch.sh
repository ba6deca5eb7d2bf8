#!/usr/bin/env bash
# shardscope vs PyTorch (CPU) on the samples' training steps, side by side in
# one script: mlp (784-1024-1024-10, batch 64, SGD) and llama (2 layers,
# d 256, 4 heads, SwiGLU 1024, seq 128, batch 8, AdamW). Reports absolute
# steps/s of both, the ratio, and achieved FLOP/s by one fixed formula for
# both: 6*B*P for the mlp, 6*B*T*P + 12*L*B*T^2*d for llama (P: the
# matmul parameters, output head included). Needs Debian's python3-torch.
#   bash bench/vs_pytorch.sh [BUILD_DIR] [STEPS]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-200}
# The machine notes' settings: OpenBLAS at full speed with 2 threads, and
# freed memory kept in the process.
unset OPENBLAS_CORETYPE
export OPENBLAS_NUM_THREADS=2 MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=536870912
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "PyTorch is missing: apt-get install python3-torch" >&2
  exit 1
fi
DB=$(mktemp -d)/bench.db
best_ss=0
best_mesh=""
for mesh in 1x1 2x1; do
  "$BUILD/shardscope" run mlp --db "$DB" --mesh "$mesh" --steps "$STEPS" --change-step -1 --quiet >/dev/null
  sps=$("$BUILD/shardscope" query "$DB" \
    "SELECT 1e9 / wall_ns FROM steps WHERE run_id = (SELECT MAX(run_id) FROM runs) AND step >= 10
     ORDER BY wall_ns LIMIT 1 OFFSET (SELECT (COUNT(*) - 1) / 2 FROM steps
       WHERE run_id = (SELECT MAX(run_id) FROM runs) AND step >= 10)" | tail -1)
  echo "shardscope mlp, mesh $mesh: $(printf '%.1f' "$sps") steps/s (median step, host clock)"
  if awk "BEGIN{exit !($sps > $best_ss)}"; then best_ss=$sps; best_mesh=$mesh; fi
done
pt=$(/usr/bin/python3 "$(dirname "$0")/pytorch_mlp.py" "$STEPS")
echo "PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') mlp: $pt steps/s"
flops=$(( 6 * 64 * (784 * 1024 + 1024 * 1024 + 1024 * 10) ))
awk -v s="$best_ss" -v p="$pt" -v f="$flops" -v m="$best_mesh" 'BEGIN {
  printf "ratio shardscope (mesh %s) / PyTorch: %.2fx   (%.1f vs %.1f GFLOP/s by 6*B*P)\n", m, s / p, s * f / 1e9, p * f / 1e9 }'

# llama: median step of a run without evaluation.
LSTEPS=${LLAMA_STEPS:-30}
"$BUILD/shardscope" run llama --db "$DB" --steps "$LSTEPS" --eval-every 0 --quiet >/dev/null
lss=$("$BUILD/shardscope" query "$DB" \
  "SELECT 1e9 / wall_ns FROM steps WHERE run_id = (SELECT MAX(run_id) FROM runs) AND step >= 3
   ORDER BY wall_ns LIMIT 1 OFFSET (SELECT (COUNT(*) - 1) / 2 FROM steps
     WHERE run_id = (SELECT MAX(run_id) FROM runs) AND step >= 3)" | tail -1)
lpt=$(/usr/bin/python3 "$(dirname "$0")/pytorch_llama.py" "$LSTEPS")
# P = per layer 4*d*d (attention) + 3*d*ffn (SwiGLU), plus the head d*256.
lflops=$(( 6 * 8 * 128 * (2 * (4 * 256 * 256 + 3 * 256 * 1024) + 256 * 256) + 12 * 2 * 8 * 128 * 128 * 256 ))
echo "shardscope llama: $(printf '%.2f' "$lss") steps/s; PyTorch llama: $lpt steps/s"
awk -v s="$lss" -v p="$lpt" -v f="$lflops" 'BEGIN {
  printf "ratio shardscope / PyTorch (llama): %.2fx   (%.1f vs %.1f GFLOP/s; %.1f GFLOP per step)\n", s / p, s * f / 1e9, p * f / 1e9, f / 1e9 }'
