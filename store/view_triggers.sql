-- Writes to the views that were tables before schema version 4
-- (shard_placements, sharding_decisions) as to those tables: a chip's
-- placement changed, added or removed splits its span; a decision's sharding
-- text is interned. Not in schema.sql: a file of version 3 still has the
-- tables when schema.sql runs, and a view's trigger on a table is an error.
-- A writer applies these after migrating (store/writer.cc, Migrate).
--
-- A key taken twice fails, or is replaced or ignored, as the statement's
-- conflict clause says (INSERT, INSERT OR REPLACE, INSERT OR IGNORE): SQLite
-- applies it to the statements of an INSTEAD OF trigger, and each write lands
-- as a plain INSERT of the chip's own one-chip span, which conflicts exactly
-- when the chip already has a placement. The error then names
-- shard_placement_spans (the table underneath) rather than the view.

-- Spans start where this view says; inserting (run, tensor, chip) into it
-- cuts that chip's span so the chip is a span of its own, the view's rows
-- unchanged: the writes below then touch that one chip.
CREATE VIEW IF NOT EXISTS shard_placement_cuts AS
  SELECT run_id, tensor_id, first_device AS device_id FROM shard_placement_spans;

CREATE TRIGGER IF NOT EXISTS shard_placement_cuts_insert INSTEAD OF INSERT ON shard_placement_cuts BEGIN
  -- what follows the chip
  INSERT INTO shard_placement_spans SELECT run_id, tensor_id, tensor_name, NEW.device_id + 1, last_device,
         index_ranges, bytes FROM shard_placement_spans
   WHERE run_id = NEW.run_id AND tensor_id = NEW.tensor_id AND first_device <= NEW.device_id
     AND last_device > NEW.device_id;
  -- the chip, out of a span that began before it
  INSERT INTO shard_placement_spans SELECT run_id, tensor_id, tensor_name, NEW.device_id, NEW.device_id,
         index_ranges, bytes FROM shard_placement_spans
   WHERE run_id = NEW.run_id AND tensor_id = NEW.tensor_id AND first_device < NEW.device_id
     AND last_device >= NEW.device_id;
  -- what is left before it, or the chip alone where its span began with it
  UPDATE shard_placement_spans SET last_device = NEW.device_id - 1
   WHERE run_id = NEW.run_id AND tensor_id = NEW.tensor_id AND first_device < NEW.device_id
     AND last_device >= NEW.device_id;
  UPDATE shard_placement_spans SET last_device = NEW.device_id
   WHERE run_id = NEW.run_id AND tensor_id = NEW.tensor_id AND first_device = NEW.device_id
     AND last_device > NEW.device_id;
END;

CREATE TRIGGER IF NOT EXISTS shard_placements_insert INSTEAD OF INSERT ON shard_placements BEGIN
  INSERT INTO shard_placement_cuts VALUES (NEW.run_id, NEW.tensor_id, NEW.device_id);
  INSERT INTO shard_placement_spans VALUES (NEW.run_id, NEW.tensor_id, NEW.tensor_name, NEW.device_id,
         NEW.device_id, NEW.index_ranges, NEW.bytes);
END;

CREATE TRIGGER IF NOT EXISTS shard_placements_delete INSTEAD OF DELETE ON shard_placements BEGIN
  INSERT INTO shard_placement_cuts VALUES (OLD.run_id, OLD.tensor_id, OLD.device_id);
  DELETE FROM shard_placement_spans
   WHERE run_id = OLD.run_id AND tensor_id = OLD.tensor_id AND first_device = OLD.device_id;
END;

CREATE TRIGGER IF NOT EXISTS shard_placements_update INSTEAD OF UPDATE ON shard_placements
  WHEN NEW.run_id IS OLD.run_id AND NEW.tensor_id IS OLD.tensor_id AND NEW.device_id IS OLD.device_id BEGIN
  INSERT INTO shard_placement_cuts VALUES (OLD.run_id, OLD.tensor_id, OLD.device_id);
  UPDATE shard_placement_spans SET tensor_name = NEW.tensor_name, index_ranges = NEW.index_ranges, bytes = NEW.bytes
   WHERE run_id = OLD.run_id AND tensor_id = OLD.tensor_id AND first_device = OLD.device_id;
END;

