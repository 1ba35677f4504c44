package dev.durable.internal.sql;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.CancelRow;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The client's statements on instances once they exist: read one, watch many for the settle
 * waiters, list, cancel, count what is busy, and the database's clock. Inserts are
 * {@link InsertSql} and {@link PolicyInsertSql}.
 */
public final class InstanceSql {

    /** An instance a settle-waiter watches, with the status it last saw it in (null: read it in full). */
    public record Watch(long id, @Nullable InstanceStatus seen) {
    }

    /** The most ids one read of {@link #watch} sends in one statement; more go in further statements. */
    public static final int WATCH_IDS_PER_STATEMENT = 1000;

    /** Columns of {@link Instance}, in the order the row mapper reads them. */
    static final String INSTANCE_COLUMNS = """
            id, type, type_version, queue, priority, status, step, state::text AS state,
            result::text AS result, last_error, attempt, max_attempts, eligible_at, awaited_signals,
            await_deadline, parent_id, children_pending, concurrency_key, correlation_key, claimed_by,
            lease_expires_at, cancel_requested, inserted_at, updated_at""";

    /** One instance. Index: primary key. Locks: none. */
    private final String select;

    /**
     * The settle-waiters' shared read: of the watched ids (at most
     * {@link #WATCH_IDS_PER_STATEMENT}), the instances whose status is not the one the waiter last
     * saw (a null seen status always differs), so an unchanged instance costs an index probe and no
     * row. An id that comes back in no row while its seen status was null has no instance.
     * Index: primary key ({@code id = ANY}), then a hashed anti-join against the seen statuses.
     * Locks: none.
     */
    private final String watch;

    /**
     * A page of instances by optional queue and status, keyset-paginated on id. For dashboards and
     * tests, not a hot path. Index: with its optional filters the plan walks both tables' primary
     * keys, merged in id order.
     * Locks: none.
     */
    private final String list;

    /**
     * Cancels an instance, and with $2 its live descendants: at once when runnable or parked, at
     * the next commit when executing (the flag is read by the outcome commit, the release and the
     * reaper). Returns the root's status before and after (after is null when it had settled).
     * Index: primary key, then the parent index down the family. Locks: each live row of the
     * family, so a concurrent pick or commit of one of them sees one answer.
     */
    private final String cancel;

    /**
     * Instances of the given queues that are due now or running: what awaitIdle waits to see reach
     * zero. Index: the pick index for runnable rows; executing ones through the ledger of claims
     * (durable_claims, about one lease's worth of claims), its ids as one array by primary key. A row
     * waiting behind its concurrency key's head (key_waiting) is counted through that head. Locks: none.
     */
    private final String countBusy;

    /** The database clock: every time Durable reasons about comes from here. Index: none. Locks: none. */
    private static final String NOW = "SELECT now()";

    private final Db db;


    public InstanceSql(Db db, Tables tables) {
        this.db = db;
        // Reads see live and settled instances alike through the view of both tables; its simple
        // UNION ALL lets each filter, and the list's id order and limit, reach both primary keys.
        this.select = tables.render("SELECT " + INSTANCE_COLUMNS + " FROM {instances_all} WHERE id = $1");
        this.watch = tables.render("SELECT " + INSTANCE_COLUMNS + "\n" + """
                 FROM {instances_all} i
                 WHERE i.id = ANY ($1::bigint[])
                   AND NOT EXISTS (SELECT 1 FROM unnest($1::bigint[], $2::text[]) AS w(wid, seen)
                                    WHERE w.wid = i.id AND w.seen = i.status)""");
        this.list = tables.render("SELECT " + INSTANCE_COLUMNS + "\n" + """
                 FROM {instances_all}
                 WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR status = $2) AND id > $3
                 ORDER BY id
                 LIMIT $4""");
        String idle = "i.id = t.id AND i.status NOT IN ('done', 'failed', 'cancelled', 'executing')";
        this.cancel = tables.render("""
                WITH RECURSIVE tree AS (
                        SELECT id FROM {instances} WHERE id = $1
                    UNION
                        SELECT c.id FROM {instances} c JOIN tree t ON c.parent_id = t.id WHERE $2
                ), root AS (
                    SELECT status, queue, type FROM {instances} WHERE id = $1
                     UNION ALL
                    SELECT status, queue, type FROM {history} WHERE id = $1
                ),\s""" + Settled.move("tree t", idle, "'cancelled'", "i.step", "i.state", "i.result", "i.last_error",
                        "i.attempt") + """
                , kept AS (
                    UPDATE {instances} i
                       SET status = CASE WHEN i.status = 'executing' THEN i.status ELSE 'cancelled' END,
                           cancel_requested = (i.status = 'executing'),
                           await_deadline = NULL,
                           updated_at = now()
                      FROM tree t
                     WHERE i.id = t.id AND i.status NOT IN ('done', 'failed', 'cancelled')
                       AND NOT (i.status <> 'executing' AND %s)
                    RETURNING i.id, i.status, i.queue, i.type
                ), changed AS (
                    SELECT id, status, queue, type FROM moved UNION ALL SELECT id, status, queue, type FROM kept
                ), descendants AS (
                    SELECT array_agg(id) AS ids, array_agg(queue) AS queues, array_agg(type) AS types
                      FROM changed WHERE id <> $1 AND status = 'cancelled'
                )
                SELECT r.status AS before, c.status AS after, r.queue, r.type, d.ids, d.queues, d.types
                  FROM root r LEFT JOIN changed c ON c.id = $1 CROSS JOIN descendants d""".formatted(
                        Settled.settlesWhere("'cancelled'")));
        this.countBusy = tables.render("SELECT (SELECT count(*) FROM {instances} WHERE queue = ANY($1)"
                + " AND status = 'runnable' AND NOT key_waiting AND eligible_at <= now() + $2 * interval '1 millisecond')"
                + " + (SELECT count(*) FROM {instances} WHERE id = ANY (ARRAY(SELECT DISTINCT unnest(ids) FROM {claims}))"
                + " AND status = 'executing' AND queue = ANY($1))");
    }

