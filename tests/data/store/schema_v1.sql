-- shardscope database schema, version 1. Documented in docs/schema.md.
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
  status         TEXT NOT NULL DEFAULT 'running'  -- running | finished | incomplete (records lost)
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
  PRIMARY KEY (run_id, device_id)
);

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

CREATE TABLE IF NOT EXISTS slices (
  run_id    INTEGER NOT NULL,
  slice_id  INTEGER NOT NULL,
  track_id  INTEGER NOT NULL,
  start_ns  INTEGER NOT NULL,
  dur_ns    INTEGER NOT NULL,
  depth     INTEGER NOT NULL,
  parent_id INTEGER,
  name_id   INTEGER NOT NULL REFERENCES names(name_id),
  kind      TEXT NOT NULL CHECK (kind IN ('compute','collective','transfer','host','compile','host_wait')),
  step      INTEGER,
  graph_id  INTEGER,
  op_id     INTEGER,
  flow_id   INTEGER,
  bytes     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, slice_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS slices_by_track_time ON slices(run_id, track_id, start_ns);
CREATE INDEX IF NOT EXISTS slices_by_flow ON slices(run_id, flow_id) WHERE flow_id IS NOT NULL;

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

CREATE TABLE IF NOT EXISTS shard_placements (
  run_id       INTEGER NOT NULL REFERENCES runs(run_id),
  tensor_id    INTEGER NOT NULL,
  tensor_name  TEXT NOT NULL,
  device_id    INTEGER NOT NULL,
  index_ranges TEXT NOT NULL,
  bytes        INTEGER NOT NULL,
  PRIMARY KEY (run_id, tensor_id, device_id)
);

CREATE TABLE IF NOT EXISTS counters (
  run_id    INTEGER NOT NULL REFERENCES runs(run_id),
  device_id INTEGER,                        -- null: process-wide
  name      TEXT NOT NULL,
  ts_ns     INTEGER NOT NULL,
  value     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS counters_by_name ON counters(run_id, name, ts_ns);

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
  count    INTEGER,                      -- metric: samples
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

-- Sharding propagation of each compiled program: every op of the global
-- program with the sharding it got and where that came from.
CREATE TABLE IF NOT EXISTS sharding_decisions (
  run_id          INTEGER NOT NULL REFERENCES runs(run_id),
  graph_id        INTEGER NOT NULL,
  op_id           INTEGER NOT NULL,
  name            TEXT NOT NULL,
  sharding        TEXT NOT NULL,
  source          TEXT NOT NULL CHECK (source IN ('annotated', 'propagated', 'default', 'auto')),
  via             TEXT,
  source_file     TEXT,
  source_line     INTEGER,
  from_op_id      INTEGER,
  PRIMARY KEY (run_id, graph_id, op_id)
);

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
       s.depth, s.parent_id, s.step, s.graph_id, s.op_id, s.flow_id, s.bytes, t.clock, s.slice_id
FROM slices s
JOIN tracks t ON t.run_id = s.run_id AND t.track_id = s.track_id
JOIN names n ON n.name_id = s.name_id;

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
  SELECT s.run_id, s.graph_id, s.op_id, count(*) AS count, sum(s.dur_ns) AS total_ns
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
       CASE WHEN m.count > 0 THEN m.total_ns * 1.0 / m.count END AS mean_ns,
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
