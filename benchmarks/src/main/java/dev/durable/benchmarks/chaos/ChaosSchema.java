package dev.durable.benchmarks.chaos;

/**
 * The harness's own tables, created next to Durable's in the chaos schema, and the invariant
 * queries run over them at the end.
 *
 * <ul>
 *   <li>{@code chaos_exec}: one row per handler execution, written by the handler before it works:
 *       its token, instance, step, the attempt it ran as, the label of the engine incarnation that
 *       ran it and the release of the workload it runs, {@code started_at = clock_timestamp()}, and
 *       the claim the row showed at that moment ({@code seen_*}: status, step, attempt, claimed_by,
 *       type version);
 *   <li>{@code chaos_workers}: the worker ids (claimed_by values) of each label, as LIKE patterns: a
 *       worker JVM registers the pattern of its process's ids before its engine starts (a poison job
 *       may halt it before it could register the ids themselves), every engine its ids once started;
 *   <li>{@code chaos_audit}: written by triggers on <em>every</em> transition of every row (insert, and
 *       any update of status, step, claim, attempt, state, result or error; only the heartbeat's
 *       lease renewals are left out; a settle, which moves the row from {@code durable_instances} to
 *       {@code durable_history}, is audited as one transition from the row it deleted to the row
 *       it archived, through {@code chaos_departed}): old and new status, step, claim and attempt, the
 *       old lease's end, the token the
 *       transition wrote (a new {@code result.token}, a new {@code state.last}, or the token in a new
 *       error; null for the reaper, a release, a cancel, a retry), whether it was the reaper's, the
 *       limits the row held, and {@code at = clock_timestamp()} inside the statement, before the row's
 *       lock is released;
 *   <li>{@code chaos_faults}: each injected fault's kind, the labels it struck (a LIKE pattern: every
 *       incarnation of the engine it struck, as one that replaces it during the fault shares its
 *       proxy; null: every engine) and its window;
 *   <li>{@code chaos_stall}: the handshake of the STALL fault: armed by the harness, a solo handler
 *       about to return marks itself waiting and returns once the harness froze the connections, so
 *       the commit that follows is sent on a frozen one.
 * </ul>
 *
 * <p>The invariants, each 0 on a correct engine whatever the timing (see {@link Invariants}):
 * <ul>
 *   <li><b>stale_commit</b>: commits of an execution whose claim was not the current one: the row
 *       was not executing, or was claimed by another worker, at another attempt or at another step;
 *   <li><b>terminal_changed</b>: any transition of a row that had settled (done, failed, cancelled);
 *   <li><b>done_not_once</b>: done rows that did not become done exactly once;
 *   <li><b>double_commit</b>: tokens written by more than one transition, claims (instance, step,
 *       attempt, worker) that committed more than one token, workflows whose state's tokens are not,
 *       in order, the state tokens their transitions wrote;
 *   <li><b>overlap</b>: pairs of committed executions of one row whose [start, commit] intervals
 *       intersect, and samples that saw two executing rows of one ungated concurrency key;
 *   <li><b>gate_over</b> / <b>rate_over</b> / <b>window_over</b>: samples that saw more than K live
 *       claims (executing rows with a lease not run out) of one gate key; windows in which claims of
 *       one rate limit and partition took more tokens than its bucket holds (burst + rate × window);
 *       spans shorter than a sliding window in which one of its partitions claimed more than its limit;
 *   <li><b>early_reap</b>: claims recovered as lost while their lease had not run out (but an
 *       engine's, which its successor in the same process may take early);
 *   <li><b>cancel_lost</b>: transitions that sent a row whose cancel was requested round again;
 *   <li><b>taken_running</b>: executions that started while an execution on the claim before was
 *       still running, that claim not recovered as lost (only a lapsed lease frees a running claim);
 *   <li><b>stale_start</b>: executions that started on a claim that was not current, on an engine no
 *       fault struck (within its window and a grace after it): a healthy worker never runs a row it
 *       no longer holds;
 *   <li><b>pick_waits</b>: samples that saw a pick waiting on another transaction's row lock (picks
 *       skip locked rows; they never queue behind each other);
 *   <li><b>over_attempts</b>: executions of an attempt past the row's max attempts;
 *   <li><b>version_skew</b>: executions by an engine of the first release of an instance at the
 *       second release's version (with {@code --skew}, the engines run two releases);
 *   <li><b>unexpected_failed</b>: failed rows the workload did not mean to fail (only doomed and
 *       poison jobs are);
 *   <li><b>unknown_commits</b>: tokens committed that no recorded execution wrote (the harness
 *       would be blind to them);
 *   <li><b>vanished</b>: live rows deleted from the hot table that the history never received,
 *       history rows that did not leave the hot table in the same statement, and rows in both
 *       tables (see {@link #vanished});
 *   <li><b>key_heads</b> / <b>key_skips</b> / <b>key_headless</b>: ungated keys with other than one
 *       head at the end; elections given up on a held key lock and not done again by the end; samples,
 *       while it ran, of keys with waiting rows and neither a head nor an executing row (not given up);
 *   <li><b>orphan_signals</b>: signals whose instance left the hot table (they leave with it);
 *   <li><b>tx_effects</b>: transactional jobs whose effect rows are not exactly the one of the
 *       execution that committed them done (none for a job not done; see {@link #transactionalEffects});
 *   <li><b>lost</b> / <b>stuck</b> (liveness): rows not settled after the recovery time; rows
 *       executing with an expired lease.
 * </ul>
 * Reported, not an invariant: <b>duplicates</b>, the executions that did not count (they started on
 * a claim that was no longer current, or their claim was lost and recovered by the reaper), and their
 * rate among all executions: at-least-once allows them, the number must be known and small.
 */
