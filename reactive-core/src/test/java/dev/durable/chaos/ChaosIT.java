package dev.durable.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The short chaos run of the suite: two rounds of every fault kind (however long a loaded machine
 * takes to inject them), then the invariants. Count-based, never speed-based. The soak is the same
 * harness for longer; see {@link Chaos}.
 */
class ChaosIT {

    @Test
    void nothingIsLostStuckRunTwiceAtOnceOrCommittedTwiceUnderFaults() {
        Chaos.Report report = Chaos.run(Chaos.Config.shortRun(), System.out::println);
        System.out.println(report.details());
        System.out.println(report.line());

        assertThat(report.jobs()).as("instances inserted").isPositive();
        assertThat(report.executions()).as("executions recorded").isPositive();
        // Every fault of the count (the last worker JVM is killed after the load too).
        assertThat(report.faults()).as("faults injected").isGreaterThanOrEqualTo(Chaos.Config.shortRun().faults());
        assertThat(report.lost()).as("lost: " + report.details()).isZero();
        assertThat(report.stuck()).as("stuck: " + report.details()).isZero();
        assertThat(report.overlap()).as("overlap: " + report.details()).isZero();
        assertThat(report.doubleCommit()).as("double_commit: " + report.details()).isZero();
        assertThat(report.unknownCommits()).as("commits no execution recorded: " + report.details()).isZero();
    }
}
