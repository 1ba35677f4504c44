package dev.durable.benchmarks.shootout;

import java.util.List;

/**
 * One system under test. The harness drives every contender through the same protocol
 * ({@link Protocol}): start, warm up, the idle latency phase, the throughput window, stop;
 * its handler is a no-op that only calls {@link Probe#started}.
 */
interface Contender {

    /** The name printed in the RESULT line. */
    String name();

    /** The schema its tables live in, dropped when it is done. */
    String schema();

    /** Creates its tables and starts its workers. */
    void start() throws Exception;

    /** Inserts the jobs as one batch, the way this system recommends; returns once inserted. */
    void insertBatch(List<Long> seqs) throws Exception;

    /** Inserts one job; returns once it is inserted. */
    void insertOne(long seq) throws Exception;

    /** The largest batch {@link #insertBatch} is given. */
    int insertBatchSize();

    /** How many jobs have their completion committed, counted in the database. */
    long committed(Target target, long insertedSoFar);

    /**
     * How it tells that a job's outcome is committed ({@link Probe#settled}), for the log; null when
     * it cannot tell, and then the load phases report enqueue-to-settle as n/a.
     */
    default String settleSource() {
        return null;
    }

    /**
     * Called before each load phase (whose jobs are numbered from {@link Probe#LOAD} again): start
     * watching for settles, if that costs something, and forget the previous phase's.
     */
    default void watchSettles() {
    }

    /** Called after a load phase drained: hand what it watched to {@link Probe#settledAt}. */
    default void reportSettles() {
    }

    /** What its workers did so far, for the per-second log of a load phase; empty when it cannot say. */
    default String activity() {
        return "";
    }

    /** Stops its workers and closes its pools. */
    void stop() throws Exception;

    /** The settings used, for the log. */
    String settings();
}
