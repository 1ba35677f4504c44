package dev.durable.internal.sql;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.Limits;
import dev.durable.internal.Db;
import dev.durable.internal.sql.Rows.CancelRow;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import dev.durable.internal.sql.Rows.OutcomeRow;
import dev.durable.internal.sql.Rows.Transition;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Instant;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Runs the statements of {@link Sql} and maps their rows. No SQL text lives anywhere else. */
public final class InstanceStore {

    private static final String[] NO_STRINGS = new String[0];

    private final Db db;
    private final Sql sql;
    private final boolean limits;
    private final String[] gateNames;
    private final Integer[] gateCapacities;
    private final Integer[] gateShards;
    private final String[] rateNames;
    private final Double[] rates;
    private final Integer[] bursts;

    public InstanceStore(Db db, Sql sql, Collection<Limits.Gate> gates, Collection<Limits.RateLimit> rateLimits) {
        this.db = db;
        this.sql = sql;
        this.limits = !gates.isEmpty() || !rateLimits.isEmpty();
        this.gateNames = gates.stream().map(Limits.Gate::name).toArray(String[]::new);
        this.gateCapacities = gates.stream().map(Limits.Gate::capacity).toArray(Integer[]::new);
        this.gateShards = gates.stream().map(Limits.Gate::shards).toArray(Integer[]::new);
        this.rateNames = rateLimits.stream().map(Limits.RateLimit::name).toArray(String[]::new);
        this.rates = rateLimits.stream().map(Limits.RateLimit::ratePerSecond).toArray(Double[]::new);
        this.bursts = rateLimits.stream().map(Limits.RateLimit::burst).toArray(Integer[]::new);
    }

    public Sql sql() {
        return sql;
    }

    /**
     * Inserts the rows in one round trip on a pooled connection, rows with a claimer (null for
     * none) claimed by it; emits the inserted rows in request order.
     */
    public Flux<ClaimedRow> insert(List<NewInstance> rows, @Nullable String[] claimers, long leaseMillis) {
        return db.withConnection(connection -> insert(connection, rows, claimers, leaseMillis));
    }

    /** Inserts on the caller's connection, inside whatever transaction it has open; emits ids. */
    public Flux<Long> insert(Connection connection, List<NewInstance> rows) {
        return insert(connection, rows, new String[rows.size()], 0).map(ClaimedRow::id);
    }

    private Flux<ClaimedRow> insert(Connection connection, List<NewInstance> rows, @Nullable String[] claimers,
            long leaseMillis) {
        int n = rows.size();
        String[] types = new String[n];
        Integer[] versions = new Integer[n];
        String[] queues = new String[n];
        Integer[] priorities = new Integer[n];
        String[] steps = new String[n];
        String[] states = new String[n];
        Integer[] maxAttempts = new Integer[n];
        String[] runAts = new String[n];
        Long[] delays = new Long[n];
        Long[] parents = new Long[n];
        String[] concurrencyKeys = new String[n];
        String[] correlationKeys = new String[n];
        String[] occupied = new String[n];
        String[] gates = new String[n];
        Integer[] shards = new Integer[n];
        String[] rateLimits = new String[n];
        Integer[] weights = new Integer[n];
        String[] partitions = new String[n];
        for (int i = 0; i < n; i++) {
            NewInstance row = rows.get(i);
            gates[i] = row.gate();
            shards[i] = row.gateShards();
            rateLimits[i] = row.rateLimit();
            weights[i] = row.rateWeight();
            partitions[i] = row.ratePartition();
            types[i] = row.type();
            versions[i] = row.typeVersion();
            queues[i] = row.queue();
            priorities[i] = row.priority();
            steps[i] = row.step();
            states[i] = row.stateJson();
            maxAttempts[i] = row.maxAttempts();
            runAts[i] = row.runAt();
            delays[i] = row.delayMillis();
            parents[i] = row.parentId();
            concurrencyKeys[i] = row.concurrencyKey();
            correlationKeys[i] = row.correlationKey();
            occupied[i] = row.occupiedStatuses();
        }
        Statement statement = connection.createStatement(sql.insertInstances)
                .bind(0, types).bind(1, versions).bind(2, queues).bind(3, priorities).bind(4, steps)
                .bind(5, states).bind(6, maxAttempts).bind(7, runAts).bind(8, delays).bind(9, parents)
                .bind(10, concurrencyKeys).bind(11, correlationKeys).bind(12, occupied).bind(13, gates)
                .bind(14, shards).bind(15, rateLimits).bind(16, weights).bind(17, partitions)
                .bind(18, claimers).bind(19, leaseMillis);
        return Flux.from(statement.execute())
                .concatMap(result -> result.map(InstanceStore::toClaimed))
                .onErrorMap(dev.durable.internal.Errors::translate);
    }

