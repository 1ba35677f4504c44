package dev.durable.spring;

import dev.durable.EngineOptions;
import dev.durable.Urls;
import java.time.Duration;
import org.jspecify.annotations.Nullable;

/** The engine did not start with the application: its database was unreachable, refused it, or was slow. */
public class DurableStartupException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final String engineName;
    private final @Nullable String maskedUrl;

    /** {@code url} is where the engine's connections go, when a URL says (its password is masked here). */
    public DurableStartupException(EngineOptions options, @Nullable String url, Duration startupTimeout,
            Throwable cause) {
        super("Durable engine '" + options.name() + "' did not start"
                + (url != null ? " on " + Urls.masked(url) : " on the application's ConnectionFactory")
                + " (within durable.startup-timeout, " + startupTimeout.toSeconds() + " s): " + cause.getMessage(),
                cause);
        this.engineName = options.name();
        this.maskedUrl = url == null ? null : Urls.masked(url);
    }

    public String engineName() {
        return engineName;
    }

    /** The URL the engine used, password masked; null when it used the application's ConnectionFactory. */
    public @Nullable String maskedUrl() {
        return maskedUrl;
    }
}
