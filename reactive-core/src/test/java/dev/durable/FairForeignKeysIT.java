package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.sql.FairPickSql;
import dev.durable.internal.sql.PickSql;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/**
 * Keys whose due rows an engine cannot run (types it does not know) on a fair queue, on the real
 * database: its pick reports them once, steps over them while it remembers them, and so serves the
 * keys it can run in every pick instead of walking the same foreign keys again and again.
 */
@ExtendWith(PostgresExtension.class)
class FairForeignKeysIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    @Test
    void foreignKeysAreReportedOnceAndSteppedOverSoTheOthersAreServedEveryPick(TestDatabase db) {
        FairnessIT.picks(db); // migrates
        PickSql picks = FairnessIT.picks(db, "y");
        for (int key = 0; key < 30; key++) {
            insert(db, "foreign", "x", String.format("a%02d", key), 5);
        }
        insert(db, "foreign", "y", "zz", 200);
        FairPickSql.FairShare equal = FairnessIT.share(Map.of(), 1);

        Set<String> stepped = new LinkedHashSet<>();
        List<String> reported = new ArrayList<>();
        int claimedAfterFound = 0;
        int picksAfterFound = 0;
        for (int i = 0; i < 12; i++) {
            PickSql.Picked picked = picks.pick("foreign", 10, "w", 60_000,
                    equal.steppingOver(stepped.toArray(String[]::new))).block(WAIT);
            assertThat(picked.rows()).extracting(ClaimedRow::type).doesNotContain("x");
            reported.addAll(picked.foreignKeys());
            stepped.addAll(picked.foreignKeys());
            if (stepped.size() == 30 && picked.foreignKeys().isEmpty()) {
                claimedAfterFound += picked.rows().size();
                picksAfterFound++;
            }
        }
        assertThat(reported).as("each foreign key reported once").hasSize(30).doesNotHaveDuplicates();
        assertThat(picksAfterFound).as("picks after every foreign key was found").isGreaterThanOrEqualTo(8);
        assertThat(claimedAfterFound).as("zz fills every pick once the others are stepped over")
                .isEqualTo(picksAfterFound * 10);
        // A foreign key is looked at once: it stepped back one slot, no more.
        assertThat(Sql.query(db, "SELECT DISTINCT pass FROM {schema}.durable_fair_keys WHERE queue = 'foreign'"
                + " AND fairness_key <> 'zz'", row -> row.get(0, Double.class))).containsExactly(1.0);
        assertThat(Sql.count(db, "queue = 'foreign' AND type = 'x' AND status = 'runnable'")).isEqualTo(150L);
    }

    @Test
    void twoEnginesWithDifferentTypesShareOneFairQueueAndRunEverything(TestDatabase db) {
        Map<String, String> ranBy = new ConcurrentHashMap<>();
        DurableEngine xs = engine(db, "xs", "x", ranBy);
        DurableEngine ys = engine(db, "ys", "y", ranBy);
        try {
            xs.start().block(WAIT);
            ys.start().block(WAIT);
            List<JobRequest> requests = new ArrayList<>();
            for (int key = 0; key < 40; key++) {
                for (int i = 0; i < 10; i++) {
                    requests.add(JobRequest.of("x", "x" + key + "-" + i).fairnessKey(String.format("a%02d", key)));
                }
            }
            for (int i = 0; i < 200; i++) {
                requests.add(JobRequest.of("y", "y-" + i).fairnessKey("zz"));
            }
            List<Long> ids = new ArrayList<>(xs.insertAll(requests.subList(0, 400)).block(WAIT));
            ids.addAll(ys.insertAll(requests.subList(400, 600)).block(WAIT));
            for (long id : ids) {
                assertThat(xs.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            }
            assertThat(ranBy).hasSize(600);
            Map<String, Long> byEngine = new HashMap<>();
            ranBy.forEach((job, engine) -> {
                assertThat(engine).as("the engine that ran " + job).isEqualTo(job.startsWith("x") ? "xs" : "ys");
                byEngine.merge(engine, 1L, Long::sum);
            });
            assertThat(byEngine).containsEntry("xs", 400L).containsEntry("ys", 200L);
        } finally {
            xs.closeLater().block(WAIT);
            ys.closeLater().block(WAIT);
        }
    }

    private static DurableEngine engine(TestDatabase db, String name, String type, Map<String, String> ranBy) {
        JobDefinition<String, String> job = JobDefinition.of(type, String.class, (String arg) -> {
            ranBy.put(arg, name);
            return Mono.delay(Duration.ofMillis(5)).thenReturn(arg);
        }).queue("mixed");
        return DurableEngine.builder(db.engineOptions().name(name)
                        .queue(QueueOptions.builder("mixed").concurrency(8).pollInterval(Duration.ofMillis(50))
                                .maxPollInterval(Duration.ofMillis(200)).fairness(Fairness.equalShares()).build())
                        .build())
                .register(job).build();
    }

    private static void insert(TestDatabase db, String queue, String type, String key, int rows) {
        db.execute("INSERT INTO " + FairnessIT.instances(db) + " (type, queue, step, max_attempts, fairness_key, eligible_at)"
                + " SELECT '" + type + "', '" + queue + "', 'run', 5, '" + key + "', now() - interval '1 second'"
                + " FROM generate_series(1, " + rows + ")");
    }
}
