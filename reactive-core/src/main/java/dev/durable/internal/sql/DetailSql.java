package dev.durable.internal.sql;

import dev.durable.Instance;
import dev.durable.admin.Attempt;
import dev.durable.admin.InboxSignal;
import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The admin's detail of one instance: the row, its children, its inbox (or, once settled, the signals
 * it consumed) and its recorded attempts, all from one snapshot.
 */
public final class DetailSql {

    private final Db db;

    /** Children of an instance, live then settled, in id order. Index: both parent indexes. Locks: none. */
    private final String children;

    /** A live instance's signals, consumed or not, in delivery order. Index: durable_signals_dedup_uq's instance_id. */
    private final String inbox;

    /** The names of the signals a settled instance consumed. Index: the history's primary key. */
    private final String consumed;

    /** One instance by id, live or settled. Index: both primary keys (through the view). */
    private final String select;

    /** The newest recorded attempts of an instance, oldest first. Index: durable_attempts_instance_idx. */
    private final String attempts;

    public DetailSql(Db db, Tables tables) {
        this.db = db;
        this.children = tables.render("SELECT * FROM ((SELECT " + InstanceSql.INSTANCE_COLUMNS
                + " FROM {instances} WHERE parent_id = $1 ORDER BY id LIMIT $2)\n UNION ALL\n(SELECT "
                + ListingSql.HISTORY_AS_INSTANCE + " FROM {history} WHERE parent_id = $1 ORDER BY id LIMIT $2)) c"
                + " ORDER BY id LIMIT $2");
        this.inbox = tables.render("SELECT id, name, payload::text AS payload, dedup_key, inserted_at, consumed_at"
                + " FROM {signals} WHERE instance_id = $1 ORDER BY id LIMIT $2");
        this.select = tables.render("SELECT " + InstanceSql.INSTANCE_COLUMNS + " FROM {instances_all} WHERE id = $1");
        this.attempts = tables.render("""
                SELECT * FROM (SELECT attempt, step, worker, started_at, finished_at, outcome, error
                                 FROM {attempts} WHERE instance_id = $1
                                ORDER BY finished_at DESC LIMIT $2) a
                 ORDER BY finished_at""");
        this.consumed = tables.render("SELECT signals FROM {history} WHERE id = $1");
    }

    /** What {@link #detail} read of one instance, all from one snapshot. */
    public record DetailRows(Instance instance, List<Instance> children, List<InboxSignal> inbox,
            List<String> consumedSignals, List<Attempt> attempts) {
    }

    /**
     * The instance {@code id} with up to {@code children} children, {@code signals} inbox signals, the
     * names it consumed once settled and its newest {@code attempts} recorded attempts, read on one
     * connection in one REPEATABLE READ, READ ONLY transaction: every part sees the same moment (a parent
     * and its children never disagree about a child that settles between two reads). Empty when no
     * instance has that id.
     */
    public Mono<DetailRows> detail(long id, int children, int signals, int attempts) {
        return db.inTransaction(connection -> Db.execute(connection,
                                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                        .then(rows(connection, select, id, null, InstanceSql::toInstance).next())
                        // One statement after the other: they share the connection.
                        .flatMap(instance -> rows(connection, this.children, id, children, InstanceSql::toInstance)
                                .collectList()
                                .flatMap(kids -> rows(connection, inbox, id, signals, DetailSql::inboxSignal)
                                        .collectList()
                                        .flatMap(box -> rows(connection, consumed, id, null, DetailSql::consumedNames)
                                                .next().defaultIfEmpty(List.of())
                                                .flatMap(names -> rows(connection, this.attempts, id, attempts,
                                                        DetailSql::attempt).collectList()
                                                        .map(tries -> new DetailRows(instance, kids, box, names,
                                                                tries))))))
                        .flux())
                .next()
                .onErrorMap(Errors::translate);
    }

    /** One statement's rows, its first argument the id and its second (when given) a limit. */
    private static <T> Flux<T> rows(io.r2dbc.spi.Connection connection, String sql, long id, @Nullable Integer limit,
            java.util.function.Function<Readable, T> mapper) {
        Statement statement = connection.createStatement(sql).bind(0, id);
        if (limit != null) {
            statement.bind(1, limit);
        }
        return Flux.from(statement.execute()).concatMap(result -> result.map(mapper::apply));
    }

    private static InboxSignal inboxSignal(Readable row) {
        return new InboxSignal(row.get("id", Long.class), row.get("name", String.class),
                row.get("payload", String.class), row.get("dedup_key", String.class),
                row.get("inserted_at", Instant.class), row.get("consumed_at", Instant.class));
    }

    private static Attempt attempt(Readable row) {
        return new Attempt(row.get("attempt", Integer.class), row.get("step", String.class),
                row.get("worker", String.class), row.get("started_at", Instant.class),
                row.get("finished_at", Instant.class), recordedOutcome(row.get("outcome", String.class)),
                row.get("error", String.class));
    }

    /** durable_attempts.outcome: 'retried', 'lease_lost', a replay's 'done'/'failed'/'cancelled', 'replayed', 'forked'. */
    private static Attempt.Outcome recordedOutcome(@Nullable String outcome) {
        return switch (String.valueOf(outcome)) {
            case "lease_lost" -> Attempt.Outcome.LEASE_LOST;
            case "done" -> Attempt.Outcome.DONE;
            case "failed" -> Attempt.Outcome.FAILED;
            case "cancelled" -> Attempt.Outcome.CANCELLED;
            case "replayed" -> Attempt.Outcome.REPLAYED;
            case "forked" -> Attempt.Outcome.FORKED;
            default -> Attempt.Outcome.RETRIED;
        };
    }

    private static List<String> consumedNames(Readable row) {
        String[] names = row.get(0, String[].class);
        return names == null ? List.of() : Arrays.asList(names);
    }
}
