package dev.durable.benchmarks.shootout;

import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The ceiling: the least SQL any PostgreSQL queue must run per job, batched. Insert 100 per
 * statement, claim 100 with {@code FOR UPDATE SKIP LOCKED}, complete 100 by id; over R2DBC with
 * the same pool size as everyone else. No leases, retries, heartbeats or ownership checks. An idle
 * worker waits for an in-process poke from the inserter (like Durable's local poke), with a
 * 100 ms poll as the floor. Every {@link #VACUUM_EVERY} it VACUUMs its table once it holds
 * {@link #VACUUM_AT} dead rows, as Durable's vacuumer does: without it a sustained run waits for
 * autovacuum's next visit (a minute by default) and the claims step over millions of dead
 * versions (19,800 instead of 40,000 jobs/s and 89 µs of server CPU per job in 60 s), which is no
 * ceiling.
 */
final class RawSqlContender implements Contender {

    static final String SCHEMA = "shootout_raw";
    static final int BATCH = 100;
    private static final String JOBS = SCHEMA + ".jobs";

    private static final String INSERT = "INSERT INTO " + JOBS + " (args)"
            + " SELECT jsonb_build_object('seq', s) FROM unnest($1::bigint[]) AS s";
    /** Rides the partial index of runnable rows; locks only what it claims. */
    private static final String CLAIM = "UPDATE " + JOBS + " j SET status = 'running', claimed_at = now()"
            + " FROM (SELECT id FROM " + JOBS + " WHERE status = 'runnable' AND run_at <= now()"
            + "        ORDER BY run_at, id LIMIT " + BATCH + " FOR UPDATE SKIP LOCKED) c"
            + " WHERE j.id = c.id RETURNING j.id, (j.args->>'seq')::bigint AS seq";
    private static final String COMPLETE = "UPDATE " + JOBS + " SET status = 'done' WHERE id = ANY($1)";
    static final Duration VACUUM_EVERY = Duration.ofSeconds(2);
    static final long VACUUM_AT = 10_000;
    private static final String DEAD_ROWS = "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '" + JOBS
            + "'::regclass";

    private final Target target;
    private final int connections;
    private final int workers;
    private final AtomicReference<Sinks.Empty<Void>> wake = new AtomicReference<>(Sinks.empty());
    private final Disposable.Composite loops = Disposables.composite();
    private volatile boolean running;
    private ConnectionPool pool;

    RawSqlContender(Target target, int connections) {
        this.target = target;
        this.connections = connections;
        // Claim loops: enough to overlap round trips on 2 cores; the inserter needs a connection too.
        this.workers = Math.max(2, Math.min(connections - 1, connections / 5));
    }

    @Override
    public String name() {
        return "raw_sql";
    }

    @Override
    public String schema() {
        return SCHEMA;
    }

    @Override
    public String settings() {
        return "r2dbc pool max " + connections + ", " + workers + " claim loops, insert/claim/complete "
                + BATCH + " per statement, idle wait = local poke or 100 ms poll, VACUUM at " + VACUUM_AT
                + " dead rows (checked every " + VACUUM_EVERY.toSeconds() + " s)";
    }

    @Override
    public void start() {
        target.execute("CREATE SCHEMA " + SCHEMA,
                "CREATE TABLE " + JOBS + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                        + " status text NOT NULL DEFAULT 'runnable', args jsonb,"
                        + " run_at timestamptz NOT NULL DEFAULT now(), claimed_at timestamptz)",
                "CREATE INDEX jobs_runnable_idx ON " + JOBS + " (run_at, id) WHERE status = 'runnable'");
        pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(target.r2dbcUrl))
                .name("raw-sql").initialSize(1).maxSize(connections).build());
        running = true;
        for (int i = 0; i < workers; i++) {
            loops.add(Mono.defer(this::claimAndRun).repeat(() -> running)
                    .subscribe(null, error -> Shootout.log("raw_sql: claim loop failed: %s", error)));
        }
        loops.add(Flux.interval(VACUUM_EVERY)
                .onBackpressureDrop()
                .concatMap(tick -> vacuumIfDead().onErrorResume(error -> {
                    Shootout.log("raw_sql: vacuum failed, the next tick tries again: %s", error);
                    return Mono.empty();
                }), 0)
                .subscribe(null, error -> Shootout.log("raw_sql: vacuum loop failed: %s", error)));
    }

    /** VACUUMs the table when it holds {@link #VACUUM_AT} dead rows (SKIP_LOCKED: autovacuum may hold it). */
    private Mono<Void> vacuumIfDead() {
        return Flux.usingWhen(pool.create(),
                        connection -> Flux.from(connection.createStatement(DEAD_ROWS).execute())
                                .concatMap(result -> result.map(row -> row.get(0, Long.class)))
                                .filter(dead -> dead >= VACUUM_AT)
                                .concatMap(dead -> Flux.from(connection.createStatement(
                                        "VACUUM (SKIP_LOCKED) " + JOBS).execute()).flatMap(Result::getRowsUpdated)),
                        Connection::close)
                .then();
    }

    private Mono<Void> claimAndRun() {
        Sinks.Empty<Void> idle = wake.get();
        return Flux.usingWhen(pool.create(),
                        connection -> Flux.from(connection.createStatement(CLAIM).execute())
                                .concatMap(result -> result.map(row -> new long[] {
                                        row.get("id", Long.class), row.get("seq", Long.class)})),
                        Connection::close)
                .collectList()
                .flatMap(claimed -> claimed.isEmpty()
                        ? idle.asMono().timeout(Duration.ofMillis(100), Mono.empty())
                        : runAndComplete(claimed));
    }

    private Mono<Void> runAndComplete(List<long[]> claimed) {
        Long[] ids = new Long[claimed.size()];
        for (int i = 0; i < ids.length; i++) {
            Probe.started(claimed.get(i)[1]);
            ids[i] = claimed.get(i)[0];
        }
        return execute(COMPLETE, ids).then(Mono.fromRunnable(() -> {
            for (long[] row : claimed) {
                Probe.settled(row[1]);
            }
        }));
    }

    private Mono<Void> execute(String sql, Object array) {
        return Flux.usingWhen(pool.create(),
                        connection -> Flux.from(connection.createStatement(sql).bind(0, array).execute())
                                .flatMap(Result::getRowsUpdated),
                        Connection::close)
                .then();
    }

    @Override
    public int insertBatchSize() {
        return BATCH;
    }

    @Override
    public void insertBatch(List<Long> seqs) {
        execute(INSERT, seqs.toArray(Long[]::new)).block(Duration.ofMinutes(1));
        wake.getAndSet(Sinks.empty()).tryEmitEmpty();
    }

    @Override
    public void insertOne(long seq) {
        insertBatch(List.of(seq));
    }

    @Override
    public String settleSource() {
        return "its complete statement's answer (autocommit)";
    }

    @Override
    public long committed(Target target, long insertedSoFar) {
        return target.queryLong("SELECT count(*) FROM " + JOBS + " WHERE status = 'done'");
    }

    @Override
    public void stop() {
        running = false;
        wake.get().tryEmitEmpty();
        loops.dispose();
        if (pool != null) {
            pool.disposeLater().block(Duration.ofSeconds(30));
        }
    }
}
