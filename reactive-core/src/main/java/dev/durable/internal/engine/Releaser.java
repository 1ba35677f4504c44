package dev.durable.internal.engine;

import dev.durable.internal.sql.Rows.ClaimedRow;
import java.util.List;
import reactor.core.publisher.Mono;

/** Gives a {@link QueueScheduler}'s claimed, unstarted rows back; never errors. */
@FunctionalInterface
interface Releaser {

    Mono<Void> release(List<ClaimedRow> rows);
}
