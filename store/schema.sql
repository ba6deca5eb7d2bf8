-- shardscope database schema, version 2. Documented in docs/schema.md.
-- Timelines follow Perfetto's trace processor: tracks and slices, names interned.
PRAGMA foreign_keys = ON;

CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS runs (
  run_id         INTEGER PRIMARY KEY,
  sample         TEXT NOT NULL,
  mesh           TEXT NOT NULL,
  mesh_axes      TEXT NOT NULL,
  sharding       TEXT NOT NULL,
  config_json    TEXT NOT NULL,
  topology       TEXT NOT NULL,
  profile        TEXT NOT NULL,
  clock_kinds    TEXT NOT NULL,
  tool_version   TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  simulated      INTEGER NOT NULL DEFAULT 0,
  num_hosts      INTEGER NOT NULL,
  num_devices    INTEGER NOT NULL,
  started_at     TEXT NOT NULL,             -- ISO-8601 UTC
  started_at_ns  INTEGER NOT NULL,          -- unix epoch ns
  ended_at_ns    INTEGER,                   -- null while running or if the process died
  status         TEXT NOT NULL DEFAULT 'running', -- running | finished | incomplete (records lost) | hang detected | interrupted | failed
  imported       INTEGER NOT NULL DEFAULT 0,  -- read from another tool's trace (shardscope import)
  capture_note   TEXT                         -- what the timeline left out, and why (NULL: nothing)
);

-- The process that writes each run, so a reader can tell a live run from one whose
-- writer died (run_status, store/run_state.h).
CREATE TABLE IF NOT EXISTS run_writers (
  run_id        INTEGER PRIMARY KEY REFERENCES runs(run_id),
  host          TEXT NOT NULL,               -- gethostname()
  pid           INTEGER NOT NULL,
  boot_id       TEXT NOT NULL,               -- the machine's boot id ('' when unknown)
  process_start INTEGER NOT NULL,            -- the process's start, clock ticks after boot (0 unknown)
  token         TEXT NOT NULL,               -- random, one per writer
  heartbeat_ns  INTEGER NOT NULL,            -- unix ns of the writer's last sign of life (every 5 s)
  closed_at_ns  INTEGER,                     -- the writer closed the file (the run ended or not)
  records_lost  INTEGER NOT NULL DEFAULT 0,  -- records of the run that never reached the file
  note          TEXT                         -- why they were lost
);

-- Each run's status as a reader should show it: a run still 'running' whose writer
-- closed the file, or has not been heard from for 60 s, ended abnormally. (The CLI
-- and the app also look up the writer's process when it ran on this machine, and
-- so know at once.)
CREATE VIEW IF NOT EXISTS run_status AS
SELECT r.run_id, r.sample,
       CASE
         WHEN r.status <> 'running' THEN r.status
         WHEN w.run_id IS NULL THEN 'running'
         WHEN w.closed_at_ns IS NOT NULL THEN 'ended abnormally'
         WHEN w.heartbeat_ns < (CAST(strftime('%s', 'now') AS INTEGER) - 60) * 1000000000 THEN 'ended abnormally'
         ELSE 'running'
       END AS status,
       r.status AS stored_status,
       (SELECT max(step) FROM steps s WHERE s.run_id = r.run_id) AS last_step,
       r.started_at, r.ended_at_ns, w.host, w.pid, w.heartbeat_ns, w.closed_at_ns,
       coalesce(w.records_lost, 0) AS records_lost, w.note
FROM runs r LEFT JOIN run_writers w ON w.run_id = r.run_id;

CREATE TABLE IF NOT EXISTS hosts (
  run_id  INTEGER NOT NULL REFERENCES runs(run_id),
  host_id INTEGER NOT NULL,
  name    TEXT NOT NULL,
  PRIMARY KEY (run_id, host_id)
);

CREATE TABLE IF NOT EXISTS devices (
  run_id     INTEGER NOT NULL REFERENCES runs(run_id),
  device_id  INTEGER NOT NULL,
  host_id    INTEGER NOT NULL,
  coords     TEXT NOT NULL,
  hbm_bytes  INTEGER NOT NULL,
  peak_flops REAL NOT NULL,
  -- Where the chip sits in the run's --topology (NULL without one; added in
  -- place to older files): a torus's [x,y(,z)], a GPU cluster's [host,chip].
  topology_coords TEXT,
  -- Its links, a JSON array with one object per kind of link the chip has:
  -- {"kind" (ici|dcn), "bandwidth" (bytes/s of the run's profile),
  -- "latency_ns", "peers" (the chips at the other ends)}; files written before
  -- 2026-11-27 have an object per link with "peer" instead. The `links` view
  -- lists each link once, from either.
  links      TEXT,
  PRIMARY KEY (run_id, device_id)
);

-- The topology's links, each once (link_id 'A-B', A < B), from devices.links.
-- Each kind's fields are read once per chip (MATERIALIZED), not once per peer:
-- a GPU cluster's chip lists hundreds of rail peers in one object, and
-- reading its fields again for each took 14 s for 1M links, against 0.4.
CREATE VIEW IF NOT EXISTS links AS
WITH kinds AS MATERIALIZED (
  SELECT d.run_id, d.device_id, json_extract(j.value, '$.kind') AS kind,
         json_extract(j.value, '$.bandwidth') AS bandwidth, json_extract(j.value, '$.latency_ns') AS latency_ns,
         json_extract(j.value, '$.peers') AS peers, json_extract(j.value, '$.peer') AS peer
  FROM devices d, json_each(d.links) j
  WHERE d.links IS NOT NULL)
