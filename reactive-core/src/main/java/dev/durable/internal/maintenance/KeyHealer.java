package dev.durable.internal.maintenance;

import dev.durable.Maintenance.TaskOptions;
import dev.durable.internal.sql.KeySql;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.function.Consumer;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * The repair of ungated concurrency keys whose rows wait behind no head (key_waiting): an election
 * that ran on an older snapshot (REPEATABLE READ or SERIALIZABLE) can miss a row that committed
 * waiting meanwhile, and nothing else would promote it before the key's next event. Each pass walks
 * the keys that have waiting rows, a batch at a time in key order from where the last batch stopped,
 * and has those with neither a runnable head nor an executing row elect one through the triggers'
 * own election (counted by {@code durable.keys.healed}); the queues of the new heads are poked.
 *
 * <p><b>Safe on all nodes</b>: a key is elected under its election lock, taken with a try (a key
 * another transaction is electing is skipped), and the election reads what committed before it, so
 * electing a key twice, or one that found its head meanwhile, changes nothing a trigger would not.
 */
public final class KeyHealer extends MaintenanceService {

    private final KeySql sql;
    private final Consumer<String> poke;
    private volatile boolean more;
    private volatile String afterKey = "";
    private volatile boolean first = true;

    /** {@code poke}: told each queue in which a head was elected, once the batch committed. */
    public KeyHealer(TaskOptions options, Lane lane, Scheduler timer, MeterRegistry meters, KeySql sql,
            Consumer<String> poke) {
        super("key_healer", options, lane, timer, meters, "durable.keys.healed");
        this.sql = sql;
        this.poke = poke;
    }

    @Override
    protected Mono<Long> batch(int limit, Duration timeout) {
        return sql.heal(limit, afterKey, first, timeout).map(healed -> {
            more = healed.scanned() >= limit;
            // A short batch reached the last key: the next batch starts from the first again.
            first = !more;
            afterKey = more ? healed.lastKey() : "";
            healed.queues().forEach(poke);
            return healed.elected();
        }).doOnError(error -> {
            first = true;
            afterKey = "";
        });
    }

    @Override
    protected boolean full(long count) {
        return more;
    }
}
