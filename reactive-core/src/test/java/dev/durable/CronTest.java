package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.ZonedDateTime;
import org.junit.jupiter.api.Test;

class CronTest {

    private static ZonedDateTime at(String iso) {
        return ZonedDateTime.parse(iso);
    }

    @Test
    void everyMinuteIsTheNextWholeMinute() {
        assertThat(Cron.parse("* * * * *").next(at("2026-12-02T12:00:30Z"))).isEqualTo(at("2026-12-02T12:01:00Z"));
        assertThat(Cron.parse("* * * * *").next(at("2026-12-02T12:01:00Z"))).isEqualTo(at("2026-12-02T12:02:00Z"));
    }

    @Test
    void rangesStepsListsAndNames() {
        Cron businessQuarters = Cron.parse("*/15 9-17 * * MON-FRI");
        // Wednesday 17:50 -> Thursday 09:00
        assertThat(businessQuarters.next(at("2026-12-02T17:50:00Z"))).isEqualTo(at("2026-12-03T09:00:00Z"));
        assertThat(businessQuarters.next(at("2026-12-02T10:07:00Z"))).isEqualTo(at("2026-12-02T10:15:00Z"));
        // Friday evening -> Monday morning
        assertThat(businessQuarters.next(at("2026-12-04T18:00:00Z"))).isEqualTo(at("2026-12-07T09:00:00Z"));
        assertThat(Cron.parse("0 0 1 jan,jul *").next(at("2026-02-10T00:00:00Z"))).isEqualTo(at("2026-07-01T00:00:00Z"));
        assertThat(Cron.parse("30 4 * * 7").next(at("2026-12-02T00:00:00Z"))).isEqualTo(at("2026-12-06T04:30:00Z"));
        assertThat(Cron.parse("5-59/20 * * * *").next(at("2026-12-02T00:26:00Z"))).isEqualTo(at("2026-12-02T00:45:00Z"));
    }

    @Test
    void restrictedDayFieldsMatchEitherAsInClassicCron() {
        // The 13th or any Friday: from Monday 2026-11-30, Friday 2026-12-04 comes first.
        assertThat(Cron.parse("0 12 13 * FRI").next(at("2026-11-30T00:00:00Z"))).isEqualTo(at("2026-12-04T12:00:00Z"));
        assertThat(Cron.parse("0 12 13 * FRI").next(at("2026-12-12T00:00:00Z"))).isEqualTo(at("2026-12-13T12:00:00Z"));
    }

    @Test
    void macrosAndLeapDays() {
        assertThat(Cron.parse("@hourly").next(at("2026-12-02T12:00:00Z"))).isEqualTo(at("2026-12-02T13:00:00Z"));
        assertThat(Cron.parse("@daily").next(at("2026-12-31T23:59:00Z"))).isEqualTo(at("2027-01-01T00:00:00Z"));
        assertThat(Cron.parse("0 0 29 2 *").next(at("2026-03-01T00:00:00Z"))).isEqualTo(at("2028-02-29T00:00:00Z"));
    }

    @Test
    void malformedExpressionsNameTheirFault() {
        assertThatThrownBy(() -> Cron.parse("* * * *")).hasMessageContaining("must have 5 fields");
        assertThatThrownBy(() -> Cron.parse("60 * * * *")).hasMessageContaining("minute must be 0 to 59, was 60");
        assertThatThrownBy(() -> Cron.parse("* * * FOO *")).hasMessageContaining("month field 'FOO'");
        assertThatThrownBy(() -> Cron.parse("* 5-2 * * *")).hasMessageContaining("runs backwards");
        assertThatThrownBy(() -> Cron.parse("0 0 31 2 *").next(at("2026-01-01T00:00:00Z")))
                .hasMessageContaining("never due");
        assertThatThrownBy(() -> RecurringJob.of("r", "* * * * *", JobRequest.of("t", null).correlationKey("k")))
                .hasMessageContaining("must not set correlationKey");
    }
}
