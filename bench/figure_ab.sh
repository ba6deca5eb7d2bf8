#!/usr/bin/env bash
# Does a calibration figure make the model better? A/B on the same real runs
# (docs/simulate.md). Per round: `shardscope calibrate` (as a user would, the
# passes kept across calibrations), then one real run of SAMPLE on the 8
# virtual chips, then two simulated runs of it calibrated from it: profile B
# is the calibration as measured, profile A the same file with FIELDs set to 0
# (not measured: the cost model prices those ops as it did without them).
# The FIELD `fresh` instead makes A this calibration's own three passes (each
# figure their median, as `calibrate --fresh` would), B the passes kept across
# calibrations: does the history help the model or lag the machine?
# Prints each round's device step and both uncalibrated errors, then how many
# rounds each put within 15% and the median signed error.
#   bash bench/figure_ab.sh [BUILD_DIR] SAMPLE ROUNDS FIELD...
#   e.g. bash bench/figure_ab.sh build cnn 8 beside_compute beside_memory
#        bash bench/figure_ab.sh build cnn 8 fresh
set -euo pipefail
BUILD=${1:-build}
SAMPLE=${2:?sample}
ROUNDS=${3:?rounds}
shift 3
FIELDS=("$@")
[ ${#FIELDS[@]} -gt 0 ] || { echo "name the figures to take out (FIELD...)" >&2; exit 2; }
source "$(dirname "$0")/accuracy_common.sh"
set_flags "$SAMPLE"
printf '%-8s %14s %12s %8s %12s %8s\n' utc device_step_ms A_modeled_ms A_error B_modeled_ms B_error
for r in $(seq 1 "$ROUNDS"); do
  cache=$("$CLI" calibrate | sed -n 's/.*cached at \([^:]*\): .*/\1/p' | head -1)
  [ -f "$cache" ] || { echo "calibrate named no cache file" >&2; exit 1; }
  cp "$cache" "$DIR/B.json"
  python3 - "$DIR/B.json" "$DIR/A.json" "${FIELDS[@]}" <<'EOF'
import json, statistics, sys
src, dst, fields = sys.argv[1], sys.argv[2], sys.argv[3:]
j = json.load(open(src))
if fields == ["fresh"]:
    own = j.get("passes", [])[-3:]
    if not own:
        sys.exit(f"{src} keeps no passes")
    for key, value in j.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and all(key in p for p in own) \
                and key != "measured_at_unix_s":
            j[key] = statistics.median(p[key] for p in own)
    if "collective_ns" in j and all("collective_ns" in p for p in own):
        for kind, times in j["collective_ns"].items():
            med = [statistics.median(p["collective_ns"][kind][i] for p in own) for i in range(len(times))]
            for i in range(1, len(med)):  # as the calibration keeps them: more traffic never takes less
                if med[i] > 0:
                    med[i] = max(med[i], med[i - 1])
            j["collective_ns"][kind] = med
    j["passes"] = own
    json.dump(j, open(dst, "w"))
    sys.exit(0)
for f in fields:
    if f not in j:
        sys.exit(f"{src} has no figure '{f}'")
    j[f] = 0
    for p in j.get("passes", []):
        if f in p:
            p[f] = 0
json.dump(j, open(dst, "w"))
EOF
  "$CLI" run "$SAMPLE" "${flags[@]}" --db "$DIR/real$r.db" > "$DIR/out" 2>&1 || { cat "$DIR/out" >&2; exit 1; }
  line="$(date -u +%H:%M:%S)"
  for ab in A B; do
    SHARDSCOPE_CPU_PROFILE="$DIR/$ab.json" "$CLI" run "$SAMPLE" "${flags[@]}" --simulate \
      --calibrate-from "$DIR/real$r.db" --db "$DIR/sim$ab$r.db" > "$DIR/out" 2>&1 || { cat "$DIR/out" >&2; exit 1; }
    read -r rec unc < <("$CLI" query "$DIR/sim$ab$r.db" \
      "SELECT recorded_step_ns / 1e6, uncalibrated_step_ns / 1e6 FROM sim_calibrations" | tail -1 | tr ',' ' ')
    [ "$ab" = A ] && line+=$(printf ' %14.2f' "$rec")
    err=$(awk -v u="$unc" -v r="$rec" 'BEGIN { printf "%+.1f", 100 * (u - r) / r }')
    line+=$(printf ' %12.2f %7s%%' "$unc" "$err")
    echo "$ab $err" >> "$DIR/errors"
  done
  echo "$line"
done
for ab in A B; do
  awk -v ab="$ab" '$1 == ab { e[++n] = $2; if ($2 <= 15 && $2 >= -15) ++ok }
    END { for (i = 2; i <= n; ++i) for (j = i; j > 1 && e[j - 1] > e[j]; --j) { t = e[j]; e[j] = e[j - 1]; e[j - 1] = t }
          m = n % 2 ? e[(n + 1) / 2] : (e[n / 2] + e[n / 2 + 1]) / 2
          printf "%s: %d of %d within 15%%, median error %+.1f%%\n", ab, ok, n, m }' "$DIR/errors"
done
