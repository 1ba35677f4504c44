-- Undo of version 4: the admin API's indexes and statistics, the opt-in search indexes, the attempts.
DROP TRIGGER IF EXISTS durable_attempt_ended ON durable_instances;
DROP FUNCTION IF EXISTS durable_attempt_ended();
DROP TABLE IF EXISTS durable_attempts;
DROP STATISTICS IF EXISTS durable_history_queue_status;
DROP INDEX IF EXISTS durable_history_inserted_brin;
DROP INDEX IF EXISTS durable_history_state_idx;
DROP INDEX IF EXISTS durable_history_correlation_idx;
DROP INDEX IF EXISTS durable_history_type_idx;
DROP INDEX IF EXISTS durable_history_queue_idx;
