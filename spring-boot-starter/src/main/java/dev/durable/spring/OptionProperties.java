package dev.durable.spring;

import dev.durable.EngineOptions;
import dev.durable.QueueOptions;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.bind.BindResult;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;

/**
 * The {@code durable.*} properties of the engine and its queues, derived from their option lists
 * ({@link EngineOptions#options()}, {@link QueueOptions#options()}): no option is declared here.
 * Each option with a text form is the property of its name in kebab case ({@code leaseTtl} is
 * {@code durable.lease-ttl}, bound with Spring's relaxed binding and conversions, so
 * {@code durable.leaseTtl} and {@code DURABLE_LEASETTL} work too); an option made of parts (a
 * maintenance task's) is one property per part ({@code durable.reaper.batch-size}); a queue's are
 * under {@code durable.queues.<name>.*}. Options whose values are objects (the connection factory,
 * the codec, registries, schedulers, the limiter, observation conventions) and the named limits are
 * set in code, by a bean or a {@link DurableEngineCustomizer}.
 *
 * <p>A value Spring cannot convert fails the start with Boot's own report naming the property; a
 * value the option refuses fails it with the option's rule, prefixed with the property.
 */
final class OptionProperties {

    static final String PREFIX = "durable";
    static final String QUEUES = PREFIX + ".queues";
    /** The queue whose properties the metadata lists for completion: any other name takes the same. */
    static final String EXAMPLE_QUEUE = DurableProperties.DEFAULT_QUEUE;

    /** Engine options the starter sets itself: the database comes from {@link DurableProperties#url()} or a bean. */
    private static final Set<String> SET_BY_THE_STARTER = Set.of("url");
    private static final Set<String> NONE = Set.of();

    private OptionProperties() {
    }

    /** Where a bound value goes: an options builder's {@code set}. */
    interface Target {
        <T> void set(Option<T> option, T value);
    }

    /** The engine options set by {@code durable.*} properties, queues aside. */
    static EngineOptions.Builder engineOptions(Binder binder) {
        EngineOptions.Builder options = EngineOptions.builder();
        bind(binder, ConfigurationPropertyName.of(PREFIX), EngineOptions.options(), SET_BY_THE_STARTER, new Target() {
            @Override
            public <T> void set(Option<T> option, T value) {
                options.set(option, value);
            }
        });
        return options;
    }

    /** The queues configured under {@code durable.queues.<name>.*}, by name, in the order bound. */
    static Map<String, QueueOptions> queues(Binder binder) {
        Map<String, QueueOptions> queues = new LinkedHashMap<>();
        for (String name : binder.bind(QUEUES, Bindable.mapOf(String.class, Object.class)).orElse(Map.of()).keySet()) {
            QueueOptions.Builder queue = QueueOptions.builder(name);
            bind(binder, queueProperty(name), QueueOptions.options(), NONE, new Target() {
                @Override
                public <T> void set(Option<T> option, T value) {
                    queue.set(option, value);
                }
            });
            queues.put(name, queue.build());
        }
        return queues;
    }

    /**
     * {@code durable.queues.<name>}: a name with a dot is written {@code durable.queues[my.queue]},
     * any other as a plain element (upper case and all, as Spring reads it from a file or the environment).
     */
    private static ConfigurationPropertyName queueProperty(String name) {
        ConfigurationPropertyName queues = ConfigurationPropertyName.of(QUEUES);
        return name.contains(".") ? queues.append("[" + name + "]")
                : queues.append(ConfigurationPropertyName.adapt(name, '.'));
    }

    private static <O> void bind(Binder binder, ConfigurationPropertyName prefix, OptionList<O> list, Set<String> skipped,
            Target target) {
        for (Option<?> option : list.options()) {
            if (!skipped.contains(option.name())) {
                bindOption(binder, prefix, list, option, target);
            }
        }
    }

    private static <O, T> void bindOption(Binder binder, ConfigurationPropertyName prefix, OptionList<O> list,
            Option<T> option, Target target) {
        ConfigurationPropertyName property = prefix.append(kebab(option.name()));
        OptionList<T> parts = list.partsOf(option);
        if (parts != null) {
            T whole = option.defaultValue();
            boolean bound = false;
            for (Option<?> part : parts.options()) {
                BindResult<T> changed = bindPart(binder, property, parts, whole, part);
                if (changed.isBound()) {
                    whole = changed.get();
                    bound = true;
                }
            }
            if (bound) {
                target.set(option, whole);
            }
        } else if (option.hasTextForm()) {
            bindValue(binder, property, option).ifBound(value -> target.set(option, value));
        }
    }

    private static <T, P> BindResult<T> bindPart(Binder binder, ConfigurationPropertyName property, OptionList<T> parts,
            T whole, Option<P> part) {
        ConfigurationPropertyName partProperty = property.append(kebab(part.name()));
        return bindValue(binder, partProperty, part).map(value -> {
            try {
                return parts.with(whole, part, value);
            } catch (IllegalArgumentException broken) {
                throw invalid(partProperty, broken);
            }
        });
    }

