package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

@ExtendWith(PostgresExtension.class)
class SmokeIT {

    @Test
    void runsAJob(TestDatabase db) {
        DurableEngine engine = DurableEngine.builder(db.engineOptions().queue("default").build())
                .register(JobDefinition.of("greet", String.class, name -> Mono.just("hello " + name)))
                .build();
        engine.start().block();
        long id = engine.insert(JobRequest.of("greet", "world")).block();
        Instance done = Mono.defer(() -> engine.get(id)).filter(i -> i.status().isTerminal())
                .repeatWhenEmpty(f -> f.delayElements(Duration.ofMillis(20))).block(Duration.ofSeconds(10));
        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.resultJson()).isEqualTo("\"hello world\"");
        List<Long> ids = engine.insertAll(List.of(JobRequest.of("greet", "a"), JobRequest.of("greet", "b"))).block();
        assertThat(ids).hasSize(2);
        engine.close().block();
    }
}
