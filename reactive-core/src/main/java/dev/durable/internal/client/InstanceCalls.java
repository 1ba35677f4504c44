package dev.durable.internal.client;

import dev.durable.CancelResult;
import dev.durable.InboxFullException;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JsonCodec;
import dev.durable.NoTargetException;
import dev.durable.QueueNames;
import dev.durable.SignalResult;
import dev.durable.internal.RequestMapper;
import dev.durable.internal.engine.Telemetry;
import dev.durable.internal.engine.Transitions;
import dev.durable.internal.sql.InstanceSql;
import dev.durable.internal.sql.Rows.CancelRow;
import dev.durable.internal.sql.SignalSql;
import dev.durable.observation.TracePropagation;
import java.util.Optional;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The client's calls on instances that exist: read one, list, cancel, and deliver a signal. Each is
 * one statement; a status it changes goes through the engine's {@link Transitions}.
 */
public final class InstanceCalls {

    private static final Mono<Optional<String>> NO_TRACE = Mono.just(Optional.empty());

    private final InstanceSql instances;
    private final SignalSql signals;
    private final RequestMapper mapper;
    private final JsonCodec codec;
    private final TracePropagation tracing;
    private final Telemetry telemetry;
    private final Transitions transitions;
    private final int maxInboxSignals;
    private final Mono<Void> whenOpen;

    public InstanceCalls(InstanceSql instances, SignalSql signals, RequestMapper mapper, JsonCodec codec,
            TracePropagation tracing, Telemetry telemetry, Transitions transitions, int maxInboxSignals,
            Mono<Void> whenOpen) {
        this.instances = instances;
        this.signals = signals;
        this.mapper = mapper;
        this.codec = codec;
        this.tracing = tracing;
        this.telemetry = telemetry;
        this.transitions = transitions;
        this.maxInboxSignals = maxInboxSignals;
        this.whenOpen = whenOpen;
    }

    /** The instance with that id, or empty; its state and result decode through the engine's codec. */
    public Mono<Instance> get(long id) {
        return whenOpen.then(instances.get(id)).map(this::withCodec);
    }

    /** Instances by queue and status (either null for any), in id order after {@code afterId}, at most {@code limit}. */
    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        if (limit < 1) {
            return Flux.error(new InvalidRequestException("limit must be at least 1, was " + limit));
        }
        if (queue != null) {
            try {
                QueueNames.check("queue", queue);
            } catch (InvalidRequestException invalid) {
                return Flux.error(invalid);
            }
        }
        return whenOpen.thenMany(instances.list(queue, status, afterId, limit)).map(this::withCodec);
    }

    /** Instances handed out decode their state and result through this engine's codec. */
    public Instance withCodec(Instance instance) {
        return instance.withCodec(codec);
    }

    /** Cancels an instance (with {@code cascade}, its live descendants too) and says what became of it. */
    public Mono<CancelResult> cancel(long id, boolean cascade) {
        return whenOpen.then(instances.cancel(id, cascade))
                .doOnNext(row -> {
                    if (row.after() == InstanceStatus.CANCELLED) {
                        transitions.cancelled(id, row.type(), row.queue());
                    }
                    row.descendantsCancelled().forEach(child -> transitions.cancelled(child.id(), child.type(),
                            child.queue()));
                })
                .map(InstanceCalls::cancelResult)
                .defaultIfEmpty(CancelResult.NOT_FOUND);
    }

    private static CancelResult cancelResult(CancelRow row) {
        if (row.after() == null) {
            return CancelResult.ALREADY_SETTLED;
        }
        return row.after() == InstanceStatus.CANCELLED ? CancelResult.CANCELLED : CancelResult.REQUESTED;
    }

    /**
     * Delivers a signal to the live instance {@code id}, or to the one holding {@code correlationKey}
     * (exactly one of the two is given); {@code target} names it in a {@link NoTargetException}.
     */
    public Mono<SignalResult> signal(@Nullable Long id, @Nullable String correlationKey, String name,
            @Nullable Object payload, @Nullable String dedupKey, String target) {
        return whenOpen.then(Mono.fromCallable(() -> {
                    RequestMapper.checkName("signal name", name);
                    if (name.contains(",")) {
                        throw new InvalidRequestException("signal name must not contain ',', was '" + name + "'");
                    }
                    if (correlationKey != null) {
                        RequestMapper.checkKey("correlationKey", correlationKey);
                    }
                    if (dedupKey != null) {
                        RequestMapper.checkKey("dedupKey", dedupKey);
                    }
                    return Optional.ofNullable(payload == null ? null : mapper.encode("signal payload", payload));
                }))
                .flatMap(json -> callerTrace()
                        .flatMap(trace -> telemetry.ordered(signals.deliver(id, correlationKey, name,
                                json.orElse(null), dedupKey, trace.orElse(null)).doOnNext(delivery -> {
                            // Said inside the ticket, so a pick of the woken instance comes after.
                            if (delivery.stored() && !delivery.inboxFull()) {
                                transitions.signalled(delivery);
                            }
                        }))))
                .switchIfEmpty(Mono.error(() -> new NoTargetException(target)))
                .flatMap(delivery -> delivery.inboxFull()
                        ? Mono.error(new InboxFullException(delivery.id(), maxInboxSignals))
                        : Mono.just(delivery.stored() ? SignalResult.DELIVERED : SignalResult.DUPLICATE));
    }

    /** The subscriber's trace context, when tracing is configured (empty without, or when it has none). */
    private Mono<Optional<String>> callerTrace() {
        return tracing == TracePropagation.NONE ? NO_TRACE
                : Mono.deferContextual(context -> Mono.just(Optional.ofNullable(tracing.capture(context))));
    }
}
