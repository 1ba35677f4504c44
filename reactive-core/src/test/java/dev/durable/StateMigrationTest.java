package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/** The rules a workflow's state migrations are checked against when it is built. */
class StateMigrationTest {

    record State(String id) {
    }

    private static WorkflowDefinition.Builder<State> workflow(int version) {
        return WorkflowDefinition.builder("wf", State.class).version(version)
                .step("a", ctx -> Mono.just(Outcome.done(null)))
                .step("b", ctx -> Mono.just(Outcome.done(null)));
    }

    @Test
    void anUnbrokenChainSetsTheLowestVersionAndWithoutMigrationsEveryOlderVersionRunsAsItIs() {
        WorkflowDefinition<State> chained = workflow(4).migration(StateMigration.from(2))
                .migration(StateMigration.from(3).mapStep("old", "b")).build();
        assertThat(chained.lowestVersion()).isEqualTo(2);
        assertThat(chained.migrationsFrom(3)).extracting(StateMigration::fromVersion).containsExactly(3);
        assertThat(workflow(4).build().lowestVersion()).isEqualTo(1);
        assertThat(JobDefinition.of("j", String.class, (String s) -> Mono.just(s)).lowestVersion()).isEqualTo(1);
    }

    @Test
    void badChainsFailAtBuildTimeNamingTheRule() {
        assertThatThrownBy(() -> workflow(4).migration(StateMigration.from(1)).migration(StateMigration.from(3)).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("gap").hasMessageContaining("none from version 2 to 3");
        assertThatThrownBy(() -> workflow(3).migration(StateMigration.from(1)).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("none from version 2 to 3");
        assertThatThrownBy(() -> workflow(2).migration(StateMigration.from(1)).migration(StateMigration.from(1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("two migrations from version 1");
        assertThatThrownBy(() -> workflow(2).migration(StateMigration.from(1)).migration(StateMigration.from(2)).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("from version 2 to 3, above its version 2");
        assertThatThrownBy(() -> workflow(2).migration(StateMigration.from(1).mapStep("x", "nowhere")).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("maps step 'x' to 'nowhere', which version 2").hasMessageContaining("[a, b]");
        // A mapping is followed through the later migrations of the chain.
        assertThat(workflow(3).migration(StateMigration.from(1).mapStep("x", "y"))
                .migration(StateMigration.from(2).mapStep("y", "b")).build().lowestVersion()).isEqualTo(1);
        assertThatThrownBy(() -> StateMigration.from(0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("fromVersion");
        assertThatThrownBy(() -> StateMigration.from(1).mapStep("x", "a").mapStep("x", "b"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mapped twice");
    }

    @Test
    void theStateChangesThroughADeclaredOldClassOrTheJsonTree() {
        JsonCodec codec = new JacksonJsonCodec();
        StateMigration typed = StateMigration.from(1).state(State.class, old -> new State(old.id() + "!"));
        assertThat(codec.decode(typed.migrateState("{\"id\":\"x\"}", codec), State.class)).isEqualTo(new State("x!"));
        StateMigration tree = StateMigration.from(1).state(JsonNode.class,
                old -> ((ObjectNode) old.deepCopy()).put("currency", "EUR"));
        assertThat(codec.tree(tree.migrateState("{\"id\":\"x\"}", codec)).get("currency").asText()).isEqualTo("EUR");
        assertThat(StateMigration.from(1).migrateState(null, codec)).isNull();
    }
}
