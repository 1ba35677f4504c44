-- Durable schema, version 13: rows of a busy concurrency key wait outside the pick indexes.
--
-- An ungated concurrency key (concurrency_key set, gate_name null) runs at most one row at a time
-- (durable_instances_executing_key_uq). Before this version every runnable row of such a key sat in
-- the pick index, and each pick fetched and probed every one of them while the key was executing
-- (1M rows of one busy key: 43,000 pages per pick). Now at most one row per ungated key is a pick
-- candidate: the key's head (runnable or executing, key_waiting false). Its other runnable rows have
-- key_waiting set: they stay 'runnable' for every reader (admin, dashboard, views, counts), but the
-- pick indexes leave them out, and they wait in their own index in the order a promotion reads.
--
-- The triggers below keep that true on every path that changes a keyed row (insert, claim, settle,
-- retry, park, signal, cancel, release, reaper, key change, admin, delete to history): a row entering
-- runnable under a key first waits (BEFORE triggers, no extra write), then the key's election
-- (durable_key_elect) picks its head. Rows without a key or with a gate match no trigger's WHEN and
-- no new index: plain jobs pay nothing. A default constant: adding the column rewrites nothing.
ALTER TABLE durable_instances ADD COLUMN key_waiting boolean NOT NULL DEFAULT false;

-- Existing keyed backlogs: a key's executing row is its head, else its first row in election order
-- (due rows by priority, eligible_at, id; else the earliest eligible); every other runnable row waits.
UPDATE durable_instances i SET key_waiting = true
  FROM (SELECT r.id,
               row_number() OVER (PARTITION BY r.concurrency_key
                                  ORDER BY r.eligible_at > now(), CASE WHEN r.eligible_at <= now() THEN r.priority END,
                                           r.eligible_at, r.priority, r.id) AS place,
               EXISTS (SELECT 1 FROM durable_instances e
                        WHERE e.concurrency_key = r.concurrency_key AND e.status = 'executing'
                          AND e.gate_name IS NULL) AS busy
          FROM durable_instances r
         WHERE r.status = 'runnable' AND r.concurrency_key IS NOT NULL AND r.gate_name IS NULL) w
 WHERE i.id = w.id AND (w.place > 1 OR w.busy);

-- The pick indexes leave waiting rows out (same names and keys; the picks add NOT key_waiting).
DROP INDEX durable_instances_pick_idx;
CREATE INDEX durable_instances_pick_idx
    ON durable_instances (queue, priority, eligible_at, id) WHERE status = 'runnable' AND NOT key_waiting;
DROP INDEX durable_instances_fair_pick_idx;
CREATE INDEX durable_instances_fair_pick_idx
    ON durable_instances ((queue || chr(31) || fairness_key), priority, eligible_at, id)
    WHERE status = 'runnable' AND fairness_key IS NOT NULL AND NOT key_waiting;

-- A key's waiting rows in promotion order: one descent per distinct priority finds the best due row
-- and the earliest eligible one. key_waiting implies runnable under an ungated key (triggers below).
CREATE INDEX durable_instances_key_waiting_idx
    ON durable_instances (concurrency_key, priority, eligible_at, id) WHERE key_waiting;

-- A key's head, found by its key. Not unique: the election's lock is what keeps one head per key; a
-- duplicate from a path nobody foresaw must cost an extra candidate, never a failed statement.
CREATE INDEX durable_instances_key_head_idx
    ON durable_instances (concurrency_key)
    WHERE NOT key_waiting AND status IN ('runnable', 'executing') AND concurrency_key IS NOT NULL AND gate_name IS NULL;

