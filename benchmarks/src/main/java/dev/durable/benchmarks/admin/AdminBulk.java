package dev.durable.benchmarks.admin;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.InstanceStatus;
import dev.durable.QueueOptions;
import dev.durable.admin.BulkProgress;
import dev.durable.admin.BulkRequest;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceFilter;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import java.time.Duration;
import java.util.Locale;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A bulk retry job ({@link DurableAdmin#startBulk}) over the failed rows of a filled history (shaped as
 * {@link AdminListing}'s: 8 % failed): how long it takes, its progress as it goes, and the longest
 * transaction any client session held meanwhile (sampled from pg_stat_activity every 200 ms; autovacuum's
 * workers left out),
 * which stays at a chunk's length however many rows the job goes through.
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar dev.durable.benchmarks.admin.AdminBulk [--rows 1000000] [--batch 1000]
 * </pre>
 */
public final class AdminBulk {

    private static final Duration WAIT = Duration.ofMinutes(30);

    private AdminBulk() {
    }

    public static void main(String[] args) {
        int rows = 1_000_000;
        int batch = 1_000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--rows" -> rows = Integer.parseInt(args[i + 1]);
                case "--batch" -> batch = Integer.parseInt(args[i + 1]);
                default -> throw new IllegalArgumentException("usage: AdminBulk [--rows N] [--batch B]");
            }
        }
        TestDatabase database = TestPostgres.newDatabase("admin_bulk");
        DurableEngine engine = DurableEngine.builder(EngineOptions.builder().url(database.url())
                .schema(database.schema()).poolMaxSize(4)
                // The filled rows settled months ago: GC would collect them while the job runs.
                .runMaintenance(false)
                .queue(QueueOptions.builder(DurableAdmin.BULK_QUEUE).build()).build()).build();
        try {
            engine.start().block(WAIT);
            AdminListing.fill(database, rows, 0, true);
            DurableAdmin admin = engine.admin();
            InstanceFilter failed = InstanceFilter.builder().status(InstanceStatus.FAILED).build();
            long started = System.nanoTime();
            long job = admin.startBulk(BulkRequest.retry(failed).batchSize(batch)).block(WAIT);
            double longestXact = 0;
            long lastPrint = 0;
            BulkProgress progress = admin.bulkProgress(job).block(WAIT);
            while (!progress.finished()) {
                longestXact = Math.max(longestXact, longestTransactionMillis(database));
                long now = System.nanoTime();
                if (now - lastPrint > 1_000_000_000L) {
                    System.out.println(String.format(Locale.ROOT, "PROGRESS seconds=%.1f counting=%s total=%d done=%d"
                            + " fraction=%.3f", (now - started) / 1e9, progress.counting(), progress.total(),
                            progress.done(), progress.fraction()));
                    lastPrint = now;
                }
                sleep(200);
                progress = admin.bulkProgress(job).block(WAIT);
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.println(String.format(Locale.ROOT, "BULK history_rows=%d batch=%d status=%s total=%d done=%d"
                    + " affected=%d seconds=%.1f rows_per_s=%.0f longest_transaction_ms=%.0f", rows, batch,
                    progress.status().sqlName(), progress.total(), progress.done(), progress.affected(), seconds,
                    progress.done() / seconds, longestXact));
        } finally {
            engine.closeLater().block(WAIT);
            database.close();
        }
    }

    /** The longest open transaction of any session but this probe's, in milliseconds. */
    private static double longestTransactionMillis(TestDatabase database) {
        return Mono.usingWhen(ConnectionFactories.get(database.url()).create(),
                (Connection c) -> Flux.from(c.createStatement("SELECT COALESCE(max(extract(epoch FROM now() - xact_start)"
                                + " * 1000), 0)::float8 FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
                                + " AND xact_start IS NOT NULL AND datname = current_database() AND backend_type = 'client backend'").execute())
                        .concatMap(result -> result.map(row -> row.get(0, Double.class))).next(),
                Connection::close).block(WAIT);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(interrupted);
        }
    }
}
