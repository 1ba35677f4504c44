package dev.durable.internal.engine;

import dev.durable.PickTrigger;
import dev.durable.QueueOptions;
import dev.durable.QueueStats;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What one queue's scheduler and its collaborators (pick, admission, heartbeat, leases) count.
 * Written by them, read as a {@link QueueStats} snapshot and by the meters; nothing else sees the
 * counters themselves.
 */
final class SchedulerCounters {

    final AtomicLong picks = new AtomicLong();
    final AtomicLong picked = new AtomicLong();
    final AtomicLong pickRetries = new AtomicLong();
    final AtomicLong pickFailures = new AtomicLong();
    final AtomicLong pokesHandled = new AtomicLong();
    final AtomicLong pokesDropped = new AtomicLong();
    final AtomicLong heartbeats = new AtomicLong();
    final AtomicLong heartbeatsSkipped = new AtomicLong();
    final AtomicLong completed = new AtomicLong();
    final AtomicLong stale = new AtomicLong();
    final AtomicLong reclaimed = new AtomicLong();
    final AtomicLong released = new AtomicLong();
    final AtomicLong drainAbandoned = new AtomicLong();
    /** Rows a limit held back at a pick: all of them, and by a full gate or an empty bucket. */
    final AtomicLong throttled = new AtomicLong();
    final AtomicLong throttledByGate = new AtomicLong();
    final AtomicLong throttledByRate = new AtomicLong();
    final AtomicLong leasesLost = new AtomicLong();
    final AtomicLong runsCancelled = new AtomicLong();
    private final EnumMap<PickTrigger, AtomicLong> byTrigger = new EnumMap<>(PickTrigger.class);

    SchedulerCounters() {
        for (PickTrigger trigger : PickTrigger.values()) {
            byTrigger.put(trigger, new AtomicLong());
        }
    }

    AtomicLong picksBy(PickTrigger trigger) {
        return byTrigger.get(trigger);
    }

    QueueStats snapshot(QueueOptions options, String worker, int running, int committing, int buffered,
            Duration pollInterval) {
        Map<PickTrigger, Long> triggers = new EnumMap<>(PickTrigger.class);
        byTrigger.forEach((trigger, count) -> triggers.put(trigger, count.get()));
        return new QueueStats(options.name(), worker, running, committing, buffered, options.concurrency(), options.prefetch(),
                pollInterval, picks.get(), triggers, picked.get(), pickRetries.get(), pickFailures.get(),
                pokesHandled.get(), pokesDropped.get(), heartbeats.get(), heartbeatsSkipped.get(), completed.get(),
                stale.get(), reclaimed.get(), released.get(), drainAbandoned.get(), throttled.get(), leasesLost.get(),
                runsCancelled.get());
    }
}
