# Sourced (after BUILD is set) by bench/sim_accuracy.sh, figure_ab.sh and
# calibration_spread.sh: the same machine settings, CLI, scratch directory
# and per-sample runs, so that their figures compare. The runs are on the 8
# virtual chips this machine computes for real (mesh 8x1, topology 2x4).
unset OPENBLAS_CORETYPE SHARDSCOPE_CPU_PROFILE
CLI="$BUILD/shardscope"
[ -x "$CLI" ] || { echo "no $CLI: build the shardscope target first" >&2; exit 1; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
declare -A BATCH=([mlp]=64 [cnn]=32 [llama]=8)
declare -A STEPS=([mlp]=20 [cnn]=10 [llama]=10)
# Sets `flags` to SAMPLE's run flags, STEPS[SAMPLE] steps unless a second
# argument gives them (mlp keeps its batch: a run of one program).
set_flags() {
  [ -n "${BATCH[$1]:-}" ] || { echo "unknown sample '$1' (mlp, cnn, llama)" >&2; exit 2; }
  flags=(--mesh 8x1 --topology 2x4 --batch "${BATCH[$1]}" --steps "${2:-${STEPS[$1]}}" --quiet)
  if [ "$1" = mlp ]; then flags+=(--change-step -1); fi
}
