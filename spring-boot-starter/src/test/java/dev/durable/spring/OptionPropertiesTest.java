package dev.durable.spring;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.DurableEngine;
import dev.durable.EngineOptions;
import dev.durable.Maintenance;
import dev.durable.QueueOptions;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.SystemEnvironmentPropertySource;

/**
 * Every engine and queue option with a text form is a {@code durable.*} property, bound with
 * Spring's relaxed binding, and listed in the starter's configuration metadata; the other options
 * are the objects a bean or a customizer gives.
 */
class OptionPropertiesTest {

    private static final String NOWHERE = "r2dbc:postgresql://app:secret@localhost:1/app";

    /** Set in code only: objects (a bean or a customizer gives them) and the named collections. */
    private static final Set<String> ENGINE_OPTIONS_IN_CODE = Set.of("connectionFactory", "url", "queues", "codec",
            "handlerScheduler", "meterRegistry", "observationRegistry", "runObservationConvention", "tracePropagation",
            "gates", "rateLimits", "windows", "limiter");
    private static final Set<String> QUEUE_OPTIONS_IN_CODE = Set.of("fairness");

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(DurableAutoConfiguration.class))
            .withPropertyValues("durable.auto-startup=false", "durable.url=" + NOWHERE);

    @Test
    void everyEngineAndQueueOptionIsSettableFromPropertiesAndInTheMetadata() throws Exception {
        Set<String> metadata = metadataNames();
        Map<String, String> properties = new LinkedHashMap<>();
        List<Runnable> checks = new ArrayList<>();
        EngineOptions[] built = new EngineOptions[1];
        Set<String> inCode = new HashSet<>();
        for (Option<?> option : EngineOptions.options().options()) {
            String property = "durable." + OptionProperties.kebab(option.name());
            if (!plan(EngineOptions.options(), option, property, () -> built[0], properties, checks)) {
                inCode.add(option.name());
            }
        }
        assertThat(inCode).as("engine options only code can set").isEqualTo(ENGINE_OPTIONS_IN_CODE);
        Set<String> queueInCode = new HashSet<>();
        for (Option<?> option : QueueOptions.options().options()) {
            String property = "durable.queues.mail." + OptionProperties.kebab(option.name());
            if (!plan(QueueOptions.options(), option, property, () -> built[0].queues().get("mail"), properties,
                    checks)) {
                queueInCode.add(option.name());
            }
        }
        assertThat(queueInCode).as("queue options only code can set").isEqualTo(QUEUE_OPTIONS_IN_CODE);

        for (String property : properties.keySet()) {
            assertThat(metadata).as("the metadata lists " + property)
                    .contains(property.replace("durable.queues.mail.", "durable.queues." + OptionProperties.EXAMPLE_QUEUE + "."));
        }
        List<String> pairs = new ArrayList<>();
        properties.forEach((property, value) -> pairs.add(property + "=" + value));
        runner.withPropertyValues(pairs.toArray(String[]::new)).run(context -> {
            assertThat(context).hasNotFailed();
            built[0] = context.getBean(DurableEngine.class).options();
            checks.forEach(Runnable::run);
        });
    }

    /**
     * Plans a value other than the default for {@code option} (each part, for a task's) and the check
     * that the built options hold it; false for an option without a text form.
     */
    private static <O, T> boolean plan(OptionList<O> list, Option<T> option, String property,
            java.util.function.Supplier<Object> owner, Map<String, String> properties, List<Runnable> checks) {
        OptionList<T> parts = list.partsOf(option);
        if (parts != null) {
            for (Option<?> part : parts.options()) {
                planPart(parts, option, part, property, owner, properties, checks);
            }
            return true;
        }
        if (!option.hasTextForm() || option.name().equals("url")) {
            return false; // durable.url is the starter's own (DurableProperties), tested with the connection
        }
        String text = other(option, option.defaultValue());
        properties.put(property, text);
        Object value = option.hasParser() ? option.parse(text) : parsed(text);
        // Factories read from text compare by what they print.
        checks.add(() -> assertThat(String.valueOf(accessor(owner.get(), option.name())))
                .as(property).isEqualTo(String.valueOf(value)));
        return true;
    }

    private static <T, P> void planPart(OptionList<T> parts, Option<T> whole, Option<P> part, String property,
            java.util.function.Supplier<Object> owner, Map<String, String> properties, List<Runnable> checks) {
        P defaultValue = parts.get(whole.defaultValue(), part);
        String text = other(part, defaultValue);
        String name = property + "." + OptionProperties.kebab(part.name());
        properties.put(name, text);
        checks.add(() -> assertThat(accessor(accessor(owner.get(), whole.name()), part.name()))
                .as(name).isEqualTo(parsed(text)));
    }

    /** The text of a value other than {@code current} that keeps the option's rule and the rules across options. */
    private static String other(Option<?> option, Object current) {
        if (option.hasParser()) {
            return option.choices().stream().filter(choice -> !choice.equals(String.valueOf(current)))
                    .findFirst().orElseThrow();
        }
        if (current instanceof Duration duration) {
            return duration.plusSeconds(1).toMillis() + "ms";
        }
        if (current instanceof Integer number) {
            return String.valueOf(number + 1);
        }
        if (current instanceof Boolean flag) {
            return String.valueOf(!flag);
        }
        if (current instanceof String text) {
            return text + "_x";
        }
        throw new AssertionError(option.name() + ": no other value planned for " + current);
    }

    /** The value {@link #other} wrote. */
    private static Object parsed(String text) {
        if (text.endsWith("ms")) {
            return Duration.ofMillis(Long.parseLong(text.substring(0, text.length() - 2)));
        }
        if (text.matches("\\d+")) {
            return Integer.valueOf(text);
        }
        if (text.equals("true") || text.equals("false")) {
            return Boolean.valueOf(text);
        }
        return text;
    }

    private static Object accessor(Object owner, String name) {
        try {
            return owner.getClass().getMethod(name).invoke(owner);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(owner.getClass().getSimpleName() + " has no accessor " + name, e);
        }
    }

    private static Set<String> metadataNames() throws Exception {
        Set<String> names = new HashSet<>();
        try (InputStream in = OptionPropertiesTest.class.getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertThat(in).as("the starter's generated configuration metadata").isNotNull();
            for (JsonNode property : new ObjectMapper().readTree(in).path("properties")) {
                names.add(property.path("name").asText());
            }
        }
        return names;
    }

    @Test
    void relaxedBindingReadsCamelCaseAndTheEnvironment() {
        runner.withPropertyValues("durable.leaseTtl=45s", "durable.queues.mail.pollInterval=250ms",
                        "durable.reaper.batchSize=7")
                .withInitializer(context -> context.getEnvironment().getPropertySources().addFirst(
                        new SystemEnvironmentPropertySource("systemEnvironment", Map.of("DURABLE_HEARTBEATINTERVAL", "3s",
                                "DURABLE_QUEUES_MAIL_CONCURRENCY", "7", "DURABLE_GARBAGECOLLECTOR_ENABLED", "false"))))
                .run(context -> {
                    EngineOptions options = context.getBean(DurableEngine.class).options();
                    assertThat(options.leaseTtl()).isEqualTo(Duration.ofSeconds(45));
                    assertThat(options.heartbeatInterval()).isEqualTo(Duration.ofSeconds(3));
                    assertThat(options.reaper().batchSize()).isEqualTo(7);
                    assertThat(options.reaper().interval()).isEqualTo(EngineOptions.DEFAULT_REAPER_INTERVAL);
                    assertThat(options.garbageCollector().enabled()).isFalse();
                    assertThat(options.queues().get("mail").concurrency()).isEqualTo(7);
                    assertThat(options.queues().get("mail").pollInterval()).isEqualTo(Duration.ofMillis(250));
                });
    }

    @Test
    void queueNamesKeepTheirCaseAndDots() {
        runner.withPropertyValues("durable.queues.Mail.concurrency=3", "durable.queues[mail.eu].concurrency=4",
                        "durable.queues.slow.poll-interval=30s")
                .run(context -> {
                    Map<String, QueueOptions> queues = context.getBean(DurableEngine.class).options().queues();
                    assertThat(queues).containsOnlyKeys("Mail", "mail.eu", "slow");
                    assertThat(queues.get("Mail").concurrency()).isEqualTo(3);
                    assertThat(queues.get("mail.eu").concurrency()).isEqualTo(4);
                    // A poll interval above the default ceiling raises the ceiling rather than failing.
                    assertThat(queues.get("slow").maxPollInterval()).isEqualTo(Duration.ofSeconds(30));
                });
    }

    @Test
    void aValueTheOptionRefusesFailsNamingThePropertyAndTheRule() {
        Map<String, String> refused = Map.of(
                "durable.lease-ttl=-5s", "durable.lease-ttl: leaseTtl must be positive, was PT-5S",
                "durable.queues.mail.concurrency=0", "durable.queues.mail.concurrency: concurrency must be at least 1, was 0",
                "durable.reaper.batch-size=0", "durable.reaper.batch-size: batchSize must be at least 1, was 0",
                "durable.poke-transport=carrier-pigeon", "durable.poke-transport: pokeTransport must be local,"
                        + " postgres-notify or none, was 'carrier-pigeon'");
        refused.forEach((property, message) -> runner.withPropertyValues(property).run(context -> {
            assertThat(context).hasFailed();
            List<String> messages = new ArrayList<>();
            for (Throwable cause = context.getStartupFailure(); cause != null; cause = cause.getCause()) {
                messages.add(cause.getMessage());
            }
            assertThat(messages).contains(message);
            assertThat(new DurableFailureAnalyzer().analyze(context.getStartupFailure()).getDescription())
                    .isEqualTo("Durable's configuration is invalid: " + message);
        }));
    }

    @Test
    void aValueSpringCannotConvertFailsNamingTheProperty() {
        runner.withPropertyValues("durable.lease-ttl=soon").run(context -> {
            assertThat(context).hasFailed();
            BindException bind = findCause(context.getStartupFailure(), BindException.class);
            assertThat(bind.getName()).hasToString("durable.lease-ttl");
        });
    }

    private static <E extends Throwable> E findCause(Throwable failure, Class<E> type) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            if (type.isInstance(cause)) {
                return type.cast(cause);
            }
        }
        throw new AssertionError("no " + type.getSimpleName() + " in " + failure);
    }

    @Test
    void aTasksPartsKeepTheTasksOtherDefaults() {
        runner.withPropertyValues("durable.analyzer.enabled=true").run(context -> {
            Maintenance.TaskOptions analyzer = context.getBean(DurableEngine.class).options().analyzer();
            assertThat(analyzer.enabled()).isTrue();
            assertThat(analyzer.interval()).isEqualTo(EngineOptions.DEFAULT_ANALYZER_INTERVAL);
            assertThat(analyzer.batchSize()).isEqualTo(Maintenance.TaskOptions.DEFAULT_BATCH_SIZE);
        });
    }

}
