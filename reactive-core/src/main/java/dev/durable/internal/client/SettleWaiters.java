package dev.durable.internal.client;

import dev.durable.DurableTimeoutException;
import dev.durable.EngineClosedException;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.internal.sql.InstanceSql.Watch;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Every caller of one engine waiting for instances to reach a status, served by one shared read:
 * a thousand waiters cost one statement a tick on one connection, not a thousand polls on the
 * engine's pool.
 *
 * <p>Waiters of one id share an entry holding the last snapshot read. Reads happen in rounds, one at
 * a time: a round reads, in one statement per {@code WATCH_IDS_PER_STATEMENT} ids, the watched
 * instances whose status differs from the one last seen, and answers every waiter whose status
 * came. A tick (every {@code interval}, only while someone waits) asks for a round over every
 * watched id; a new id, or a change this engine made to a watched instance (commit, reaper,
 * signal, cancel), asks for a round over just those ids at once. Asks that come while a round is
 * in flight are served together by the next one. A round that fails is logged and the next tick
 * tries again; the caller's timeout bounds every wait. Nothing here blocks: the map's per-key
 * sections hold no I/O and complete no waiter.
 */
public final class SettleWaiters {

    private static final Logger log = Loggers.getLogger(SettleWaiters.class);

    private final Function<List<Watch>, Flux<Instance>> read;
    private final Duration interval;
    private final Duration readTimeout;
    private final Scheduler timer;

    private final Map<Long, Entry> waiting = new ConcurrentHashMap<>();
    /** Ids to read in the next round even if no tick is due. */
    private final Set<Long> urgent = ConcurrentHashMap.newKeySet();
    /** Set by a tick: the next round reads every watched id. */
    private final AtomicBoolean tickDue = new AtomicBoolean();
    private final AtomicBoolean tickArmed = new AtomicBoolean();
    /** Asks for a round not served yet; the caller that moves it from 0 runs the rounds. */
    private final AtomicInteger wip = new AtomicInteger();
    private final AtomicBoolean failing = new AtomicBoolean();

    /** The waiters of one id and the last snapshot read of it. Its list changes only in the map's section. */
    private static final class Entry {

        final List<Waiter> waiters = new ArrayList<>(1);
        volatile @Nullable Instance last;
        /** The next read asks for the whole row whatever its status (a fresh snapshot is wanted). */
        volatile boolean refresh;
    }

    /** One caller. A waiter that wants a fresh read is answered by the next row read, whatever its status. */
    private static final class Waiter {

        final long id;
        final Predicate<InstanceStatus> wanted;
        final boolean fresh;
        @Nullable MonoSink<Instance> sink;
        @Nullable Entry entry;

        Waiter(long id, Predicate<InstanceStatus> wanted, boolean fresh) {
            this.id = id;
            this.wanted = wanted;
            this.fresh = fresh;
        }

        @Nullable Instance lastSeen() {
            Entry seen = entry;
            return seen == null ? null : seen.last;
        }
    }

    /**
     * {@code read} runs one round (it must use at most one connection); {@code interval} is the tick;
     * {@code readTimeout} bounds each round; ticks run on {@code timer}.
     */
    public SettleWaiters(Function<List<Watch>, Flux<Instance>> read, Duration interval, Duration readTimeout,
            Scheduler timer) {
        this.read = read;
        this.interval = interval;
        this.readTimeout = readTimeout;
        this.timer = timer;
    }

    /** An instance changed status on this engine: waiters that want that status get a read at once. */
    public void changed(long id, InstanceStatus status) {
        Entry entry = waiting.get(id);
        if (entry == null) {
            return;
        }
        boolean wanted;
        synchronized (entry) {
            wanted = entry.waiters.stream().anyMatch(waiter -> waiter.fresh || waiter.wanted.test(status));
        }
        if (wanted) {
            urgent.add(id);
            drain();
        }
    }

    /**
     * The instance once its status is wanted; empty when no instance has that id; after
     * {@code timeout}, a {@link DurableTimeoutException} carrying the last snapshot read, if any.
     */
    public Mono<Instance> await(long id, Predicate<InstanceStatus> wanted, Duration timeout) {
        return Mono.defer(() -> {
            Waiter waiter = new Waiter(id, wanted, false);
            return Mono.<Instance>create(sink -> join(waiter, sink))
                    .timeout(timeout, timer)
                    .onErrorMap(java.util.concurrent.TimeoutException.class,
                            late -> new DurableTimeoutException(id, timeout, waiter.lastSeen()));
        });
    }

    /**
     * The instance as it stands, read by the next round (shared with every other waiter); empty when
     * none; a {@link DurableTimeoutException} when no round could read it within two read timeouts.
     */
    public Mono<Instance> current(long id) {
        Duration bound = readTimeout.multipliedBy(2);
        return Mono.<Instance>create(sink -> join(new Waiter(id, status -> true, true), sink))
                .timeout(bound, timer)
                .onErrorMap(java.util.concurrent.TimeoutException.class,
                        late -> new DurableTimeoutException("instance " + id + " could not be read within " + bound));
    }

    /** How many ids are watched now (for tests and meters). */
    public int watched() {
        return waiting.size();
    }

