package dev.durable.internal.engine;

/**
 * What every part of one queue's scheduler shares: the queue, the worker id it claims rows as,
 * the lease its claims get and the counters they all write.
 */
record QueueContext(String queue, String worker, long leaseMillis, SchedulerCounters counters) {
}
