package dev.durable.benchmarks.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import org.junit.jupiter.api.Test;

/**
 * The short chaos run of the suite: one round of every fault kind (however long a loaded machine
 * takes to inject them, within a generous cap), with half the engines on each of two releases of the
 * workload, then the invariants. Count-based, never speed-based.
 * The long run is the same harness: {@code benchmarks/chaos}.
 */
class ChaosIT {

    @Test
    void everyInvariantHoldsThroughOneRoundOfEveryFault() {
        Chaos.Config config = Chaos.Config.shortRun();
        Report report = Chaos.run(config, System.out::println);
        System.out.println(report.details());
        System.out.println(report.line());

        assertThat(report.jobs()).as("instances inserted").isPositive();
        assertThat(report.executions()).as("executions recorded").isPositive();
        // Every fault of the count (the last worker JVM is killed after the load too).
        assertThat(report.faultCount()).as("faults injected: " + report.faults()).isGreaterThanOrEqualTo(config.faults());
        for (Fault kind : config.kinds()) {
            assertThat(report.faults()).as("faults injected").containsKey(kind.name());
        }
        assertThat(report.broken()).as(report.line() + "\n" + report.details()).isEmpty();
        // Both releases ran, the second's new step ran, and flows moved from one release to the other mid-run.
        assertThat(report.releases()).as("releases").containsOnlyKeys("first", "second", "new_step", "migrated")
                .allSatisfy((what, count) -> assertThat(count).as(what).isPositive());
        // Transactional jobs ran, and some of their attempts' writes rolled back (tx_effects above checks them all).
        assertThat(report.transactional()).as("transactional").containsKeys("done", "rolled_back");
        assertThat(report.transactional().get("done")).as("transactional jobs done").isPositive();
        assertThat(report.transactional().get("rolled_back")).as("transactional writes rolled back").isPositive();
        // A clean run leaves nothing behind: the server's files and the workers' logs go with it.
        assertThat(report.kept()).isFalse();
        assertThat(Files.exists(report.workDirectory())).as("work directory " + report.workDirectory()).isFalse();
    }
}
