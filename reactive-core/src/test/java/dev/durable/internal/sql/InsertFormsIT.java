package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.ConflictPolicy;
import dev.durable.DurableEngine;
import dev.durable.internal.Db;
import dev.durable.internal.sql.InsertSql.Inserted;
import dev.durable.internal.sql.InsertSql.Insertion;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The insert's four forms (one row as scalars or many as arrays; answering the claim or only id and due)
 * write the same rows and answer the same ids: a claim only where a row was claimed on insert.
 */
@ExtendWith(PostgresExtension.class)
class InsertFormsIT {

    private static final Duration WAIT = Duration.ofSeconds(60);

    private static Insertion row(String state, @Nullable String runAt, @Nullable String key, @Nullable String claimer) {
        return new Insertion(new Rows.NewInstance("t", 1, "q", 0, "run", state, 5, runAt, 0, null, key, null, null,
                null, 0, null, null, null, ConflictPolicy.reject(), null), claimer);
    }

    @Test
    void oneRowOrManyClaimedOrNotAnswerIdsAndOnlyTheirClaims(TestDatabase db) {
        DurableEngine schema = DurableEngine.builder(db.engineOptions().build()).build();
        schema.migrate().block(WAIT);
        schema.closeLater().block(WAIT);
        InsertSql instances = new InsertSql(new Db(db.connectionFactory(), WAIT), new Tables(db.schema()));

        // One row, not claimed: its nulls bound as typed nulls, its id and due answered, no claim.
        Inserted plain = instances.insert(List.of(row("\"a\"", null, null, null)), 1000).single().block(WAIT);
        assertThat(plain.claim()).isNull();
        assertThat(plain.due()).isTrue();
        // One row due later, with a key.
        Inserted later = instances.insert(List.of(row("\"b\"", "2999-01-01T00:00:00Z", "k", null)), 1000)
                .single().block(WAIT);
        assertThat(later.due()).isFalse();
        assertThat(later.id()).isGreaterThan(plain.id());
        // One row claimed on insert: the claim comes back.
        Inserted claimed = instances.insert(List.of(row("\"c\"", null, null, "w1")), 1000).single().block(WAIT);
        assertThat(claimed.claim()).isNotNull();
        assertThat(claimed.claim().worker()).isEqualTo("w1");
        assertThat(claimed.claim().stateJson()).isEqualTo("\"c\"");
        // Many, none claimed; many, one claimed: ids in request order, a claim only for the claimed one.
        List<Inserted> many = instances.insert(List.of(row("1", null, null, null), row("2", null, null, null)), 1000)
                .collectList().block(WAIT);
        assertThat(many).extracting(Inserted::claim).containsOnlyNulls();
        assertThat(many.get(1).id()).isEqualTo(many.get(0).id() + 1);
        List<Inserted> mixed = instances.insert(List.of(row("3", null, null, null), row("4", null, null, "w2")), 1000)
                .collectList().block(WAIT);
        assertThat(mixed.get(0).claim()).isNull();
        assertThat(mixed.get(1).claim().worker()).isEqualTo("w2");

        assertThat(dev.durable.support.Sql.query(db, "SELECT string_agg(state::text || ':' || status, ' ' ORDER BY id)"
                        + " FROM {schema}.durable_instances", r -> r.get(0, String.class)))
                .containsExactly("\"a\":runnable \"b\":runnable \"c\":executing 1:runnable 2:runnable 3:runnable"
                        + " 4:executing");
    }
}
