package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/**
 * The engine's side of the migrations: engines starting together apply each version once, applying
 * again is a no-op, and the down path removes Durable. The versioning itself is MigratorIT's; that
 * the baseline is the schema the pre-release migrations made, BaselineCatalogIT's.
 */
@ExtendWith(PostgresExtension.class)
class MigrationIT {

    private static List<String> tables(TestDatabase db) {
        return Sql.query(db, "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1"
                + " ORDER BY table_name", row -> row.get(0, String.class), db.schema());
    }

    @Test
    void twoEnginesMigratingAtOnceApplyEachVersionExactlyOnce(TestDatabase db) {
        DurableEngine first = DurableEngine.builder(db.engineOptions().name("first").build()).build();
        DurableEngine second = DurableEngine.builder(db.engineOptions().name("second").build()).build();
        try {
            List<Integer> versions = Mono.zip(first.migrate(), second.migrate(),
                            (a, b) -> List.of(a, b))
                    .block(Duration.ofSeconds(60));
            assertThat(versions).containsExactly(LATEST, LATEST);
            assertThat(Sql.query(db, "SELECT version FROM {schema}.durable_schema_version ORDER BY version",
                    row -> row.get(0, Integer.class))).containsExactlyElementsOf(VERSIONS);
            assertThat(tables(db)).containsExactly("durable_attempts", "durable_claims", "durable_engines", "durable_fair_keys", "durable_forks",
                    "durable_gate_slots", "durable_history", "durable_instances", "durable_instances_all",
                    "durable_key_skips", "durable_limit_permits", "durable_queue_minutes", "durable_queue_pauses",
                    "durable_rate_buckets", "durable_schema_version", "durable_shared_secrets", "durable_signals", "durable_step_inputs", "durable_window_counters");

            // Idempotent: nothing left to apply.
            assertThat(first.migrate().block()).isEqualTo(LATEST);
            assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_schema_version",
                    row -> row.get(0, Long.class))).containsExactly((long) VERSIONS.size());

            // The down path removes every table but the version record, and up works again.
            assertThat(first.migrateDown(0).block()).isZero();
            assertThat(tables(db)).containsExactly("durable_schema_version");
            assertThat(second.migrate().block()).isEqualTo(LATEST);
            assertThat(tables(db)).contains("durable_instances", "durable_engines");
        } finally {
            first.closeLater().block();
            second.closeLater().block();
        }
    }

    /** The newest schema version this build ships. */
    private static final int LATEST = 6;
    /** The versions this build ships (their files and the path between them: MigratorIT, MigrationFilesTest). */
    private static final List<Integer> VERSIONS = List.of(1, 2, 3, 4, 5, 6);
}
