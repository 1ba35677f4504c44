package dev.durable.spring;

import dev.durable.Urls;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * The {@code durable.*} properties. Anything left unset keeps the engine's own default
 * ({@link dev.durable.EngineOptions}, {@link dev.durable.QueueOptions}); the engine validates the
 * values and names the offending option when one is wrong.
 *
 * <pre>
 * durable.url=r2dbc:postgresql://app:secret@localhost:5432/app
 * durable.queues.mail.concurrency=20
 * durable.queues.mail.prefetch=20
 * durable.queues.default.poll-interval=500ms
 * durable.poke-transport=postgres-notify
 * </pre>
 *
 * @param url the R2DBC URL of the engine's own pool; unset, it is derived from
 *     {@code spring.r2dbc.url}/{@code username}/{@code password}, else the application's
 *     {@code io.r2dbc.spi.ConnectionFactory} bean is used
 * @param schema the PostgreSQL schema of Durable's tables
 * @param name this engine's name, part of its workers' identity
 * @param queues the queues this engine runs, by name; none configured means one queue,
 *     {@code default}, with default knobs
 * @param leaseTtl how long a claim stays valid without a heartbeat
 * @param heartbeatInterval how often held rows are heartbeated
 * @param reaperInterval how often expired leases are recovered
 * @param runMaintenance whether this node runs the reaper and the other maintenance ticks
 * @param pokeTransport how inserts wake schedulers: in-process only, or across nodes over
 *     PostgreSQL NOTIFY
 * @param poolMaxSize the most connections of the engine's own pool (with a URL)
 * @param applyMigrations whether the engine applies its schema migrations on start
 * @param startupTimeout how long application start-up waits for the engine to start
 * @param autoStartup whether the engine starts with the application context (off for a node that
 *     only inserts and queries, or to start it by hand)
 */
@ConfigurationProperties("durable")
public record DurableProperties(
        @Nullable String url,
        @Nullable String schema,
        @Nullable String name,
        Map<String, Queue> queues,
        @Nullable Duration leaseTtl,
        @Nullable Duration heartbeatInterval,
        @Nullable Duration reaperInterval,
        @Nullable Boolean runMaintenance,
        PokeTransport pokeTransport,
        @Nullable Integer poolMaxSize,
        @Nullable Boolean applyMigrations,
        Duration startupTimeout,
        @DefaultValue("true") boolean autoStartup) {

    /** The queue {@code durable.queues} falls back to when it names none. */
    public static final String DEFAULT_QUEUE = "default";

    public DurableProperties {
        queues = queues == null ? Map.of() : Collections.unmodifiableMap(new LinkedHashMap<>(queues));
        pokeTransport = pokeTransport == null ? PokeTransport.LOCAL : pokeTransport;
        startupTimeout = startupTimeout == null ? Duration.ofMinutes(2) : startupTimeout;
    }

    /** Every property, the URL's password and secret parameters masked ({@link Urls#masked}). */
    @Override
    public String toString() {
        return "DurableProperties[url=" + (url == null ? null : Urls.masked(url)) + ", schema=" + schema
                + ", name=" + name + ", queues=" + queues + ", leaseTtl=" + leaseTtl
                + ", heartbeatInterval=" + heartbeatInterval + ", reaperInterval=" + reaperInterval
                + ", runMaintenance=" + runMaintenance + ", pokeTransport=" + pokeTransport
                + ", poolMaxSize=" + poolMaxSize + ", applyMigrations=" + applyMigrations
                + ", startupTimeout=" + startupTimeout + ", autoStartup=" + autoStartup + "]";
    }

    /**
     * The knobs of one queue ({@code durable.queues.<name>.*}); unset ones keep their defaults.
     *
     * @param concurrency runs at once
     * @param prefetch rows claimed ahead into a buffer
     * @param minDemand pick only when this many claims are free, unless fully idle
     * @param pollInterval the idle poll
     * @param maxPollInterval the ceiling the idle poll backs off to
     * @param drainTimeout how long shutdown waits for running steps
     */
    public record Queue(
            @Nullable Integer concurrency,
            @Nullable Integer prefetch,
            @Nullable Integer minDemand,
            @Nullable Duration pollInterval,
            @Nullable Duration maxPollInterval,
            @Nullable Duration drainTimeout) {
    }

    /** How inserts and signals wake the schedulers ({@code local} or {@code postgres-notify}). */
    public enum PokeTransport {
        /** In-process only; other nodes notice new work at their next poll. */
        LOCAL,
        /** PostgreSQL LISTEN/NOTIFY on one dedicated connection; polling remains the floor. */
        POSTGRES_NOTIFY
    }
}
