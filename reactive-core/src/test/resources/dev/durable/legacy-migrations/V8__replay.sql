-- Durable schema, version 8: what replay from a step and fork need (DurableEngine.replay, fork).

-- The input state of each workflow step an instance ran: the state the step last started with, one row
-- per (instance, step), so at most as many rows as the workflow has steps (a step that runs again
-- overwrites its row in place). The step an instance is at now (or settled at) is not here: the
-- instance's own row holds its input (a settling outcome keeps the state its step started with), so
-- the row of a step appears when the instance leaves it. Deleted with the instance (GC and the admin's
-- delete); a replay keeps them.
CREATE TABLE durable_step_inputs (
    instance_id   bigint      NOT NULL,
    step          text        NOT NULL,
    -- The workflow version the state was written under (a later version may migrate it).
    type_version  integer     NOT NULL,
    state         jsonb,
    -- When the run of the step began (its claim, or the inline step before it) and when it ended.
    started_at    timestamptz,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, step)
) WITH (fillfactor = 90);

-- Written by a trigger rather than by the outcome commit: every path that moves a workflow off a step
-- (the group commit, its riders' transaction, an inline chain's commits, whatever writes the row later)
-- is covered by one declaration, and the hot statements and their plans stay as they are. The trigger
-- fires only on an update that names step or state and only for an executing row that changes either:
-- a job's step ('run') and state (its args) never change, so a job never fires it (claims, heartbeats,
-- the reaper and settling do not name step or state, and a job's retry keeps both: only the WHEN
-- clause runs, and writes nothing). The state recorded is the old row's: what the step ran with.
-- A claim (runnable -> executing) records nothing, nor does a claim-time migration (V7: the version
-- changes with step and state before the step runs): the migrated state is recorded as what the step
-- ran with when the step ends.
CREATE FUNCTION durable_step_input() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO durable_step_inputs AS r (instance_id, step, type_version, state, started_at)
    VALUES (OLD.id, OLD.step, OLD.type_version, OLD.state, OLD.updated_at)
    ON CONFLICT (instance_id, step) DO UPDATE
       SET type_version = EXCLUDED.type_version, state = EXCLUDED.state, started_at = EXCLUDED.started_at,
           recorded_at = EXCLUDED.recorded_at;
    RETURN NULL;
END
$$;

CREATE TRIGGER durable_step_input
    AFTER UPDATE OF step, state ON durable_instances
    FOR EACH ROW
    WHEN (OLD.status = 'executing' AND NEW.type_version = OLD.type_version
          AND (NEW.step IS DISTINCT FROM OLD.step OR NEW.state IS DISTINCT FROM OLD.state))
    EXECUTE FUNCTION durable_step_input();

-- Forks: an instance started by DurableEngine.fork from another one's step. A row only for a fork, so an
-- instance that is no fork pays nothing; by the original's id for its list of forks. Deleted with the
-- fork (GC and the admin's delete); the original may be gone before its forks.
CREATE TABLE durable_forks (
    id           bigint      PRIMARY KEY,
    forked_from  bigint      NOT NULL,
    step         text        NOT NULL,
    forked_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX durable_forks_from_idx ON durable_forks (forked_from);

-- durable_attempts (V4) gains the rows of replays and forks, which are not runs: a replay records the
-- attempt the instance had settled with (outcome 'done', 'failed' or 'cancelled': its row is about to
-- be overwritten) and a 'replayed' row at the step it starts again from; a fork's first row is 'forked'.
