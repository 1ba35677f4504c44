-- Durable schema, version 11: limits outside jobs (engine.limits(): gate permits) and sliding windows.
--
-- A permit holds `slots` of a gate counter (durable_gate_slots) until its holder releases it or its
-- lease ends: the counter's `held` counts it like an executing row, so permits and jobs share the gate.
-- A permit that expired is counted off by the next acquire on its counter or by the limiter reconcile,
-- which recounts a counter as its executing rows plus its live permits.
CREATE TABLE durable_limit_permits (
    holder      text        PRIMARY KEY,
    gate        text        NOT NULL,
    key         text        NOT NULL,
    shard       integer     NOT NULL,
    slots       integer     NOT NULL CHECK (slots >= 1),
    expires_at  timestamptz NOT NULL
);
-- The permits of one counter (acquire sweeps its expired ones, reconcile counts the live ones).
CREATE INDEX durable_limit_permits_counter_idx ON durable_limit_permits (gate, key, shard, expires_at);

-- Sliding windows (Limits.Window): one row per (window, partition), its last slots as a ring of
-- Limits.Window.SLOTS + 1 entries: slots[i] is the slot (epoch ms / slot length) entry i counts, counts[i]
-- what it admitted then. One row, so a take locks it and reads its latest version (strict under
-- concurrency); an entry of a slot older than the ring is stale and reused. A row whose every entry is
-- stale counts nothing, and the bucket sweeper deletes it (windows per tenant would otherwise pile up).
CREATE TABLE durable_window_counters (
    name           text      NOT NULL,
    partition_key  text      NOT NULL DEFAULT '',
    slots          bigint[]  NOT NULL,
    counts         integer[] NOT NULL,
    -- The slot length it counts in, so the sweep of idle windows needs no configuration.
    slot_millis    bigint    NOT NULL,
    -- What the last pick took (its admitted rows' weights), read back by that pick.
    taken          integer   NOT NULL DEFAULT 0,
    PRIMARY KEY (name, partition_key)
);
