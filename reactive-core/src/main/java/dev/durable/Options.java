package dev.durable;

import java.time.Duration;
import java.util.regex.Pattern;

/** The argument checks shared by the option builders; each message names the option and rule. */
final class Options {

    private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

    private Options() {
    }

    static <T> T requireNonNull(String option, T value) {
        if (value == null) {
            throw new IllegalArgumentException(option + " must not be null");
        }
        return value;
    }

    static Duration requirePositive(String option, Duration value) {
        requireNonNull(option, value);
        if (value.isNegative() || value.isZero()) {
            throw new IllegalArgumentException(option + " must be positive, was " + value);
        }
        return value;
    }

    static Duration requireNonNegative(String option, Duration value) {
        requireNonNull(option, value);
        if (value.isNegative()) {
            throw new IllegalArgumentException(option + " must not be negative, was " + value);
        }
        return value;
    }

    static int requireAtLeast(String option, int value, int min) {
        if (value < min) {
            throw new IllegalArgumentException(option + " must be at least " + min + ", was " + value);
        }
        return value;
    }

    static String requireName(String option, String value) {
        requireNonNull(option, value);
        if (value.isBlank() || value.length() > 128 || !value.strip().equals(value)) {
            throw new IllegalArgumentException(option + " must be 1 to 128 characters with no"
                    + " leading or trailing blanks, was '" + value + "'");
        }
        return value;
    }

    /** A SQL identifier we can quote safely: lower case letters, digits and underscores. */
    static String requireIdentifier(String option, String value) {
        requireNonNull(option, value);
        if (!IDENTIFIER.matcher(value).matches()) {
            throw new IllegalArgumentException(option + " must be a lower-case SQL identifier"
                    + " ([a-z_][a-z0-9_]*, at most 63 characters), was '" + value + "'");
        }
        return value;
    }
}
