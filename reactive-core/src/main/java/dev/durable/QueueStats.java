package dev.durable;

import java.time.Duration;
import java.util.Map;

/**
 * What one queue's scheduler on this engine is doing and has done since the engine started: a
 * read-only snapshot, from {@link DurableEngine#queueStats()}. The counters only grow; the same
 * figures are published as Micrometer meters.
 *
 * @param queue the queue
 * @param worker the worker id this scheduler claims rows as
 * @param running runs whose handler is going: each holds one of the {@code concurrency} run slots
 * @param committing runs whose handler has finished and whose outcome waits for its (group) commit:
 *     they hold their claim, not a run slot, and count against {@code concurrency + prefetch} with
 *     the running and buffered rows
 * @param buffered rows claimed and waiting for a free run slot
 * @param concurrency the most handlers run at once
 * @param prefetch the most rows claimed ahead into the buffer
 * @param pollInterval the idle poll interval now in force (grows while idle, snaps back on work)
 * @param picks picks made (statements that claim)
 * @param picksByTrigger picks made, and rows claimed at insert, by reason
 * @param picked rows claimed, by picks and at insert
 * @param pickRetries picks tried again after a concurrency key was taken under them or a deadlock
 * @param pickFailures picks that failed for good (the poll tries again)
 * @param pokesHandled pokes that reached this scheduler and were acted on or coalesced
 * @param pokesDropped pokes a busy scheduler ignored (it refills on its own)
 * @param heartbeats heartbeat statements sent
 * @param heartbeatsSkipped heartbeat ticks dropped because the previous beat was still running
 * @param completed runs finished, whatever their outcome
 * @param stale outcomes dropped because the run had lost its claim
 * @param reclaimed rows of a dead predecessor taken back at start
 * @param released claimed rows given back unstarted
 * @param drainAbandoned runs still going when close() stopped waiting for them
 * @param throttled limited rows a limiter refused at a pick
 * @param leasesLost held rows a heartbeat found no longer this worker's (dropped unstarted, or their run stopped)
 * @param runsCancelled held rows a heartbeat found cancelled (given back unstarted, or their run stopped)
 */
public record QueueStats(
        String queue,
        String worker,
        int running,
        int committing,
        int buffered,
        int concurrency,
        int prefetch,
        Duration pollInterval,
        long picks,
        Map<PickTrigger, Long> picksByTrigger,
        long picked,
        long pickRetries,
        long pickFailures,
        long pokesHandled,
        long pokesDropped,
        long heartbeats,
        long heartbeatsSkipped,
        long completed,
        long stale,
        long reclaimed,
        long released,
        long drainAbandoned,
        long throttled,
        long leasesLost,
        long runsCancelled) {

    public QueueStats {
        picksByTrigger = Map.copyOf(picksByTrigger);
    }

    /** A snapshot with no run waiting for its commit (the shape before {@code committing} was counted apart). */
    public QueueStats(String queue, String worker, int running, int buffered, int concurrency, int prefetch,
            Duration pollInterval, long picks, Map<PickTrigger, Long> picksByTrigger, long picked, long pickRetries,
            long pickFailures, long pokesHandled, long pokesDropped, long heartbeats, long heartbeatsSkipped,
            long completed, long stale, long reclaimed, long released, long drainAbandoned, long throttled,
            long leasesLost, long runsCancelled) {
        this(queue, worker, running, 0, buffered, concurrency, prefetch, pollInterval, picks, picksByTrigger, picked,
                pickRetries, pickFailures, pokesHandled, pokesDropped, heartbeats, heartbeatsSkipped, completed, stale,
                reclaimed, released, drainAbandoned, throttled, leasesLost, runsCancelled);
    }

    /** Picks (or claims at insert) made for one reason. */
    public long picks(PickTrigger trigger) {
        return picksByTrigger.getOrDefault(trigger, 0L);
    }
}
