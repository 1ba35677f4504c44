package dev.durable.spring.compat;

import dev.durable.DurableEngine;
import dev.durable.JobRequest;
import org.springframework.stereotype.Service;
import reactor.core.publisher.Mono;

// tag::spring-inject[]
@Service
class Signups {

    private final DurableEngine engine; // here, not in MailJobs: the engine needs MailJobs' beans first

    Signups(DurableEngine engine) {
        this.engine = engine;
    }

    Mono<Long> welcome(String address) {
        return engine.insert(JobRequest.of("send-email", new Email(address, "Welcome"))
                .correlationKey("welcome:" + address));
    }
}
// end::spring-inject[]
