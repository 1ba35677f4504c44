package dev.durable.internal;

import dev.durable.JobRequest;
import org.jspecify.annotations.Nullable;

/**
 * The rule every key follows (concurrency, correlation, dedup keys, gate keys and limit
 * partitions): not blank, at most {@link JobRequest#MAX_KEY_BYTES} bytes in UTF-8, since what its
 * index holds is bytes, not characters. Shared by the request checks and the outcome builders.
 */
public final class Keys {

    private Keys() {
    }

    /** Why a key is refused (blank, or longer than {@link JobRequest#MAX_KEY_BYTES} in UTF-8), or null. */
    public static @Nullable String problem(@Nullable String value) {
        if (value == null || value.isBlank()) {
            return "must not be blank, was " + (value == null ? "null" : "'" + value + "'");
        }
        int bytes = utf8Length(value);
        if (bytes > JobRequest.MAX_KEY_BYTES) {
            return "must be at most " + JobRequest.MAX_KEY_BYTES + " bytes in UTF-8, was " + bytes + " bytes ("
                    + value.length() + " characters) starting '" + value.substring(0, 32) + "...'";
        }
        return null;
    }

    /** The length of {@code value} in UTF-8 (a lone surrogate counts as the one byte '?' it becomes), 0 for null. */
    public static int utf8Length(@Nullable String value) {
        if (value == null) {
            return 0;
        }
        int bytes = 0;
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < value.length()
                    && Character.isLowSurrogate(value.charAt(i + 1))) {
                bytes += 4;
                i++;
            } else if (Character.isSurrogate(c)) {
                bytes += 1;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }
}