final class ChaosSchema {

    private ChaosSchema() {
    }

    static String ddl(String schema) {
        return """
                CREATE TABLE S.chaos_exec (
                    token           text PRIMARY KEY,
                    instance_id     bigint NOT NULL,
                    type            text NOT NULL,
                    step            text NOT NULL,
                    attempt         integer NOT NULL,
                    -- The claiming transaction (Claim.stamp, schema version 5): null for a claim that
                    -- recorded none, and from an earlier build's worker (benchmarks/chaos-previous).
                    claim_xid       bigint,
                    label           text NOT NULL,
                    generation      integer NOT NULL,
                    started_at      timestamptz NOT NULL,
                    ended_at        timestamptz,
                    outcome         text,
                    seen_status     text,
                    seen_step       text,
                    seen_attempt    integer,
                    seen_claimed_by text,
                    seen_version    integer,
                    seen_claim_xid  bigint);
                CREATE INDEX ON S.chaos_exec (instance_id, step);
                CREATE TABLE S.chaos_workers (
                    label  text NOT NULL,
                    worker text NOT NULL,
                    PRIMARY KEY (label, worker));
                CREATE TABLE S.chaos_stall (
                    id      integer PRIMARY KEY,
                    armed   boolean NOT NULL,
                    waiting text,
                    frozen  boolean NOT NULL);
                INSERT INTO S.chaos_stall VALUES (1, false, NULL, false);
                CREATE TABLE S.chaos_effects (
                    instance_id bigint NOT NULL,
                    token       text NOT NULL);
                CREATE INDEX ON S.chaos_effects (instance_id);
                CREATE TABLE S.chaos_faults (
                    id         bigserial PRIMARY KEY,
                    kind       text NOT NULL,
                    label      text,
                    started_at timestamptz NOT NULL,
                    ended_at   timestamptz);
                CREATE TABLE S.chaos_audit (
                    id             bigserial PRIMARY KEY,
                    instance_id    bigint NOT NULL,
                    old_status     text,
                    new_status     text NOT NULL,
                    old_step       text,
                    new_step       text NOT NULL,
                    old_claimed_by text,
                    new_claimed_by text,
                    old_attempt    integer,
                    new_attempt    integer NOT NULL,
                    old_lease_expires_at timestamptz,
                    old_claim_xid  bigint,
                    new_cancel_requested boolean,
                    token          text,
                    reaped         boolean NOT NULL,
                    rate_limit     text,
                    rate_partition text,
                    rate_weight    integer,
                    window_name    text,
                    window_partition text,
                    window_weight  integer,
                    unpaired       boolean NOT NULL DEFAULT false,
                    at             timestamptz NOT NULL);
                CREATE INDEX ON S.chaos_audit (instance_id);
                CREATE INDEX ON S.chaos_audit (token);
                CREATE FUNCTION S.chaos_token(o S.durable_instances, n S.durable_instances) RETURNS text
                    LANGUAGE sql IMMUTABLE AS $$
                    SELECT COALESCE(
                        CASE WHEN n.result IS DISTINCT FROM o.result AND jsonb_typeof(n.result) = 'object'
                             THEN n.result->>'token' END,
                        CASE WHEN jsonb_typeof(n.state) = 'object'
                              AND (n.state->>'last') IS DISTINCT FROM
                                  (CASE WHEN jsonb_typeof(o.state) = 'object' THEN o.state->>'last' END)
                             THEN n.state->>'last' END,
                        CASE WHEN n.last_error IS DISTINCT FROM o.last_error
                             THEN substring(n.last_error FROM 'chaos-token:([0-9a-f-]{36})') END)
                $$;
                -- Whether a transition is a lease recovery (the reaper's, or a startup reclaim's): the
                -- claim ends (runnable, or failed past its attempts) at the same attempt, with the error
                -- the recovery writes for that very claim (LeaseSql's reapError, whose text this
                -- repeats). Not "the error changed": a step's attempts restart at each transition and
                -- a commit keeps the last error, so a second recovery of the same worker at the same
                -- attempt writes the text the row already has. A recovery of a row whose cancel was
                -- requested ends it cancelled with its error kept: not told apart here, and never
                -- needed (a cancelled row runs no more).
                CREATE FUNCTION S.chaos_reaped(o S.durable_instances, n S.durable_instances) RETURNS boolean
                    LANGUAGE sql IMMUTABLE AS $$
                    SELECT o.status = 'executing' AND n.claimed_by IS NULL AND n.status IN ('runnable', 'failed')
                       AND n.attempt = o.attempt
                       AND n.last_error IS NOT DISTINCT FROM 'worker ' || o.claimed_by || ' lost: its lease expired on attempt '
                           || o.attempt || ' of ' || o.max_attempts
                $$;
                CREATE FUNCTION S.chaos_audit_update() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO S.chaos_audit (instance_id, old_status, new_status, old_step, new_step,
                                               old_claimed_by, new_claimed_by, old_attempt, new_attempt,
                                               old_lease_expires_at, old_claim_xid, new_cancel_requested, token,
                                               reaped, rate_limit, rate_partition, rate_weight, window_name,
                                               window_partition, window_weight, at)
                    VALUES (NEW.id, OLD.status, NEW.status, OLD.step, NEW.step, OLD.claimed_by, NEW.claimed_by,
                            OLD.attempt, NEW.attempt, OLD.lease_expires_at, OLD.claim_xid, NEW.cancel_requested,
                            S.chaos_token(OLD, NEW),
                            S.chaos_reaped(OLD, NEW),
                            NEW.rate_limit, NEW.rate_partition, NEW.rate_weight, NEW.window_name,
                            NEW.window_partition, NEW.window_weight, clock_timestamp());
                    RETURN NULL;
                END
                $$;
                CREATE FUNCTION S.chaos_audit_insert() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO S.chaos_audit (instance_id, new_status, new_step, new_claimed_by, new_attempt,
                                               reaped, rate_limit, rate_partition, rate_weight, window_name,
                                               window_partition, window_weight, at)
                    VALUES (NEW.id, NEW.status, NEW.step, NEW.claimed_by, NEW.attempt, false,
                            NEW.rate_limit, NEW.rate_partition, NEW.rate_weight, NEW.window_name,
                            NEW.window_partition, NEW.window_weight, clock_timestamp());
                    RETURN NULL;
                END
                $$;
                -- A settle moves the row: a delete from the hot table, then, later in the same
                -- statement, an insert of its final values into the history. The delete stages the
                -- row as it was; the history insert takes it back and audits the pair as the one
                -- transition it is, with the values an update in place would have shown.
                CREATE TABLE S.chaos_departed (
                    instance_id bigint PRIMARY KEY,
                    old         S.durable_instances NOT NULL);
                CREATE FUNCTION S.chaos_depart() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO S.chaos_departed (instance_id, old) VALUES (OLD.id, OLD);
                    RETURN NULL;
                END
                $$;
                CREATE FUNCTION S.chaos_audit_archive() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE
                    o S.durable_instances;
                    n S.durable_instances;
                BEGIN
                    DELETE FROM S.chaos_departed d WHERE d.instance_id = NEW.id RETURNING (d.old).* INTO o;
                    IF NOT FOUND THEN
                        -- Archived without leaving the hot table: counted by vanished().
                        INSERT INTO S.chaos_audit (instance_id, new_status, new_step, new_attempt, reaped, unpaired, at)
                        VALUES (NEW.id, NEW.status, NEW.step, NEW.attempt, false, true, clock_timestamp());
                        RETURN NULL;
                    END IF;
                    n := o;
                    n.status := NEW.status;
                    n.step := NEW.step;
                    n.state := NEW.state;
                    n.result := NEW.result;
                    n.last_error := NEW.last_error;
                    n.attempt := NEW.attempt;
                    n.claimed_by := NULL;
                    INSERT INTO S.chaos_audit (instance_id, old_status, new_status, old_step, new_step,
                                               old_claimed_by, new_claimed_by, old_attempt, new_attempt,
                                               old_lease_expires_at, old_claim_xid, token,
                                               reaped, rate_limit, rate_partition, rate_weight, window_name,
                                               window_partition, window_weight, at)
                    VALUES (NEW.id, o.status, n.status, o.step, n.step, o.claimed_by, NULL, o.attempt, n.attempt,
                            o.lease_expires_at, o.claim_xid, S.chaos_token(o, n),
                            S.chaos_reaped(o, n),
                            o.rate_limit, o.rate_partition, o.rate_weight, o.window_name, o.window_partition,
                            o.window_weight, clock_timestamp());
                    RETURN NULL;
                END
                $$;
                CREATE TRIGGER chaos_depart
                    AFTER DELETE ON S.durable_instances
                    FOR EACH ROW
                    EXECUTE FUNCTION S.chaos_depart();
                CREATE TRIGGER chaos_audit_archive
                    AFTER INSERT ON S.durable_history
                    FOR EACH ROW
                    EXECUTE FUNCTION S.chaos_audit_archive();
                CREATE TRIGGER chaos_audit_update
                    AFTER UPDATE ON S.durable_instances
                    FOR EACH ROW
                    WHEN (NEW.status IS DISTINCT FROM OLD.status OR NEW.step IS DISTINCT FROM OLD.step
                          OR NEW.claimed_by IS DISTINCT FROM OLD.claimed_by OR NEW.attempt IS DISTINCT FROM OLD.attempt
                          OR NEW.state IS DISTINCT FROM OLD.state OR NEW.result IS DISTINCT FROM OLD.result
                          OR NEW.last_error IS DISTINCT FROM OLD.last_error)
                    EXECUTE FUNCTION S.chaos_audit_update();
                CREATE TRIGGER chaos_audit_insert
                    AFTER INSERT ON S.durable_instances
                    FOR EACH ROW
                    EXECUTE FUNCTION S.chaos_audit_insert();
                """.replace("S.", q(schema) + ".");
    }

