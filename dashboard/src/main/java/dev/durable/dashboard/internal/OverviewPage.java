package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Layout.STATUSES;
import static dev.durable.dashboard.internal.Layout.csrf;
import static dev.durable.dashboard.internal.Layout.instancePath;
import static dev.durable.dashboard.internal.Layout.label;
import static dev.durable.dashboard.internal.Layout.layout;

import dev.durable.InstanceStatus;
import dev.durable.JobEvent;
import dev.durable.QueueStats;
import dev.durable.admin.StatusCount;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The overview: each queue's counts by status, this engine's schedulers and the engines serving it (with
 * pause and resume), the last hour's chart and the live event feed.
 */
public final class OverviewPage {

    private OverviewPage() {
    }

    /** One queue's row: counts by status, this engine's scheduler now, the live engines serving it. */
    record QueueRow(String queue, Map<InstanceStatus, StatusCount> counts, @Nullable QueueStats here,
            List<String> engines, @Nullable Boolean paused) {
    }

    static String overview(View view, List<QueueRow> queues, boolean pauseKnown, MinuteRing.Snapshot chart,
            List<JobEvent> recent) {
        return layout(view, "overview", "Overview", h -> {
            h.raw("<section><h2>Queues</h2><div class=\"scroll\"><table id=\"queues\"><thead><tr><th>Queue</th>");
            for (InstanceStatus status : STATUSES) {
                h.raw("<th class=\"num\">").text(label(status)).raw("</th>");
            }
            h.raw("<th class=\"num\" title=\"on this engine\">Running here</th>")
                    .raw("<th class=\"num\" title=\"on this engine\">Buffered here</th>");
            if (pauseKnown) {
                h.raw("<th>State</th>");
            }
            h.raw("<th>Live engines</th></tr></thead><tbody>");
            if (queues.isEmpty()) {
                h.raw("<tr><td class=\"empty\" colspan=\"12\">No queue has instances yet and no engine serves one.</td></tr>");
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
                h.raw("<td class=\"num\" data-now=\"running\">").text(row.here() == null ? "–" : row.here().running())
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
                    + " estimates on a big history. Running and buffered are this engine's schedulers now.</p></section>");
            chart(h, chart);
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

    /** Bars per minute over the last hour: completed (left of each minute), failed (right). */
    static void chart(Html h, MinuteRing.Snapshot chart) {
        long max = 1;
        long completed = 0;
        long failed = 0;
        for (int i = 0; i < MinuteRing.MINUTES; i++) {
            max = Math.max(max, Math.max(chart.completed()[i], chart.failed()[i]));
            completed += chart.completed()[i];
            failed += chart.failed()[i];
        }
        h.raw("<section><h2>Last hour</h2><p class=\"hint\">Completed <span class=\"swatch ok\"></span> and failed"
                + " <span class=\"swatch bad\"></span> per minute, counted in memory from this engine's events since"
                + " the application started. Total: <b id=\"chart-completed\">").text(completed)
                .raw("</b> completed, <b id=\"chart-failed\">").text(failed).raw("</b> failed.</p>");
        h.raw("<figure class=\"chart\"><svg id=\"chart\" viewBox=\"0 0 600 112\" preserveAspectRatio=\"none\""
                + " role=\"img\" aria-label=\"completed and failed per minute over the last hour\">");
        h.raw("<line class=\"axis\" x1=\"0\" y1=\"110\" x2=\"600\" y2=\"110\"/>");
        for (int i = 0; i < MinuteRing.MINUTES; i++) {
            bar(h, "ok", i, 1, chart.completed()[i], max);
            bar(h, "bad", i, 5, chart.failed()[i], max);
        }
        h.raw("</svg><figcaption class=\"axis-labels\"><span>-60 min</span><span id=\"chart-max\">")
                .text("max " + max + "/min").raw("</span><span>now</span></figcaption></figure></section>");
    }

    private static void bar(Html h, String kind, int minute, int offset, long value, long max) {
        double height = 100.0 * value / max;
        h.raw("<rect").attr("class", kind).attr("data-i", minute).attr("x", minute * 10 + offset).attr("width", 4)
                .attr("y", String.format(java.util.Locale.ROOT, "%.1f", 110 - height))
                .attr("height", String.format(java.util.Locale.ROOT, "%.1f", height))
                .raw("><title>").text(value).raw("</title></rect>");
    }
}
