package dev.durable.internal.engine;

import dev.durable.JobEvent;
import dev.durable.internal.SerializedEmitter;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.BufferOverflowStrategy;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The engine's event stream, and the order of each instance's events in it. Events go to a
 * multicast sink that never waits: each subscriber has its own bounded buffer that drops its oldest
 * event (counted) when the subscriber falls behind, so a slow or stalled subscriber never slows a pick.
 *
 * <p>Events of one instance come in the order of what happened to it. The one race is an insert:
 * a scheduler may pick the row (this engine's, by claim-on-insert or a poll) before the insert's
 * answer is back to say INSERTED. So while someone listens, each insert takes a ticket before its
 * statement goes, and events emitted while older tickets are open wait until those inserts have
 * said INSERTED (or failed). The other race is a re-pick: a run's retry or next step commits, and
 * a poll picks the row again before the run has said RETRIED or STEPPED. So while someone listens,
 * a PICKED of an instance whose earlier run on this engine has not ended waits for that run's
 * event, with whatever else comes for the instance meanwhile. Without listeners none of this is
 * tracked and nothing costs more than a volatile read.
 */
final class EventOrder {

    private final Sinks.Many<JobEvent> events = Sinks.many().multicast().directBestEffort();
    /** Emitters are many threads; events go out one at a time, with no lock held while subscribers run. */
    private final SerializedEmitter<JobEvent> emitter = new SerializedEmitter<>(events);
    private final int eventBuffer;
    private final AtomicLong eventsDropped = new AtomicLong();

    /** Guards the insert tickets, the tracked runs and the events held for either. */
    private final Object order = new Object();
    private final TreeSet<Long> openInserts = new TreeSet<>();
    private final ArrayDeque<Held> held = new ArrayDeque<>();
    private long lastTicket;
    /** The runs in progress while someone listens, by instance. */
    private final Map<Long, Set<Object>> activeRuns = new HashMap<>();
    /** Events of an instance waiting for runs that were in progress when it was picked again. */
    private final Map<Long, Waiting> waiting = new HashMap<>();
    /** True while inserts are open, runs tracked or events held: emitters then take the ordered path. */
    private volatile boolean ordering;

    private record Waiting(Set<Object> blockers, List<JobEvent> events) {
    }

    /** An event waiting until every insert up to {@code ticket} has said INSERTED. */
    private record Held(JobEvent event, long ticket) {
    }

    EventOrder(int eventBuffer) {
        this.eventBuffer = eventBuffer;
    }

    /** The event stream; each subscriber gets a bounded buffer of its own. */
    Flux<JobEvent> events() {
        return events.asFlux().onBackpressureBuffer(eventBuffer, dropped -> eventsDropped.incrementAndGet(),
                BufferOverflowStrategy.DROP_OLDEST);
    }

    AtomicLong eventsDropped() {
        return eventsDropped;
    }

    boolean listening() {
        return events.currentSubscriberCount() > 0;
    }

    /**
     * Emits at once, ahead of events held for open tickets: for the events of the change that holds
     * the ticket (INSERTED, SIGNALLED), the only ones those held events can be about.
     */
    void emitNow(JobEvent event) {
        emitter.emit(event);
    }

    /** Emits in order: after open inserts, and a pick ({@code pick}) after the instance's runs here ended. */
    void publish(JobEvent event, boolean pick) {
        if (!ordering) {
            emitter.emit(event);
            return;
        }
        synchronized (order) {
            Waiting wait = waiting.get(event.id());
            if (wait != null) {
                wait.events().add(event);
                return;
            }
            Set<Object> running = pick ? activeRuns.get(event.id()) : null;
            if (running != null && !running.isEmpty()) {
                waiting.put(event.id(), new Waiting(new HashSet<>(running), new ArrayList<>(List.of(event))));
                return;
            }
            afterInserts(event);
        }
    }

    /**
     * {@code change} (an insert, a signal delivery) under a ticket taken as it is sent: events of its
     * rows emitted by others meanwhile (a pick) wait until it has said what it did.
     */
    <T> Mono<T> ordered(Mono<T> change) {
        return Mono.defer(() -> {
            long ticket = ticketed();
            return change.doFinally(signal -> ticketEnded(ticket));
        });
    }

    /** A ticket, or 0 while nobody listens. */
    private long ticketed() {
        if (!listening()) {
            return 0L;
        }
        synchronized (order) {
            long ticket = ++lastTicket;
            openInserts.add(ticket);
            ordering = true;
            return ticket;
        }
    }

    /** The change of {@code ticket} said what it did, failed or was cancelled: what waited for it goes. */
    private void ticketEnded(long ticket) {
        if (ticket == 0L) {
            return;
        }
        synchronized (order) {
            openInserts.remove(ticket);
            release();
        }
    }

    /** A run of instance {@code id} starts while someone listens: a re-pick of it waits for its end. */
    void track(long id, Object run) {
        synchronized (order) {
            activeRuns.computeIfAbsent(id, key -> new HashSet<>()).add(run);
            ordering = true;
        }
    }

    /**
     * The tracked {@code run} of instance {@code id} ended: its end event (when given) goes ahead of the
     * events of its instance that waited for it (a later pick), or behind them when they waited for
     * another run. Returns whether the run was tracked (and so its end event handled here).
     */
    boolean untrack(long id, Object run, @Nullable JobEvent end) {
        synchronized (order) {
            Set<Object> running = activeRuns.get(id);
            if (running == null || !running.remove(run)) {
                return false;
            }
            if (running.isEmpty()) {
                activeRuns.remove(id);
            }
            Waiting wait = waiting.get(id);
            if (wait != null && !wait.blockers().contains(run)) {
                if (end != null) {
                    wait.events().add(end);
                }
            } else {
                if (end != null) {
                    afterInserts(end);
                }
                if (wait != null) {
                    wait.blockers().remove(run);
                    if (wait.blockers().isEmpty()) {
                        waiting.remove(id);
                        wait.events().forEach(this::afterInserts);
                    }
                }
            }
            refreshOrdering();
            return true;
        }
    }

    /** Emits the event, or holds it behind the inserts open now; under {@code order}. */
    private void afterInserts(JobEvent event) {
        if (openInserts.isEmpty() && held.isEmpty()) {
            emitter.emit(event);
            return;
        }
        held.add(new Held(event, lastTicket));
        release();
    }

    /** Emits the held events no open insert can precede; under {@code order}. */
    private void release() {
        long oldestOpen = openInserts.isEmpty() ? Long.MAX_VALUE : openInserts.first();
        while (!held.isEmpty() && held.peek().ticket() < oldestOpen) {
            emitter.emit(held.poll().event());
        }
        refreshOrdering();
    }

    /** Under {@code order}. */
    private void refreshOrdering() {
        ordering = !openInserts.isEmpty() || !held.isEmpty() || !activeRuns.isEmpty() || !waiting.isEmpty();
    }
}
