package dev.durable.internal.engine;

import dev.durable.Backoff;
import dev.durable.Definition;
import dev.durable.internal.sql.LeaseSql;
import java.util.Map;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The delay before a recovered claim runs again: the backoff of its type for the attempt its lost
 * worker ran, as if that attempt had failed. A type this engine does not know (a rolling deploy, a
 * node that serves other queues) gets {@link Backoff#DEFAULT}, and so does a backoff that throws.
 */
final class RetryDelays implements LeaseSql.RetryDelay {

    private static final Logger log = Loggers.getLogger(RetryDelays.class);

    private final Map<String, Definition> definitions;

    RetryDelays(Map<String, Definition> definitions) {
        this.definitions = Map.copyOf(definitions);
    }

    @Override
    public long millis(String type, int attempt) {
        Definition definition = definitions.get(type);
        Backoff backoff = definition == null ? Backoff.DEFAULT : definition.backoff();
        try {
            return backoff.delay(attempt).toMillis();
        } catch (RuntimeException e) {
            log.warn("backoff of type {} failed for attempt {}, the default applies: {}", type, attempt, e.toString());
            return Backoff.DEFAULT.delay(attempt).toMillis();
        }
    }
}
