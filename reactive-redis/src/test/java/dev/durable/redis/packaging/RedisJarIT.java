package dev.durable.redis.packaging;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.BuiltJar;
import org.junit.jupiter.api.Test;

/** The Redis module's jar carries no test support: the embedded Redis is in durable-test (issue 23). */
class RedisJarIT {

    @Test
    void theJarHasNoTestSupportAndNoTestServersAtCompileScope() {
        BuiltJar jar = BuiltJar.of("durable-reactive-redis");

        assertThat(jar.entries()).as(jar.path().toString())
                .anyMatch(name -> name.startsWith("dev/durable/redis/"))
                .noneMatch(name -> name.startsWith("dev/durable/redis/testing/"));
        assertThat(jar.compileDependencies("dev.durable", "durable-reactive-redis"))
                .contains("io.lettuce:lettuce-core")
                .noneMatch(dependency -> dependency.contains("embedded-redis"))
                .noneMatch(dependency -> dependency.startsWith("org.junit"));
    }
}
