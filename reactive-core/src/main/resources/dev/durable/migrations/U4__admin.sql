-- Undo of version 4: the admin API's indexes and statistics.
DROP STATISTICS IF EXISTS durable_history_queue_status;
DROP INDEX IF EXISTS durable_history_inserted_brin;
DROP INDEX IF EXISTS durable_history_state_idx;
DROP INDEX IF EXISTS durable_history_correlation_idx;
DROP INDEX IF EXISTS durable_history_type_idx;
DROP INDEX IF EXISTS durable_history_queue_idx;
