package dev.durable.benchmarks.shootout;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** What the scaling run reads of the engines' threads; no database. */
class ScalingTest {

    @Test
    void aThreadsCpuTimeIsItsUserAndSystemTicksWhateverItsNameHolds() {
        // A compiler thread's line as Linux writes it: its name has a space, and could hold ") ".
        String stat = "4242 (C2 CompilerThre) S 4200 4200 1 0 -1 4194368 1893 0 0 0 731 58 0 0 20 0 21 0"
                + " 77 1234 5678 18446744073709551615";
        assertEquals(731 + 58, Scaling.cpuTicks(stat));
        assertEquals(5 + 7, Scaling.cpuTicks("1 (a) b) R 1 1 1 0 -1 0 0 0 0 0 5 7 0 0 20 0 1 0 1 1 1"));
    }
}
