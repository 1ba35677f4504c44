package dev.durable.internal.engine;

import dev.durable.Cancellation;
import dev.durable.internal.sql.Rows.ClaimedRow;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The rows one queue scheduler holds under its claim: those waiting for a run slot (the buffer, in
 * urgency order, each with the time its lease may have run out) and those handed to a run (each
 * with the switch that stops it). A run whose handler has finished and whose outcome only waits for
 * its commit is still held (its lease is renewed, its id is not claimed again here) but no longer
 * takes a run slot ({@link #handling}). What a heartbeat found is judged here ({@link #afterBeat}),
 * and a buffered row whose lease no beat renewed in time is never started ({@link #take}).
 *
 * <p>The buffer is guarded by the scheduler's lock; the runs are a concurrent map, which the
 * heartbeat reads and a run's end updates without it. Lease deadlines are on the scheduler's
 * monotonic clock, counted from before the statement that set or last renewed the lease was sent,
 * so never later than the database's own.
 */
final class HeldRows {

    private static final Logger log = Loggers.getLogger(HeldRows.class);

    /** A row handed to a run, and the switch that stops the run. */
    static final class Running {

        final ClaimedRow row;
        private final Sinks.Empty<Void> stop = Sinks.empty();
        volatile boolean stopped;
        volatile boolean lost;
        /** Only the commit of its outcome is left: the run slot is free. */
        private final AtomicBoolean committing = new AtomicBoolean();
        final Cancellation cancellation = new Cancellation(stop.asMono(), () -> stopped);

        private Running(ClaimedRow row) {
            this.row = row;
        }

        /** Stops the run: its claim was lost, or its instance's cancel was requested. */
        void stop(boolean claimLost) {
            lost = claimLost;
            stopped = true;
            stop.tryEmitEmpty();
        }
    }

    /**
     * What a heartbeat found about the rows held: buffered rows no longer this worker's ({@code lost})
     * or whose cancel was requested ({@code cancelled}), both taken out of the buffer to be given
     * back, and the runs to stop, each with whether its claim was lost (else it was cancelled).
     */
    record Verdict(List<ClaimedRow> lost, List<ClaimedRow> cancelled, Map<Running, Boolean> toStop) {

        /**
         * Counts what the beat found, gives the buffered rows back (lost ones too: one whose lease merely
         * lapsed is still this worker's in the table until the reaper comes, which would charge it an
         * attempt it never ran; the release's guard leaves alone any another worker holds now) and
         * stops the runs (a lost one commits nothing, a cancelled one ends cancelled). Returns whether
         * anything was found.
         */
        boolean giveBackAndStop(String queue, Releaser releaser, SchedulerCounters counters) {
            if (lost.isEmpty() && cancelled.isEmpty() && toStop.isEmpty()) {
                return false;
            }
            long runsLost = toStop.values().stream().filter(claimLost -> claimLost).count();
            counters.leasesLost.addAndGet(lost.size() + runsLost);
            counters.runsCancelled.addAndGet(cancelled.size() + toStop.size() - runsLost);
            log.debug("queue {}: heartbeat found {} buffered rows lost, {} buffered rows cancelled, {} runs to stop",
                    queue, lost.size(), cancelled.size(), toStop.size());
            List<ClaimedRow> giveBack = new ArrayList<>(lost);
            giveBack.addAll(cancelled);
            if (!giveBack.isEmpty()) {
                releaser.release(giveBack).subscribe(null, error -> log.warn("queue {}: release failed", queue, error));
            }
            toStop.forEach(Running::stop);
            return true;
        }
    }

    private final long leaseNanos;
    private final ArrayDeque<ClaimedRow> buffer = new ArrayDeque<>();
    private final Map<Long, Long> leaseDeadlines = new HashMap<>();
    private final Map<Long, Running> running = new ConcurrentHashMap<>();
    /** How many of {@link #running} are committing; never more than counted there (see {@link #handling}). */
    private final AtomicInteger committing = new AtomicInteger();
    /** Slots promised to rows being inserted already claimed (claim-on-insert), and when. */
    private int reserved;
    private long reservedAt;

    HeldRows(long leaseNanos) {
        this.leaseNanos = leaseNanos;
    }

    /** Rows handed to runs and not finished, their outcomes' commits included: what counts against the claim ceiling. */
    int runs() {
        return running.size();
    }

    /**
     * Runs whose handler is still going: what takes a run slot. Never less than the true count, so a
     * dispatch never starts a run past the concurrency: a run is counted committing only after its
     * flag is set, and stops being counted before it leaves the map.
     */
    int handling() {
        return running.size() - committing.get();
    }

    /** Runs waiting only for their outcome's commit. */
    int committing() {
        return committing.get();
    }

    /**
     * The run's handler has finished and only its outcome's commit is left: its run slot is free.
     * Returns whether that freed a slot: at most once per run, and only while the run is its row's
     * current one here, so that {@link #finished} always takes back what was counted.
     */
    boolean markCommitting(Running run) {
        boolean[] freed = {false};
        running.computeIfPresent(run.row.id(), (id, current) -> {
            if (current == run && run.committing.compareAndSet(false, true)) {
                committing.incrementAndGet();
                freed[0] = true;
            }
            return current;
        });
        return freed[0];
    }

    int buffered() {
        return buffer.size();
    }

    boolean idle() {
        return running.isEmpty() && buffer.isEmpty();
    }

    boolean isRunning(long id) {
        return running.containsKey(id);
    }

    /** The run of {@code row}, when it is this very claim's (not an older run of the same id). */
    @Nullable Running runOf(ClaimedRow row) {
        Running run = running.get(row.id());
        return run != null && run.row == row ? run : null;
    }

    /** The ids of every row held: running and buffered. */
    List<Long> ids() {
        List<Long> ids = new ArrayList<>(running.size() + buffer.size());
        ids.addAll(running.keySet());
        for (ClaimedRow row : buffer) {
            ids.add(row.id());
        }
        return ids;
    }

    /** Buffered rows and slots reserved for rows being inserted claimed: what a pick must leave room for. */
    int bufferedOrReserved() {
        return buffer.size() + reserved;
    }

    /**
     * Reserves {@code slots} for rows about to be inserted already claimed, the insert sent after
     * {@code now}; none while another reservation is in force or anything is held. Returns how many.
     */
    int reserve(int slots, long now) {
        if (reserved > 0 || !idle()) {
            return 0;
        }
        reserved = slots;
        reservedAt = now;
        return slots;
    }

    /**
     * The insert under a reservation of {@code slots} ended: the slots are free again, and the rows it
     * claimed (none when it failed, or the scheduler closed) are buffered with the reservation's deadline.
     */
    void claimedOnInsert(int slots, List<ClaimedRow> rows) {
        reserved -= slots;
        buffer(rows, reservedAt);
    }

    /**
     * Adds claimed rows to the buffer with the lease deadline of a claim sent at {@code sentAt}. A row
     * whose id is still buffered under an older claim replaces it: the database gave the id to this
     * claim, so the older one lapsed (the reaper returned the row) and must never start; returns how
     * many such older claims were dropped. (Lease deadlines are kept by id: left in, the older claim
     * would start on the new one's deadline, beside it.)
     */
    int buffer(Collection<ClaimedRow> rows, long sentAt) {
        // leaseDeadlines holds exactly the buffered ids: one lookup a row, and the buffer is walked
        // only in the rare case of an id claimed again.
        Set<Long> again = new HashSet<>();
        for (ClaimedRow row : rows) {
            if (leaseDeadlines.containsKey(row.id())) {
                again.add(row.id());
            }
        }
        int dropped = 0;
        if (!again.isEmpty()) {
            int before = buffer.size();
            buffer.removeIf(older -> again.contains(older.id()));
            dropped = before - buffer.size();
        }
        buffer.addAll(rows);
        for (ClaimedRow row : rows) {
            leaseDeadlines.put(row.id(), sentAt + leaseNanos);
        }
        return dropped;
    }

    /**
     * Hands up to {@code wanted} buffered rows to runs (into {@code toRun}); a row whose lease may have
     * run out by {@code now} goes to {@code lapsed} instead: the reaper may have given it to another
     * worker, so it must not start here.
     */
    void take(int wanted, long now, List<ClaimedRow> toRun, List<ClaimedRow> lapsed) {
        int taken = 0;
        while (taken < wanted && !buffer.isEmpty()) {
            ClaimedRow row = buffer.poll();
            Long deadline = leaseDeadlines.remove(row.id());
            if (deadline != null && now - deadline >= 0) {
                lapsed.add(row);
                continue;
            }
            running.put(row.id(), new Running(row));
            toRun.add(row);
            taken++;
        }
    }

    /**
     * Judges what a heartbeat that held {@code held} found: a buffered row no longer this worker's
     * (its lease lapsed, or another holds it) or whose cancel was requested leaves the buffer; a
     * running row that is either is to be stopped; a renewed buffered row's lease deadline moves to
     * the beat's send time plus the lease (a row left locked keeps its deadline). Rows claimed after
     * the beat read what it held are left alone.
     */
    Verdict afterBeat(List<Long> held, Beat.Renewal renewal, long sentAt) {
        List<ClaimedRow> lost = new ArrayList<>();
        List<ClaimedRow> cancelled = new ArrayList<>();
        Map<Running, Boolean> toStop = new HashMap<>();
        Set<Long> wasHeld = new HashSet<>(held);
        for (Iterator<ClaimedRow> rows = buffer.iterator(); rows.hasNext(); ) {
            ClaimedRow row = rows.next();
            if (!wasHeld.contains(row.id())) {
                continue;
            }
            if (!renewal.holds(row.id())) {
                rows.remove();
                leaseDeadlines.remove(row.id());
                lost.add(row);
            } else if (renewal.cancelRequested().contains(row.id())) {
                rows.remove();
                leaseDeadlines.remove(row.id());
                cancelled.add(row);
            } else if (renewal.renewed().contains(row.id())) {
                leaseDeadlines.computeIfPresent(row.id(), (id, deadline) -> Math.max(deadline, sentAt + leaseNanos));
            }
        }
        for (Running run : running.values()) {
            boolean claimLost = !renewal.holds(run.row.id());
            if (wasHeld.contains(run.row.id()) && !run.stopped
                    && (claimLost || renewal.cancelRequested().contains(run.row.id()))) {
                toStop.put(run, claimLost);
            }
        }
        return new Verdict(lost, cancelled, toStop);
    }

    /**
     * Buffered rows whose lease may have run out ({@link #take}): counted as lost and given back (the
     * release's guard leaves alone any the reaper already handed on), never started.
     */
    static void giveBackLapsed(String queue, List<ClaimedRow> lapsed, Releaser releaser, SchedulerCounters counters) {
        counters.leasesLost.addAndGet(lapsed.size());
        log.debug("queue {}: {} buffered rows not started: their lease may have run out", queue, lapsed.size());
        releaser.release(lapsed).subscribe(null, error -> log.debug("queue {}: release of lapsed rows failed: {}",
                queue, error.toString()));
    }

    /** The run of {@code row} ended: it is no longer held (unless a newer claim of its id runs). */
    void finished(ClaimedRow row) {
        running.computeIfPresent(row.id(), (id, run) -> {
            if (run.row != row) {
                return run;
            }
            if (run.committing.get()) {
                committing.decrementAndGet(); // before the run leaves the map: see handling()
            }
            return null;
        });
    }

    /** Empties the buffer (a close gives its rows back); returns them. */
    List<ClaimedRow> clearBuffer() {
        List<ClaimedRow> rows = new ArrayList<>(buffer);
        buffer.clear();
        leaseDeadlines.clear();
        return rows;
    }
}
