package dev.durable.internal.sql;

import static dev.durable.internal.sql.CandidateSql.plainSource;

import dev.durable.internal.sql.FairPickSql.FairShare;
import dev.durable.internal.sql.Rows.Candidate;
import dev.durable.internal.sql.Rows.ClaimedRow;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;

/**
 * The pick of an engine whose limiter is outside the database (Redis), in two halves of one
 * transaction: {@link #lockCandidates} locks the candidates, the limiter is asked about the limited
 * ones while their locks are held, then {@link #claimLocked} claims the admitted and unlimited ones
 * ({@code OutsideLimiterAdmission} runs the protocol).
 */
public final class LockedPickSql {

    /** What the statements that only lock candidates return of them. */
    static final String LOCKED_CANDIDATES = """

            SELECT id, type, priority, (extract(epoch FROM eligible_at) * 1000000)::bigint AS eligible_micros, gate_name,
                   concurrency_key, gate_shard, rate_limit, rate_partition, rate_weight, window_name, window_partition,
                   window_weight
              FROM one_per_key""";

    /**
     * The limit filter of the first half of the pick with a limiter outside the database: limited rows
     * of the limits this engine knows ($3 gates, $4 rate slots), but not those of a (gate, key, shard) or
     * (limit, partition) the limiter refused a moment ago ($5, $6).
     */
    static final String REMOTE_LIMITS_FILTER = """
            AND (c.gate_name IS NULL OR (c.gate_name = ANY ($3) AND NOT (
                 (c.gate_name || chr(31) || c.concurrency_key || chr(31) || c.gate_shard) = ANY ($5))))
            AND (c.rate_limit IS NULL OR (c.rate_limit = ANY ($4) AND NOT (
                 (c.rate_limit || chr(31) || COALESCE(c.rate_partition, '')) = ANY ($6))))
            AND (c.window_name IS NULL OR (c.window_name = ANY ($4) AND NOT (
                 (c.window_name || chr(31) || COALESCE(c.window_partition, '')) = ANY ($6))))""";

    /**
     * The first half of the pick of an engine whose limiter is not in the database (Redis): locks
     * the candidates as the plain pick does ({@link PickSql}), limited rows of known names included, and returns them
     * unclaimed with their limits; then {@link #claimLocked} claims the admitted and unlimited ones
     * in the same transaction. Rows of a (gate, key, shard) or (rate limit, partition) the limiter
     * refused a moment ago ($5, $6: name, chr(31), key [, chr(31), shard]) are skipped before the
     * LIMIT. $3, $4: the gates and rate limits this engine knows; $7, $8: the types and versions.
     * Index: as the plain pick's. Locks: the candidates (skip locked), until the transaction ends.
     */
    private final String lockCandidates;

    /**
     * As {@link #lockCandidates} for a fair queue ({@link FairPickSql#fairSource} with the same filter, $9-$11
     * the weights, $12 the keys to step over, $13 null: a Redis limiter keeps no per-key caps in the
     * database), and {@link FairPickSql#FAIR_MOVES} counting every locked candidate as served: the keys' passes
     * advance by what they were offered, so a key whose rows the limiter then refuses (its cap gate
     * full in Redis, or another of its limits) has spent those turns, as a key at its cap is stepped
     * over by the PostgreSQL pick. Index and locks: as the fair pick's, until the transaction ends.
     */
    private final String fairLockCandidates;

    /**
     * The second half: claims the locked rows $1 for worker $2 with a lease of $3 ms, recording the
     * claiming transaction ({@link ClaimStamp}). Index: primary key. Locks: the rows,
     * which the transaction already holds.
     */
    private final String claimLocked;

    private final String[] gateNames;
    /** The names a row's rate slot may hold: rate limits, then sliding windows. */
    private final String[] rateSlotNames;
    private final String[] types;
    private final Integer[] versions;

    LockedPickSql(Tables tables, String[] gateNames, String[] rateSlotNames, String[] types, Integer[] versions) {
        this.gateNames = gateNames;
        this.rateSlotNames = rateSlotNames;
        this.types = types;
        this.versions = versions;
        this.lockCandidates = tables.render("WITH RECURSIVE " + plainSource("$8", "$7", REMOTE_LIMITS_FILTER)
                + LOCKED_CANDIDATES);
        this.fairLockCandidates = tables.render("WITH RECURSIVE "
                + FairPickSql.fairSource("$8", "$7", REMOTE_LIMITS_FILTER, 9, "one_per_key") + LOCKED_CANDIDATES);
        this.claimLocked = tables.render("""
                UPDATE {instances} i
                   SET status = 'executing', claimed_by = $2, attempt = i.attempt + 1,
                       lease_expires_at = now() + $3 * interval '1 millisecond', updated_at = now(), %s
                 WHERE i.id = ANY($1) AND i.status = 'runnable'
                RETURNING\s""".formatted(ClaimStamp.SET) + ClaimColumns.SELECT);
    }

    /** Locks up to {@code limit} candidates, in the caller's transaction; see {@link #lockCandidates}. */
    public Flux<Candidate> lockCandidates(Connection connection, String queue, int limit, String[] refusedGates,
            String[] refusedRates) {
        return lockCandidates(connection, queue, limit, refusedGates, refusedRates, null);
    }

    /** As above, shared across keys when {@code fair} is given ({@link #fairLockCandidates}). */
    public Flux<Candidate> lockCandidates(Connection connection, String queue, int limit, String[] refusedGates,
            String[] refusedRates, @Nullable FairShare fair) {
        Statement statement = connection.createStatement(fair == null ? lockCandidates : fairLockCandidates)
                .bind(0, queue).bind(1, limit).bind(2, gateNames).bind(3, rateSlotNames)
                .bind(4, refusedGates).bind(5, refusedRates).bind(6, types).bind(7, versions);
        if (fair != null) {
            statement.bind(8, fair.keys()).bind(9, fair.weights()).bind(10, fair.defaultWeight())
                    .bind(11, fair.foreign()).bindNull(12, Integer.class);
        }
        return Flux.from(statement.execute()).concatMap(result -> result.map(LockedPickSql::toCandidate));
    }

    /** Claims locked rows, in the caller's transaction; see {@link #claimLocked}. */
    public Flux<ClaimedRow> claimLocked(Connection connection, List<Long> ids, String worker, long leaseMillis) {
        return Flux.from(connection.createStatement(claimLocked)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).bind(2, leaseMillis).execute())
                .concatMap(result -> result.map(ClaimColumns::read));
    }

    private static Candidate toCandidate(Readable row) {
        ColumnPositions.Values limits = ClaimColumns.limits(row);
        return new Candidate(row.get("id", Long.class), row.get("type", String.class), row.get("priority", Integer.class),
                row.get("eligible_micros", Long.class), ClaimColumns.gateSlot(limits), ClaimColumns.rateSlot(limits),
                ClaimColumns.windowSlot(limits));
    }
}
