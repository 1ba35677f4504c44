package dev.durable.benchmarks.client;

import io.r2dbc.spi.Connection;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.ConnectionFactoryMetadata;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;

/** Wraps a connection factory: statements created, connections out now and the most out at once. */
final class MeteredConnections implements ConnectionFactory {

    private final ConnectionFactory delegate;
    private final AtomicLong statements = new AtomicLong();
    private final AtomicInteger open = new AtomicInteger();
    private final AtomicInteger peak = new AtomicInteger();

    MeteredConnections(ConnectionFactory delegate) {
        this.delegate = delegate;
    }

    long statements() {
        return statements.get();
    }

    int peak() {
        return peak.get();
    }

    /** Starts a new window: the peak restarts from the connections out now. */
    void resetPeak() {
        peak.set(open.get());
    }

    @Override
    public Publisher<? extends Connection> create() {
        return Mono.from(delegate.create()).map(this::metered);
    }

    private Connection metered(Connection connection) {
        peak.accumulateAndGet(open.incrementAndGet(), Math::max);
        AtomicBoolean closed = new AtomicBoolean();
        return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(), new Class<?>[] {Connection.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("createStatement")) {
                        statements.incrementAndGet();
                    } else if (method.getName().equals("close") && method.getParameterCount() == 0
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
