package dev.durable.redis.internal;

import dev.durable.poke.PokeContext;
import dev.durable.redis.RedisPokeOptions;
import dev.durable.redis.RedisPokeTransport;
import io.lettuce.core.RedisChannelHandler;
import io.lettuce.core.RedisConnectionStateListener;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.pubsub.api.reactive.ChannelMessage;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.FluxSink;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;
import reactor.util.retry.Retry;

/**
 * Pokes over Redis pub/sub with Lettuce. One dedicated pub/sub connection per engine subscribes to
 * the schema's channel; a second, ordinary connection publishes (a subscribed connection may not).
 * A poke reaches this engine's schedulers at once, in-process; the message to the others goes out
 * after a short per-queue coalescing window and carries this engine's origin, so its own echo is
 * recognised and ignored.
 *
 * <p>Lettuce reconnects both connections and re-subscribes after an outage. While Redis is down
 * nothing is thrown at the engine: the outage is logged once, the queues whose pokes could not go
 * out are remembered and poked once Redis is back, and polling finds the work meanwhile.
 */
public final class LettucePokeTransport implements RedisPokeTransport {

    private static final Logger log = Loggers.getLogger(LettucePokeTransport.class);
    /** A publish that takes longer than this is abandoned; polling covers for the lost poke. */
    private static final Duration PUBLISH_TIMEOUT = Duration.ofSeconds(2);
    /** After a reconnect, give the other engines' subscriptions a moment to come back too. */
    private static final Duration RESEND_DELAY = Duration.ofMillis(250);

    private final RedisConnector connector;
    private final String origin;
    private final String channel;
    private final Duration coalesceWindow;
    private final Sinks.Many<String> local = Sinks.many().multicast().directBestEffort();
    private final Map<String, Boolean> pendingSends = new ConcurrentHashMap<>();
    /** Queues whose pokes could not be published: sent again when Redis is back. */
    private final Set<String> unsent = ConcurrentHashMap.newKeySet();
    private final AtomicReference<@Nullable Connections> connections = new AtomicReference<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Disposable.Swap reconnecting = Disposables.swap();
    private final OutageLog outage;
    private final StateListener stateListener = new StateListener();
    private final AtomicLong published = new AtomicLong();
    private final AtomicLong received = new AtomicLong();
    private final AtomicLong echoesIgnored = new AtomicLong();
    private final AtomicLong notSent = new AtomicLong();

    private LettucePokeTransport(RedisConnector connector, PokeContext context, RedisPokeOptions options) {
        this.connector = connector;
        this.origin = context.origin();
        this.channel = options.channelPrefix() + context.schema();
        this.coalesceWindow = options.coalesceWindow();
        this.outage = new OutageLog(log, "poke channel " + channel + " at " + connector.where(),
                "schedulers fall back to polling while Lettuce reconnects");
    }

    /**
     * Subscribes before it answers, so no poke published after start is missed. When Redis cannot be
     * reached the transport still starts (local pokes work, polling finds remote work) and keeps
     * connecting in the background.
     */
    public static Mono<RedisPokeTransport> start(RedisConnector connector, PokeContext context, RedisPokeOptions options) {
        return Mono.defer(() -> {
            LettucePokeTransport transport = new LettucePokeTransport(connector, context, options);
            return transport.connectOnce()
                    .onErrorResume(error -> {
                        transport.outage.down(error.toString());
                        transport.connectInBackground();
                        return Mono.empty();
                    })
                    .thenReturn(transport);
        });
    }

    @Override
    public String channel() {
        return channel;
    }

    @Override
    public void poke(String queue) {
        emitLocal(queue);
        if (closed.get() || pendingSends.putIfAbsent(queue, Boolean.TRUE) != null) {
            return;
        }
        // The first poke of a queue opens the window; those behind it ride on the same message.
        Mono.delay(coalesceWindow)
                .then(Mono.defer(() -> {
                    pendingSends.remove(queue);
                    return publish(queue);
                }))
                .subscribe(null, error -> log.debug("poke of {} not sent: {}", queue, error.toString()));
    }

    @Override
    public Flux<String> pokes() {
        return local.asFlux();
    }

    @Override
    public Stats stats() {
        return new Stats(published.get(), received.get(), echoesIgnored.get(), notSent.get());
    }

    @Override
    public Mono<Void> close() {
        return Mono.defer(() -> {
            if (!closed.compareAndSet(false, true)) {
                return Mono.empty();
            }
            reconnecting.dispose();
            Connections current = connections.getAndSet(null);
            return Closing.all(List.of(
                    current == null ? Mono.empty() : current.close(stateListener),
                    connector.close(),
                    Mono.fromRunnable(() -> {
                        synchronized (local) {
                            local.tryEmitComplete();
                        }
                    })));
        });
    }

    /** Delivers a poke to this engine's schedulers. */
    private void emitLocal(String queue) {
        Sinks.EmitResult result;
        // Pokes come from many threads and the sink wants one emitter at a time.
        synchronized (local) {
            result = local.tryEmitNext(queue);
        }
        // No subscriber, or one without demand (a busy scheduler), drops the poke: pokes are best
        // effort. Anything else would be a bug in how the sink is used.
        if (result.isFailure() && result != Sinks.EmitResult.FAIL_ZERO_SUBSCRIBER
                && result != Sinks.EmitResult.FAIL_OVERFLOW && result != Sinks.EmitResult.FAIL_TERMINATED) {
            log.warn("poke of {} not delivered locally: {}", queue, result);
        }
    }

