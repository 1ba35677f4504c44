package dev.durable.spring;

import dev.durable.observation.DurableTracingObservationHandler;
import dev.durable.observation.MicrometerTracePropagation;
import dev.durable.observation.TracePropagation;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.core.annotation.Order;

/**
 * Trace context that follows each instance, when the application has a Micrometer Tracing bridge
 * (a {@link Tracer} and a {@link Propagator} bean, as Boot makes for Brave or OpenTelemetry): the
 * engine stores the W3C context of whoever inserts or signals ({@link MicrometerTracePropagation},
 * taken by {@link DurableAutoConfiguration}), and each run's span is a child of it, linked to the
 * instance's previous run and to the senders of the signals it consumes
 * ({@link DurableTracingObservationHandler}). Off with {@code durable.tracing.enabled=false}.
 */
@AutoConfiguration(before = DurableAutoConfiguration.class, afterName = {
        "org.springframework.boot.micrometer.tracing.autoconfigure.MicrometerTracingAutoConfiguration",
        "org.springframework.boot.micrometer.tracing.brave.autoconfigure.BraveAutoConfiguration",
        "org.springframework.boot.micrometer.tracing.opentelemetry.autoconfigure.OpenTelemetryTracingAutoConfiguration",
        "org.springframework.boot.actuate.autoconfigure.tracing.MicrometerTracingAutoConfiguration",
        "org.springframework.boot.actuate.autoconfigure.tracing.BraveAutoConfiguration",
        "org.springframework.boot.actuate.autoconfigure.tracing.OpenTelemetryTracingAutoConfiguration",
        "org.springframework.boot.actuate.autoconfigure.tracing.OpenTelemetryAutoConfiguration"})
@ConditionalOnClass({Tracer.class, TracePropagation.class})
@ConditionalOnBean({Tracer.class, Propagator.class})
@ConditionalOnProperty(prefix = "durable.tracing", name = "enabled", matchIfMissing = true)
public class DurableTracing {

    /**
     * Ahead of Boot's sender (1000), receiver (2000) and default tracing handlers in the group Boot
     * makes of them, where the first handler that supports a context handles it: this one only
     * supports Durable's runs.
     */
    public static final int HANDLER_ORDER = 500;

    @Bean
    @ConditionalOnMissingBean
    public TracePropagation durableTracePropagation(Tracer tracer, Propagator propagator) {
        return new MicrometerTracePropagation(tracer, propagator);
    }

    @Bean
    @Order(HANDLER_ORDER)
    @ConditionalOnMissingBean
    public DurableTracingObservationHandler durableTracingObservationHandler(Tracer tracer, Propagator propagator) {
        return new DurableTracingObservationHandler(tracer, propagator);
    }
}
