package dev.durable.benchmarks.shootout;

import dev.durable.Urls;
import dev.durable.testing.TestPostgres;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactories;
import io.r2dbc.spi.Result;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The one PostgreSQL every contender runs against, as an R2DBC URL and as JDBC settings, plus one
 * connection of the harness's own for set-up and for counting committed rows. That connection is
 * the measuring probe and does not count against the contenders' connection budget.
 */
final class Target implements AutoCloseable {

    private static final Duration WAIT = Duration.ofMinutes(5);

    final String r2dbcUrl;
    final String jdbcUrl;
    final Properties jdbcProperties = new Properties();
    private final Connection admin;

    Target() {
        this.r2dbcUrl = TestPostgres.url();
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

    /** Runs statements one after the other (simple protocol; no bindings). */
    void execute(String... statements) {
        for (String sql : statements) {
            Flux.from(admin.createStatement(sql).execute()).flatMap(Result::getRowsUpdated).then().block(WAIT);
        }
    }

    /** The first column of the first row, as a long. */
    long queryLong(String sql) {
        Long value = Flux.from(admin.createStatement(sql).execute())
                .concatMap(result -> result.map(row -> ((Number) row.get(0)).longValue()))
                .next()
                .block(WAIT);
        return value == null ? 0 : value;
    }

    /** The first column of every row, as text. */
    List<String> queryStrings(String sql) {
        return Flux.from(admin.createStatement(sql).execute())
                .concatMap(result -> result.map(row -> String.valueOf(row.get(0))))
                .collectList()
                .block(WAIT);
    }

    /** Drops a contender's schema and vacuums, so the next one starts on a clean database. */
    void dropAndVacuum(String schema) {
        execute("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE", "VACUUM ANALYZE");
    }

    @Override
    public void close() {
        Mono.from(admin.close()).block(WAIT);
    }
}
