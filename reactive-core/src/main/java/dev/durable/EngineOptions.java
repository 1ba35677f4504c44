package dev.durable;

import dev.durable.limit.LimiterFactory;
import dev.durable.limit.PostgresLimiter;
import dev.durable.poke.PokeTransportFactory;
import dev.durable.poke.PokeTransports;
import dev.durable.observation.RunObservationConvention;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import io.r2dbc.spi.ConnectionFactory;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Everything an engine is configured with. Immutable, built once with {@link #builder()}: each
 * setter checks its own argument, {@link Builder#build()} the rules across them, and a broken
 * value throws {@link IllegalArgumentException} naming the option and the rule.
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

    private final @Nullable ConnectionFactory connectionFactory;
    private final @Nullable String url;
    private final int poolMaxSize;
    private final String schema;
    private final String name;
    private final Map<String, QueueOptions> queues;
    private final Duration leaseTtl;
    private final Duration heartbeatInterval;
    private final Duration reaperInterval;
    private final boolean runMaintenance;
    private final Duration pokeWindow;
    private final PokeTransportFactory pokeTransport;
    private final int commitBatchSize;
    private final int commitParallelism;
    private final int pickRetries;
    private final int maxPayloadBytes;
    private final boolean rejectUnknownTypes;
    private final boolean applyMigrations;
    private final JsonCodec codec;
    private final Scheduler handlerScheduler;
    private final Duration recurringInterval;
    private final MeterRegistry meterRegistry;
    private final ObservationRegistry observationRegistry;
    private final @Nullable RunObservationConvention runObservationConvention;
    private final int eventBufferSize;
    private final Map<String, Limits.Gate> gates;
    private final Map<String, Limits.RateLimit> rateLimits;
    private final Duration retention;
    private final Duration reconcileInterval;
    private final LimiterFactory limiter;

    private EngineOptions(Builder b) {
        this.connectionFactory = b.connectionFactory;
        this.url = b.url;
        this.poolMaxSize = b.poolMaxSize;
        this.schema = b.schema;
        this.name = b.name;
        this.queues = Map.copyOf(b.queues);
        this.leaseTtl = b.leaseTtl;
        this.heartbeatInterval = b.heartbeatInterval;
        this.reaperInterval = b.reaperInterval;
        this.runMaintenance = b.runMaintenance;
        this.pokeWindow = b.pokeWindow;
        this.pokeTransport = b.pokeTransport;
        this.commitBatchSize = b.commitBatchSize;
        this.commitParallelism = b.commitParallelism;
        this.pickRetries = b.pickRetries;
        this.maxPayloadBytes = b.maxPayloadBytes;
        this.rejectUnknownTypes = b.rejectUnknownTypes;
        this.applyMigrations = b.applyMigrations;
        this.codec = b.codec;
        this.handlerScheduler = b.handlerScheduler;
        this.recurringInterval = b.recurringInterval;
        this.meterRegistry = b.meterRegistry;
        this.observationRegistry = b.observationRegistry;
        this.runObservationConvention = b.runObservationConvention;
        this.eventBufferSize = b.eventBufferSize;
        this.gates = Map.copyOf(b.gates);
        this.rateLimits = Map.copyOf(b.rateLimits);
        this.retention = b.retention;
        this.reconcileInterval = b.reconcileInterval;
        this.limiter = b.limiter;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding these options, to change some of them. */
    public Builder mutate() {
        Builder b = new Builder();
        b.connectionFactory = connectionFactory;
        b.url = url;
        b.poolMaxSize = poolMaxSize;
        b.schema = schema;
        b.name = name;
        b.queues.putAll(queues);
        b.leaseTtl = leaseTtl;
        b.heartbeatInterval = heartbeatInterval;
        b.reaperInterval = reaperInterval;
        b.runMaintenance = runMaintenance;
        b.pokeWindow = pokeWindow;
        b.pokeTransport = pokeTransport;
        b.commitBatchSize = commitBatchSize;
        b.commitParallelism = commitParallelism;
        b.pickRetries = pickRetries;
        b.maxPayloadBytes = maxPayloadBytes;
        b.rejectUnknownTypes = rejectUnknownTypes;
        b.applyMigrations = applyMigrations;
        b.codec = codec;
        b.handlerScheduler = handlerScheduler;
        b.recurringInterval = recurringInterval;
        b.meterRegistry = meterRegistry;
        b.observationRegistry = observationRegistry;
        b.runObservationConvention = runObservationConvention;
        b.eventBufferSize = eventBufferSize;
        b.gates.putAll(gates);
        b.rateLimits.putAll(rateLimits);
        b.retention = retention;
        b.reconcileInterval = reconcileInterval;
        b.limiter = limiter;
        return b;
    }

    /** The caller's connection factory, when one was given instead of a URL. */
    public @Nullable ConnectionFactory connectionFactory() {
        return connectionFactory;
    }

    /** The R2DBC URL the engine pools connections to, when no factory was given. */
    public @Nullable String url() {
        return url;
    }

    public int poolMaxSize() {
        return poolMaxSize;
    }

    public String schema() {
        return schema;
    }

    public String name() {
        return name;
    }

    public Map<String, QueueOptions> queues() {
        return queues;
    }

    public Duration leaseTtl() {
        return leaseTtl;
    }

    public Duration heartbeatInterval() {
        return heartbeatInterval;
    }

    public Duration reaperInterval() {
        return reaperInterval;
    }

    public boolean runMaintenance() {
        return runMaintenance;
    }

    public Duration pokeWindow() {
        return pokeWindow;
    }

    public PokeTransportFactory pokeTransport() {
        return pokeTransport;
    }

    public int commitBatchSize() {
        return commitBatchSize;
    }

    public int commitParallelism() {
        return commitParallelism;
    }

    public int pickRetries() {
        return pickRetries;
    }

    public int maxPayloadBytes() {
        return maxPayloadBytes;
    }

    public boolean rejectUnknownTypes() {
        return rejectUnknownTypes;
    }

    public boolean applyMigrations() {
        return applyMigrations;
    }

    public JsonCodec codec() {
        return codec;
    }

    public Scheduler handlerScheduler() {
        return handlerScheduler;
    }

    public Duration recurringInterval() {
        return recurringInterval;
    }

    /** Where the engine's meters go; a registry with no backend by default. */
    public MeterRegistry meterRegistry() {
        return meterRegistry;
    }

    public ObservationRegistry observationRegistry() {
        return observationRegistry;
    }

    public @Nullable RunObservationConvention runObservationConvention() {
        return runObservationConvention;
    }

    public int eventBufferSize() {
        return eventBufferSize;
    }

    public Map<String, Limits.Gate> gates() {
        return gates;
    }

    public Map<String, Limits.RateLimit> rateLimits() {
        return rateLimits;
    }

    /** How long settled instances are kept before maintenance deletes them. */
    public Duration retention() {
        return retention;
    }

    /** How often maintenance recounts gate counters. */
    public Duration reconcileInterval() {
        return reconcileInterval;
    }

    /** Who admits rows of gates and rate limits (PostgreSQL, in the pick, by default). */
    public LimiterFactory limiter() {
        return limiter;
    }

    @Override
    public String toString() {
        return "EngineOptions{" + (url != null ? "url=" + maskPassword(url) : "connectionFactory=" + connectionFactory)
                + ", poolMaxSize=" + poolMaxSize + ", schema=" + schema + ", name=" + name
                + ", queues=" + queues.values() + ", leaseTtl=" + leaseTtl
                + ", heartbeatInterval=" + heartbeatInterval + ", reaperInterval=" + reaperInterval
                + ", runMaintenance=" + runMaintenance + ", pokeWindow=" + pokeWindow
                + ", pokeTransport=" + pokeTransport + ", commitBatchSize=" + commitBatchSize
                + ", commitParallelism=" + commitParallelism + ", pickRetries=" + pickRetries
                + ", maxPayloadBytes=" + maxPayloadBytes + ", rejectUnknownTypes=" + rejectUnknownTypes
                + ", applyMigrations=" + applyMigrations + ", recurringInterval=" + recurringInterval
                + ", gates=" + gates.values() + ", rateLimits=" + rateLimits.values() + ", retention=" + retention + ", limiter=" + limiter + "}";
    }

    /** The URL with any password replaced, for logs and toString. */
    static String maskPassword(String url) {
        return Urls.masked(url);
    }

    public static final class Builder {

        private @Nullable ConnectionFactory connectionFactory;
        private @Nullable String url;
        private int poolMaxSize = DEFAULT_POOL_MAX_SIZE;
        private String schema = DEFAULT_SCHEMA;
        private String name = DEFAULT_NAME;
        private final Map<String, QueueOptions> queues = new LinkedHashMap<>();
        private Duration leaseTtl = DEFAULT_LEASE_TTL;
        private Duration heartbeatInterval = DEFAULT_HEARTBEAT_INTERVAL;
        private Duration reaperInterval = DEFAULT_REAPER_INTERVAL;
        private boolean runMaintenance = true;
        private Duration pokeWindow = DEFAULT_POKE_WINDOW;
        private PokeTransportFactory pokeTransport = PokeTransports.local();
        private int commitBatchSize = DEFAULT_COMMIT_BATCH_SIZE;
        private int commitParallelism = DEFAULT_COMMIT_PARALLELISM;
        private int pickRetries = DEFAULT_PICK_RETRIES;
        private int maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES;
        private boolean rejectUnknownTypes = true;
        private boolean applyMigrations = true;
        private JsonCodec codec = new JacksonJsonCodec();
        private Scheduler handlerScheduler = Schedulers.boundedElastic();
        private Duration recurringInterval = DEFAULT_RECURRING_INTERVAL;
        private MeterRegistry meterRegistry = new CompositeMeterRegistry();
        private ObservationRegistry observationRegistry = ObservationRegistry.NOOP;
        private @Nullable RunObservationConvention runObservationConvention;
        private int eventBufferSize = DEFAULT_EVENT_BUFFER_SIZE;
        private final Map<String, Limits.Gate> gates = new LinkedHashMap<>();
        private final Map<String, Limits.RateLimit> rateLimits = new LinkedHashMap<>();
        private Duration retention = DEFAULT_RETENTION;
        private Duration reconcileInterval = DEFAULT_RECONCILE_INTERVAL;
        private LimiterFactory limiter = PostgresLimiter.factory();

        private Builder() {
        }

        /**
         * Connections come from the caller's factory (pooled or not); the engine does not close it.
         * Replaces a {@link #url} set before.
         */
        public Builder connectionFactory(ConnectionFactory connectionFactory) {
            this.connectionFactory = Options.requireNonNull("connectionFactory", connectionFactory);
            this.url = null;
            return this;
        }

        /**
         * The engine pools its own connections to this R2DBC URL ({@code r2dbc:postgresql://...}).
         * Replaces a {@link #connectionFactory} set before.
         */
        public Builder url(String url) {
            Options.requireNonNull("url", url);
            if (!url.startsWith("r2dbc:")) {
                throw new IllegalArgumentException("url must be an R2DBC URL (r2dbc:postgresql://...), was "
                        + maskPassword(url));
            }
            this.url = url;
            this.connectionFactory = null;
            return this;
        }

        /** The most connections of the engine's own pool (with {@link #url}). */
        public Builder poolMaxSize(int poolMaxSize) {
            this.poolMaxSize = Options.requireAtLeast("poolMaxSize", poolMaxSize, 2);
            return this;
        }

        /** The PostgreSQL schema of Durable's tables, created if missing. */
        public Builder schema(String schema) {
            this.schema = Options.requireIdentifier("schema", schema);
            return this;
        }

        /**
         * This engine's name: part of its workers' identity. Two engines that run at once in one
         * process must have different names.
         */
        public Builder name(String name) {
            Options.requireName("name", name);
            if (name.chars().anyMatch(Character::isWhitespace)) {
                throw new IllegalArgumentException("name must not contain blanks, was '" + name + "'");
            }
            this.name = name;
            return this;
        }

        /** A queue this engine runs; names are unique. */
        public Builder queue(QueueOptions queue) {
            Options.requireNonNull("queue", queue);
            if (queues.containsKey(queue.name())) {
                throw new IllegalArgumentException("queue '" + queue.name() + "' is configured twice");
            }
            queues.put(queue.name(), queue);
            return this;
        }

        /** A queue with default knobs. */
        public Builder queue(String name) {
            return queue(QueueOptions.of(name));
        }

        /** How long a claim stays valid without a heartbeat. */
        public Builder leaseTtl(Duration leaseTtl) {
            this.leaseTtl = Options.requirePositive("leaseTtl", leaseTtl);
            return this;
        }

        public Builder heartbeatInterval(Duration heartbeatInterval) {
            this.heartbeatInterval = Options.requirePositive("heartbeatInterval", heartbeatInterval);
            return this;
        }

        public Builder reaperInterval(Duration reaperInterval) {
            this.reaperInterval = Options.requirePositive("reaperInterval", reaperInterval);
            return this;
        }

        /** Whether this engine runs the reaper and the other maintenance ticks (any node may). */
        public Builder runMaintenance(boolean runMaintenance) {
            this.runMaintenance = runMaintenance;
            return this;
        }

        /** The window in which an idle scheduler coalesces the pokes behind the first into one pick. */
        public Builder pokeWindow(Duration pokeWindow) {
            this.pokeWindow = Options.requirePositive("pokeWindow", pokeWindow);
            return this;
        }

        public Builder pokeTransport(PokeTransportFactory pokeTransport) {
            this.pokeTransport = Options.requireNonNull("pokeTransport", pokeTransport);
            return this;
        }

        /** The most outcomes committed in one transaction. */
        public Builder commitBatchSize(int commitBatchSize) {
            this.commitBatchSize = Options.requireAtLeast("commitBatchSize", commitBatchSize, 1);
            return this;
        }

        /** The most outcome transactions in flight at once. */
        public Builder commitParallelism(int commitParallelism) {
            this.commitParallelism = Options.requireAtLeast("commitParallelism", commitParallelism, 1);
            return this;
        }

        /** How often a pick is retried when a concurrency key was taken under it. */
        public Builder pickRetries(int pickRetries) {
            this.pickRetries = Options.requireAtLeast("pickRetries", pickRetries, 0);
            return this;
        }

        /** The largest JSON of arguments, state or a payload that an insert accepts. */
        public Builder maxPayloadBytes(int maxPayloadBytes) {
            this.maxPayloadBytes = Options.requireAtLeast("maxPayloadBytes", maxPayloadBytes, 16);
            return this;
        }

        /** Whether inserting a type with no definition on this engine is an error (default true). */
        public Builder rejectUnknownTypes(boolean rejectUnknownTypes) {
            this.rejectUnknownTypes = rejectUnknownTypes;
            return this;
        }

        /** Whether the engine applies its migrations on start (off when Flyway runs them). */
        public Builder applyMigrations(boolean applyMigrations) {
            this.applyMigrations = applyMigrations;
            return this;
        }

        public Builder codec(JsonCodec codec) {
            this.codec = Options.requireNonNull("codec", codec);
            return this;
        }

        /**
         * Where handlers are invoked. The default, bounded elastic, keeps a handler that blocks
         * off the event loops; a fully non-blocking application may pass {@code Schedulers.parallel()}.
         */
        public Builder handlerScheduler(Scheduler handlerScheduler) {
            this.handlerScheduler = Options.requireNonNull("handlerScheduler", handlerScheduler);
            return this;
        }

        /** How often the engine checks that the next run of each recurring job is inserted. */
        public Builder recurringInterval(Duration recurringInterval) {
            this.recurringInterval = Options.requirePositive("recurringInterval", recurringInterval);
            return this;
        }

        /** Micrometer meters go here (none are kept without one). */
        public Builder meterRegistry(MeterRegistry meterRegistry) {
            this.meterRegistry = Options.requireNonNull("meterRegistry", meterRegistry);
            return this;
        }

        /** An observation around each run goes here (a tracing bridge makes a span of each). */
        public Builder observationRegistry(ObservationRegistry observationRegistry) {
            this.observationRegistry = Options.requireNonNull("observationRegistry", observationRegistry);
            return this;
        }

        /** Replaces the default naming and tags of run observations. */
        public Builder runObservationConvention(RunObservationConvention convention) {
            this.runObservationConvention = Options.requireNonNull("runObservationConvention", convention);
            return this;
        }

        /** Events each subscriber of {@code events()} may fall behind by before its oldest drop. */
        public Builder eventBufferSize(int eventBufferSize) {
            this.eventBufferSize = Options.requireAtLeast("eventBufferSize", eventBufferSize, 1);
            return this;
        }

        /** A gate of {@code capacity} executing instances per key, on one counter. */
        public Builder gate(String name, int capacity) {
            return gate(name, capacity, 1);
        }

        /** A gate of {@code capacity} executing instances per key, counted on {@code shards} counters. */
        public Builder gate(String name, int capacity, int shards) {
            Limits.Gate gate = new Limits.Gate(name, capacity, shards);
            if (gates.putIfAbsent(name, gate) != null) {
                throw new IllegalArgumentException("gate '" + name + "' is configured twice");
            }
            return this;
        }

        /** A token bucket of {@code ratePerSecond} tokens a second, holding at most {@code burst}. */
        public Builder rateLimit(String name, double ratePerSecond, int burst) {
            Limits.RateLimit limit = new Limits.RateLimit(name, ratePerSecond, burst);
            if (rateLimits.putIfAbsent(name, limit) != null) {
                throw new IllegalArgumentException("rate limit '" + name + "' is configured twice");
            }
            return this;
        }

        /** How long settled instances are kept (children of live parents longer). */
        public Builder retention(Duration retention) {
            this.retention = Options.requirePositive("retention", retention);
            return this;
        }

        public Builder reconcileInterval(Duration reconcileInterval) {
            this.reconcileInterval = Options.requirePositive("reconcileInterval", reconcileInterval);
            return this;
        }

        /**
         * Who admits rows of gates and rate limits, counts the slots they hold and heals the counts:
         * {@link PostgresLimiter#factory()} by default (admission inside the pick statement), or a
         * lease-native one such as reactive-redis's.
         */
        public Builder limiter(LimiterFactory limiter) {
            this.limiter = Options.requireNonNull("limiter", limiter);
            return this;
        }

        public EngineOptions build() {
            if (connectionFactory == null && url == null) {
                throw new IllegalArgumentException("one of connectionFactory and url must be set");
            }
            if (leaseTtl.compareTo(heartbeatInterval.multipliedBy(2)) <= 0) {
                throw new IllegalArgumentException("leaseTtl must be more than twice heartbeatInterval"
                        + " (so a live lease survives a missed beat), was " + leaseTtl + " with heartbeat "
                        + heartbeatInterval);
            }
            return new EngineOptions(this);
        }
    }

}
