package dev.durable.benchmarks.maintenance;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.IsolationLevel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Issue 16's held-xmin benchmark: the production failure of SKIP LOCKED queues. One engine runs
 * no-op jobs at its own throughput (a producer keeps a backlog in front of it) for N minutes, twice
 * on fresh schemas: once as is ({@code baseline}), once while a separate connection holds a
 * REPEATABLE READ transaction open, after a first read, through the middle half of the run
 * ({@code held}). The open snapshot pins the xmin horizon, so vacuum can remove none of the row
 * versions the queue's inserts, claims and deletes leave behind, and the pick and the statements
 * that find rows by index step over them.
 *
 * <p>Each run has three phases: {@code before} (first quarter), {@code during} (middle half, the hold
 * in the held run) and {@code after} (last quarter). Per phase it prints a PHASE line: jobs done and
 * their rate, the hot table's dead tuples (pg_stat_user_tables.n_dead_tup: the phase's highest
 * sample and its last), its size with its indexes at the phase's end, and the enqueue-to-start latency of probe jobs (p50, p99): one job every
 * 20 ms on a second queue of the same engine and table, timed from the insert call to its
 * handler's start, so the latency is the engine's reaction, not the backlog's wait. A HELDXMIN line
 * compares the held run with the baseline per phase. A warm-up run on a schema of its own comes first
 * (its PHASE lines say {@code run=warmup}), so the baseline is not the one that pays for the JIT.
 *
 * <pre>benchmarks/held-xmin [--minutes 5] [--warmup-minutes 0.5] [--sample-seconds 5]</pre>
 */
public final class HeldXmin {

    private static final String QUEUE = "load";
    private static final String PROBE_QUEUE = "probe";
    private static final int CONCURRENCY = 64;
    private static final int PREFETCH = 64;
    private static final long PROBE_EVERY_MILLIS = 20;
    private static final Duration WAIT = Duration.ofMinutes(1);
    private static final List<String> PHASES = List.of("before", "during", "after");

    /** One phase of one run: jobs done, dead tuples sampled, probe latencies in microseconds. */
    private static final class Phase {

        final String name;
        final List<Long> latencies = new ArrayList<>();
        long doneAtStart;
        long doneAtEnd;
        double seconds;
        long deadMax;
        long deadLast;
        long bytesLast;

        Phase(String name) {
            this.name = name;
        }

        double jobsPerSecond() {
            return (doneAtEnd - doneAtStart) / seconds;
        }

        synchronized void latency(long micros) {
            latencies.add(micros);
        }

        synchronized double percentileMillis(double p) {
            if (latencies.isEmpty()) {
                return Double.NaN;
            }
            List<Long> sorted = latencies.stream().sorted().toList();
            return sorted.get((int) Math.min(sorted.size() - 1, Math.ceil(p * sorted.size()) - 1)) / 1000.0;
        }

        String line(String run) {
            return String.format(Locale.ROOT, "PHASE run=%s phase=%s seconds=%.0f jobs=%d jobs_per_s=%.0f"
                            + " hot_dead_tup_max=%d hot_dead_tup_end=%d hot_mb_end=%.1f probes=%d start_p50_ms=%.1f"
                            + " start_p99_ms=%.1f",
                    run, name, seconds, doneAtEnd - doneAtStart, jobsPerSecond(), deadMax, deadLast,
                    bytesLast / 1048576.0, latencies.size(),
                    percentileMillis(0.50), percentileMillis(0.99));
        }
    }

    private HeldXmin() {
    }

    public static void main(String[] args) throws Exception {
        double minutes = 5;
        double warmupMinutes = 0.5;
        int sampleSeconds = 5;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--minutes" -> minutes = Double.parseDouble(args[i + 1]);
                case "--warmup-minutes" -> warmupMinutes = Double.parseDouble(args[i + 1]);
                case "--sample-seconds" -> sampleSeconds = Integer.parseInt(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (warmupMinutes > 0) {
            run("warmup", warmupMinutes, sampleSeconds, false);
        }
        List<Phase> baseline = run("baseline", minutes, sampleSeconds, false);
        List<Phase> held = run("held", minutes, sampleSeconds, true);
        for (int i = 0; i < PHASES.size(); i++) {
            Phase b = baseline.get(i);
            Phase h = held.get(i);
            System.out.println(String.format(Locale.ROOT, "HELDXMIN phase=%s jobs_per_s=%.0f/%.0f (%.2fx)"
                            + " hot_dead_tup_max=%d/%d (%.1fx) start_p99_ms=%.1f/%.1f (%.1fx)", b.name,
                    h.jobsPerSecond(), b.jobsPerSecond(), h.jobsPerSecond() / b.jobsPerSecond(),
                    h.deadMax, b.deadMax, (double) h.deadMax / Math.max(1, b.deadMax),
                    h.percentileMillis(0.99), b.percentileMillis(0.99),
                    h.percentileMillis(0.99) / b.percentileMillis(0.99)));
        }
        System.exit(0);
    }

    private static List<Phase> run(String name, double minutes, int sampleSeconds, boolean hold) throws Exception {
        TestDatabase db = TestPostgres.newDatabase("held_xmin_" + name);
        EngineOptions options = EngineOptions.builder().url(db.url()).schema(db.schema()).poolMaxSize(8)
                .handlerScheduler(Schedulers.parallel())
                .retention(Duration.ofMinutes(1))
                .queue(QueueOptions.builder(QUEUE).concurrency(CONCURRENCY).prefetch(PREFETCH).minDemand(32).build())
                .queue(QueueOptions.builder(PROBE_QUEUE).concurrency(8).prefetch(8).build())
                .build();
        List<Phase> phases = PHASES.stream().map(Phase::new).toList();
        Phase[] current = {phases.get(0)};
        DurableEngine engine = DurableEngine.builder(options)
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty()).queue(QUEUE))
                .register(JobDefinition.of("probe", Long.class, (Long insertedNanos) -> {
                    current[0].latency((System.nanoTime() - insertedNanos) / 1000);
                    return Mono.<Void>empty();
                }).queue(PROBE_QUEUE))
                .build();
        engine.start().block(WAIT);
        System.err.println("[held-xmin] run " + name + ": " + minutes + " minutes, hold " + hold);

