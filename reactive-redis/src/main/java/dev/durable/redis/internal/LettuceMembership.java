package dev.durable.redis.internal;

import dev.durable.redis.RedisMembership;
import dev.durable.redis.RedisMembershipOptions;
import dev.durable.redis.RedisUnavailableException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import reactor.core.Disposable;
import reactor.core.Disposables;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Membership in a Redis sorted set: member = node id, score = the Redis server time (ms) at which
 * its registration expires. Registering prunes expired entries and pushes the node's expiry out;
 * reading prunes and lists what is left. Both run as scripts on the server's clock, so nodes with
 * skewed clocks agree on who has expired.
 */
public final class LettuceMembership implements RedisMembership {

    private static final Logger log = Loggers.getLogger(LettuceMembership.class);
    /** A command that takes longer is abandoned; the next tick tries again. */
    private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(2);

    /** Server time in ms; effects replication lets the writes that follow TIME replicate (Redis < 5). */
    private static final String NOW = "if redis.replicate_commands then redis.replicate_commands() end\n"
            + "local t = redis.call('TIME')\n"
            + "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n";

    /**
     * KEYS[1] registry, ARGV[1] node, ARGV[2] ttl ms. The key itself expires a TTL after the last
     * registration, so an abandoned group leaves nothing behind.
     */
    private static final String REGISTER = NOW
            + "local ttl = tonumber(ARGV[2])\n"
            + "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
            + "local added = redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])\n"
            + "if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end\n"
            + "return added";

    /** KEYS[1] registry: prunes expired nodes and lists the live ones. */
    private static final String LIST = NOW
            + "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
            + "return redis.call('ZRANGE', KEYS[1], 0, -1)";

    private final RedisConnector connector;
    private final StatefulRedisConnection<String, String> connection;
    private final RedisMembershipOptions options;
    private final String[] keys;
    private final OutageLog outage;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Disposable.Swap heartbeat = Disposables.swap();
    private final AtomicLong ticksDropped = new AtomicLong();
    /** Ends {@link #members()} when this node leaves. */
    private final Sinks.Empty<Void> left = Sinks.empty();
    private final Flux<Set<String>> members;

    private LettuceMembership(RedisConnector connector, StatefulRedisConnection<String, String> connection,
            RedisMembershipOptions options) {
        this.connector = connector;
        this.connection = connection;
        this.options = options;
        this.keys = new String[] {options.key()};
        this.outage = new OutageLog(log, "membership " + options.group() + " of " + options.nodeId() + " at "
                + connector.where(), "heartbeats and reads resume when it is back; a TTL of " + options.ttl()
                + " bridges short outages");
        this.members = Flux.interval(Duration.ZERO, options.pollInterval())
                // A slow read must not make the interval fail for lack of demand: skip the tick.
                .onBackpressureDrop(tick -> ticksDropped.incrementAndGet())
                .concatMap(tick -> list().onErrorResume(error -> {
                    outage.down(error.toString());
                    return Mono.empty();
                }), 1)
                .distinctUntilChanged()
                .takeUntilOther(left.asMono())
                .replay(1)
                .refCount();
    }

    /** Connects and registers once, so a node that cannot reach Redis learns it now. */
    public static Mono<RedisMembership> join(RedisConnector connector, RedisMembershipOptions options) {
        return connector.connect()
                .flatMap(connection -> {
                    LettuceMembership membership = new LettuceMembership(connector, connection, options);
                    return membership.register()
                            .onErrorResume(error -> Mono.fromCompletionStage(connection::closeAsync)
                                    .onErrorResume(closeError -> Mono.empty())
                                    .then(Mono.error(error)))
                            .then(Mono.fromRunnable(membership::startHeartbeat))
                            .thenReturn((RedisMembership) membership);
                })
                .onErrorResume(error -> connector.close().onErrorResume(closeError -> Mono.empty())
                        .then(Mono.error(new RedisUnavailableException("membership " + options.group() + " of "
                                + options.nodeId() + ": Redis at " + connector.where() + " not reachable", error))));
    }

    @Override
    public String group() {
        return options.group();
    }

    @Override
    public String nodeId() {
        return options.nodeId();
    }

    @Override
    public Flux<Set<String>> members() {
        return members;
    }

    @Override
    public Mono<Void> close() {
        return Mono.defer(() -> {
            if (!closed.compareAndSet(false, true)) {
                return Mono.empty();
            }
            heartbeat.dispose();
            Sinks.EmitResult ended = left.tryEmitEmpty();
            if (ended.isFailure()) {
                // Only close() emits, once, so this cannot happen; say so if it ever does.
                log.warn("membership {} of {}: members() not ended: {}", options.group(), options.nodeId(), ended);
            }
            Mono<Void> deregister = connection.isOpen()
                    ? connection.reactive().zrem(options.key(), options.nodeId()).timeout(COMMAND_TIMEOUT).then()
                    // Cannot reach Redis: the TTL removes this node instead.
                    : Mono.empty();
            return Closing.all(List.of(deregister, Mono.fromCompletionStage(connection::closeAsync), connector.close()));
        });
    }

    private void startHeartbeat() {
        heartbeat.update(Flux.interval(options.heartbeatInterval())
                .onBackpressureDrop(tick -> ticksDropped.incrementAndGet())
                .concatMap(tick -> register().onErrorResume(error -> {
                    outage.down(error.toString());
                    return Mono.empty();
                }), 1)
                .subscribe(null, error -> log.error("membership {} of {}: heartbeat stopped", options.group(),
                        options.nodeId(), error)));
    }

    private Mono<Void> register() {
        return Mono.defer(() -> {
            if (closed.get()) {
                return Mono.empty();
            }
            if (!connection.isOpen()) {
                // Lettuce is reconnecting: queueing a beat for later would only make it stale.
                return Mono.error(new IllegalStateException("not connected"));
            }
            return connection.reactive()
                    .<Long>eval(REGISTER, ScriptOutputType.INTEGER, keys, options.nodeId(),
                            Long.toString(options.ttl().toMillis()))
                    .timeout(COMMAND_TIMEOUT)
                    .doOnNext(added -> {
                        outage.up();
                        if (added == 1L) {
                            log.debug("membership {}: {} registered", options.group(), options.nodeId());
                        }
                    })
                    .then();
        });
    }

    private Mono<Set<String>> list() {
        return Mono.defer(() -> {
            if (closed.get()) {
                return Mono.empty();
            }
            if (!connection.isOpen()) {
                return Mono.error(new IllegalStateException("not connected"));
            }
            return connection.reactive().<Object>eval(LIST, ScriptOutputType.MULTI, keys)
                    .timeout(COMMAND_TIMEOUT)
                    // Lettuce may hand the script's array over whole or element by element.
                    .concatMapIterable(item -> item instanceof Collection<?> many ? many : List.of(item))
                    .map(String::valueOf)
                    .collect(Collectors.toUnmodifiableSet())
                    .doOnNext(nodes -> outage.up());
        });
    }

    @Override
    public String toString() {
        return "LettuceMembership{" + options + "}";
    }
}
