-- Writes to the views that were tables before schema version 4
-- (shard_placements, sharding_decisions) as to those tables: a chip's
-- placement changed, added or removed splits its span; a decision's sharding
-- text is interned. Not in schema.sql: a file of version 3 still has the
-- tables when schema.sql runs, and a view's trigger on a table is an error.
-- A writer applies these after migrating (store/writer.cc, Migrate).
CREATE TRIGGER IF NOT EXISTS shard_placements_insert INSTEAD OF INSERT ON shard_placements BEGIN
  INSERT INTO shard_placement_spans SELECT run_id, tensor_id, tensor_name, NEW.device_id + 1, last_device,
         index_ranges, bytes FROM shard_placement_spans
   WHERE run_id = NEW.run_id AND tensor_id = NEW.tensor_id AND first_device <= NEW.device_id
     AND last_device > NEW.device_id;
  UPDATE shard_placement_spans SET last_device = NEW.device_id - 1
   WHERE run_id = NEW.run_id AND tensor_id = NEW.tensor_id AND first_device < NEW.device_id
     AND last_device >= NEW.device_id;
  INSERT OR REPLACE INTO shard_placement_spans VALUES (NEW.run_id, NEW.tensor_id, NEW.tensor_name, NEW.device_id,
         NEW.device_id, NEW.index_ranges, NEW.bytes);
END;
CREATE TRIGGER IF NOT EXISTS shard_placements_delete INSTEAD OF DELETE ON shard_placements BEGIN
  INSERT INTO shard_placement_spans SELECT run_id, tensor_id, tensor_name, OLD.device_id + 1, last_device,
         index_ranges, bytes FROM shard_placement_spans
   WHERE run_id = OLD.run_id AND tensor_id = OLD.tensor_id AND first_device <= OLD.device_id
     AND last_device > OLD.device_id;
  UPDATE shard_placement_spans SET last_device = OLD.device_id - 1
   WHERE run_id = OLD.run_id AND tensor_id = OLD.tensor_id AND first_device < OLD.device_id
     AND last_device >= OLD.device_id;
  DELETE FROM shard_placement_spans
   WHERE run_id = OLD.run_id AND tensor_id = OLD.tensor_id AND first_device = OLD.device_id;
END;
CREATE TRIGGER IF NOT EXISTS shard_placements_update INSTEAD OF UPDATE ON shard_placements BEGIN
  DELETE FROM shard_placements
   WHERE run_id = OLD.run_id AND tensor_id = OLD.tensor_id AND device_id = OLD.device_id;
  INSERT INTO shard_placements VALUES (NEW.run_id, NEW.tensor_id, NEW.tensor_name, NEW.device_id,
         NEW.index_ranges, NEW.bytes);
END;
CREATE TRIGGER IF NOT EXISTS sharding_decisions_insert INSTEAD OF INSERT ON sharding_decisions BEGIN
  INSERT INTO sharding_texts
  SELECT NEW.run_id, (SELECT coalesce(max(sharding_id), 0) + 1 FROM sharding_texts WHERE run_id = NEW.run_id),
         NEW.sharding
   WHERE NOT EXISTS (SELECT 1 FROM sharding_texts WHERE run_id = NEW.run_id AND sharding = NEW.sharding);
  INSERT OR REPLACE INTO sharding_decision_rows VALUES (NEW.run_id, NEW.graph_id, NEW.op_id, NEW.name,
         (SELECT sharding_id FROM sharding_texts WHERE run_id = NEW.run_id AND sharding = NEW.sharding),
         NEW.source, NEW.via, NEW.source_file, NEW.source_line, NEW.from_op_id);
END;
CREATE TRIGGER IF NOT EXISTS sharding_decisions_delete INSTEAD OF DELETE ON sharding_decisions BEGIN
  DELETE FROM sharding_decision_rows WHERE run_id = OLD.run_id AND graph_id = OLD.graph_id AND op_id = OLD.op_id;
END;
CREATE TRIGGER IF NOT EXISTS sharding_decisions_update INSTEAD OF UPDATE ON sharding_decisions BEGIN
  DELETE FROM sharding_decision_rows WHERE run_id = OLD.run_id AND graph_id = OLD.graph_id AND op_id = OLD.op_id;
  INSERT INTO sharding_decisions VALUES (NEW.run_id, NEW.graph_id, NEW.op_id, NEW.name, NEW.sharding, NEW.source,
         NEW.via, NEW.source_file, NEW.source_line, NEW.from_op_id);
END;
