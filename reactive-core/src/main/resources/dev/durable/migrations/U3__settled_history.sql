-- Undo of version 3: settled instances come back into the hot table.
ALTER TABLE durable_instances RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
                                     autovacuum_vacuum_cost_delay);
DROP INDEX IF EXISTS durable_instances_executing_idx;
CREATE INDEX durable_instances_lease_idx ON durable_instances (lease_expires_at) WHERE status = 'executing';
DROP TRIGGER IF EXISTS durable_gate_release_moved ON durable_instances;
DROP TRIGGER IF EXISTS durable_child_moved ON durable_instances;
DROP FUNCTION IF EXISTS durable_child_moved();
DROP VIEW IF EXISTS durable_instances_all;
INSERT INTO durable_instances (id, type, type_version, queue, priority, status, step, state, result, last_error,
                               attempt, max_attempts, eligible_at, parent_id, concurrency_key, correlation_key,
                               inserted_at, updated_at)
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, parent_id, concurrency_key, correlation_key, inserted_at, settled_at
  FROM durable_history;
DROP TABLE IF EXISTS durable_history;
