package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A pick's cost does not grow with the rows scheduled ahead (retries with backoff, runIn) at a more
 * urgent priority than the due ones: it skips from priority to priority and reads only due rows in
 * each. Checked with EXPLAIN (ANALYZE, BUFFERS) of both picks (with and without limits): the pages a
 * pick of 10 due rows touches, alone and beside 100,000 future rows (a walk over them reads about
 * 600 pages of the pick index alone). Likewise beside rows of a busy concurrency key, which wait
 * outside the pick index. Also: the skip keeps urgency order across priorities.
 */
@ExtendWith(PostgresExtension.class)
class PickShapeIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    @Test
    void futureRowsAtAMoreUrgentPriorityAreNotWalked(TestDatabase db) {
        PickSql picks = picks(db);
        insert(db, 10, 0, "now() - interval '1 second'");
        long pickEmpty = buffers(db, picks.pickText(), false);
        long limitedEmpty = buffers(db, picks.pickWithLimitsText(), true);

        insert(db, 100_000, -1, "now() + interval '1 hour'");
        insert(db, 100_000, 7, "now() + interval '1 hour'");
        db.execute("VACUUM ANALYZE " + instances(db));
        long pickFuture = buffers(db, picks.pickText(), false);
        long limitedFuture = buffers(db, picks.pickWithLimitsText(), true);

        assertThat(pickFuture).as("pages of a pick beside 200,000 future rows (alone: %d)", pickEmpty)
                .isLessThanOrEqualTo(2 * pickEmpty + 50);
        assertThat(limitedFuture).as("pages of a limited pick beside 200,000 future rows (alone: %d)", limitedEmpty)
                .isLessThanOrEqualTo(2 * limitedEmpty + 50);
    }

    /**
     * Rows of a concurrency key that is executing wait outside the pick indexes (key_waiting): a
     * pick beside 200,000 of them, due and more urgent than the due rows, touches about the pages of
     * one without (before, each cost a heap fetch and an executing-key probe: about 8,600 pages).
     */
    @Test
    void rowsOfABusyKeyAreNotWalked(TestDatabase db) {
        PickSql picks = picks(db);
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, eligible_at)"
                + " SELECT 't', 'kq', 'run', 5, now() - interval '1 second' FROM generate_series(1, 10)");
        long pickEmpty = buffers(db, picks.pickText(), false, "kq");
        long limitedEmpty = buffers(db, picks.pickWithLimitsText(), true, "kq");

        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, status, claimed_by,"
                + " lease_expires_at, concurrency_key) VALUES ('t', 'kq', 'run', 5, 'executing', 'w',"
                + " now() + interval '1 hour', 'busy')");
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, priority, eligible_at,"
                + " concurrency_key) SELECT 't', 'kq', 'run', 5, -1, now() - interval '1 hour', 'busy'"
                + " FROM generate_series(1, 200000)");
        db.execute("VACUUM ANALYZE " + instances(db));
        long pickBlocked = buffers(db, picks.pickText(), false, "kq");
        long limitedBlocked = buffers(db, picks.pickWithLimitsText(), true, "kq");

        assertThat(pickBlocked).as("pages of a pick beside 200,000 key-blocked rows (alone: %d)", pickEmpty)
                .isLessThanOrEqualTo(2 * pickEmpty + 50);
        assertThat(limitedBlocked).as("pages of a limited pick beside 200,000 key-blocked rows (alone: %d)",
                limitedEmpty).isLessThanOrEqualTo(2 * limitedEmpty + 50);
    }

    @Test
    void theSkipKeepsUrgencyOrderAcrossPriorities(TestDatabase db) {
        PickSql picks = picks(db);
        insert(db, 1, 5, "now() - interval '3 seconds'");
        insert(db, 1, 1, "now() + interval '1 hour'");
        insert(db, 1, 3, "now() - interval '1 second'");
        insert(db, 1, 3, "now() - interval '2 seconds'");
        insert(db, 1, -2, "now() + interval '1 hour'");

        List<ClaimedRow> first = picks.pick("q", 2, "w", 30_000).block(WAIT).rows();
        List<ClaimedRow> second = picks.pick("q", 5, "w", 30_000).block(WAIT).rows();

        assertThat(first).extracting(ClaimedRow::id).containsExactlyInAnyOrderElementsOf(
                ids(db, "priority = 3"));
        assertThat(second).extracting(ClaimedRow::id).containsExactlyElementsOf(ids(db, "priority = 5"));
    }

    private static PickSql picks(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        return new PickSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()), List.of(), List.of(),
                Map.of("t", 1));
    }

    private static String instances(TestDatabase db) {
        return "\"" + db.schema() + "\".durable_instances";
    }

    private static void insert(TestDatabase db, int rows, int priority, String eligibleAt) {
        db.execute("INSERT INTO " + instances(db) + " (type, queue, step, max_attempts, priority, eligible_at)"
                + " SELECT 't', 'q', 'run', 5, " + priority + ", " + eligibleAt + " FROM generate_series(1, " + rows + ")");
    }

    private static List<Long> ids(TestDatabase db, String where) {
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            return Flux.from(connection.createStatement("SELECT id FROM " + instances(db) + " WHERE " + where
                            + " ORDER BY id").execute())
                    .concatMap(result -> result.map(row -> row.get(0, Long.class)))
                    .collectList().block(WAIT);
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
    }

    /**
     * The shared pages (hit or read) one pick of 100 touches, from the top node of its EXPLAIN
     * (ANALYZE, BUFFERS), in a transaction rolled back; asserts it claimed the 10 due rows.
     */
    private static long buffers(TestDatabase db, String pick, boolean limits) {
        return buffers(db, pick, limits, "q");
    }

    private static long buffers(TestDatabase db, String pick, boolean limits, String queue) {
        Connection connection = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            var explain = connection.createStatement("EXPLAIN (ANALYZE, BUFFERS) " + pick)
                    .bind(0, queue).bind(1, 100).bind(2, "w").bind(3, 30_000L);
            if (limits) {
                explain.bind(4, new String[0]).bind(5, new Integer[0]).bind(6, new Integer[0])
                        .bind(7, new String[0]).bind(8, new Double[0]).bind(9, new Integer[0])
                        .bind(10, new String[] {"t"}).bind(11, new Integer[] {1})
                        .bind(12, new String[0]).bind(13, new Long[0]).bind(14, new Integer[0]);
            } else {
                explain.bind(4, new String[] {"t"}).bind(5, new Integer[] {1});
            }
            List<String> plan = Mono.from(connection.beginTransaction())
                    .thenMany(Flux.from(explain.execute()).concatMap(result -> result.map(row -> row.get(0, String.class))))
                    .collectList()
                    .flatMap(lines -> Mono.from(connection.rollbackTransaction()).thenReturn(lines))
                    .block(WAIT);
            String top = plan.get(0);
            assertThat(top).as("the pick claims the 10 due rows:\n%s", String.join("\n", plan)).contains("rows=10 loops=1");
            String buffers = plan.stream().filter(line -> line.contains("Buffers: shared")).findFirst().orElseThrow();
            long pages = 0;
            for (String part : buffers.substring(buffers.indexOf("shared") + 6).trim().split(" ")) {
                if (part.startsWith("hit=") || part.startsWith("read=")) {
                    pages += Long.parseLong(part.substring(part.indexOf('=') + 1));
                }
            }
            return pages;
        } finally {
            Mono.from(connection.close()).block(WAIT);
        }
    }
}
