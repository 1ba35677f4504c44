package dev.durable.redis.internal;

import org.jspecify.annotations.Nullable;

/**
 * The wire form of a poke: {@code <length of origin>:<origin><queue>}. Origins and queue names may
 * hold any character, so the origin is length-prefixed rather than split on a separator.
 */
record PokeMessage(String origin, String queue) {

    String encode() {
        return origin.length() + ":" + origin + queue;
    }

    /** The message, or null when the payload is not one of ours. */
    static @Nullable PokeMessage decode(@Nullable String payload) {
        if (payload == null) {
            return null;
        }
        int colon = payload.indexOf(':');
        if (colon < 1 || colon > 9) {
            return null;
        }
        int length;
        try {
            length = Integer.parseInt(payload, 0, colon, 10);
        } catch (NumberFormatException e) {
            return null;
        }
        int queueStart = colon + 1 + length;
        if (length < 1 || queueStart >= payload.length()) {
            return null;
        }
        return new PokeMessage(payload.substring(colon + 1, queueStart), payload.substring(queueStart));
    }
}
