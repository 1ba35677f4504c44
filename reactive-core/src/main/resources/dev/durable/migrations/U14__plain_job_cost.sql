-- Undo of version 14: the executing index by worker, the history's queue index, fillfactor 50. The hot
-- table keeps its column order (no statement depends on it).
ALTER TABLE durable_instances SET (fillfactor = 50);
CREATE INDEX IF NOT EXISTS durable_history_queue_idx ON durable_history (queue, id);
DROP INDEX durable_instances_executing_idx;
CREATE INDEX durable_instances_executing_idx ON durable_instances (claimed_by) WHERE status = 'executing';
