-- Durable schema, version 10: fair share across the keys (tenants) of a queue.
--
-- fairness_key: the tenant (or any key) a row's claims are shared by; null for rows of queues
-- without fairness, which pay nothing more: they enter neither the index nor the trigger below.
-- Nullable without a default: adding it rewrites nothing.
ALTER TABLE durable_instances ADD COLUMN fairness_key text;
-- Kept with a settled row, so a retry in place or a replay brings it back under its key (the fair pick
-- reads keyed rows only).
ALTER TABLE durable_history ADD COLUMN fairness_key text;

-- The fair pick reads one key's due rows at a time, in urgency order. Partial: unfair queues and
-- keyless rows write no entry here. Its leading column is (queue, key) as one value, so that a
-- per-key read can only be served by this index: on (queue, fairness_key, ...) the planner may read
-- the pick index instead, walking every other key's rows of the queue (it did, with a 1M-row key).
CREATE INDEX durable_instances_fair_pick_idx
    ON durable_instances ((queue || chr(31) || fairness_key), priority, eligible_at, id)
    WHERE status = 'runnable' AND fairness_key IS NOT NULL;

-- One row per (queue, key) that ever had work. pass: the key's virtual time (stride scheduling):
-- each claim advances it by 1 / weight, and the fair pick serves the keys of least pass first.
-- active: the key may have runnable rows (set by the trigger below whenever a row of the key becomes
-- runnable, cleared by the pick when it finds none), so the pick walks only keys with work.
-- wake_at: when a parked key's earliest scheduled row comes due (the pick walks such keys again).
-- weight: the weight the engine last stored for the key (used when its options give none).
CREATE TABLE durable_fair_keys (
    queue        text             NOT NULL,
    fairness_key text             NOT NULL,
    pass         double precision NOT NULL DEFAULT 0,
    active       boolean          NOT NULL DEFAULT true,
    wake_at      timestamptz,
    weight       double precision,
    PRIMARY KEY (queue, fairness_key)
);
CREATE INDEX durable_fair_keys_pass_idx ON durable_fair_keys (queue, pass, fairness_key) WHERE active;
CREATE INDEX durable_fair_keys_wake_idx ON durable_fair_keys (queue, wake_at) WHERE NOT active AND wake_at IS NOT NULL;
-- Keys parked for good, walked by maintenance (FairKeyHealer) to wake those whose row committed
-- after the pick parked them; the pick never reads them.
CREATE INDEX durable_fair_keys_parked_idx ON durable_fair_keys (queue, fairness_key) WHERE NOT active AND wake_at IS NULL;

-- A row of a key became runnable (insert, retry, release, reaper, signal, join): the key is walked
-- again. Its pass joins the queue's virtual time (the least pass of its active keys), so a key that
-- was idle neither jumps ahead with credit saved while idle nor waits behind the others' backlog.
-- An already active key is only read, so a stream of inserts of a busy key takes no lock.
CREATE FUNCTION durable_fair_activate() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM durable_fair_keys k
                WHERE k.queue = NEW.queue AND k.fairness_key = NEW.fairness_key AND k.active) THEN
        RETURN NULL;
    END IF;
    INSERT INTO durable_fair_keys AS k (queue, fairness_key, pass)
    SELECT NEW.queue, NEW.fairness_key,
           COALESCE((SELECT min(a.pass) FROM durable_fair_keys a WHERE a.queue = NEW.queue AND a.active), 0)
    ON CONFLICT (queue, fairness_key) DO UPDATE
       SET active = true, wake_at = NULL, pass = greatest(k.pass, EXCLUDED.pass)
     WHERE NOT k.active;
    RETURN NULL;
END
$$;

CREATE TRIGGER durable_fair_inserted
    AFTER INSERT ON durable_instances
    FOR EACH ROW
    WHEN (NEW.fairness_key IS NOT NULL AND NEW.status = 'runnable')
    EXECUTE FUNCTION durable_fair_activate();

CREATE TRIGGER durable_fair_runnable
    AFTER UPDATE OF status ON durable_instances
    FOR EACH ROW
    WHEN (NEW.fairness_key IS NOT NULL AND NEW.status = 'runnable' AND OLD.status <> 'runnable')
    EXECUTE FUNCTION durable_fair_activate();

-- A follow-up (migration 6) keeps the fairness key of the request it was made from, so a fair
-- queue's follow-up is picked as its key's (a keyless row is not read by the fair pick); it keeps its
-- request's trace context too, as migration 9 made it.
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
