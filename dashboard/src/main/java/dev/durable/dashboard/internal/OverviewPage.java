package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Layout.STATUSES;
import static dev.durable.dashboard.internal.Layout.csrf;
import static dev.durable.dashboard.internal.Layout.instancePath;
import static dev.durable.dashboard.internal.Layout.label;
import static dev.durable.dashboard.internal.Layout.layout;

import dev.durable.InstanceStatus;
import dev.durable.JobEvent;
import dev.durable.QueueStats;
import dev.durable.admin.QueueDepth;
import dev.durable.admin.StatusCount;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The overview: each queue's counts by status and rows due now, this engine's schedulers and the engines
 * serving it (with pause and resume), the fleet's activity chart and the live event feed.
 */
public final class OverviewPage {

    private OverviewPage() {
    }

    /**
     * One queue's row: counts by status, its rows due now (fleet-wide; null: none), this engine's scheduler
     * now, the live engines serving it.
     */
    record QueueRow(String queue, Map<InstanceStatus, StatusCount> counts, @Nullable QueueDepth depth,
            @Nullable QueueStats here, List<String> engines, @Nullable Boolean paused) {
    }

    /**
     * {@code depthsRead}: whether the due rows could be read (when not, their cells say "?");
     * {@code chart}: null when the activity could not be read.
     */
    static String overview(View view, List<QueueRow> queues, boolean pauseKnown, boolean depthsRead,
            @Nullable ActivityChart chart, List<JobEvent> recent) {
        return layout(view, "overview", "Overview", h -> {
            h.raw("<section><h2>Queues</h2><div class=\"scroll\"><table id=\"queues\"><thead><tr><th>Queue</th>");
            for (InstanceStatus status : STATUSES) {
                h.raw("<th class=\"num\">").text(label(status)).raw("</th>");
            }
            h.raw("<th class=\"num\" title=\"runnable and due, fleet-wide\">Due now</th>")
                    .raw("<th class=\"num\" title=\"how long the oldest due row has waited\">Oldest wait</th>");
            h.raw("<th class=\"num\" title=\"on this engine: handlers going\">Running here</th>")
                    .raw("<th class=\"num\" title=\"on this engine: handlers done, outcomes waiting for their commit\">"
                            + "Committing here</th>")
                    .raw("<th class=\"num\" title=\"on this engine: claimed, waiting for a run slot\">Buffered here</th>");
            if (pauseKnown) {
                h.raw("<th>State</th>");
            }
            h.raw("<th>Live engines</th></tr></thead><tbody>");
            if (queues.isEmpty()) {
                h.raw("<tr><td class=\"empty\" colspan=\"15\">No queue has instances yet and no engine serves one.</td></tr>");
            }
            for (QueueRow row : queues) {
                h.raw("<tr").attr("data-queue", row.queue()).raw("><th scope=\"row\">")
                        .link(view.path("/instances?queue=" + Html.url(row.queue())), row.queue()).raw("</th>");
                for (InstanceStatus status : STATUSES) {
                    StatusCount count = row.counts().get(status);
                    long n = count == null ? 0 : count.count();
                    h.raw("<td class=\"num\"").attr("data-status", status.sqlName()).raw(">");
                    String text = (count != null && count.estimated() ? "~" : "") + n;
                    if (n > 0) {
                        h.link(view.path("/instances?queue=" + Html.url(row.queue()) + "&status=" + status.sqlName()), text);
                    } else {
                        h.text(text);
                    }
                    h.raw("</td>");
                }
                h.raw("<td class=\"num\" data-now=\"due\">")
                        .text(!depthsRead ? "?" : row.depth() == null ? 0 : row.depth().due())
                        .raw("</td><td class=\"num\" data-now=\"wait\">")
                        .text(!depthsRead ? "?" : row.depth() == null ? "–" : wait(row.depth().oldestWait())).raw("</td>");
                h.raw("<td class=\"num\" data-now=\"running\">").text(row.here() == null ? "–" : row.here().running())
                        .raw("</td><td class=\"num\" data-now=\"committing\">")
                        .text(row.here() == null ? "–" : row.here().committing())
                        .raw("</td><td class=\"num\" data-now=\"buffered\">")
                        .text(row.here() == null ? "–" : row.here().buffered()).raw("</td>");
                if (pauseKnown) {
                    boolean paused = Boolean.TRUE.equals(row.paused());
                    h.raw("<td class=\"state\">").raw(paused ? "<span class=\"badge st-paused\">paused</span>"
                            : "<span class=\"badge st-active\">active</span>");
                    if (view.actions()) {
                        h.raw("<form method=\"post\" class=\"inline\"")
                                .attr("action", view.path("/queues/" + Html.url(row.queue()) + (paused ? "/resume" : "/pause")));
                        if (!paused) {
                            h.attr("data-confirm", "Pause queue " + row.queue() + " on every engine?");
                        }
                        h.raw(">");
                        csrf(h, view);
                        h.raw("<button type=\"submit\"").attr("class", paused ? "resume" : "pause").raw(">")
                                .text(paused ? "Resume" : "Pause").raw("</button></form>");
                    }
                    h.raw("</td>");
                }
                h.raw("<td class=\"engines\">");
                if (row.engines().isEmpty()) {
                    h.raw("<span class=\"warn\">none</span>");
                } else {
                    h.text(String.join(", ", row.engines()));
                }
                h.raw("</td></tr>");
            }
            h.raw("</tbody></table></div><p class=\"hint\">Counts of settled instances marked ~ are the planner's"
                    + " estimates on a big history. Due now and oldest wait are the fleet's rows ready to start;"
                    + " running, committing and buffered are this engine's schedulers now (a run commits once its"
                    + " handler is done: many committing for long means slow commits).</p></section>");
            if (!depthsRead) {
                h.raw("<p class=\"problem\" id=\"depths-unread\">The rows due now could not be read (see the"
                        + " application's log); the other counts are current.</p>");
            }
            if (chart != null) {
                chart(h, view, chart, queues.stream().map(QueueRow::queue).toList());
            } else {
                h.raw("<section id=\"activity\"><h2>Activity</h2><p class=\"problem\">The activity could not be read"
                        + " from the database (see the application's log).</p></section>");
            }
            h.raw("<section><h2>Live events</h2><ol id=\"feed\" class=\"feed\">");
            for (int i = recent.size() - 1; i >= 0; i--) {
                feedItem(h, view, recent.get(i));
            }
            if (recent.isEmpty()) {
                h.raw("<li class=\"empty\">No event on this engine since the dashboard started.</li>");
            }
            h.raw("</ol></section>");
        });
    }

