package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.support.Eventually;
import dev.durable.support.Sql;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;

/**
 * Per-key caps given by the application's function ({@code Fairness.Builder#maxExecutingPerKey(Function)}),
 * on the real database: under saturation each key executes up to its own cap and never more (counted on
 * the database, where the cap holds across the fleet), and a cap changed at runtime holds once the
 * scheduler has stored it.
 */
@ExtendWith(PostgresExtension.class)
class FairCapsIT {

    private static final Duration WAIT = Duration.ofSeconds(120);

    @Test
    void eachKeyRunsUpToItsOwnCapAndAChangedCapHolds(TestDatabase db) throws Exception {
        Map<String, Integer> caps = new ConcurrentHashMap<>(Map.of("a", 1, "b", 3));
        Map<String, AtomicInteger> running = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> most = new ConcurrentHashMap<>();
        JobDefinition<String, String> capped = JobDefinition.of("capped", String.class, (String key) -> {
            int now = running.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            most.computeIfAbsent(key, k -> new AtomicInteger()).accumulateAndGet(now, Math::max);
            return Mono.delay(Duration.ofMillis(200)).then(Mono.fromCallable(() -> {
                running.get(key).decrementAndGet();
                return key;
            }));
        }).queue("caps");
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("caps").concurrency(10).pollInterval(Duration.ofMillis(50))
                                // The static cap holds for a key until its own is stored.
                                .fairness(Fairness.builder().maxExecutingPerKey(1).maxExecutingPerKey(caps::get).build())
                                .build()).build())
                .register(capped).build();
        // The database's view, sampled all along: executing claims per key, the most seen per phase.
        AtomicInteger phase = new AtomicInteger(1);
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        AtomicBoolean sampling = new AtomicBoolean(true);
        Thread sampler = new Thread(() -> {
            while (sampling.get()) {
                int at = phase.get();
                for (String row : Sql.query(db, "SELECT fairness_key || ' ' || count(*) FROM {schema}.durable_instances"
                        + " WHERE queue = 'caps' AND status = 'executing' GROUP BY fairness_key", r -> r.get(0, String.class))) {
                    String[] parts = row.split(" ");
                    seen.merge(at + parts[0], Integer.parseInt(parts[1]), Math::max);
                }
                Eventually.sleep(10);
            }
        }, "caps-sampler");
        try {
            engine.start().block(WAIT);
            sampler.start();
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                requests.add(JobRequest.of("capped", "a").fairnessKey("a"));
                requests.add(JobRequest.of("capped", "b").fairnessKey("b"));
            }
            List<Long> ids = engine.insertAll(requests).block(WAIT);

            // Saturated (concurrency 10 > 1 + 3): each key reaches its cap.
            Eventually.until("b runs 3 at once", WAIT, () -> most.containsKey("b") && most.get("b").get() == 3);
            assertThat(storedCaps(db)).containsEntry("a", 1).containsEntry("b", 3);

            // The caps change at runtime: a up to 3, b down to 1 (phase 0, the change, is not judged).
            phase.set(0);
            caps.put("a", 3);
            caps.put("b", 1);
            Eventually.until("the new caps stored", WAIT, () -> storedCaps(db).equals(Map.of("a", 3, "b", 1)));
            // b's claims over its new cap finish; from then on it stays at 1.
            Eventually.until("b down to its new cap", WAIT, () -> executing(db, "caps", "b") <= 1);
            phase.set(2);
            most.clear();
            Eventually.until("a runs 3 at once", WAIT, () -> most.containsKey("a") && most.get("a").get() == 3);
            Eventually.until("b still has work after", WAIT, () -> most.containsKey("b"));

            for (long id : ids) {
                assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            }
            sampling.set(false);
            sampler.join(WAIT.toMillis());
            // The committed state never went over a cap (that each cap was reached the handlers' own
            // counts showed above: a 10 ms sampler of the table can miss the moments on a loaded machine).
            assertThat(seen.get("1a")).as("most executing of a under cap 1, of %s", seen).isBetween(1, 1);
            assertThat(seen.get("1b")).as("most executing of b under cap 3, of %s", seen).isBetween(1, 3);
            assertThat(seen.get("2a")).as("most executing of a under cap 3, of %s", seen).isBetween(1, 3);
            assertThat(seen.get("2b")).as("most executing of b under cap 1, of %s", seen).isBetween(1, 1);
            assertThat(most.get("b").get()).as("b's runs at once under cap 1").isEqualTo(1);
            // The cap gate's counters hold each key's cap.
            assertThat(Sql.query(db, "SELECT key || ' ' || capacity FROM {schema}.durable_gate_slots"
                    + " WHERE gate = 'fairness.caps' ORDER BY key", r -> r.get(0, String.class)))
                    .containsExactly("a 3", "b 1");
        } finally {
            sampling.set(false);
            engine.closeLater().block(WAIT);
        }
    }

    @Test
    void aFunctionAloneCapsTheKeysItAnswersFromTheirFirstPickAndLeavesTheOthersFree(TestDatabase db) throws Exception {
        Fairness fairness = Fairness.builder().maxExecutingPerKey(key -> key.equals("small") ? 2 : null).build();
        assertThat(fairness.capsKeys()).isTrue();
        assertThat(fairness.keyCap("small")).isEqualTo(2);
        assertThat(fairness.keyCap("other")).isNull();
        assertThat(fairness.capGateCapacity()).isEqualTo(Integer.MAX_VALUE);
        assertThat(Fairness.builder().maxExecutingPerKey(key -> 0).build().keyCap("x")).as("below 1: no answer").isNull();
        assertThat(Fairness.builder().maxExecutingPerKey(2).build().capGateCapacity()).isEqualTo(2);
        assertThat(Fairness.equalShares().capsKeys()).isFalse();
        assertThatThrownBy(() -> Fairness.builder().maxExecutingPerKey((java.util.function.Function<String, Integer>) null))
                .isInstanceOf(NullPointerException.class);

        Map<String, AtomicInteger> running = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> most = new ConcurrentHashMap<>();
        JobDefinition<String, String> capped = JobDefinition.of("free", String.class, (String key) -> {
            int now = running.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            most.computeIfAbsent(key, k -> new AtomicInteger()).accumulateAndGet(now, Math::max);
            return Mono.delay(Duration.ofMillis(200)).then(Mono.fromCallable(() -> {
                running.get(key).decrementAndGet();
                return key;
            }));
        }).queue("free");
        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .queue(QueueOptions.builder("free").concurrency(8).pollInterval(Duration.ofMillis(50))
                                .fairness(fairness).build()).build())
                .register(capped).build();
        assertThat(engine.options().gates().get(Fairness.capGate("free")).capacity()).isEqualTo(Integer.MAX_VALUE);
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        AtomicBoolean sampling = new AtomicBoolean(true);
        Thread sampler = sampler(db, "free", seen, sampling);
        try {
            engine.start().block(WAIT);
            sampler.start();
            List<JobRequest> requests = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                requests.add(JobRequest.of("free", "small").fairnessKey("small"));
                requests.add(JobRequest.of("free", "big").fairnessKey("big"));
            }
            List<Long> ids = engine.insertAll(requests).block(WAIT);
            Eventually.until("big runs more than 2 at once", WAIT, () -> most.containsKey("big") && most.get("big").get() > 2);
            for (long id : ids) {
                assertThat(engine.awaitSettled(id, WAIT).block(WAIT).status()).isEqualTo(InstanceStatus.DONE);
            }
            sampling.set(false);
            sampler.join(WAIT.toMillis());
            // From its first pick on: a key not asked about yet is held to one claim, so small never
            // runs over the cap the function gives it, even before its cap is stored.
            assertThat(seen.get("small")).as("most executing of small, of %s", seen).isEqualTo(2);
            assertThat(most.get("small").get()).as("small's runs at once").isBetween(1, 2);
            // Asked: small's cap, 0 for big (no cap of its own, and no static one).
            assertThat(storedCaps(db, "free")).containsEntry("small", 2).containsEntry("big", 0);
        } finally {
            sampling.set(false);
            engine.closeLater().block(WAIT);
        }
    }

    /** Samples the most executing claims per key of {@code queue} into {@code seen} while {@code sampling}. */
    private static Thread sampler(TestDatabase db, String queue, Map<String, Integer> seen, AtomicBoolean sampling) {
        return new Thread(() -> {
            while (sampling.get()) {
                for (String row : Sql.query(db, "SELECT fairness_key || ' ' || count(*) FROM {schema}.durable_instances"
                        + " WHERE queue = $1 AND status = 'executing' GROUP BY fairness_key", r -> r.get(0, String.class),
                        queue)) {
                    String[] parts = row.split(" ");
                    seen.merge(parts[0], Integer.parseInt(parts[1]), Math::max);
                }
                Eventually.sleep(10);
            }
        }, "caps-sampler");
    }

    private static Map<String, Integer> storedCaps(TestDatabase db) {
        return storedCaps(db, "caps");
    }

    private static Map<String, Integer> storedCaps(TestDatabase db, String queue) {
        Map<String, Integer> caps = new HashMap<>();
        for (String row : Sql.query(db, "SELECT fairness_key || ' ' || cap FROM {schema}.durable_fair_keys"
                + " WHERE queue = $1 AND cap IS NOT NULL", r -> r.get(0, String.class), queue)) {
            String[] parts = row.split(" ");
            caps.put(parts[0], Integer.parseInt(parts[1]));
        }
        return caps;
    }

    private static long executing(TestDatabase db, String queue, String key) {
        return Sql.query(db, "SELECT count(*) FROM {schema}.durable_instances WHERE queue = $1"
                + " AND status = 'executing' AND fairness_key = $2", r -> r.get(0, Long.class), queue, key).get(0);
    }
}
