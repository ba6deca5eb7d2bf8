#!/usr/bin/env bash
# How well does a simulated run predict a real one? (issue 15, "Accuracy";
# docs/simulate.md). For each sample on the 8 virtual chips this machine
# really runs (mesh 8x1, topology 2x4): a real run, then a simulated run of the
# same sample, mesh and batch calibrated from it (`--calibrate-from`), which
# lays out the cost model's schedule alongside. Prints, per sample, the real
# run's device-clock step (median over its steps, host waits taken out), the
# simulated step (modeled clock) from the cost model alone and calibrated,
# and each one's error against the device step.
#   bash bench/sim_accuracy.sh [BUILD_DIR] [SAMPLES...]     (default: mlp cnn llama)
# The `cpu` profile is measured first (`shardscope calibrate`), as a run on a
# fresh machine would; set KEEP_PROFILE=1 to use the cached one instead.
# BY_OP=1 also prints, per sample, the real run's device time against the cost
# model's by opcode and roofline class (kernel_stats, every chip and step).
# Each sample is also run a second time, right after the first: the column
# `rerun` is that run's device step against the first's, the machine's own
# run-to-run spread (on a shared VM it moved 20-30% between back-to-back runs;
# no model that does not see the run can be closer than that). RERUN=0 skips it.
# SETS=N repeats the whole (calibration, then every sample) N times and ends
# with a summary per sample: how many runs the model alone put within 15%,
# the median error, and the model's median step against the median device
# step over the sets (the machine's typical speed, which one run may miss),
# and the median size of the reruns' moves (the machine's own spread).
# Each set also says how much of a spinning thread's time the host took just
# before it (bench/host_gaps_bench.cc, when built: device times include it).
set -euo pipefail
BUILD=${1:-build}
shift $(( $# > 1 ? 1 : $# ))
SAMPLES=("$@")
[ ${#SAMPLES[@]} -eq 0 ] && SAMPLES=(mlp cnn llama)
source "$(dirname "$0")/accuracy_common.sh"
for set in $(seq 1 "${SETS:-1}"); do
gaps=""
if [ -x "$BUILD/bench/host_gaps_bench" ]; then
  gaps=", host gaps $("$BUILD/bench/host_gaps_bench" 0.5 | awk '/^host_gaps_pct/ {print $2 "% (" $8 " ms longest)"}')"
fi
if [ "${SETS:-1}" -gt 1 ]; then
  echo "set $set of $SETS, $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg)$gaps"
elif [ -n "$gaps" ]; then
  echo "${gaps#, }"
fi
if [ "${KEEP_PROFILE:-0}" != 1 ]; then "$CLI" calibrate | tail -2; else "$CLI" calibrate --show | tail -2; fi
printf '%-6s %6s %14s %18s %8s %16s %8s %8s  %s\n' sample steps device_step_ms uncalibrated_ms error calibrated_ms error rerun \
  "the model's passes, for the real run's speed"
for s in "${SAMPLES[@]}"; do
  set_flags "$s"
  "$CLI" run "$s" "${flags[@]}" --db "$DIR/$s.db" > "$DIR/real.out" 2>&1 || { cat "$DIR/real.out" >&2; exit 1; }
  if [ "${BY_OP:-0}" = 1 ]; then
    "$CLI" query "$DIR/$s.db" "SELECT opcode, roofline, sum(count) AS kernels,
        round(sum(total_ns) / 1e6, 1) AS device_ms, round(sum(modeled_ns * count) / 1e6, 1) AS modeled_ms,
        round(sum(modeled_ns * count) * 1.0 / max(1, sum(total_ns)), 2) AS modeled_over_device
        FROM kernel_stats WHERE count > 0 AND run_id = (SELECT max(run_id) FROM runs) GROUP BY opcode, roofline ORDER BY device_ms DESC LIMIT 12" \
      | sed "s/^/  $s: /" >&2
  fi
  "$CLI" run "$s" "${flags[@]}" --simulate --calibrate-from "$DIR/$s.db" --db "$DIR/$s-sim.db" > "$DIR/sim.out" 2>&1 \
    || { cat "$DIR/sim.out" >&2; exit 1; }
  rerun="-"
  if [ "${RERUN:-1}" = 1 ]; then
    "$CLI" run "$s" "${flags[@]}" --db "$DIR/$s-again.db" > "$DIR/real.out" 2>&1 || { cat "$DIR/real.out" >&2; exit 1; }
    # The second run's device step, as --calibrate-from measures it (a simulated run of its own).
    "$CLI" run "$s" "${flags[@]}" --steps 2 --simulate --calibrate-from "$DIR/$s-again.db" --db "$DIR/$s-again-sim.db" \
      > "$DIR/sim.out" 2>&1 || { cat "$DIR/sim.out" >&2; exit 1; }
    first=$("$CLI" query "$DIR/$s-sim.db" "SELECT recorded_step_ns FROM sim_calibrations" | tail -1)
    again=$("$CLI" query "$DIR/$s-again-sim.db" "SELECT recorded_step_ns FROM sim_calibrations" | tail -1)
    rerun=$(awk -v a="$first" -v b="$again" 'BEGIN { printf "%+.1f%%", 100 * (b - a) / a }')
  fi
  # Which calibration passes priced the uncalibrated step: those measured at
  # the real run's speed, or every speed's where its speed moved while it ran.
  speed=$("$CLI" query "$DIR/$s-sim.db" "SELECT CASE
      WHEN instr(json_extract(config_json, '$.profile_values.speed_note'), 'changed speed') > 0 THEN 'its two speeds (it moved)'
      WHEN instr(json_extract(config_json, '$.profile_values.speed_note'), 'measured again') > 0 THEN 'measured again'
      WHEN json_extract(config_json, '$.profile_values.passes_used') IS NULL THEN 'every kept pass'
      ELSE 'at its speed' END || ', ' || coalesce(json_extract(config_json, '$.profile_values.passes_used'), '?')
      || ' passes' FROM runs ORDER BY run_id DESC LIMIT 1" | tail -1)
  "$CLI" query "$DIR/$s-sim.db" "SELECT recorded_step_ns / 1e6, uncalibrated_step_ns / 1e6,
      100.0 * abs(uncalibrated_step_ns - recorded_step_ns) / recorded_step_ns,
      calibrated_step_ns / 1e6, 100.0 * abs(calibrated_step_ns - recorded_step_ns) / recorded_step_ns
      FROM sim_calibrations" | tail -1 | tr ',' ' ' | {
    read -r rec unc uerr cal cerr
    printf '%-6s %6d %14.2f %18.2f %7.1f%% %16.2f %7.1f%% %8s  %s\n' "$s" "${STEPS[$s]}" "$rec" "$unc" "$uerr" "$cal" "$cerr" "$rerun" "$speed"
    echo "$s $rec $unc $uerr $cal $cerr ${rerun%\%}" >> "$DIR/results"
  }
done
done
if [ "${SETS:-1}" -gt 1 ]; then
  echo
  printf '%-6s %5s %14s %13s %15s %16s %15s %8s %16s %13s\n' sample runs within_15pct median_error median_device_ms \
    median_modeled_ms error_of_medians calibrated median_cal_error median_rerun
  for s in "${SAMPLES[@]}"; do
    awk -v s="$s" '
      function median(a, n,   i, j, t) { for (i = 2; i <= n; ++i) for (j = i; j > 1 && a[j - 1] > a[j]; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
                                         return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      $1 == s { n++; rec[n] = $2; unc[n] = $3; err[n] = $4; cerr[n] = $6; if ($4 <= 15) within++; if ($6 <= 15) cwithin++
                if ($7 != "-") { r++; rerun[r] = $7 < 0 ? -$7 : $7 } }
      END { dev = median(rec, n); mu = median(unc, n);
            printf "%-6s %5d %11d/%-2d %12.1f%% %15.2f %17.2f %15.1f%% %6d/%-2d %15.1f%% %12s\n",
              s, n, within, n, median(err, n), dev, mu, 100 * (mu - dev) / dev, cwithin, n, median(cerr, n),
              (r > 0 ? sprintf("%.1f%%", median(rerun, r)) : "-") }' "$DIR/results"
  done
fi
