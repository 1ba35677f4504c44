package dev.durable.support;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** Checks handler start times against a token bucket, over every window they span. */
public final class RateWindows {

    private RateWindows() {
    }

    /**
     * Over any window of w seconds at most {@code burst + rate × (w + slack)} starts, and the whole
     * run no faster than the bucket allows. The slack covers the time between a claim and its
     * handler starting.
     */
    public static void assertWithinBucket(List<Long> startNanos, int burst, double rate, double slackSeconds) {
        List<Long> sorted = new ArrayList<>(startNanos);
        Collections.sort(sorted);
        for (int i = 0; i < sorted.size(); i++) {
            for (int j = i; j < sorted.size(); j++) {
                double window = (sorted.get(j) - sorted.get(i)) / 1e9;
                int count = j - i + 1;
                assertThat((double) count).as("starts %d..%d over %.3f s", i, j, window)
                        .isLessThanOrEqualTo(burst + rate * (window + slackSeconds));
            }
        }
        double total = (sorted.get(sorted.size() - 1) - sorted.get(0)) / 1e9;
        assertThat(total).isGreaterThan((sorted.size() - burst) / rate - 0.2);
    }
}
