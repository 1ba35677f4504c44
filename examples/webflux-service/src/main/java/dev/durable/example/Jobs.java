package dev.durable.example;

import dev.durable.Backoff;
import dev.durable.JobDefinition;
import dev.durable.Outcome;
import dev.durable.WorkflowDefinition;
import java.time.Duration;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.core.publisher.Mono;

/**
 * The example's work, as beans the starter registers: a job that greets, a job that always fails
 * (to show retries, failures and the retry button), and an order workflow that waits for a
 * {@code paid} signal.
 */
@Configuration(proxyBeanMethods = false)
public class Jobs {

    /** Greets after a short pause, so the dashboard shows it executing. */
    @Bean
    JobDefinition<String, String> greet() {
        return JobDefinition.of("greet", String.class,
                (String name) -> Mono.delay(Duration.ofMillis(300)).thenReturn("hello " + name));
    }

    /** Fails every attempt: two attempts a second apart, then failed for good. */
    @Bean
    JobDefinition<String, String> flaky() {
        return JobDefinition.of("flaky", String.class,
                        (String reason) -> Mono.<String>error(new IllegalStateException("flaky: " + reason)))
                .maxAttempts(2)
                .backoff(Backoff.fixed(Duration.ofSeconds(1)));
    }

    /** An order: reserved, then parked until {@code paid} arrives (or an hour passes), then shipped. */
    @Bean
    WorkflowDefinition<Order> order() {
        return WorkflowDefinition.builder("order", Order.class)
                .queue("orders")
                .step("reserve", ctx -> {
                    Order order = ctx.state();
                    return Mono.just(order == null
                            ? Outcome.<Order>fail("an order needs a state such as {\"item\": \"book\"}")
                            : Outcome.await(Set.of("paid"), "ship", new Order(order.item(), "reserved"),
                                    Duration.ofHours(1)));
                })
                .step("ship", ctx -> Mono.just(ctx.awaitTimedOut() || ctx.state() == null
                        ? Outcome.<Order>fail("not paid within an hour")
                        : Outcome.<Order>done(new Order(ctx.state().item(), "shipped"))))
                .build();
    }

    /** The state of an order workflow. */
    public record Order(String item, @Nullable String stage) {
    }
}
