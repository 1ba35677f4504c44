package dev.durable.admin;

import java.time.Duration;
import java.time.Instant;

/**
 * The rows of one queue that are due now and not started: runnable, their time come, not waiting
 * behind their concurrency key's running row ({@link DurableAdmin#depths}). Rows scheduled ahead and
 * parked ones are not counted. A queue that keeps up has few, and its oldest is young.
 *
 * @param queue the queue
 * @param due how many rows are due now
 * @param oldestDue when the longest-waiting of them became due (the database's clock)
 * @param oldestWait how long it has waited since, as the database measured it
 */
public record QueueDepth(String queue, long due, Instant oldestDue, Duration oldestWait) {
}