    static String q(String schema) {
        return '"' + schema + '"';
    }

    static String render(String sql, String schema) {
        return sql.replace("S.", q(schema) + ".");
    }

    // ---- samples, during the run ---------------------------------------------------------------

    /** More than one executing row for one ungated concurrency key, now. */
    static String keyOverlapSample(String schema) {
        return render("SELECT count(*) FROM (SELECT concurrency_key FROM S.durable_instances"
                + " WHERE status = 'executing' AND concurrency_key IS NOT NULL AND gate_name IS NULL"
                + " GROUP BY concurrency_key HAVING count(*) > 1) k", schema);
    }

    /**
     * Ungated keys with waiting rows and neither a head nor an executing row, now, whose election was
     * not given up on a held lock (those wait in {@code durable_key_skips} for maintenance): every
     * transition that changes a key elects its head in its own statement, so no committed state
     * shows such a key.
     */
    static String keyHeadlessSample(String schema) {
        return render("SELECT count(*) FROM (" + HEADLESS_KEYS + ") k", schema);
    }

    /** The keys {@link #keyHeadlessSample} counts, with their rows (id, status, waiting, priority, eligible in ms). */
    static String keyHeadlessDetail(String schema) {
        return render("SELECT i.concurrency_key || ' #' || i.id || ' ' || i.status || CASE WHEN i.key_waiting"
                + " THEN ' waiting' ELSE '' END || ' eligible in ' || (extract(epoch FROM i.eligible_at - now())"
                + " * 1000)::bigint || ' ms' FROM S.durable_instances i WHERE i.gate_name IS NULL"
                + " AND i.concurrency_key IN (" + HEADLESS_KEYS + ") ORDER BY i.concurrency_key, i.id", schema);
    }

