-- Undo of version 3: version 1's election, which leaves a key without a head when its chosen row
-- leaves meanwhile.
CREATE OR REPLACE FUNCTION durable_key_elect_held(k text, cand bigint DEFAULT NULL, cand_priority integer DEFAULT NULL,
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
    -- A key with an executing row: every runnable row of the key waits.
    IF EXISTS (SELECT 1 FROM durable_instances e
                WHERE e.concurrency_key = k AND e.status = 'executing' AND e.gate_name IS NULL) THEN
        UPDATE durable_instances SET key_waiting = true
         WHERE concurrency_key = k AND gate_name IS NULL AND status = 'runnable' AND NOT key_waiting;
        RETURN;
    END IF;
    -- The runnable head, if any (more than one only after a path nobody foresaw: the best of them).
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
    -- The best waiting row: the first of each distinct priority (one descent each of the key-waiting
    -- index), then the best of those by the rules above.
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
    -- The head stays unless the best waiting row beats it.
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
