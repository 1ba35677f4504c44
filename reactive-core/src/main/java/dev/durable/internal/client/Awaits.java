package dev.durable.internal.client;

import dev.durable.DurableTimeoutException;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.NoTargetException;
import dev.durable.internal.engine.Transitions;
import dev.durable.internal.sql.InstanceSql;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.function.Predicate;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The client's waits: for an instance to reach a status (served by the engine's shared
 * {@link SettleWaiters}), and for the engine's queues to have nothing due or running.
 */
public final class Awaits {

    /** How often {@link #awaitIdle} counts what is busy. */
    private static final Duration IDLE_POLL = Duration.ofMillis(20);

    private final SettleWaiters waiters;
    private final InstanceSql instances;
    private final Transitions transitions;
    private final List<String> queues;
    private final Function<Instance, Instance> withCodec;
    private final Mono<Void> whenOpen;

    /** {@code queues}: the engine's own, which {@link #awaitIdle} waits for. */
    public Awaits(SettleWaiters waiters, InstanceSql instances, Transitions transitions, List<String> queues,
            Function<Instance, Instance> withCodec, Mono<Void> whenOpen) {
        this.waiters = waiters;
        this.instances = instances;
        this.transitions = transitions;
        this.queues = List.copyOf(queues);
        this.withCodec = withCodec;
        this.whenOpen = whenOpen;
    }

    /**
     * Completes when none of the engine's queues has an instance due within {@code horizon} or
     * running; pokes the queues first, then counts every {@link #IDLE_POLL}.
     */
    public Mono<Void> awaitIdle(Duration timeout, Duration horizon) {
        if (horizon == null || horizon.isNegative()) {
            return Mono.error(new InvalidRequestException("horizon must not be negative, was " + horizon));
        }
        long horizonMillis = horizon.toMillis();
        if (queues.isEmpty()) {
            return Mono.empty();
        }
        return Mono.fromRunnable(() -> queues.forEach(transitions::poke))
                .then(Flux.interval(Duration.ZERO, IDLE_POLL)
                        .onBackpressureDrop()
                        .concatMap(tick -> instances.countBusy(queues, horizonMillis), 0)
                        .filter(busy -> busy == 0)
                        .next()
                        .then())
                .timeout(timeout, Mono.error(() -> new DurableTimeoutException(
                        "queues " + queues + " still had due or running work after " + timeout)));
    }

    /** The instance once its status is one {@code wanted}; a {@link DurableTimeoutException} after {@code timeout}. */
    public Mono<Instance> awaitStatus(long id, Duration timeout, Predicate<InstanceStatus> wanted) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            return Mono.error(new InvalidRequestException("timeout must be positive, was " + timeout));
        }
        return whenOpen.then(waiters.await(id, wanted, timeout)).map(withCodec)
                .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to await")));
    }

    /** As {@link #awaitStatus} for a settled status, but after {@code timeout} the instance as it stands then. */
    public Mono<Instance> awaitSettledOrCurrent(long id, Duration timeout) {
        return awaitStatus(id, timeout, InstanceStatus::isTerminal)
                .onErrorResume(DurableTimeoutException.class, late -> whenOpen
                        .then(waiters.current(id))
                        .map(withCodec)
                        .switchIfEmpty(Mono.error(() -> NoTargetException.noInstance(id, "to await"))));
    }
}
