package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.Db;
import dev.durable.internal.sql.LimiterSql;
import dev.durable.internal.sql.MaintenanceSql;
import dev.durable.internal.sql.Tables;
import dev.durable.limit.EngineLimits;
import dev.durable.limit.LimiterUnderTest;
import dev.durable.limit.Permit;
import dev.durable.limit.PermitsContract;
import dev.durable.limit.PostgresUnderTest;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.TestClock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

/**
 * The limiter contract's permits on the PostgreSQL limiter, and what only it does: permits are rows
 * counted on their gate's counter, locked in one order with the sweep and the reconcile, and windows
 * run on the database's clock.
 */
class PermitsIT extends PermitsContract {

    @Override
    protected LimiterUnderTest limiter() {
        return new PostgresUnderTest(db);
    }

    @Test
    void permitsReleasedAndRenewedWhileOthersAcquireSweepAndReconcileNeverDeadlock() {
        DurableEngine engine = engine("locks");
        EngineLimits limits = engine.limits();
        Maintenance maintenance = engine.maintenance().orElseThrow();
        LimiterSql sql = new LimiterSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));
        // One counter, every permit path on it at once: acquires that count expired permits off, renewals
        // and releases, the sweep and the reconcile. Each locks the counter first, so none waits on another
        // in a cycle; a lock conflict left over would be retried inside, never seen here.
        List<String> done = Flux.range(0, 240)
                .flatMap(i -> switch (i % 6) {
                    case 0 -> maintenance.reconcileLimits().thenReturn("reconciled");
                    case 1 -> sql.sweepPermits(10, WAIT).thenReturn("swept");
                    case 2 -> limits.tryAcquire("api", "hot", 1, Duration.ofMillis(1)).thenReturn("expiring");
                    default -> limits.acquire("api", "hot", 1, WAIT, Duration.ofSeconds(30))
                            .flatMap(permit -> permit.renew().then(permit.release()).thenReturn("released"));
                }, 24)
                .collectList().block(WAIT);
        assertThat(done).hasSize(240).contains("released", "reconciled", "swept", "expiring");

        // What is left counts exactly: the live permits' slots, and the whole gate once they are gone.
        sql.sweepPermits(100, WAIT).block(WAIT);
        assertThat(Sql.query(db, "SELECT s.held - coalesce((SELECT sum(p.slots) FROM {schema}.durable_limit_permits p"
                + " WHERE p.gate = s.gate AND p.key = s.key AND p.shard = s.shard), 0)::int"
                + " FROM {schema}.durable_gate_slots s WHERE s.gate = 'api' AND s.key = 'hot'",
                row -> row.get(0, Integer.class))).containsExactly(0);
        Permit whole = Eventually.until("the expired permits counted off", WAIT,
                () -> limits.tryAcquire("api", "hot", 2).block(WAIT), Optional::isPresent).orElseThrow();
        whole.release().block(WAIT);
    }

    @Test
    void aRenewalThatFindsThePermitExpiredCountsItsSlotsOffAtOnce() {
        DurableEngine engine = engines.start(engines.options("renewal").gate("api", 2)
                .limiterReconcile(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .bucketSweeper(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .queue(queue("renewal")));
        EngineLimits limits = engine.limits();
        Permit late = limits.tryAcquire("api", "late", 2, Duration.ofSeconds(30)).block(WAIT).orElseThrow();
        Sql.update(db, "UPDATE {schema}.durable_limit_permits SET expires_at = now() - interval '1 second'"
                + " WHERE key = 'late'");

        assertThat(late.renew().block(WAIT)).isFalse();
        assertThat(Sql.query(db, "SELECT held FROM {schema}.durable_gate_slots WHERE gate = 'api' AND key = 'late'",
                row -> row.get(0, Integer.class))).containsExactly(0);
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_limit_permits WHERE key = 'late'",
                row -> row.get(0, Long.class))).containsExactly(0L);
        late.release().block(WAIT); // nothing left to give back
    }

    @Test
    void theReconcileCountsLivePermitsAndDropsExpiredOnes() {
        DurableEngine engine = engine("reconcile");
        EngineLimits limits = engine.limits();
        limits.tryAcquire("api", "live", 1, Duration.ofSeconds(30)).block(WAIT).orElseThrow();
        limits.tryAcquire("api", "gone", 2, Duration.ofMillis(100)).block(WAIT).orElseThrow();
        Sql.update(db, "UPDATE {schema}.durable_limit_permits SET expires_at = now() - interval '1 second'"
                + " WHERE key = 'gone'");
        engine.maintenance().orElseThrow().reconcileLimits().block(WAIT);
        assertThat(Sql.query(db, "SELECT key || '=' || held FROM {schema}.durable_gate_slots"
                + " WHERE gate = 'api' AND key IN ('live', 'gone')", row -> row.get(0, String.class))).containsExactly("live=1");
        assertThat(Sql.query(db, "SELECT key FROM {schema}.durable_limit_permits WHERE key IN ('live', 'gone')",
                row -> row.get(0, String.class))).containsExactly("live");
    }

    @Test
    void aWindowIsFullUntilItsLengthHasPassedOnTheDatabasesClock() {
        TestClock clock = TestClock.on(db);
        DurableEngine engine = engines.start(clock.engineOptions().name("clocked")
                .window("hour", 2, Duration.ofHours(1)).queue(queue("clocked")));
        EngineLimits limits = engine.limits();
        assertThat(limits.tryAcquire("hour", "p", 2).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("hour", "p", 1).block(WAIT)).isEmpty();
        clock.advance(Duration.ofMinutes(30));
        assertThat(limits.tryAcquire("hour", "p", 1).block(WAIT)).isEmpty();
        // Past the window and its partly counted oldest slot.
        clock.advance(Duration.ofMinutes(60));
        assertThat(limits.tryAcquire("hour", "p", 2).block(WAIT)).isPresent();
        assertThat(limits.tryAcquire("hour", "p", 1).block(WAIT)).isEmpty();
    }

    @Test
    void aTryOnAShardedGateTriesEveryShardBeforeRefusing() {
        DurableEngine engine = engines.start(engines.options("shards").gate("spread", 6, 3)
                .limiterReconcile(Maintenance.TaskOptions.every(Duration.ofHours(1)).disabled())
                .queue(queue("shards")));
        EngineLimits limits = engine.limits();
        // Three shards of two; two of them full (as if jobs held them), one free.
        Sql.update(db, "INSERT INTO {schema}.durable_gate_slots (gate, key, shard, capacity, held, admitted)"
                + " VALUES ('spread', 'sharded', 0, 2, 2, 0), ('spread', 'sharded', 1, 2, 2, 0)");
        // Whichever shard a try starts on, it goes on to the free one: both free slots are granted at once.
        for (int i = 0; i < 2; i++) {
            assertThat(limits.tryAcquire("spread", "sharded", 1).block(WAIT)).as("try " + i).isPresent();
        }
        assertThat(limits.tryAcquire("spread", "sharded", 1).block(WAIT)).isEmpty();
        assertThat(Sql.query(db, "SELECT shard || '=' || held FROM {schema}.durable_gate_slots WHERE gate = 'spread' AND key = 'sharded'"
                + " ORDER BY shard", row -> row.get(0, String.class))).containsExactly("0=2", "1=2", "2=2");
    }

    @Test
    void theSweepDeletesWindowsThatCountNothingAnyMore() {
        DurableEngine engine = engine("sweep");
        engine.limits().tryAcquire("brief", "swept", 1).block(WAIT).orElseThrow();
        engine.limits().tryAcquire("hourly", "kept", 1).block(WAIT).orElseThrow();
        MaintenanceSql sql = new MaintenanceSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));
        Eventually.until("the brief window's row swept", WAIT, () -> {
            sql.sweepWindows(100, WAIT).block(WAIT);
            return Sql.query(db, "SELECT count(*) FROM {schema}.durable_window_counters WHERE partition_key = 'swept'",
                    row -> row.get(0, Long.class)).get(0) == 0;
        });
        assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_window_counters WHERE partition_key = 'kept'",
                row -> row.get(0, Long.class))).containsExactly(1L);
    }
}
