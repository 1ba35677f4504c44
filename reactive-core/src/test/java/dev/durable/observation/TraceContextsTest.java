package dev.durable.observation;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class TraceContextsTest {

    private static final String PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    @Test
    void theFirstSpaceSeparatesTraceparentFromTracestate() {
        String stored = TraceContexts.format(PARENT, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7 x");
        assertThat(stored).isEqualTo(PARENT + " congo=t61rcWkgMzE,rojo=00f067aa0ba902b7 x");
        assertThat(TraceContexts.header(stored, "traceparent")).isEqualTo(PARENT);
        assertThat(TraceContexts.header(stored, "tracestate")).isEqualTo("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7 x");
        assertThat(TraceContexts.format(PARENT, null)).isEqualTo(PARENT);
        assertThat(TraceContexts.format(PARENT, " ")).isEqualTo(PARENT);
        assertThat(TraceContexts.header(PARENT, "tracestate")).isNull();
        assertThat(TraceContexts.header(null, "traceparent")).isNull();
        assertThat(TraceContexts.header(PARENT, "baggage")).isNull();
    }

    @Test
    void idsAndSamplingComeOutOfTheTraceparent() {
        assertThat(TraceContexts.traceId(PARENT)).isEqualTo("4bf92f3577b34da6a3ce929d0e0e4736");
        assertThat(TraceContexts.spanId(PARENT)).isEqualTo("00f067aa0ba902b7");
        assertThat(TraceContexts.sampled(PARENT)).isTrue();
        assertThat(TraceContexts.sampled(PARENT.substring(0, 53) + "00")).isFalse();
        assertThat(TraceContexts.traceId("garbage")).isNull();
        assertThat(TraceContexts.spanId(null)).isNull();
    }

    @Test
    void aPropagatorThatReadsB3OnlyFindsTheSameIds() {
        assertThat(TraceContexts.header(PARENT, "b3")).isEqualTo("4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1");
        assertThat(TraceContexts.header(PARENT, "X-B3-TraceId")).isEqualTo("4bf92f3577b34da6a3ce929d0e0e4736");
        assertThat(TraceContexts.header(PARENT, "x-b3-spanid")).isEqualTo("00f067aa0ba902b7");
        assertThat(TraceContexts.header(PARENT, "X-B3-Sampled")).isEqualTo("1");
    }

    @Test
    void aTraceparentIsMadeFromIdsWhenThePropagatorWritesNone() {
        assertThat(TraceContexts.traceparent("a3ce929d0e0e4736", "f067aa0ba902b7", false))
                .isEqualTo("00-0000000000000000a3ce929d0e0e4736-00f067aa0ba902b7-00");
    }
}
