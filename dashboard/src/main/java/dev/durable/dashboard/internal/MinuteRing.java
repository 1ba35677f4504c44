package dev.durable.dashboard.internal;

import dev.durable.JobEvent;

/**
 * Completions and failures per minute over the last hour, counted from the engine's events as they pass
 * (in memory: it starts empty when the application starts and counts this engine's events only). One writer
 * (the event subscription, whose calls are serialized); readers copy under the same monitor.
 */
public final class MinuteRing {

    public static final int MINUTES = 60;

    private final long[] minute = new long[MINUTES];
    private final long[] completed = new long[MINUTES];
    private final long[] failed = new long[MINUTES];

    /** A copy of the last hour, oldest minute first: completed, then failed, each 60 long. */
    public record Snapshot(long nowMinute, long[] completed, long[] failed) {
    }

    public void record(JobEvent event) {
        boolean done = event.kind() == JobEvent.Kind.COMPLETED;
        boolean bad = event.kind() == JobEvent.Kind.FAILED;
        if (!done && !bad) {
            return;
        }
        long at = event.at().getEpochSecond() / 60;
        synchronized (this) {
            int slot = (int) Math.floorMod(at, (long) MINUTES);
            if (minute[slot] != at) {
                minute[slot] = at;
                completed[slot] = 0;
                failed[slot] = 0;
            }
            if (done) {
                completed[slot]++;
            } else {
                failed[slot]++;
            }
        }
    }

    public Snapshot snapshot(long nowEpochSecond) {
        long now = nowEpochSecond / 60;
        long[] c = new long[MINUTES];
        long[] f = new long[MINUTES];
        synchronized (this) {
            for (int i = 0; i < MINUTES; i++) {
                long at = now - (MINUTES - 1) + i;
                int slot = (int) Math.floorMod(at, (long) MINUTES);
                if (minute[slot] == at) {
                    c[i] = completed[slot];
                    f[i] = failed[slot];
                }
            }
        }
        return new Snapshot(now, c, f);
    }
}
