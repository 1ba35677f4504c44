-- What a plain job writes, by phase and by relation (issue 16; benchmarks/README, "What a plain job writes").
-- A replay in plain SQL of what Durable's statements do to one queue's rows: 2,000 jobs inserted in two
-- statements of 1,000, claimed 128 at a time, each pick its own transaction (FOR UPDATE SKIP LOCKED, then the
-- claim's UPDATE, stamped with its transaction; from schema version 6 the trigger records it in the ledger of
-- claims), settled done 128 at a time (the move to the history: delete from the hot table, insert into the
-- history), and the reaper's sweep of the ledger once the claims ended (from version 6). The engine's
-- statements carry more conditions (guards, limits, the answer), not more writes. Run it in an
-- empty database holding Durable's schema (the V files in order, with search_path at their schema) and
-- pg_walinspect, as a superuser (CHECKPOINT):
--   psql -d db -c 'CREATE EXTENSION pg_walinspect' -f benchmarks/wal/plain-job.sql
-- It truncates the instances, the history and the ledger. Prints the WAL bytes per job of each phase, then each phase's
-- records per job by kind and relation.
\set ON_ERROR_STOP 1
TRUNCATE durable_instances, durable_history, durable_claims;
VACUUM ANALYZE durable_instances; VACUUM ANALYZE durable_history;
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS start \gset
INSERT INTO durable_instances AS i (type, type_version, queue, priority, step, state, max_attempts, eligible_at, status, attempt)
SELECT 'noop', 1, 'shootout', 0, 'run', to_jsonb(g), 20, now(), 'runnable', 0 FROM generate_series(1,1000) g RETURNING i.id \g /dev/null
INSERT INTO durable_instances AS i (type, type_version, queue, priority, step, state, max_attempts, eligible_at, status, attempt)
SELECT 'noop', 1, 'shootout', 0, 'run', to_jsonb(g), 20, now(), 'runnable', 0 FROM generate_series(1001,2000) g RETURNING i.id \g /dev/null
SELECT pg_current_wal_insert_lsn() AS inserted \gset
DO $$
DECLARE n int;
BEGIN
  LOOP
    WITH c AS (SELECT id FROM durable_instances WHERE queue = 'shootout' AND status = 'runnable' AND eligible_at <= now()
                ORDER BY priority, eligible_at, id LIMIT 128 FOR UPDATE SKIP LOCKED)
    UPDATE durable_instances i SET status = 'executing', claimed_by = 'durable:shootout@vm#123456-1x2y3z4a5b6c', attempt = i.attempt + 1,
           lease_expires_at = now() + interval '60 s', updated_at = now(), claim_xid = pg_current_xact_id()::text::bigint
      FROM c WHERE i.id = c.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    EXIT WHEN n = 0;
    COMMIT;
  END LOOP;
END $$;
SELECT pg_current_wal_insert_lsn() AS claimed \gset
DO $$
DECLARE ids bigint[];
BEGIN
  LOOP
    SELECT array_agg(id) INTO ids FROM (SELECT id FROM durable_instances WHERE status = 'executing' ORDER BY id LIMIT 128) x;
    EXIT WHEN ids IS NULL;
    WITH o AS (SELECT * FROM unnest(ids) AS o(id)),
    moved AS (
      DELETE FROM durable_instances i USING o WHERE i.id = o.id AND i.id = ANY(ids)
      RETURNING i.id, i.type, i.type_version, i.queue, i.priority, 'done'::text AS status, i.step, i.state, NULL::jsonb AS result,
                i.last_error, i.attempt, i.max_attempts, i.eligible_at, i.parent_id, i.concurrency_key, i.correlation_key, i.inserted_at,
                NULL::text[] AS signals, i.gate_name, i.gate_shard, i.rate_limit, i.rate_weight, i.rate_partition,
                i.trace_context, i.trace_last, i.fairness_key, i.window_name, i.window_weight, i.window_partition
    )
    INSERT INTO durable_history (id, type, type_version, queue, priority, status, step, state, result,
            last_error, attempt, max_attempts, eligible_at, parent_id, concurrency_key, correlation_key,
            inserted_at, signals, gate_name, gate_shard, rate_limit, rate_weight, rate_partition, trace_context,
            trace_last, fairness_key, window_name, window_weight, window_partition)
    SELECT * FROM moved;
    COMMIT;
  END LOOP;
END $$;
SELECT pg_current_wal_insert_lsn() AS settled \gset
-- The reaper's sweep, once the claims ended: the ledger rows none of whose claims executes any more go.
DELETE FROM durable_claims c
 WHERE NOT EXISTS (SELECT 1 FROM durable_instances i WHERE i.id = ANY (c.ids) AND i.status = 'executing');
SELECT pg_current_wal_insert_lsn() AS swept \gset
-- pg_walinspect reads flushed WAL only: a synchronous commit (of a catalog change) flushes the rest first.
SET synchronous_commit = on; CREATE TEMP TABLE wal_flush AS SELECT 1 AS x;
SELECT 'insert' AS phase, round(pg_wal_lsn_diff(:'inserted', :'start') / 2000.0) AS b_per_job
UNION ALL SELECT 'claim', round(pg_wal_lsn_diff(:'claimed', :'inserted') / 2000.0)
UNION ALL SELECT 'settle', round(pg_wal_lsn_diff(:'settled', :'claimed') / 2000.0)
UNION ALL SELECT 'sweep', round(pg_wal_lsn_diff(:'swept', :'settled') / 2000.0)
UNION ALL SELECT 'total', round(pg_wal_lsn_diff(:'swept', :'start') / 2000.0);
CREATE TEMP TABLE recs AS SELECT r.*, CASE WHEN r.end_lsn <= :'inserted' THEN '1 insert' WHEN r.end_lsn <= :'claimed' THEN '2 claim'
                               WHEN r.end_lsn <= :'settled' THEN '3 settle' ELSE '4 sweep' END AS phase,
   (SELECT c.relname FROM pg_class c WHERE c.relfilenode::text = substring(r.block_ref from 'rel \d+/\d+/(\d+)') LIMIT 1) AS rel
  FROM pg_get_wal_records_info(:'start', :'swept') r;
SELECT phase, resource_manager || '/' || record_type AS kind, coalesce(rel, '-') AS rel, round(count(*) / 2000.0, 2) AS per_job,
       round(sum(record_length) / 2000.0, 1) AS bytes_per_job, round(sum(fpi_length)/2000.0,1) AS fpi
  FROM recs GROUP BY 1, 2, 3 HAVING sum(record_length) / 2000.0 >= 0.5 ORDER BY 1, 5 DESC;