    private static final String HEADLESS_KEYS = "SELECT concurrency_key FROM S.durable_instances"
            + " WHERE concurrency_key IS NOT NULL AND gate_name IS NULL AND status IN ('runnable', 'executing')"
            + " GROUP BY concurrency_key"
            + " HAVING bool_or(key_waiting) AND NOT bool_or(NOT key_waiting)"
            + " AND concurrency_key NOT IN (SELECT s.concurrency_key FROM S.durable_key_skips s)";

    /**
     * More than K live claims for one gate key, now: executing rows whose lease has not run out. A
     * lapsed lease holds no slot (the engine never renews one, and a lease-native limiter frees its
     * slot with it), whether or not the reaper has come for the row yet.
     */
    static String gateOverSample(String schema) {
        return render("SELECT count(*) FROM (SELECT gate_name, concurrency_key FROM S.durable_instances"
                + " WHERE status = 'executing' AND gate_name IS NOT NULL AND lease_expires_at > clock_timestamp()"
                + " GROUP BY gate_name, concurrency_key HAVING count(*) > " + ChaosWorkload.GATE_CAPACITY + ") g",
                schema);
    }

    /**
     * The rows of the gate keys over K now, one line each (gate, key, id, claim, attempt, lease left),
     * with the faults open or ended within a lease: what a note needs to tell why a sample was over.
     */
    static String gateOverDetail(String schema) {
        return render("SELECT i.gate_name || '/' || i.concurrency_key || ' #' || i.id || ' by ' || i.claimed_by"
                + " || ' attempt ' || i.attempt || ' lease left ' || (extract(epoch FROM i.lease_expires_at"
                + " - clock_timestamp()) * 1000)::bigint || ' ms; faults: ' || coalesce((SELECT string_agg(f.kind"
                + " || coalesce(' ' || f.label, '') || ' ' || (extract(epoch FROM clock_timestamp() - f.started_at)"
                + " * 1000)::bigint || ' ms ago' || CASE WHEN f.ended_at IS NULL THEN ' (open)' ELSE '' END, ', ')"
                + " FROM S.chaos_faults f WHERE f.ended_at IS NULL OR f.ended_at > clock_timestamp()"
                + " - interval '10 seconds'), 'none')"
                + " FROM S.durable_instances i WHERE i.status = 'executing' AND (i.gate_name, i.concurrency_key) IN"
                + " (SELECT gate_name, concurrency_key FROM S.durable_instances WHERE status = 'executing'"
                + " AND gate_name IS NOT NULL AND lease_expires_at > clock_timestamp() GROUP BY gate_name, concurrency_key HAVING count(*) > "
                + ChaosWorkload.GATE_CAPACITY + ") ORDER BY i.gate_name, i.concurrency_key, i.id", schema);
    }

