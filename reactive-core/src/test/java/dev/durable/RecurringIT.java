package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Engines;
import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

@ExtendWith(PostgresExtension.class)
class RecurringIT {

    @RegisterExtension
    final Engines engines = new Engines();

    @Test
    void eachDueTimeIsInsertedExactlyOnceAcrossNodes(TestDatabase db) {
        engines.on(db);
        JobDefinition<String, String> report = JobDefinition.of("report", String.class, (String s) -> Mono.just(s))
                .queue("reports");
        RecurringJob nightly = RecurringJob.of("nightly-report", "0 3 * * *", JobRequest.of("report", "all"));
        RecurringJob minutely = RecurringJob.of("minutely", "* * * * *", JobRequest.of("report", "tick"));
        List<DurableEngine> nodes = new ArrayList<>();
        for (int n = 0; n < 4; n++) {
            DurableEngine engine = DurableEngine.builder(engines.options("cron" + n)
                            .recurringInterval(Duration.ofMillis(100))
                            .queue(QueueOptions.builder("reports").pollInterval(Duration.ofMillis(100)).build())
                            .build())
                    .register(report)
                    .schedule(nightly)
                    .schedule(minutely)
                    .build();
            nodes.add(engines.track(engine));
        }
        // Four nodes start at once and race to insert the same due times.
        reactor.core.publisher.Flux.fromIterable(nodes).flatMap(DurableEngine::start).blockLast();
        Instant dbNow = Sql.query(db, "SELECT now()", row -> row.get(0, Instant.class)).get(0);
        Eventually.until("both schedules inserted", Duration.ofSeconds(10),
                () -> Sql.count(db, "correlation_key LIKE 'durable.cron:%'") >= 2);
        Eventually.sleep(500); // several more ticks on every node

        List<Instant> nightlyRuns = Sql.query(db, "SELECT eligible_at FROM {schema}.durable_instances"
                + " WHERE correlation_key LIKE 'durable.cron:nightly-report@%'", row -> row.get(0, Instant.class));
        assertThat(nightlyRuns).hasSize(1);
        Instant due = nightlyRuns.get(0);
        assertThat(due).isAfter(dbNow);
        assertThat(due.atZone(java.time.ZoneOffset.UTC).getHour()).isEqualTo(3);
        assertThat(due.atZone(java.time.ZoneOffset.UTC).getMinute()).isZero();

        // The minutely one: at most two due times can have come up in these few seconds.
        long minutelyRows = Sql.count(db, "correlation_key LIKE 'durable.cron:minutely@%'");
        assertThat(minutelyRows).isBetween(1L, 2L);
        assertThat(Sql.query(db, "SELECT count(DISTINCT eligible_at) = count(*) FROM {schema}.durable_instances"
                + " WHERE correlation_key LIKE 'durable.cron:%'", row -> row.get(0, Boolean.class))).containsExactly(true);
    }
}
