package dev.durable.limit;

import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.QueueOptions;
import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The limiter contract: what every limiter does for the engine, the same on PostgreSQL and on Redis.
 * Its cases are in three parts by concern, {@link LimitsContract} (gates and buckets across engines,
 * inline steps), {@link StackedLimitsContract} (a gate, a bucket and a window admitted all or
 * nothing) and {@link PermitsContract} ({@code engine.limits()} outside jobs); each is run by one
 * subclass per limiter ({@code LimitsIT}, {@code StackedLimitsIT} and {@code PermitsIT} on PostgreSQL,
 * {@code RedisLimiterIT}, {@code RedisStackedLimitsIT} and {@code RedisPermitsIT} on Redis, and again
 * on a Redis Cluster), which names its limiter ({@link #limiter()}) and adds the cases only that
 * limiter has. A case reads a limit's state through the limiter's {@link LimiterUnderTest}, or
 * through the public API, never one limiter's tables.
 */
@ExtendWith(PostgresExtension.class)
public abstract class LimiterContract {

    protected static final Duration WAIT = Duration.ofSeconds(60);
    /** A refill so slow that no test lives long enough to see a whole token come back. */
    protected static final double TRICKLE = 0.001;

    @RegisterExtension
    protected final Engines engines = new Engines();

    protected TestDatabase db;

    @BeforeEach
    void onDatabase(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    /** The limiter under test, on this test's database. */
    protected abstract LimiterUnderTest limiter();

    /** The test timings of {@link Engines#options}, with the limiter under test. */
    protected EngineOptions.Builder options(String name) {
        return engines.options(name).limiter(limiter().factory());
    }

    protected static QueueOptions queue(String name) {
        return QueueOptions.builder(name).pollInterval(Duration.ofMillis(50)).maxPollInterval(Duration.ofMillis(200))
                .build();
    }

    /**
     * Stops the queue's picks before a case reads the limits, where a pick in flight could hold what
     * it reads: a pick with a limiter outside the database holds its rows' gate slots for a moment
     * between taking them and giving back those a later limit refused (all the longer on a loaded
     * machine). Paused, a pick admits nothing; two more picks make sure none is still in flight. The
     * PostgreSQL pick admits in one statement, so nothing is stopped there.
     */
    protected void quiesce(DurableEngine engine, String queue) {
        if (limiter().inDatabase()) {
            return;
        }
        engine.admin().pauseQueue(queue).block(WAIT);
        long picks = engine.queueStats(queue).orElseThrow().picks();
        Eventually.until("two picks of the paused queue", WAIT,
                () -> engine.queueStats(queue).orElseThrow().picks() >= picks + 2);
    }
}
