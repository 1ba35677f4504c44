-- Undo of version 12: the windows are dropped with their columns.
-- The follow-up trigger's function as migration 10 made it.
CREATE OR REPLACE FUNCTION durable_follow_up() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO durable_instances (id, type, type_version, queue, priority, step, state, max_attempts, eligible_at,
                                   concurrency_key, correlation_key, correlation_statuses, gate_name, gate_shard,
                                   rate_limit, rate_weight, rate_partition, debounce_until, trace_context,
                                   fairness_key)
    SELECT (f->>'id')::bigint, f->>'type', (f->>'type_version')::int, f->>'queue', (f->>'priority')::int,
           f->>'step', NULLIF(f->'state', 'null'::jsonb), (f->>'max_attempts')::int,
           (f->>'eligible_at')::timestamptz, f->>'concurrency_key', f->>'correlation_key',
           ARRAY(SELECT jsonb_array_elements_text(f->'correlation_statuses')),
           f->>'gate_name', (f->>'gate_shard')::int, f->>'rate_limit', (f->>'rate_weight')::int,
           f->>'rate_partition', (f->>'debounce_until')::timestamptz, f->>'trace_context', f->>'fairness_key'
      FROM (SELECT OLD.follow_up AS f) x
    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING;
    RETURN NULL;
END
$$;
ALTER TABLE durable_instances DROP COLUMN IF EXISTS window_name, DROP COLUMN IF EXISTS window_weight,
                              DROP COLUMN IF EXISTS window_partition;
ALTER TABLE durable_history DROP COLUMN IF EXISTS window_name, DROP COLUMN IF EXISTS window_weight,
                            DROP COLUMN IF EXISTS window_partition;
