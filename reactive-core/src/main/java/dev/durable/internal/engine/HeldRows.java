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
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Sinks;

/**
 * The rows one queue scheduler holds under its claim: those waiting for a run slot (the buffer, in
 * urgency order, each with the time its lease may have run out) and those handed to a run (each
 * with the switch that stops it). What a heartbeat found is judged here ({@link #afterBeat}), and a
 * buffered row whose lease no beat renewed in time is never started ({@link #take}).
 *
 * <p>The buffer is guarded by the scheduler's lock; the runs are a concurrent map, which the
 * heartbeat reads and a run's end updates without it. Lease deadlines are on the scheduler's
 * monotonic clock, counted from before the statement that set or last renewed the lease was sent,
 * so never later than the database's own.
 */
final class HeldRows {

    /** A row handed to a run, and the switch that stops the run. */
    static final class Running {

        final ClaimedRow row;
        private final Sinks.Empty<Void> stop = Sinks.empty();
        volatile boolean stopped;
        volatile boolean lost;
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

        boolean isEmpty() {
            return lost.isEmpty() && cancelled.isEmpty() && toStop.isEmpty();
        }
    }

    private final long leaseNanos;
    private final ArrayDeque<ClaimedRow> buffer = new ArrayDeque<>();
    private final Map<Long, Long> leaseDeadlines = new HashMap<>();
    private final Map<Long, Running> running = new ConcurrentHashMap<>();

    HeldRows(long leaseNanos) {
        this.leaseNanos = leaseNanos;
    }

    int running() {
        return running.size();
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

    /** Adds claimed rows to the buffer with the lease deadline of a claim sent at {@code sentAt}. */
    void buffer(Collection<ClaimedRow> rows, long sentAt) {
        buffer.addAll(rows);
        for (ClaimedRow row : rows) {
            leaseDeadlines.put(row.id(), sentAt + leaseNanos);
        }
    }

    /**
     * Hands up to {@code wanted} buffered rows to runs (into {@code toRun}); a row whose lease may have
     * run out by {@code now} goes to {@code lapsed} instead: the reaper may have given it to another
     * worker, so it must not start here. Returns how many went to runs.
     */
    int take(long wanted, long now, List<ClaimedRow> toRun, List<ClaimedRow> lapsed) {
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
        return taken;
    }

    /**
     * Judges what a heartbeat that held {@code held} found: a buffered row no longer this worker's
     * (its lease lapsed, or another holds it) or whose cancel was requested leaves the buffer; a
     * running row that is either is to be stopped; a renewed buffered row's lease deadline moves to
     * the beat's send time plus the lease (a row left locked keeps its deadline). Rows claimed after
     * the beat read what it held are left alone.
     */
    Verdict afterBeat(List<Long> held, QueueScheduler.Renewal renewal, long sentAt) {
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

    /** The run of {@code row} ended: it is no longer held (unless a newer claim of its id runs). */
    void finished(ClaimedRow row) {
        running.computeIfPresent(row.id(), (id, run) -> run.row == row ? null : run);
    }

    /** Empties the buffer (a close gives its rows back); returns them. */
    List<ClaimedRow> clearBuffer() {
        List<ClaimedRow> rows = new ArrayList<>(buffer);
        buffer.clear();
        leaseDeadlines.clear();
        return rows;
    }
}