        AtomicBoolean running = new AtomicBoolean(true);
        AtomicLong inserted = new AtomicLong();
        Thread producer = new Thread(() -> Backlog.keep(engine, QUEUE, running, inserted, "held-xmin"),
                "held-xmin-producer");
        Thread prober = new Thread(() -> probe(engine, running), "held-xmin-prober");
        producer.setDaemon(true);
        prober.setDaemon(true);
        producer.start();
        prober.start();

        long total = (long) (minutes * 60e9);
        long[] ends = {total / 4, total * 3 / 4, total};
        long started = System.nanoTime();
        Connection holder = null;
        try {
            for (int i = 0; i < phases.size(); i++) {
                Phase phase = phases.get(i);
                current[0] = phase;
                long phaseStart = System.nanoTime();
                phase.doneAtStart = Backlog.completed(engine, QUEUE);
                if (hold && phase.name.equals("during")) {
                    holder = holdSnapshot(db);
                }
                while (System.nanoTime() - started < ends[i]) {
                    Thread.sleep(Math.min(sampleSeconds * 1000L,
                            Math.max(1, (ends[i] - (System.nanoTime() - started)) / 1_000_000)));
                    long[] table = hotTable(db);
                    long dead = table[0];
                    phase.deadMax = Math.max(phase.deadMax, dead);
                    phase.deadLast = dead;
                    phase.bytesLast = table[1];
                    System.err.printf(Locale.ROOT, "[held-xmin] %s %s t=%.0fs done=%d hot_dead_tup=%d%n", name,
                            phase.name, (System.nanoTime() - started) / 1e9, Backlog.completed(engine, QUEUE), dead);
                }
                if (holder != null) {
                    Mono.from(holder.rollbackTransaction()).then(Mono.from(holder.close())).block(WAIT);
                    holder = null;
                }
                phase.doneAtEnd = Backlog.completed(engine, QUEUE);
                phase.seconds = (System.nanoTime() - phaseStart) / 1e9;
                System.out.println(phase.line(name));
            }
        } finally {
            running.set(false);
            producer.join(60_000);
            prober.join(60_000);
            engine.closeLater().block(WAIT);
            db.close();
        }
        return phases;
    }

    /**
     * A connection in a REPEATABLE READ transaction that has read once: its snapshot, and with it
     * the xmin horizon, stays put until the transaction ends.
     */
    private static Connection holdSnapshot(TestDatabase db) {
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        Mono.from(connection.beginTransaction(IsolationLevel.REPEATABLE_READ))
                .thenMany(Flux.from(connection.createStatement("SELECT count(*) FROM \"" + db.schema()
                        + "\".durable_instances").execute()).flatMap(r -> r.map(row -> row.get(0, Long.class))))
                .then().block(WAIT);
        return connection;
    }

    /** One probe job every {@link #PROBE_EVERY_MILLIS}, carrying the JVM's clock at its insert. */
    private static void probe(DurableEngine engine, AtomicBoolean running) {
        long next = System.nanoTime();
        while (running.get()) {
            try {
                engine.insert(JobRequest.of("probe", System.nanoTime())).block(WAIT);
            } catch (RuntimeException e) {
                System.err.println("[held-xmin] probe insert failed: " + e);
            }
            next += PROBE_EVERY_MILLIS * 1_000_000;
            long pause = (next - System.nanoTime()) / 1_000_000;
            if (pause > 0) {
                Backlog.sleep(pause);
            } else {
                next = System.nanoTime();
            }
        }
    }

    /** The hot table's dead tuples (pg_stat_user_tables) and its size with its indexes, in bytes. */
    private static long[] hotTable(TestDatabase db) {
        long[] table = Flux.usingWhen(db.connectionFactory().create(),
                        (Connection c) -> Flux.from(c.createStatement("SELECT n_dead_tup, pg_total_relation_size(relid)"
                                        + " FROM pg_stat_user_tables WHERE schemaname = '" + db.schema()
                                        + "' AND relname = 'durable_instances'").execute())
                                .flatMap(r -> r.map(row -> new long[] {row.get(0, Long.class), row.get(1, Long.class)})),
                        Connection::close)
                .next()
                .block(WAIT);
        return table == null ? new long[2] : table;
    }
}
