package dev.durable.benchmarks.shootout;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** What the harness reads of a process's or thread's CPU time in /proc; no database. */
class ServerCpuTest {

    @Test
    void aThreadsCpuTimeIsItsUserAndSystemTicksWhateverItsNameHolds() {
        // A compiler thread's line as Linux writes it: its name has a space, and could hold ") ".
        String stat = "4242 (C2 CompilerThre) S 4200 4200 1 0 -1 4194368 1893 0 0 0 731 58 3 4 20 0 21 0"
                + " 77 1234 5678 18446744073709551615";
        assertEquals(731 + 58, ServerCpu.cpuTicks(stat));
        assertEquals(5 + 7, ServerCpu.cpuTicks("1 (a) b) R 1 1 1 0 -1 0 0 0 0 0 5 7 9 9 20 0 1 0 1 1 1"));
    }
}
