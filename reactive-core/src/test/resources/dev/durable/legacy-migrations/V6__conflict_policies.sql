-- Durable schema, version 6: conflict policies of a keyed insert (replace, debounce).

-- follow_up: the request that replaced or debounced this live instance after it had started, kept
-- as the row it will insert (the newest one wins; its id was drawn when the first one came). It is
-- inserted as a new runnable instance when this one settles, so at most one follow-up per key waits.
-- debounce_until: the latest a debounced instance waits, however often its key is inserted again
-- (the first debounced insert's time plus its maxWait); null when it has no such bound.
-- Both are nullable without a default: adding them rewrites nothing.
ALTER TABLE durable_instances ADD COLUMN follow_up jsonb, ADD COLUMN debounce_until timestamptz;

-- The follow-up of a settling instance goes in as the instance settles, in the same statement's
-- transaction. If the key stays occupied after the holder settles (a key occupied in a terminal
-- status), the follow-up is dropped: such a key is inserted at most once.
CREATE FUNCTION durable_follow_up() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO durable_instances (id, type, type_version, queue, priority, step, state, max_attempts, eligible_at,
                                   concurrency_key, correlation_key, correlation_statuses, gate_name, gate_shard,
                                   rate_limit, rate_weight, rate_partition, debounce_until)
    SELECT (f->>'id')::bigint, f->>'type', (f->>'type_version')::int, f->>'queue', (f->>'priority')::int,
           f->>'step', NULLIF(f->'state', 'null'::jsonb), (f->>'max_attempts')::int,
           (f->>'eligible_at')::timestamptz, f->>'concurrency_key', f->>'correlation_key',
           ARRAY(SELECT jsonb_array_elements_text(f->'correlation_statuses')),
           f->>'gate_name', (f->>'gate_shard')::int, f->>'rate_limit', (f->>'rate_weight')::int,
           f->>'rate_partition', (f->>'debounce_until')::timestamptz
      FROM (SELECT OLD.follow_up AS f) x
    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING;
    RETURN NULL;
END
$$;

-- A live holder settles by moving to the history (a delete here) ...
CREATE TRIGGER durable_follow_up_moved
    AFTER DELETE ON durable_instances
    FOR EACH ROW
    WHEN (OLD.follow_up IS NOT NULL AND OLD.status NOT IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION durable_follow_up();

-- ... or, when its key stays occupied once settled, by an update to a terminal status.
CREATE TRIGGER durable_follow_up_settled
    AFTER UPDATE OF status ON durable_instances
    FOR EACH ROW
    WHEN (OLD.follow_up IS NOT NULL AND OLD.status NOT IN ('done', 'failed', 'cancelled')
          AND NEW.status IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION durable_follow_up();
