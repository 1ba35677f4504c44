package dev.durable.support;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;

/** Wraps a factory and counts the connections it has out now, and the most it had out at once since a reset. */
public final class ConnectionGauge implements ConnectionFactory {

    private final ConnectionFactory delegate;
    private final AtomicInteger open = new AtomicInteger();
    private final AtomicInteger peak = new AtomicInteger();

    public ConnectionGauge(ConnectionFactory delegate) {
        this.delegate = delegate;
    }

    /** Connections handed out and not closed yet. */
    public int open() {
        return open.get();
    }

    /** The most connections out at once since the last {@link #resetPeak()}. */
    public int peak() {
        return peak.get();
    }

    public void resetPeak() {
        peak.set(open.get());
    }

    @Override
    public Publisher<? extends Connection> create() {
        return Mono.from(delegate.create()).map(this::counted);
    }

    private Connection counted(Connection connection) {
        peak.accumulateAndGet(open.incrementAndGet(), Math::max);
        AtomicBoolean closed = new AtomicBoolean();
        return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(), new Class<?>[] {Connection.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("close") && method.getParameterCount() == 0
                            && closed.compareAndSet(false, true)) {
                        open.decrementAndGet();
                    }
                    try {
                        return method.invoke(connection, args);
                    } catch (InvocationTargetException thrown) {
                        throw thrown.getCause();
                    }
                });
    }

    @Override
    public ConnectionFactoryMetadata getMetadata() {
        return delegate.getMetadata();
    }
}
