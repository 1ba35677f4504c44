-- Undo of version 16: the election waits for the key's lock without bound again (version 13's,
-- under its own name); the keys still written down as skipped are elected with it once (an older
-- engine has nothing that would), then the list goes.
DROP FUNCTION durable_key_elect(text, bigint, integer, timestamptz);
ALTER FUNCTION durable_key_elect_held(text, bigint, integer, timestamptz) RENAME TO durable_key_elect;
SELECT durable_key_elect(s.concurrency_key)
  FROM (SELECT DISTINCT concurrency_key FROM durable_key_skips ORDER BY concurrency_key) s;
DROP TABLE durable_key_skips;
