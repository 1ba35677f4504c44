package dev.durable.chaos;

/**
 * The harness's own tables, created next to Durable's in the chaos schema (test-only), and the
 * invariant queries run over them at the end.
 *
 * <ul>
 *   <li>{@code chaos_exec}: one row per handler execution, written by the handler before it works:
 *       its token, instance, step, the attempt it ran as, the label of the engine incarnation that
 *       ran it, and {@code started_at = clock_timestamp()};
 *   <li>{@code chaos_workers}: the worker ids (claimed_by values) of each label;
 *   <li>{@code chaos_audit}: written by a trigger on every transition out of {@code executing}:
 *       the claim it ended ({@code claimed_by} and {@code attempt} of the old row), the token the
 *       transition wrote (a new {@code result.token} or {@code state.last}; null for the reaper, a
 *       release, a cancel or an error), and {@code at = clock_timestamp()}, inside the committing
 *       statement, so before the row's lock is released and before any later claim of that row.
 * </ul>
 *
 * <p>Definitions (each count is 0 on a correct engine; none depends on timing luck):
 * <ul>
 *   <li><b>committed execution</b>: an execution whose token a transition wrote; its interval is
 *       [started_at, the transition's at]. A run whose lease was lost may still be running while the
 *       row runs again (at-least-once): that is allowed, as long as it never commits.
 *   <li><b>overlap</b> = (a) commits written by an execution that did not hold the claim the commit
 *       ended: another worker's claim, or the same worker's later claim (a different attempt) +
 *       (b) pairs of committed executions of one row whose intervals intersect: claims of a row are
 *       disjoint in time and a committed execution lies within its claim, so on a correct engine
 *       they cannot + (c) samples taken during the run that saw more than one executing row for one
 *       ungated concurrency key.
 *   <li><b>double_commit</b> = tokens written by more than one transition + (instance, step,
 *       attempt) claims that committed more than one token (the workload never revisits a step) +
 *       workflows whose state's token sequence is not exactly, in order, the state tokens their
 *       transitions committed (a commit lost or applied twice).
 *   <li><b>lost</b> = rows not terminal after the recovery time; <b>stuck</b> = rows executing with
 *       an expired lease after the recovery time.
 * </ul>
 */
final class ChaosSchema {

    private ChaosSchema() {
    }

    static String ddl(String schema) {
        String s = '"' + schema + '"';
        return """
                CREATE TABLE S.chaos_exec (
                    token       text PRIMARY KEY,
                    instance_id bigint NOT NULL,
                    type        text NOT NULL,
                    step        text NOT NULL,
                    attempt     integer NOT NULL,
                    label       text NOT NULL,
                    started_at  timestamptz NOT NULL,
                    ended_at    timestamptz,
                    outcome     text);
                CREATE INDEX ON S.chaos_exec (instance_id);
                CREATE TABLE S.chaos_workers (
                    label  text NOT NULL,
                    worker text NOT NULL,
                    PRIMARY KEY (label, worker));
                CREATE TABLE S.chaos_audit (
                    id             bigserial PRIMARY KEY,
                    instance_id    bigint NOT NULL,
                    token          text,
                    old_step       text NOT NULL,
                    old_attempt    integer NOT NULL,
                    old_claimed_by text,
                    new_status     text NOT NULL,
                    at             timestamptz NOT NULL);
                CREATE INDEX ON S.chaos_audit (instance_id);
                CREATE INDEX ON S.chaos_audit (token);
                CREATE FUNCTION S.chaos_audit_transition() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO S.chaos_audit (instance_id, token, old_step, old_attempt, old_claimed_by,
                                               new_status, at)
                    VALUES (NEW.id,
                            COALESCE(CASE WHEN NEW.result IS DISTINCT FROM OLD.result
                                          AND jsonb_typeof(NEW.result) = 'object' THEN NEW.result->>'token' END,
                                     CASE WHEN jsonb_typeof(NEW.state) = 'object'
                                          AND (NEW.state->>'last') IS DISTINCT FROM
                                              (CASE WHEN jsonb_typeof(OLD.state) = 'object' THEN OLD.state->>'last' END)
                                          THEN NEW.state->>'last' END),
                            OLD.step, OLD.attempt, OLD.claimed_by, NEW.status, clock_timestamp());
                    RETURN NULL;
                END
                $$;
                CREATE TRIGGER chaos_audit_transition
                    AFTER UPDATE ON S.durable_instances
                    FOR EACH ROW
                    WHEN (OLD.status = 'executing' AND (NEW.status IS DISTINCT FROM OLD.status
                          OR NEW.step IS DISTINCT FROM OLD.step))
                    EXECUTE FUNCTION S.chaos_audit_transition();
                """.replace("S.", s + ".");
    }

