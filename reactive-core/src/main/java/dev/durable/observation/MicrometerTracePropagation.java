package dev.durable.observation;

import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationView;
import io.micrometer.tracing.Span;
import io.micrometer.tracing.TraceContext;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.handler.TracingObservationHandler;
import io.micrometer.tracing.propagation.Propagator;
import java.util.HashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.util.context.ContextView;

/**
 * {@link TracePropagation} over Micrometer Tracing (any bridge: OpenTelemetry or Brave): the span
 * of the caller's observation, else the tracer's current span, written as W3C headers by the
 * application's {@link Propagator} (a propagator that writes no {@code traceparent}, such as B3
 * alone, still gets one made from the span's ids, without tracestate).
 *
 * <p>Needs {@code io.micrometer:micrometer-tracing} on the class path (an optional dependency of
 * Durable: a tracing bridge brings it). Spring Boot's starter makes one when the application has
 * a {@link Tracer} and a {@link Propagator}.
 */
public final class MicrometerTracePropagation implements TracePropagation {

    /** Micrometer's {@code ObservationThreadLocalAccessor.KEY}: where Reactor contexts keep the current observation. */
    private static final String OBSERVATION_KEY = "micrometer.observation";

    private final Tracer tracer;
    private final Propagator propagator;

    public MicrometerTracePropagation(Tracer tracer, Propagator propagator) {
        if (tracer == null || propagator == null) {
            throw new IllegalArgumentException("tracer and propagator must not be null");
        }
        this.tracer = tracer;
        this.propagator = propagator;
    }

    @Override
    public @Nullable String capture(ContextView caller) {
        Object observation = caller.getOrDefault(OBSERVATION_KEY, null);
        Span span = observation instanceof ObservationView view ? spanOf(view) : null;
        return stored(span != null ? span : tracer.currentSpan());
    }

    @Override
    public @Nullable String capture(Observation run) {
        return stored(spanOf(run));
    }

    /** The span of an observation, or of its nearest ancestor that has one (an untraced observation in between). */
    private static @Nullable Span spanOf(ObservationView observation) {
        for (ObservationView view = observation; view != null; view = view.getContextView().getParentObservation()) {
            TracingObservationHandler.TracingContext tracing = view.getContextView()
                    .get(TracingObservationHandler.TracingContext.class);
            if (tracing != null && tracing.getSpan() != null) {
                return tracing.getSpan();
            }
        }
        return null;
    }

    private @Nullable String stored(@Nullable Span span) {
        if (span == null || span.isNoop()) {
            return null;
        }
        TraceContext context = span.context();
        Map<String, String> headers = new HashMap<>(4);
        propagator.inject(context, headers, Map::put);
        String traceparent = headers.get(TraceContexts.TRACEPARENT);
        if (traceparent == null) {
            Boolean sampled = context.sampled();
            return TraceContexts.traceparent(context.traceId(), context.spanId(), Boolean.TRUE.equals(sampled));
        }
        return TraceContexts.format(traceparent, headers.get(TraceContexts.TRACESTATE));
    }

    @Override
    public String toString() {
        return "MicrometerTracePropagation{" + tracer + "}";
    }
}
