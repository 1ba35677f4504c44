-- Undo of version 1 (Flyway's undo naming). Used by tests and by users who remove Durable.
DROP TABLE IF EXISTS durable_rate_buckets;
DROP TABLE IF EXISTS durable_gate_slots;
DROP TABLE IF EXISTS durable_signals;
DROP TABLE IF EXISTS durable_instances;
DROP FUNCTION IF EXISTS durable_child_settled();
DROP FUNCTION IF EXISTS durable_gate_release();
