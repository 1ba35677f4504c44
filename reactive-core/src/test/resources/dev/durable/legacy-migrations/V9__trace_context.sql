-- Durable schema, version 9: the trace context that follows an instance (EngineOptions.tracePropagation).

-- trace_context: the W3C trace context of the caller that inserted the instance (a request, or the
-- step that spawned it or inserted it), as '<traceparent>[ <tracestate>]' (a traceparent holds no
-- space). Each run's span is its child. trace_last: the same for the span of the instance's last
-- run, so the next attempt (a retry, the next step) links to it. On a signal: its sender's, linked
-- from the span of the step that consumes it. Null when no tracing is configured: nullable columns
-- with no default rewrite nothing, and a null costs a row no byte beyond its null bitmap.
ALTER TABLE durable_instances ADD COLUMN trace_context text, ADD COLUMN trace_last text;
ALTER TABLE durable_history ADD COLUMN trace_context text, ADD COLUMN trace_last text;
ALTER TABLE durable_signals ADD COLUMN trace_context text;

-- The view gains the two columns at its end (a view's columns can only be added there).
CREATE OR REPLACE VIEW durable_instances_all AS
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, awaited_signals, await_deadline, parent_id, children_pending, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, correlation_statuses, correlation_slot,
       claimed_by, lease_expires_at, cancel_requested, has_signals, has_children, inserted_at, updated_at,
       trace_context, trace_last
  FROM durable_instances
UNION ALL
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, NULL, NULL, parent_id, 0, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, NULL, NULL,
       NULL, NULL, false, false, false, inserted_at, settled_at,
       trace_context, trace_last
  FROM durable_history;

-- A follow-up (version 6) carries the trace context of the request that made it.
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
