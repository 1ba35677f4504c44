-- Durable schema, version 4: what the admin API's listing, search and counts ride (DurableAdmin).
--
-- The history is written once per instance and never updated, so its indexes cost one entry each per
-- settled instance and nothing afterwards; the hot table gets no new index (its rows are the live ones,
-- few, and each of its transitions would pay for another index). The admin statements are in
-- internal/sql/AdminSql.java, each with the index it rides.

-- Listing by queue or type, newest or oldest first: a walk of (queue, id) or (type, id) in id order that
-- stops at the page. One btree entry per settled instance (about 40 bytes with a short name).
CREATE INDEX durable_history_queue_idx ON durable_history (queue, id);
CREATE INDEX durable_history_type_idx ON durable_history (type, id);

-- Correlation key, exact or by prefix: byte order (text_pattern_ops) answers both as a range. Only keyed
-- rows pay an entry.
CREATE INDEX durable_history_correlation_idx ON durable_history (correlation_key text_pattern_ops)
    WHERE correlation_key IS NOT NULL;

-- Containment search on args/state (state @> '{"customer": 42}'): jsonb_path_ops holds one hash per
-- path to a value. The costliest index here (one entry per leaf of the state); its pending list
-- (fastupdate) takes the inserts in batches, so a settle appends to a list rather than splitting pages.
CREATE INDEX durable_history_state_idx ON durable_history USING gin (state jsonb_path_ops);

-- Time ranges on the history: rows arrive in inserted order closely enough for a BRIN index (a few pages
-- for millions of rows, next to nothing per insert). settled_at has its own BRIN index since version 3.
CREATE INDEX durable_history_inserted_brin ON durable_history USING brin (inserted_at);

-- Counts by queue and status without counting: ANALYZE keeps the most common (queue, status)
-- combinations with their frequencies, which times the table's estimated row count gives the
-- settled counts (pg_stats_ext). Costs nothing per row.
CREATE STATISTICS durable_history_queue_status (mcv) ON queue, status FROM durable_history;