    public Mono<Instance> get(long id) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.selectInstance)
                        .bind(0, id).execute())
                .concatMap(result -> result.map(InstanceStore::toInstance)))
                .next();
    }

    public Flux<Instance> list(@Nullable String queue, @Nullable InstanceStatus status, long afterId, int limit) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(sql.listInstances);
            Db.bind(statement, 0, queue, String.class);
            Db.bind(statement, 1, status == null ? null : status.sqlName(), String.class);
            statement.bind(2, afterId).bind(3, limit);
            return Flux.from(statement.execute()).concatMap(result -> result.map(InstanceStore::toInstance));
        });
    }

    /** Empty when no instance has that id. */
    public Mono<CancelRow> cancel(long id, boolean cascade) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.cancelInstance)
                        .bind(0, id).bind(1, cascade).execute())
                .concatMap(result -> result.map(row -> {
                    String after = row.get("after", String.class);
                    return new CancelRow(InstanceStatus.fromSql(row.get("before", String.class)),
                            after == null ? null : InstanceStatus.fromSql(after), row.get("queue", String.class));
                })))
                .next();
    }

    /** Claims up to {@code limit} rows of {@code queue} for {@code worker}; see {@link Sql#pick}. */
    public Flux<ClaimedRow> pick(String queue, int limit, String worker, long leaseMillis) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(limits ? sql.pickWithLimits : sql.pick)
                    .bind(0, queue).bind(1, limit).bind(2, worker).bind(3, leaseMillis);
            if (limits) {
                statement.bind(4, gateNames).bind(5, gateCapacities).bind(6, gateShards)
                        .bind(7, rateNames).bind(8, rates).bind(9, bursts);
            }
            return Flux.from(statement.execute()).concatMap(result -> result.map(InstanceStore::toClaimed));
        });
    }

    /**
     * The pick with admission outside the database, in one transaction: locks up to {@code limit}
     * candidates of {@code queue} (skipping the refused limits given), asks {@code admit} about the
     * limited ones (in urgency order) while holding the locks, and claims the admitted and unlimited
     * ones. See {@link Sql#pickLockCandidates}.
     */
    public Flux<ClaimedRow> pickAdmitting(String queue, int limit, String worker, long leaseMillis,
            String[] refusedGates, String[] refusedRates,
            java.util.function.Function<List<Rows.Candidate>, Mono<java.util.Set<Long>>> admit) {
        return db.inTransaction(connection -> Flux.from(connection.createStatement(sql.pickLockCandidates)
                        .bind(0, queue).bind(1, limit).bind(2, gateNames).bind(3, rateNames)
                        .bind(4, refusedGates).bind(5, refusedRates).execute())
                .concatMap(result -> result.map(InstanceStore::toCandidate))
                .collectList()
                .flatMapMany(candidates -> {
                    List<Rows.Candidate> limited = candidates.stream().filter(Rows.Candidate::limited)
                            .sorted(java.util.Comparator.comparingInt(Rows.Candidate::priority)
                                    .thenComparingLong(Rows.Candidate::eligibleMicros).thenComparingLong(Rows.Candidate::id))
                            .toList();
                    Mono<java.util.Set<Long>> admitted = limited.isEmpty() ? Mono.just(java.util.Set.of())
                            : admit.apply(limited);
                    return admitted.flatMapMany(ok -> {
                        Long[] ids = candidates.stream().filter(c -> !c.limited() || ok.contains(c.id()))
                                .map(Rows.Candidate::id).toArray(Long[]::new);
                        if (ids.length == 0) {
                            return Flux.empty();
                        }
                        return Flux.from(connection.createStatement(sql.claimLocked)
                                        .bind(0, ids).bind(1, worker).bind(2, leaseMillis).execute())
                                .concatMap(result -> result.map(InstanceStore::toClaimed));
                    });
                }));
    }

    private static Rows.Candidate toCandidate(Readable row) {
        return new Rows.Candidate(row.get("id", Long.class), row.get("priority", Integer.class),
                row.get("eligible_micros", Long.class), row.get("gate_name", String.class),
                row.get("concurrency_key", String.class), orZero(row.get("gate_shard", Integer.class)),
                row.get("rate_limit", String.class), row.get("rate_partition", String.class),
                orZero(row.get("rate_weight", Integer.class)));
    }

    /** Deletes up to {@code limit} settled instances older than the retention; emits how many. */
    public Mono<Long> collectGarbage(long retentionMillis, int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.collectGarbage)
                        .bind(0, retentionMillis).bind(1, limit).execute())
                .concatMap(result -> result.getRowsUpdated()))
                .reduce(0L, Long::sum);
    }

    /** Recounts the gate counters under a lock that holds picks off; emits how many were wrong. */
    public Mono<Long> reconcileGates() {
        return db.inTransaction(connection -> Flux.from(connection.createStatement(sql.lockGates).execute())
                        .concatMap(result -> result.getRowsUpdated())
                        .thenMany(Flux.from(connection.createStatement(sql.reconcileGates).execute()))
                        .concatMap(result -> result.map(row -> row.get(0, Long.class))))
                .single();
    }

    /** Renews the leases; returns how many rows the worker still holds. */
    public Mono<Long> heartbeat(Collection<Long> ids, String worker, long leaseMillis) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.heartbeat)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).bind(2, leaseMillis).execute())
                .concatMap(result -> result.getRowsUpdated()))
                .reduce(0L, Long::sum);
    }

    public Flux<Transition> release(Collection<Long> ids, String worker) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.release)
                        .bind(0, ids.toArray(Long[]::new)).bind(1, worker).execute())
                .concatMap(result -> result.map(row -> new Transition(row.get("id", Long.class),
                        row.get("queue", String.class), InstanceStatus.RUNNABLE))));
    }

    /**
     * Recovers expired claims: every worker's when {@code prefix} is null (the reaper), else only
     * those of {@code prefix}'s dead incarnations, {@code marginMillis} before they expire.
     */
    public Flux<Transition> recoverExpired(long marginMillis, @Nullable String prefix, String self, int limit) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(sql.recoverExpired).bind(0, marginMillis);
            Db.bind(statement, 1, prefix, String.class);
            statement.bind(2, self).bind(3, limit);
            return Flux.from(statement.execute()).concatMap(result -> result.map(InstanceStore::toTransition));
        });
    }

    /**
     * Commits outcomes. Plain ones (no riders) go as one auto-committed statement; a batch with
     * riders is one transaction of a fixed set of statements: lock, mark consumed signals, the
     * UPDATE, insert children, find woken parents. Emits each committed row's transition, then the
     * parents its children woke.
     */
    public Mono<Committed> commitOutcomes(List<OutcomeRow> outcomes) {
        boolean riders = outcomes.stream().anyMatch(OutcomeRow::hasRiders);
        if (!riders) {
            return db.withConnection(connection -> update(connection, outcomes))
                    .collectList()
                    .map(transitions -> new Committed(transitions, List.of(), List.of()));
        }
        return db.inTransaction(connection -> commitWithRiders(connection, outcomes)).single();
    }

    /** What a commit batch did: the committed rows, the parents it woke and the children it spawned. */
    public record Committed(List<Transition> transitions, List<Transition> wokenParents, List<Transition> spawned) {
    }

    private Mono<Committed> commitWithRiders(Connection connection, List<OutcomeRow> outcomes) {
        Long[] ids = outcomes.stream().map(OutcomeRow::id).toArray(Long[]::new);
        List<Long> signalIds = new java.util.ArrayList<>();
        List<String> signalWorkers = new java.util.ArrayList<>();
        for (OutcomeRow outcome : outcomes) {
            for (Long signal : outcome.consumedSignals()) {
                signalIds.add(signal);
                signalWorkers.add(outcome.worker());
            }
        }
        Mono<Void> lock = Flux.from(connection.createStatement(sql.lockForCommit).bind(0, ids).execute())
                .concatMap(result -> result.map(row -> 1))
                .then();
        Mono<Void> consume = signalIds.isEmpty() ? Mono.empty()
                : Flux.from(connection.createStatement(sql.consumeSignals)
                                .bind(0, signalIds.toArray(Long[]::new))
                                .bind(1, signalWorkers.toArray(String[]::new)).execute())
                        .concatMap(result -> result.getRowsUpdated())
                        .then();
        return lock.then(consume)
                .thenMany(update(connection, outcomes))
                .collectList()
                .flatMap(transitions -> {
                    java.util.Set<Long> committed = new java.util.HashSet<>();
                    Map<Long, InstanceStatus> committedStatus = new java.util.HashMap<>();
                    for (Transition transition : transitions) {
                        committed.add(transition.id());
                        committedStatus.put(transition.id(), transition.status());
                    }
                    List<NewInstance> children = new java.util.ArrayList<>();
                    java.util.Set<Long> parents = new java.util.LinkedHashSet<>();
                    for (OutcomeRow outcome : outcomes) {
                        if (!committed.contains(outcome.id())) {
                            continue;
                        }
                        // A parent whose cancel was requested ended cancelled: its children are not born.
                        if (committedStatus.get(outcome.id()) == InstanceStatus.AWAITING_CHILDREN) {
                            children.addAll(outcome.children());
                        }
                        if (outcome.parentId() != null && outcome.status().isTerminal()) {
                            parents.add(outcome.parentId());
                        }
                    }
                    for (Transition transition : transitions) {
                        // A cancel request turns any outcome terminal: its parent counts it too.
                        if (transition.status() == InstanceStatus.CANCELLED) {
                            outcomes.stream().filter(o -> o.id() == transition.id() && o.parentId() != null)
                                    .forEach(o -> parents.add(o.parentId()));
                        }
                    }
                    // The children's queues are poked once the batch commits, like any insert's.
                    List<Transition> spawned = new java.util.ArrayList<>();
                    Mono<Void> spawn = children.isEmpty() ? Mono.empty() : insert(connection, children)
                            .index()
                            .doOnNext(child -> spawned.add(new Transition(child.getT2(),
                                    children.get(child.getT1().intValue()).queue(), InstanceStatus.RUNNABLE)))
                            .then();
                    Mono<List<Transition>> woken = parents.isEmpty() ? Mono.just(List.of())
                            : Flux.from(connection.createStatement(sql.wokenParents)
                                            .bind(0, parents.toArray(Long[]::new)).execute())
                                    .concatMap(result -> result.map(InstanceStore::toTransition))
                                    .collectList();
                    return spawn.then(woken).map(parentsWoken -> new Committed(transitions, parentsWoken, spawned));
                });
    }

    private Flux<Transition> update(Connection connection, List<OutcomeRow> outcomes) {
        int n = outcomes.size();
        Long[] ids = new Long[n];
        String[] workers = new String[n];
        String[] statuses = new String[n];
        String[] steps = new String[n];
        String[] states = new String[n];
        String[] results = new String[n];
        String[] errors = new String[n];
        Long[] delays = new Long[n];
        Integer[] attempts = new Integer[n];
        Long[] leases = new Long[n];
        String[] awaited = new String[n];
        Long[] awaitMillis = new Long[n];
        Integer[] children = new Integer[n];
        Integer[] keyChanges = new Integer[n];
        String[] newKeys = new String[n];
        String[] newGates = new String[n];
        Integer[] gateShardCounts = new Integer[n];
        Integer[] rateChanges = new Integer[n];
        String[] rateLimits = new String[n];
        Integer[] rateWeights = new Integer[n];
        String[] ratePartitions = new String[n];
        Integer[] claimedAttempts = new Integer[n];
        for (int i = 0; i < n; i++) {
            OutcomeRow outcome = outcomes.get(i);
            ids[i] = outcome.id();
            workers[i] = outcome.worker();
            statuses[i] = outcome.status().sqlName();
            steps[i] = outcome.step();
            states[i] = outcome.stateJson();
            results[i] = outcome.resultJson();
            errors[i] = outcome.error();
            delays[i] = outcome.delayMillis();
            attempts[i] = outcome.attempt();
            leases[i] = outcome.leaseMillis();
            awaited[i] = outcome.awaitedSignals();
            awaitMillis[i] = outcome.awaitMillis();
            children[i] = outcome.children().size();
            keyChanges[i] = outcome.keyChange().ordinal();
            newKeys[i] = outcome.newConcurrencyKey();
            newGates[i] = outcome.newGate();
            gateShardCounts[i] = outcome.gateShards();
            rateChanges[i] = outcome.rateChange().ordinal();
            rateLimits[i] = outcome.rateLimit();
            rateWeights[i] = outcome.rateWeight();
            ratePartitions[i] = outcome.ratePartition();
            claimedAttempts[i] = outcome.claimedAttempt();
        }
        return Flux.from(connection.createStatement(sql.commitOutcomes)
                        .bind(0, ids).bind(1, workers).bind(2, statuses).bind(3, steps).bind(4, states)
                        .bind(5, results).bind(6, errors).bind(7, delays).bind(8, attempts).bind(9, leases)
                        .bind(10, awaited).bind(11, awaitMillis).bind(12, children).bind(13, keyChanges)
                        .bind(14, newKeys).bind(15, newGates).bind(16, gateShardCounts).bind(17, rateChanges)
                        .bind(18, rateLimits).bind(19, rateWeights).bind(20, ratePartitions).bind(21, claimedAttempts)
                        .execute())
                .concatMap(result -> result.map(InstanceStore::toTransition))
                .onErrorMap(dev.durable.internal.Errors::translate);
    }

    /** Delivers a signal by instance id or by live correlation key; empty when no live target. */
    public Mono<Rows.Delivery> deliverSignal(@Nullable Long id, @Nullable String correlationKey, String name,
            @Nullable String payloadJson, @Nullable String dedupKey) {
        return db.withConnection(connection -> {
            Statement statement = connection.createStatement(id != null ? sql.deliverSignalById : sql.deliverSignalByKey);
            if (id != null) {
                statement.bind(0, id);
            } else {
                statement.bind(0, correlationKey);
            }
            statement.bind(1, name);
            Db.bind(statement, 2, payloadJson, String.class);
            Db.bind(statement, 3, dedupKey, String.class);
            return Flux.from(statement.execute()).concatMap(result -> result.map(row -> new Rows.Delivery(
                    row.get("id", Long.class), row.get("queue", String.class),
                    row.get("stored", Long.class) > 0, row.get("woken", Long.class) > 0)));
        }).next();
    }

    /** How many instances of the queues are due now or running. */
    public Mono<Long> countBusy(Collection<String> queues) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.countBusy)
                        .bind(0, queues.toArray(String[]::new)).execute())
                .concatMap(result -> result.map(row -> row.get(0, Long.class)))).single();
    }

    /** The database's clock. */
    public Mono<Instant> now() {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.now).execute())
                .concatMap(result -> result.map(row -> row.get(0, Instant.class)))).single();
    }

    /** Resumes up to {@code limit} parked instances whose await deadline passed. */
    public Flux<Transition> expireAwaits(int limit) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(sql.expireAwaits)
                        .bind(0, limit).execute())
                .concatMap(result -> result.map(InstanceStore::toTransition)));
    }

    private static Transition toTransition(Readable row) {
        return new Transition(row.get("id", Long.class), row.get("queue", String.class),
                InstanceStatus.fromSql(row.get("status", String.class)));
    }

    private static ClaimedRow toClaimed(Readable row) {
        String[] awaited = row.get("awaited_signals", String[].class);
        return new ClaimedRow(
                row.get("id", Long.class),
                row.get("type", String.class),
                row.get("type_version", Integer.class),
                row.get("queue", String.class),
                row.get("priority", Integer.class),
                row.get("eligible_micros", Long.class),
                row.get("step", String.class),
                row.get("state", String.class),
                row.get("attempt", Integer.class),
                row.get("max_attempts", Integer.class),
                row.get("concurrency_key", String.class),
                row.get("parent_id", Long.class),
                Arrays.asList(awaited == null ? NO_STRINGS : awaited),
                row.get("inbox", String.class),
                row.get("children", String.class),
                row.get("gate_name", String.class),
                orZero(row.get("gate_shard", Integer.class)),
                row.get("rate_limit", String.class),
                orZero(row.get("rate_weight", Integer.class)),
                row.get("rate_partition", String.class));
    }

    private static int orZero(@Nullable Integer value) {
        return value == null ? 0 : value;
    }

    static Instance toInstance(Readable row) {
        String[] awaited = row.get("awaited_signals", String[].class);
        Boolean cancelRequested = row.get("cancel_requested", Boolean.class);
        return new Instance(
                row.get("id", Long.class),
                row.get("type", String.class),
                row.get("type_version", Integer.class),
                row.get("queue", String.class),
                row.get("priority", Integer.class),
                InstanceStatus.fromSql(row.get("status", String.class)),
                row.get("step", String.class),
                row.get("state", String.class),
                row.get("result", String.class),
                row.get("last_error", String.class),
                row.get("attempt", Integer.class),
                row.get("max_attempts", Integer.class),
                row.get("eligible_at", Instant.class),
                Arrays.asList(awaited == null ? NO_STRINGS : awaited),
                row.get("await_deadline", Instant.class),
                row.get("parent_id", Long.class),
                row.get("children_pending", Integer.class),
                row.get("concurrency_key", String.class),
                row.get("correlation_key", String.class),
                row.get("claimed_by", String.class),
                row.get("lease_expires_at", Instant.class),
                Boolean.TRUE.equals(cancelRequested),
                row.get("inserted_at", Instant.class),
                row.get("updated_at", Instant.class));
    }
}