    /** More than one executing row for one ungated concurrency key, now. */
    static String keyOverlapSample(String schema) {
        return ("SELECT count(*) FROM (SELECT concurrency_key FROM S.durable_instances"
                + " WHERE status = 'executing' AND concurrency_key IS NOT NULL AND gate_name IS NULL"
                + " GROUP BY concurrency_key HAVING count(*) > 1) k").replace("S.", '"' + schema + "\".");
    }

    /** (a) commits by an execution that did not hold the claim they ended. */
    static String foreignClaimCommits(String schema) {
        return ("SELECT count(*) FROM S.chaos_audit a JOIN S.chaos_exec e ON e.token = a.token"
                + " WHERE e.attempt <> a.old_attempt OR NOT EXISTS (SELECT 1 FROM S.chaos_workers w"
                + " WHERE w.label = e.label AND w.worker = a.old_claimed_by)").replace("S.", '"' + schema + "\".");
    }

    /** (b) pairs of committed executions of one row whose [start, commit] intervals intersect. */
    static String intersectingCommits(String schema) {
        return ("WITH c AS (SELECT a.instance_id, e.token, e.started_at, a.at FROM S.chaos_audit a"
                + " JOIN S.chaos_exec e ON e.token = a.token)"
                + " SELECT count(*) FROM c c1 JOIN c c2 ON c1.instance_id = c2.instance_id AND c1.token < c2.token"
                + " WHERE c1.started_at < c2.at AND c2.started_at < c1.at").replace("S.", '"' + schema + "\".");
    }

    /** Tokens written by more than one transition. */
    static String tokensCommittedTwice(String schema) {
        return ("SELECT count(*) FROM (SELECT token FROM S.chaos_audit WHERE token IS NOT NULL"
                + " GROUP BY token HAVING count(*) > 1) t").replace("S.", '"' + schema + "\".");
    }

    /** Claims (instance, step, attempt) that committed more than one token. */
    static String claimsCommittedTwice(String schema) {
        return ("SELECT count(*) FROM (SELECT instance_id, old_step, old_attempt FROM S.chaos_audit"
                + " WHERE token IS NOT NULL GROUP BY 1, 2, 3 HAVING count(*) > 1) t").replace("S.", '"' + schema + "\".");
    }

    /** Workflows whose state tokens are not, in order, the state tokens their transitions wrote. */
    static String brokenStateSequences(String schema) {
        return ("SELECT count(*) FROM S.durable_instances i WHERE i.type = 'chaos.flow' AND"
                + " (SELECT array_agg(t.token ORDER BY t.ord) FROM jsonb_array_elements_text("
                + "     CASE WHEN jsonb_typeof(i.state->'tokens') = 'array' THEN i.state->'tokens' ELSE '[]' END)"
                + "     WITH ORDINALITY AS t(token, ord))"
                + " IS DISTINCT FROM"
                + " (SELECT array_agg(a.token ORDER BY a.id) FROM S.chaos_audit a WHERE a.instance_id = i.id"
                + "     AND a.token IS NOT NULL AND a.token IS DISTINCT FROM i.result->>'token')")
                .replace("S.", '"' + schema + "\".");
    }

    /** Tokens committed that no recorded execution wrote (the harness would be blind to them). */
    static String unknownTokens(String schema) {
        return ("SELECT count(*) FROM S.chaos_audit a WHERE a.token IS NOT NULL"
                + " AND NOT EXISTS (SELECT 1 FROM S.chaos_exec e WHERE e.token = a.token)")
                .replace("S.", '"' + schema + "\".");
    }
}
