package dev.durable.internal.client;

import dev.durable.internal.engine.ClaimOnInsert;
import dev.durable.internal.sql.Rows.NewInstance;
import java.util.List;
import reactor.core.publisher.Mono;

/**
 * What the insert pipeline asks of the engine's running part, answered for an engine that is not
 * running too: which rows its idle schedulers take as they go in, and whether anybody serves the
 * queues it inserted into.
 */
public interface LocalQueues {

    /** Claims for the idle local schedulers of the rows' queues; none while the engine is not running. */
    ClaimOnInsert.Plan claims(List<NewInstance> rows);

    /**
     * Warns about inserts into queues no live engine serves: a running engine knows the fleet from its
     * registry; one that runs nothing asks, at most once a minute per queue ({@link ClientWarnings}).
     */
    Mono<Void> warnIfUnserved(List<String> queues);
}
