package dev.durable.benchmarks.chaos;

import java.util.ArrayList;
import java.util.List;

/** The kinds of fault the harness injects, in the order of one round. */
enum Fault {

    /** A live owner loses its lease and comes back: the worker JVM gets SIGSTOP past its lease, then SIGCONT. */
    JVM_STOP(false),
    /** A burst of {@code pg_terminate_backend} on engine backends, busy ones first. */
    TERMINATE(true),
    /** One engine's connections (the worker JVM's or an in-process engine's) partitioned past the lease, then healed. */
    PARTITION(false),
    /**
     * The worker JVM's open connections frozen, new ones refused for a call timeout (its calls time
     * out, its runs end), then let through (its lost rows come back and it claims them again), then
     * the frozen ones thawed: statements held in the network land after their callers gave up, on
     * rows the same worker holds again under a later attempt.
     */
    STALL(false),
    /** All of an in-process engine's pool connections taken by the harness past the lease (pool exhaustion). */
    POOL_EXHAUST(false),
    /** An in-process engine's pool disposed under it (no drain), a new incarnation started in its place. */
    ENGINE(false),
    /** A slow database: latency on every engine's connections for a while. */
    SLOW_DB(true),
    /** The worker JVM killed with SIGKILL mid-step, and a new one started. */
    JVM_KILL(false),
    /** PostgreSQL killed without a checkpoint ({@code pg_ctl restart -m immediate}): crash recovery. */
    PG_CRASH(true),
    /** Redis stopped for a while and started empty (with {@code --redis}). */
    REDIS_RESTART(true),
    /** PostgreSQL restarted ({@code pg_ctl restart -m fast}). */
    PG_RESTART(true);

    /** Whether the fault strikes every engine (its window excuses every label) or one. */
    final boolean global;

    Fault(boolean global) {
        this.global = global;
    }

    /** One round of every kind, a burst of terminations between some; Redis only when it runs. */
    static List<Fault> round(boolean redis) {
        List<Fault> round = new ArrayList<>();
        for (Fault fault : values()) {
            if (fault == REDIS_RESTART && !redis) {
                continue;
            }
            round.add(fault);
            if (fault == POOL_EXHAUST || fault == JVM_KILL) {
                round.add(TERMINATE);
            }
        }
        return round;
    }
}
