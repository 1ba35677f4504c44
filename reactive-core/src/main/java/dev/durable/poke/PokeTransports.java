package dev.durable.poke;

import dev.durable.internal.poke.LocalPokeTransport;
import dev.durable.internal.poke.NoPokeTransport;
import dev.durable.internal.poke.PostgresNotifyPokeTransport;
import java.time.Duration;
import reactor.core.publisher.Mono;

/** The poke transports that come with the core. */
public final class PokeTransports {

    private PokeTransports() {
    }

    /** In-process only (the default): an engine pokes its own schedulers. */
    public static PokeTransportFactory local() {
        return new PokeTransportFactory() {
            @Override
            public Mono<PokeTransport> create(PokeContext context) {
                return Mono.fromSupplier(LocalPokeTransport::new);
            }

            @Override
            public String toString() {
                return "local";
            }
        };
    }

    /**
     * No pokes at all, for deployments that want the database quiet: inserts, signals, retries and
     * woken parents wake no scheduler, not even the engine's own (the local transport is how an
     * engine pokes its own schedulers, and this one has none), so every row waits for its queue's
     * next poll ({@code QueueOptions.pollInterval}, backing off to {@code maxPollInterval} while
     * the queue stays empty). A row inserted by an engine while one of its own schedulers of that
     * queue sits idle is still claimed by the insert itself, which costs no statement.
     */
    public static PokeTransportFactory none() {
        return new PokeTransportFactory() {
            @Override
            public Mono<PokeTransport> create(PokeContext context) {
                return Mono.fromSupplier(NoPokeTransport::new);
            }

            @Override
            public String toString() {
                return "none";
            }
        };
    }

    /**
     * PostgreSQL LISTEN/NOTIFY on one dedicated connection per engine, plus the local leg. Opt-in:
     * it needs a session-pinned connection, which transaction-mode poolers do not give.
     * {@code coalesceWindow} is how long the sender gathers pokes of one queue into one NOTIFY.
     */
    public static PokeTransportFactory postgresNotify(Duration coalesceWindow) {
        if (coalesceWindow.isNegative()) {
            throw new IllegalArgumentException("coalesceWindow must not be negative, was " + coalesceWindow);
        }
        return new PokeTransportFactory() {
            @Override
            public Mono<PokeTransport> create(PokeContext context) {
                return PostgresNotifyPokeTransport.start(context, coalesceWindow).cast(PokeTransport.class);
            }

            @Override
            public String toString() {
                return "postgresNotify(" + coalesceWindow + ")";
            }
        };
    }

    /** LISTEN/NOTIFY with a 5 ms sender-side coalescing window. */
    public static PokeTransportFactory postgresNotify() {
        return postgresNotify(Duration.ofMillis(5));
    }
}