SELECT k.run_id, k.device_id || '-' || p.value AS link_id, k.device_id AS a, p.value AS b, k.kind, k.bandwidth,
       k.latency_ns
FROM kinds k, json_each(k.peers) p
WHERE k.peers IS NOT NULL AND k.device_id < p.value
UNION ALL
SELECT run_id, device_id || '-' || peer, device_id, peer, kind, bandwidth, latency_ns
FROM kinds
WHERE peer IS NOT NULL AND device_id < peer;

CREATE TABLE IF NOT EXISTS meshes (
  run_id     INTEGER NOT NULL REFERENCES runs(run_id),
  mesh_id    INTEGER NOT NULL,
  shape      TEXT NOT NULL,
  axis_names TEXT NOT NULL,
  device_ids TEXT NOT NULL,
  PRIMARY KEY (run_id, mesh_id)
);

CREATE TABLE IF NOT EXISTS names (
  name_id INTEGER PRIMARY KEY,
  name    TEXT NOT NULL UNIQUE
);

CREATE TABLE IF NOT EXISTS tracks (
  run_id      INTEGER NOT NULL REFERENCES runs(run_id),
  track_id    INTEGER NOT NULL,
  name        TEXT NOT NULL,
  clock       TEXT NOT NULL CHECK (clock IN ('host','device','modeled')),
  device_id   INTEGER,                      -- null on host tracks
  host_id     INTEGER NOT NULL,
  thread_name TEXT,
  PRIMARY KEY (run_id, track_id)
);

-- Slices are stored in chunks (schema version 2): up to 512 slices of one
-- track, one step and one program per row, as JSON text, each slice an array
--   [gap, dur_ns, name_id, kind, op_id, slice_id delta, depth, parent_id,
--    flow_id, bytes, wait_ns, category name_id, shape name_id]
-- where gap is the start minus the previous slice's end (the first slice's:
-- minus start_ns) and the id delta is against the previous slice's id (the
-- first's: against first_slice_id); trailing fields at their defaults
-- (-, -, -, -, -1, 1, 0, -1, -1, 0, -1, 0, 0) are left out. kind: 0 compute,
-- 1 collective, 2 transfer, 3 host, 4 compile, 5 host_wait. Query the
-- `slices` view.
CREATE TABLE IF NOT EXISTS slice_chunks (
  chunk_id       INTEGER PRIMARY KEY,
  run_id         INTEGER NOT NULL,
  track_id       INTEGER NOT NULL,
  step           INTEGER,
  graph_id       INTEGER,
  start_ns       INTEGER NOT NULL,          -- the first slice's start
  end_ns         INTEGER NOT NULL,          -- the latest end of its slices
  first_slice_id INTEGER NOT NULL,
  count          INTEGER NOT NULL,
  slices         TEXT NOT NULL
);
-- end_ns in the index: a window query skips chunks that end before it, and a
-- track's longest chunk (how far before a window to look) is read from the
-- index alone.
CREATE INDEX IF NOT EXISTS slice_chunks_by_track_span ON slice_chunks(run_id, track_id, start_ns, end_ns);
CREATE INDEX IF NOT EXISTS slice_chunks_by_step ON slice_chunks(run_id, step);

-- One row per slice, as in schema version 1 (which stored this table).
-- wait_ns: a collective's time waiting for the other chips (start_ns minus
-- arrival_ns, when this chip's operands were ready).
CREATE VIEW IF NOT EXISTS slices AS
SELECT run_id, first_slice_id + sum(d_id) OVER w AS slice_id, track_id,
       start_ns + sum(gap + dur_ns) OVER w - dur_ns AS start_ns, dur_ns, depth,
       CASE WHEN parent_id >= 0 THEN parent_id END AS parent_id, name_id,
       CASE kind WHEN 0 THEN 'compute' WHEN 1 THEN 'collective' WHEN 2 THEN 'transfer'
                 WHEN 3 THEN 'host' WHEN 4 THEN 'compile' WHEN 5 THEN 'host_wait' END AS kind,
       step, graph_id,
       CASE WHEN op_id >= 0 THEN op_id END AS op_id,
       CASE WHEN flow_id >= 0 THEN flow_id END AS flow_id, bytes,
       CASE WHEN wait_ns >= 0 THEN start_ns + sum(gap + dur_ns) OVER w - dur_ns - wait_ns END AS arrival_ns,
       CASE WHEN wait_ns >= 0 THEN wait_ns END AS wait_ns,
       CASE WHEN category_id > 0 THEN category_id END AS category_id,
       CASE WHEN shape_id > 0 THEN shape_id END AS shape_id
