-- Durable's schema, version 4: the fleet's activity per queue and minute, and secrets the engines
-- on one database share.
--
-- durable_queue_minutes: how many runs of each queue completed, failed, were retried, were
-- cancelled and lost their lease, per minute of the database's clock. Every engine counts its own
-- outcomes in memory as they commit and adds them here every few seconds, one statement for all
-- its queues (QueueActivitySql): a job pays an increment in memory, never a statement, and the
-- rows are the same whichever engine or dashboard replica reads them, before and after a restart.
-- An engine that dies loses what it counted since its last flush (a few seconds); outcomes
-- committed on a caller's own transaction are not counted (the engine does not see that commit),
-- nor are rows failed in bulk when a type or version is removed (failUnmigratable, failUnrunnable).
-- A minute's row is written by each engine once per flush; GC deletes rows past the retention.
CREATE TABLE durable_queue_minutes (
    -- The minute (date_trunc('minute', now()) of the flush) and the queue.
    minute     timestamptz NOT NULL,
    queue      text        NOT NULL,
    completed  bigint      NOT NULL DEFAULT 0,
    failed     bigint      NOT NULL DEFAULT 0,
    -- Attempts that failed and run again after their backoff.
    retried    bigint      NOT NULL DEFAULT 0,
    cancelled  bigint      NOT NULL DEFAULT 0,
    -- Claims the reaper or a startup reclaim took back because their lease ran out.
    reaped     bigint      NOT NULL DEFAULT 0,
    -- The primary key is the flush's upsert target, the readers' range by minute (every queue's
    -- minutes are read, one queue's too: the queue is a filter on the range) and GC's oldest first.
    PRIMARY KEY (minute, queue)
);

-- durable_shared_secrets: random secrets every engine on this database reads alike, made by the
-- first that needs one (DurableAdmin.sharedSecret): the dashboard's CSRF tokens are signed with
-- one, so any replica accepts a form another replica served. Readable by whoever may read Durable's
-- tables, which already hold the jobs themselves.
CREATE TABLE durable_shared_secrets (
    name        text        PRIMARY KEY,
    secret      bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
