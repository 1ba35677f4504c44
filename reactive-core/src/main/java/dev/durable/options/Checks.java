package dev.durable.options;

import java.time.Duration;
import java.util.regex.Pattern;

/**
 * The checks options share. Each failure is an {@link IllegalArgumentException} whose message
 * names the option, the rule and the value ({@code "leaseTtl must be positive, was PT0S"}); null is
 * refused by every check.
 */
public final class Checks {

    private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

    private Checks() {
    }

    /** Any value but null. */
    public static <T> Check<T> notNull() {
        return Checks::requireNonNull;
    }

    /** A duration above zero. */
    public static Check<Duration> positive() {
        return Checks::requirePositive;
    }

    /** A duration of zero or more. */
    public static Check<Duration> nonNegative() {
        return Checks::requireNonNegative;
    }

    /** A number of at least {@code min}. */
    public static Check<Integer> atLeast(int min) {
        return (option, value) -> requireAtLeast(option, requireNonNull(option, value), min);
    }

    /** A lower-case SQL identifier, which can be quoted safely. */
    public static Check<String> identifier() {
        return Checks::requireIdentifier;
    }

    public static <T> T requireNonNull(String option, T value) {
        if (value == null) {
            throw new IllegalArgumentException(option + " must not be null");
        }
        return value;
    }

    public static Duration requirePositive(String option, Duration value) {
        requireNonNull(option, value);
        if (value.isNegative() || value.isZero()) {
            throw new IllegalArgumentException(option + " must be positive, was " + value);
        }
        return value;
    }

    public static Duration requireNonNegative(String option, Duration value) {
        requireNonNull(option, value);
        if (value.isNegative()) {
            throw new IllegalArgumentException(option + " must not be negative, was " + value);
        }
        return value;
    }

    public static int requireAtLeast(String option, int value, int min) {
        if (value < min) {
            throw new IllegalArgumentException(option + " must be at least " + min + ", was " + value);
        }
        return value;
    }

    /** 1 to 128 characters with no leading or trailing blanks. */
    public static String requireName(String option, String value) {
        requireNonNull(option, value);
        if (value.isBlank() || value.length() > 128 || !value.strip().equals(value)) {
            throw new IllegalArgumentException(option + " must be 1 to 128 characters with no"
                    + " leading or trailing blanks, was '" + value + "'");
        }
        return value;
    }

    /** A SQL identifier we can quote safely: lower case letters, digits and underscores. */
    public static String requireIdentifier(String option, String value) {
        requireNonNull(option, value);
        if (!IDENTIFIER.matcher(value).matches()) {
            throw new IllegalArgumentException(option + " must be a lower-case SQL identifier"
                    + " ([a-z_][a-z0-9_]*, at most 63 characters), was '" + value + "'");
        }
        return value;
    }
}
