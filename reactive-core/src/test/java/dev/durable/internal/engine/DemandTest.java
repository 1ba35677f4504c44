package dev.durable.internal.engine;

import static dev.durable.internal.engine.Demand.Trigger.COMMITTING;
import static dev.durable.internal.engine.Demand.Trigger.DEMAND;
import static dev.durable.internal.engine.Demand.Trigger.PICKED;
import static dev.durable.internal.engine.Demand.Trigger.PICKED_FULL;
import static dev.durable.internal.engine.Demand.Trigger.POKE;
import static dev.durable.internal.engine.Demand.Trigger.POLL;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class DemandTest {

    // concurrency 4 + prefetch 4 = ceiling 8, min demand 3

    @Test
    void anIdleSchedulerPicksTheWholeCeilingWhateverTheTrigger() {
        assertThat(Demand.pickSize(POLL, 0, 0, 8, 3, false)).isEqualTo(8);
        assertThat(Demand.pickSize(POKE, 0, 0, 8, 3, false)).isEqualTo(8);
        assertThat(Demand.pickSize(DEMAND, 0, 0, 8, 3, false)).isEqualTo(8);
    }

    @Test
    void demandIsTheCeilingMinusRunningAndBuffered() {
        assertThat(Demand.pickSize(POLL, 4, 1, 8, 3, false)).isEqualTo(3);
        assertThat(Demand.pickSize(POLL, 4, 4, 8, 3, false)).isZero();
        assertThat(Demand.pickSize(PICKED_FULL, 2, 0, 8, 3, false)).isEqualTo(6);
    }

    @Test
    void aBusySchedulerWaitsForMinDemand() {
        assertThat(Demand.pickSize(POLL, 4, 2, 8, 3, false)).isZero();
        assertThat(Demand.pickSize(DEMAND, 3, 0, 8, 6, false)).isZero();
        assertThat(Demand.pickSize(DEMAND, 2, 0, 8, 6, false)).isEqualTo(6);
    }

    @Test
    void minDemandIsIgnoredWhenFullyIdleSoNothingStarves() {
        assertThat(Demand.pickSize(POLL, 0, 0, 8, 50, false)).isEqualTo(8);
        assertThat(Demand.pickSize(POLL, 1, 0, 8, 50, false)).isZero();
    }

    @Test
    void aFinishedRunRefillsTheBufferOnceFreeDemandReachesMinDemand() {
        // Ceiling 8 (say concurrency 4 + prefetch 4), min demand 3: 4 running, 2 buffered.
        assertThat(Demand.pickSize(DEMAND, 4, 2, 8, 3, false)).isZero();
        // One more finished and its slot took a buffered row: 4 running, 1 buffered, 3 free.
        assertThat(Demand.pickSize(DEMAND, 4, 1, 8, 3, false)).isEqualTo(3);
        assertThat(Demand.pickSize(DEMAND, 3, 0, 8, 1, false)).isEqualTo(5);
        // The last pick found nothing: the buffer is served, the queue not read again per run.
        assertThat(Demand.pickSize(DEMAND, 4, 1, 8, 3, true)).isZero();
        assertThat(Demand.pickSize(DEMAND, 4, 0, 8, 3, true)).isEqualTo(4);
    }

    @Test
    void aBusySchedulerDropsPokes() {
        assertThat(Demand.pickSize(POKE, 1, 0, 8, 1, false)).isZero();
        assertThat(Demand.pickSize(POKE, 0, 1, 8, 1, false)).isZero();
    }

    @Test
    void aShortPickOnlyHandsOutWhatItBrought() {
        assertThat(Demand.pickSize(PICKED, 0, 0, 8, 1, false)).isZero();
    }

    @Test
    void aRunWaitingForItsCommitHandsItsSlotOnAndPicksNothing() {
        // Its claim is not free until the commit: the run's end (DEMAND) picks, once.
        assertThat(Demand.pickSize(COMMITTING, 1, 0, 8, 1, false)).isZero();
        assertThat(Demand.pickSize(DEMAND, 0, 0, 8, 1, false)).isEqualTo(8);
    }
}