    /**
     * Picks waiting on a row lock of the instances table, now: a waiting backend running a pick that
     * holds or awaits a tuple lock there (a pick that skips locked rows never waits for one; a wait on
     * a gate counter or on a unique-index check takes no tuple lock of the instances).
     */
    static String pickWaitSample(String schema) {
        return render("SELECT count(DISTINCT a.pid) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid"
                + " WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'"
                + " AND a.query LIKE '%FOR UPDATE OF c%' AND l.locktype = 'tuple'"
                + " AND l.relation = 'S.durable_instances'::regclass", schema);
    }

    // ---- invariants, at the end ----------------------------------------------------------------

    /**
     * Rows that left the hot table live and never reached the history, rows archived that had not
     * left it, and rows in both tables: a settle is a move, and the audit sees it only as a pair.
     * Rows the garbage collector deletes leave settled (their departure stays staged, and is not
     * counted).
     */
    static String vanished(String schema) {
        return render("SELECT (SELECT count(*) FROM S.chaos_departed d"
                + " WHERE (d.old).status NOT IN ('done', 'failed', 'cancelled'))"
                + " + (SELECT count(*) FROM S.chaos_audit WHERE unpaired)"
                + " + (SELECT count(*) FROM S.durable_instances i JOIN S.durable_history h ON h.id = i.id)", schema);
    }

    /**
     * Whether execution {@code e} ran under the claim {@code a} ended (its worker, attempt and step, and
     * its claiming transaction when the execution knows it: one worker can claim a row again at the
     * attempt and step it had before).
     */
    private static final String SAME_CLAIM = "e.attempt = a.old_attempt AND e.step = a.old_step"
            + " AND EXISTS (SELECT 1 FROM S.chaos_workers w WHERE w.label = e.label AND a.old_claimed_by LIKE w.worker)"
            + " AND " + sameTransaction("e", "a");

    /** Whether execution {@code exec}'s claim is the one transition {@code audit} ended, by their claiming transactions. */
    private static String sameTransaction(String exec, String audit) {
        return "(" + exec + ".claim_xid IS NULL OR " + audit + ".old_claim_xid IS NOT DISTINCT FROM " + exec
                + ".claim_xid)";
    }

    static String staleCommits(String schema) {
        return render("SELECT count(*) FROM S.chaos_audit a JOIN S.chaos_exec e ON e.token = a.token"
                + " WHERE a.old_status IS DISTINCT FROM 'executing' OR NOT (" + SAME_CLAIM + ")", schema);
    }

    static String terminalChanged(String schema) {
        return render("SELECT count(*) FROM S.chaos_audit a WHERE a.old_status IN ('done', 'failed', 'cancelled')",
                schema);
    }

    static String doneNotOnce(String schema) {
        return render("SELECT count(*) FROM S.durable_instances_all i WHERE i.status = 'done' AND (SELECT count(*)"
                + " FROM S.chaos_audit a WHERE a.instance_id = i.id AND a.new_status = 'done') <> 1", schema);
    }

    static String tokensCommittedTwice(String schema) {
        return render("SELECT count(*) FROM (SELECT token FROM S.chaos_audit WHERE token IS NOT NULL"
                + " GROUP BY token HAVING count(*) > 1) t", schema);
    }

    static String claimsCommittedTwice(String schema) {
        return render("SELECT count(*) FROM (SELECT instance_id, old_step, old_attempt, old_claimed_by, old_claim_xid"
                + " FROM S.chaos_audit WHERE token IS NOT NULL GROUP BY 1, 2, 3, 4, 5 HAVING count(*) > 1) t", schema);
    }

