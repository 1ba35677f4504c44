package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.DurableEngine;
import dev.durable.internal.Db;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The heartbeat never waits on a row another transaction holds: a commit holding one row may itself
 * wait on the heartbeat's new version of another (the executing-key unique check), a deadlock once
 * seen in a soak. The locked row is answered as still held but not renewed; the others are renewed.
 */
@ExtendWith(PostgresExtension.class)
class HeartbeatLocksIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @Test
    void aRowLockedByAnotherTransactionIsReportedHeldAndLeftUnrenewedWithoutWaiting(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        String table = "\"" + db.schema() + "\".durable_instances";
        db.execute("INSERT INTO " + table + " (type, queue, step, max_attempts, status, claimed_by, lease_expires_at,"
                + " attempt) SELECT 't', 'q', 'run', 5, 'executing', 'w', now() + interval '10 seconds', 1"
                + " FROM generate_series(1, 3)");
        List<Long> ids = ids(db, "SELECT id FROM " + table + " ORDER BY id");
        long lockedId = ids.get(1);
        LeaseSql leases = new LeaseSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));

        Connection holder = Mono.from(db.connectionFactory().create()).block(WAIT);
        try {
            Mono.from(holder.beginTransaction()).block(WAIT);
            Flux.from(holder.createStatement("SELECT id FROM " + table + " WHERE id = $1 FOR UPDATE")
                            .bind(0, lockedId).execute())
                    .concatMap(result -> result.map(row -> row.get(0, Long.class))).blockLast(WAIT);

            // Bounded well below the database's lock timeout: a heartbeat that waited would not answer.
            Map<Long, LeaseSql.Renewed> answer = leases.heartbeat(ids, "w", 600_000).collectList()
                    .block(Duration.ofSeconds(20)).stream()
                    .collect(Collectors.toMap(LeaseSql.Renewed::id, renewed -> renewed));

            assertThat(answer).containsOnlyKeys(ids);
            assertThat(answer.get(lockedId).renewed()).isFalse();
            assertThat(answer.get(ids.get(0)).renewed()).isTrue();
            assertThat(answer.get(ids.get(2)).renewed()).isTrue();
            Mono.from(holder.rollbackTransaction()).block(WAIT);
        } finally {
            Mono.from(holder.close()).block(WAIT);
        }
        List<Long> longLeases = ids(db, "SELECT id FROM " + table
                + " WHERE lease_expires_at > now() + interval '1 minute' ORDER BY id");
        assertThat(longLeases).containsExactly(ids.get(0), ids.get(2));
    }

    private static List<Long> ids(TestDatabase db, String sql) {
        return Flux.usingWhen(db.connectionFactory().create(),
                        connection -> Flux.from(connection.createStatement(sql).execute())
                                .concatMap(result -> result.map(row -> row.get(0, Long.class))),
                        Connection::close)
                .collectList().block(WAIT);
    }
}
