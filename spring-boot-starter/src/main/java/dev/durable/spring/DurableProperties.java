package dev.durable.spring;

import dev.durable.Urls;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * The starter's own {@code durable.*} properties: where the database is and how the engine starts
 * with the application. Every option of the engine and of its queues is a {@code durable.*}
 * property too, derived from the option lists ({@link OptionProperties}): {@code durable.lease-ttl},
 * {@code durable.reaper.interval}, {@code durable.queues.<name>.concurrency}. Anything left unset
 * keeps the engine's own default; the engine validates the values, and a wrong one fails the start
 * naming the property and the rule.
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
 * @param startupTimeout how long application start-up waits for the engine to start
 * @param autoStartup whether the engine starts with the application context (off for a node that
 *     only inserts and queries, or to start it by hand)
 */
@ConfigurationProperties("durable")
public record DurableProperties(
        @Nullable String url,
        @DefaultValue("2m") Duration startupTimeout,
        @DefaultValue("true") boolean autoStartup) {

    /** The queue the engine runs when neither {@code durable.queues} nor a definition names one. */
    public static final String DEFAULT_QUEUE = "default";

    /** Every property, the URL's password and secret parameters masked ({@link Urls#masked}). */
    @Override
    public String toString() {
        return "DurableProperties[url=" + (url == null ? null : Urls.masked(url)) + ", startupTimeout="
                + startupTimeout + ", autoStartup=" + autoStartup + "]";
    }
}
