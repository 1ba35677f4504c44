-- Durable schema, version 4: what the admin API's listing, search and counts ride (DurableAdmin).
--
-- The history is written once per instance and never updated, so its indexes cost one entry each per
-- settled instance and nothing afterwards; the hot table gets no new index (its rows are the live ones,
-- few, and each of its transitions would pay for another index). The admin statements are in
-- internal/sql/AdminSql.java, each with the index it rides.
--
-- Only the indexes of the common listings are created here: every settled job pays for them (issue 16's
-- budget for a whole plain job is 1,000 WAL bytes). A settled plain job writes about 78 bytes of WAL for
-- this version's indexes (benchmarks/README, AdminWalCost). The search indexes on type and on args/state
-- (a GIN index: 313 bytes per settled job alone) are opt-in: DurableAdmin.createSearchIndexes builds them
-- concurrently on a running system; without them those searches are filters on the walk the other
-- conditions choose, still exact.

-- Listing by queue, newest or oldest first: a walk of (queue, id) in id order that stops at the page.
-- One btree entry per settled instance (about 76 bytes of WAL and 32 bytes of index with a short name).
-- Failed and cancelled rows by queue ride durable_history_unsuccessful_idx (version 3).
CREATE INDEX durable_history_queue_idx ON durable_history (queue, id);

-- Correlation key, exact or by prefix: byte order (text_pattern_ops) answers both as a range. Only keyed
-- rows pay an entry; a plain job pays nothing here.
CREATE INDEX durable_history_correlation_idx ON durable_history (correlation_key text_pattern_ops)
    WHERE correlation_key IS NOT NULL;

-- Time ranges on the history: rows arrive in inserted order closely enough for a BRIN index (a few pages
-- for millions of rows, next to nothing per insert). settled_at has its own BRIN index since version 3.
CREATE INDEX durable_history_inserted_brin ON durable_history USING brin (inserted_at);

-- Counts by queue and status without counting: ANALYZE keeps the most common (queue, status)
-- combinations with their frequencies, which times the table's estimated row count gives the
-- settled counts (pg_stats_ext). Costs nothing per row.
CREATE STATISTICS durable_history_queue_status (mcv) ON queue, status FROM durable_history;

-- Attempt history. The instance's row is its last attempt (attempt, step, worker while it runs, error,
-- status); an attempt that ended unsuccessfully while the instance lived on (an error retried with
-- backoff, a lease lost to the reaper) leaves a row here as its row moves on to the next try. A plain
-- job that succeeds at once writes nothing here; one retried five times writes five rows. Deleted with
-- the instance (GC and the admin's delete); a retry in place keeps them.
CREATE TABLE durable_attempts (
    instance_id  bigint      NOT NULL,
    attempt      integer     NOT NULL,
    step         text        NOT NULL,
    -- The claim that ran it, and when the claim (or its last inline step) began.
    worker       text,
    started_at   timestamptz,
    finished_at  timestamptz NOT NULL DEFAULT now(),
    -- 'retried' (it failed and runs again after its backoff) or 'lease_lost' (its worker's lease expired).
    outcome      text        NOT NULL,
    error        text
) WITH (fillfactor = 100);
CREATE INDEX durable_attempts_instance_idx ON durable_attempts (instance_id);

-- An executing row that goes back to runnable at the same step and the same attempt ended that attempt
-- unsuccessfully: the commit of an error to retry, or the reaper (whose error names the lost worker).
-- A release of an unstarted claim, or a step handing its attempt back, lowers the attempt; a next step
-- changes the step or resets the attempt: neither is recorded. Only the WHEN clause runs for the other
-- updates (claims, heartbeats, commits), and writes nothing.
CREATE FUNCTION durable_attempt_ended() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO durable_attempts (instance_id, attempt, step, worker, started_at, outcome, error)
    VALUES (OLD.id, OLD.attempt, OLD.step, OLD.claimed_by, OLD.updated_at,
            CASE WHEN starts_with(NEW.last_error, 'worker ' || OLD.claimed_by || ' lost: ') THEN 'lease_lost'
                 ELSE 'retried' END,
            NEW.last_error);
    RETURN NULL;
END
$$;

CREATE TRIGGER durable_attempt_ended
    AFTER UPDATE ON durable_instances
    FOR EACH ROW
    WHEN (OLD.status = 'executing' AND NEW.status = 'runnable' AND NEW.attempt = OLD.attempt
          AND NEW.step = OLD.step)
    EXECUTE FUNCTION durable_attempt_ended();

-- The limits a settled row ran under, so a retry in place runs under them again (a gated or rate-limited
-- job retried without them could exceed the limit). Null for a row without limits: a plain job's history
-- row is no longer (the columns fit in the null bitmap it already has).
ALTER TABLE durable_history ADD COLUMN gate_name text, ADD COLUMN gate_shard integer, ADD COLUMN rate_limit text,
                            ADD COLUMN rate_weight integer, ADD COLUMN rate_partition text;
CREATE OR REPLACE VIEW durable_instances_all AS
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, awaited_signals, await_deadline, parent_id, children_pending, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, correlation_statuses, correlation_slot,
       claimed_by, lease_expires_at, cancel_requested, has_signals, has_children, inserted_at, updated_at
  FROM durable_instances
UNION ALL
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, NULL, NULL, parent_id, 0, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, NULL, NULL,
       NULL, NULL, false, false, false, inserted_at, settled_at
  FROM durable_history;
