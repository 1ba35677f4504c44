package dev.durable.spring;

import dev.durable.DurableEngine;
import java.time.Duration;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.context.SmartLifecycle;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Starts the engine with the application context and drains it when the context stops.
 *
 * <p>Its phase is below the web server's, so the engine starts before the server takes requests
 * and stops after the server has finished its own graceful shutdown: requests still in flight can
 * insert work, and the engine then stops claiming, gives back its buffered rows and waits up to
 * each queue's drain timeout for running steps. The stop is asynchronous (Spring waits up to
 * {@code spring.lifecycle.timeout-per-shutdown-phase}); start waits for the engine, since the
 * application is not ready until the schema is applied and the queues run.
 */
public final class DurableLifecycle implements SmartLifecycle, DisposableBean {

    /** Before the web server starts (it starts at {@code DEFAULT_PHASE - 2048}), after it stops. */
    public static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 4096;

    private static final Logger log = Loggers.getLogger(DurableLifecycle.class);

    private final DurableEngine engine;
    private final Duration startupTimeout;
    private final boolean autoStartup;
    private final @Nullable String url;
    private volatile boolean running;

    public DurableLifecycle(DurableEngine engine, Duration startupTimeout, boolean autoStartup) {
        this(engine, startupTimeout, autoStartup, engine.options().url());
    }

    /** {@code url}: where the engine's connections go, for the start-up failure report; null if unknown. */
    public DurableLifecycle(DurableEngine engine, Duration startupTimeout, boolean autoStartup, @Nullable String url) {
        this.url = url;
        this.engine = engine;
        this.startupTimeout = startupTimeout;
        this.autoStartup = autoStartup;
    }

    /**
     * Applies the schema and starts the queues; called on the thread refreshing the context. A
     * failure is a {@link DurableStartupException}, which {@link DurableFailureAnalyzer} turns into
     * Boot's short "APPLICATION FAILED TO START" report.
     */
    @Override
    public void start() {
        try {
            engine.start().block(startupTimeout);
        } catch (RuntimeException failed) {
            throw new DurableStartupException(engine.options(), url, startupTimeout, failed);
        }
        running = true;
    }

    /** Closes the engine without blocking; {@code callback} runs once it has drained. */
    @Override
    public void stop(Runnable callback) {
        running = false;
        engine.closeLater().subscribe(null, error -> {
            log.warn("Durable engine {} closed with errors", engine.options().name(), error);
            callback.run();
        }, callback);
    }

    /** Closes the engine and waits for it (for callers outside Spring's lifecycle processor). */
    @Override
    public void stop() {
        running = false;
        engine.close();
    }

    /** True between a successful start and the beginning of a stop. */
    @Override
    public boolean isRunning() {
        return running;
    }

    @Override
    public boolean isAutoStartup() {
        return autoStartup;
    }

    @Override
    public int getPhase() {
        return PHASE;
    }

    /**
     * Closes the engine if the context never started it (a failed refresh): its own pool must not
     * outlive the context. Closing is idempotent, so after a stop this returns at once.
     */
    @Override
    public void destroy() {
        engine.close();
    }
}
