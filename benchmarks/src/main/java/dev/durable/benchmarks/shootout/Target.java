package dev.durable.benchmarks.shootout;

import dev.durable.Urls;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Result;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The one PostgreSQL every contender runs against, as an R2DBC URL and as JDBC settings, plus one
 * connection of the harness's own for set-up, for counting committed rows and for reading the
 * server's statistics (its statements are serialized, so a feeder or a sampler thread may share it). That connection is the measuring probe: it does not count against the
 * contenders' connection budget, and every statement it sends carries {@link #PROBE_MARK}, so
 * {@link Costs} can leave it out of the statement count.
 *
 * <p>Without {@code DURABLE_PG_URL} the shootout starts its own embedded PostgreSQL 17, not the
 * test suite's ({@link TestPostgres}): it needs {@code pg_stat_statements} preloaded, which only a
 * server setting can do, and checkpoints that stay out of the measured windows.
 */
final class Target implements AutoCloseable {

    /** A comment that marks the harness's own statements in {@code pg_stat_statements}. */
    static final String PROBE_MARK = "shootout-probe";
    private static final Duration WAIT = Duration.ofMinutes(5);

    final String r2dbcUrl;
    final String jdbcUrl;
    final Properties jdbcProperties = new Properties();
    /** True when the shootout started the server itself (so it knows the server's settings). */
    final boolean embedded;
    private final @Nullable EmbeddedPostgres server;
    private final Connection admin;

    private Target(String r2dbcUrl, @Nullable EmbeddedPostgres server) {
        this.r2dbcUrl = r2dbcUrl;
        this.server = server;
        this.embedded = server != null;
        URI uri;
        try {
            uri = URI.create(r2dbcUrl.substring("r2dbc:".length()));
        } catch (IllegalArgumentException notAUri) {
            // The parser's message quotes the URL, password included.
            throw new IllegalArgumentException("the database URL is not a URI: " + Urls.masked(r2dbcUrl));
        }
        String query = uri.getRawQuery();
        this.jdbcUrl = "jdbc:postgresql://" + uri.getHost() + ":" + (uri.getPort() < 0 ? 5432 : uri.getPort())
                + uri.getRawPath() + (query == null ? "" : "?" + query);
        String userInfo = uri.getUserInfo();
        if (userInfo != null) {
            int colon = userInfo.indexOf(':');
            jdbcProperties.setProperty("user", colon < 0 ? userInfo : userInfo.substring(0, colon));
            if (colon >= 0) {
                jdbcProperties.setProperty("password", userInfo.substring(colon + 1));
            }
        }
        this.admin = Mono.from(ConnectionFactories.get(r2dbcUrl).create()).block(WAIT);
    }

    /**
     * How the server commits. {@code FAST} is the test suite's setting, {@code fsync} and
     * {@code synchronous_commit} off: no commit waits for the disk, so the figures are the
     * statements' own cost. {@code DURABLE} is what production runs, both on (PostgreSQL's
     * defaults): every commit that is not batched waits for a WAL flush, so a per-job commit pays
     * one flush per job and a group commit one per batch.
     */
    enum Profile {
        FAST("off"), DURABLE("on");

        private final String setting;

        Profile(String setting) {
            this.setting = setting;
        }

        static Profile parse(String name) {
            for (Profile profile : values()) {
                if (profile.label().equals(name)) {
                    return profile;
                }
            }
            throw new IllegalArgumentException("--profile must be fast or durable, was " + name);
        }

        /** The name printed in RESULT lines. */
        String label() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * The server named by {@code DURABLE_PG_URL}, as it is (a warning when its commit settings are
     * not the profile's: the RESULT lines then name the profile it has), else a new embedded one
     * with the profile's settings (see {@link #startEmbedded}).
     */
    static Target open(Profile profile) {
        String fromEnv = System.getenv(TestPostgres.URL_ENV);
        if (fromEnv != null && !fromEnv.isBlank()) {
            // TestPostgres only parses the variable here; it starts nothing when it is set.
            Target target = new Target(TestPostgres.url(), null);
            if (!target.profileLabel().equals(profile.label())) {
                Shootout.log("DURABLE_PG_URL: the server runs fsync=%s synchronous_commit=%s, not the %s profile's;"
                                + " measuring it as it is (profile=%s)", target.setting("fsync"),
                        target.setting("synchronous_commit"), profile.label(), target.profileLabel());
            }
            return target;
        }
        EmbeddedPostgres server = startEmbedded(profile);
        return new Target("r2dbc:postgresql://postgres:postgres@localhost:" + server.getPort() + "/postgres", server);
    }

    /**
     * The profile the server's commit settings make: fast (fsync and synchronous_commit off),
     * durable (both on), else mixed.
     */
    String profileLabel() {
        String fsync = setting("fsync");
        String synchronousCommit = setting("synchronous_commit");
        for (Profile profile : Profile.values()) {
            if (fsync.equals(profile.setting) && synchronousCommit.equals(profile.setting)) {
                return profile.label();
            }
        }
        return "mixed";
    }

    /**
     * The test suite's settings (400 connections, 256 MB of shared buffers; zonky's {@code fsync=off}
     * and {@code synchronous_commit=off}, or both on for the durable profile: zonky passes
     * {@code -F} before the {@code -c} settings, and a later setting wins), plus what the
     * measurement needs: {@code pg_stat_statements} preloaded (statements per job; with
     * {@code -Dshootout.trackPlanning=true}, planning too), {@code track_io_timing} for its I/O
     * columns, and checkpoints only when the harness asks for one (a 30 minute timeout and 4 GB of
     * WAL), so every measured window starts right after a checkpoint and none falls inside it;
     * {@code pg_walinspect} can then read the window's whole WAL.
     */
    private static EmbeddedPostgres startEmbedded(Profile profile) {
        try {
            EmbeddedPostgres started = EmbeddedPostgres.builder()
                    .setServerConfig("fsync", profile.setting)
                    .setServerConfig("synchronous_commit", profile.setting)
                    .setServerConfig("max_connections", "400")
                    .setServerConfig("shared_buffers", "256MB")
                    .setServerConfig("shared_preload_libraries", "pg_stat_statements")
                    .setServerConfig("pg_stat_statements.max", "10000")
                    .setServerConfig("pg_stat_statements.track", "top")
                    .setServerConfig("track_io_timing", "on")
                    // Planning time per statement, for experiments (it adds a little to every plan).
                    .setServerConfig("pg_stat_statements.track_planning",
                            Boolean.getBoolean("shootout.trackPlanning") ? "on" : "off")
                    .setServerConfig("checkpoint_timeout", "30min")
                    .setServerConfig("max_wal_size", "4GB")
                    .setPGStartupWait(Duration.ofSeconds(60))
                    .start();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> closeQuietly(started), "shootout-postgres-stop"));
            return started;
        } catch (IOException e) {
            throw new UncheckedIOException("embedded PostgreSQL did not start", e);
        }
    }

