package dev.durable.redis;

import dev.durable.Limits;
import dev.durable.limit.GateSlot;
import dev.durable.limit.LimitClaim;
import dev.durable.limit.Limiter;
import dev.durable.limit.LimiterContext;
import dev.durable.limit.LimiterUnavailableException;
import dev.durable.limit.LiveGateClaims;
import dev.durable.limit.PermitSlots;
import dev.durable.limit.RateSlot;
import dev.durable.limit.WindowSlot;
import dev.durable.redis.internal.LimiterEndpoint;
import dev.durable.redis.internal.LimiterScripts;
import dev.durable.redis.internal.OutageLog;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanStream;
import io.lettuce.core.cluster.api.reactive.RedisClusterReactiveCommands;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * A lease-native limiter on Redis, for engines that share one database: gates and token buckets as
 * atomic Lua scripts ({@code LimiterScripts}), one key per gate counter (gate, key, shard) and per
 * bucket (rate limit, partition).
 *
 * <p>A gate slot is a member of its counter's sorted set, scored by its expiry on Redis's clock. The
 * engine renews the slots it holds on every heartbeat tick; a holder that crashed stops renewing and
 * its slot is dropped by the next script that touches the counter once its TTL (the engine's lease
 * TTL and a heartbeat) has passed, about when the reaper can take the row back. Buckets behave as
 * the PostgreSQL ones: rate, burst, weight, partition, admitted in urgency order.
 *
 * <p>A Redis that loses its data (restarted without persistence, failed over to an empty replica)
 * forgets the slots live claims hold. Each counter therefore has a ledger mark beside it: without
 * the mark, the first admission counts the gate's live claims in the database
 * ({@link LiveGateClaims}) and holds a stand-in slot for each one the counter lacks, until its holder
 * renews it, so the gate never admits past its capacity while the holders re-assert. The tokens a
 * lost bucket had spent are forgotten: it starts full again. Redis must not evict these keys
 * ({@code maxmemory-policy noeviction}): an evicted counter is a lost one the mark does not see.
 * The rebuild is exact for claims that committed before it counts; a claim admitted just before
 * Redis lost its data and committed after the count is not stood in for until it renews (within a
 * heartbeat), and a stand-in may outlive a holder that ended before renewing (by one slot TTL at
 * most): the window is one beat and needs Redis to lose its data.
 *
 * <p>A claim's limits are admitted all or nothing although their keys may sit on different Cluster
 * nodes: its gate slot is taken first (a slot can be given back), then its bucket's tokens or its
 * sliding window's count ({@code WINDOW_TAKE}, one hash per window and partition), and the slot of a
 * claim its bucket or window refused goes back before {@link #admit} answers. Permits of
 * {@code engine.limits()} are slots of the same counters ({@link #acquireSlots}), leased for the
 * caller's lease and renewed only while still held.
 *
 * <p>Losing Redis never loses or doubles work: while it is unreachable {@link #admit} signals
 * {@link LimiterUnavailableException}, so limited rows go back to the queue and unlimited ones keep
 * running; the outage is logged once, and once when it ends. Make one with {@link RedisLimiters}.
 */
public final class RedisLimiter implements Limiter {

    private static final Logger log = Loggers.getLogger(RedisLimiter.class);

    private final LimiterEndpoint endpoint;
    private final String keyPrefix;
    private final Duration timeout;
    private final long slotTtlMillis;
    private final Map<String, Limits.Gate> gates;
    private final Map<String, Limits.RateLimit> rateLimits;
    private final Map<String, Limits.Window> windows;
    private final LiveGateClaims liveClaims;
    private final OutageLog outage = new OutageLog(log, "Durable limiter",
            "limited rows wait in their queues, unlimited ones keep running");
    private final Mono<StatefulConnection<String, String>> connection;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final java.util.concurrent.atomic.AtomicReference<StatefulConnection<String, String>> connected =
            new java.util.concurrent.atomic.AtomicReference<>();

    RedisLimiter(LimiterEndpoint endpoint, LimiterContext context, RedisLimiterOptions options) {
        this.endpoint = endpoint;
        this.keyPrefix = options.keyPrefix() + ":{" + context.schema();
        this.timeout = options.commandTimeout();
        this.slotTtlMillis = context.slotTtl().toMillis();
        this.gates = context.gates();
        this.rateLimits = context.rateLimits();
        this.windows = context.windows();
        this.liveClaims = LiveGateClaims.of(context);
        // Connected on first use and kept (Lettuce reconnects it); a failed connect is tried again next time.
        this.connection = endpoint.connect().<StatefulConnection<String, String>>map(made -> made)
                .doOnNext(connected::set).cache(made -> Duration.ofMillis(Long.MAX_VALUE),
                error -> Duration.ZERO, () -> Duration.ZERO);
    }

    /**
     * Connects now, so the first pick does not pay for the connection inside its command timeout;
     * never fails (while Redis is down the engine starts anyway and admits once it is back).
     */
    Mono<Void> warmUp() {
        return connection.timeout(Duration.ofSeconds(5)).then().onErrorResume(error -> {
            outage.down(error.toString());
            return Mono.empty();
        });
    }

    /** The counter of one (gate, key, shard): its whole name is the hash tag. */
    String gateKey(String gate, String key, int shard) {
        return keyPrefix + ":gate:" + gate + ":" + shard + ":" + key + "}";
    }

    private String gateKey(GateSlot slot) {
        return gateKey(slot.name(), slot.key(), slot.shard());
    }

    /** The ledger mark of a gate counter: beside it, in its hash slot. */
    static String ledgerKey(String gateKey) {
        return gateKey + ":ledger";
    }

    /** The bucket of one (rate limit, partition). */
    String bucketKey(String rateLimit, String partition) {
        return keyPrefix + ":rate:" + rateLimit + ":" + partition + "}";
    }

    @Override
    public Mono<Set<Long>> admit(List<LimitClaim> claims) {
        if (claims.isEmpty()) {
            return Mono.just(Set.of());
        }
        return Mono.defer(() -> {
            // All or nothing across keys that may live on different Cluster nodes: slots first (they
            // can be given back), then window counts for the claims their gate seated (given back too),
            // then tokens for the claims their window counted (tokens cannot be given back); then the
            // counts and slots of claims a later limit refused go back.
            Set<Long> refused = java.util.concurrent.ConcurrentHashMap.newKeySet();
            Map<String, List<LimitClaim>> byGate = new LinkedHashMap<>();
            for (LimitClaim claim : claims) {
                if (claim.gate() != null) {
                    byGate.computeIfAbsent(gateKey(claim.gate()), k -> new ArrayList<>()).add(claim);
                }
            }
            List<LimitClaim> seated = new ArrayList<>();
            Map<String, List<LimitClaim>> counted = new java.util.concurrent.ConcurrentHashMap<>();
            Map<String, String> countedSlot = new java.util.concurrent.ConcurrentHashMap<>();
            return takeSlots(byGate, refused).then(Mono.defer(() -> {
                Map<String, List<LimitClaim>> byWindow = new LinkedHashMap<>();
                for (LimitClaim claim : claims) {
                    if (refused.contains(claim.id())) {
                        continue;
                    }
                    if (claim.gate() != null) {
                        seated.add(claim);
                    }
                    Window window = windowOf(claim);
                    if (window != null) {
                        byWindow.computeIfAbsent(windowKey(window.name(), window.partition()), k -> new ArrayList<>())
                                .add(claim);
                    }
                }
                return Flux.fromIterable(byWindow.entrySet())
                        .flatMap(window -> takeWindowCounts(window.getKey(), window.getValue(), refused, counted,
                                countedSlot))
                        .then();
            })).then(Mono.defer(() -> {
                Map<String, List<LimitClaim>> byBucket = new LinkedHashMap<>();
                for (LimitClaim claim : claims) {
                    if (!refused.contains(claim.id()) && bucketOf(claim) != null) {
                        byBucket.computeIfAbsent(bucketKey(claim.rate().name(), claim.rate().partitionKey()),
                                k -> new ArrayList<>()).add(claim);
                    }
                }
                return Flux.fromIterable(byBucket.entrySet())
                        .flatMap(bucket -> takeTokens(bucket.getKey(), bucket.getValue(), refused))
                        .then();
            })).then(Mono.defer(() -> giveBackCounts(counted, countedSlot, refused)
                            // Given back once: a failure after this point must not give them back again.
                            .doOnSuccess(done -> counted.clear())))
                    .then(Mono.defer(() -> credit(seated.stream().filter(claim -> refused.contains(claim.id())).toList())))
                    .then(Mono.fromSupplier(() -> {
                        Set<Long> admitted = new HashSet<>();
                        for (LimitClaim claim : claims) {
                            if (!refused.contains(claim.id())) {
                                admitted.add(claim.id());
                            }
                        }
                        return admitted;
                    }))
                    // Failed part-way (Redis down after some counters seated their claims): the engine
                    // admits none of them, so give back whatever window count and slot any of them got,
                    // before failing.
                    .onErrorResume(error -> Mono.defer(() -> {
                        claims.forEach(claim -> refused.add(claim.id()));
                        return giveBackCounts(counted, countedSlot, refused);
                    }).onErrorResume(giveBackError -> {
                        error.addSuppressed(giveBackError);
                        return Mono.empty();
                    }).then(credit(claims).onErrorResume(creditError -> {
                        error.addSuppressed(creditError);
                        return Mono.empty();
                    })).then(Mono.error(error)));
        });
    }

    /** A claim's sliding window: its window slot, or a window named in its rate slot. */
    private record Window(String name, String partition, int weight, Limits.Window limit) {
    }

    private @Nullable Window windowOf(LimitClaim claim) {
        WindowSlot slot = claim.window();
        if (slot != null) {
            Limits.Window limit = windows.get(slot.name());
            return limit == null ? null : new Window(slot.name(), slot.partitionKey(), slot.weight(), limit);
        }
        RateSlot rate = claim.rate();
        if (rate != null && !rateLimits.containsKey(rate.name()) && windows.containsKey(rate.name())) {
            return new Window(rate.name(), rate.partitionKey(), rate.weight(), windows.get(rate.name()));
        }
        return null;
    }

    /** A claim's token bucket (its rate slot when that names no window), or null. */
    private @Nullable String bucketOf(LimitClaim claim) {
        String name = claim.rate() == null ? null : claim.rate().name();
        return name == null || !rateLimits.containsKey(name) && windows.containsKey(name) ? null : name;
    }

    /**
     * Counts the claims on one window partition (one hash, one script); notes the slot it counted in,
     * so the counts of claims a later limit refuses can be given back there.
     */
    private Mono<Void> takeWindowCounts(String key, List<LimitClaim> claims, Set<Long> refused,
            Map<String, List<LimitClaim>> counted, Map<String, String> countedSlot) {
        Window first = windowOf(claims.get(0));
        List<String> args = new ArrayList<>(claims.size() + 3);
        args.add(Long.toString(first.limit().slotMillis()));
        args.add(Integer.toString(first.limit().limit()));
        args.add(Integer.toString(Limits.Window.SLOTS + 1));
        claims.forEach(claim -> args.add(Integer.toString(windowOf(claim).weight())));
        return this.<String>run(LimiterScripts.WINDOW_TAKE_AT, ScriptOutputType.VALUE, List.of(key), args)
                .doOnNext(answer -> {
                    int colon = answer.indexOf(':');
                    String flags = colon < 0 ? answer : answer.substring(0, colon);
                    markRefused(flags, claims, refused);
                    if (colon >= 0) {
                        countedSlot.put(key, answer.substring(colon + 1));
                        List<LimitClaim> took = new ArrayList<>();
                        for (int i = 0; i < claims.size(); i++) {
                            if (i < flags.length() && flags.charAt(i) == '1') {
                                took.add(claims.get(i));
                            }
                        }
                        counted.put(key, took);
                    }
                })
                .then();
    }

    /** Gives back, in the slot they were counted in, the window counts of claims their bucket refused. */
    private Mono<Void> giveBackCounts(Map<String, List<LimitClaim>> counted, Map<String, String> countedSlot,
            Set<Long> refused) {
        return Flux.fromIterable(counted.entrySet())
                .flatMap(window -> {
                    int weight = window.getValue().stream().filter(claim -> refused.contains(claim.id()))
                            .mapToInt(claim -> windowOf(claim).weight()).sum();
                    if (weight == 0) {
                        return Mono.empty();
                    }
                    return this.<Long>run(LimiterScripts.WINDOW_GIVE_BACK, ScriptOutputType.INTEGER,
                            List.of(window.getKey()), List.of(countedSlot.get(window.getKey()), Integer.toString(weight)))
                            .onErrorResume(error -> {
                                log.debug("window {}: counts not given back ({}); they age out with their slot",
                                        window.getKey(), error.toString());
                                return Mono.empty();
                            });
                })
                .then();
    }

    private Mono<Void> takeTokens(String key, List<LimitClaim> claims, Set<Long> refused) {
        Limits.RateLimit limit = rateLimits.get(claims.get(0).rate().name());
        if (limit == null) {
            claims.forEach(claim -> refused.add(claim.id()));
            return Mono.empty();
        }
        List<String> args = new ArrayList<>(claims.size() + 2);
        args.add(Double.toString(limit.ratePerSecond()));
        args.add(Integer.toString(limit.burst()));
        claims.forEach(claim -> args.add(Integer.toString(claim.rate().weight())));
        return this.<String>run(LimiterScripts.BUCKET_TAKE, ScriptOutputType.VALUE, List.of(key), args)
                .doOnNext(flags -> markRefused(flags, claims, refused))
                .then();
    }

    /**
     * Takes the slots of each gate counter. A counter without its ledger mark answers '?': the live
     * claims of all such counters are counted in the database in one statement, and each is asked
     * again with its count, which it stands in for.
     */
    private Mono<Void> takeSlots(Map<String, List<LimitClaim>> byGate, Set<Long> refused) {
        return Flux.fromIterable(byGate.entrySet())
                .flatMap(gate -> takeSlots(gate.getKey(), gate.getValue(), -1)
                        .map(flags -> Map.entry(gate.getKey(), flags)))
                .collectList()
                .flatMap(answers -> {
                    List<String> unmarked = new ArrayList<>();
                    for (Map.Entry<String, String> answer : answers) {
                        if (answer.getValue().equals("?")) {
                            unmarked.add(answer.getKey());
                        } else {
                            markRefused(answer.getValue(), byGate.get(answer.getKey()), refused);
                        }
                    }
                    if (unmarked.isEmpty()) {
                        return Mono.empty();
                    }
                    return rebuildLedgers(unmarked.stream().map(key -> byGate.get(key).get(0).gate()).toList())
                            .flatMapMany(live -> Flux.range(0, unmarked.size())
                                    .flatMap(i -> takeSlots(unmarked.get(i), byGate.get(unmarked.get(i)), live.get(i))
                                            .doOnNext(flags -> markRefused(flags, byGate.get(unmarked.get(i)), refused))))
                            .then();
                });
    }

    /**
     * Asks one gate counter for slots for {@code claims}, given the live claims the database shows
     * for it ({@code live}, or -1 when not counted): the script's flags, or '?' when it needs the count.
     */
    private Mono<String> takeSlots(String key, List<LimitClaim> claims, long live) {
        Limits.Gate gate = gates.get(claims.get(0).gate().name());
        if (gate == null) {
            return Mono.just(""); // an unknown gate admits nothing
        }
        int shard = claims.get(0).gate().shard();
        // Each shard holds an even share of the capacity, the first ones one more, as in PostgreSQL.
        int capacity = gate.capacity() / gate.shards() + (shard < gate.capacity() % gate.shards() ? 1 : 0);
        List<String> args = new ArrayList<>(claims.size() + 3);
        args.add(Integer.toString(capacity));
        args.add(Long.toString(slotTtlMillis));
        args.add(Long.toString(live));
        claims.forEach(claim -> args.add(claim.holder()));
        return run(LimiterScripts.GATE_ACQUIRE, ScriptOutputType.VALUE, List.of(key, ledgerKey(key)), args);
    }

    /**
     * The live claims the database shows for counters that lost their ledger mark (Redis lost its
     * data, or the gate was idle for longer than the mark lives), one claim of each counter given:
     * the admissions that follow stand in for the ones the counters forgot. One statement for the
     * whole pick, on a connection of its own (the pick's transaction holds its own), bounded by the
     * engine's call timeout; a failure makes this pick admit nothing limited, as an outage does.
     */
    private Mono<List<Long>> rebuildLedgers(List<GateSlot> counters) {
        return liveClaims.count(counters)
                .doOnNext(live -> log.debug("{} gate counters had no ledger mark; live claims in the database: {}",
                        counters.size(), live))
                .onErrorMap(error -> new LimiterUnavailableException("the live claims of " + counters.size()
                        + " gate counters could not be counted in the database: " + error, error));
    }

    private static void markRefused(String flags, List<LimitClaim> claims, Set<Long> refused) {
        for (int i = 0; i < claims.size(); i++) {
            if (i >= flags.length() || flags.charAt(i) != '1') {
                refused.add(claims.get(i).id());
            }
        }
    }

    /**
     * A permit's slots are members of the gate's counter like a claimed row's, named
     * {@code holder#1..slots}, scored by the permit's lease; taken in one script, all or none (a
     * partial grant is given back at once). A counter without its ledger mark is rebuilt first, as
     * for rows.
     */
    @Override
    public Mono<Boolean> acquireSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
            Duration lease) {
        String counter = gateKey(gate.name(), key, shard);
        List<String> holders = permitHolders(holder, slots);
        return takePermitSlots(counter, gate.shardCapacity(shard), holders, lease, -1)
                .flatMap(flags -> !flags.equals("?") ? Mono.just(flags)
                        : rebuildLedgers(List.of(new GateSlot(gate.name(), key, shard)))
                                .flatMap(live -> takePermitSlots(counter, gate.shardCapacity(shard), holders, lease,
                                        live.get(0))))
                .flatMap(flags -> {
                    if (flags.chars().filter(c -> c == '1').count() == slots) {
                        return Mono.just(true);
                    }
                    return releaseSlots(holder, gate, key, shard, slots).thenReturn(false);
                });
    }

    private Mono<String> takePermitSlots(String counter, int capacity, List<String> holders, Duration lease, long live) {
        List<String> args = new ArrayList<>(holders.size() + 3);
        args.add(Integer.toString(capacity));
        args.add(Long.toString(Math.max(1, lease.toMillis())));
        args.add(Long.toString(live));
        args.addAll(holders);
        return run(LimiterScripts.GATE_ACQUIRE, ScriptOutputType.VALUE, List.of(counter, ledgerKey(counter)), args);
    }

    /** Renews only slots still held: a permit whose lease ended is not taken again (false, the rest given back). */
    @Override
    public Mono<Boolean> renewSlots(String holder, Limits.Gate gate, String key, int shard, int slots,
            Duration lease) {
        List<String> args = new ArrayList<>(slots + 1);
        args.add(Long.toString(Math.max(1, lease.toMillis())));
        args.addAll(permitHolders(holder, slots));
        return this.<Long>run(LimiterScripts.PERMIT_RENEW, ScriptOutputType.INTEGER,
                        List.of(gateKey(gate.name(), key, shard)), args)
                .flatMap(renewed -> renewed == slots ? Mono.just(true)
                        : releaseSlots(holder, gate, key, shard, slots).thenReturn(false));
    }

    @Override
    public Mono<Void> releaseSlots(String holder, Limits.Gate gate, String key, int shard, int slots) {
        return this.<Long>run(LimiterScripts.GATE_RELEASE, ScriptOutputType.INTEGER,
                List.of(gateKey(gate.name(), key, shard)), permitHolders(holder, slots)).then();
    }

    /** The window's partition is one hash, its own hash tag: one script, one Cluster slot. */
    @Override
    public Mono<Boolean> takeWindow(Limits.Window window, String partition, int weight) {
        return this.<String>run(LimiterScripts.WINDOW_TAKE, ScriptOutputType.VALUE,
                        List.of(windowKey(window.name(), partition)),
                        List.of(Long.toString(window.slotMillis()), Integer.toString(window.limit()),
                                Integer.toString(Limits.Window.SLOTS + 1), Integer.toString(weight)))
                .map(flags -> flags.equals("1"));
    }

    /** The sliding window of one (window, partition). */
    String windowKey(String window, String partition) {
        return keyPrefix + ":window:" + window + ":" + partition + "}";
    }

    private static List<String> permitHolders(String holder, int slots) {
        List<String> holders = new ArrayList<>(slots);
        for (int i = 1; i <= slots; i++) {
            holders.add(holder + "#" + i);
        }
        return holders;
    }

    @Override
    public Mono<Void> credit(Collection<LimitClaim> claims) {
        Map<String, List<String>> byGate = holdersByGate(claims);
        if (byGate.isEmpty()) {
            return Mono.empty();
        }
        return Flux.fromIterable(byGate.entrySet())
                .flatMap(gate -> this.<Long>run(LimiterScripts.GATE_RELEASE, ScriptOutputType.INTEGER,
                        List.of(gate.getKey()), gate.getValue()))
                .then();
    }

    @Override
    public Mono<Long> renew(Collection<LimitClaim> claims) {
        Map<String, List<String>> byGate = holdersByGate(claims);
        if (byGate.isEmpty()) {
            return Mono.just(0L);
        }
        return Flux.fromIterable(byGate.entrySet())
                .flatMap(gate -> {
                    List<String> args = new ArrayList<>(gate.getValue().size() + 1);
                    args.add(Long.toString(slotTtlMillis));
                    args.addAll(gate.getValue());
                    return this.<Long>run(LimiterScripts.GATE_RENEW, ScriptOutputType.INTEGER,
                            List.of(gate.getKey(), ledgerKey(gate.getKey())), args);
                })
                .reduce(0L, Long::sum);
    }

    /**
     * Walks this schema's gate counters with SCAN (on a cluster, every master in turn; never KEYS, which
     * would stall Redis) and counts the live permit slots of each ({@code PERMIT_COUNT}, read only):
     * per (gate, key) over its shards, the most first, at most {@code max}. Counters of gates this engine
     * does not configure are skipped (their names cannot be told from their keys). The walk is bounded
     * by ten command timeouts in all.
     */
    @Override
    public Mono<List<PermitSlots>> permitSlots(int max) {
        String counters = keyPrefix + ":gate:";
        return connection.flatMapMany(made -> ScanStream.scan(endpoint.commands().apply(made),
                        ScanArgs.Builder.matches(globEscaped(counters) + "*").limit(500)))
                .filter(key -> key.endsWith("}"))
                .flatMap(key -> {
                    Map.Entry<String, String> gateAndKey = gateAndKey(key.substring(counters.length(), key.length() - 1));
                    if (gateAndKey == null) {
                        return Mono.empty();
                    }
                    return this.<Long>run(LimiterScripts.PERMIT_COUNT, ScriptOutputType.INTEGER, List.of(key), List.of())
                            .filter(slots -> slots > 0)
                            .map(slots -> new PermitSlots(gateAndKey.getKey(), gateAndKey.getValue(), slots));
                }, 8)
                .collect(java.util.stream.Collectors.toMap(held -> List.of(held.gate(), held.key()), held -> held,
                        (one, other) -> new PermitSlots(one.gate(), one.key(), one.slots() + other.slots())))
                .map(byKey -> byKey.values().stream()
                        .sorted(java.util.Comparator.comparingLong(PermitSlots::slots).reversed()
                                .thenComparing(PermitSlots::gate).thenComparing(PermitSlots::key))
                        .limit(max)
                        .toList())
                .transform(call -> guardedFor(call, timeout.multipliedBy(10)));
    }

    /** (gate, key) of a counter named {@code <gate>:<shard>:<key>}: the longest configured gate that fits. */
    private Map.@Nullable Entry<String, String> gateAndKey(String counter) {
        Map.Entry<String, String> found = null;
        for (String gate : gates.keySet()) {
            if (counter.startsWith(gate + ":") && (found == null || gate.length() > found.getKey().length())) {
                int shardEnd = counter.indexOf(':', gate.length() + 1);
                if (shardEnd > gate.length() + 1
                        && counter.substring(gate.length() + 1, shardEnd).chars().allMatch(Character::isDigit)) {
                    found = Map.entry(gate, counter.substring(shardEnd + 1));
                }
            }
        }
        return found;
    }

    /** {@code text} matched literally in a SCAN pattern. */
    private static String globEscaped(String text) {
        StringBuilder escaped = new StringBuilder(text.length());
        for (char c : text.toCharArray()) {
            if ("*?[]\\".indexOf(c) >= 0) {
                escaped.append('\\');
            }
            escaped.append(c);
        }
        return escaped.toString();
    }

    /** Nothing to heal: slots expire by themselves and buckets refill by time. */
    @Override
    public Mono<Long> reconcile() {
        return Mono.just(0L);
    }

    @Override
    public Mono<Void> close() {
        if (!closed.compareAndSet(false, true)) {
            return Mono.empty();
        }
        StatefulConnection<String, String> made = connected.get();
        Mono<Void> closeConnection = made == null ? Mono.empty()
                : Mono.fromCompletionStage(made.closeAsync()).onErrorResume(error -> Mono.empty()).then();
        return closeConnection.then(endpoint.shutdown());
    }

    private Map<String, List<String>> holdersByGate(Collection<LimitClaim> claims) {
        Map<String, List<String>> byGate = new LinkedHashMap<>();
        for (LimitClaim claim : claims) {
            if (claim.gate() != null) {
                byGate.computeIfAbsent(gateKey(claim.gate()), k -> new ArrayList<>()).add(claim.holder());
            }
        }
        return byGate;
    }

    /** Runs a script by its digest, sending its text only when Redis does not have it (first use, restart). */
    private <T> Mono<T> run(String script, ScriptOutputType type, List<String> scriptKeys, List<String> args) {
        String[] keys = scriptKeys.toArray(String[]::new);
        String[] values = args.toArray(String[]::new);
        return connection.flatMap(made -> {
            RedisClusterReactiveCommands<String, String> commands = endpoint.commands().apply(made);
            return commands.<T>evalsha(sha1(script), type, keys, values)
                    .onErrorResume(RedisNoScriptException.class, missing -> commands.eval(script, type, keys, values))
                    .next();
        }).transform(this::guarded);
    }

    /** Bounds a Redis call by the command timeout and turns any failure into an unavailable limiter, logged once per outage. */
    private <T> Mono<T> guarded(Mono<T> call) {
        return guardedFor(call, timeout);
    }

    private <T> Mono<T> guardedFor(Mono<T> call, Duration timeout) {
        return call.timeout(timeout)
                .doOnSuccess(done -> outage.up())
                .onErrorMap(error -> {
                    outage.down(error.toString());
                    return new LimiterUnavailableException("Redis limiter at " + endpoint.where() + " unavailable: "
                            + error, error);
                });
    }

    private static final Map<String, String> DIGESTS = new java.util.concurrent.ConcurrentHashMap<>();

    private static String sha1(String script) {
        return DIGESTS.computeIfAbsent(script, text -> {
            try {
                return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1")
                        .digest(text.getBytes(StandardCharsets.UTF_8)));
            } catch (NoSuchAlgorithmException e) {
                throw new IllegalStateException("SHA-1 is missing from this JVM", e);
            }
        });
    }

    @Override
    public String toString() {
        return "RedisLimiter{" + endpoint.where() + ", prefix=" + keyPrefix + "}";
    }
}