    /** The value of {@code property} for {@code option}, converted by Spring (or its parser) and checked. */
    @SuppressWarnings("unchecked")
    private static <T> BindResult<T> bindValue(Binder binder, ConfigurationPropertyName property, Option<T> option) {
        BindResult<T> value = option.hasParser()
                ? binder.bind(property, Bindable.of(String.class)).map(text -> parse(property, option, text))
                : binder.bind(property, Bindable.of((Class<T>) option.type()));
        return value.map(bound -> {
            try {
                return option.check(bound);
            } catch (IllegalArgumentException broken) {
                throw invalid(property, broken);
            }
        });
    }

    private static <T> T parse(ConfigurationPropertyName property, Option<T> option, String text) {
        try {
            return option.parse(text);
        } catch (IllegalArgumentException broken) {
            throw invalid(property, broken);
        }
    }

    /** The option's own message, which names the rule, after the property that set the value. */
    private static IllegalArgumentException invalid(ConfigurationPropertyName property, IllegalArgumentException broken) {
        return new IllegalArgumentException(property + ": " + broken.getMessage(), broken);
    }

    /** {@code leaseTtl} as a property: {@code lease-ttl}. */
    static String kebab(String name) {
        StringBuilder out = new StringBuilder();
        for (char c : name.toCharArray()) {
            if (Character.isUpperCase(c)) {
                out.append('-').append(Character.toLowerCase(c));
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }

    /** One property as its metadata describes it; {@code source} is the options class it comes from. */
    record Property(String name, String type, String description, @Nullable Object defaultValue, List<String> choices,
            String source) {
    }

    /**
     * Every property derived from the option lists, as the configuration metadata lists them (a
     * queue's under {@link #EXAMPLE_QUEUE}); the starter's test writes them into
     * {@code META-INF/additional-spring-configuration-metadata.json} and fails when that file is behind.
     */
    static List<Property> properties() {
        List<Property> properties = new ArrayList<>();
        properties.add(new Property(QUEUES, "java.util.Map<java.lang.String,java.lang.Object>", "The queues this"
                + " engine runs, by name, each with the options listed under " + QUEUES + "." + EXAMPLE_QUEUE + ".*;"
                + " with none configured and none named by a definition, one queue: " + EXAMPLE_QUEUE + ".", null,
                List.of(), EngineOptions.class.getName()));
        describe(PREFIX, EngineOptions.class, EngineOptions.options(), SET_BY_THE_STARTER, properties);
        describe(QUEUES + "." + EXAMPLE_QUEUE, QueueOptions.class, QueueOptions.options(), NONE, properties);
        return properties;
    }

    private static <O> void describe(String prefix, Class<O> source, OptionList<O> list, Set<String> skipped,
            List<Property> out) {
        for (Option<?> option : list.options()) {
            if (!skipped.contains(option.name())) {
                describeOption(prefix, source, list, option, out);
            }
        }
    }

    private static <O, T> void describeOption(String prefix, Class<O> source, OptionList<O> list, Option<T> option,
            List<Property> out) {
        String name = prefix + "." + kebab(option.name());
        OptionList<T> parts = list.partsOf(option);
        if (parts != null) {
            T defaults = option.defaultValue();
            for (Option<?> part : parts.options()) {
                describePart(name, source, parts, defaults, part, option.description(), out);
            }
        } else if (option.hasTextForm()) {
            out.add(new Property(name, typeOf(option), option.description(), text(option.defaultValue()),
                    option.choices(), source.getName()));
        }
    }

    private static <T, P> void describePart(String prefix, Class<?> source, OptionList<T> parts, @Nullable T defaults,
            Option<P> part, String whole, List<Property> out) {
        P defaultValue = defaults == null ? part.defaultValue() : parts.get(defaults, part);
        out.add(new Property(prefix + "." + kebab(part.name()), typeOf(part), whole + " " + part.description(),
                text(defaultValue), part.choices(), source.getName()));
    }

    private static String typeOf(Option<?> option) {
        return option.hasParser() ? String.class.getName() : option.type().getName();
    }

    /** A default as the metadata shows it: a duration in Spring's short form, an enum in kebab case. */
    private static @Nullable Object text(@Nullable Object value) {
        if (value == null || value instanceof Number || value instanceof Boolean) {
            return value;
        }
        if (value instanceof Duration duration) {
            return shortForm(duration);
        }
        if (value instanceof Enum<?> constant) {
            return constant.name().toLowerCase(Locale.ROOT).replace('_', '-');
        }
        return value.toString();
    }

    private static String shortForm(Duration duration) {
        long millis = duration.toMillis();
        if (millis % 1000 != 0) {
            return millis + "ms";
        }
        long seconds = millis / 1000;
        if (seconds % 86400 == 0 && seconds > 0) {
            return seconds / 86400 + "d";
        }
        if (seconds % 3600 == 0 && seconds > 0) {
            return seconds / 3600 + "h";
        }
        if (seconds % 60 == 0 && seconds > 0) {
            return seconds / 60 + "m";
        }
        return seconds + "s";
    }
}
