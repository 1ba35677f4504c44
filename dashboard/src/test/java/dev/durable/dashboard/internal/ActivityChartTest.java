package dev.durable.dashboard.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.admin.QueueActivity;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The chart's slots: the last one holds now, each row lands in the slot of its stretch, others are dropped. */
class ActivityChartTest {

    private static QueueActivity row(String at, String queue, long completed, long failed, long retried) {
        return new QueueActivity(Instant.parse(at), queue, completed, failed, retried, 0, 0);
    }

    @Test
    void rowsLandInTheSlotOfTheirStretchSummedOverQueues() {
        Instant now = Instant.parse("2026-12-07T10:42:30Z");
        ActivityChart chart = ActivityChart.of(ActivityChart.Range.HOUR, null, List.of(
                row("2026-12-07T09:43:00Z", "a", 1, 0, 0),   // the first slot
                row("2026-12-07T10:42:00Z", "a", 5, 1, 2),   // the last, now's
                row("2026-12-07T10:42:00Z", "b", 3, 0, 1),
                row("2026-12-07T09:42:00Z", "a", 100, 0, 0), // one minute too old
                row("2026-12-07T10:43:00Z", "a", 100, 0, 0)), now); // ahead of this clock
        assertThat(chart.completed()).hasSize(60);
        assertThat(chart.firstSlot()).isEqualTo(Instant.parse("2026-12-07T09:43:00Z"));
        assertThat(chart.completed()[0]).isEqualTo(1);
        assertThat(chart.completed()[59]).isEqualTo(8);
        assertThat(chart.failed()[59]).isEqualTo(1);
        assertThat(chart.retried()[59]).isEqualTo(3);
        assertThat(chart.total(chart.completed())).isEqualTo(9);
        assertThat(chart.max()).isEqualTo(8);
        assertThat(chart.live()).isTrue();
    }

    @Test
    void aDayIsNinetySixStretchesOfFifteenMinutesOnTheirBoundaries() {
        Instant now = Instant.parse("2026-12-07T10:44:59Z");
        ActivityChart chart = ActivityChart.of(ActivityChart.Range.of("24h"), "mail", List.of(
                row("2026-12-07T10:30:00Z", "mail", 7, 0, 0),
                row("2026-12-06T10:45:00Z", "mail", 2, 0, 0)), now);
        assertThat(chart.completed()).hasSize(96);
        assertThat(chart.firstSlot()).isEqualTo(Instant.parse("2026-12-06T10:45:00Z"));
        assertThat(chart.completed()[95]).isEqualTo(7);
        assertThat(chart.completed()[0]).isEqualTo(2);
        assertThat(chart.live()).isFalse();
        assertThat(chart.bucketLabel()).isEqualTo("15 min");
        assertThat(ActivityChart.Range.of("nonsense")).isEqualTo(ActivityChart.Range.HOUR);
    }
}
