package dev.durable.options;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.EngineOptions;
import dev.durable.Maintenance;
import dev.durable.QueueOptions;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class OptionListTest {

    /** A small options class's declarations, as a class would make them in its static initializer. */
    private static final class Declared {
        final OptionList<Object> list = new OptionList<>("Example");
        final Option<Duration> timeout = list.add("timeout", Duration.class, Duration.ofSeconds(5), Checks.positive(),
                "How long to wait.");
        final Option<Integer> size = list.add("size", Integer.class, 10, Checks.atLeast(1), "How many at once.");
        final Option<String> secret = list.add(Option.of("secret", String.class, null, Checks.notNull(),
                "What signs the tokens.").printedAs(value -> "******"));
    }

    @Test
    void valuesDefaultCheckAndPrintAsDeclared() {
        Declared declared = new Declared();
        OptionValues values = OptionValues.none();
        assertThat(values.get(declared.timeout)).isEqualTo(Duration.ofSeconds(5));
        assertThat(values.get(declared.secret)).isNull();
        assertThat(declared.list.print(values)).isEqualTo("Example{timeout=PT5S, size=10}");

        OptionValues set = declared.list.set(values, declared.size, 3).with(declared.secret, "s3cret");
        assertThat(set.get(declared.size)).isEqualTo(3);
        assertThat(declared.list.print(set)).isEqualTo("Example{timeout=PT5S, size=3, secret=******}")
                .doesNotContain("s3cret");
        assertThat(set.toString()).doesNotContain("s3cret");
        assertThatThrownBy(() -> values.with(declared.size, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("size must be at least 1, was 0");
        assertThatThrownBy(() -> values.with(declared.timeout, null)).hasMessage("timeout must not be null");
    }

    @Test
    void valuesAreEqualWhenEveryOptionHasTheSameValue() {
        Declared declared = new Declared();
        OptionValues values = OptionValues.none();
        assertThat(values.with(declared.size, 10)).isEqualTo(values).hasSameHashCodeAs(values);
        assertThat(values.with(declared.size, 10).isSet(declared.size)).isFalse();
        assertThat(values.with(declared.size, 4)).isNotEqualTo(values).isEqualTo(values.with(declared.size, 4));
        assertThat(values.with(declared.size, 4).without(declared.size)).isEqualTo(values);
    }

    @Test
    void aListTakesEachNameOnceItsOwnOptionsOnlyAndNothingAfterItIsRead() {
        Declared declared = new Declared();
        assertThatThrownBy(() -> declared.list.add("size", Integer.class, 1, Checks.atLeast(1), "Again."))
                .hasMessage("Example declares option size twice");
        Option<Integer> foreign = Option.of("size", Integer.class, 1, Checks.atLeast(1), "Elsewhere.");
        assertThatThrownBy(() -> declared.list.set(OptionValues.none(), foreign, 2))
                .hasMessage("size is not an option of Example");
        assertThat(declared.list.options()).extracting(Option::name).containsExactly("timeout", "size", "secret");
        assertThatThrownBy(() -> declared.list.add("late", Integer.class, 1, Checks.atLeast(1), "Too late."))
                .isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> Option.of("bad", Integer.class, 0, Checks.atLeast(1), "A default it refuses."))
                .hasMessage("bad must be at least 1, was 0");
        assertThatThrownBy(() -> Option.of("undocumented", Integer.class, 1, Checks.atLeast(1), " "))
                .hasMessageContaining("needs a description");
    }

    /** Every declared option is reachable the usual way: an accessor of its name, a setter of its name. */
    @Test
    void everyOptionOfTheCoreHasItsAccessorAndSetter() throws Exception {
        assertAccessorsAndSetters(EngineOptions.class, EngineOptions.Builder.class, EngineOptions.options().options());
        assertAccessorsAndSetters(QueueOptions.class, QueueOptions.Builder.class, QueueOptions.options().options());
        for (Option<?> part : Maintenance.TaskOptions.options().options()) {
            assertThat(Maintenance.TaskOptions.class.getMethod(part.name())).isNotNull();
            String wither = "with" + Character.toUpperCase(part.name().charAt(0)) + part.name().substring(1);
            assertThat(List.of(Maintenance.TaskOptions.class.getMethods())).extracting(Method::getName).contains(wither);
        }
        Maintenance.TaskOptions reaper = Maintenance.TaskOptions.every(Duration.ofSeconds(5));
        assertThat(reaper.withBatchSize(7)).isEqualTo(Maintenance.TaskOptions.every(Duration.ofSeconds(5))
                .withBatchSize(7)).isNotEqualTo(reaper);
        Option<?> budget = Maintenance.TaskOptions.options().options().stream()
                .filter(part -> part.name().equals("budget")).findFirst().orElseThrow();
        assertThat(Maintenance.TaskOptions.options().get(reaper.withBudget(Duration.ofSeconds(9)), budget))
                .isEqualTo(Duration.ofSeconds(9));
    }

    static void assertAccessorsAndSetters(Class<?> options, Class<?> builder, List<Option<?>> declared)
            throws Exception {
        for (Option<?> option : declared) {
            assertThat(options.getMethod(option.name())).as(options.getSimpleName() + "." + option.name() + "()")
                    .isNotNull();
            boolean setter = option.type() == java.util.Map.class || List.of(builder.getMethods()).stream()
                    .anyMatch(method -> method.getName().equals(option.name()) && method.getParameterCount() == 1);
            assertThat(setter).as(builder.getSimpleName() + "." + option.name() + "(...)").isTrue();
        }
    }
}
