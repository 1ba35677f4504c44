-- Durable's schema, version 6: executing rows are found through a ledger of claims, not through an
-- index every claim wrote an entry to.
--
-- A claim is never a HOT update (its status moves the row out of the pick index), so it writes an
-- entry to every index whose predicate the executing row meets: the primary key and, until now,
-- durable_instances_executing_idx (every executing row, by id). That index served the reaper, the
-- startup reclaim and awaitIdle, which look for executing rows rarely, and the limiter's recounts of
-- gated rows; a plain job paid for it on every claim: one index entry and 64 bytes of WAL, a fifth
-- of the claim's WAL (benchmarks/README.md, "A plain job pays only for what it uses").
--
-- Now a claiming statement records what it claimed in durable_claims: one row per statement and
-- worker, holding the ids it claimed (a pick's hundreds of rows cost one ledger row, so a plain
-- job's share is a hundredth of a row and no index entry of its own). The triggers below write it,
-- whatever made the claim: the picks, the claim-on-insert, an engine of version 5 that knows nothing
-- of the ledger, a user's own SQL. The reaper reads the ledger rows whose check time has come, looks
-- their ids up by primary key, recovers the lapsed ones and forgets a ledger row once none of its rows
-- is still executing under its claim, so with the reaper off on every engine the ledger only grows.
-- Only gated executing rows keep an index (durable_instances_gated_executing_idx): the limiter counts
-- their slots, and a gated job already writes its gate's counter. The admin lists executing rows by
-- the primary key's walk, as it lists every live status.

-- durable_claims: the claims of live executing rows, one row per claiming statement and worker.
--
-- Written by the triggers (a claim's own transaction), read and emptied by the reaper. Rows of a
-- claim ended meanwhile (settled, released, reaped, claimed again) stay until the reaper's next
-- look at check_at, so the ledger holds about one lease's worth of claims.
CREATE TABLE durable_claims (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The stamp the claimed rows carry (durable_instances.claim_xid): null for claims that record no
    -- transaction (made as the row was inserted, or by an engine of version 4).
    claim_xid   bigint,
    claimed_by  text        NOT NULL,
    ids         bigint[]    NOT NULL,
    -- When the reaper looks next: the earliest lease of the recorded rows when they were recorded, then
    -- the earliest lease of those still executing under the claim (a heartbeat renews leases, not this).
    check_at    timestamptz NOT NULL
)
-- A queue of its own: rows come and go at the engines' pick rate.
WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);

-- The reaper's walk: ledger rows whose check time has come, earliest first.
CREATE INDEX durable_claims_check_idx ON durable_claims (check_at);

-- The rows that enter executing or change claim in one UPDATE statement (a pick's claim, a
-- version-4 engine's claim that keeps an old stamp), recorded by stamp and worker; and executing rows
-- whose lease it moves earlier (an operator's or a test's hand, or a heartbeat a few milliseconds
-- behind an inline step's renewal: otherwise the engines extend leases), so that the ledger never
-- looks later than a lease can lapse. A statement that does neither
-- (a heartbeat, a commit, a cancel) records nothing.
CREATE FUNCTION durable_claims_record_updated() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT SET enable_nestloop = off SET enable_mergejoin = off AS $$
BEGIN
    INSERT INTO durable_claims (claim_xid, claimed_by, ids, check_at)
    SELECT n.claim_xid, n.claimed_by, array_agg(n.id), min(n.lease_expires_at)
      FROM durable_claims_after n
      JOIN durable_claims_before o ON o.id = n.id
     WHERE n.status = 'executing'
       AND (o.status <> 'executing' OR o.claimed_by IS DISTINCT FROM n.claimed_by
            OR o.claim_xid IS DISTINCT FROM n.claim_xid OR n.lease_expires_at < o.lease_expires_at)
     GROUP BY n.claim_xid, n.claimed_by;
    RETURN NULL;
END
$$;

-- A row inserted already claimed (an idle engine's claim-on-insert, at most its free run slots at a
-- time): recorded alone. A row trigger whose WHEN only such rows pass, so that a plain insert pays a
-- comparison, not a transition table (a statement trigger's copy of every inserted row cost the
-- shootout's 1,000-row inserts about 1 µs a row).
CREATE FUNCTION durable_claims_record_inserted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO durable_claims (claim_xid, claimed_by, ids, check_at)
    VALUES (NEW.claim_xid, NEW.claimed_by, ARRAY[NEW.id], NEW.lease_expires_at);
    RETURN NULL;
END
$$;

-- Once per UPDATE statement, however many rows it claimed: a statement trigger with transition
-- tables. Its join of the old and new rows must be a hash join: a plan cached from a statement of a
-- few rows (plpgsql keeps it) joined a pick's hundreds by nested loop, re-reading the old rows once
-- per new row (a pick of 250 rows cost 9 ms more; the shootout's PostgreSQL CPU per job doubled).
CREATE TRIGGER durable_claims_updated
    AFTER UPDATE ON durable_instances
    REFERENCING OLD TABLE AS durable_claims_before NEW TABLE AS durable_claims_after
    FOR EACH STATEMENT
    EXECUTE FUNCTION durable_claims_record_updated();

CREATE TRIGGER durable_claims_inserted
    AFTER INSERT ON durable_instances
    FOR EACH ROW
    WHEN (NEW.status = 'executing')
    EXECUTE FUNCTION durable_claims_record_inserted();

-- The rows executing now (claimed before this version): the triggers lock the table against claims
-- until this transaction commits, and the migration runs READ COMMITTED (this statement sees every
-- claim committed before that lock), so none is missed.
INSERT INTO durable_claims (claim_xid, claimed_by, ids, check_at)
SELECT claim_xid, claimed_by, array_agg(id), min(lease_expires_at)
  FROM durable_instances
 WHERE status = 'executing'
 GROUP BY claim_xid, claimed_by;

-- Executing rows of a gate: the limiter's recounts and usage read them (LimiterSql, LimitUsageSql,
-- the fair share's cap check). By id, as the index it replaces: a heartbeat stays a HOT update.
CREATE INDEX durable_instances_gated_executing_idx ON durable_instances (id)
    WHERE status = 'executing' AND gate_name IS NOT NULL;

DROP INDEX durable_instances_executing_idx;