    private Mono<Void> publish(String queue) {
        Connections current = connections.get();
        if (current == null || !current.publisher.isOpen()) {
            return Mono.fromRunnable(() -> notSent(queue, "not connected"));
        }
        return current.publisher.reactive().publish(channel, new PokeMessage(origin, queue).encode())
                .timeout(PUBLISH_TIMEOUT)
                .doOnNext(subscribers -> {
                    published.incrementAndGet();
                    // A publish that timed out marks an outage without a reconnect to end it.
                    if (outage.up()) {
                        resendUnsent();
                    }
                })
                .onErrorResume(error -> Mono.fromRunnable(() -> notSent(queue, error.toString())))
                .then();
    }

    private void notSent(String queue, String cause) {
        notSent.incrementAndGet();
        if (!closed.get()) {
            unsent.add(queue);
            outage.down(cause);
        }
    }

    /** Publishes once more for each queue whose poke was lost while Redis was down. */
    private void resendUnsent() {
        Mono.delay(RESEND_DELAY)
                .thenMany(Flux.defer(() -> Flux.fromIterable(List.copyOf(unsent))))
                .filter(unsent::remove)
                .concatMap(this::publish)
                .subscribe(null, error -> log.debug("resending pokes failed: {}", error.toString()));
    }

    private void onMessage(ChannelMessage<String, String> message) {
        PokeMessage poke = PokeMessage.decode(message.getMessage());
        if (poke == null) {
            log.debug("ignoring a foreign message on {}: {}", channel, message.getMessage());
            return;
        }
        if (poke.origin().equals(origin)) {
            // Our own message coming back: our schedulers were poked when it was sent.
            echoesIgnored.incrementAndGet();
            return;
        }
        received.incrementAndGet();
        emitLocal(poke.queue());
    }

    /** Opens the subscriber and the publisher; on any failure closes what it opened. */
    private Mono<Void> connectOnce() {
        return connector.connectPubSub().flatMap(subscriber -> {
            subscriber.addListener(stateListener);
            // Lettuce keeps this listener across reconnects, and re-subscribes the channel itself.
            Disposable receiving = subscriber.reactive().observeChannels(FluxSink.OverflowStrategy.DROP)
                    .filter(message -> channel.equals(message.getChannel()))
                    .subscribe(this::onMessage, error -> log.warn("poke channel {}: receiving failed", channel, error));
            return subscriber.reactive().subscribe(channel)
                    .then(connector.connect())
                    .flatMap(publisher -> {
                        publisher.addListener(stateListener);
                        Connections opened = new Connections(subscriber, publisher, receiving);
                        if (closed.get() || !connections.compareAndSet(null, opened)) {
                            return opened.close(stateListener);
                        }
                        outage.up();
                        // Pokes made while Redis was down at start go out now.
                        resendUnsent();
                        return Mono.<Void>empty();
                    })
                    .onErrorResume(error -> {
                        receiving.dispose();
                        subscriber.removeListener(stateListener);
                        return Mono.fromCompletionStage(subscriber.closeAsync())
                                .onErrorResume(closeError -> Mono.empty())
                                .then(Mono.error(error));
                    });
        });
    }

    /** Used only when Redis was down at start; after that Lettuce does the reconnecting. */
    private void connectInBackground() {
        reconnecting.update(connectOnce()
                .retryWhen(Retry.backoff(Long.MAX_VALUE, Duration.ofMillis(200)).maxBackoff(Duration.ofSeconds(5))
                        .filter(error -> !closed.get()))
                .subscribe(null, error -> {
                    if (!closed.get()) {
                        log.error("poke channel {}: gave up connecting to Redis", channel, error);
                    }
                }));
    }

    /** Notes outages and recoveries of either connection as Lettuce sees them. */
    private final class StateListener implements RedisConnectionStateListener {

        @Override
        public void onRedisDisconnected(RedisChannelHandler<?, ?> connection) {
            if (!closed.get()) {
                outage.down("connection lost");
            }
        }

        @Override
        public void onRedisConnected(RedisChannelHandler<?, ?> connection, SocketAddress socketAddress) {
            if (!closed.get() && outage.up()) {
                resendUnsent();
            }
        }
    }

    private record Connections(StatefulRedisPubSubConnection<String, String> subscriber,
            StatefulRedisConnection<String, String> publisher, Disposable receiving) {

        Mono<Void> close(RedisConnectionStateListener listener) {
            receiving.dispose();
            subscriber.removeListener(listener);
            publisher.removeListener(listener);
            return Closing.all(List.of(closeAsync(subscriber), closeAsync(publisher)));
        }

        private static Mono<Void> closeAsync(StatefulConnection<?, ?> connection) {
            return Mono.fromCompletionStage(connection::closeAsync);
        }
    }

    @Override
    public String toString() {
        return "LettucePokeTransport{channel=" + channel + ", redis=" + connector.where() + "}";
    }
}
