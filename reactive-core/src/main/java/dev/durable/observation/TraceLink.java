package dev.durable.observation;

/**
 * A span a run's span links to, in stored form ({@link TraceContexts}), and why: the instance's
 * previous run (the attempt before, when the run's {@code durable.attempt} is above 1; else the step
 * before), or a signal the step consumes (its sender's context).
 */
public record TraceLink(String traceContext, Reason reason) {

    /** Why a run links to a span; its name is the link's {@code durable.link} tag. */
    public enum Reason {
        PREVIOUS_RUN("previous_run"),
        SIGNAL("signal");

        private final String tag;

        Reason(String tag) {
            this.tag = tag;
        }

        public String tag() {
            return tag;
        }
    }
}
