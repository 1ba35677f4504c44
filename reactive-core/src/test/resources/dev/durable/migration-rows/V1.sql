-- Rows a deployment at version 1 (the baseline) leaves behind, for MigratorIT: every table has some,
-- so the next version's migration runs over real rows, and the engine of the latest version must
-- then run the work they describe. Run with search_path set to the schema. Queue 'upgraded'; job
-- type 'echo' (answers its argument); workflow type 'greeting' (step 'start' parks for signal 'go',
-- step 'greet' answers 'hello ' and its state).

-- Due jobs: a plain one, two of one ungated concurrency key (the first is the key's head, the second
-- waits behind it) and one of a tenant (its fair key is made by the trigger).
INSERT INTO durable_instances (type, queue, step, state, max_attempts) VALUES ('echo', 'upgraded', 'run', '"plain"', 5);
INSERT INTO durable_instances (type, queue, step, state, max_attempts, concurrency_key)
VALUES ('echo', 'upgraded', 'run', '"keyed 1"', 5, 'k'), ('echo', 'upgraded', 'run', '"keyed 2"', 5, 'k');
INSERT INTO durable_instances (type, queue, step, state, max_attempts, fairness_key)
VALUES ('echo', 'upgraded', 'run', '"fair"', 5, 'tenant-a');

-- A job whose worker died while it executed its second attempt (the first was retried): the reaper
-- gives it back once its lease has lapsed.
INSERT INTO durable_instances (type, queue, step, state, max_attempts, status, attempt, claimed_by, lease_expires_at)
VALUES ('echo', 'upgraded', 'run', '"orphan"', 5, 'executing', 2, 'gone-worker', now() - interval '1 minute');
INSERT INTO durable_attempts (instance_id, attempt, step, worker, started_at, outcome, error)
SELECT id, 1, 'run', 'gone-worker', now() - interval '2 minutes', 'retried', 'boom' FROM durable_instances
 WHERE state = '"orphan"';

-- A settled job.
INSERT INTO durable_history (id, type, type_version, queue, priority, status, step, state, result, attempt,
                             max_attempts, eligible_at, inserted_at, settled_at)
VALUES (1000000, 'echo', 1, 'upgraded', 0, 'done', 'run', '"old"', '"was done"', 1, 5, now() - interval '1 hour',
        now() - interval '1 hour', now() - interval '59 minutes');

-- A workflow forked from the settled one, parked at step 'greet' for signal 'go' under correlation key
-- 'greeting-1', with a signal it consumed at its first step, whose input is recorded.
INSERT INTO durable_instances (type, queue, step, state, max_attempts, status, awaited_signals, await_deadline,
                               correlation_key, correlation_statuses, has_signals)
VALUES ('greeting', 'upgraded', 'greet', '"ada"', 5, 'awaiting_signal', ARRAY['go'], now() + interval '1 hour',
        'greeting-1', ARRAY['runnable', 'executing', 'awaiting_signal', 'awaiting_children'], true);
INSERT INTO durable_signals (instance_id, name, payload, consumed_at)
SELECT id, 'hello', '"hi"', now() - interval '4 minutes' FROM durable_instances WHERE type = 'greeting';
INSERT INTO durable_step_inputs (instance_id, step, type_version, state, started_at)
SELECT id, 'start', 1, '"ada"', now() - interval '5 minutes' FROM durable_instances WHERE type = 'greeting';
INSERT INTO durable_forks (id, forked_from, step)
SELECT id, 1000000, 'start' FROM durable_instances WHERE type = 'greeting';

-- Limits: a gate counter holding the slot of a permit whose holder went away, a token bucket, an
-- idle sliding window.
INSERT INTO durable_gate_slots (gate, key, shard, capacity, held) VALUES ('uploads', '', 0, 2, 1);
INSERT INTO durable_limit_permits (holder, gate, key, shard, slots, expires_at)
VALUES ('gone-holder', 'uploads', '', 0, 1, now() - interval '1 minute');
INSERT INTO durable_rate_buckets (name, partition_key, tokens) VALUES ('api', '', 3);
INSERT INTO durable_window_counters (name, partition_key, slots, counts, slot_millis)
VALUES ('hourly', 'tenant-a', ARRAY[1]::bigint[], ARRAY[1], 60000);

-- A key election given up on, an engine that died, a paused queue.
INSERT INTO durable_key_skips (concurrency_key) VALUES ('k');
INSERT INTO durable_engines (origin, name, queues, types, versions, expires_at, lowest_versions)
VALUES ('gone-engine', 'gone', ARRAY['upgraded'], ARRAY['echo'], ARRAY[1], now() - interval '1 minute', ARRAY[1]);
INSERT INTO durable_queue_pauses (queue, paused_by) VALUES ('paused-queue', 'gone');