    /** Runs statements one after the other (simple protocol; no bindings). */
    synchronized void execute(String... statements) {
        for (String sql : statements) {
            Flux.from(admin.createStatement(mark(sql)).execute()).flatMap(Result::getRowsUpdated).then().block(WAIT);
        }
    }

    /** The first column of the first row, as a long. */
    synchronized long queryLong(String sql) {
        Long value = Flux.from(admin.createStatement(mark(sql)).execute())
                .concatMap(result -> result.map(row -> ((Number) row.get(0)).longValue()))
                .next()
                .block(WAIT);
        return value == null ? 0 : value;
    }

    /** The first column of every row, as text. */
    synchronized List<String> queryStrings(String sql) {
        return Flux.from(admin.createStatement(mark(sql)).execute())
                .concatMap(result -> result.map(row -> String.valueOf(row.get(0))))
                .collectList()
                .block(WAIT);
    }

    /** Every row, each column as text (null as "null"). */
    synchronized List<String[]> queryRows(String sql) {
        return Flux.from(admin.createStatement(mark(sql)).execute())
                .concatMap(result -> result.map((row, meta) -> {
                    int n = meta.getColumnMetadatas().size();
                    String[] values = new String[n];
                    for (int i = 0; i < n; i++) {
                        values[i] = String.valueOf(row.get(i));
                    }
                    return values;
                }))
                .collectList()
                .block(WAIT);
    }

    /** A server setting for the log, or "(hidden)" when this user may not read it. */
    String setting(String name) {
        try {
            return queryStrings("SHOW " + name).get(0);
        } catch (RuntimeException e) {
            return "(hidden)";
        }
    }

    /**
     * Logs each table of {@code schema}: live and dead rows, the writes since its statistics were
     * reset, its size and its indexes' size, and when (auto)vacuum and (auto)analyze last ran: what
     * a long run's per-job costs depend on, beside them.
     */
    void logTables(String schema, String label) {
        for (String[] row : queryRows("SELECT relname, n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd,"
                + " n_tup_del, pg_size_pretty(pg_table_size(relid)), pg_size_pretty(pg_indexes_size(relid)),"
                + " vacuum_count + autovacuum_count, to_char(greatest(last_vacuum, last_autovacuum), 'HH24:MI:SS'),"
                + " analyze_count + autoanalyze_count, to_char(greatest(last_analyze, last_autoanalyze), 'HH24:MI:SS'),"
                + " to_char(now(), 'HH24:MI:SS')"
                + " FROM pg_stat_user_tables WHERE schemaname = '" + schema + "' AND n_tup_ins > 0 ORDER BY relname")) {
            Object[] args = new Object[row.length + 1];
            args[0] = label;
            System.arraycopy(row, 0, args, 1, row.length);
            Shootout.log("%s: table %s: %s live, %s dead; %s inserted, %s updated (%s HOT), %s deleted; heap %s,"
                    + " indexes %s; %s vacuums (last %s), %s analyzes (last %s); now %s", args);
        }
    }

    /** Drops a contender's schema and vacuums, so the next one starts on a clean database. */
    void dropAndVacuum(String schema) {
        execute("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE", "VACUUM ANALYZE");
    }

    private static String mark(String sql) {
        return "/* " + PROBE_MARK + " */ " + sql;
    }

    @Override
    public void close() {
        try {
            Mono.from(admin.close()).block(WAIT);
        } finally {
            if (server != null) {
                closeQuietly(server);
            }
        }
    }

    private static void closeQuietly(EmbeddedPostgres server) {
        try {
            server.close();
        } catch (IOException ignored) {
            // The data directory is temporary; the process goes with the JVM's shutdown.
        }
    }
}
