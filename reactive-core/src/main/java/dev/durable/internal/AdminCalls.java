package dev.durable.internal;

import dev.durable.CancelResult;
import dev.durable.EngineOptions;
import dev.durable.Instance;
import dev.durable.JobRequest;
import dev.durable.SignalResult;
import dev.durable.internal.admin.EngineCalls;
import dev.durable.internal.client.Inserts;
import dev.durable.internal.client.InstanceCalls;
import dev.durable.internal.engine.Transitions;
import dev.durable.limit.Limiter;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

/** The engine's calls the admin reuses, over the same parts {@code DurableEngine} delegates to. */
final class AdminCalls implements EngineCalls {

    private final EngineOptions options;
    private final Transitions transitions;
    private final InstanceCalls instances;
    private final Inserts inserts;
    private final Replays replays;
    private final Supplier<@Nullable Limiter> limiter;

    AdminCalls(EngineOptions options, Transitions transitions, InstanceCalls instances, Inserts inserts,
            Replays replays, Supplier<@Nullable Limiter> limiter) {
        this.options = options;
        this.transitions = transitions;
        this.instances = instances;
        this.inserts = inserts;
        this.replays = replays;
        this.limiter = limiter;
    }

    @Override
    public EngineOptions options() {
        return options;
    }

    @Override
    public void poke(String queue) {
        transitions.poke(queue);
    }

    @Override
    public Mono<Instance> get(long id) {
        return instances.get(id);
    }

    @Override
    public Mono<CancelResult> cancelWithDescendants(long id) {
        return instances.cancel(id, true);
    }

    @Override
    public Mono<SignalResult> signal(long id, String name, @Nullable Object payload) {
        return instances.signal(id, null, name, payload, null, "with id " + id);
    }

    @Override
    public Mono<Instance> replay(long id, String step, @Nullable Object state) {
        return replays.replay(id, step, state);
    }

    @Override
    public Mono<Long> fork(long id, String step, @Nullable Object state) {
        return replays.fork(id, step, state);
    }

    @Override
    public Mono<Long> insert(JobRequest request) {
        return inserts.insert(request);
    }

    @Override
    public @Nullable Limiter runningLimiter() {
        return limiter.get();
    }
}
