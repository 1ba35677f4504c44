package dev.durable.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/** The bound on runs that hold a connection throughout: at most so many, first come first served, no slot lost. */
class RunSlotsTest {

    @Test
    void runsBeyondTheBoundWaitTheirTurnInOrderAndACancelledWaiterIsPassedBy() {
        RunSlots slots = new RunSlots(1);
        List<String> started = new ArrayList<>();
        Sinks.Empty<Void> first = Sinks.empty();
        Sinks.Empty<Void> third = Sinks.empty();
        Disposable a = slots.run(() -> Mono.fromRunnable(() -> started.add("a")).then(first.asMono())).subscribe();
        Disposable b = slots.run(() -> Mono.fromRunnable(() -> started.add("b"))).subscribe();
        Disposable c = slots.run(() -> Mono.fromRunnable(() -> started.add("c")).then(third.asMono())).subscribe();
        assertThat(started).containsExactly("a");

        b.dispose(); // gives up its place while it waits
        first.tryEmitEmpty();
        assertThat(started).as("the slot passes b by").containsExactly("a", "c");

        // c's slot comes back when it is cancelled while it runs: the next run starts at once.
        c.dispose();
        slots.run(() -> Mono.fromRunnable(() -> started.add("d"))).subscribe();
        assertThat(started).containsExactly("a", "c", "d");
        assertThat(a.isDisposed()).isTrue();
    }

    @Test
    void slotsComeBackWhateverWayTheRunsEnd() {
        RunSlots slots = new RunSlots(2);
        AtomicInteger ran = new AtomicInteger();
        for (int i = 0; i < 100; i++) {
            int n = i;
            slots.run(() -> n % 3 == 0 ? Mono.error(new IllegalStateException("boom"))
                            : n % 3 == 1 ? Mono.fromRunnable(ran::incrementAndGet) : Mono.empty())
                    .onErrorResume(error -> Mono.empty())
                    .subscribe();
        }
        Sinks.Empty<Void> held = Sinks.empty();
        List<String> started = new ArrayList<>();
        slots.run(() -> Mono.fromRunnable(() -> started.add("x")).then(held.asMono())).subscribe();
        slots.run(() -> Mono.fromRunnable(() -> started.add("y")).then(held.asMono())).subscribe();
        slots.run(() -> Mono.fromRunnable(() -> started.add("z"))).subscribe();
        assertThat(ran.get()).isEqualTo(33);
        assertThat(started).as("both slots free after errors and completions; the third waits").containsExactly("x", "y");
        held.tryEmitEmpty();
        assertThat(started).containsExactly("x", "y", "z");
    }
}
