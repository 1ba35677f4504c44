-- Undo of version 13: every runnable row is a pick candidate again (the pick's executing-key probe
-- steps over a busy key's rows, as before).
DROP TRIGGER IF EXISTS durable_fair_promoted ON durable_instances;
DROP TRIGGER IF EXISTS durable_key_deleted ON durable_instances;
DROP TRIGGER IF EXISTS durable_key_updated ON durable_instances;
DROP TRIGGER IF EXISTS durable_key_inserted ON durable_instances;
DROP TRIGGER IF EXISTS durable_key_wait_updated ON durable_instances;
DROP TRIGGER IF EXISTS durable_key_wait_inserted ON durable_instances;
DROP FUNCTION IF EXISTS durable_key_changed();
DROP FUNCTION IF EXISTS durable_key_wait();
DROP FUNCTION IF EXISTS durable_key_elect(text, bigint, integer, timestamptz);
DROP INDEX IF EXISTS durable_instances_key_head_idx;
DROP INDEX IF EXISTS durable_instances_key_waiting_idx;
DROP INDEX IF EXISTS durable_instances_fair_pick_idx;
CREATE INDEX durable_instances_fair_pick_idx
    ON durable_instances ((queue || chr(31) || fairness_key), priority, eligible_at, id)
    WHERE status = 'runnable' AND fairness_key IS NOT NULL;
DROP INDEX IF EXISTS durable_instances_pick_idx;
CREATE INDEX durable_instances_pick_idx
    ON durable_instances (queue, priority, eligible_at, id) WHERE status = 'runnable';
ALTER TABLE durable_instances DROP COLUMN IF EXISTS key_waiting;