    static String brokenStateSequences(String schema) {
        return render("SELECT count(*) FROM S.durable_instances_all i WHERE i.type = '" + ChaosWorkload.FLOW + "' AND"
                + " (SELECT array_agg(t.token ORDER BY t.ord) FROM jsonb_array_elements_text("
                + "     CASE WHEN jsonb_typeof(i.state->'tokens') = 'array' THEN i.state->'tokens' ELSE '[]' END)"
                + "     WITH ORDINALITY AS t(token, ord))"
                + " IS DISTINCT FROM"
                + " (SELECT array_agg(a.token ORDER BY a.id) FROM S.chaos_audit a WHERE a.instance_id = i.id"
                + "     AND a.token IS NOT NULL AND a.token IS DISTINCT FROM i.result->>'token')", schema);
    }

    static String intersectingCommits(String schema) {
        return render("WITH c AS (SELECT a.instance_id, e.token, e.started_at, a.at FROM S.chaos_audit a"
                + " JOIN S.chaos_exec e ON e.token = a.token)"
                + " SELECT count(*) FROM c c1 JOIN c c2 ON c1.instance_id = c2.instance_id AND c1.token < c2.token"
                + " WHERE c1.started_at < c2.at AND c2.started_at < c1.at", schema);
    }

    /**
     * Executions that started on a claim that was not current, by a label no fault window covered
     * (from its start to {@code graceMillis} after its end).
     */
    static String staleStarts(String schema, long graceMillis) {
        return render("SELECT count(*) FROM S.chaos_exec e WHERE NOT (" + CURRENT_AT_START + ")"
                + " AND NOT EXISTS (SELECT 1 FROM S.chaos_faults f WHERE (f.label IS NULL OR e.label LIKE f.label)"
                + "     AND e.started_at >= f.started_at"
                + "     AND e.started_at <= COALESCE(f.ended_at, 'infinity') + " + graceMillis
                + " * interval '1 millisecond')", schema);
    }

    /**
     * Claims recovered as lost (the reaper, or a restarted engine's reclaim) while their lease had
     * not run out, by the server's clock at the recovery: a lease is taken only once it lapsed. The
     * one exception is an engine's successor in the same process (same identity prefix: engine name,
     * queue, host and process id) taking its predecessor's rows early as it starts: a replaced
     * in-process engine, or a worker JVM's second engine after a failed start. Recoveries of a claim
     * whose prefix a new incarnation began claiming under within a minute are left out.
     */
    static String earlyRecoveries(String schema) {
        return render(SUCCESSORS + "SELECT count(*) FROM S.chaos_audit a WHERE " + EARLY_RECOVERY, schema);
    }

    /** Up to five of the recoveries {@link #earlyRecoveries} counts, described, for the report. */
    static String earlyRecoveryExamples(String schema) {
        return render(SUCCESSORS + "SELECT '#' || a.instance_id || ' of ' || a.old_claimed_by || ' attempt '"
                + " || a.old_attempt || ' recovered at ' || to_char(a.at, 'HH24:MI:SS:MS') || ' with '"
                + " || (extract(epoch FROM a.old_lease_expires_at - a.at) * 1000)::bigint || ' ms of lease left'"
                + " FROM S.chaos_audit a WHERE " + EARLY_RECOVERY + " ORDER BY a.at LIMIT 5", schema);
    }

    /** Each worker id's first claim. */
    private static final String SUCCESSORS = "WITH firsts AS MATERIALIZED (SELECT new_claimed_by AS worker,"
            + " min(at) AS first_claim FROM S.chaos_audit WHERE new_claimed_by IS NOT NULL GROUP BY new_claimed_by) ";

    private static final String EARLY_RECOVERY = "a.reaped AND a.old_lease_expires_at > a.at"
            + " AND NOT EXISTS (SELECT 1 FROM firsts f"
            + "  WHERE starts_with(f.worker, regexp_replace(a.old_claimed_by, '[^-]+$', ''))"
            + "    AND f.worker <> a.old_claimed_by"
            + "    AND f.first_claim BETWEEN a.at - interval '5 seconds' AND a.at + interval '60 seconds')";

    /**
     * Transitions that left a row whose cancel was requested waiting to run again (runnable, or
     * parked): a requested cancel ends the row cancelled at its next transition out of executing
     * (or the outcome it was committing), never sends it round again.
     */
    static String cancelsLost(String schema) {
        return render("SELECT count(*) FROM S.chaos_audit WHERE new_cancel_requested"
                + " AND new_status NOT IN ('executing', 'done', 'failed', 'cancelled')", schema);
    }

