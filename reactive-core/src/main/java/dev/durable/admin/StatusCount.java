package dev.durable.admin;

import dev.durable.InstanceStatus;

/**
 * How many instances of a queue are in a status. Live statuses are counted exactly; settled ones are
 * estimated from the planner's statistics on a big history ({@code estimated} true, see
 * {@link DurableAdmin#counts()}).
 */
public record StatusCount(String queue, InstanceStatus status, long count, boolean estimated) {
}
