-- Durable schema, version 3: settled instances leave the hot table, and heartbeats become HOT.

-- Settled instances (done, failed, cancelled). The statement that settles an instance moves it
-- here in the same transaction, so the hot table holds only live rows (and the few settled rows
-- whose correlation key stays occupied after they settle, such as a recurring job's due time):
-- its indexes stay small whatever the retention, and settling writes one index entry here instead
-- of two or three there. Append-only: written once, deleted by GC.
CREATE TABLE durable_history (
    id               bigint      PRIMARY KEY,
    type             text        NOT NULL,
    type_version     integer     NOT NULL,
    queue            text        NOT NULL,
    priority         integer     NOT NULL,
    status           text        NOT NULL,
    step             text        NOT NULL,
    state            jsonb,
    result           jsonb,
    last_error       text,
    attempt          integer     NOT NULL,
    max_attempts     integer     NOT NULL,
    eligible_at      timestamptz NOT NULL,
    parent_id        bigint,
    concurrency_key  text,
    correlation_key  text,
    inserted_at      timestamptz NOT NULL,
    -- The names of the signals its steps consumed, in delivery order (null: none ever arrived).
    signals          text[],
    settled_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT durable_history_status_check CHECK (status IN ('done', 'failed', 'cancelled'))
) WITH (fillfactor = 100);

-- A join reads its settled children, and GC spares children of live parents, by parent.
CREATE INDEX durable_history_parent_idx ON durable_history (parent_id) WHERE parent_id IS NOT NULL;
-- GC by age: rows arrive in settled_at order and are never updated, so a BRIN index (a few pages,
-- next to no cost per row) finds the old ones.
CREATE INDEX durable_history_settled_brin ON durable_history USING brin (settled_at);
-- Operators list failures and cancellations; done rows, the bulk, pay nothing here.
CREATE INDEX durable_history_unsuccessful_idx ON durable_history (queue, status, id) WHERE status <> 'done';

-- Settled rows of a version-2 schema move over with the names of the signals they consumed, their
-- signals then gone (a signal to a settled instance has no target).
INSERT INTO durable_history (id, type, type_version, queue, priority, status, step, state, result, last_error,
                             attempt, max_attempts, eligible_at, parent_id, concurrency_key, correlation_key,
                             inserted_at, signals, settled_at)
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, parent_id, concurrency_key, correlation_key, inserted_at,
       CASE WHEN has_signals THEN ARRAY(SELECT s.name FROM durable_signals s
                                         WHERE s.instance_id = durable_instances.id AND s.consumed_at IS NOT NULL
                                         ORDER BY s.id) END,
       updated_at
  FROM durable_instances
 WHERE status IN ('done', 'failed', 'cancelled') AND correlation_slot IS NULL;
DELETE FROM durable_signals s USING durable_instances i
 WHERE s.instance_id = i.id AND i.status IN ('done', 'failed', 'cancelled') AND i.correlation_slot IS NULL;
DELETE FROM durable_instances WHERE status IN ('done', 'failed', 'cancelled') AND correlation_slot IS NULL;

-- Every instance, live or settled, as one relation with the hot table's columns (a settled row has
-- no claim, lease, inbox, limits or awaited signals any more): for reports, tests and ad-hoc queries.
CREATE VIEW durable_instances_all AS
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, awaited_signals, await_deadline, parent_id, children_pending, concurrency_key, gate_name,
       gate_shard, rate_limit, rate_weight, rate_partition, correlation_key, correlation_statuses, correlation_slot,
       claimed_by, lease_expires_at, cancel_requested, has_signals, has_children, inserted_at, updated_at
  FROM durable_instances
UNION ALL
SELECT id, type, type_version, queue, priority, status, step, state, result, last_error, attempt, max_attempts,
       eligible_at, NULL, NULL, parent_id, 0, concurrency_key, NULL,
       NULL, NULL, NULL, NULL, correlation_key, NULL, NULL,
       NULL, NULL, false, false, false, inserted_at, settled_at
  FROM durable_history;

-- A live child moved out settled: its parent counts it off, as the update trigger does.
CREATE FUNCTION durable_child_moved() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE durable_instances
       SET children_pending = children_pending - 1,
           status = CASE WHEN status = 'awaiting_children' AND children_pending <= 1
                         THEN 'runnable' ELSE status END,
           eligible_at = CASE WHEN status = 'awaiting_children' AND children_pending <= 1
                              THEN now() ELSE eligible_at END,
           updated_at = now()
     WHERE id = OLD.parent_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER durable_child_moved
    AFTER DELETE ON durable_instances
    FOR EACH ROW
    WHEN (OLD.parent_id IS NOT NULL AND OLD.status NOT IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION durable_child_moved();

-- A gated row that settles from executing gives its slot back, as on update.
CREATE TRIGGER durable_gate_release_moved
    AFTER DELETE ON durable_instances
    FOR EACH ROW
    WHEN (OLD.status = 'executing' AND OLD.gate_name IS NOT NULL)
    EXECUTE FUNCTION durable_gate_release();

-- Executing rows by worker, not by lease: a heartbeat changes no indexed column and no predicate,
-- so it is a HOT update (the free space below keeps the new version on the same page). The reaper
-- reads every executing row's lease from here (there are at most the fleet's claim ceilings).
DROP INDEX durable_instances_lease_idx;
CREATE INDEX durable_instances_executing_idx ON durable_instances (claimed_by) WHERE status = 'executing';
-- The hot table is a queue: every job inserts a row, updates it once and deletes it, so dead rows
-- pile up at the engine's throughput while the live ones stay few. Vacuum it by dead-row count,
-- not by a fraction of a table that is mostly dead, and without the cost-based pauses. Half of each
-- page is left free at insert, so a row's claim (never HOT: its status moves it between partial
-- indexes) fits on the row's own page: the update then needs no lock record and no second page
-- (shootout: 1,090 against 1,191 WAL bytes per job). A backlog's heap takes twice the pages.
ALTER TABLE durable_instances SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0,
                                   autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_delay = 0);
