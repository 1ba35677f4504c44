package dev.durable.internal.engine;

import dev.durable.InstanceStatus;
import dev.durable.internal.client.SettleWaiters;
import dev.durable.internal.sql.Rows.Delivery;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.Transition;
import dev.durable.poke.PokeTransport;
import io.r2dbc.spi.Connection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The one channel a status change made on this engine goes through once its transaction has
 * committed: to telemetry (events and meters), to the schedulers of the row's queue (a poke, when
 * the row became runnable) and to the callers waiting for it to settle or park. Every part that
 * changes a status reports here and nowhere else: a run's commit and what it woke or spawned
 * (executor, committer), the reaper and the await expiry (maintenance), the client's inserts,
 * signals and cancels.
 *
 * <p>Pokes go through the running engine's transport, here and to the engines it reaches
 * ({@link #pokeThrough}); before the engine has started nothing is poked, and rows wait for a
 * scheduler's poll.
 */
public final class Transitions {

    private final Telemetry telemetry;
    private final SettleWaiters waiters;
    private volatile @Nullable PokeTransport transport;

    public Transitions(Telemetry telemetry, SettleWaiters waiters) {
        this.telemetry = telemetry;
        this.waiters = waiters;
    }

    /** The engine started: pokes go through its transport from now on. */
    void pokeThrough(PokeTransport started) {
        this.transport = started;
    }

    /** The runtime that poked through {@code closing} closes: nobody is poked until another starts. */
    void stopPokingThrough(PokeTransport closing) {
        if (transport == closing) {
            transport = null;
        }
    }

    /** Tells the schedulers of {@code queue} that work is there; nobody while the engine has not started. */
    public void poke(String queue) {
        PokeTransport pokes = transport;
        if (pokes != null) {
            pokes.poke(queue);
        }
    }

    /**
     * Pokes {@code queue} when the transaction open on {@code connection} commits (an insert on the
     * caller's connection: a poke before the commit would find nothing).
     */
    public Mono<Void> pokeOnCommit(Connection connection, String queue) {
        PokeTransport pokes = transport;
        return pokes == null ? Mono.empty() : pokes.pokeOnCommit(connection, queue);
    }

    // ---- The client's ------------------------------------------------------------------------

    /**
     * Rows inserted with these ids: INSERTED for each. The insert pokes their queues itself, after
     * handing claimed rows over and when its transaction has committed.
     */
    public void inserted(List<NewInstance> rows, List<Long> ids) {
        telemetry.inserted(rows, ids);
    }

    /**
     * A signal stored: SIGNALLED (and WOKEN when it woke its instance, whose queue is poked and whose
     * waiters learn it is runnable).
     */
    public void signalled(Delivery delivery) {
        telemetry.signalled(delivery.id(), delivery.type(), delivery.queue(), delivery.woken());
        if (delivery.woken()) {
            changed(delivery.id(), delivery.queue(), InstanceStatus.RUNNABLE);
        }
    }

    /** An instance cancelled at once (not an executing one, which its run's commit cancels). */
    public void cancelled(long id, String type, String queue) {
        telemetry.cancelled(id, type, queue);
        changed(id, queue, InstanceStatus.CANCELLED);
    }

    // ---- The runtime's -----------------------------------------------------------------------

    /** A run's outcome committed; its event and meters went with the run ({@link Telemetry.Run#ended}). */
    void committed(Transition transition) {
        changed(transition);
    }

    /** A child a committed outcome spawned. */
    void spawned(Transition child) {
        changed(child);
    }

    /** A parent woken by its last child's settle. */
    public void wokenParent(Transition parent) {
        telemetry.wokenParent(parent);
        changed(parent);
    }

    /** A claim whose lease expired, given back by the reaper (or failed, or cancelled). */
    public void recovered(Transition transition) {
        telemetry.recovered(transition, false);
        changed(transition);
    }

    /** A dead predecessor's claim taken back at start (or failed, or cancelled). */
    void reclaimed(Transition transition) {
        telemetry.reclaimed(transition);
        changed(transition);
    }

    /** An await whose deadline passed, resumed. */
    public void awaitExpired(Transition transition) {
        telemetry.recovered(transition, true);
        changed(transition);
    }

    private void changed(Transition transition) {
        changed(transition.id(), transition.queue(), transition.status());
    }

    /** A runnable row may be wanted by its queue's schedulers; a settled or parked one releases its waiters. */
    private void changed(long id, String queue, InstanceStatus status) {
        if (status == InstanceStatus.RUNNABLE) {
            poke(queue);
        }
        waiters.changed(id, status);
    }
}
