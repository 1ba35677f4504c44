package dev.durable.options;

import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * One option of an options class, declared once: its name (in messages, {@code toString} and, in
 * kebab case, the Spring Boot property), its type, its default, the rule its values keep and what it
 * is for. The options class keeps its declarations in an {@link OptionList}, which its builder, its
 * {@code toString}, its {@code equals} and every generic reader (the Spring Boot starter's
 * properties and their metadata) go through. Immutable; compared by identity.
 *
 * <p>An option whose value has a text form (a number, a boolean, a duration, a string, an enum
 * constant, or what its {@linkplain #readFrom parser} reads) can be set from configuration text; an
 * option made of options of its own (a maintenance task's: {@link OptionList#partsOf}) is set part
 * by part; any other (a connection factory, a codec, a registry) is set in code.
 */
public final class Option<T> {

    private static final Set<Class<?>> TEXT_TYPES = Set.of(String.class, Integer.class, Long.class, Double.class,
            Boolean.class, Duration.class);

    private final String name;
    private final Class<?> type;
    private final @Nullable T defaultValue;
    private final Check<T> check;
    private final String description;
    private final Function<? super T, @Nullable String> printer;
    private final @Nullable Function<String, T> parser;
    private final List<String> choices;

    private Option(String name, Class<?> type, @Nullable T defaultValue, Check<T> check, String description,
            Function<? super T, @Nullable String> printer, @Nullable Function<String, T> parser, List<String> choices) {
        this.name = name;
        this.type = type;
        this.defaultValue = defaultValue;
        this.check = check;
        this.description = description;
        this.printer = printer;
        this.parser = parser;
        this.choices = List.copyOf(choices);
    }

    /**
     * An option of {@code type} (a class, boxed for primitives: {@code Integer.class} for an
     * {@code int}) whose unset value is {@code defaultValue}, whose values keep {@code check}, and
     * which does what the one or two sentences of {@code description} say.
     */
    public static <T> Option<T> of(String name, Class<? super T> type, @Nullable T defaultValue, Check<T> check,
            String description) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(check, "check");
        if (description == null || description.isBlank()) {
            throw new IllegalArgumentException("option " + name + " needs a description");
        }
        if (defaultValue != null) {
            check.check(name, defaultValue);
        }
        return new Option<>(name, type, defaultValue, check, description, String::valueOf, null, List.of());
    }

    /** The same option, printed by {@code toString} as {@code printer} says; a null print leaves it out. */
    public Option<T> printedAs(Function<? super T, @Nullable String> printer) {
        return new Option<>(name, type, defaultValue, check, description, Objects.requireNonNull(printer), parser,
                choices);
    }

    /** The same option, read from text by {@code parser}, which knows the given {@code choices}. */
    public Option<T> readFrom(Function<String, T> parser, String... choices) {
        return new Option<>(name, type, defaultValue, check, description, printer, Objects.requireNonNull(parser),
                List.of(choices));
    }

    public String name() {
        return name;
    }

    /** The class of its values. */
    public Class<?> type() {
        return type;
    }

    /** Its value when none was set; null when it has none (a connection factory, a URL). */
    public @Nullable T defaultValue() {
        return defaultValue;
    }

    public String description() {
        return description;
    }

    /** The value, when it keeps the option's rule; otherwise an exception naming the option and the rule. */
    public T check(T value) {
        return check.check(name, value);
    }

    /** Whether a value can be written as text: see {@link Option}. */
    public boolean hasTextForm() {
        return parser != null || TEXT_TYPES.contains(type) || type.isEnum();
    }

    /** The value {@code text} stands for, checked; only for an option {@linkplain #readFrom read from} text. */
    public T parse(String text) {
        if (parser == null) {
            throw new IllegalStateException(name + " has no parser of its own");
        }
        return check(parser.apply(text));
    }

    /** Whether it has a parser of its own (otherwise a text form, if any, is its type's usual one). */
    public boolean hasParser() {
        return parser != null;
    }

    /** The texts its parser knows, for completion; empty when any text of its type will do. */
    public List<String> choices() {
        return choices;
    }

    /** How {@code toString} prints the value; null to leave it out. */
    @Nullable String print(T value) {
        return printer.apply(value);
    }

    @Override
    public String toString() {
        return name;
    }
}
