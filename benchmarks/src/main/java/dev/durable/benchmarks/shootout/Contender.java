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

    /** Stops its workers and closes its pools. */
    void stop() throws Exception;

    /** The settings used, for the log. */
    String settings();
}
