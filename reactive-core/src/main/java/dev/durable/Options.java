package dev.durable;

import dev.durable.options.Checks;
import java.time.Duration;

/** The argument checks of the public values outside options classes; they are {@link Checks}'. */
final class Options {

    private Options() {
    }

    static <T> T requireNonNull(String option, T value) {
        return Checks.requireNonNull(option, value);
    }

    static Duration requirePositive(String option, Duration value) {
        return Checks.requirePositive(option, value);
    }

    static Duration requireNonNegative(String option, Duration value) {
        return Checks.requireNonNegative(option, value);
    }

    static int requireAtLeast(String option, int value, int min) {
        return Checks.requireAtLeast(option, value, min);
    }

    static String requireName(String option, String value) {
        return Checks.requireName(option, value);
    }

    static String requireIdentifier(String option, String value) {
        return Checks.requireIdentifier(option, value);
    }
}
