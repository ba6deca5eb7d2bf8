#!/usr/bin/env bash
# How much does the `cpu` profile move between calibrations a minute apart?
# (docs/cost_model.md, "Passes kept across calibrations".) Runs
# `shardscope calibrate` N times in a row (after one --fresh, so that every
# calibration has earlier passes), saving the cache entry after each; then,
# for each calibration, models each sample's step on the 8 virtual chips
# twice: with the profile of that calibration's own three passes (rebuilt
# from the entry's newest passes) and with the entry itself (the rolling
# nine). One real run per sample is recorded first and every simulated run
# is calibrated from it, so the uncalibrated step is the model alone.
# Prints each calibration's modeled steps and, per sample and profile, the
# range over the mean. Needs python3 (the 3-pass rebuild).
#   bash bench/calibration_spread.sh [BUILD_DIR] [N]     (default: build 8)
set -euo pipefail
BUILD=${1:-build}
N=${2:-8}
source "$(dirname "$0")/accuracy_common.sh"
SAMPLES=(mlp cnn llama)
"$CLI" calibrate --fresh > /dev/null
CACHE=$("$CLI" calibrate --show | sed -n 's/.*cached at \([^:]*\.json\).*/\1/p; s/.*read from the cache \([^:]*\.json\).*/\1/p' | tail -1)
[ -f "$CACHE" ] || { echo "cannot find the cache entry ($CACHE)" >&2; exit 1; }
for s in "${SAMPLES[@]}"; do
  # shellcheck disable=SC2046
  set_flags "$s" 4
  "$CLI" run "$s" "${flags[@]}" --db "$DIR/$s.db" > /dev/null
done
for i in $(seq 1 "$N"); do
  "$CLI" calibrate > /dev/null
  cp "$CACHE" "$DIR/rolling$i.json"
  python3 - "$DIR/rolling$i.json" "$DIR/alone$i.json" <<'PY'
import json, statistics, sys
entry = json.load(open(sys.argv[1]))
own = entry["passes"][-3:]
out = {k: v for k, v in entry.items() if k not in ("passes", "rows")}
for key, value in own[-1].items():
    if key == "measured_at_unix_s":
        continue
    if isinstance(value, (int, float)):
        out[key] = statistics.median(p[key] for p in own)
    elif key == "collective_ns":
        out[key] = {kind: [statistics.median(p[key][kind][i] for p in own) for i in range(len(times))]
                    for kind, times in value.items()}
json.dump(out, open(sys.argv[2], "w"))
PY
done
printf '%-12s' calibration; for kind in own3 rolling9; do for s in "${SAMPLES[@]}"; do printf ' %14s' "$kind:$s"; done; done; echo
for i in $(seq 1 "$N"); do
  printf '%-12s' "$i"
  for kind in alone rolling; do
    for s in "${SAMPLES[@]}"; do
      rm -f "$DIR/sim.db"
      set_flags "$s" 4
      SHARDSCOPE_CPU_PROFILE="$DIR/$kind$i.json" "$CLI" run "$s" "${flags[@]}" --simulate \
        --calibrate-from "$DIR/$s.db" --db "$DIR/sim.db" > /dev/null
      printf ' %14.2f' "$("$CLI" query "$DIR/sim.db" "SELECT uncalibrated_step_ns / 1e6 FROM sim_calibrations" | tail -1)"
    done
  done
  echo
done | tee "$DIR/table"
awk 'NR > 0 { for (k = 2; k <= NF; ++k) { v[k, NR] = $k; sum[k] += $k; if (NR == 1 || $k < lo[k]) lo[k] = $k; if (NR == 1 || $k > hi[k]) hi[k] = $k } n = NR }
     END { printf "%-12s", "range/mean"; for (k = 2; k <= 7; ++k) printf " %13.1f%%", 100 * (hi[k] - lo[k]) / (sum[k] / n); print "" }' "$DIR/table"
