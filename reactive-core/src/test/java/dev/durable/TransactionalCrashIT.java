package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Jvms;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/**
 * Issue 33: a JVM killed between a transactional handler's write and its commit leaves neither: the
 * server rolls the transaction back with the dead connection, the lease lapses, and the next claim's
 * run writes the effect once, with its outcome.
 */
@ExtendWith(PostgresExtension.class)
class TransactionalCrashIT {

    @RegisterExtension
    final Engines engines = new Engines();

    @Test
    void aJvmKilledBetweenTheWriteAndTheCommitLeavesNeitherAndTheRetryWritesOnce(TestDatabase db) throws Exception {
        engines.on(db);
        // Only to migrate and insert: it runs no queue until the worker is gone.
        DurableEngine producer = engines.start(engines.options("producer").runMaintenance(false),
                TransactionalWorker.debit(db.schema(), Mono.empty()));
        db.execute("CREATE TABLE IF NOT EXISTS \"" + db.schema() + "\".effects (instance_id bigint NOT NULL,"
                + " attempt int NOT NULL, note text)");
        db.execute("CREATE TABLE IF NOT EXISTS \"" + db.schema() + "\".crash_marks (label text)");
        Path log = Files.createTempFile("durable-debit", ".log");
        Process worker = new ProcessBuilder(List.of(Jvms.javaBinary(), "-Xmx256m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-cp", Jvms.classpath(), TransactionalWorker.class.getName(), db.url(),
                db.schema(), "w1")).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        try {
            Eventually.until("the worker is ready (log " + log + ")", Duration.ofMinutes(2),
                    () -> read(log).contains("READY w1"));
            long id = producer.insert(JobRequest.of(TransactionalWorker.TYPE, "acct-1")).block();
            assertThat(worker.waitFor(2, TimeUnit.MINUTES)).as("the worker halted (log %s)", log).isTrue();
            assertThat(read(log)).contains("HALT w1 after the write, before the commit");
            assertThat(rows(db, "crash_marks")).as("the write was made before the halt").isEqualTo(1);
            assertThat(rows(db, "effects")).as("and died with its transaction").isZero();

            // A node that survives: its reaper returns the row once the dead worker's lease lapses.
            DurableEngine survivor = engines.start(engines.options("survivor")
                    .queue(TransactionalIT.queue(TransactionalWorker.QUEUE, 1)),
                    TransactionalWorker.debit(db.schema(), Mono.empty()));
            Instance done = engines.awaitSettled(survivor, id, Duration.ofSeconds(60));
            assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
            assertThat(done.attempt()).isEqualTo(2);
            assertThat(Sql.query(db, "SELECT attempt FROM {schema}.effects WHERE instance_id = $1",
                    row -> row.get(0, Integer.class), id)).containsExactly(2);
            Files.deleteIfExists(log);
        } finally {
            worker.destroyForcibly();
            worker.waitFor(30, TimeUnit.SECONDS);
        }
    }

    private static long rows(TestDatabase db, String table) {
        return Sql.query(db, "SELECT count(*) FROM {schema}." + table, row -> row.get(0, Long.class)).get(0);
    }

    private static String read(Path log) {
        try {
            return Files.readString(log);
        } catch (IOException e) {
            return "";
        }
    }
}
