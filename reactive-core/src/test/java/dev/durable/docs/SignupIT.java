package dev.durable.docs;

import dev.durable.DurableEngine;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.testing.DurableTesting;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

// tag::testing[]
@ExtendWith(PostgresExtension.class)
class SignupIT {

    @Test
    void sendsTheWelcomeEmail(TestDatabase db) {
        try (DurableEngine engine = DurableEngine.builder(db.engineOptions().queue("mail").build())
                .register(JobDefinition.of("send-email", Email.class, (Email email) -> Mono.just("sent to " + email.to()))
                        .queue("mail"))
                .build()) {
            engine.start().block();
            long id = engine.insert(JobRequest.of("send-email", new Email("ada@example.com", "Welcome"))).block();

            DurableTesting.drain(engine);   // runs everything due, and what that makes due
            DurableTesting.assertInstance(engine, id).isDone().hasResult("sent to ada@example.com");
        }
    }
}
// end::testing[]
