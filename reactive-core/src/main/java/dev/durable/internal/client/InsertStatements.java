package dev.durable.internal.client;

import dev.durable.InsertResult;
import dev.durable.internal.sql.InsertSql;
import dev.durable.internal.sql.InsertSql.Inserted;
import dev.durable.internal.sql.InsertSql.Insertion;
import dev.durable.internal.sql.PolicyInsertSql;
import dev.durable.internal.sql.PolicyInsertSql.Resolved;
import io.r2dbc.spi.Connection;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/**
 * The three statements an insert can be, each answering every request the same way
 * ({@link Answer}), so the pipeline has one epilogue whatever ran: the plain insert (all or
 * nothing), the insert that skips live correlation keys, and the insert under conflict policies.
 */
final class InsertStatements {

    /** Which statement an insert sends. */
    enum Form {
        /** {@code InsertSql}'s plain insert: a live correlation key fails the batch. */
        PLAIN,
        /** {@code InsertSql}'s insert that skips a request whose key is live and names the holder. */
        SKIP_DUPLICATES,
        /** {@code PolicyInsertSql}: each request's conflict policy where its key is live. */
        POLICIES
    }

    /**
     * What one request came to: its answer (null when the holder of its key could not be named in
     * the statement's snapshot: ask again), the row it inserted (null when none), and whether it made
     * a holder due now (a replace), which is worth a poke of the holder's queue.
     */
    record Answer(@Nullable InsertResult result, @Nullable Inserted inserted, boolean holderDue) {
    }

    private final InsertSql inserts;
    private final PolicyInsertSql policies;

    InsertStatements(InsertSql inserts, PolicyInsertSql policies) {
        this.inserts = inserts;
        this.policies = policies;
    }

    /**
     * Sends {@code form} for the rows, on {@code connection} (the caller's, inside its open
     * transaction) or, when null, on a pooled connection of its own; answers in request order.
     */
    Mono<List<Answer>> send(Form form, @Nullable Connection connection, List<Insertion> rows, long leaseMillis) {
        return switch (form) {
            case PLAIN -> (connection == null ? inserts.insert(rows, leaseMillis)
                    : inserts.insert(connection, rows, leaseMillis))
                    .map(inserted -> new Answer(new InsertResult(inserted.id(), true), inserted, false))
                    .collectList();
            case SKIP_DUPLICATES -> {
                if (connection != null) {
                    throw new IllegalArgumentException("the insert that skips duplicates runs on its own connection");
                }
                yield inserts.insertSkippingDuplicates(rows, leaseMillis)
                        .map(placed -> placed.inserted() != null
                                ? new Answer(new InsertResult(placed.inserted().id(), true), placed.inserted(), false)
                                : new Answer(placed.heldBy() == null ? null : new InsertResult(placed.heldBy(), false),
                                        null, false))
                        .collectList();
            }
            case POLICIES -> (connection == null ? policies.insertWithPolicies(rows, leaseMillis)
                    : policies.insertWithPolicies(connection, rows, leaseMillis))
                    .map(InsertStatements::answer)
                    .collectList();
        };
    }

    private static Answer answer(Resolved resolved) {
        InsertResult.Disposition disposition = switch (resolved.placement()) {
            case INSERTED -> InsertResult.Disposition.INSERTED;
            case SKIPPED -> InsertResult.Disposition.SKIPPED;
            case REPLACED -> InsertResult.Disposition.REPLACED;
            case FOLLOW_UP -> InsertResult.Disposition.FOLLOW_UP;
        };
        return new Answer(new InsertResult(resolved.id(), disposition), resolved.inserted(),
                resolved.placement() == PolicyInsertSql.Placement.REPLACED && resolved.due());
    }
}
