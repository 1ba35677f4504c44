package dev.durable.observation;

import io.micrometer.observation.Observation;
import org.jspecify.annotations.Nullable;

/** What an observation of one run knows: the instance, its step, and how the run ended. */
public final class RunContext extends Observation.Context {

    private final long instanceId;
    private final String type;
    private final String queue;
    private final String step;
    private final int attempt;
    private @Nullable String outcome;

    public RunContext(long instanceId, String type, String queue, String step, int attempt) {
        this.instanceId = instanceId;
        this.type = type;
        this.queue = queue;
        this.step = step;
        this.attempt = attempt;
    }

    public long instanceId() {
        return instanceId;
    }

    public String type() {
        return type;
    }

    public String queue() {
        return queue;
    }

    public String step() {
        return step;
    }

    public int attempt() {
        return attempt;
    }

    /** How the run ended (completed, retried, failed, ...), set before the observation stops. */
    public @Nullable String outcome() {
        return outcome;
    }

    public void outcome(String outcome) {
        this.outcome = outcome;
    }
}
