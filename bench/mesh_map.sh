#!/usr/bin/env bash
# Mesh axes onto the topology (docs/simulate.md "Mesh axes onto the topology"):
# the modeled step of simulated runs, each case under every map given, side by
# side. The modeled clock is deterministic: the figures do not depend on load.
#   bash bench/mesh_map.sh [BUILD_DIR] [STEPS]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-3}
unset OPENBLAS_CORETYPE
CLI="${CLI:-$BUILD/shardscope}"
[ -x "$CLI" ] || { echo "no $CLI: build the shardscope target first" >&2; exit 1; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
# sample | flags | maps (";"-separated; "--mesh-map X" or "--dcn-mesh X")
CASES=(
  "llama|--sharding tp --topology 4x4x4 --mesh 16x4 --profile tpu-v4|--mesh-map row-major;--mesh-map auto;--mesh-map model=x"
  "llama|--sharding fsdp_tp --topology 4x4x4 --mesh 16x4 --profile tpu-v4|--mesh-map row-major;--mesh-map auto"
  "llama|--sharding tp --topology 4x4x4 --mesh 8x8 --profile tpu-v4|--mesh-map row-major;--mesh-map auto"
  "llama|--sharding fsdp_tp --topology 4x4x4 --mesh 8x8 --profile tpu-v4|--mesh-map row-major;--mesh-map auto"
  "llama|--sharding tp --topology gpu:4x8 --mesh 4x8 --profile h100|--mesh-map row-major;--mesh-map auto;--dcn-mesh 1x4"
  "llama|--sharding fsdp_tp --topology gpu:4x8 --mesh 4x8 --profile h100|--mesh-map row-major;--mesh-map auto;--dcn-mesh 1x4"
  "mlp|--topology gpu:4x8 --mesh 8x4 --profile h100|--mesh-map row-major;--mesh-map auto"
)
printf '%-6s %-62s %-22s %s\n' sample case map modeled_step
for c in "${CASES[@]}"; do
  IFS='|' read -r sample flags maps <<< "$c"
  IFS=';' read -ra each <<< "$maps"
  for m in "${each[@]}"; do
    db="$DIR/run.db"
    rm -f "$db"*
    # shellcheck disable=SC2086
    "$CLI" run "$sample" --simulate $flags $m --steps "$STEPS" --db "$db" > "$DIR/out" 2>&1 || { cat "$DIR/out" >&2; exit 1; }
    modeled=$(grep -o 'modeled step ([^)]*) median [0-9.]* ms' "$DIR/out" | grep -o '[0-9.]* ms$' || echo "?")
    printf '%-6s %-62s %-22s %s\n' "$sample" "$flags" "$m" "$modeled"
    grep -o 'mesh axes on .*' "$DIR/out" | sed 's/^/         /'
    grep -o 'ranked by .*' "$DIR/out" | sed 's/^/           /' || true
  done
done
