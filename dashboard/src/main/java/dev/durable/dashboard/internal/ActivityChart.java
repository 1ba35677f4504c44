package dev.durable.dashboard.internal;

import dev.durable.admin.QueueActivity;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * The overview's chart: completed, failed and retried runs of the whole fleet per stretch of time, read
 * from the minutes every engine adds to the database ({@code DurableAdmin.activity}), so every replica
 * draws the same bars, before and after a restart. One of a few fixed ranges, every queue or one.
 */
public record ActivityChart(Range range, @Nullable String queue, Instant firstSlot, long[] completed, long[] failed,
        long[] retried) {

    /** The ranges offered: each a whole number of buckets. */
    public enum Range {
        HOUR("1h", "last hour", "-60 min", Duration.ofHours(1), Duration.ofMinutes(1)),
        SIX_HOURS("6h", "last 6 hours", "-6 h", Duration.ofHours(6), Duration.ofMinutes(5)),
        DAY("24h", "last 24 hours", "-24 h", Duration.ofHours(24), Duration.ofMinutes(15)),
        WEEK("7d", "last 7 days", "-7 days", Duration.ofDays(7), Duration.ofHours(2));

        final String param;
        final String label;
        /** What the left end of the axis says. */
        final String start;
        final Duration window;
        final Duration bucket;

        Range(String param, String label, String start, Duration window, Duration bucket) {
            this.param = param;
            this.label = label;
            this.start = start;
            this.window = window;
            this.bucket = bucket;
        }

        int slots() {
            return (int) (window.toSeconds() / bucket.toSeconds());
        }

        /** The range a query parameter names; the last hour for none or one it does not know. */
        static Range of(@Nullable String param) {
            for (Range range : values()) {
                if (range.param.equals(param)) {
                    return range;
                }
            }
            return HOUR;
        }
    }

    /**
     * The bars of {@code range} ending with the bucket that holds {@code now}, from the activity the admin
     * read (bucket starts are multiples of the bucket since the epoch, as the statement sums them).
     */
    static ActivityChart of(Range range, @Nullable String queue, List<QueueActivity> activity, Instant now) {
        long bucket = range.bucket.toSeconds();
        int slots = range.slots();
        long last = Math.floorDiv(now.getEpochSecond(), bucket);
        long first = last - slots + 1;
        long[] completed = new long[slots];
        long[] failed = new long[slots];
        long[] retried = new long[slots];
        for (QueueActivity row : activity) {
            long slot = Math.floorDiv(row.from().getEpochSecond(), bucket) - first;
            if (slot >= 0 && slot < slots) {
                completed[(int) slot] += row.completed();
                failed[(int) slot] += row.failed();
                retried[(int) slot] += row.retried();
            }
        }
        return new ActivityChart(range, queue, Instant.ofEpochSecond(first * bucket), completed, failed, retried);
    }

    long total(long[] series) {
        long sum = 0;
        for (long value : series) {
            sum += value;
        }
        return sum;
    }

    long max() {
        long max = 1;
        for (int i = 0; i < completed.length; i++) {
            max = Math.max(max, Math.max(completed[i], Math.max(failed[i], retried[i])));
        }
        return max;
    }

    /** Whether the live feed redraws it: the default view (the last hour of every queue). */
    boolean live() {
        return range == Range.HOUR && queue == null;
    }

    String bucketLabel() {
        long minutes = range.bucket.toMinutes();
        return minutes < 60 ? minutes + " min" : String.format(Locale.ROOT, "%d h", minutes / 60);
    }
}
