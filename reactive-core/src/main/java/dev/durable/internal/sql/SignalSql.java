package dev.durable.internal.sql;

import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.Delivery;
import io.r2dbc.spi.Statement;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Signal delivery into an instance's durable inbox. */
public final class SignalSql {

    /**
     * Stores a signal in a live instance's inbox (a repeated dedup key stores nothing, and neither
     * does an inbox already holding $5 unconsumed signals) and wakes the instance when it awaits that
     * name. The target is addressed by id ($1) or by live correlation key, per {@code %s}.
     * Index: the target by primary key or by the correlation index; the inbox's dedup index.
     * Locks: the target row first, so a commit that parks it either comes before (and the delivery
     * sees it parked) or after (and the commit's lost-wakeup check sees the signal).
     */
    private static final String DELIVER = """
            WITH target AS (
                SELECT id, queue, type, status, awaited_signals FROM {instances}
                 WHERE %s AND status NOT IN ('done', 'failed', 'cancelled')
                   FOR UPDATE
            ), room AS (
                SELECT t.id, (SELECT count(*) FROM (SELECT 1 FROM {signals} s
                                                      WHERE s.instance_id = t.id AND s.consumed_at IS NULL
                                                      LIMIT $5) unconsumed) >= $5 AS inbox_full
                  FROM target t
            ), stored AS (
                INSERT INTO {signals} (instance_id, name, payload, dedup_key, trace_context)
                SELECT id, $2, $3::jsonb, $4, $6 FROM room WHERE NOT inbox_full
                ON CONFLICT (instance_id, dedup_key) DO NOTHING
                RETURNING instance_id
            ), flagged AS (
                -- Decided on the row being updated, not on target's copy: after a concurrent commit
                -- the update first builds its new row from the version its snapshot saw (checked
                -- against the lease constraint before it re-reads the row), and target's copy is
                -- already the newer version; mixing the two made a row that fails the check.
                UPDATE {instances} i
                   SET has_signals = true,
                       status = CASE WHEN i.status = 'awaiting_signal' AND $2 = ANY (i.awaited_signals)
                                     THEN 'runnable' ELSE i.status END,
                       eligible_at = CASE WHEN i.status = 'awaiting_signal' AND $2 = ANY (i.awaited_signals)
                                          THEN now() ELSE i.eligible_at END,
                       await_deadline = CASE WHEN i.status = 'awaiting_signal' AND $2 = ANY (i.awaited_signals)
                                             THEN NULL ELSE i.await_deadline END,
                       updated_at = now()
                  FROM target t
                 WHERE i.id = t.id AND EXISTS (SELECT 1 FROM stored)
                RETURNING i.id, i.status
            )
            SELECT t.id, t.queue, t.type, (SELECT count(*) FROM stored) AS stored, (SELECT inbox_full FROM room) AS inbox_full,
                   (SELECT count(*) FROM flagged f WHERE f.status = 'runnable' AND t.status = 'awaiting_signal')
                   AS woken
              FROM target t""";

    private final String deliverById;
    private final String deliverByKey;
    private final Db db;
    private final int maxInbox;

    public SignalSql(Db db, Tables tables, int maxInbox) {
        this.db = db;
        this.maxInbox = maxInbox;
        this.deliverById = tables.render(DELIVER.formatted("id = $1"));
        this.deliverByKey = tables.render(DELIVER.formatted("correlation_slot = $1"));
    }

    /**
     * Delivers a signal by instance id or by live correlation key, with its sender's trace context
     * (null without tracing); empty when no live target.
     */
    public Mono<Delivery> deliver(@Nullable Long id, @Nullable String correlationKey, String name,
            @Nullable String payloadJson, @Nullable String dedupKey, @Nullable String traceContext) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(id != null ? deliverById : deliverByKey);
            if (id != null) {
                statement.bind(0, id);
            } else {
                statement.bind(0, correlationKey);
            }
            statement.bind(1, name);
            Db.bind(statement, 2, payloadJson, String.class);
            Db.bind(statement, 3, dedupKey, String.class);
            statement.bind(4, maxInbox);
            Db.bind(statement, 5, traceContext, String.class);
            return Flux.from(statement.execute()).concatMap(result -> result.map(row -> new Delivery(
                    row.get("id", Long.class), row.get("queue", String.class), row.get("type", String.class),
                    row.get("stored", Long.class) > 0, row.get("woken", Long.class) > 0,
                    Boolean.TRUE.equals(row.get("inbox_full", Boolean.class)))));
        }).next();
    }
}
