package dev.durable.options;

/**
 * The rule an option's value must keep. A check returns the value when it keeps the rule and
 * otherwise throws, naming the option and the rule ({@link IllegalArgumentException} for the
 * checks of {@link Checks}; an options class may throw its own type, as the sync scheduler's does).
 */
@FunctionalInterface
public interface Check<T> {

    T check(String option, T value);
}
