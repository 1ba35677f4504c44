package dev.durable.internal.sql;

import dev.durable.internal.Db;
import dev.durable.internal.Errors;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.util.List;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;

/**
 * The client's inserts of new instances, one round trip a batch: the plain insert (a batch is all
 * or nothing) and the insert that skips requests whose correlation key is live. Either may insert
 * rows already claimed by an idle local worker (claim-on-insert). The insert under conflict
 * policies is {@link PolicyInsertSql}; both share the columns a request sends.
 */
public final class InsertSql {

    /** A row to insert and the local worker that claims it as it is inserted (null for none). */
    public record Insertion(NewInstance row, @Nullable String claimer) {
    }

    /**
     * An inserted row's id, whether it was due at once by the database clock (only such rows are
     * worth a poke), and, when the insert claimed it, the claim.
     */
    public record Inserted(long id, boolean due, @Nullable ClaimedRow claim) {
    }

    /**
     * What a request of an insert that skips duplicates came to: the row it inserted, or the id of
     * the live instance that holds its correlation key. Neither when the holder could not be named
     * in the statement's snapshot (see {@link #insertSkippingDuplicates}): ask again.
     */
    public record Placed(@Nullable Inserted inserted, @Nullable Long heldBy) {
    }

    static final Columns<Insertion> INSERT_COLUMNS = insertColumns().build();

    /** The columns every form of insert sends, one array (or value) each. */
    static Columns.Builder<Insertion> insertColumns() {
        return Columns.<Insertion>builder()
            .text("type", i -> i.row().type())
            .integer("type_version", i -> i.row().typeVersion())
            .text("queue", i -> i.row().queue())
            .integer("priority", i -> i.row().priority())
            .text("step", i -> i.row().step())
            .text("state", i -> i.row().stateJson())
            .integer("max_attempts", i -> i.row().maxAttempts())
            .text("run_at", i -> i.row().runAt())
            .bigint("delay_ms", i -> i.row().delayMillis())
            .bigint("parent_id", i -> i.row().parentId())
            .text("concurrency_key", i -> i.row().concurrencyKey())
            .text("correlation_key", i -> i.row().correlationKey())
            .text("occupied", i -> i.row().occupiedStatuses())
            .text("gate", i -> i.row().gate())
            .integer("gate_shards", i -> i.row().gateShards())
            .rateSlot(i -> i.row().rate())
            .windowSlot(i -> i.row().window())
            .text("trace_context", i -> i.row().traceContext())
            .text("fairness_key", i -> i.row().fairnessKey())
            .text("claimer", Insertion::claimer);
    }

    /**
     * Inserts many instances in one round trip from parallel arrays. WITH ORDINALITY and ORDER BY
     * keep identity values, and so the returned rows, in the order of the request. A row's eligible
     * time is its absolute run-at when given, else now() plus its delay. A row with a claimer is
     * inserted already claimed by that idle local worker with a lease of the last parameter's ms (claim-on-insert,
     * which saves an idle queue the pick's round trip).
     * Index: writes the primary key, then the pick index (runnable; a claimed row is recorded in the
     * ledger of claims by the insert trigger instead), and the correlation index for a keyed row.
     * Locks: none but the new rows; a live correlation key that another transaction is inserting
     * waits for it, then is refused as a duplicate.
     * It answers each row's claim columns (what a claimed row's run needs); the other forms below
     * answer less or send less.
     */
    private final String insert;

    /**
     * As {@link #insert}, for a batch none of whose rows is claimed: it answers only each row's id
     * and whether it is due, not the two dozen claim columns a claimed row needs.
     */
    private final String insertUnclaimed;

    /**
     * As {@link #insert}, for one row: its values bound as scalars ({@code VALUES}), not as
     * one-element arrays to unnest.
     */
    private final String insertOne;

    /** As {@link #insertOne}, for a row that is not claimed: answers its id and whether it is due. */
    private final String insertOneUnclaimed;

