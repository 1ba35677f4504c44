package dev.durable;

import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.EnumSet;

/**
 * Work that recurs on a cron schedule: at each due time, the engines that know the schedule insert
 * {@code request} to run at that time, exactly once across all nodes. The guard is the correlation
 * key {@code durable.cron:<name>@<epoch second>}, occupied in every status, so a second insert for
 * the same due time is a refused duplicate whichever node tries. Due times are computed from the
 * database clock. Runs missed while no engine was up are not made up: the next due time is.
 */
public record RecurringJob(String name, Cron cron, ZoneId zone, JobRequest request) {

    public RecurringJob {
        Options.requireName("name", name);
        Options.requireNonNull("cron", cron);
        Options.requireNonNull("zone", zone);
        Options.requireNonNull("request", request);
        if (request.correlationKey() != null || request.runAt() != null || request.runIn() != null) {
            throw new IllegalArgumentException("the request of recurring job " + name
                    + " must not set correlationKey, runAt or runIn: the schedule sets them");
        }
    }

    /** A schedule in UTC. */
    public static RecurringJob of(String name, String cron, JobRequest request) {
        return new RecurringJob(name, Cron.parse(cron), ZoneOffset.UTC, request);
    }

    /** The request for the run due at {@code epochSecond}. */
    public JobRequest due(long epochSecond) {
        return request.runAt(java.time.Instant.ofEpochSecond(epochSecond))
                .correlationKey("durable.cron:" + name + "@" + epochSecond, EnumSet.allOf(InstanceStatus.class));
    }
}
