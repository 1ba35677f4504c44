-- Undo of the baseline (Flyway's undo naming): removes every object V1__baseline.sql created, with
-- their rows, and the admin's opt-in search indexes with the history. DurableEngine.migrateDown(0)
-- runs it to remove Durable; the schema itself and its durable_schema_version table stay.
-- The view first (it depends on the tables); a table takes its indexes, triggers, statistics and
-- identity sequence with it; the functions last (the triggers named them).
DROP VIEW IF EXISTS durable_instances_all;
DROP TABLE IF EXISTS durable_instances, durable_history, durable_signals, durable_attempts, durable_step_inputs,
    durable_forks, durable_gate_slots, durable_limit_permits, durable_rate_buckets, durable_window_counters,
    durable_fair_keys, durable_key_skips, durable_engines, durable_queue_pauses;
DROP FUNCTION IF EXISTS durable_child_settled(), durable_child_moved(), durable_gate_release(),
    durable_attempt_ended(), durable_step_input(), durable_follow_up(), durable_fair_activate(),
    durable_key_elect(text, bigint, integer, timestamptz), durable_key_elect_held(text, bigint, integer, timestamptz),
    durable_key_wait(), durable_key_changed();
