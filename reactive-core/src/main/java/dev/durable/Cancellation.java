package dev.durable;

import java.util.function.BooleanSupplier;
import reactor.core.publisher.Mono;

/**
 * Whether the run in progress should stop: its instance was cancelled, or its claim was lost (the
 * lease expired and another node may run it now). The engine then disposes the handler's
 * subscription and discards its outcome. A handler that blocks can check {@link #isRequested()}
 * between pieces of work; a reactive one can race its work against {@link #requested()}.
 */
public final class Cancellation {

    /** Never requested: for tests that build a context by hand. */
    public static final Cancellation NEVER = new Cancellation(Mono.never(), () -> false);

    private final Mono<Void> requested;
    private final BooleanSupplier isRequested;

    /** A cancellation that completes {@code requested} and answers {@code isRequested} once asked for. */
    public Cancellation(Mono<Void> requested, BooleanSupplier isRequested) {
        this.requested = requested;
        this.isRequested = isRequested;
    }

    /** Completes when the run should stop; never errors. */
    public Mono<Void> requested() {
        return requested;
    }

    /** True once the run should stop. */
    public boolean isRequested() {
        return isRequested.getAsBoolean();
    }

    @Override
    public String toString() {
        return "Cancellation{requested=" + isRequested() + "}";
    }
}
