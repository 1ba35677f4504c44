-- Durable schema, version 2: the registry of live engines.

-- One row per running engine: which queues it serves and which types (at which version) it can
-- run. Each engine refreshes its row with its heartbeat and deletes it when it stops; a row whose
-- engine died expires. It answers "which queues have no live engine" and "which rows can no live
-- engine run" (a rolling deploy left them behind), and lists the fleet for operators.
CREATE TABLE durable_engines (
    origin      text        PRIMARY KEY,
    name        text        NOT NULL,
    queues      text[]      NOT NULL,
    types       text[]      NOT NULL,
    versions    integer[]   NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CONSTRAINT durable_engines_types_check CHECK (cardinality(types) = cardinality(versions))
);
