package dev.durable.observation;

import io.micrometer.observation.transport.Kind;
import io.micrometer.observation.transport.ReceiverContext;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * What an observation of one run knows: the instance, its step, how the run ended, and the trace
 * context stored with the instance.
 *
 * <p>A receiver context (kind consumer) whose carrier is itself: its {@code traceparent} and
 * {@code tracestate} are those of the caller that inserted the instance (or the step that spawned
 * it), so Micrometer Tracing's receiver handler makes the run's span a child of that context, on
 * any node and however long after. With nothing stored the run's span starts a trace of its own.
 * {@link #traceLinks()} are for {@link DurableTracingObservationHandler}, which also links the span
 * to the instance's previous run and to the senders of the signals the step consumes.
 */
public final class RunContext extends ReceiverContext<RunContext> {

    private final long instanceId;
    private final String type;
    private final String queue;
    private final String step;
    private final int attempt;
    private final @Nullable String traceContext;
    private final List<TraceLink> traceLinks;
    private @Nullable String outcome;

    public RunContext(long instanceId, String type, String queue, String step, int attempt) {
        this(instanceId, type, queue, step, attempt, null, List.of());
    }

    public RunContext(long instanceId, String type, String queue, String step, int attempt,
            @Nullable String traceContext, List<TraceLink> traceLinks) {
        super((carrier, header) -> TraceContexts.header(carrier.traceContext, header), Kind.CONSUMER);
        setCarrier(this);
        this.instanceId = instanceId;
        this.type = type;
        this.queue = queue;
        this.step = step;
        this.attempt = attempt;
        this.traceContext = traceContext;
        this.traceLinks = List.copyOf(traceLinks);
    }

    public long instanceId() {
        return instanceId;
    }

    public String type() {
        return type;
    }

    public String queue() {
        return queue;
    }

    public String step() {
        return step;
    }

    public int attempt() {
        return attempt;
    }

    /** The stored trace context the run's span is a child of ({@link TraceContexts}); null for none. */
    public @Nullable String traceContext() {
        return traceContext;
    }

    /** The spans the run's span links to: the previous run, the consumed signals' senders. */
    public List<TraceLink> traceLinks() {
        return traceLinks;
    }

    /** How the run ended (completed, retried, failed, ...), set before the observation stops. */
    public @Nullable String outcome() {
        return outcome;
    }

    public void outcome(String outcome) {
        this.outcome = outcome;
    }
}
