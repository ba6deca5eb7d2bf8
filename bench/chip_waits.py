# How long the slowest chip keeps each collective waiting, from a real run's
# device clock (docs/simulate.md, "What the three figures closed"): for every
# collective of every step, each chip's device time since its previous
# collective, and (slowest - mean) against that mean, by segment length; then
# per step, the sum of those waits. What the cost model's chip-spread term
# (CostModel::ChipWaitNs) predicts. The first two steps (compiles) are left out.
#   python3 bench/chip_waits.py RUN.db      (a run of `shardscope run ... --mesh 8x1`)
import collections
import math
import sqlite3
import statistics as st
import sys

db = sqlite3.connect(sys.argv[1])
rows = db.execute("""SELECT t.device_id, s.dur_ns, s.kind, s.step, s.graph_id, s.op_id
  FROM slices s JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id
  WHERE t.clock = 'device' AND s.depth = 0 AND s.step IS NOT NULL ORDER BY t.device_id, s.start_ns""").fetchall()
segments = collections.defaultdict(dict)  # (step, graph, op, nth) -> device -> compute ns before it
device, since, seen = None, collections.defaultdict(int), collections.Counter()
for dev, dur, kind, step, graph, op in rows:
    if dev != device:
        device, since, seen = dev, collections.defaultdict(int), collections.Counter()
    if kind == 'compute':
        since[step] += dur
    elif kind == 'collective':
        seen[(step, graph, op)] += 1
        segments[(step, graph, op, seen[(step, graph, op)])][dev] = since[step]
        since[step] = 0
skip = set(sorted({k[0] for k in segments})[:2])
buckets, per_step = collections.defaultdict(list), collections.defaultdict(float)
for key, per_chip in segments.items():
    t = list(per_chip.values())
    if key[0] in skip or len(t) < 2 or st.mean(t) <= 0:
        continue
    mean = st.mean(t)
    buckets[int(math.log2(max(mean, 1000) / 1000))].append((max(t) - mean) / mean)
    per_step[key[0]] += max(t) - mean
for b in sorted(buckets):
    v = buckets[b]
    print(f"segments of {2**b:6d}-{2**(b+1):6d} us: {len(v):4d}, slowest chip after the mean: median {100*st.median(v):5.1f}%")
for step in sorted(per_step):
    print(f"step {step}: waits for the slowest chip summed over its collectives {per_step[step]/1e6:.2f} ms")
