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
            assertThat(versions).containsExactly(1, 1);
            assertThat(Sql.query(db, "SELECT version FROM {schema}.durable_schema_version",
                    row -> row.get(0, Integer.class))).containsExactly(1);
            assertThat(tables(db)).containsExactly("durable_gate_slots", "durable_instances",
                    "durable_rate_buckets", "durable_schema_version", "durable_signals");

            // Idempotent: nothing left to apply.
            assertThat(first.migrate().block()).isEqualTo(1);
            assertThat(Sql.query(db, "SELECT count(*) FROM {schema}.durable_schema_version",
                    row -> row.get(0, Long.class))).containsExactly(1L);

            // The down path removes every table but the version record, and up works again.
            assertThat(first.migrateDown(0).block()).isZero();
            assertThat(tables(db)).containsExactly("durable_schema_version");
            assertThat(second.migrate().block()).isEqualTo(1);
            assertThat(tables(db)).contains("durable_instances");
        } finally {
            first.close().block();
            second.close().block();
        }
    }

    @Test
    void theMigrationFilesAreFlywayNamedAndShippedInTheJar() {
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/V1__durable_schema.sql")).isNotNull();
        assertThat(MigrationIT.class.getResource("/dev/durable/migrations/U1__durable_schema.sql")).isNotNull();
    }
}
