package dev.durable.options;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The values of an options object, by {@link Option}: an option with no value here has its default.
 * Immutable; {@link #with} checks the value and returns a copy. Only values other than the default
 * are kept, so two value sets are equal when every option has the same value in both.
 */
public final class OptionValues {

    private static final OptionValues NONE = new OptionValues(Map.of());

    private final Map<Option<?>, Object> values;

    private OptionValues(Map<Option<?>, Object> values) {
        this.values = values;
    }

    /** No option set: every option has its default. */
    public static OptionValues none() {
        return NONE;
    }

    /** The value of {@code option}: the one set, else its default (null only for an option without one). */
    @SuppressWarnings("unchecked")
    public <T> T get(Option<T> option) {
        Object value = values.get(option);
        return value != null ? (T) value : option.defaultValue();
    }

    /** Whether {@code option} has a value other than its default. */
    public boolean isSet(Option<?> option) {
        return values.containsKey(option);
    }

    /** These values with {@code option} set to {@code value}, once the option's check passed it. */
    public <T> OptionValues with(Option<T> option, T value) {
        T checked = option.check(value);
        Map<Option<?>, Object> changed = new HashMap<>(values);
        if (Objects.equals(checked, option.defaultValue())) {
            changed.remove(option);
        } else {
            changed.put(option, checked);
        }
        return new OptionValues(Collections.unmodifiableMap(changed));
    }

    /** These values with {@code option} back at its default. */
    public OptionValues without(Option<?> option) {
        if (!values.containsKey(option)) {
            return this;
        }
        Map<Option<?>, Object> changed = new HashMap<>(values);
        changed.remove(option);
        return new OptionValues(Collections.unmodifiableMap(changed));
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof OptionValues that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    /** The names of the options set, not their values (a URL may hold a password): see {@link OptionList#print}. */
    @Override
    public String toString() {
        return "OptionValues" + values.keySet();
    }
}
