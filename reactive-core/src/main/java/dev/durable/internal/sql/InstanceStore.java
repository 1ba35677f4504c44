package dev.durable.internal.sql;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.CancelRow;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.OutcomeRow;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Runs the statements of {@link Sql} and maps their rows. No SQL text lives anywhere else. */
public final class InstanceStore {

    private static final String[] NO_STRINGS = new String[0];

    private final Db db;
    private final Sql sql;

    public InstanceStore(Db db, Sql sql) {
        this.db = db;
        this.sql = sql;
    }

    public Sql sql() {
        return sql;
    }

    /** Inserts the rows in one round trip on a pooled connection; ids in request order. */
    public Flux<Long> insert(List<NewInstance> rows) {
        return db.withConnection(connection -> insert(connection, rows));
    }

    /** Inserts on the caller's connection, inside whatever transaction it has open. */
    public Flux<Long> insert(Connection connection, List<NewInstance> rows) {
        int n = rows.size();
        String[] types = new String[n];
        Integer[] versions = new Integer[n];
        String[] queues = new String[n];
        Integer[] priorities = new Integer[n];
        String[] steps = new String[n];
        String[] states = new String[n];
        Integer[] maxAttempts = new Integer[n];
        String[] runAts = new String[n];
        Long[] delays = new Long[n];
        Long[] parents = new Long[n];
        String[] concurrencyKeys = new String[n];
        String[] correlationKeys = new String[n];
        String[] occupied = new String[n];
        for (int i = 0; i < n; i++) {
            NewInstance row = rows.get(i);
            types[i] = row.type();
            versions[i] = row.typeVersion();
            queues[i] = row.queue();
            priorities[i] = row.priority();
            steps[i] = row.step();
            states[i] = row.stateJson();
            maxAttempts[i] = row.maxAttempts();
            runAts[i] = row.runAt();
            delays[i] = row.delayMillis();
            parents[i] = row.parentId();
            concurrencyKeys[i] = row.concurrencyKey();
            correlationKeys[i] = row.correlationKey();
            occupied[i] = row.occupiedStatuses();
        }
        Statement statement = connection.createStatement(sql.insertInstances)
                .bind(0, types).bind(1, versions).bind(2, queues).bind(3, priorities).bind(4, steps)
                .bind(5, states).bind(6, maxAttempts).bind(7, runAts).bind(8, delays).bind(9, parents)
                .bind(10, concurrencyKeys).bind(11, correlationKeys).bind(12, occupied);
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))
                .onErrorMap(dev.durable.internal.Errors::translate);
    }

    public Mono<Instance> get(long id) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.selectInstance)
                        .bind(0, id).execute())
                .concatMap(result -> result.map(InstanceStore::toInstance)))
                .next();
    }

    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(sql.listInstances);
            Db.bind(statement, 0, queue, String.class);
            Db.bind(statement, 1, status == null ? null : status.sqlName(), String.class);
            statement.bind(2, afterId).bind(3, limit);
            return Flux.from(statement.execute()).concatMap(result -> result.map(InstanceStore::toInstance));
        });
    }

    /** Empty when no instance has that id. */
    public Mono<CancelRow> cancel(long id) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.cancelInstance)
                        .bind(0, id).execute())
                .concatMap(result -> result.map(row -> {
                    String after = row.get("after", String.class);
                    return new CancelRow(InstanceStatus.fromSql(row.get("before", String.class)),
                            after == null ? null : InstanceStatus.fromSql(after));
                })))
                .next();
    }

    /** Claims up to {@code limit} rows of {@code queue} for {@code worker}; see {@link Sql#pick}. */
    public Flux<ClaimedRow> pick(String queue, int limit, String worker, long leaseMillis) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.pick)
                        .bind(0, queue).bind(1, limit).bind(2, worker).bind(3, leaseMillis).execute())
                .concatMap(result -> result.map(InstanceStore::toClaimed)));
    }

    /** Renews the leases; returns how many rows the worker still holds. */
    public Mono<Long> heartbeat(Collection<Long> ids, String worker, long leaseMillis) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.heartbeat)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).bind(2, leaseMillis).execute())
                .concatMap(result -> result.getRowsUpdated()))
                .reduce(0L, Long::sum);
    }

    public Flux<Transition> release(Collection<Long> ids, String worker) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.release)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).execute())
                .concatMap(result -> result.map(row -> new Transition(row.get("id", Long.class),
                        row.get("queue", String.class), InstanceStatus.RUNNABLE))));
    }

    /**
     * Recovers expired claims: every worker's when {@code prefix} is null (the reaper), else only
     * those of {@code prefix}'s dead incarnations, {@code marginMillis} before they expire.
     */
    public Flux<Transition> recoverExpired(long marginMillis, @Nullable String prefix, String self, int limit) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(sql.recoverExpired).bind(0, marginMillis);
            Db.bind(statement, 1, prefix, String.class);
            statement.bind(2, self).bind(3, limit);
            return Flux.from(statement.execute()).concatMap(result -> result.map(InstanceStore::toTransition));
        });
    }

    /** Commits outcomes in one statement; returns the rows that were still owned, as they ended. */
    public Flux<Transition> commitOutcomes(List<OutcomeRow> outcomes) {
        int n = outcomes.size();
        Long[] ids = new Long[n];
        String[] workers = new String[n];
        String[] statuses = new String[n];
        String[] steps = new String[n];
        String[] states = new String[n];
        String[] results = new String[n];
        String[] errors = new String[n];
        Long[] delays = new Long[n];
        Boolean[] resets = new Boolean[n];
        Long[] leases = new Long[n];
        for (int i = 0; i < n; i++) {
            OutcomeRow outcome = outcomes.get(i);
            ids[i] = outcome.id();
            workers[i] = outcome.worker();
            statuses[i] = outcome.status().sqlName();
            steps[i] = outcome.step();
            states[i] = outcome.stateJson();
            results[i] = outcome.resultJson();
            errors[i] = outcome.error();
            delays[i] = outcome.delayMillis();
            resets[i] = outcome.resetAttempt();
            leases[i] = outcome.leaseMillis();
        }
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.commitOutcomes)
                        .bind(0, ids).bind(1, workers).bind(2, statuses).bind(3, steps).bind(4, states)
                        .bind(5, results).bind(6, errors).bind(7, delays).bind(8, resets).bind(9, leases)
                        .execute())
                .concatMap(result -> result.map(InstanceStore::toTransition)));
    }

    private static Transition toTransition(Readable row) {
        return new Transition(row.get("id", Long.class), row.get("queue", String.class),
                InstanceStatus.fromSql(row.get("status", String.class)));
    }

    private static ClaimedRow toClaimed(Readable row) {
        return new ClaimedRow(
                row.get("id", Long.class),
                row.get("type", String.class),
                row.get("type_version", Integer.class),
                row.get("queue", String.class),
                row.get("priority", Integer.class),
                row.get("eligible_at", Instant.class),
                row.get("step", String.class),
                row.get("state", String.class),
                row.get("attempt", Integer.class),
                row.get("max_attempts", Integer.class),
                row.get("concurrency_key", String.class),
                row.get("parent_id", Long.class));
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
                Arrays.asList(awaited == null ? NO_STRINGS : awaited),
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
