-- Undo of version 10: fairness keys are dropped with their column.
DROP TRIGGER IF EXISTS durable_fair_runnable ON durable_instances;
DROP TRIGGER IF EXISTS durable_fair_inserted ON durable_instances;
DROP FUNCTION IF EXISTS durable_fair_activate();
DROP TABLE IF EXISTS durable_fair_keys;
DROP INDEX IF EXISTS durable_instances_fair_pick_idx;
ALTER TABLE durable_instances DROP COLUMN IF EXISTS fairness_key;