    /** Up to five of the executions {@link #staleStarts} counts, described, for the report. */
    static String staleStartExamples(String schema, long graceMillis) {
        return render("SELECT e.label || ' ran ' || e.type || '#' || e.instance_id || ' ' || e.step || ' attempt '"
                + " || e.attempt || ' at ' || to_char(e.started_at, 'HH24:MI:SS:MS') || ' seeing ' || COALESCE(e.seen_status, '?')"
                + " || ' ' || COALESCE(e.seen_step, '?') || ' attempt ' || COALESCE(e.seen_attempt::text, '?') || ' by '"
                + " || COALESCE(e.seen_claimed_by, 'nobody')"
                + " FROM S.chaos_exec e WHERE NOT (" + CURRENT_AT_START + ")"
                + " AND NOT EXISTS (SELECT 1 FROM S.chaos_faults f WHERE (f.label IS NULL OR e.label LIKE f.label)"
                + "     AND e.started_at >= f.started_at"
                + "     AND e.started_at <= COALESCE(f.ended_at, 'infinity') + " + graceMillis
                + " * interval '1 millisecond') ORDER BY e.started_at LIMIT 5", schema);
    }

    /** Up to five of the commits {@link #staleCommits} counts, described, for the report. */
    static String staleCommitExamples(String schema) {
        return render("SELECT e.label || ' ' || e.type || '#' || a.instance_id || ' ' || e.step || ' attempt ' || e.attempt"
                + " || ' committed ' || a.new_status || ' over ' || COALESCE(a.old_status, '?') || ' ' || COALESCE(a.old_step, '?')"
                + " || ' attempt ' || COALESCE(a.old_attempt::text, '?') || ' by ' || COALESCE(a.old_claimed_by, 'nobody')"
                + " || ' at ' || to_char(a.at, 'HH24:MI:SS:MS')"
                + " FROM S.chaos_audit a JOIN S.chaos_exec e ON e.token = a.token"
                + " WHERE a.old_status IS DISTINCT FROM 'executing' OR NOT (" + SAME_CLAIM + ") ORDER BY a.id LIMIT 5",
                schema);
    }

    /** {@link #currentAtStart} of the execution aliased {@code e}. */
    private static final String CURRENT_AT_START = currentAtStart("e");

    /** Whether the execution aliased {@code e} saw its own claim when it started. */
    private static String currentAtStart(String e) {
        return ("(%1$s.seen_status = 'executing' AND %1$s.seen_step = %1$s.step AND %1$s.seen_attempt = %1$s.attempt"
                + " AND EXISTS (SELECT 1 FROM S.chaos_workers w WHERE w.label = %1$s.label"
                + " AND %1$s.seen_claimed_by LIKE w.worker)"
                + " AND (%1$s.claim_xid IS NULL OR %1$s.seen_claim_xid IS NOT DISTINCT FROM %1$s.claim_xid))").formatted(e);
    }

    /**
     * Executions by an engine of the first release (it knows version 1 of the workflow only) of an
     * instance at a newer version, on a claim current when they started: a node never runs a
     * version it does not know (its pick skips them; a newer node migrates older ones as it claims them).
     */
    static String versionSkew(String schema) {
        return render("SELECT count(*) FROM S.chaos_exec e WHERE e.generation = 1 AND e.seen_version > 1 AND "
                + CURRENT_AT_START, schema);
    }

    /**
     * Executions that started on their row's current claim while an earlier execution on the claim
     * current at its own start was still running (by its recorded end), where that earlier claim was
     * not recovered as lost: a running claim is only ever taken from its owner through its lease
     * (the reaper, or a restart's reclaim; {@code early_reap} checks those waited for the lease). A
     * release, a cancel, another node's commit must never free a claim that runs. Executions
     * without a recorded end (the record is best effort) are left out.
     */
    static String takenWhileRunning(String schema) {
        return render("SELECT count(*)" + TAKEN_RUNNING, schema);
    }

    /** Up to five of the pairs {@link #takenWhileRunning} counts, described, for the report. */
    static String takenWhileRunningExamples(String schema) {
        return render("SELECT '#' || e1.instance_id || ' ' || e1.step || ': ' || e1.label || ' attempt ' || e1.attempt"
                + " || ' by ' || e1.seen_claimed_by || ' ran ' || to_char(e1.started_at, 'HH24:MI:SS:MS') || '-'"
                + " || to_char(e1.ended_at, 'HH24:MI:SS:MS') || ', ' || e2.label || ' attempt ' || e2.attempt || ' by '"
                + " || e2.seen_claimed_by || ' started ' || to_char(e2.started_at, 'HH24:MI:SS:MS') || '; transitions: '"
                + " || (SELECT string_agg(COALESCE(a.old_status, '-') || '>' || a.new_status || ' ' || a.new_step"
                + " || ' attempt ' || COALESCE(a.old_attempt::text, '-') || '>' || a.new_attempt || ' by '"
                + " || COALESCE(a.new_claimed_by, '-') || CASE WHEN a.new_cancel_requested THEN ' cancel' ELSE '' END"
                + " || ' at ' || to_char(a.at, 'HH24:MI:SS:MS'), ', ' ORDER BY a.id)"
                + " FROM S.chaos_audit a WHERE a.instance_id = e1.instance_id)" + TAKEN_RUNNING + " LIMIT 5", schema);
    }

