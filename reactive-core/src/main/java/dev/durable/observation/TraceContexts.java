package dev.durable.observation;

import org.jspecify.annotations.Nullable;

/**
 * The stored form of a W3C trace context: {@code <traceparent>} or {@code <traceparent> <tracestate>}.
 * A traceparent ({@code 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>}) holds no space, so the
 * first space separates the two headers whatever the tracestate holds.
 */
public final class TraceContexts {

    public static final String TRACEPARENT = "traceparent";
    public static final String TRACESTATE = "tracestate";

    private TraceContexts() {
    }

    /** The stored form of the two headers (an empty tracestate is left out). */
    public static String format(String traceparent, @Nullable String tracestate) {
        return tracestate == null || tracestate.isBlank() ? traceparent : traceparent + " " + tracestate;
    }

    /** A traceparent of version 00 for these ids (left-padded with zeros: a 64-bit trace id is widened). */
    public static String traceparent(String traceId, String spanId, boolean sampled) {
        return "00-" + pad(traceId, 32) + "-" + pad(spanId, 16) + (sampled ? "-01" : "-00");
    }

    /**
     * One header of a stored context: {@link #TRACEPARENT} or {@link #TRACESTATE}; and, for an
     * application whose propagator reads B3 only, the same ids as B3 headers ({@code b3},
     * {@code X-B3-TraceId}, {@code X-B3-SpanId}, {@code X-B3-Sampled}); null for any other.
     */
    public static @Nullable String header(@Nullable String stored, String name) {
        if (stored == null) {
            return null;
        }
        int space = stored.indexOf(' ');
        if (TRACEPARENT.equalsIgnoreCase(name)) {
            return space < 0 ? stored : stored.substring(0, space);
        }
        if (TRACESTATE.equalsIgnoreCase(name)) {
            return space < 0 ? null : stored.substring(space + 1);
        }
        String traceId = traceId(stored);
        String spanId = spanId(stored);
        if (traceId == null || spanId == null) {
            return null;
        }
        String sampled = sampled(stored) ? "1" : "0";
        if ("b3".equalsIgnoreCase(name)) {
            return traceId + "-" + spanId + "-" + sampled;
        }
        if ("X-B3-TraceId".equalsIgnoreCase(name)) {
            return traceId;
        }
        if ("X-B3-SpanId".equalsIgnoreCase(name)) {
            return spanId;
        }
        if ("X-B3-Sampled".equalsIgnoreCase(name)) {
            return sampled;
        }
        return null;
    }

    /** The trace id of a stored context (32 hex digits), or null when it is not a well-formed traceparent. */
    public static @Nullable String traceId(@Nullable String stored) {
        String parent = header(stored, TRACEPARENT);
        return parent == null || parent.length() < 55 || parent.charAt(2) != '-' ? null : parent.substring(3, 35);
    }

    /** The span id of a stored context (16 hex digits), or null when it is not a well-formed traceparent. */
    public static @Nullable String spanId(@Nullable String stored) {
        String parent = header(stored, TRACEPARENT);
        return parent == null || parent.length() < 55 || parent.charAt(35) != '-' ? null : parent.substring(36, 52);
    }

    /** Whether a stored context says its trace is sampled. */
    public static boolean sampled(@Nullable String stored) {
        String parent = header(stored, TRACEPARENT);
        return parent != null && parent.length() >= 55 && (Character.digit(parent.charAt(54), 16) & 1) == 1;
    }

    private static String pad(String hex, int length) {
        return hex.length() >= length ? hex : "0".repeat(length - hex.length()) + hex;
    }
}
