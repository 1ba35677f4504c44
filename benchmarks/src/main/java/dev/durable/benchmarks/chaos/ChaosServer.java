package dev.durable.benchmarks.chaos;

import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The harness's own embedded PostgreSQL, in the run's work directory (its data and its logs go
 * with it), restartable and killable; or the server {@code DURABLE_PG_URL} names, which the harness
 * never restarts. It runs with {@code fsync} and {@code synchronous_commit} on, so a kill without a
 * checkpoint is followed by a real crash recovery and loses nothing a commit acknowledged.
 */
final class ChaosServer implements AutoCloseable {

    final String url;
    private final @Nullable EmbeddedPostgres embedded;
    private final @Nullable Path dataDirectory;
    private final Path logs;

    private ChaosServer(String url, @Nullable EmbeddedPostgres embedded, @Nullable Path dataDirectory, Path logs) {
        this.url = url;
        this.embedded = embedded;
        this.dataDirectory = dataDirectory;
        this.logs = logs;
    }

    static ChaosServer start(Path workDirectory) {
        String fromEnv = System.getenv(TestPostgres.URL_ENV);
        if (fromEnv != null && !fromEnv.isBlank()) {
            return new ChaosServer(TestPostgres.url(), null, null, workDirectory);
        }
        try {
            Path data = workDirectory.resolve("pg-data");
            EmbeddedPostgres embedded = EmbeddedPostgres.builder()
                    .setDataDirectory(data)
                    .setCleanDataDirectory(false) // the work directory goes after a clean run, stays after a failed one
                    .setServerConfig("max_connections", "300")
                    .setServerConfig("shared_buffers", "128MB")
                    .setServerConfig("fsync", "on")
                    .setServerConfig("synchronous_commit", "on")
                    // Every lock wait past a millisecond is logged with its statement: how the harness
                    // sees a pick waiting on another's row lock (pick_waits).
                    .setServerConfig("log_lock_waits", "on")
                    .setServerConfig("deadlock_timeout", "1ms")
                    .setServerConfig("logging_collector", "on")
                    .setServerConfig("log_directory", workDirectory.toString())
                    .setServerConfig("log_filename", "postgres.log")
                    .setPGStartupWait(Duration.ofSeconds(60))
                    .start();
            return new ChaosServer("r2dbc:postgresql://postgres:postgres@localhost:" + embedded.getPort() + "/postgres",
                    embedded, data, workDirectory);
        } catch (IOException e) {
            throw new UncheckedIOException("the chaos PostgreSQL did not start", e);
        }
    }

    /**
     * How many times a pick (a statement with {@code FOR UPDATE OF c}) waited on a row lock of the
     * instances table, from the server's log; -1 when the server is not ours (no log to read).
     */
    long pickRowLockWaits() {
        Path log = logs.resolve("postgres.log");
        if (embedded == null || !Files.exists(log)) {
            return -1;
        }
        try {
            long waits = 0;
            // An entry: its LOG line, then DETAIL, CONTEXT and STATEMENT lines; a statement's own
            // lines follow its STATEMENT line, each starting with a tab.
            boolean onInstances = false;
            StringBuilder statement = null;
            for (String line : Files.readAllLines(log, StandardCharsets.UTF_8)) {
                if (statement != null && line.startsWith("\t")) {
                    statement.append(line);
                    continue;
                }
                if (statement != null) {
                    if (onInstances && statement.indexOf("FOR UPDATE OF c") >= 0) {
                        waits++;
                    }
                    statement = null;
                    onInstances = false;
                }
                if (line.contains("still waiting for")) {
                    onInstances = false;
                } else if (line.contains("CONTEXT:") && line.contains("while locking tuple")
                        && line.contains("\"durable_instances\"")) {
                    onInstances = true;
                } else if (onInstances && line.contains("STATEMENT:")) {
                    statement = new StringBuilder(line);
                }
            }
            if (statement != null && onInstances && statement.indexOf("FOR UPDATE OF c") >= 0) {
                waits++;
            }
            return waits;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    boolean restartable() {
        return embedded != null;
    }

    /** {@code pg_ctl restart -m fast}: every connection is cut, a checkpoint is written, the port stays. */
    void restart() {
        pgCtl("restart", "-m", "fast", "-w", "-t", "60", "-l", logs.resolve("pg-server.log").toString());
        awaitAccepting();
    }

    /**
     * {@code pg_ctl restart -m immediate}: the postmaster and every backend quit at once with no
     * checkpoint, and the start replays the WAL (crash recovery) with the same options.
     */
    void crash() {
        pgCtl("restart", "-m", "immediate", "-w", "-t", "120", "-l", logs.resolve("pg-server.log").toString());
        awaitAccepting();
    }

    /**
     * Runs pg_ctl of the binaries the server runs from (the first word of postmaster.opts) with its
     * options. As root, under {@code unshare -U} as zonky itself runs them (PostgreSQL refuses root).
     */
    private void pgCtl(String... arguments) {
        try {
            String opts = Files.readString(dataDirectory.resolve("postmaster.opts"), StandardCharsets.UTF_8).strip();
            Path pgCtl = Path.of(parseOptions(opts).get(0)).resolveSibling("pg_ctl");
            Path out = logs.resolve("pg_ctl.log");
            List<String> command = new ArrayList<>();
            if ("root".equals(System.getProperty("user.name"))) {
                command.addAll(List.of("unshare", "-U"));
            }
            command.addAll(List.of(pgCtl.toString(), "-D", dataDirectory.toString()));
            command.addAll(List.of(arguments));
            Process process = new ProcessBuilder(command)
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(out.toFile()))
                    .start();
            if (!process.waitFor(150, TimeUnit.SECONDS) || process.exitValue() != 0) {
                throw new IllegalStateException("pg_ctl " + arguments[0] + " failed: " + Files.readString(out).strip());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private void awaitAccepting() {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!accepting()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("PostgreSQL did not come back; see " + logs.resolve("pg-server.log"));
            }
            Chaos.sleep(100);
        }
    }

    private boolean accepting() {
        try {
            Mono.usingWhen(ConnectionFactories.get(url).create(),
                            c -> Mono.from(c.createStatement("SELECT 1").execute())
                                    .flatMap(r -> Mono.from(r.getRowsUpdated())),
                            Connection::close)
                    .block(Duration.ofSeconds(5));
            return true;
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** postmaster.opts: the binary, then each option double-quoted. */
    private static List<String> parseOptions(String opts) {
        List<String> words = new ArrayList<>();
        Matcher matcher = Pattern.compile("\"([^\"]*)\"|(\\S+)").matcher(opts);
        while (matcher.find()) {
            words.add(matcher.group(1) != null ? matcher.group(1) : matcher.group(2));
        }
        return words;
    }

    @Override
    public void close() {
        if (embedded != null) {
            try {
                embedded.close();
            } catch (IOException ignored) {
                // The data directory goes with the work directory.
            }
        }
    }
}