    /**
     * The watched instances whose status differs from the one seen, in statements of at most
     * {@link #WATCH_IDS_PER_STATEMENT} ids, one after the other on one connection.
     */
    public Flux<Instance> watch(List<Watch> watches) {
        if (watches.isEmpty()) {
            return Flux.empty();
        }
        List<List<Watch>> chunks = new java.util.ArrayList<>();
        for (int from = 0; from < watches.size(); from += WATCH_IDS_PER_STATEMENT) {
            chunks.add(watches.subList(from, Math.min(watches.size(), from + WATCH_IDS_PER_STATEMENT)));
        }
        return db.withConnection(connection -> Flux.fromIterable(chunks).concatMap(chunk -> {
            Long[] ids = new Long[chunk.size()];
            String[] seen = new String[chunk.size()];
            for (int i = 0; i < chunk.size(); i++) {
                ids[i] = chunk.get(i).id();
                InstanceStatus status = chunk.get(i).seen();
                seen[i] = status == null ? null : status.sqlName();
            }
            return Flux.from(connection.createStatement(watch).bind(0, ids).bind(1, seen).execute())
                    .concatMap(result -> result.map(InstanceSql::toInstance));
        }));
    }

    public Mono<Instance> get(long id) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(select).bind(0, id).execute())
                        .concatMap(result -> result.map(InstanceSql::toInstance)))
                .next();
    }

    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(list);
            Db.bind(statement, 0, queue, String.class);
            Db.bind(statement, 1, status == null ? null : status.sqlName(), String.class);
            statement.bind(2, afterId).bind(3, limit);
            return Flux.from(statement.execute()).concatMap(result -> result.map(InstanceSql::toInstance));
        });
    }

    /** Empty when no instance has that id. */
    public Mono<CancelRow> cancel(long id, boolean cascade) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(cancel)
                        .bind(0, id).bind(1, cascade).execute())
                .concatMap(result -> result.map(row -> {
                    String after = row.get("after", String.class);
                    Long[] ids = row.get("ids", Long[].class);
                    String[] queues = row.get("queues", String[].class);
                    String[] types = row.get("types", String[].class);
                    List<CancelRow.Descendant> cancelled = new java.util.ArrayList<>();
                    for (int i = 0; ids != null && i < ids.length; i++) {
                        cancelled.add(new CancelRow.Descendant(ids[i], queues[i], types[i]));
                    }
                    return new CancelRow(InstanceStatus.fromSql(row.get("before", String.class)),
                            after == null ? null : InstanceStatus.fromSql(after), row.get("queue", String.class),
                            row.get("type", String.class), cancelled);
                })))
                .next();
    }

    /** How many instances of the queues are due now or running. */
    /** Rows of the queues running, or runnable and due within {@code horizonMillis}. */
    public Mono<Long> countBusy(Collection<String> queues, long horizonMillis) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(countBusy)
                        .bind(0, queues.toArray(String[]::new)).bind(1, horizonMillis).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))).single();
    }

    /** The database's clock. */
    public Mono<Instant> now() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(NOW).execute())
                .concatMap(result -> result.map(row -> row.get(0, Instant.class)))).single();
    }

    static Instance toInstance(Readable row) {
        String[] awaited = row.get("awaited_signals", String[].class);
        Boolean cancelRequested = row.get("cancel_requested", Boolean.class);
        return new Instance(
                row.get("id", Long.class),
                row.get("type", String.class),
                row.get("type_version", Integer.class),
                row.get("queue", String.class),
                row.get("priority", Integer.class),
                InstanceStatus.fromSql(row.get("status", String.class)),
                row.get("step", String.class),
                row.get("state", String.class),
                row.get("result", String.class),
                row.get("last_error", String.class),
                row.get("attempt", Integer.class),
                row.get("max_attempts", Integer.class),
                row.get("eligible_at", Instant.class),
                Arrays.asList(awaited == null ? new String[0] : awaited),
                row.get("await_deadline", Instant.class),
                row.get("parent_id", Long.class),
                row.get("children_pending", Integer.class),
                row.get("concurrency_key", String.class),
                row.get("correlation_key", String.class),
                row.get("claimed_by", String.class),
                row.get("lease_expires_at", Instant.class),
                Boolean.TRUE.equals(cancelRequested),
                row.get("inserted_at", Instant.class),
                row.get("updated_at", Instant.class));
    }
}