FROM (
  SELECT c.run_id, c.track_id, c.chunk_id, c.step, c.graph_id, c.start_ns, c.first_slice_id, j.key AS k,
         json_extract(j.value, '$[0]') AS gap, json_extract(j.value, '$[1]') AS dur_ns,
         json_extract(j.value, '$[2]') AS name_id, json_extract(j.value, '$[3]') AS kind,
         coalesce(json_extract(j.value, '$[4]'), -1) AS op_id,
         coalesce(json_extract(j.value, '$[5]'), CASE WHEN j.key = 0 THEN 0 ELSE 1 END) AS d_id,
         coalesce(json_extract(j.value, '$[6]'), 0) AS depth,
         coalesce(json_extract(j.value, '$[7]'), -1) AS parent_id,
         coalesce(json_extract(j.value, '$[8]'), -1) AS flow_id,
         coalesce(json_extract(j.value, '$[9]'), 0) AS bytes,
         coalesce(json_extract(j.value, '$[10]'), -1) AS wait_ns,
         coalesce(json_extract(j.value, '$[11]'), 0) AS category_id,
         coalesce(json_extract(j.value, '$[12]'), 0) AS shape_id
  FROM slice_chunks c, json_each(c.slices) j
)
WINDOW w AS (PARTITION BY run_id, track_id, chunk_id ORDER BY k ROWS UNBOUNDED PRECEDING);

