package dev.durable.sync;

import dev.durable.Backoff;
import dev.durable.DuplicateCorrelationKeyException;
import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobHandler;
import dev.durable.JobRequest;
import dev.durable.sync.SyncConfigException.Rule;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import reactor.core.publisher.Mono;

/**
 * Makes each (partner, shard) pull a durable job: the scheduler's trigger only inserts a row, and
 * the engine runs the real pull under a lease, with retries. So a node that crashes mid-pull has
 * the pull retried (by whichever node reaps the lease), and, because every job of one pair carries
 * the concurrency key {@code "sync:" + partner + ":" + shard}, two pulls of one pair never run at
 * once, on any node.
 *
 * <pre>{@code
 * DurableSyncTrigger durable = DurableSyncTrigger.builder(protocol::pull).queue("sync").build();
 * DurableEngine engine = durable.registerOn(DurableEngine.builder(options)).build();
 * SyncScheduler scheduler = SyncScheduler.create(config, durable.on(engine));
 * }</pre>
 *
 * The engine must run the chosen queue. The pull given here runs inside the job: it should complete
 * when the pull is done, not merely started, so that its failure is what gets retried.
 *
 * <p>By default pulls <em>coalesce</em>: while a pull of a pair is waiting or running, a new trigger
 * for that pair inserts nothing (the pending one will see the newer data), so a partner that is
 * down does not pile up one job per tick while its retries back off.
 */
public final class DurableSyncTrigger {

    /** The job type of a pull. */
    public static final String JOB_TYPE = "durable.sync.pull";
    public static final int DEFAULT_MAX_ATTEMPTS = 10;
    public static final Backoff DEFAULT_BACKOFF = Backoff.exponential(Duration.ofSeconds(1), Duration.ofMinutes(1));
    public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(5);

    /** A pull job's arguments. */
    public record PullArgs(String partner, int shard) {
    }

    /** Occupied while waiting (retries included) or running: one live pull per pair. */
    private static final Set<InstanceStatus> LIVE = EnumSet.of(InstanceStatus.RUNNABLE, InstanceStatus.EXECUTING);

    private final SyncPullTrigger pull;
    private final String queue;
    private final int maxAttempts;
    private final Backoff backoff;
    private final Duration timeout;
    private final boolean coalesce;

    private DurableSyncTrigger(Builder b) {
        this.pull = b.pull;
        this.queue = b.queue;
        this.maxAttempts = b.maxAttempts;
        this.backoff = b.backoff;
        this.timeout = b.timeout;
        this.coalesce = b.coalesce;
    }

    /** A durable trigger whose jobs run {@code pull}. */
    public static Builder builder(SyncPullTrigger pull) {
        return new Builder(pull);
    }

    /** The concurrency key of every pull of one pair. */
    public static String concurrencyKey(String partner, int shard) {
        return "sync:" + partner + ":" + shard;
    }

    /** The job type, with the pull as its handler, to register on an engine. */
    public JobDefinition<PullArgs, Void> definition() {
        JobHandler<PullArgs, Void> handler = (args, context) -> pull.trigger(args.partner(), args.shard());
        return JobDefinition.of(JOB_TYPE, PullArgs.class, handler)
                .queue(queue).maxAttempts(maxAttempts).backoff(backoff).timeout(timeout);
    }

    /** Registers {@link #definition()} on {@code builder}; returns it for chaining. */
    public DurableEngine.Builder registerOn(DurableEngine.Builder builder) {
        return builder.register(definition());
    }

    /** The insert for one pull. */
    public JobRequest request(String partner, int shard) {
        String key = concurrencyKey(partner, shard);
        JobRequest request = JobRequest.of(JOB_TYPE, new PullArgs(partner, shard)).queue(queue).concurrencyKey(key);
        return coalesce ? request.correlationKey(key, LIVE) : request;
    }

    /**
     * Inserts the pull job of one pair; emits its id, or completes empty when it coalesced into a
     * pull of that pair already waiting or running.
     */
    public Mono<Long> enqueue(DurableEngine engine, String partner, int shard) {
        return engine.insert(request(partner, shard))
                .onErrorResume(DuplicateCorrelationKeyException.class, duplicate -> Mono.empty());
    }

    /** The trigger to give the scheduler: each pull becomes a job on {@code engine}. */
    public SyncPullTrigger on(DurableEngine engine) {
        if (engine == null) {
            throw new SyncConfigException(Rule.INVALID_OPTION, "engine must not be null");
        }
        return (partner, shard) -> enqueue(engine, partner, shard).then();
    }

    public String queue() {
        return queue;
    }

    public boolean coalesce() {
        return coalesce;
    }

    @Override
    public String toString() {
        return "DurableSyncTrigger{queue=" + queue + ", maxAttempts=" + maxAttempts + ", timeout=" + timeout
                + ", coalesce=" + coalesce + "}";
    }

    /** Options of the pull jobs; each setter checks its argument. */
    public static final class Builder {

        private final SyncPullTrigger pull;
        private String queue = JobDefinition.DEFAULT_QUEUE;
        private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
        private Backoff backoff = DEFAULT_BACKOFF;
        private Duration timeout = DEFAULT_TIMEOUT;
        private boolean coalesce = true;

        private Builder(SyncPullTrigger pull) {
            if (pull == null) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "pull must not be null");
            }
            this.pull = pull;
        }

        /** The queue the pull jobs go to; the engine must run it. */
        public Builder queue(String queue) {
            if (queue == null || queue.isBlank()) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "queue must not be blank, was "
                        + (queue == null ? "null" : "'" + queue + "'"));
            }
            this.queue = queue;
            return this;
        }

        /** Runs of one pull, first included, before it fails for good; at least 1. */
        public Builder maxAttempts(int maxAttempts) {
            if (maxAttempts < 1) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "maxAttempts must be at least 1, was " + maxAttempts);
            }
            this.maxAttempts = maxAttempts;
            return this;
        }

        /** The wait before a failed pull runs again. */
        public Builder backoff(Backoff backoff) {
            if (backoff == null) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "backoff must not be null");
            }
            this.backoff = backoff;
            return this;
        }

        /** A pull running longer than this is cancelled and counts as a failed attempt. */
        public Builder timeout(Duration timeout) {
            if (timeout == null || timeout.isZero() || timeout.isNegative()) {
                throw new SyncConfigException(Rule.INVALID_OPTION, "timeout must be positive, was " + timeout);
            }
            this.timeout = timeout;
            return this;
        }

        /**
         * Whether a trigger for a pair whose pull is waiting or running inserts nothing (default
         * true). Off, every trigger inserts a job, and the concurrency key alone serialises them.
         */
        public Builder coalesce(boolean coalesce) {
            this.coalesce = coalesce;
            return this;
        }

        public DurableSyncTrigger build() {
            return new DurableSyncTrigger(this);
        }
    }
}
