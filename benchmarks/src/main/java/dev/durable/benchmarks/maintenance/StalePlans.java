package dev.durable.benchmarks.maintenance;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.Maintenance;
import dev.durable.QueueOptions;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Result;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Plans kept from an empty hot table: one engine runs no-op jobs over a hot table whose statistics
 * say it is empty (ANALYZEd empty, as after a fresh install or a drained queue), long enough for
 * every pooled connection's prepared picks and commits to switch to their cached generic plans;
 * then N runnable rows arrive at once and the engine drains them. Prints a SAMPLE line a second
 * (jobs done, jobs/s, the hot table's reltuples and live tuples, ANALYZEs so far) and a RESULT line
 * with the drain's time and the mean server time of the pick and of the outcome commit over the
 * drain (pg_stat_statements), an ANALYZER line (the mean time of the analyzer's catalog check and its
 * ANALYZEs), then the slowest statements. Its own embedded PostgreSQL.
 *
 * <pre>
 * benchmarks/stale-plans [--rows 20000] [--autovacuum off|on] [--analyzer on|off]
 * </pre>
 *
 * {@code --autovacuum off} (the default) switches autovacuum off for the hot table, so nothing but
 * the engine can refresh its statistics (autoanalyze would, within autovacuum_naptime, a minute by
 * default, once its threshold is crossed); {@code --analyzer off} leaves the engine's analyzer off (its default); on is this tool's default.
 */
public final class StalePlans {

    private static final String QUEUE = "stale";
    private static final Duration WAIT = Duration.ofMinutes(5);

    private StalePlans() {
    }

    public static void main(String[] args) throws Exception {
        int rows = 20_000;
        boolean autovacuum = false;
        boolean analyzer = true;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--rows" -> rows = Integer.parseInt(args[i + 1]);
                case "--autovacuum" -> autovacuum = "on".equals(args[i + 1]);
                case "--analyzer" -> analyzer = "on".equals(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        java.nio.file.Path logs = java.nio.file.Files.createTempDirectory("stale-plans");
        EmbeddedPostgres server = EmbeddedPostgres.builder()
                .setServerConfig("shared_preload_libraries", "pg_stat_statements")
                .setServerConfig("pg_stat_statements.track", "top")
                .setServerConfig("session_preload_libraries", "auto_explain")
                .setServerConfig("auto_explain.log_min_duration", "50ms")
                .setServerConfig("logging_collector", "on")
                .setServerConfig("log_directory", logs.toString())
                .setServerConfig("log_filename", "postgres.log")
                .setPGStartupWait(Duration.ofSeconds(60))
                .start();
        String url = "r2dbc:postgresql://postgres:postgres@localhost:" + server.getPort() + "/postgres";
        Connection admin = Mono.from(ConnectionFactories.get(url).create()).block(WAIT);
        String instances = "\"durable\".durable_instances";
        EngineOptions.Builder builder = EngineOptions.builder().url(url).schema("durable").poolMaxSize(8)
                .handlerScheduler(Schedulers.parallel())
                .queue(QueueOptions.builder(QUEUE).concurrency(64).prefetch(64).minDemand(32).build());
        // The engine's analyzer is off by default: on here unless asked off.
        builder.analyzer(analyzer ? Maintenance.TaskOptions.every(EngineOptions.DEFAULT_ANALYZER_INTERVAL)
                : Maintenance.TaskOptions.every(EngineOptions.DEFAULT_ANALYZER_INTERVAL).disabled());
        DurableEngine engine = DurableEngine.builder(builder.build())
                .register(JobDefinition.of("noop", Long.class, (Long seq) -> Mono.<Void>empty()).queue(QUEUE))
                .build();
        engine.migrate().block(WAIT);
        execute(admin, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
        if (!autovacuum) {
            execute(admin, "ALTER TABLE " + instances + " SET (autovacuum_enabled = false)");
        }
        execute(admin, "ANALYZE " + instances);
        engine.start().block(WAIT);

        // Long enough for every pooled connection to run its picks and commits more than five times;
        // then the queue drains and is vacuumed (its empty pages truncated) and analyzed empty, which
        // drops the cached plans, and a trickle of jobs has every connection plan them again over a
        // table of a page or two whose statistics say it is empty.
        long seq = trickle(engine, 0, 100);
        execute(admin, "VACUUM ANALYZE " + instances);
        seq = trickle(engine, seq, 30);
        long warm = seq;
        System.err.println("[stale-plans] warm: " + warm + " jobs; reltuples " + reltuples(admin)
                + "; relpages " + text(admin, "SELECT relpages FROM pg_class WHERE oid = '" + instances + "'::regclass")
                + ", pages " + text(admin, "SELECT pg_relation_size('" + instances + "') / 8192") + "; filling "
                + rows + " rows; autovacuum " + (autovacuum ? "on" : "off") + ", analyzer "
                + (analyzer ? "on" : "off"));

        execute(admin, "SELECT pg_stat_statements_reset()");
        execute(admin, "INSERT INTO " + instances + " (type, queue, step, state, max_attempts)"
                + " SELECT 'noop', '" + QUEUE + "', 'run', to_jsonb(g), 20 FROM generate_series(1, " + rows + ") g");
        long started = System.nanoTime();
        long lastDone = 0;
        double lastSeconds = 0;
        while (Backlog.completed(engine, QUEUE) < warm + rows) {
            Thread.sleep(1000);
            double seconds = (System.nanoTime() - started) / 1e9;
            long done = Backlog.completed(engine, QUEUE) - warm;
            System.out.println(String.format(Locale.ROOT, "SAMPLE t=%.0fs done=%d jobs_per_s=%.0f reltuples=%s"
                            + " n_live_tup=%s analyzes=%s", seconds, done, (done - lastDone) / (seconds - lastSeconds),
                    reltuples(admin), text(admin, "SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = '"
                            + instances + "'::regclass"),
                    text(admin, "SELECT analyze_count + autoanalyze_count FROM pg_stat_user_tables WHERE relid = '"
                            + instances + "'::regclass")));
            lastDone = done;
            lastSeconds = seconds;
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        String pick = text(admin, "SELECT round(sum(total_exec_time)::numeric / sum(calls), 2) || ' ms over '"
                + " || sum(calls) || ', max ' || round(max(max_exec_time)::numeric, 1) || ' ms'"
                + " FROM pg_stat_statements WHERE query LIKE 'WITH RECURSIVE priorities%'");
        String commit = text(admin, "SELECT round(sum(total_exec_time)::numeric / sum(calls), 2) || ' ms over '"
                + " || sum(calls) || ', max ' || round(max(max_exec_time)::numeric, 1) || ' ms'"
                + " FROM pg_stat_statements WHERE query LIKE 'WITH moved AS%' AND query LIKE '%width_bucket%'"
                + " AND query NOT LIKE '%pg_stat%'");
        System.out.println(String.format(Locale.ROOT, "RESULT rows=%d autovacuum=%s analyzer=%s drain_s=%.1f"
                        + " jobs_per_s=%.0f pick_mean=\"%s\" commit_mean=\"%s\" reltuples_end=%s", rows,
                autovacuum ? "on" : "off", analyzer ? "on" : "off", seconds, rows / seconds, pick, commit,
                reltuples(admin)));
        System.out.println("ANALYZER check_mean=\"" + text(admin, "SELECT round(sum(total_exec_time)::numeric"
                + " / sum(calls), 3) || ' ms over ' || sum(calls) FROM pg_stat_statements"
                + " WHERE query LIKE '%FROM pg_stat_user_tables s%'") + "\" analyze=\"" + text(admin,
                "SELECT string_agg(round(total_exec_time::numeric, 1) || ' ms x ' || calls, ', ')"
                        + " FROM pg_stat_statements WHERE query LIKE 'ANALYZE (SKIP_LOCKED)%'") + "\"");
        for (String line : lines(admin, "SELECT round(mean_exec_time::numeric, 2) || ' ms x ' || calls || ': '"
                + " || left(regexp_replace(query, '\\s+', ' ', 'g'), 100) FROM pg_stat_statements"
                + " WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 6")) {
            System.out.println("TOP " + line);
        }
        System.out.println("LOG " + logs.resolve("postgres.log") + " (auto_explain of statements over 50 ms)");
        engine.closeLater().block(WAIT);
        Mono.from(admin.close()).block(WAIT);
        server.close();
        System.exit(0);
    }

    private static long trickle(DurableEngine engine, long seq, int rounds) throws InterruptedException {
        for (int round = 0; round < rounds; round++) {
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                requests.add(JobRequest.of("noop", seq++));
            }
            engine.insertAll(requests).block(WAIT);
            Thread.sleep(20);
        }
        while (Backlog.completed(engine, QUEUE) < seq) {
            Thread.sleep(50);
        }
        return seq;
    }

    private static String reltuples(Connection admin) {
        return text(admin,
                "SELECT reltuples::bigint FROM pg_class WHERE oid = '\"durable\".durable_instances'::regclass");
    }

    private static void execute(Connection admin, String sql) {
        Flux.from(admin.createStatement(sql).execute()).flatMap(Result::getRowsUpdated).then().block(WAIT);
    }

    private static String text(Connection admin, String sql) {
        List<String> lines = lines(admin, sql);
        return lines.isEmpty() ? "null" : lines.get(0);
    }

    private static List<String> lines(Connection admin, String sql) {
        return Flux.from(admin.createStatement(sql).execute())
                .concatMap(result -> result.map(row -> String.valueOf(row.get(0))))
                .collectList().block(WAIT);
    }
}