-- Level of detail (Perfetto's mipmap): per track, depth and time bucket, what
-- the slices STARTING in the bucket hold. Level L buckets are 2^(22 + 2L) ns
-- wide (4.2 ms, 16.8 ms, ... 78 h at level 13); bucket = floor(start / width).
-- Written as the run goes (a run killed early has them up to its last flush).
-- Stored 32 buckets to a row (one track, depth and level; first_bucket a
-- multiple of 32), as JSON text: [[offset, count, longest_dur_ns,
-- longest_start_ns - bucket start, longest_slice_id - slice_base,
-- longest_name_id, longest_kind, first_step - step_base (-1: none),
-- last_step - first_step, compute_ns, collective_ns, transfer_ns, host_ns,
-- compile_ns, host_wait_ns], ...], trailing zeros left out. (Version 2 had a
-- row per bucket: the writer spent a fifth of its time on them.)
CREATE TABLE IF NOT EXISTS slice_summary_groups (
  run_id       INTEGER NOT NULL,
  track_id     INTEGER NOT NULL,
  level        INTEGER NOT NULL,
  depth        INTEGER NOT NULL,
  first_bucket INTEGER NOT NULL,
  count        INTEGER NOT NULL,             -- buckets in the text
  slice_base   INTEGER NOT NULL,
  step_base    INTEGER NOT NULL,
  buckets      TEXT NOT NULL,
  -- Time before track: groups close in time order, so rows append and pages fill.
  PRIMARY KEY (run_id, level, first_bucket, track_id, depth)
) WITHOUT ROWID;

-- A row per bucket, as version 2 stored them (shardscope's own connections
-- read a native decoder behind a TEMP view of the same name). The app's
-- whole-run view is, in effect:
--   SELECT * FROM slice_summaries WHERE run_id = ? AND level = ? ORDER BY track_id, depth, bucket;
CREATE VIEW IF NOT EXISTS slice_summaries AS
SELECT run_id, track_id, level, depth, bucket, count,
       compute_ns + collective_ns + transfer_ns + host_ns + compile_ns + host_wait_ns AS busy_ns,
       compute_ns, collective_ns, transfer_ns, host_ns, compile_ns, host_wait_ns,
       longest_slice_id, longest_start_ns, longest_dur_ns, longest_name_id, longest_kind, first_step, last_step
FROM (
  SELECT g.run_id, g.track_id, g.level, g.depth, g.first_bucket + json_extract(j.value, '$[0]') AS bucket,
         json_extract(j.value, '$[1]') AS count,
         coalesce(json_extract(j.value, '$[9]'), 0) AS compute_ns,
         coalesce(json_extract(j.value, '$[10]'), 0) AS collective_ns,
         coalesce(json_extract(j.value, '$[11]'), 0) AS transfer_ns,
         coalesce(json_extract(j.value, '$[12]'), 0) AS host_ns,
         coalesce(json_extract(j.value, '$[13]'), 0) AS compile_ns,
         coalesce(json_extract(j.value, '$[14]'), 0) AS host_wait_ns,
         g.slice_base + json_extract(j.value, '$[4]') AS longest_slice_id,
         ((g.first_bucket + json_extract(j.value, '$[0]')) << (22 + 2 * g.level)) + json_extract(j.value, '$[3]')
           AS longest_start_ns,
         json_extract(j.value, '$[2]') AS longest_dur_ns,
         json_extract(j.value, '$[5]') AS longest_name_id,
         json_extract(j.value, '$[6]') AS longest_kind,
         CASE WHEN json_extract(j.value, '$[7]') >= 0 THEN g.step_base + json_extract(j.value, '$[7]') END AS first_step,
         CASE WHEN json_extract(j.value, '$[7]') >= 0
              THEN g.step_base + json_extract(j.value, '$[7]') + json_extract(j.value, '$[8]') END AS last_step
  FROM slice_summary_groups g, json_each(g.buckets) j
);

-- Where each step ran on each clock: the first start and last end of the
-- slices that carry it (maintained with the chunks).
CREATE TABLE IF NOT EXISTS step_bounds (
  run_id   INTEGER NOT NULL,
  step     INTEGER NOT NULL,
  clock    TEXT NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns   INTEGER NOT NULL,
  PRIMARY KEY (run_id, clock, step)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS graphs (
  run_id        INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id      INTEGER NOT NULL,
  fingerprint   TEXT NOT NULL,
  call_site     TEXT NOT NULL,
  ir_text       TEXT NOT NULL,
  ir_text_after TEXT NOT NULL,
  op_count      INTEGER NOT NULL,
  flops         REAL NOT NULL,
  bytes         INTEGER NOT NULL,
  PRIMARY KEY (run_id, graph_id)
);

CREATE TABLE IF NOT EXISTS compilations (
  run_id        INTEGER NOT NULL REFERENCES runs(run_id),
  compile_id    INTEGER NOT NULL,
  step          INTEGER NOT NULL,
  graph_id      INTEGER NOT NULL,
  cache         TEXT NOT NULL CHECK (cache IN ('miss','memory_hit','disk_hit')),
  cause_kind    TEXT,                       -- null on hits
  cause_detail  TEXT,
  source_file   TEXT,
  source_line   INTEGER,
  duration_ns   INTEGER NOT NULL,
  prev_graph_id INTEGER,
  call_site     TEXT NOT NULL,
  host_start_ns INTEGER NOT NULL,
  cause_subkind TEXT,                       -- graph_changed: layer_added | ... | ops_changed
  diff_total    INTEGER,                    -- ops that differ from prev_graph_id in all
  PRIMARY KEY (run_id, compile_id)
);

-- The aligned diff of a recompiled graph against the graph it was compared
-- with (compilations.prev_graph_id): ops added, removed and changed, each with
-- the user's line that made it (at most 200 per compilation; diff_total has all).
CREATE TABLE IF NOT EXISTS compile_diffs (
  run_id      INTEGER NOT NULL REFERENCES runs(run_id),
  compile_id  INTEGER NOT NULL,
  ordinal     INTEGER NOT NULL,
  change      TEXT NOT NULL CHECK (change IN ('added','removed','changed')),
  opcode      TEXT NOT NULL,
  op_index    INTEGER NOT NULL,            -- in the new graph (added, changed), else the old one
  what        TEXT,                        -- changed: constant | sharding constraint | attributes | operands
  source_file TEXT,
  source_line INTEGER,
  via         TEXT,                        -- the library call between the user's line and the op
  PRIMARY KEY (run_id, compile_id, ordinal)
);

CREATE TABLE IF NOT EXISTS executions (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  execution_id    INTEGER NOT NULL,
  step            INTEGER NOT NULL,
  graph_id        INTEGER NOT NULL,
  cache           TEXT NOT NULL,
  input_signature TEXT NOT NULL,            -- JSON array
  cause           TEXT NOT NULL,            -- mark_step | value_read | step_end
  source_file     TEXT,
  source_line     INTEGER,
  host_start_ns   INTEGER NOT NULL,
  host_dur_ns     INTEGER NOT NULL,
  PRIMARY KEY (run_id, execution_id)
);

CREATE TABLE IF NOT EXISTS steps (
  run_id  INTEGER NOT NULL REFERENCES runs(run_id),
  step    INTEGER NOT NULL,
  loss    REAL,
  wall_ns INTEGER NOT NULL,
  eval_loss REAL,                           -- held-out loss after this step, when measured
  PRIMARY KEY (run_id, step)
);

CREATE TABLE IF NOT EXISTS tensors (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  tensor_id       INTEGER NOT NULL,
  name            TEXT NOT NULL,
  shape           TEXT NOT NULL,
  dtype           TEXT NOT NULL,
  sharding        TEXT NOT NULL,
  sharding_source TEXT NOT NULL,
  source_file     TEXT,
  source_line     INTEGER,
  step            INTEGER NOT NULL,
  PRIMARY KEY (run_id, tensor_id)
);

-- Where each tensor's shards sit. Consecutive chips holding the same index
-- ranges are one row (a replicated tensor on 4096 chips is one row, not
-- 4096); `shard_placements` gives one row per tensor per chip.
CREATE TABLE IF NOT EXISTS shard_placement_spans (
  run_id       INTEGER NOT NULL REFERENCES runs(run_id),
  tensor_id    INTEGER NOT NULL,
  tensor_name  TEXT NOT NULL,
  first_device INTEGER NOT NULL,
  last_device  INTEGER NOT NULL,             -- inclusive
  index_ranges TEXT NOT NULL,
  bytes        INTEGER NOT NULL,
  PRIMARY KEY (run_id, tensor_id, first_device)
) WITHOUT ROWID;

-- One row per tensor per chip, in (run, tensor, chip) order. A span that
-- damage made endless stops at chip 2^20 - 1 rather than hang a query.
CREATE VIEW IF NOT EXISTS shard_placements AS
  WITH RECURSIVE chip(run_id, tensor_id, tensor_name, device_id, last_device, index_ranges, bytes) AS (
    SELECT run_id, tensor_id, tensor_name, first_device, last_device, index_ranges, bytes
      FROM shard_placement_spans
    UNION ALL
    SELECT run_id, tensor_id, tensor_name, device_id + 1, last_device, index_ranges, bytes FROM chip
     WHERE device_id < last_device AND device_id < 1048575
     ORDER BY 1, 2, 4)
  SELECT run_id, tensor_id, tensor_name, device_id, index_ranges, bytes FROM chip;

-- A chip that stopped responding, as the hang detector saw it (the run ended
-- there: run_status says so): which chip, at which step, the collective the
-- others waited in for it (NULL: its program has none) and who waited.
CREATE TABLE IF NOT EXISTS hangs (
  run_id      INTEGER NOT NULL REFERENCES runs(run_id),
  step        INTEGER NOT NULL,
  device_id   INTEGER NOT NULL,              -- the chip that stopped
  host_id     INTEGER NOT NULL,
  graph_id    INTEGER NOT NULL,              -- the program it was running
  collective  TEXT,                          -- the collective that never completed
  waiting     TEXT NOT NULL,                 -- JSON array of the device ids that waited in it
  message     TEXT NOT NULL,                 -- the detector's sentence
  PRIMARY KEY (run_id, device_id)
);

CREATE TABLE IF NOT EXISTS counters (
  run_id    INTEGER NOT NULL REFERENCES runs(run_id),
  device_id INTEGER,                        -- null: process-wide
  name      TEXT NOT NULL,
  ts_ns     INTEGER NOT NULL,
  value     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS counters_by_name ON counters(run_id, name, ts_ns);
-- One chip's counter over a time range (the timeline's counter tracks).
CREATE INDEX IF NOT EXISTS counters_by_device ON counters(run_id, name, device_id, ts_ns);

-- The metrics report of each run that ended (store/metrics.cc), written by the
-- writer when the run ends with the code `shardscope metrics` prints: one row
-- per timing metric, counter, op kind the frontend traced and opcode run. A
-- run that never ended, and files written before this table (added in place:
-- CREATE IF NOT EXISTS), have no rows; the report computes them instead.
CREATE TABLE IF NOT EXISTS metrics (
  run_id   INTEGER NOT NULL REFERENCES runs(run_id),
  kind     TEXT NOT NULL CHECK (kind IN ('metric','counter','op_traced','kernel_runs')),
  name     TEXT NOT NULL,                -- CompileTime, MarkStep, ...; an opcode for op_traced, kernel_runs
  position INTEGER NOT NULL,             -- order within its kind, as printed
  clock    TEXT,                         -- metric: host | device
  count    INTEGER,                      -- metric: samples; NULL (and the timings): not recorded (--trace off)
  total_ns INTEGER,                      -- metric: sum of the samples
  p50_ns   INTEGER,                      -- metric: percentiles (nearest rank) and the largest sample
  p90_ns   INTEGER,
  p99_ns   INTEGER,
  max_ns   INTEGER,
  value    INTEGER,                      -- counter, op_traced, kernel_runs; a counter's NULL: not recorded
  note     TEXT NOT NULL DEFAULT '',     -- metric: what one sample is; counter: what it counts
  PRIMARY KEY (run_id, kind, name)
);

-- Each compiled program's memory plan per device (buffer assignment by
-- liveness), and the buffers live at its peak, largest first.
CREATE TABLE IF NOT EXISTS memory_plans (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id        INTEGER NOT NULL,
  peak_bytes      INTEGER NOT NULL,   -- inputs included
  parameter_bytes INTEGER NOT NULL,
  arena_bytes     INTEGER NOT NULL,   -- intermediates + outputs, with reuse
  unshared_bytes  INTEGER NOT NULL,   -- the same without reuse
  peak_op         TEXT NOT NULL,
  PRIMARY KEY (run_id, graph_id)
);

CREATE TABLE IF NOT EXISTS peak_buffers (
  run_id      INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id    INTEGER NOT NULL,
  rank        INTEGER NOT NULL,       -- 0 = largest
  op_id       INTEGER NOT NULL,
  op          TEXT NOT NULL,
  bytes       INTEGER NOT NULL,
  is_input    INTEGER NOT NULL,
  source_file TEXT,
  source_line INTEGER,
  scope       TEXT,
  PRIMARY KEY (run_id, graph_id, rank)
);

-- What each compiler pass did to each compiled program (compiler/passes.h,
-- compiler/fusion.h): `changed` ops merged (cse), dropped (dce), rewritten to
-- an operand (algebraic), folded into a constant (constant_folding) or
-- absorbed into a fused kernel (fusion); `ops_after` the per-device
-- program's op count at the end.
CREATE TABLE IF NOT EXISTS compile_passes (
  run_id    INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id  INTEGER NOT NULL,
  pass      TEXT NOT NULL,
  changed   INTEGER NOT NULL,
  ops_after INTEGER NOT NULL,
  PRIMARY KEY (run_id, graph_id, pass)
);

-- Fusion of each compiled per-device program (compiler/fusion.h): every
-- producer -> consumer edge the pass looked at, whether the producer was fused
-- into the consumer's kernel, and why not when it was not. `kernel` is the
-- consumer's kernel as on the timeline ("fusion.40"), NULL when the consumer
-- runs alone. Source line and module path are the consumer's.
CREATE TABLE IF NOT EXISTS fusion_decisions (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id        INTEGER NOT NULL,
  consumer_op_id  INTEGER NOT NULL,
  producer_op_id  INTEGER NOT NULL,
  consumer        TEXT NOT NULL,
  producer        TEXT NOT NULL,
  fused           INTEGER NOT NULL,
  kernel          TEXT,
  reason          TEXT NOT NULL,
  source_file     TEXT,
  source_line     INTEGER,
  scope           TEXT,
  PRIMARY KEY (run_id, graph_id, consumer_op_id, producer_op_id)
);

-- Each distinct sharding text of a run once: on a pod laid out in snake
-- order every text lists its thousands of chips (a 1024-chip llama's 1590
-- decisions held 2.5 MB of 5 texts).
CREATE TABLE IF NOT EXISTS sharding_texts (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  sharding_id     INTEGER NOT NULL,
  sharding        TEXT NOT NULL,
  PRIMARY KEY (run_id, sharding_id)
) WITHOUT ROWID;

-- Sharding propagation of each compiled program: every op of the global
-- program with the sharding it got and where that came from (the
-- `sharding_decisions` view, with its text).
CREATE TABLE IF NOT EXISTS sharding_decision_rows (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id        INTEGER NOT NULL,
  op_id           INTEGER NOT NULL,
  name            TEXT NOT NULL,
  sharding_id     INTEGER NOT NULL,          -- sharding_texts
  source          TEXT NOT NULL CHECK (source IN ('annotated', 'propagated', 'default', 'auto')),
  via             TEXT,
  source_file     TEXT,
  source_line     INTEGER,
  from_op_id      INTEGER,
  PRIMARY KEY (run_id, graph_id, op_id)
) WITHOUT ROWID;

CREATE VIEW IF NOT EXISTS sharding_decisions AS
  SELECT d.run_id, d.graph_id, d.op_id, d.name, t.sharding, d.source, d.via, d.source_file, d.source_line,
         d.from_op_id
    FROM sharding_decision_rows d
    LEFT JOIN sharding_texts t ON t.run_id = d.run_id AND t.sharding_id = d.sharding_id;

-- Involuntary full rematerializations: a split value made whole on every
-- device because the op reading it has no split rule (or on the way between
-- two split layouts).
CREATE TABLE IF NOT EXISTS rematerializations (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id        INTEGER NOT NULL,
  seq             INTEGER NOT NULL,
  op_id           INTEGER NOT NULL,
  value           TEXT NOT NULL,
  op              TEXT NOT NULL,
  bytes           INTEGER NOT NULL,
  source_file     TEXT,
  source_line     INTEGER,
  PRIMARY KEY (run_id, graph_id, seq)
);

-- Auto-sharding searches (--sharding auto): how the search went, what its
-- choice and each hand-written strategy cost on the same step's graph (the
-- modeled clock's profile), and the layout chosen per group of parameters.
CREATE TABLE IF NOT EXISTS auto_sharding (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  step            INTEGER NOT NULL,
  method          TEXT NOT NULL CHECK (method IN ('exact', 'heuristic')),
  combinations    REAL NOT NULL,
  evaluations     INTEGER NOT NULL,
  search_ns       INTEGER NOT NULL,
  profile         TEXT NOT NULL,
  memory_budget   INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS auto_sharding_candidates (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  step            INTEGER NOT NULL,
  strategy        TEXT NOT NULL,
  modeled_ns      REAL NOT NULL,
  collective_ns   REAL NOT NULL,
  collectives     INTEGER NOT NULL,
  peak_bytes      INTEGER NOT NULL,
  fits            INTEGER NOT NULL,
  rematerializations INTEGER NOT NULL,
  chosen          INTEGER NOT NULL,
  PRIMARY KEY (run_id, step, strategy)
);
CREATE TABLE IF NOT EXISTS auto_sharding_choices (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  step            INTEGER NOT NULL,
  group_name      TEXT NOT NULL,
  tensors         INTEGER NOT NULL,
  layout          TEXT NOT NULL,
  sharding        TEXT NOT NULL,
  PRIMARY KEY (run_id, step, group_name)
);

-- Every slice with its track's device and clock, for simple queries.
CREATE VIEW IF NOT EXISTS events AS
SELECT s.run_id, t.device_id, t.host_id, s.track_id, s.kind, n.name, s.start_ns, s.dur_ns,
       s.depth, s.parent_id, s.step, s.graph_id, s.op_id, s.flow_id, s.bytes, t.clock, s.slice_id,
       s.arrival_ns, s.wait_ns, c.name AS category, sh.name AS shape
FROM slices s
JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id
JOIN names n ON n.name_id = s.name_id
LEFT JOIN names c ON c.name_id = s.category_id
LEFT JOIN names sh ON sh.name_id = s.shape_id;

-- Per device and step on the device clock: time by kind from top-level
-- (depth 0) slices, host_wait = the chip waiting for the host to enqueue the
-- step's program ('host_wait' slices), and idle = the step's span minus busy
-- minus host_wait. The span runs from the step's first slice to its last on
-- ANY device, so a chip that waits for a straggler shows that wait as idle.
-- (Files written before host_wait_ns get this view when a writer opens them.)
CREATE VIEW IF NOT EXISTS step_device_summary AS
WITH dev AS (
  SELECT s.run_id, s.step, t.device_id, s.kind, s.start_ns, s.dur_ns
  FROM slices s
  JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id
  WHERE t.clock = 'device' AND t.device_id IS NOT NULL AND s.depth = 0 AND s.step IS NOT NULL
),
span AS (
  SELECT run_id, step, min(start_ns) AS step_start_ns, max(start_ns + dur_ns) AS step_end_ns
  FROM dev GROUP BY run_id, step
),
per AS (
  SELECT run_id, step, device_id,
         sum(CASE WHEN kind = 'compute' THEN dur_ns ELSE 0 END) AS compute_ns,
         sum(CASE WHEN kind = 'collective' THEN dur_ns ELSE 0 END) AS collective_ns,
         sum(CASE WHEN kind = 'transfer' THEN dur_ns ELSE 0 END) AS transfer_ns,
         sum(CASE WHEN kind = 'host_wait' THEN dur_ns ELSE 0 END) AS host_wait_ns,
         sum(CASE WHEN kind = 'host_wait' THEN 0 ELSE dur_ns END) AS busy_ns
  FROM dev GROUP BY run_id, step, device_id
)
SELECT p.run_id, p.step, p.device_id, p.compute_ns, p.collective_ns, p.transfer_ns,
       max(0, (sp.step_end_ns - sp.step_start_ns) - p.busy_ns - p.host_wait_ns) AS idle_ns, p.busy_ns,
       sp.step_end_ns - sp.step_start_ns AS span_ns, sp.step_start_ns, sp.step_end_ns, p.host_wait_ns
FROM per p
JOIN span sp ON sp.run_id = p.run_id AND sp.step = p.step;

-- One row per op of each compiled per-device program, with the cost model's
-- estimate on the run's chip profile (added in place: CREATE IF NOT EXISTS, so
-- files written before it gain the table when a writer next opens them).
CREATE TABLE IF NOT EXISTS ops (
  run_id        INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id      INTEGER NOT NULL,
  op_id         INTEGER NOT NULL,            -- slices.op_id
  name          TEXT NOT NULL,               -- as on the timeline, e.g. dot_general.7
  opcode        TEXT NOT NULL,
  shape         TEXT NOT NULL,
  flops         REAL NOT NULL,               -- per device, one run
  bytes_read    INTEGER NOT NULL,
  bytes_written INTEGER NOT NULL,
  modeled_ns    INTEGER NOT NULL,            -- cost model time on `profile`
  roofline      TEXT NOT NULL CHECK (roofline IN ('compute','memory','collective','none')),
  profile       TEXT NOT NULL,
  source_file   TEXT,
  source_line   INTEGER,
  scope         TEXT,                        -- module path, NULL when none
  moves_op_id   INTEGER,                     -- a collective: the global value it moves (sharding_decisions.op_id)
  PRIMARY KEY (run_id, graph_id, op_id)
);

-- Per op of a compiled graph: its measured device-clock time over every
-- execution on every chip (count, total, mean), its cost and roofline class,
-- the modeled time, and the FLOP/s it achieved against the profile's peak.
CREATE VIEW IF NOT EXISTS kernel_stats AS
WITH measured AS (
  SELECT s.run_id, s.graph_id, s.op_id, count(*) AS count, sum(s.dur_ns) AS total_ns,
         min(s.dur_ns) AS min_ns, max(s.dur_ns) AS max_ns
  FROM slices s
  JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id
  WHERE t.clock = 'device' AND s.graph_id IS NOT NULL AND s.op_id IS NOT NULL AND s.depth = 0
  GROUP BY s.run_id, s.graph_id, s.op_id
),
peak AS (
  SELECT run_id, max(peak_flops) AS peak_flops FROM devices GROUP BY run_id
)
SELECT o.run_id, o.graph_id, o.op_id, o.name, o.opcode, o.shape, o.roofline,
       o.flops, o.bytes_read, o.bytes_written, o.bytes_read + o.bytes_written AS bytes,
       coalesce(m.count, 0) AS count, coalesce(m.total_ns, 0) AS total_ns,
       CASE WHEN m.count > 0 THEN m.total_ns * 1.0 / m.count END AS mean_ns, m.min_ns, m.max_ns,
       o.modeled_ns, o.profile,
       CASE WHEN m.total_ns > 0 THEN o.flops * m.count * 1e9 / m.total_ns END AS achieved_flops,
       p.peak_flops,
       CASE WHEN m.total_ns > 0 AND p.peak_flops > 0
            THEN o.flops * m.count * 1e9 / m.total_ns / p.peak_flops END AS fraction_of_peak,
       o.source_file, o.source_line, o.scope
FROM ops o
LEFT JOIN measured m ON m.run_id = o.run_id AND m.graph_id = o.graph_id AND m.op_id = o.op_id
LEFT JOIN peak p ON p.run_id = o.run_id;

-- Measured device time (all chips, all executions) by the user's source line.
CREATE VIEW IF NOT EXISTS time_by_source_line AS
SELECT run_id, source_file, source_line, count(*) AS ops, sum(count) AS kernels,
       sum(total_ns) AS total_ns, sum(flops * count) AS flops,
       sum(modeled_ns * count) AS modeled_ns
FROM kernel_stats
GROUP BY run_id, source_file, source_line;

-- Measured device time by module path (nn module scope); '' when none.
CREATE VIEW IF NOT EXISTS time_by_module_path AS
SELECT run_id, coalesce(scope, '') AS module_path, count(*) AS ops, sum(count) AS kernels,
       sum(total_ns) AS total_ns, sum(flops * count) AS flops,
       sum(modeled_ns * count) AS modeled_ns
FROM kernel_stats
GROUP BY run_id, coalesce(scope, '');

-- Traces imported from other tools (`shardscope import`, docs/import.md): one
-- row per file of an imported run. A rank's clock_offset_ns is added to its
-- times to line it up with the reference rank (the lowest); NULL when it
-- could not be estimated (import_stats says so).
CREATE TABLE IF NOT EXISTS trace_imports (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  file            TEXT NOT NULL,             -- as given on the command line
  rank            INTEGER NOT NULL,          -- distributedInfo.rank, else the file's order
  world_size      INTEGER NOT NULL,
  host_id         INTEGER NOT NULL,          -- hosts.host_id (= rank)
  clock_offset_ns INTEGER,                   -- NULL: unknown
  events          INTEGER NOT NULL,          -- elements of traceEvents read
  first_ts_ns     INTEGER NOT NULL,          -- run-relative, offset applied
  last_ts_ns      INTEGER NOT NULL,
  PRIMARY KEY (run_id, rank)
);

-- What an import could not use, or changed, counted by reason (as Perfetto's
-- `stats` table): severity info | data_loss | error.
CREATE TABLE IF NOT EXISTS import_stats (
  run_id      INTEGER NOT NULL REFERENCES runs(run_id),
  name        TEXT NOT NULL,                 -- e.g. x_event_negative_dur, collective_unmatched
  count       INTEGER NOT NULL,
  severity    TEXT NOT NULL CHECK (severity IN ('info', 'data_loss', 'error')),
  description TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
);

-- Simulated runs (`shardscope run --simulate`, docs/simulate.md; runs.simulated = 1).
-- Their timelines are not stored a row (or a chunk) per slice: each program's
-- schedule is stored once, with each chip's differences and seeds, and, per
-- program run, each chip's start and each collective group's end. shardscope's
-- own connections make the slices again on demand (store/sim_timeline.h): the
-- `slices`, `events` and other views they read include them (the plain sqlite3
-- shell, which cannot make them, sees none). All on the modeled clock.
-- Blobs are unsigned LEB128 varints (signed ones zigzag-coded); layouts in
-- store/sim_timeline.cc.
CREATE TABLE IF NOT EXISTS sim_programs (
  run_id      INTEGER NOT NULL,
  graph_id    INTEGER NOT NULL,
  ops         INTEGER NOT NULL,             -- kernels and collectives per chip per run
  collectives INTEGER NOT NULL,             -- collective ops
  algorithms  TEXT NOT NULL,                -- JSON: how many collective ops ran as ring, tree, torus
  schedule    BLOB NOT NULL,                -- ops (name_id, kind, op_id, modeled ns, ...), group layouts,
                                            -- each collective's per-group duration and link traffic
  PRIMARY KEY (run_id, graph_id)
) WITHOUT ROWID;
-- Each chip's differences from the schedule (from the run's faults, which
-- config_json alone names): its kernels and transfers take time_scale times as
-- long, each kernel (1 + u) as long with u uniform in [-jitter, jitter] drawn
-- from (seed, step, chip, kernel).
CREATE TABLE IF NOT EXISTS sim_chips (
  run_id     INTEGER NOT NULL,
  device_id  INTEGER NOT NULL,
  track_id   INTEGER NOT NULL,              -- its modeled-clock track
  time_scale REAL NOT NULL,
  jitter     REAL NOT NULL,
  seed       INTEGER NOT NULL,
  PRIMARY KEY (run_id, device_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sim_chips_by_track ON sim_chips(run_id, track_id);
-- One row per program run (seq in run order): each chip's start, its
-- preemption if any, and the end of each collective group.
CREATE TABLE IF NOT EXISTS sim_runs (
  run_id    INTEGER NOT NULL,
  seq       INTEGER NOT NULL,
  step      INTEGER NOT NULL,
  graph_id  INTEGER NOT NULL,
  transfers BLOB NOT NULL,                  -- host-to-device copies before it
  starts    BLOB NOT NULL,                  -- per chip, ns on the modeled clock
  preempted BLOB,                           -- per chip, ns taken away before its start (NULL: none)
  ends      BLOB NOT NULL,                  -- per collective op, per group: its end
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- A simulated run calibrated from a recorded one (`run --simulate
-- --calibrate-from DB`, docs/simulate.md): where its op times came from and
-- both errors against the recorded run's device-clock step. Added in place
-- (CREATE IF NOT EXISTS); a run without calibration has no row.
CREATE TABLE IF NOT EXISTS sim_calibrations (
  run_id               INTEGER PRIMARY KEY,   -- the simulated run
  source_db            TEXT NOT NULL,         -- the recorded run's file, as given
  source_run           INTEGER NOT NULL,
  kernels_by_op        INTEGER NOT NULL,      -- distinct kernels timed by (program fingerprint, op)
  kernels_by_signature INTEGER NOT NULL,      -- by opcode, shape, FLOPs and bytes
  kernels_modeled      INTEGER NOT NULL,      -- absent from the recording: the cost model's time
  collectives_recorded INTEGER NOT NULL,
  collectives_modeled  INTEGER NOT NULL,
  recorded_step_ns     INTEGER NOT NULL,      -- device clock: median step span, host waits taken out
  recorded_host_wait_ns INTEGER NOT NULL,     -- device clock: median of what was taken out
  calibrated_step_ns   INTEGER NOT NULL,      -- modeled clock: median step, recorded op times
  uncalibrated_step_ns INTEGER NOT NULL       -- modeled clock: median step, the cost model alone
);

-- Each compiled program's liveness curve per device (buffer assignment,
-- compiler/buffer_assignment.h): for every op that runs (the `ops` rows, in
-- program order), the bytes live while it runs, inputs included; its maximum
-- is memory_plans.peak_bytes. Two JSON arrays of the same length, read in SQL
-- with json_each. Added in place (CREATE IF NOT EXISTS): files written before
-- it have no rows, and the Memory view says the curve was not recorded.
CREATE TABLE IF NOT EXISTS memory_curves (
  run_id     INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id   INTEGER NOT NULL,
  ops        INTEGER NOT NULL,   -- points in each array
  op_ids     TEXT NOT NULL,      -- JSON array: ops.op_id of each point
  live_bytes TEXT NOT NULL,      -- JSON array: bytes live at that op, per chip
  PRIMARY KEY (run_id, graph_id)
);
