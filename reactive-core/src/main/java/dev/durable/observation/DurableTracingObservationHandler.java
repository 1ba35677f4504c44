package dev.durable.observation;

import io.micrometer.observation.Observation;
import io.micrometer.tracing.Link;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.TraceContext;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.handler.PropagatingReceiverTracingObservationHandler;
import io.micrometer.tracing.propagation.Propagator;
import java.util.Map;

/**
 * The tracing handler of Durable's runs: as Micrometer Tracing's receiver handler (the run's span is
 * a child of the trace context stored with the instance), plus the run's links
 * ({@link RunContext#traceLinks()}): to the span of the instance's previous run (tagged
 * {@code durable.link=previous_run}) and to the senders of the signals
 * the step consumes ({@code durable.link=signal}). With OpenTelemetry these are span links; Brave
 * has none and keeps them as {@code links[n].*} tags.
 *
 * <p>Register it ahead of the application's other tracing handlers (it only takes {@link RunContext}s),
 * for example first in the {@code FirstMatchingCompositeObservationHandler} of the tracing handlers;
 * Spring Boot's starter registers it with that order. Without it, runs are still children of the
 * stored context (the default receiver handler reads it), without links.
 */
public class DurableTracingObservationHandler extends PropagatingReceiverTracingObservationHandler<RunContext> {

    /** The key of the tag each link carries, saying why it links. */
    public static final String LINK_TAG = "durable.link";

    private final Tracer tracer;

    public DurableTracingObservationHandler(Tracer tracer, Propagator propagator) {
        super(tracer, propagator);
        this.tracer = tracer;
    }

    @Override
    public boolean supportsContext(Observation.Context context) {
        return context instanceof RunContext;
    }

    @Override
    public Span.Builder customizeExtractedSpan(RunContext context, Span.Builder builder) {
        for (TraceLink link : context.traceLinks()) {
            String traceId = TraceContexts.traceId(link.traceContext());
            String spanId = TraceContexts.spanId(link.traceContext());
            if (traceId == null || spanId == null) {
                continue;
            }
            TraceContext linked = tracer.traceContextBuilder().traceId(traceId).spanId(spanId)
                    .sampled(TraceContexts.sampled(link.traceContext())).build();
            builder.addLink(new Link(linked, Map.of(LINK_TAG, link.reason().tag())));
        }
        return builder;
    }
}