    static void feedItem(Html h, View view, JobEvent event) {
        h.raw("<li").attr("data-id", event.id()).attr("data-kind", event.kind().name()).raw(">")
                .raw("<span class=\"at\">").text(Html.time(event.at())).raw("</span> ")
                .raw("<span").attr("class", "kind k-" + event.kind().name().toLowerCase()).raw(">").text(event.kind().name())
                .raw("</span> ").link(instancePath(view, event.id()), "#" + event.id()).raw(" ")
                .text(event.type()).raw(" <span class=\"queue\">").text(event.queue()).raw("</span>");
        if (event.step() != null) {
            h.raw(" <span class=\"step\">").text(event.step()).raw("</span>");
        }
        if (event.error() != null) {
            h.raw(" <span class=\"error\">").text(event.error()).raw("</span>");
        }
        h.raw("</li>");
    }

    /** A wait as an operator reads it: seconds, minutes, hours. */
    static String wait(Duration wait) {
        long seconds = wait.toSeconds();
        if (seconds < 120) {
            return seconds + " s";
        }
        if (seconds < 7200) {
            return seconds / 60 + " min";
        }
        return String.format(Locale.ROOT, "%.1f h", seconds / 3600.0);
    }

    /**
     * Completed, failed and retried runs of the fleet per bucket over the chosen range, with links to the
     * other ranges and a queue chooser (plain links and a GET form: no script needed).
     */
    static void chart(Html h, View view, ActivityChart chart, List<String> queues) {
        long max = chart.max();
        h.raw("<section id=\"activity\"><h2>Activity</h2><p class=\"ranges\">");
        String queueParam = chart.queue() == null ? "" : "&queue=" + Html.url(chart.queue());
        for (ActivityChart.Range range : ActivityChart.Range.values()) {
            if (range == chart.range()) {
                h.raw("<b aria-current=\"true\">").text(range.label).raw("</b> ");
            } else {
                h.raw("<a").attr("href", view.home() + "?range=" + range.param + queueParam).raw(">").text(range.label)
                        .raw("</a> ");
            }
        }
        h.raw("</p><form method=\"get\" class=\"inline chart-queue\"").attr("action", view.home()).raw(">")
                .raw("<input type=\"hidden\" name=\"range\"").attr("value", chart.range().param).raw(">")
                .raw("<label>Queue <select name=\"queue\" id=\"chart-queue\"><option value=\"\">every queue</option>");
        for (String queue : queues) {
            h.raw("<option").attr("value", queue);
            if (queue.equals(chart.queue())) {
                h.raw(" selected");
            }
            h.raw(">").text(queue).raw("</option>");
        }
        h.raw("</select></label> <button type=\"submit\">Show</button></form>");
        h.raw("<p class=\"hint\">Completed <span class=\"swatch ok\"></span>, failed <span class=\"swatch bad\"></span>"
                + " and retried <span class=\"swatch retry\"></span> per ").text(chart.bucketLabel())
                .raw(", counted by every engine and kept in the database: the same on every replica. Total: <b id=\"chart-completed\">")
                .text(chart.total(chart.completed())).raw("</b> completed, <b id=\"chart-failed\">")
                .text(chart.total(chart.failed())).raw("</b> failed, <b id=\"chart-retried\">")
                .text(chart.total(chart.retried())).raw("</b> retried.</p>");
        int slots = chart.completed().length;
        double width = 600.0 / slots;
        h.raw("<figure class=\"chart\"><svg id=\"chart\" viewBox=\"0 0 600 112\" preserveAspectRatio=\"none\"")
                .attr("data-live", chart.live() ? "1" : "0")
                .raw(" role=\"img\" aria-label=\"completed, failed and retried runs per bucket\">");
        h.raw("<line class=\"axis\" x1=\"0\" y1=\"110\" x2=\"600\" y2=\"110\"/>");
        for (int i = 0; i < slots; i++) {
            bar(h, "ok", i, width, 0, chart.completed()[i], max);
            bar(h, "bad", i, width, 1, chart.failed()[i], max);
            bar(h, "retry", i, width, 2, chart.retried()[i], max);
        }
        h.raw("</svg><figcaption class=\"axis-labels\"><span>").text(chart.range().start)
                .raw("</span><span id=\"chart-max\">").text("max " + max + " per " + chart.bucketLabel())
                .raw("</span><span>now</span></figcaption></figure></section>");
    }

    private static void bar(Html h, String kind, int slot, double width, int position, long value, long max) {
        double height = 100.0 * value / max;
        double bar = width / 4;
        h.raw("<rect").attr("class", kind).attr("data-i", slot)
                .attr("x", String.format(Locale.ROOT, "%.2f", slot * width + bar * (position + 0.5)))
                .attr("width", String.format(Locale.ROOT, "%.2f", bar))
                .attr("y", String.format(Locale.ROOT, "%.1f", 110 - height))
                .attr("height", String.format(Locale.ROOT, "%.1f", height))
                .raw("><title>").text(value).raw("</title></rect>");
    }
}
