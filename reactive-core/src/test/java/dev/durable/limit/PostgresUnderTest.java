package dev.durable.limit;

import dev.durable.support.Sql;
import dev.durable.testing.TestDatabase;
import java.util.List;

/** The PostgreSQL limiter, read in its tables. */
public final class PostgresUnderTest implements LimiterUnderTest {

    private final TestDatabase db;

    public PostgresUnderTest(TestDatabase db) {
        this.db = db;
    }

    @Override
    public LimiterFactory factory() {
        return PostgresLimiter.factory();
    }

    @Override
    public boolean inDatabase() {
        return true;
    }

    @Override
    public long heldSlots(String gate, String key) {
        return Sql.query(db, "SELECT coalesce(sum(held), 0)::bigint FROM {schema}.durable_gate_slots"
                + " WHERE gate = $1 AND key = $2", row -> row.get(0, Long.class), gate, key).get(0);
    }

    @Override
    public double tokens(String rateLimit, String partition) {
        List<Double> tokens = Sql.query(db, "SELECT tokens FROM {schema}.durable_rate_buckets"
                + " WHERE name = $1 AND partition_key = $2", row -> row.get(0, Double.class), rateLimit, partition);
        return tokens.isEmpty() ? Double.NaN : tokens.get(0);
    }

    @Override
    public long windowCount(String window, String partition) {
        List<Long> counts = Sql.query(db, "SELECT (SELECT coalesce(sum(c), 0) FROM unnest(counts) c)::bigint"
                + " FROM {schema}.durable_window_counters WHERE name = $1 AND partition_key = $2",
                row -> row.get(0, Long.class), window, partition);
        return counts.isEmpty() ? 0 : counts.get(0);
    }

    @Override
    public List<String> permitKeys(String gate, List<String> keys) {
        return Sql.query(db, "SELECT DISTINCT key FROM {schema}.durable_limit_permits WHERE gate = $1"
                + " AND key = ANY ($2) ORDER BY key", row -> row.get(0, String.class), gate, keys.toArray(String[]::new));
    }
}
