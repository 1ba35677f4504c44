package dev.durable.options;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.StringJoiner;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The options of one options class, in the order they are declared and printed. The class declares
 * each option once, with {@link #add}, in its static initializer; once the list is first read, it
 * takes no more.
 *
 * <pre>{@code
 * private static final OptionList<QueueOptions> OPTIONS = new OptionList<>("QueueOptions");
 * static final Option<Integer> CONCURRENCY = OPTIONS.add("concurrency", Integer.class, DEFAULT_CONCURRENCY,
 *         Checks.atLeast(1), "Runs at once (the executor's width).");
 * }</pre>
 *
 * <p>A list built with a {@code create} and a {@code valuesOf} function can take apart and put
 * together the options objects it describes ({@link #with}); an option of another class whose values
 * are such objects is declared {@linkplain #add(Option, OptionList) with those parts}, and can then be
 * set part by part (from {@code durable.reaper.interval}, say).
 */
public final class OptionList<O> {

    private final String owner;
    private final List<Option<?>> options = new ArrayList<>();
    private final Map<Option<?>, OptionList<?>> parts = new IdentityHashMap<>();
    private final @Nullable Function<OptionValues, O> create;
    private final @Nullable Function<O, OptionValues> valuesOf;
    private volatile boolean read;

    /** The options of the class named {@code owner} (the name {@link #print} starts with). */
    public OptionList(String owner) {
        this.owner = owner;
        this.create = null;
        this.valuesOf = null;
    }

    /** As {@link #OptionList(String)}, for a class made from its values and giving them back. */
    public OptionList(String owner, Function<OptionValues, O> create, Function<O, OptionValues> valuesOf) {
        this.owner = owner;
        this.create = create;
        this.valuesOf = valuesOf;
    }

    /** Declares {@code option} as the next of this list. */
    public <T> Option<T> add(Option<T> option) {
        if (read) {
            throw new IllegalStateException(owner + "'s options are read already: declare " + option.name()
                    + " with the others");
        }
        for (Option<?> declared : options) {
            if (declared.name().equals(option.name())) {
                throw new IllegalArgumentException(owner + " declares option " + option.name() + " twice");
            }
        }
        options.add(option);
        return option;
    }

    /** Declares {@code option}, whose values are made of the options of {@code parts}, as the next of this list. */
    public <T> Option<T> add(Option<T> option, OptionList<T> parts) {
        if (parts.create == null) {
            throw new IllegalArgumentException(parts.owner + " is not made of its options");
        }
        add(option);
        this.parts.put(option, parts);
        return option;
    }

    /** Declares the next option: short for {@code add(Option.of(...))}. */
    public <T> Option<T> add(String name, Class<? super T> type, @Nullable T defaultValue, Check<T> check,
            String description) {
        return add(Option.of(name, type, defaultValue, check, description));
    }

    /** Every option, in declaration order. */
    public List<Option<?>> options() {
        read = true;
        return Collections.unmodifiableList(options);
    }

    /** The options the values of {@code option} are made of, or null for an option whose values are one piece. */
    @SuppressWarnings("unchecked")
    public <T> @Nullable OptionList<T> partsOf(Option<T> option) {
        read = true;
        return (OptionList<T>) parts.get(option);
    }

    /** {@code values} with {@code option} set to {@code value}, checked; an option of another list is refused. */
    public <T> OptionValues set(OptionValues values, Option<T> option, T value) {
        requireOwn(option);
        return values.with(option, value);
    }

    /** The value of {@code option} in {@code options}: for a list that can take its objects apart. */
    public <T> T get(O options, Option<T> option) {
        requireOwn(option);
        return valuesOf(options).get(option);
    }

    /** {@code options} with {@code option} set to {@code value}: for a list that can put its objects together. */
    public <T> O with(O options, Option<T> option, T value) {
        OptionValues changed = set(valuesOf(options), option, value);
        return Objects.requireNonNull(create).apply(changed);
    }

    private OptionValues valuesOf(O options) {
        if (create == null || valuesOf == null) {
            throw new IllegalStateException(owner + " is not made of its options");
        }
        return valuesOf.apply(options);
    }

    /** {@code Owner{name=value, ...}}: every option with a value, printed as it declares. */
    public String print(OptionValues values) {
        return owner + "{" + fields(values) + "}";
    }

    /** {@code name=value, ...} for every option with a value, printed as it declares. */
    public String fields(OptionValues values) {
        read = true;
        StringJoiner out = new StringJoiner(", ");
        for (Option<?> option : options) {
            String printed = printed(values, option);
            if (printed != null) {
                out.add(option.name() + "=" + printed);
            }
        }
        return out.toString();
    }

    private static <T> @Nullable String printed(OptionValues values, Option<T> option) {
        T value = values.get(option);
        return value == null ? null : option.print(value);
    }

    private void requireOwn(Option<?> option) {
        read = true;
        for (Option<?> declared : options) {
            if (declared == option) {
                return;
            }
        }
        throw new IllegalArgumentException(option.name() + " is not an option of " + owner);
    }

    @Override
    public String toString() {
        return owner + options;
    }
}
