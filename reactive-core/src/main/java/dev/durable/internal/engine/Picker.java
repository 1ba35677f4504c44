package dev.durable.internal.engine;

import dev.durable.internal.sql.Rows.ClaimedRow;
import java.util.List;
import reactor.core.publisher.Mono;

/** Claims up to {@code limit} rows of a queue for its {@link QueueScheduler}. */
@FunctionalInterface
interface Picker {

    Mono<Picked> pick(int limit);

    /** The rows a pick claimed, and how many limited rows a limiter refused. */
    record Picked(List<ClaimedRow> rows, int refused) {
    }
}
