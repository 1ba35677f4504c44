package dev.durable.testing;

import dev.durable.DurableEngine;
import dev.durable.JobEvent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import reactor.core.Disposable;

/**
 * The engine's events from {@link DurableTesting#record} on, for assertions on a workflow's path and
 * on what happened to an instance. Start recording before you insert; a drain returns once the
 * events of what it ran are in. Close it (or let the engine close) to stop.
 *
 * <pre>{@code
 * try (RecordedEvents events = DurableTesting.record(engine)) {
 *     long id = engine.insert(JobRequest.of("approval", "invoice 7")).block();
 *     ...
 *     events.assertPath(id, "ask", "decide").assertEvent(id, JobEvent.Kind.PARKED);
 * }
 * }</pre>
 */
public final class RecordedEvents implements AutoCloseable {

    private final List<JobEvent> events = new ArrayList<>();
    private final Disposable subscription;

    RecordedEvents(DurableEngine engine) {
        subscription = engine.events().subscribe(this::add);
    }

    private synchronized void add(JobEvent event) {
        events.add(event);
    }

    /** Every event so far, in the order they came. */
    public synchronized List<JobEvent> events() {
        return List.copyOf(events);
    }

    /** The events of one instance. */
    public synchronized List<JobEvent> of(long id) {
        return events.stream().filter(JobEvent.ofInstance(id)).toList();
    }

    /** The kinds of one instance's events, in order. */
    public List<JobEvent.Kind> kinds(long id) {
        return of(id).stream().map(JobEvent::kind).toList();
    }

    /** The steps the instance ran, in order; a step retried shows once per run of it in a row. */
    public List<String> steps(long id) {
        List<String> steps = new ArrayList<>();
        for (JobEvent event : of(id)) {
            if (event.kind() == JobEvent.Kind.STARTED && event.step() != null
                    && (steps.isEmpty() || !steps.get(steps.size() - 1).equals(event.step()))) {
                steps.add(event.step());
            }
        }
        return steps;
    }

    /** The instance ran exactly these steps, in this order (retries of a step count once). */
    public RecordedEvents assertPath(long id, String... expected) {
        List<String> steps = steps(id);
        if (!steps.equals(Arrays.asList(expected))) {
            throw new AssertionError("instance " + id + " took steps " + steps + ", expected "
                    + Arrays.asList(expected) + "; its events: " + kinds(id));
        }
        return this;
    }

    /** At least one event of this kind happened to the instance. */
    public RecordedEvents assertEvent(long id, JobEvent.Kind kind) {
        if (!kinds(id).contains(kind)) {
            throw new AssertionError("instance " + id + " had no " + kind + " event; it had " + kinds(id));
        }
        return this;
    }

    /** No event of this kind happened to the instance. */
    public RecordedEvents refuteEvent(long id, JobEvent.Kind kind) {
        if (kinds(id).contains(kind)) {
            throw new AssertionError("instance " + id + " had a " + kind + " event: " + of(id));
        }
        return this;
    }

    /** How many events of this kind happened to the instance. */
    public long count(long id, JobEvent.Kind kind) {
        return of(id).stream().filter(event -> event.kind() == kind).count();
    }

    @Override
    public void close() {
        subscription.dispose();
    }
}