-- Elects the head of ungated key k. Serialised per key by a transaction-scoped advisory lock (class
-- 0x4B455957, 'KEYW', object the key's hash; the pick's try-locks use the one-bigint space, so the
-- two never meet), held to commit: an election then sees every committed change of the key, and a
-- transaction that inserts, settles or retries a keyed row waits for another's election of the same
-- key. The pick takes no part: claiming the head keeps it head, and the pick never waits on this lock.
-- Rules: an executing row is the head (runnable rows beside it wait); else of the runnable head and
-- the best waiting row, a due row wins over a future one; among due rows (priority, eligible_at, id);
-- among future rows the earliest eligible (eligible_at, priority, id), so a future head never holds
-- back a sibling that comes due first. Locks: the advisory lock; the rows it flips.
CREATE FUNCTION durable_key_elect(k text, cand bigint DEFAULT NULL, cand_priority integer DEFAULT NULL,
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
BEGIN
    PERFORM pg_advisory_xact_lock(1262836055, hashtext(k));
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

-- A row entering runnable under an ungated key (insert, retry, release, reaper, signal, key change)
-- first waits; a row leaving runnable or its key stops waiting. Sets the new version's flag only:
-- no other row is touched, so an insert an ON CONFLICT clause skips leaves nothing behind.
CREATE FUNCTION durable_key_wait() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    NEW.key_waiting := NEW.concurrency_key IS NOT NULL AND NEW.gate_name IS NULL AND NEW.status = 'runnable';
    RETURN NEW;
END
$$;

CREATE TRIGGER durable_key_wait_inserted
    BEFORE INSERT ON durable_instances
    FOR EACH ROW
    WHEN (NEW.concurrency_key IS NOT NULL AND NEW.gate_name IS NULL AND NEW.status = 'runnable')
    EXECUTE FUNCTION durable_key_wait();

CREATE TRIGGER durable_key_wait_updated
    BEFORE UPDATE ON durable_instances
    FOR EACH ROW
    WHEN ((NEW.concurrency_key IS NOT NULL AND NEW.gate_name IS NULL AND NEW.status = 'runnable'
           AND NOT NEW.key_waiting
           AND (OLD.status <> 'runnable' OR OLD.concurrency_key IS DISTINCT FROM NEW.concurrency_key
                OR OLD.gate_name IS NOT NULL))
          OR (NEW.key_waiting
              AND NOT (NEW.concurrency_key IS NOT NULL AND NEW.gate_name IS NULL AND NEW.status = 'runnable')))
    EXECUTE FUNCTION durable_key_wait();

-- After a keyed row changed, the keys it left and joined elect their heads (in key order, so one
-- row's two elections take their locks in the same order everywhere).
CREATE FUNCTION durable_key_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    was text;
    now_key text;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.concurrency_key IS NOT NULL AND OLD.gate_name IS NULL THEN
        was := OLD.concurrency_key;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.concurrency_key IS NOT NULL AND NEW.gate_name IS NULL THEN
        now_key := NEW.concurrency_key;
    END IF;
    -- Under REPEATABLE READ or SERIALIZABLE (a caller's own transaction inserting or signalling) an
    -- election would read the transaction's snapshot, not what committed since: a head that settled
    -- meanwhile would look busy while its settle's election could not see this row, and flipping a
    -- row a pick claimed since would fail the caller's transaction. So a row entering runnable there
    -- heads its key beside any other head rather than risk a key without one; the pick's
    -- executing-key probe still runs one at a time, and the key's next election demotes the extra.
    IF now_key IS NOT NULL AND NEW.status = 'runnable' AND current_setting('transaction_isolation') <> 'read committed' THEN
        UPDATE durable_instances SET key_waiting = false WHERE id = NEW.id AND key_waiting;
        IF was IS NOT NULL AND was <> now_key THEN
            PERFORM durable_key_elect(was);
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' AND NEW.status = 'runnable' THEN
        PERFORM durable_key_elect(now_key, NEW.id, NEW.priority, NEW.eligible_at);
    ELSIF was IS NOT NULL AND now_key IS NOT NULL AND was <> now_key THEN
        PERFORM durable_key_elect(least(was, now_key));
        PERFORM durable_key_elect(greatest(was, now_key));
    ELSIF COALESCE(now_key, was) IS NOT NULL THEN
        PERFORM durable_key_elect(COALESCE(now_key, was));
    END IF;
    RETURN NULL;
END
$$;

-- An insert under a key: a new runnable row waits (BEFORE), then the election makes it the head if the
-- key had none or it is more urgent than the runnable head (a swap).
CREATE TRIGGER durable_key_inserted
    AFTER INSERT ON durable_instances
    FOR EACH ROW
    WHEN (NEW.concurrency_key IS NOT NULL AND NEW.gate_name IS NULL AND NEW.status IN ('runnable', 'executing'))
    EXECUTE FUNCTION durable_key_changed();

-- A keyed row changed status, key, gate, priority or schedule: re-elect. A claim (runnable head to
-- executing) and a step of a running row (executing to executing) keep the head and are left out, as
-- are the elections' own flag flips and heartbeats (none of the compared columns change).
CREATE TRIGGER durable_key_updated
    AFTER UPDATE ON durable_instances
    FOR EACH ROW
    WHEN ((OLD.concurrency_key IS NOT NULL OR NEW.concurrency_key IS NOT NULL)
          AND (OLD.gate_name IS NULL OR NEW.gate_name IS NULL)
          AND (OLD.status, OLD.concurrency_key, OLD.gate_name, OLD.priority, OLD.eligible_at)
              IS DISTINCT FROM (NEW.status, NEW.concurrency_key, NEW.gate_name, NEW.priority, NEW.eligible_at)
          AND NOT (NEW.status = 'executing' AND OLD.status IN ('runnable', 'executing')
                   AND NEW.concurrency_key IS NOT DISTINCT FROM OLD.concurrency_key
                   AND NEW.gate_name IS NOT DISTINCT FROM OLD.gate_name))
    EXECUTE FUNCTION durable_key_changed();

-- A head deleted (settled into history, garbage collected, removed by hand): its key's next row.
CREATE TRIGGER durable_key_deleted
    AFTER DELETE ON durable_instances
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL AND OLD.gate_name IS NULL AND OLD.status IN ('runnable', 'executing')
          AND NOT OLD.key_waiting)
    EXECUTE FUNCTION durable_key_changed();

-- A fair queue's row promoted to head is a pick candidate again: its key is walked (migration 10).
CREATE TRIGGER durable_fair_promoted
    AFTER UPDATE OF key_waiting ON durable_instances
    FOR EACH ROW
    WHEN (NEW.fairness_key IS NOT NULL AND NEW.status = 'runnable' AND OLD.key_waiting AND NOT NEW.key_waiting)
    EXECUTE FUNCTION durable_fair_activate();
