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
-- would. The election itself is version 13's, unchanged: renamed durable_key_elect_held, it runs
-- once the wrapper below holds the key's lock (advisory locks are re-entrant: its own lock call
-- then returns at once).
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

ALTER FUNCTION durable_key_elect(text, bigint, integer, timestamptz) RENAME TO durable_key_elect_held;

CREATE FUNCTION durable_key_elect(k text, cand bigint DEFAULT NULL, cand_priority integer DEFAULT NULL,
                                  cand_eligible timestamptz DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
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
    PERFORM durable_key_elect_held(k, cand, cand_priority, cand_eligible);
END
$$;
