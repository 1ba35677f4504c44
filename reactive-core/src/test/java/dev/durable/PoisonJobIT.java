package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Jvms;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Issue 15: a job whose handler kills its JVM (here {@code Runtime.halt}, as an OOM or a segfault
 * would) on real worker processes, restarted when they die. The other workers' reapers recover it
 * after its lease, and it runs again only after its backoff; after its attempts it is failed, and
 * no two runs ever held it at once. Count-based: nothing here depends on how fast the machine is.
 */
@ExtendWith(PostgresExtension.class)
class PoisonJobIT {

    private static final int WORKERS = 3;
    private static final int MAX_ATTEMPTS = 3;
    private static final int MOST_STARTS = 20;

    @RegisterExtension
    final Engines engines = new Engines();

    private record Run(int attempt, String claimedBy, String label, long eligibleAfterPreviousStartMillis) {
    }

    @Test
    void aJobThatKillsItsWorkerFailsAfterItsAttemptsAndNeverRunsOnTwoNodesAtOnce(TestDatabase db) throws Exception {
        engines.on(db);
        // Only to migrate and insert: it runs no queue and no maintenance.
        DurableEngine producer = engines.start(engines.options("producer").runMaintenance(false),
                PoisonWorker.poison(() -> (args, context) -> Mono.error(new IllegalStateException("not here"))));
        Sql.update(db, "CREATE TABLE {schema}.poison_runs (seq bigint GENERATED ALWAYS AS IDENTITY, instance_id bigint,"
                + " attempt int, claimed_by text, eligible_at timestamptz, label text,"
                + " started_at timestamptz NOT NULL DEFAULT clock_timestamp())");
        Path logs = Files.createTempDirectory("durable-poison");
        List<Process> workers = new ArrayList<>();
        int started = 0;
        try {
            for (int i = 0; i < WORKERS; i++) {
                workers.add(startWorker(db, logs, "w" + started++));
            }
            long id = producer.insert(JobRequest.of(PoisonWorker.TYPE, "boom").maxAttempts(MAX_ATTEMPTS)).block();

            long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(4);
            Instance last = producer.get(id).block();
            while (last.status() != InstanceStatus.FAILED) {
                assertThat(System.nanoTime()).as("failed within the wait; last seen %s; logs in %s", last, logs)
                        .isLessThan(deadline);
                for (int i = 0; i < workers.size(); i++) {
                    if (!workers.get(i).isAlive()) {
                        assertThat(started).as("worker starts (logs in %s)", logs).isLessThan(MOST_STARTS);
                        workers.set(i, startWorker(db, logs, "w" + started++));
                    }
                }
                Eventually.sleep(100);
                last = producer.get(id).block();
            }

            assertThat(last.attempt()).isEqualTo(MAX_ATTEMPTS);
            assertThat(last.lastError()).startsWith("worker poison:poison@")
                    .endsWith(" lost: its lease expired on attempt " + MAX_ATTEMPTS + " of " + MAX_ATTEMPTS);
            List<Run> runs = Sql.query(db, "SELECT attempt, claimed_by, label,"
                    + " (extract(epoch FROM eligible_at - lag(started_at) OVER (ORDER BY seq)) * 1000)::bigint AS after"
                    + " FROM {schema}.poison_runs WHERE instance_id = $1 ORDER BY seq",
                    row -> new Run(row.get("attempt", Integer.class), row.get("claimed_by", String.class),
                            row.get("label", String.class), row.get("after", Long.class) == null ? -1
                                    : row.get("after", Long.class)), id);
            // One run per attempt, in order: never the same attempt twice, so never two owners at once.
            assertThat(runs).extracting(Run::attempt).containsExactly(1, 2, 3);
            assertThat(runs).extracting(Run::claimedBy).doesNotHaveDuplicates();
            assertThat(runs).extracting(Run::label).doesNotHaveDuplicates();
            // Each recovery waited out the backoff of the lost attempt after that run began (database clock).
            for (int k = 1; k < runs.size(); k++) {
                assertThat(runs.get(k).eligibleAfterPreviousStartMillis())
                        .as("run %d became due after the backoff of attempt %d", k + 1, k)
                        .isGreaterThanOrEqualTo(PoisonWorker.BACKOFF.delay(k).toMillis());
            }
            deleteLogs(logs);
        } finally {
            for (Process worker : workers) {
                worker.destroyForcibly();
            }
            for (Process worker : workers) {
                worker.waitFor(30, TimeUnit.SECONDS);
            }
        }
    }

    /** The workers' logs are kept for a failed run only. */
    private static void deleteLogs(Path logs) throws IOException {
        try (var files = Files.list(logs)) {
            for (Path file : files.toList()) {
                Files.deleteIfExists(file);
            }
        }
        Files.deleteIfExists(logs);
    }

    private static Process startWorker(TestDatabase db, Path logs, String label) {
        List<String> command = List.of(Jvms.javaBinary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", Jvms.classpath(), PoisonWorker.class.getName(), db.url(), db.schema(), label);
        try {
            return new ProcessBuilder(command).redirectErrorStream(true)
                    .redirectOutput(logs.resolve(label + ".log").toFile()).start();
        } catch (IOException e) {
            throw new UncheckedIOException("worker JVM did not start", e);
        }
    }
}
