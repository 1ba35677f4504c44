package dev.durable;

import dev.durable.limit.LimiterFactory;
import dev.durable.limit.PostgresLimiter;
import dev.durable.poke.PokeTransportFactory;
import dev.durable.poke.PokeTransports;
import dev.durable.observation.RunObservationConvention;
import dev.durable.observation.TracePropagation;
import dev.durable.options.Checks;
import dev.durable.options.Option;
import dev.durable.options.OptionList;
import dev.durable.options.OptionValues;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Everything an engine is configured with. Immutable, built once with {@link #builder()}: each
 * setter checks its own argument, {@link Builder#build()} the rules across them, and a broken
 * value throws {@link IllegalArgumentException} naming the option and the rule.
 *
 * <p>Each option is declared once, as an {@link Option} with its name, type, default, check and
 * description ({@link #options()} lists them); the getters, the builder, {@link #mutate()},
 * {@link #toString()}, {@link #equals} and the Spring Boot starter's {@code durable.*} properties
 * all go through those declarations, so none of them can miss an option.
 */
public final class EngineOptions {

    public static final String DEFAULT_SCHEMA = "durable";
    public static final String DEFAULT_NAME = "durable";
    public static final int DEFAULT_POOL_MAX_SIZE = 10;
    public static final Duration DEFAULT_LEASE_TTL = Duration.ofSeconds(30);
    public static final Duration DEFAULT_HEARTBEAT_INTERVAL = Duration.ofSeconds(5);
    public static final Duration DEFAULT_REAPER_INTERVAL = Duration.ofSeconds(5);
    public static final Duration DEFAULT_POKE_WINDOW = Duration.ofMillis(10);
    public static final int DEFAULT_COMMIT_BATCH_SIZE = 256;
    public static final int DEFAULT_COMMIT_PARALLELISM = 2;
    public static final int DEFAULT_PICK_RETRIES = 3;
    public static final int DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20;
    public static final Duration DEFAULT_RECURRING_INTERVAL = Duration.ofSeconds(1);
    public static final int DEFAULT_EVENT_BUFFER_SIZE = 1024;
    public static final Duration DEFAULT_RETENTION = Duration.ofDays(7);
    public static final Duration DEFAULT_RECONCILE_INTERVAL = Duration.ofMinutes(5);
    public static final Duration DEFAULT_ACQUIRE_TIMEOUT = Duration.ofSeconds(5);
    public static final Duration DEFAULT_STATEMENT_TIMEOUT = Duration.ofSeconds(10);
    public static final Duration DEFAULT_CALL_TIMEOUT = Duration.ofSeconds(15);
    public static final int DEFAULT_MAX_INBOX_SIGNALS = 1000;
    public static final int DEFAULT_MAX_BATCH_BYTES = 16 << 20;
    public static final Duration DEFAULT_BUCKET_SWEEP_INTERVAL = Duration.ofMinutes(1);
    /** How often fair keys are healed (a row committed after its key was parked waits at most this). */
    public static final Duration DEFAULT_FAIR_KEY_HEAL_INTERVAL = Duration.ofSeconds(10);
    /** How often keys left without a head are healed (their waiting rows wait at most this). */
    public static final Duration DEFAULT_KEY_HEAL_INTERVAL = Duration.ofSeconds(30);
    /** How often the elections a held key lock made give up are tried again (see {@link #skippedKeyElections()}). */
    public static final Duration DEFAULT_SKIPPED_KEY_ELECTION_INTERVAL = Duration.ofSeconds(1);
    /** How often the analyzer looks for hot tables whose statistics are behind their contents (one catalog query). */
    public static final Duration DEFAULT_ANALYZER_INTERVAL = Duration.ofSeconds(2);
    /** How often the vacuumer looks for hot tables with many dead rows (one catalog query). */
    public static final Duration DEFAULT_VACUUMER_INTERVAL = Duration.ofSeconds(2);
    public static final Duration DEFAULT_SETTLE_POLL_INTERVAL = Duration.ofMillis(200);
    public static final int DEFAULT_INSERT_BATCH_SIZE = 256;
    public static final Duration DEFAULT_INSERT_BATCH_DELAY = Duration.ofMillis(2);
    public static final int DEFAULT_INSERT_BUFFER_CAPACITY = 4096;
    public static final int DEFAULT_PERMIT_TRY_CONCURRENCY = 2;
    public static final int DEFAULT_TRANSACTIONAL_CONCURRENCY = 4;

    /** Every option, in the order toString prints them. */
    private static final OptionList<EngineOptions> OPTIONS = new OptionList<>("EngineOptions");

    private static final Option<ConnectionFactory> CONNECTION_FACTORY = OPTIONS.add("connectionFactory",
            ConnectionFactory.class, null, Checks.notNull(),
            "The caller's connection factory (pooled or not), which the engine uses and does not close; instead of url.");
    private static final Option<String> URL = OPTIONS.add(Option.of("url", String.class, null, EngineOptions::checkUrl,
            "The R2DBC URL (r2dbc:postgresql://user:password@host:5432/db) the engine pools its own connections to;"
                    + " instead of connectionFactory.").printedAs(EngineOptions::maskPassword));
    private static final Option<Integer> POOL_MAX_SIZE = OPTIONS.add("poolMaxSize", Integer.class,
            DEFAULT_POOL_MAX_SIZE, Checks.atLeast(2),
            "The most connections of the engine's own pool (with url): at least the number of queues plus"
                    + " commitParallelism plus one.");
    private static final Option<Duration> ACQUIRE_TIMEOUT = OPTIONS.add("acquireTimeout", Duration.class,
            DEFAULT_ACQUIRE_TIMEOUT, Checks.positive(),
            "How long the engine's own pool waits for a free (or new) connection before the call fails.");
    private static final Option<Duration> STATEMENT_TIMEOUT = OPTIONS.add("statementTimeout", Duration.class,
            DEFAULT_STATEMENT_TIMEOUT, Checks.positive(),
            "The server's statement_timeout on the engine's own connections (with url).");
    private static final Option<Duration> CALL_TIMEOUT = OPTIONS.add("callTimeout", Duration.class,
            DEFAULT_CALL_TIMEOUT, Checks.positive(),
            "The longest any one database call of the engine may take, connection included; past it the call fails"
                    + " and its connection is discarded.");
    private static final Option<String> SCHEMA = OPTIONS.add("schema", String.class, DEFAULT_SCHEMA,
            Checks.identifier(), "The PostgreSQL schema of Durable's tables, created if missing.");
    private static final Option<String> NAME = OPTIONS.add("name", String.class, DEFAULT_NAME,
            EngineOptions::checkName,
            "This engine's name, part of its workers' identity; two engines running at once in one process need"
                    + " different names.");
    private static final Option<Map<String, QueueOptions>> QUEUES = OPTIONS.add(Option.of("queues", Map.class,
            Map.<String, QueueOptions>of(), Checks.notNull(), "The queues this engine runs, by name.")
            .printedAs(queues -> queues.values().toString()));
    private static final Option<Duration> LEASE_TTL = OPTIONS.add("leaseTtl", Duration.class, DEFAULT_LEASE_TTL,
            Checks.positive(), "How long a claim stays valid without a heartbeat; more than twice heartbeatInterval.");
    private static final Option<Duration> HEARTBEAT_INTERVAL = OPTIONS.add("heartbeatInterval", Duration.class,
            DEFAULT_HEARTBEAT_INTERVAL, Checks.positive(), "How often the leases of held rows are renewed.");
    private static final Option<Maintenance.TaskOptions> REAPER = task("reaper",
            Maintenance.TaskOptions.every(DEFAULT_REAPER_INTERVAL),
            "The reaper: expired leases back to runnable after their backoff, or to failed past max attempts.");
    private static final Option<Maintenance.TaskOptions> AWAIT_EXPIRY = task("awaitExpiry",
            Maintenance.TaskOptions.every(DEFAULT_REAPER_INTERVAL),
            "The expiry of await deadlines: parked instances past their deadline resume.");
    private static final Option<Maintenance.TaskOptions> GARBAGE_COLLECTOR = task("garbageCollector",
            Maintenance.TaskOptions.every(DEFAULT_REAPER_INTERVAL),
            "The garbage collector: settled instances past the retention are deleted.");
    private static final Option<Boolean> RUN_MAINTENANCE = OPTIONS.add("runMaintenance", Boolean.class, true,
            Checks.notNull(), "Whether this engine runs maintenance ticks at all; false switches every task off.");
    private static final Option<Duration> POKE_WINDOW = OPTIONS.add("pokeWindow", Duration.class,
            DEFAULT_POKE_WINDOW, Checks.positive(),
            "The window in which an idle scheduler coalesces the pokes behind the first into one pick.");
    private static final Option<PokeTransportFactory> POKE_TRANSPORT = OPTIONS.add(Option.of("pokeTransport",
            PokeTransportFactory.class, PokeTransports.local(), Checks.notNull(),
            "How inserts and signals wake the schedulers: local (in-process only), postgres-notify (LISTEN/NOTIFY"
                    + " on one dedicated connection, across nodes) or none (polling only).")
            .readFrom(EngineOptions::pokeTransportNamed, "local", "postgres-notify", "none"));
    private static final Option<Integer> COMMIT_BATCH_SIZE = OPTIONS.add("commitBatchSize", Integer.class,
            DEFAULT_COMMIT_BATCH_SIZE, Checks.atLeast(1), "The most outcomes committed in one transaction.");
    private static final Option<Integer> COMMIT_PARALLELISM = OPTIONS.add("commitParallelism", Integer.class,
            DEFAULT_COMMIT_PARALLELISM, Checks.atLeast(1), "The most outcome transactions in flight at once.");
    private static final Option<Integer> PICK_RETRIES = OPTIONS.add("pickRetries", Integer.class,
            DEFAULT_PICK_RETRIES, Checks.atLeast(0), "How often a pick is retried when a concurrency key was taken under it.");
    private static final Option<Integer> MAX_PAYLOAD_BYTES = OPTIONS.add("maxPayloadBytes", Integer.class,
            DEFAULT_MAX_PAYLOAD_BYTES, Checks.atLeast(16),
            "The largest JSON of arguments, state or a payload that an insert accepts.");
    private static final Option<Integer> MAX_INBOX_SIGNALS = OPTIONS.add("maxInboxSignals", Integer.class,
            DEFAULT_MAX_INBOX_SIGNALS, Checks.atLeast(1),
            "The most unconsumed signals an instance's inbox holds; a signal past it is refused.");
    private static final Option<Integer> MAX_BATCH_BYTES = OPTIONS.add("maxBatchBytes", Integer.class,
            DEFAULT_MAX_BATCH_BYTES, Checks.atLeast(16),
            "The most bytes one insert call may carry in aggregate (insertAll, a transactional insert, the children"
                    + " of one step); at least maxPayloadBytes.");
    private static final Option<Boolean> REJECT_UNKNOWN_TYPES = OPTIONS.add("rejectUnknownTypes", Boolean.class, true,
            Checks.notNull(), "Whether inserting a type with no definition on this engine is an error.");
    private static final Option<Boolean> APPLY_MIGRATIONS = OPTIONS.add("applyMigrations", Boolean.class, true,
            Checks.notNull(), "Whether the engine applies its schema migrations on start (off when Flyway runs them).");
    private static final Option<JsonCodec> CODEC = OPTIONS.add("codec", JsonCodec.class, new JacksonJsonCodec(),
            Checks.notNull(), "How arguments, state and payloads become JSON.");
    private static final Option<Scheduler> HANDLER_SCHEDULER = OPTIONS.add("handlerScheduler", Scheduler.class,
            Schedulers.boundedElastic(), Checks.notNull(), "Where handlers are invoked (bounded elastic by default).");
    private static final Option<Duration> RECURRING_INTERVAL = OPTIONS.add("recurringInterval", Duration.class,
            DEFAULT_RECURRING_INTERVAL, Checks.positive(),
            "How often the engine checks that the next run of each recurring job is inserted.");
    private static final Option<MeterRegistry> METER_REGISTRY = OPTIONS.add("meterRegistry", MeterRegistry.class,
            new CompositeMeterRegistry(), Checks.notNull(), "Where the engine's meters go; none are kept without one.");
    private static final Option<ObservationRegistry> OBSERVATION_REGISTRY = OPTIONS.add("observationRegistry",
            ObservationRegistry.class, ObservationRegistry.NOOP, Checks.notNull(),
            "Where an observation around each run goes (a tracing bridge makes a span of each).");
    private static final Option<RunObservationConvention> RUN_OBSERVATION_CONVENTION = OPTIONS.add(
            "runObservationConvention", RunObservationConvention.class, null, Checks.notNull(),
            "Replaces the default naming and tags of run observations.");
    private static final Option<TracePropagation> TRACE_PROPAGATION = OPTIONS.add("tracePropagation",
            TracePropagation.class, TracePropagation.NONE, Checks.notNull(),
            "How the trace context of inserts and signals is stored with their rows and followed by the runs.");
    private static final Option<Integer> EVENT_BUFFER_SIZE = OPTIONS.add("eventBufferSize", Integer.class,
            DEFAULT_EVENT_BUFFER_SIZE, Checks.atLeast(1),
            "Events each subscriber of events() may fall behind by before its oldest drop.");
    private static final Option<Map<String, Limits.Gate>> GATES = OPTIONS.add(Option.of("gates", Map.class,
            Map.<String, Limits.Gate>of(), Checks.notNull(), "The gates: executing instances per key, by name.")
            .printedAs(gates -> gates.values().toString()));
    private static final Option<Map<String, Limits.RateLimit>> RATE_LIMITS = OPTIONS.add(Option.of("rateLimits",
            Map.class, Map.<String, Limits.RateLimit>of(), Checks.notNull(), "The token buckets, by name.")
            .printedAs(limits -> limits.values().toString()));
    private static final Option<Map<String, Limits.Window>> WINDOWS = OPTIONS.add(Option.of("windows", Map.class,
            Map.<String, Limits.Window>of(), Checks.notNull(), "The sliding windows, by name.")
            .printedAs(windows -> windows.values().toString()));
    private static final Option<Duration> RETENTION = OPTIONS.add("retention", Duration.class, DEFAULT_RETENTION,
            Checks.positive(), "How long settled instances are kept (children of live parents longer).");
    private static final Option<Maintenance.TaskOptions> LIMITER_RECONCILE = task("limiterReconcile",
            Maintenance.TaskOptions.every(DEFAULT_RECONCILE_INTERVAL),
            "The limiter's healing of its counters (PostgreSQL: gate counters recounted; no batches).");
    private static final Option<Maintenance.TaskOptions> BUCKET_SWEEPER = task("bucketSweeper",
            Maintenance.TaskOptions.every(DEFAULT_BUCKET_SWEEP_INTERVAL),
            "The sweep of rate-limit buckets that have been full again for a while.");
    private static final Option<Maintenance.TaskOptions> FAIR_KEY_HEALER = task("fairKeyHealer",
            Maintenance.TaskOptions.every(DEFAULT_FAIR_KEY_HEAL_INTERVAL),
            "The healing of fair keys; runs only with a fair queue.");
    private static final Option<Maintenance.TaskOptions> KEY_HEALER = task("keyHealer",
            Maintenance.TaskOptions.every(DEFAULT_KEY_HEAL_INTERVAL),
            "The healing of concurrency keys left without a head (batch size: keys walked).");
    private static final Option<Maintenance.TaskOptions> SKIPPED_KEY_ELECTIONS = task("skippedKeyElections",
            Maintenance.TaskOptions.every(DEFAULT_SKIPPED_KEY_ELECTION_INTERVAL),
            "The retry of key elections that gave up waiting for a key's lock another transaction held.");
    private static final Option<Maintenance.TaskOptions> ANALYZER = task("analyzer",
            Maintenance.TaskOptions.every(DEFAULT_ANALYZER_INTERVAL).disabled(),
            "The analyzer of hot tables whose planner statistics are behind their contents (one catalog query a"
                    + " pass; no batches); off by default.");
    private static final Option<Maintenance.TaskOptions> VACUUMER = task("vacuumer",
            Maintenance.TaskOptions.every(DEFAULT_VACUUMER_INTERVAL),
            "The VACUUM of hot tables holding 10,000 dead rows or more (one catalog query a pass; no batches).");
    private static final Option<LimiterFactory> LIMITER = OPTIONS.add("limiter", LimiterFactory.class,
            PostgresLimiter.factory(), Checks.notNull(),
            "Who admits rows of gates and rate limits (PostgreSQL, in the pick, by default).");
    private static final Option<Duration> SETTLE_POLL_INTERVAL = OPTIONS.add("settlePollInterval", Duration.class,
            DEFAULT_SETTLE_POLL_INTERVAL, Checks.positive(),
            "How often the shared read of awaitSettled looks for changes made by other engines.");
    private static final Option<Integer> INSERT_BATCH_SIZE = OPTIONS.add("insertBatchSize", Integer.class,
            DEFAULT_INSERT_BATCH_SIZE, Checks.atLeast(1), "The most requests of insertAsync sent in one flush.");
    private static final Option<Duration> INSERT_BATCH_DELAY = OPTIONS.add("insertBatchDelay", Duration.class,
            DEFAULT_INSERT_BATCH_DELAY, Checks.positive(),
            "The longest a request of insertAsync waits for its batch to fill before it is flushed.");
    private static final Option<Integer> INSERT_BUFFER_CAPACITY = OPTIONS.add("insertBufferCapacity", Integer.class,
            DEFAULT_INSERT_BUFFER_CAPACITY, Checks.atLeast(1),
            "The most requests of insertAsync buffered or in flight; more are inserted directly.");
    private static final Option<Integer> PERMIT_TRY_CONCURRENCY = OPTIONS.add("permitTryConcurrency", Integer.class,
            DEFAULT_PERMIT_TRY_CONCURRENCY, Checks.atLeast(1),
            "The most tries of limits().acquire/tryAcquire asking the limiter at once; more wait their turn.");
    private static final Option<Integer> TRANSACTIONAL_CONCURRENCY = OPTIONS.add("transactionalConcurrency",
            Integer.class, DEFAULT_TRANSACTIONAL_CONCURRENCY, Checks.atLeast(1),
            "The most runs of transactional handlers at once, each holding one of the engine's connections; more"
                    + " wait their turn.");

    /** A maintenance task's options: set whole, or part by part (switch, tick, batch size, budget, timeout). */
    private static Option<Maintenance.TaskOptions> task(String name, Maintenance.TaskOptions defaultValue,
            String description) {
        return OPTIONS.add(Option.of(name, Maintenance.TaskOptions.class, defaultValue, Checks.notNull(), description),
                Maintenance.TaskOptions.OPTIONS);
    }

    /** The values set; an option not in it has its default. */
    private final OptionValues values;

    private EngineOptions(OptionValues values) {
        this.values = values;
    }

    private <T> T get(Option<T> option) {
        return values.get(option);
    }

    /**
     * Every option, in declaration order, with its name, type, default, rule and description: what
     * the Spring Boot starter reads its {@code durable.*} properties and their metadata from.
     */
    public static OptionList<EngineOptions> options() {
        return OPTIONS;
    }

    public static Builder builder() {
        return new Builder(OptionValues.none());
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        return new Builder(values);
    }

    /** The caller's connection factory, when one was given instead of a URL. */
    public @Nullable ConnectionFactory connectionFactory() {
        return get(CONNECTION_FACTORY);
    }

    /** The R2DBC URL the engine pools connections to, when no factory was given. */
    public @Nullable String url() {
        return get(URL);
    }

    public int poolMaxSize() {
        return get(POOL_MAX_SIZE);
    }

    /** How long the engine's own pool waits for a free (or new) connection before the call fails. */
    public Duration acquireTimeout() {
        return get(ACQUIRE_TIMEOUT);
    }

    /** The server's {@code statement_timeout} on the engine's own connections (with {@link #url()}). */
    public Duration statementTimeout() {
        return get(STATEMENT_TIMEOUT);
    }

    /**
     * The longest any one database call of the engine may take, connection included: a pick, a
     * commit, a heartbeat, a release, a maintenance batch, a client call. Past it the call fails
     * with {@link DatabaseTimeoutException} and its connection is discarded, so a stalled connection
     * costs a timeout, never a stopped queue.
     */
    public Duration callTimeout() {
        return get(CALL_TIMEOUT);
    }

    public String schema() {
        return get(SCHEMA);
    }

    public String name() {
        return get(NAME);
    }

    public Map<String, QueueOptions> queues() {
        return get(QUEUES);
    }

    public Duration leaseTtl() {
        return get(LEASE_TTL);
    }

    public Duration heartbeatInterval() {
        return get(HEARTBEAT_INTERVAL);
    }

    /** The reaper: expired leases back to runnable after their backoff, or to failed past max attempts. */
    public Maintenance.TaskOptions reaper() {
        return get(REAPER);
    }

    /** The expiry of await deadlines: parked instances past their deadline resume. */
    public Maintenance.TaskOptions awaitExpiry() {
        return get(AWAIT_EXPIRY);
    }

    /** The garbage collector: settled instances past the {@link #retention()} are deleted. */
    public Maintenance.TaskOptions garbageCollector() {
        return get(GARBAGE_COLLECTOR);
    }

    /** Whether this engine runs any maintenance tick; each task also has its own switch. */
    public boolean runMaintenance() {
        return get(RUN_MAINTENANCE);
    }

    public Duration pokeWindow() {
        return get(POKE_WINDOW);
    }

    public PokeTransportFactory pokeTransport() {
        return get(POKE_TRANSPORT);
    }

    public int commitBatchSize() {
        return get(COMMIT_BATCH_SIZE);
    }

    public int commitParallelism() {
        return get(COMMIT_PARALLELISM);
    }

    public int pickRetries() {
        return get(PICK_RETRIES);
    }

    public int maxPayloadBytes() {
        return get(MAX_PAYLOAD_BYTES);
    }

    /**
     * The most unconsumed signals an instance's inbox holds: every claim of the instance carries its
     * inbox, so it is bounded; a signal past it is refused with {@link InboxFullException}.
     */
    public int maxInboxSignals() {
        return get(MAX_INBOX_SIGNALS);
    }

    /**
     * The most bytes (UTF-8: payloads, keys and names) one insert call may carry in aggregate:
     * {@code insertAll}, a transactional insert, the children of one step. A batch past it is
     * refused whole with {@link BatchTooLargeException}, before anything is written, and checked as
     * it is built, so a huge batch costs the engine no more than this much heap. At least
     * {@link #maxPayloadBytes()}.
     */
    public int maxBatchBytes() {
        return get(MAX_BATCH_BYTES);
    }

    public boolean rejectUnknownTypes() {
        return get(REJECT_UNKNOWN_TYPES);
    }

    public boolean applyMigrations() {
        return get(APPLY_MIGRATIONS);
    }

    public JsonCodec codec() {
        return get(CODEC);
    }

    public Scheduler handlerScheduler() {
        return get(HANDLER_SCHEDULER);
    }

    public Duration recurringInterval() {
        return get(RECURRING_INTERVAL);
    }

    /** Where the engine's meters go; a registry with no backend by default. */
    public MeterRegistry meterRegistry() {
        return get(METER_REGISTRY);
    }

    public ObservationRegistry observationRegistry() {
        return get(OBSERVATION_REGISTRY);
    }

    public @Nullable RunObservationConvention runObservationConvention() {
        return get(RUN_OBSERVATION_CONVENTION);
    }

    /** How the trace context of inserts and signals is stored and followed; none by default. */
    public TracePropagation tracePropagation() {
        return get(TRACE_PROPAGATION);
    }

    public int eventBufferSize() {
        return get(EVENT_BUFFER_SIZE);
    }

    public Map<String, Limits.Gate> gates() {
        return get(GATES);
    }

    public Map<String, Limits.RateLimit> rateLimits() {
        return get(RATE_LIMITS);
    }

    /** The sliding windows ({@link Limits.Window}): permits outside jobs take from them. */
    public Map<String, Limits.Window> windows() {
        return get(WINDOWS);
    }

    /** How long settled instances are kept before maintenance deletes them. */
    public Duration retention() {
        return get(RETENTION);
    }

    /** The limiter's healing of its counters (PostgreSQL: gate counters recounted). */
    public Maintenance.TaskOptions limiterReconcile() {
        return get(LIMITER_RECONCILE);
    }

    /** The sweep of rate-limit buckets that have been full again for a while. */
    public Maintenance.TaskOptions bucketSweeper() {
        return get(BUCKET_SWEEPER);
    }

    /** The healing of fair keys (see {@link Maintenance#healFairKeys()}); runs only with a fair queue. */
    public Maintenance.TaskOptions fairKeyHealer() {
        return get(FAIR_KEY_HEALER);
    }

    /** The healing of concurrency keys left without a head (see {@link Maintenance#healKeys()}). */
    public Maintenance.TaskOptions keyHealer() {
        return get(KEY_HEALER);
    }

    /**
     * The retry of key elections that gave up waiting for a key's lock another transaction held
     * (part of {@link Maintenance#healKeys()}); every second by default.
     */
    public Maintenance.TaskOptions skippedKeyElections() {
        return get(SKIPPED_KEY_ELECTIONS);
    }

    /**
     * The analyzer of hot tables whose statistics are behind their contents (see {@link
     * Maintenance#analyze()}); off by default (docs/operations.md, "The analyzer", says when to switch it on).
     */
    public Maintenance.TaskOptions analyzer() {
        return get(ANALYZER);
    }

    /**
     * The vacuumer of hot tables with many dead rows (see {@link Maintenance#vacuum()}); on by default
     * (docs/operations.md, "The vacuumer", says why and when to switch it off).
     */
    public Maintenance.TaskOptions vacuumer() {
        return get(VACUUMER);
    }

    /** Who admits rows of gates and rate limits (PostgreSQL, in the pick, by default). */
    public LimiterFactory limiter() {
        return get(LIMITER);
    }

    /** How often the shared read of {@code awaitSettled} looks for changes made by other engines. */
    public Duration settlePollInterval() {
        return get(SETTLE_POLL_INTERVAL);
    }

    /** The most requests of {@code insertAsync} sent in one flush. */
    public int insertBatchSize() {
        return get(INSERT_BATCH_SIZE);
    }

    /** The longest a request of {@code insertAsync} waits for its batch to fill before it is flushed. */
    public Duration insertBatchDelay() {
        return get(INSERT_BATCH_DELAY);
    }

    /** The most requests of {@code insertAsync} buffered or in flight; more are inserted directly. */
    public int insertBufferCapacity() {
        return get(INSERT_BUFFER_CAPACITY);
    }

    /** The most tries of {@code limits().acquire/tryAcquire} asking the limiter at once; more wait their turn. */
    public int permitTryConcurrency() {
        return get(PERMIT_TRY_CONCURRENCY);
    }

    /**
     * The most runs of transactional handlers ({@link JobDefinition#transactional},
     * {@link StepHandler#transactional}) at once. Each holds one of the engine's connections from its
     * start to its commit, so they must leave the picks, commits and heartbeats theirs: with
     * {@link #url()} and a transactional type registered, the pool must have this many connections on
     * top of what {@link #poolMaxSize()} needs already. More runs wait their turn, holding their claims.
     */
    public int transactionalConcurrency() {
        return get(TRANSACTIONAL_CONCURRENCY);
    }

    /**
     * The engine's own pool (with {@link #url()}) serves each queue's pick, the group commits and
     * maintenance at once, and, when a transactional type is registered and queues run,
     * {@link #transactionalConcurrency()} runs that each hold a connection throughout: fewer
     * connections and a busy queue waits for a commit that waits for a connection. The rule, in one
     * place for the options' own check and the engine builder's (which knows the types).
     */
    void requirePoolFits(boolean transactionalRuns) {
        if (url() == null) {
            return;
        }
        int needed = queues().size() + commitParallelism() + 1;
        if (poolMaxSize() < needed) {
            throw new IllegalArgumentException("poolMaxSize must be at least the number of queues plus"
                    + " commitParallelism plus one (" + needed + " for " + queues().size() + " queues and"
                    + " commitParallelism " + commitParallelism() + "), was " + poolMaxSize());
        }
        needed += transactionalConcurrency();
        if (transactionalRuns && !queues().isEmpty() && poolMaxSize() < needed) {
            throw new IllegalArgumentException("poolMaxSize must be at least the number of queues plus"
                    + " commitParallelism plus one plus transactionalConcurrency when a transactional type is"
                    + " registered (" + needed + " for " + queues().size() + " queues, commitParallelism "
                    + commitParallelism() + " and transactionalConcurrency " + transactionalConcurrency() + "), was "
                    + poolMaxSize());
        }
    }

    /** Every option with its value, passwords masked; options with no value (no factory, say) left out. */
    @Override
    public String toString() {
        return OPTIONS.print(values);
    }

    /** Equal when every option has the same value. */
    @Override
    public boolean equals(Object other) {
        return other instanceof EngineOptions that && values.equals(that.values);
    }

    @Override
    public int hashCode() {
        return values.hashCode();
    }

    /** The URL with any password replaced, for logs and toString. */
    static String maskPassword(String url) {
        return Urls.masked(url);
    }

    private static String checkUrl(String name, String url) {
        Options.requireNonNull(name, url);
        if (!url.startsWith("r2dbc:")) {
            throw new IllegalArgumentException(name + " must be an R2DBC URL (r2dbc:postgresql://...), was "
                    + maskPassword(url));
        }
        // R2DBC's parser ends the user info at the first '@': an unencoded '@' in a password sends the
        // rest of it to the driver as the host (and into its connection errors).
        int start = url.indexOf("//");
        if (start >= 0) {
            String authority = url.substring(start + 2).split("[/?#]", 2)[0];
            if (authority.indexOf('@') != authority.lastIndexOf('@')) {
                throw new IllegalArgumentException(name + " must percent-encode '@' in its user name and password"
                        + " (as %40), was " + maskPassword(url));
            }
        }
        return url;
    }

    /** The transport a text names: local, postgres-notify or none (case, dashes and underscores aside). */
    private static PokeTransportFactory pokeTransportNamed(String text) {
        return switch (text.toLowerCase(Locale.ROOT).replace("-", "").replace("_", "")) {
            case "local" -> PokeTransports.local();
            case "postgresnotify" -> PokeTransports.postgresNotify();
            case "none" -> PokeTransports.none();
            default -> throw new IllegalArgumentException("pokeTransport must be local, postgres-notify or none,"
                    + " was '" + text + "'");
        };
    }

    private static String checkName(String name, String value) {
        Options.requireName(name, value);
        if (value.chars().anyMatch(Character::isWhitespace)) {
            throw new IllegalArgumentException(name + " must not contain blanks, was '" + value + "'");
        }
        return value;
    }

    public static final class Builder {

        private OptionValues values;

        private Builder(OptionValues values) {
            this.values = values;
        }

        /**
         * Sets any option of {@link #options()}, but the collections (queues, gates, rate limits and
         * windows, added one by one with their own methods): the same as the option's own setter.
         */
        public <T> Builder set(Option<T> option, T value) {
            if (option.type() == Map.class) {
                throw new IllegalArgumentException(option.name() + " are added one at a time, with their own method");
            }
            OptionValues changed = OPTIONS.set(values, option, value);
            // One source of connections: a URL replaces a factory set before, and the other way round.
            values = option == URL ? changed.without(CONNECTION_FACTORY)
                    : option == CONNECTION_FACTORY ? changed.without(URL) : changed;
            return this;
        }

        /** Adds {@code value} under {@code key} to a map option; a key is configured once. */
        private <V> Builder add(Option<Map<String, V>> option, String what, String key, V value) {
            Map<String, V> current = values.get(option);
            if (current.containsKey(key)) {
                throw new IllegalArgumentException(what + " '" + key + "' is configured twice");
            }
            Map<String, V> added = new LinkedHashMap<>(current);
            added.put(key, value);
            values = values.with(option, Collections.unmodifiableMap(added));
            return this;
        }

        /**
         * Connections come from the caller's factory (pooled or not); the engine does not close it.
         * Replaces a {@link #url} set before.
         */
        public Builder connectionFactory(ConnectionFactory connectionFactory) {
            return set(CONNECTION_FACTORY, connectionFactory);
        }

        /**
         * The engine pools its own connections to this R2DBC URL ({@code r2dbc:postgresql://...}).
         * Replaces a {@link #connectionFactory} set before.
         */
        public Builder url(String url) {
            return set(URL, url);
        }

        /** The most connections of the engine's own pool (with {@link #url}). */
        public Builder poolMaxSize(int poolMaxSize) {
            return set(POOL_MAX_SIZE, poolMaxSize);
        }

        /** How long the engine's own pool waits for a free (or new) connection (default 5 s). */
        public Builder acquireTimeout(Duration acquireTimeout) {
            return set(ACQUIRE_TIMEOUT, acquireTimeout);
        }

        /** The server's statement_timeout on the engine's own connections (default 10 s). */
        public Builder statementTimeout(Duration statementTimeout) {
            return set(STATEMENT_TIMEOUT, statementTimeout);
        }

        /** The longest any one database call of the engine may take, connection included (default 15 s). */
        public Builder callTimeout(Duration callTimeout) {
            return set(CALL_TIMEOUT, callTimeout);
        }

        /** The PostgreSQL schema of Durable's tables, created if missing. */
        public Builder schema(String schema) {
            return set(SCHEMA, schema);
        }

        /**
         * This engine's name: part of its workers' identity. Two engines that run at once in one
         * process must have different names.
         */
        public Builder name(String name) {
            return set(NAME, name);
        }

        /** A queue this engine runs; names are unique. */
        public Builder queue(QueueOptions queue) {
            Options.requireNonNull("queue", queue);
            add(QUEUES, "queue", queue.name(), queue);
            // A per-key cap of a fair queue is a gate keyed by the fairness key (Fairness#capGate), its
            // capacity the static cap; a key the cap function caps is admitted at its own (PickSql).
            return queue.fairness().capsKeys()
                    ? gate(Fairness.capGate(queue.name()), queue.fairness().capGateCapacity()) : this;
        }

        /** A queue with default knobs. */
        public Builder queue(String name) {
            return queue(QueueOptions.of(name));
        }

        /** How long a claim stays valid without a heartbeat. */
        public Builder leaseTtl(Duration leaseTtl) {
            return set(LEASE_TTL, leaseTtl);
        }

        public Builder heartbeatInterval(Duration heartbeatInterval) {
            return set(HEARTBEAT_INTERVAL, heartbeatInterval);
        }

        /** How often the reaper runs: short for {@code reaper(reaper.withInterval(reaperInterval))}. */
        public Builder reaperInterval(Duration reaperInterval) {
            Options.requirePositive("reaperInterval", reaperInterval);
            return set(REAPER, values.get(REAPER).withInterval(reaperInterval));
        }

        /** The reaper's switch, tick, batch size, budget and timeout. */
        public Builder reaper(Maintenance.TaskOptions reaper) {
            return set(REAPER, reaper);
        }

        /** The await-deadline expiry's switch, tick, batch size, budget and timeout. */
        public Builder awaitExpiry(Maintenance.TaskOptions awaitExpiry) {
            return set(AWAIT_EXPIRY, awaitExpiry);
        }

        /** The garbage collector's switch, tick, batch size, budget and timeout (what it keeps: {@link #retention}). */
        public Builder garbageCollector(Maintenance.TaskOptions garbageCollector) {
            return set(GARBAGE_COLLECTOR, garbageCollector);
        }

        /**
         * Whether this engine runs maintenance ticks at all (any node may; every task is safe on
         * several nodes at once). False switches every task off, whatever its own switch says.
         */
        public Builder runMaintenance(boolean runMaintenance) {
            return set(RUN_MAINTENANCE, runMaintenance);
        }

        /** The window in which an idle scheduler coalesces the pokes behind the first into one pick. */
        public Builder pokeWindow(Duration pokeWindow) {
            return set(POKE_WINDOW, pokeWindow);
        }

        public Builder pokeTransport(PokeTransportFactory pokeTransport) {
            return set(POKE_TRANSPORT, pokeTransport);
        }

        /** The most outcomes committed in one transaction. */
        public Builder commitBatchSize(int commitBatchSize) {
            return set(COMMIT_BATCH_SIZE, commitBatchSize);
        }

        /** The most outcome transactions in flight at once. */
        public Builder commitParallelism(int commitParallelism) {
            return set(COMMIT_PARALLELISM, commitParallelism);
        }

        /** How often a pick is retried when a concurrency key was taken under it. */
        public Builder pickRetries(int pickRetries) {
            return set(PICK_RETRIES, pickRetries);
        }

        /** The largest JSON of arguments, state or a payload that an insert accepts. */
        public Builder maxPayloadBytes(int maxPayloadBytes) {
            return set(MAX_PAYLOAD_BYTES, maxPayloadBytes);
        }

        /** The most unconsumed signals an instance's inbox holds (default 1,000). */
        public Builder maxInboxSignals(int maxInboxSignals) {
            return set(MAX_INBOX_SIGNALS, maxInboxSignals);
        }

        /** The most bytes one insert call may carry in aggregate; at least maxPayloadBytes. */
        public Builder maxBatchBytes(int maxBatchBytes) {
            return set(MAX_BATCH_BYTES, maxBatchBytes);
        }

        /** Whether inserting a type with no definition on this engine is an error (default true). */
        public Builder rejectUnknownTypes(boolean rejectUnknownTypes) {
            return set(REJECT_UNKNOWN_TYPES, rejectUnknownTypes);
        }

        /** Whether the engine applies its migrations on start (off when Flyway runs them). */
        public Builder applyMigrations(boolean applyMigrations) {
            return set(APPLY_MIGRATIONS, applyMigrations);
        }

        public Builder codec(JsonCodec codec) {
            return set(CODEC, codec);
        }

        /**
         * Where handlers are invoked. The default, bounded elastic, keeps a handler that blocks
         * off the event loops, one task per run; a fully non-blocking application may pass
         * {@code Schedulers.parallel()}. On a scheduler whose threads are non-blocking, the runs of a
         * claimed batch start together: at most as many drain tasks as the parallel scheduler has
         * threads run them one after another (no per-run hop or timer), so what a handler does at
         * once should be short there.
         */
        public Builder handlerScheduler(Scheduler handlerScheduler) {
            return set(HANDLER_SCHEDULER, handlerScheduler);
        }

        /** How often the engine checks that the next run of each recurring job is inserted. */
        public Builder recurringInterval(Duration recurringInterval) {
            return set(RECURRING_INTERVAL, recurringInterval);
        }

        /** Micrometer meters go here (none are kept without one). */
        public Builder meterRegistry(MeterRegistry meterRegistry) {
            return set(METER_REGISTRY, meterRegistry);
        }

        /** An observation around each run goes here (a tracing bridge makes a span of each). */
        public Builder observationRegistry(ObservationRegistry observationRegistry) {
            return set(OBSERVATION_REGISTRY, observationRegistry);
        }

        /** Replaces the default naming and tags of run observations. */
        public Builder runObservationConvention(RunObservationConvention convention) {
            return set(RUN_OBSERVATION_CONVENTION, convention);
        }

        /**
         * Stores the W3C trace context of each insert's and signal's caller with its row, and makes
         * each run's span a child of it ({@code MicrometerTracePropagation} over a Micrometer Tracing
         * bridge); {@code TracePropagation.NONE} (the default) stores nothing.
         */
        public Builder tracePropagation(TracePropagation tracePropagation) {
            return set(TRACE_PROPAGATION, tracePropagation);
        }

        /** Events each subscriber of {@code events()} may fall behind by before its oldest drop. */
        public Builder eventBufferSize(int eventBufferSize) {
            return set(EVENT_BUFFER_SIZE, eventBufferSize);
        }

        /** A gate of {@code capacity} executing instances per key, on one counter. */
        public Builder gate(String name, int capacity) {
            return gate(name, capacity, 1);
        }

        /** A gate of {@code capacity} executing instances per key, counted on {@code shards} counters. */
        public Builder gate(String name, int capacity, int shards) {
            return add(GATES, "gate", name, new Limits.Gate(name, capacity, shards));
        }

        /** A token bucket of {@code ratePerSecond} tokens a second, holding at most {@code burst}. */
        public Builder rateLimit(String name, double ratePerSecond, int burst) {
            return add(RATE_LIMITS, "rate limit", name, new Limits.RateLimit(name, ratePerSecond, burst));
        }

        /** A sliding window: at most {@code limit} per {@code window} per partition. */
        public Builder window(String name, int limit, Duration window) {
            return add(WINDOWS, "window", name, new Limits.Window(name, limit, window));
        }

        /** How long settled instances are kept (children of live parents longer). */
        public Builder retention(Duration retention) {
            return set(RETENTION, retention);
        }

        /** How often limiter counters are healed: short for {@code limiterReconcile(...withInterval(reconcileInterval))}. */
        public Builder reconcileInterval(Duration reconcileInterval) {
            Options.requirePositive("reconcileInterval", reconcileInterval);
            return set(LIMITER_RECONCILE, values.get(LIMITER_RECONCILE).withInterval(reconcileInterval));
        }

        /** The limiter reconcile's switch, tick and timeout (it has no batches). */
        public Builder limiterReconcile(Maintenance.TaskOptions limiterReconcile) {
            return set(LIMITER_RECONCILE, limiterReconcile);
        }

        /** The idle-bucket sweeper's switch, tick, batch size, budget and timeout. */
        public Builder bucketSweeper(Maintenance.TaskOptions bucketSweeper) {
            return set(BUCKET_SWEEPER, bucketSweeper);
        }

        /** The fair-key healer's switch, tick, batch size, budget and timeout. */
        public Builder fairKeyHealer(Maintenance.TaskOptions fairKeyHealer) {
            return set(FAIR_KEY_HEALER, fairKeyHealer);
        }

        /** The key healer's switch, tick, batch size (keys walked), budget and timeout. */
        public Builder keyHealer(Maintenance.TaskOptions keyHealer) {
            return set(KEY_HEALER, keyHealer);
        }

        /** The retry of skipped key elections: its switch, tick, batch size (keys), budget and timeout. */
        public Builder skippedKeyElections(Maintenance.TaskOptions skippedKeyElections) {
            return set(SKIPPED_KEY_ELECTIONS, skippedKeyElections);
        }

        /**
         * The analyzer's switch, tick and timeout (one pass is one catalog query, and an ANALYZE of each
         * hot table found stale; no batches). Off, the hot tables' statistics are left to autovacuum.
         */
        public Builder analyzer(Maintenance.TaskOptions analyzer) {
            return set(ANALYZER, analyzer);
        }

        /**
         * The vacuumer's switch, tick and timeout (one pass is one catalog query, and a VACUUM of each
         * hot table with 10,000 dead rows or more; no batches). Off, the hot tables' dead rows are left
         * to autovacuum, once per {@code autovacuum_naptime}.
         */
        public Builder vacuumer(Maintenance.TaskOptions vacuumer) {
            return set(VACUUMER, vacuumer);
        }

        /**
         * Who admits rows of gates and rate limits, counts the slots they hold and heals the counts:
         * {@link PostgresLimiter#factory()} by default (admission inside the pick statement), or a
         * lease-native one such as reactive-redis's.
         */
        public Builder limiter(LimiterFactory limiter) {
            return set(LIMITER, limiter);
        }

        /**
         * How often {@code awaitSettled} reads, in one statement for all its callers, the instances
         * they wait for (changes made by this engine answer at once).
         */
        public Builder settlePollInterval(Duration settlePollInterval) {
            return set(SETTLE_POLL_INTERVAL, settlePollInterval);
        }

        /** The most requests of {@code insertAsync} that go in one flush (one round trip). */
        public Builder insertBatchSize(int insertBatchSize) {
            return set(INSERT_BATCH_SIZE, insertBatchSize);
        }

        /** The longest a request of {@code insertAsync} waits for its batch to fill. */
        public Builder insertBatchDelay(Duration insertBatchDelay) {
            return set(INSERT_BATCH_DELAY, insertBatchDelay);
        }

        /**
         * The most requests of {@code insertAsync} held in memory (buffered or in flight); beyond it
         * a request is inserted directly, so none is dropped and no caller waits for room.
         */
        public Builder insertBufferCapacity(int insertBufferCapacity) {
            return set(INSERT_BUFFER_CAPACITY, insertBufferCapacity);
        }

        /**
         * The most permit tries ({@code engine.limits()}) asking the limiter at once: they share the
         * engine's connection pool with picks, commits and heartbeats, so hundreds of waiting
         * {@code acquire} calls must not take it over; a try over the bound waits (without blocking) for
         * its turn.
         */
        public Builder permitTryConcurrency(int permitTryConcurrency) {
            return set(PERMIT_TRY_CONCURRENCY, permitTryConcurrency);
        }

        /**
         * The most runs of transactional handlers at once (default 4), each holding one of the engine's
         * connections; more wait their turn ({@link EngineOptions#transactionalConcurrency()}).
         */
        public Builder transactionalConcurrency(int transactionalConcurrency) {
            return set(TRANSACTIONAL_CONCURRENCY, transactionalConcurrency);
        }

        /** The options, once the rules across them hold. */
        public EngineOptions build() {
            EngineOptions options = new EngineOptions(values);
            checkAcross(options);
            return options;
        }

        /** The rules that involve more than one option, in one place. */
        private static void checkAcross(EngineOptions options) {
            if (options.connectionFactory() == null && options.url() == null) {
                throw new IllegalArgumentException("one of connectionFactory and url must be set");
            }
            if (options.leaseTtl().compareTo(options.heartbeatInterval().multipliedBy(2)) <= 0) {
                throw new IllegalArgumentException("leaseTtl must be more than twice heartbeatInterval"
                        + " (so a live lease survives a missed beat), was " + options.leaseTtl() + " with heartbeat "
                        + options.heartbeatInterval());
            }
            if (options.maxBatchBytes() < options.maxPayloadBytes()) {
                throw new IllegalArgumentException("maxBatchBytes must be at least maxPayloadBytes (a batch of one"
                        + " request of the largest payload must fit), was " + options.maxBatchBytes() + " with"
                        + " maxPayloadBytes " + options.maxPayloadBytes());
            }
            // A row's rate slot and a permit name a bucket or a window by name alone: one name, one kind.
            for (String name : options.windows().keySet()) {
                if (options.rateLimits().containsKey(name)) {
                    throw new IllegalArgumentException("'" + name + "' is configured both as rate limit "
                            + options.rateLimits().get(name) + " and as window " + options.windows().get(name)
                            + ": a limit name must name one of them (give the other its own name)");
                }
            }
            options.requirePoolFits(false);
        }
    }
}
