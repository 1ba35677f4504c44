-- Durable schema, version 12: a row stacks a sliding window beside its gate and its rate slot.
--
-- window_name names a Limits.Window the row is admitted by, in window_partition ('' when null), taking
-- window_weight; the pick admits it all or nothing with the row's gate and token bucket. The rate slot
-- (rate_limit) keeps naming a bucket, or a window as before this version. Settled rows keep them.
ALTER TABLE durable_instances ADD COLUMN window_name text, ADD COLUMN window_weight integer,
                              ADD COLUMN window_partition text;
ALTER TABLE durable_history ADD COLUMN window_name text, ADD COLUMN window_weight integer,
                            ADD COLUMN window_partition text;

-- The view gains the window at its end (fork reads its source through it).
CREATE OR REPLACE VIEW durable_instances_all AS
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, awaited_signals, await_deadline, parent_id, children_pending, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, correlation_statuses, correlation_slot,
       claimed_by, lease_expires_at, cancel_requested, has_signals, has_children, inserted_at, updated_at,
       trace_context, trace_last, window_name, window_weight, window_partition
  FROM durable_instances
UNION ALL
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, NULL, NULL, parent_id, 0, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, NULL, NULL,
       NULL, NULL, false, false, false, inserted_at, settled_at,
       trace_context, trace_last, window_name, window_weight, window_partition
  FROM durable_history;

-- A follow-up (migration 6) keeps its request's window too.
CREATE OR REPLACE FUNCTION durable_follow_up() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO durable_instances (id, type, type_version, queue, priority, step, state, max_attempts, eligible_at,
                                   concurrency_key, correlation_key, correlation_statuses, gate_name, gate_shard,
                                   rate_limit, rate_weight, rate_partition, debounce_until, trace_context,
                                   fairness_key, window_name, window_weight, window_partition)
    SELECT (f->>'id')::bigint, f->>'type', (f->>'type_version')::int, f->>'queue', (f->>'priority')::int,
           f->>'step', NULLIF(f->'state', 'null'::jsonb), (f->>'max_attempts')::int,
           (f->>'eligible_at')::timestamptz, f->>'concurrency_key', f->>'correlation_key',
           ARRAY(SELECT jsonb_array_elements_text(f->'correlation_statuses')),
           f->>'gate_name', (f->>'gate_shard')::int, f->>'rate_limit', (f->>'rate_weight')::int,
           f->>'rate_partition', (f->>'debounce_until')::timestamptz, f->>'trace_context', f->>'fairness_key',
           f->>'window_name', (f->>'window_weight')::int, f->>'window_partition'
      FROM (SELECT OLD.follow_up AS f) x
    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING;
    RETURN NULL;
END
$$;
