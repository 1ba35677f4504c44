package dev.durable.spring.compat;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import reactor.core.publisher.Mono;

/** Stands in for a mail client: records what it sent. */
public class Mailer {

    private final List<Email> sent = new CopyOnWriteArrayList<>();

    public Mono<String> send(Email email) {
        return Mono.fromSupplier(() -> {
            sent.add(email);
            return "sent to " + email.to();
        });
    }

    public List<Email> sent() {
        return sent;
    }
}
