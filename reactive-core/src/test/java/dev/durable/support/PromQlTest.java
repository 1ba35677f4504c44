package dev.durable.support;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class PromQlTest {

    @Test
    void anAggregationOverARateWithGrafanaVariablesReadsItsOneMetric() {
        assertThat(PromQl.metricNames("sum by (queue, outcome) (rate(durable_outcomes_total{queue=~\"$queue\","
                + " outcome=\"failed\"}[$__rate_interval]))")).containsExactly("durable_outcomes_total");
    }

    @Test
    void binaryOperatorsJoinsAndModifiersLeaveEveryOperandsMetric() {
        assertThat(PromQl.metricNames("max by (queue) (durable_queue_depth) > 0\nunless on (queue)\n"
                + "sum by (queue) (rate(durable_outcomes_total[15m])) > 0"))
                .containsExactly("durable_queue_depth", "durable_outcomes_total");
        assertThat(PromQl.metricNames("sum(rate(a_sum[5m])) / sum(rate(a_count[5m] offset 1h)) * 100 >= bool 0.05"))
                .containsExactly("a_sum", "a_count");
        assertThat(PromQl.metricNames("sum without(instance)(x) and ignoring(job) group_left(reason) y"))
                .containsExactly("x", "y");
        assertThat(PromQl.metricNames("sum(x) by (queue) or on() group_right y @ end()")).containsExactly("x", "y");
        assertThat(PromQl.metricNames("sum(max by (queue, reason) (durable_unserved)) or vector(0)"))
                .containsExactly("durable_unserved");
    }

    @Test
    void numbersDurationsStringsAndCommentsAreNoMetrics() {
        assertThat(PromQl.metricNames("histogram_quantile(0.99, sum by (le) (rate(run_seconds_bucket[5m:30s])))"))
                .containsExactly("run_seconds_bucket");
        assertThat(PromQl.metricNames("topk(5, x) + 1e3 + 0x1F + .5 + Inf # not_a_metric here\n- count_values(\"v\", z)"))
                .containsExactly("x", "z");
        assertThat(PromQl.metricNames("foo{a=\"}b{\", c='\\'}'} + level:bar_total{d=~`[}]`}"))
                .containsExactly("foo", "level:bar_total");
        assertThat(PromQl.metricNames("rate(m[${interval}]) / ${factor:raw} + $__range_s")).containsExactly("m");
    }

    @Test
    void grafanasLabelValuesNamesItsMetricNotItsLabel() {
        assertThat(PromQl.variableMetricNames("label_values(durable_scheduler_concurrency, queue)"))
                .containsExactly("durable_scheduler_concurrency");
        assertThat(PromQl.variableMetricNames("label_values(m{job=\"x\"}, queue)")).containsExactly("m");
    }

    @Test
    void somethingItCannotReadIsAnErrorNotASilentMiss() {
        assertThatThrownBy(() -> PromQl.metricNames("sum(rate(x{queue=\"a\"[5m]))"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unclosed");
        assertThatThrownBy(() -> PromQl.metricNames("x{a=\"b}"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unterminated");
        assertThatThrownBy(() -> PromQl.metricNames("x ; y"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unexpected ';'");
    }
}