    private void join(Waiter waiter, MonoSink<Instance> sink) {
        waiter.sink = sink;
        sink.onDispose(() -> leave(waiter));
        boolean[] first = new boolean[1];
        Entry entry = waiting.compute(waiter.id, (id, existing) -> {
            Entry joined = existing;
            if (joined == null) {
                joined = new Entry();
                first[0] = true;
            }
            synchronized (joined) {
                joined.waiters.add(waiter);
            }
            if (waiter.fresh) {
                joined.refresh = true;
            }
            waiter.entry = joined;
            return joined;
        });
        Instance last = entry.last;
        if (!waiter.fresh && last != null && waiter.wanted.test(last.status())) {
            sink.success(last);
            return;
        }
        if (first[0] || waiter.fresh) {
            urgent.add(waiter.id);
            drain();
        }
        armTick();
    }

    /** A waiter answered, cancelled or timed out: it leaves no trace, nor does its entry once empty. */
    private void leave(Waiter waiter) {
        waiting.computeIfPresent(waiter.id, (id, entry) -> {
            synchronized (entry) {
                entry.waiters.remove(waiter);
                return entry.waiters.isEmpty() ? null : entry;
            }
        });
    }

    private void armTick() {
        if (!tickArmed.compareAndSet(false, true)) {
            return;
        }
        Mono.delay(interval, timer).subscribe(tick -> {
            tickArmed.set(false);
            if (!waiting.isEmpty()) {
                tickDue.set(true);
                drain();
                armTick();
            }
        }, error -> {
            tickArmed.set(false);
            log.warn("settle-waiter tick failed: {}", error.toString());
        });
    }

    private void drain() {
        if (wip.getAndIncrement() == 0) {
            rounds(1);
        }
    }

    /** Runs rounds until every ask counted in {@code wip} is served; one round in flight at a time. */
    private void rounds(int asks) {
        int missed = asks;
        for (;;) {
            List<Watch> watches = collect();
            if (!watches.isEmpty()) {
                int served = missed;
                Flux.defer(() -> read.apply(watches))
                        .timeout(readTimeout, timer)
                        .collectList()
                        .subscribe(rows -> {
                            failing.set(false);
                            apply(watches, rows);
                        }, error -> {
                            failed(watches, error);
                            after(served);
                        }, () -> after(served));
                return;
            }
            missed = wip.addAndGet(-missed);
            if (missed == 0) {
                return;
            }
        }
    }

    private void after(int served) {
        int left = wip.addAndGet(-served);
        if (left != 0) {
            rounds(left);
        }
    }

    /** What the next round reads: every watched id on a tick, else the urgent ones. */
    private List<Watch> collect() {
        Set<Long> ids = new HashSet<>();
        if (tickDue.getAndSet(false)) {
            ids.addAll(waiting.keySet());
        }
        for (Long id : urgent) {
            urgent.remove(id);
            ids.add(id);
        }
        List<Watch> watches = new ArrayList<>(ids.size());
        for (Long id : ids) {
            Entry entry = waiting.get(id);
            if (entry == null) {
                continue;
            }
            Instance last = entry.last;
            boolean whole = last == null || entry.refresh;
            entry.refresh = false;
            watches.add(new Watch(id, whole ? null : last.status()));
        }
        return watches;
    }

    /** Answers the waiters of each row read; ids read in full that came back in no row have no instance. */
    private void apply(List<Watch> watches, List<Instance> rows) {
        Set<Long> found = new HashSet<>();
        for (Instance row : rows) {
            found.add(row.id());
            answer(row.id(), row);
        }
        for (Watch watch : watches) {
            if (watch.seen() == null && !found.contains(watch.id())) {
                answer(watch.id(), null);
            }
        }
    }

    /** Records the snapshot and completes, outside the map's section, the waiters it answers. */
    private void answer(long id, @Nullable Instance row) {
        List<Waiter> answered = new ArrayList<>();
        waiting.computeIfPresent(id, (key, entry) -> {
            if (row != null) {
                entry.last = row;
            }
            synchronized (entry) {
                for (Waiter waiter : entry.waiters) {
                    if (row == null || waiter.fresh || waiter.wanted.test(row.status())) {
                        answered.add(waiter);
                    }
                }
            }
            return entry;
        });
        for (Waiter waiter : answered) {
            MonoSink<Instance> sink = waiter.sink;
            if (sink != null) {
                if (row == null) {
                    sink.success();
                } else {
                    sink.success(row);
                }
            }
        }
    }

    /**
     * A closed engine ends the waits it can no longer serve; any other failure (a lost connection,
     * a read past its timeout) is logged once per outage, and the next tick reads again.
     */
    private void failed(List<Watch> watches, Throwable error) {
        if (error instanceof EngineClosedException) {
            for (Watch watch : watches) {
                Entry entry = waiting.get(watch.id());
                if (entry == null) {
                    continue;
                }
                List<Waiter> ended;
                synchronized (entry) {
                    ended = new ArrayList<>(entry.waiters);
                }
                ended.forEach(waiter -> {
                    if (waiter.sink != null) {
                        waiter.sink.error(error);
                    }
                });
            }
            return;
        }
        // A refresh that failed is asked for again at the next tick (ids never read are anyway).
        for (Watch watch : watches) {
            if (watch.seen() == null) {
                Entry entry = waiting.get(watch.id());
                if (entry != null && entry.last != null) {
                    entry.refresh = true;
                }
            }
        }
        if (failing.compareAndSet(false, true)) {
            log.warn("settle-waiters: reading {} watched instances failed, reading again at the next tick: {}",
                    watches.size(), error.toString());
        }
    }
}
