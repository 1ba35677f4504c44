package dev.durable.packaging;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.BuiltJar;
import org.junit.jupiter.api.Test;

/** The main jar carries the engine only: the test support is the durable-test artifact (issue 23). */
class MainJarIT {

    @Test
    void theMainJarHasNoTestSupportAndNoTestServersAtCompileScope() {
        BuiltJar jar = BuiltJar.of("durable-reactive-core");

        assertThat(jar.entries()).as(jar.path().toString())
                .contains("dev/durable/DurableEngine.class")
                .noneMatch(name -> name.startsWith("dev/durable/testing/"))
                .noneMatch(name -> name.startsWith("dev/durable/support/"));
        assertThat(jar.compileDependencies("dev.durable", "durable-reactive-core"))
                .contains("io.projectreactor:reactor-core")
                .noneMatch(dependency -> dependency.startsWith("io.zonky.test"))
                .noneMatch(dependency -> dependency.startsWith("org.junit"));
    }
}
