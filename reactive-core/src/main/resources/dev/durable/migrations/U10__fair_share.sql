-- Undo of version 10: fairness keys are dropped with their column.
-- The follow-up trigger's function as migration 9 made it.
CREATE OR REPLACE FUNCTION durable_follow_up() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO durable_instances (id, type, type_version, queue, priority, step, state, max_attempts, eligible_at,
                                   concurrency_key, correlation_key, correlation_statuses, gate_name, gate_shard,
                                   rate_limit, rate_weight, rate_partition, debounce_until, trace_context)
    SELECT (f->>'id')::bigint, f->>'type', (f->>'type_version')::int, f->>'queue', (f->>'priority')::int,
           f->>'step', NULLIF(f->'state', 'null'::jsonb), (f->>'max_attempts')::int,
           (f->>'eligible_at')::timestamptz, f->>'concurrency_key', f->>'correlation_key',
           ARRAY(SELECT jsonb_array_elements_text(f->'correlation_statuses')),
           f->>'gate_name', (f->>'gate_shard')::int, f->>'rate_limit', (f->>'rate_weight')::int,
           f->>'rate_partition', (f->>'debounce_until')::timestamptz, f->>'trace_context'
      FROM (SELECT OLD.follow_up AS f) x
    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING;
    RETURN NULL;
END
$$;
-- Per-key cap gates ('fairness.' || queue) go with fairness: no engine of version 9 admits them.
-- Executing rows release their slot through the gate trigger; then the counters go.
UPDATE durable_instances SET gate_name = NULL, concurrency_key = NULL, gate_shard = NULL
 WHERE gate_name = 'fairness.' || queue;
DELETE FROM durable_gate_slots WHERE gate LIKE 'fairness.%';
DROP TRIGGER IF EXISTS durable_fair_runnable ON durable_instances;
DROP TRIGGER IF EXISTS durable_fair_inserted ON durable_instances;
DROP FUNCTION IF EXISTS durable_fair_activate();
DROP TABLE IF EXISTS durable_fair_keys;
DROP INDEX IF EXISTS durable_instances_fair_pick_idx;
ALTER TABLE durable_instances DROP COLUMN IF EXISTS fairness_key;
ALTER TABLE durable_history DROP COLUMN IF EXISTS fairness_key;
