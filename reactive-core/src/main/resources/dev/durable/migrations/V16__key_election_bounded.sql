-- Durable schema, version 16: a key's election waits a bounded time for the key's lock.
--
-- Version 13's election (durable_key_elect) took the key's transaction-scoped advisory lock and
-- waited for it without bound. A caller's own transaction that inserts a row under a key holds that
-- lock until it commits, so an engine commit settling the key's head waited as long (up to the
-- engine connections' statement_timeout, then the whole batch of outcomes went again: one open
-- transaction stalled every outcome committed beside that key's).
--
-- Now the election tries the lock; when it is taken, it waits for it in the lock's queue (woken as
-- soon as it is free, in turn) under lock_timeout, within a budget of a quarter of a second per
-- transaction, whatever the number of elections the transaction runs (an insert of many rows under a
-- held key, a group commit over several held keys). Past the budget, or for a key this transaction
-- already gave up on, the election changes nothing: the key may have no head for a while, or keep
-- a runnable head beside a row that entered it executing (the executing-key index and the pick's
-- probe still run one row at a time). The key is written down in durable_key_skips, once per
-- transaction, in that transaction (a rollback takes it back with the change that needed it), and
-- the engines' maintenance (SkippedKeyElections, every second by default) elects it once its lock is
-- free. A lock_timeout ends two elections that wait on each other's keys before deadlock_timeout
-- would. Everything else is version 13's election, unchanged.
--
-- The budget and the keys given up are transaction-local settings (durable.key_wait_ms,
-- durable.keys_skipped: md5 of each key), reset when the transaction ends.

-- No unique key: an election that gives up must not wait either, and an insert that meets a key
-- another open transaction is writing down would wait for it.
CREATE TABLE durable_key_skips (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    concurrency_key text NOT NULL,
    skipped_at timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION durable_key_elect(k text, cand bigint DEFAULT NULL, cand_priority integer DEFAULT NULL,
                                  cand_eligible timestamptz DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    head_id bigint;
    head_priority integer;
    head_eligible timestamptz;
    best_id bigint;
    best_priority integer;
    best_eligible timestamptz;
    t timestamptz := now();
    mark text := ',' || md5(k) || ',';
    skipped text;
    spent integer;
    timeout_before text;
    wait_started timestamptz;
    got boolean;
BEGIN
    -- The key's lock: at once when free; else waited for in its queue within this transaction's
    -- budget (see the header), so a transaction that holds it for long (a caller's open transaction
    -- that inserted under the key) delays that key's next head, not this statement and the others
    -- it carries.
    IF NOT pg_try_advisory_xact_lock(1262836055, hashtext(k)) THEN
        skipped := COALESCE(current_setting('durable.keys_skipped', true), '');
        IF position(mark IN skipped) > 0 THEN
            RETURN;
        END IF;
        spent := COALESCE(NULLIF(current_setting('durable.key_wait_ms', true), ''), '0')::integer;
        got := false;
        IF spent < 250 THEN
            timeout_before := current_setting('lock_timeout');
            wait_started := clock_timestamp();
            PERFORM set_config('lock_timeout', (250 - spent) || 'ms', true);
            BEGIN
                PERFORM pg_advisory_xact_lock(1262836055, hashtext(k));
                got := true;
            EXCEPTION WHEN lock_not_available THEN
                got := false;
            END;
            PERFORM set_config('lock_timeout', timeout_before, true);
            PERFORM set_config('durable.key_wait_ms',
                               (spent + ceil(extract(epoch FROM clock_timestamp() - wait_started) * 1000))::text, true);
        END IF;
        IF NOT got THEN
            PERFORM set_config('durable.keys_skipped', COALESCE(NULLIF(skipped, ''), ',') || md5(k) || ',', true);
            INSERT INTO durable_key_skips (concurrency_key) VALUES (k);
            RETURN;
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM durable_instances e
                WHERE e.concurrency_key = k AND e.status = 'executing' AND e.gate_name IS NULL) THEN
        UPDATE durable_instances SET key_waiting = true
         WHERE concurrency_key = k AND gate_name IS NULL AND status = 'runnable' AND NOT key_waiting;
        RETURN;
    END IF;
    SELECT h.id, h.priority, h.eligible_at INTO head_id, head_priority, head_eligible
      FROM durable_instances h
     WHERE h.concurrency_key = k AND h.gate_name IS NULL AND h.status = 'runnable' AND NOT h.key_waiting
     ORDER BY h.eligible_at > t, CASE WHEN h.eligible_at <= t THEN h.priority END, h.eligible_at, h.priority, h.id
     LIMIT 1;
    IF cand IS NOT NULL AND head_id IS NOT NULL THEN
        -- An insert beside a runnable head: the other waiting rows lost to that head already, so
        -- only the new row can take its place (a bulk insert into one key costs a few probes a row).
        best_id := cand;
        best_priority := cand_priority;
        best_eligible := cand_eligible;
    ELSE
    WITH RECURSIVE levels AS (
        SELECT (SELECT min(w.priority) FROM durable_instances w WHERE w.concurrency_key = k AND w.key_waiting) AS priority
        UNION ALL
        SELECT (SELECT min(w.priority) FROM durable_instances w
                 WHERE w.concurrency_key = k AND w.key_waiting AND w.priority > l.priority)
          FROM levels l
         WHERE l.priority IS NOT NULL
    )
    SELECT f.id, f.priority, f.eligible_at INTO best_id, best_priority, best_eligible
      FROM levels l CROSS JOIN LATERAL (
           SELECT w.id, w.priority, w.eligible_at FROM durable_instances w
            WHERE w.concurrency_key = k AND w.key_waiting AND w.priority = l.priority
            ORDER BY w.eligible_at, w.id
            LIMIT 1) f
     ORDER BY f.eligible_at > t, CASE WHEN f.eligible_at <= t THEN f.priority END, f.eligible_at, f.priority, f.id
     LIMIT 1;
    END IF;
    IF best_id IS NOT NULL AND head_id IS NOT NULL AND NOT (
           (best_eligible <= t AND head_eligible > t)
        OR (best_eligible <= t AND head_eligible <= t
            AND (best_priority, best_eligible, best_id) < (head_priority, head_eligible, head_id))
        OR (best_eligible > t AND head_eligible > t
            AND (best_eligible, best_priority, best_id) < (head_eligible, head_priority, head_id))) THEN
        IF cand IS NOT NULL THEN
            RETURN;  -- the new row waits behind the head: nothing else changed
        END IF;
        best_id := NULL;
    END IF;
    IF best_id IS NULL THEN
        best_id := head_id;
    END IF;
    IF best_id IS NULL THEN
        RETURN;
    END IF;
    -- Every other runnable head waits (a row lock a pick holds is waited for: it may claim the row).
    UPDATE durable_instances SET key_waiting = true
     WHERE concurrency_key = k AND gate_name IS NULL AND status = 'runnable' AND NOT key_waiting AND id <> best_id;
    -- A pick that claimed the old head while this waited for its row lock made it the key's executor.
    IF EXISTS (SELECT 1 FROM durable_instances e
                WHERE e.concurrency_key = k AND e.status = 'executing' AND e.gate_name IS NULL) THEN
        UPDATE durable_instances SET key_waiting = true
         WHERE concurrency_key = k AND gate_name IS NULL AND status = 'runnable' AND NOT key_waiting;
        RETURN;
    END IF;
    UPDATE durable_instances SET key_waiting = false WHERE id = best_id AND key_waiting;
END
$$;