    /**
     * As {@link #insert}, but a request whose correlation key is live (held by a row, or by an
     * earlier request of the same batch) is skipped instead of failing the batch, and answered
     * with the id of the holder. One round trip:
     * <ol>
     * <li>{@code u} numbers the requests, draws each its id from the table's identity sequence up
     *     front (so the answer of each request can be found by id, whether its row went in or not)
     *     and works out its slot: the key when the row's first status occupies it, else null;
     * <li>{@code ins} inserts them in (slot, request) order with ON CONFLICT DO NOTHING on
     *     durable_instances_correlation_uq, so the first request of a repeated key wins and two
     *     such batches take their keys in one order (no deadlock between them). A key that another
     *     transaction is inserting waits for it: taken if it commits, ours if it rolls back;
     * <li>{@code held} names the holders of the skipped keys from the statement's snapshot, with
     *     FOR KEY SHARE. It reads after {@code ins} (it needs the set of ids {@code ins} returned),
     *     and the lock makes PostgreSQL re-check each row's latest committed version, so a holder
     *     that settled meanwhile is not named. A holder that committed after the snapshot is not
     *     seen at all: that request comes back with neither row nor holder, and the caller asks
     *     again in a new statement, whose snapshot sees it (or finds the key free and inserts);
     * <li>the answer, in request order: the inserted row, else the row of this batch that took
     *     the key, else the holder.
     * </ol>
     * Index: as {@link #insert}; the holders through durable_instances_correlation_uq. Locks: the
     * new rows, and a key-share lock on each named holder (it blocks neither commits nor picks'
     * status updates, only deletion, until this statement's transaction ends).
     */
    private final String insertSkippingDuplicates;

    private final Db db;

    /** What an insert that claims answers: the claim, and whether the row is due. */
    static final String CLAIMED = ClaimColumns.SELECT + ", i.eligible_at <= now() AS due";
    /** What an insert that claims nothing answers: the ids (in request order) and whether each is due (to poke). */
    static final String UNCLAIMED = "i.id, i.eligible_at <= now() AS due";

    /** The insert over {@code source} (the rows as {@code u}, numbered by {@code ord}), answering {@code returning}. */
    private static String insert(Tables tables, String source, String returning) {
        return tables.render("""
                INSERT INTO {instances} AS i (type, type_version, queue, priority, step, state, max_attempts,
                                         eligible_at, parent_id, concurrency_key, correlation_key,
                                         correlation_statuses, gate_name, gate_shard, rate_limit, rate_weight,
                                         rate_partition, window_name, window_weight, window_partition, fairness_key, status, claimed_by, lease_expires_at, attempt,
                                         trace_context)
                SELECT u.type, u.type_version, u.queue, u.priority, u.step, u.state::jsonb, u.max_attempts,
                       COALESCE(u.run_at::timestamptz, now() + u.delay_ms * interval '1 millisecond'),
                       u.parent_id, u.concurrency_key, u.correlation_key, string_to_array(u.occupied, ','),
                       u.gate, CASE WHEN u.gate IS NOT NULL THEN floor(random() * u.gate_shards)::int END,
                       u.rate_limit, CASE WHEN u.rate_limit IS NOT NULL THEN u.rate_weight END, u.rate_partition,
                       u.window_name, CASE WHEN u.window_name IS NOT NULL THEN u.window_weight END, u.window_partition,
                       u.fairness_key,
                       CASE WHEN u.claimer IS NULL THEN 'runnable' ELSE 'executing' END, u.claimer,
                       CASE WHEN u.claimer IS NOT NULL THEN now() + $%d * interval '1 millisecond' END,
                       CASE WHEN u.claimer IS NULL THEN 0 ELSE 1 END, u.trace_context
                  FROM\s""".formatted(INSERT_COLUMNS.size() + 1) + source + """

                 ORDER BY u.ord
                RETURNING\s""" + returning);
    }

