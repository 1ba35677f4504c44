-- Undo of version 4: the admin API's indexes and statistics, the opt-in search indexes, the attempts.
CREATE OR REPLACE VIEW durable_instances_all AS
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, awaited_signals, await_deadline, parent_id, children_pending, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, correlation_statuses, correlation_slot,
       claimed_by, lease_expires_at, cancel_requested, has_signals, has_children, inserted_at, updated_at
  FROM durable_instances
UNION ALL
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, NULL, NULL, parent_id, 0, concurrency_key, NULL,
       NULL, NULL, NULL, NULL, correlation_key, NULL, NULL,
       NULL, NULL, false, false, false, inserted_at, settled_at
  FROM durable_history;
ALTER TABLE durable_history DROP COLUMN IF EXISTS gate_name, DROP COLUMN IF EXISTS gate_shard,
                            DROP COLUMN IF EXISTS rate_limit, DROP COLUMN IF EXISTS rate_weight,
                            DROP COLUMN IF EXISTS rate_partition;
DROP TRIGGER IF EXISTS durable_attempt_ended ON durable_instances;
DROP FUNCTION IF EXISTS durable_attempt_ended();
DROP TABLE IF EXISTS durable_attempts;
DROP STATISTICS IF EXISTS durable_history_queue_status;
DROP INDEX IF EXISTS durable_history_inserted_brin;
DROP INDEX IF EXISTS durable_history_state_idx;
DROP INDEX IF EXISTS durable_history_correlation_idx;
DROP INDEX IF EXISTS durable_history_type_idx;
DROP INDEX IF EXISTS durable_history_queue_idx;