-- A new key: the row goes there (failing, replacing or ignored as the
-- statement says), and leaves its old place only if it went: changes() is
-- the count of the statement before it in the trigger.
CREATE TRIGGER IF NOT EXISTS shard_placements_move INSTEAD OF UPDATE ON shard_placements
  WHEN NOT (NEW.run_id IS OLD.run_id AND NEW.tensor_id IS OLD.tensor_id AND NEW.device_id IS OLD.device_id) BEGIN
  INSERT INTO shard_placement_cuts VALUES (OLD.run_id, OLD.tensor_id, OLD.device_id);
  INSERT INTO shard_placement_cuts VALUES (NEW.run_id, NEW.tensor_id, NEW.device_id);
  INSERT INTO shard_placement_spans VALUES (NEW.run_id, NEW.tensor_id, NEW.tensor_name, NEW.device_id,
         NEW.device_id, NEW.index_ranges, NEW.bytes);
  DELETE FROM shard_placement_spans
   WHERE changes() = 1 AND run_id = OLD.run_id AND tensor_id = OLD.tensor_id AND first_device = OLD.device_id;
END;

-- A run's sharding texts; inserting (run, text) into this view adds the text
-- with the run's next id unless the run has it already.
CREATE VIEW IF NOT EXISTS sharding_text_adds AS SELECT run_id, sharding FROM sharding_texts;

CREATE TRIGGER IF NOT EXISTS sharding_text_adds_insert INSTEAD OF INSERT ON sharding_text_adds BEGIN
  INSERT INTO sharding_texts
  SELECT NEW.run_id, (SELECT coalesce(max(sharding_id), 0) + 1 FROM sharding_texts WHERE run_id = NEW.run_id),
         NEW.sharding
   WHERE NOT EXISTS (SELECT 1 FROM sharding_texts WHERE run_id = NEW.run_id AND sharding = NEW.sharding);
END;

CREATE TRIGGER IF NOT EXISTS sharding_decisions_insert INSTEAD OF INSERT ON sharding_decisions BEGIN
  INSERT INTO sharding_text_adds VALUES (NEW.run_id, NEW.sharding);
  INSERT INTO sharding_decision_rows VALUES (NEW.run_id, NEW.graph_id, NEW.op_id, NEW.name,
         (SELECT sharding_id FROM sharding_texts WHERE run_id = NEW.run_id AND sharding = NEW.sharding),
         NEW.source, NEW.via, NEW.source_file, NEW.source_line, NEW.from_op_id);
END;

CREATE TRIGGER IF NOT EXISTS sharding_decisions_delete INSTEAD OF DELETE ON sharding_decisions BEGIN
  DELETE FROM sharding_decision_rows WHERE run_id = OLD.run_id AND graph_id = OLD.graph_id AND op_id = OLD.op_id;
END;

CREATE TRIGGER IF NOT EXISTS sharding_decisions_update INSTEAD OF UPDATE ON sharding_decisions
  WHEN NEW.run_id IS OLD.run_id AND NEW.graph_id IS OLD.graph_id AND NEW.op_id IS OLD.op_id BEGIN
  INSERT INTO sharding_text_adds VALUES (NEW.run_id, NEW.sharding);
  UPDATE sharding_decision_rows SET name = NEW.name,
         sharding_id = (SELECT sharding_id FROM sharding_texts WHERE run_id = NEW.run_id AND sharding = NEW.sharding),
         source = NEW.source, via = NEW.via, source_file = NEW.source_file, source_line = NEW.source_line,
         from_op_id = NEW.from_op_id
   WHERE run_id = OLD.run_id AND graph_id = OLD.graph_id AND op_id = OLD.op_id;
END;

CREATE TRIGGER IF NOT EXISTS sharding_decisions_move INSTEAD OF UPDATE ON sharding_decisions
  WHEN NOT (NEW.run_id IS OLD.run_id AND NEW.graph_id IS OLD.graph_id AND NEW.op_id IS OLD.op_id) BEGIN
  INSERT INTO sharding_text_adds VALUES (NEW.run_id, NEW.sharding);
  INSERT INTO sharding_decision_rows VALUES (NEW.run_id, NEW.graph_id, NEW.op_id, NEW.name,
         (SELECT sharding_id FROM sharding_texts WHERE run_id = NEW.run_id AND sharding = NEW.sharding),
         NEW.source, NEW.via, NEW.source_file, NEW.source_line, NEW.from_op_id);
  DELETE FROM sharding_decision_rows
   WHERE changes() = 1 AND run_id = OLD.run_id AND graph_id = OLD.graph_id AND op_id = OLD.op_id;
END;