    /** The pairs of {@link #takenWhileRunning}: a FROM and WHERE clause over e1 and e2. */
    private static final String TAKEN_RUNNING = " FROM S.chaos_exec e1 JOIN S.chaos_exec e2"
            + " ON e2.instance_id = e1.instance_id AND e2.token <> e1.token"
            + " WHERE e2.started_at > e1.started_at AND e1.ended_at IS NOT NULL AND e2.started_at < e1.ended_at"
            + " AND " + currentAtStart("e1") + " AND " + currentAtStart("e2")
            + " AND NOT EXISTS (SELECT 1 FROM S.chaos_audit a WHERE a.instance_id = e1.instance_id AND a.reaped"
            + "     AND a.old_claimed_by = e1.seen_claimed_by AND a.old_attempt = e1.attempt AND a.old_step = e1.step"
            + "     AND " + sameTransaction("e1", "a") + ")";

    static String overAttempts(String schema) {
        return render("SELECT count(*) FROM S.chaos_exec e JOIN S.durable_instances_all i ON i.id = e.instance_id"
                + " WHERE e.attempt > i.max_attempts", schema);
    }

    /** Failed rows that are neither doomed jobs nor poison jobs. */
    static String unexpectedFailed(String schema) {
        return render("SELECT count(*) FROM S.durable_instances_all i WHERE i.status = 'failed'"
                + " AND i.type <> '" + ChaosWorkload.POISON + "'"
                + " AND NOT (jsonb_typeof(i.state) = 'object' AND i.state->>'fate' = 'doomed')", schema);
    }

    /**
     * Transactional jobs whose effects break exactly-once: a done one without exactly one effect row,
     * or whose effect is not the committing execution's (its token is the result's); one not done
     * (failed, cancelled, or still live) with any. Effects are written in the transaction of the
     * outcome: a rolled-back attempt, a stale run, a killed engine leave none.
     */
    static String transactionalEffects(String schema) {
        return render("SELECT count(*) FROM S.durable_instances_all i WHERE i.type IN " + ChaosWorkload.TX_TYPES + " AND ("
                + " i.status = 'done' AND ((SELECT count(*) FROM S.chaos_effects e WHERE e.instance_id = i.id) <> 1"
                + "   OR NOT EXISTS (SELECT 1 FROM S.chaos_effects e WHERE e.instance_id = i.id"
                + "                   AND e.token = i.result->>'token'))"
                + " OR i.status <> 'done' AND EXISTS (SELECT 1 FROM S.chaos_effects e WHERE e.instance_id = i.id))",
                schema);
    }

    static String unknownTokens(String schema) {
        return render("SELECT count(*) FROM S.chaos_audit a WHERE a.token IS NOT NULL"
                + " AND NOT EXISTS (SELECT 1 FROM S.chaos_exec e WHERE e.token = a.token)", schema);
    }

    /**
     * Executions that did not count: started on a claim that was not current, or whose claim the
     * reaper recovered.
     */
    static String duplicates(String schema) {
        return render("SELECT count(*) FROM S.chaos_exec e WHERE NOT (" + CURRENT_AT_START + ") OR EXISTS ("
                + " SELECT 1 FROM S.chaos_audit a WHERE a.instance_id = e.instance_id AND a.reaped AND " + SAME_CLAIM
                + ")", schema);
    }

    /** Claims of windowed rows: window, partition, weight, epoch milliseconds, in time order. */
    static String windowClaims(String schema) {
        return render("SELECT window_name, COALESCE(window_partition, ''), window_weight,"
                + " (extract(epoch FROM at) * 1000)::bigint FROM S.chaos_audit"
                + " WHERE window_name IS NOT NULL AND new_status = 'executing'"
                + " AND old_status IS DISTINCT FROM 'executing' ORDER BY at", schema);
    }

    /** Claims of rate-limited rows: limit, partition, weight, epoch milliseconds, in time order. */
    static String rateClaims(String schema) {
        return render("SELECT rate_limit, COALESCE(rate_partition, ''), rate_weight,"
                + " (extract(epoch FROM at) * 1000)::bigint FROM S.chaos_audit"
                + " WHERE rate_limit IS NOT NULL AND new_status = 'executing'"
                + " AND old_status IS DISTINCT FROM 'executing' ORDER BY at", schema);
    }
}