    public InsertSql(Db db, Tables tables) {
        this.db = db;
        this.insert = insert(tables, INSERT_COLUMNS.unnest(1, "u", true), CLAIMED);
        this.insertUnclaimed = insert(tables, INSERT_COLUMNS.unnest(1, "u", true), UNCLAIMED);
        this.insertOne = insert(tables, INSERT_COLUMNS.values(1, "u", true), CLAIMED);
        this.insertOneUnclaimed = insert(tables, INSERT_COLUMNS.values(1, "u", true), UNCLAIMED);
        this.insertSkippingDuplicates = tables.render("""
                WITH u AS MATERIALIZED (
                    SELECT u.*, nextval(pg_get_serial_sequence('{instances}', 'id')) AS new_id,
                           CASE WHEN u.claimer IS NULL THEN 'runnable' ELSE 'executing' END AS first_status
                      FROM\s""" + INSERT_COLUMNS.unnest(1, "u", true) + """

                ), slotted AS (
                    SELECT u.*, CASE WHEN u.first_status = ANY (string_to_array(u.occupied, ','))
                                     THEN u.correlation_key END AS slot
                      FROM u
                ), ins AS (
                    INSERT INTO {instances} AS i (id, type, type_version, queue, priority, step, state, max_attempts,
                                             eligible_at, parent_id, concurrency_key, correlation_key,
                                             correlation_statuses, gate_name, gate_shard, rate_limit, rate_weight,
                                             rate_partition, window_name, window_weight, window_partition, fairness_key, status, claimed_by, lease_expires_at, attempt,
                                             trace_context)
                    SELECT u.new_id, u.type, u.type_version, u.queue, u.priority, u.step, u.state::jsonb,
                           u.max_attempts,
                           COALESCE(u.run_at::timestamptz, now() + u.delay_ms * interval '1 millisecond'),
                           u.parent_id, u.concurrency_key, u.correlation_key, string_to_array(u.occupied, ','),
                           u.gate, CASE WHEN u.gate IS NOT NULL THEN floor(random() * u.gate_shards)::int END,
                           u.rate_limit, CASE WHEN u.rate_limit IS NOT NULL THEN u.rate_weight END, u.rate_partition,
                           u.window_name, CASE WHEN u.window_name IS NOT NULL THEN u.window_weight END, u.window_partition,
                           u.fairness_key,
                           u.first_status, u.claimer,
                           CASE WHEN u.claimer IS NOT NULL THEN now() + $%d * interval '1 millisecond' END,
                           CASE WHEN u.claimer IS NULL THEN 0 ELSE 1 END, u.trace_context
                      FROM slotted u
                     ORDER BY u.slot NULLS LAST, u.ord
                    ON CONFLICT (correlation_slot) WHERE correlation_slot IS NOT NULL DO NOTHING
                    RETURNING\s""".formatted(INSERT_COLUMNS.size() + 1) + ClaimColumns.SELECT
                + ", i.eligible_at <= now() AS due" + """

                ), taken AS (
                    SELECT s.slot, s.new_id FROM slotted s JOIN ins ON ins.id = s.new_id WHERE s.slot IS NOT NULL
                ), held AS (
                    SELECT h.id, h.correlation_slot
                      FROM {instances} h
                     WHERE h.correlation_slot = ANY (ARRAY(
                               SELECT s.slot FROM slotted s
                                WHERE s.slot IS NOT NULL AND s.new_id NOT IN (SELECT id FROM ins)))
                       FOR KEY SHARE OF h
                )
                SELECT ins.*, COALESCE(taken.new_id, held.id) AS held_by
                  FROM slotted s
                  LEFT JOIN ins ON ins.id = s.new_id
                  LEFT JOIN taken ON ins.id IS NULL AND taken.slot = s.slot
                  LEFT JOIN held ON ins.id IS NULL AND held.correlation_slot = s.slot
                 ORDER BY s.ord""");
    }

    /** Inserts the rows in one round trip on a pooled connection; emits them in request order. */
    public Flux<Inserted> insert(List<Insertion> rows, long leaseMillis) {
        return db.withConnection(connection -> insert(connection, rows, leaseMillis));
    }

    /** Inserts on the caller's connection, inside whatever transaction it has open. */
    public Flux<Inserted> insert(Connection connection, List<Insertion> rows, long leaseMillis) {
        boolean claims = rows.stream().anyMatch(row -> row.claimer() != null);
        Statement statement;
        if (rows.size() == 1) {
            statement = INSERT_COLUMNS.bindOne(connection.createStatement(claims ? insertOne : insertOneUnclaimed), 0,
                    rows.get(0));
        } else {
            statement = INSERT_COLUMNS.bind(connection.createStatement(claims ? insert : insertUnclaimed), 0, rows);
        }
        statement.bind(INSERT_COLUMNS.size(), leaseMillis);
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(claims ? InsertSql::inserted : InsertSql::unclaimed))
                .onErrorMap(Errors::translate);
    }

    /**
     * Inserts the rows in one round trip, skipping each whose correlation key is live; emits, in
     * request order, what became of each ({@link #insertSkippingDuplicates}).
     */
    public Flux<Placed> insertSkippingDuplicates(List<Insertion> rows, long leaseMillis) {
        return db.withConnection(connection -> {
            Statement statement = INSERT_COLUMNS.bind(connection.createStatement(insertSkippingDuplicates), 0, rows)
                    .bind(INSERT_COLUMNS.size(), leaseMillis);
            return Flux.from(statement.execute())
                    .concatMap(result -> result.map(row -> row.get("id", Long.class) != null
                            ? new Placed(inserted(row), null)
                            : new Placed(null, row.get("held_by", Long.class))));
        });
    }

    private static final ColumnPositions POSITIONS = new ColumnPositions("id", "due", "claimed_by");

    static Inserted unclaimed(Readable readable) {
        ColumnPositions.Values row = POSITIONS.of(readable);
        return new Inserted(row.get(0, Long.class), Boolean.TRUE.equals(row.get(1, Boolean.class)), null);
    }

    static Inserted inserted(Readable readable) {
        ColumnPositions.Values row = POSITIONS.of(readable);
        return new Inserted(row.get(0, Long.class), Boolean.TRUE.equals(row.get(1, Boolean.class)),
                row.get(2, String.class) == null ? null : ClaimColumns.read(readable));
    }
}
