package dev.durable.benchmarks.client;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Instance;
import dev.durable.JobDefinition;
import dev.durable.JobEvent;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * What {@code awaitSettled} costs with many callers (issue 15): N callers of one engine wait for N
 * instances that another engine settles. The waiting engine runs no queue and is never started, so
 * every connection and statement it uses is the waiters'. Two windows per mode:
 * <ol>
 * <li><b>idle</b>: every waiter registered and nothing settles (the other engine's handlers hold
 *     on a gate): statements per second and the most connections out at once;
 * <li><b>settle</b>: the gate opens and the other engine runs all N; the same figures, and the
 *     latency from each instance's settle (its COMPLETED event on the settling engine, after the
 *     commit) to its waiter's wake, in the same JVM.
 * </ol>
 * Modes: {@code shared}, the engine's one settle-waiter; {@code polling}, the per-caller poller the
 * engine had before (a read at once, then one 50 ms later doubling to one a second, each caller on
 * its own), rebuilt here over {@code get(id)} for comparison. The waiting engine's pool has 10
 * connections. Standard output carries one RESULT line per mode.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.durable.benchmarks.client.SettleWaitLoad \
 *     [waiters, 1000] [idle seconds, 10] [modes, shared,polling]
 * </pre>
 */
public final class SettleWaitLoad {

    private static final Duration WAIT = Duration.ofMinutes(5);

    private SettleWaitLoad() {
    }

    public static void main(String[] args) throws Exception {
        int waiters = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int idleSeconds = args.length > 1 ? Integer.parseInt(args[1]) : 10;
        List<String> modes = args.length > 2 ? List.of(args[2].split(",")) : List.of("shared", "polling");
        for (String mode : modes) {
            System.out.println(run(mode, waiters, Duration.ofSeconds(idleSeconds)));
        }
        System.exit(0);
    }

    private static String run(String mode, int n, Duration idle) throws Exception {
        TestDatabase db = TestPostgres.newDatabase("settle_wait_" + mode);
        ConnectionPool pool = new ConnectionPool(ConnectionPoolConfiguration.builder(ConnectionFactories.get(db.url()))
                .maxSize(10).build());
        MeteredConnections metered = new MeteredConnections(pool);
        Sinks.Empty<Void> gate = Sinks.empty();
        JobDefinition<Long, Long> hold = JobDefinition.of("hold", Long.class,
                (Long seq) -> gate.asMono().thenReturn(seq)).queue("settle");
        DurableEngine waiting = DurableEngine.builder(EngineOptions.builder().connectionFactory(metered)
                .schema(db.schema()).name("waiting").build()).register(hold).build();
        DurableEngine settling = DurableEngine.builder(EngineOptions.builder().url(db.url()).schema(db.schema())
                        .name("settling").eventBufferSize(1 << 16)
                        .queue(QueueOptions.builder("settle").concurrency(200).prefetch(200).minDemand(50)
                                .pollInterval(Duration.ofMillis(100)).build())
                        .build())
                .register(hold).build();
        try {
            waiting.migrate().block(WAIT);
            Map<Long, Long> settledAt = new ConcurrentHashMap<>();
            settling.events().filter(event -> event.kind() == JobEvent.Kind.COMPLETED)
                    .subscribe(event -> settledAt.put(event.id(), System.nanoTime()));
            settling.start().block(WAIT);
            List<JobRequest> requests = new ArrayList<>(n);
            for (long i = 0; i < n; i++) {
                requests.add(JobRequest.of("hold", i));
            }
            List<Long> ids = waiting.insertAll(requests).block(WAIT);

            Map<Long, Long> wokeAt = new ConcurrentHashMap<>();
            CompletableFuture<List<Instance>> settled = Flux.fromIterable(ids)
                    .flatMap(id -> (mode.equals("polling") ? poll(waiting, id) : waiting.awaitSettled(id, WAIT))
                            .doOnNext(instance -> wokeAt.put(instance.id(), System.nanoTime())), n)
                    .collectList()
                    .toFuture();
            Thread.sleep(2000); // every waiter past its first read

            metered.resetPeak();
            long idleStatements = metered.statements();
            long idleStart = System.nanoTime();
            Thread.sleep(idle.toMillis());
            double idleSeconds = (System.nanoTime() - idleStart) / 1e9;
            idleStatements = metered.statements() - idleStatements;
            int idlePeak = metered.peak();

            metered.resetPeak();
            long settleStatements = metered.statements();
            long settleStart = System.nanoTime();
            gate.tryEmitEmpty();
            List<Instance> instances = settled.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            double settleSeconds = (System.nanoTime() - settleStart) / 1e9;
            settleStatements = metered.statements() - settleStatements;
            int settlePeak = metered.peak();

            List<Double> wakes = new ArrayList<>();
            for (long id : ids) {
                Long at = settledAt.get(id);
                Long woke = wokeAt.get(id);
                if (at != null && woke != null) {
                    wakes.add(Math.max(0, woke - at) / 1e6);
                }
            }
            wakes.sort(Double::compare);
            long done = instances.stream().filter(instance -> instance.status().isTerminal()).count();
            return String.format(Locale.ROOT, "RESULT mode=%s waiters=%d settled=%d idle_statements_per_s=%.1f"
                            + " idle_peak_connections=%d settle_seconds=%.2f settle_statements_per_s=%.1f"
                            + " settle_peak_connections=%d wake_p50_ms=%.1f wake_p99_ms=%.1f wake_max_ms=%.1f",
                    mode, n, done, idleStatements / idleSeconds, idlePeak, settleSeconds,
                    settleStatements / settleSeconds, settlePeak, rank(wakes, 0.50), rank(wakes, 0.99),
                    wakes.isEmpty() ? Double.NaN : wakes.get(wakes.size() - 1));
        } finally {
            gate.tryEmitEmpty();
            settling.closeLater().block(WAIT);
            waiting.closeLater().block(WAIT);
            pool.disposeLater().block(WAIT);
            db.close();
        }
    }

    /** The per-caller poller the engine had before issue 15: a read at once, then 50 ms doubling to 1 s. */
    private static Mono<Instance> poll(DurableEngine engine, long id) {
        return Flux.concat(Mono.just(0L), Flux.range(0, Integer.MAX_VALUE)
                        .concatMap(n -> Mono.delay(Duration.ofMillis(Math.min(50L << Math.min(n, 10), 1000))), 0))
                .concatMap(tick -> engine.get(id), 0)
                .filter(instance -> instance.status().isTerminal())
                .next();
    }

    /** Nearest rank of sorted values. */
    private static double rank(List<Double> sorted, double quantile) {
        if (sorted.isEmpty()) {
            return Double.NaN;
        }
        int index = (int) Math.ceil(quantile * sorted.size()) - 1;
        return sorted.get(Math.max(0, Math.min(index, sorted.size() - 1)));
    }
}
