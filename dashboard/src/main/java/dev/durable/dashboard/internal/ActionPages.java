package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Layout.badge;
import static dev.durable.dashboard.internal.Layout.csrf;
import static dev.durable.dashboard.internal.Layout.dt;
import static dev.durable.dashboard.internal.Layout.instancePath;
import static dev.durable.dashboard.internal.Layout.layout;

import dev.durable.admin.BulkProgress;
import dev.durable.admin.BulkResult;
import java.util.List;
import java.util.Map;

/**
 * What an action answers with: the confirmation a destructive one asks for, a bulk action's result or
 * progress, and the error page any route shows when it is refused or fails.
 */
public final class ActionPages {

    private ActionPages() {
    }

    static String confirm(View view, String question, String action, List<Map.Entry<String, String>> fields) {
        return layout(view, "confirm", "Confirm", h -> {
            h.raw("<form method=\"post\" class=\"confirm\" id=\"confirm\"").attr("action", action).raw("><p>")
                    .text(question).raw("</p>");
            csrf(h, view);
            for (Map.Entry<String, String> field : fields) {
                h.raw("<input type=\"hidden\"").attr("name", field.getKey()).attr("value", field.getValue()).raw(">");
            }
            h.raw("<input type=\"hidden\" name=\"confirm\" value=\"yes\"><button type=\"submit\" class=\"danger\""
                    + " id=\"confirm-yes\">Yes, go ahead</button> ").link(view.home(), "No, back to the overview")
                    .raw("</form>");
        });
    }

    static String bulkDone(View view, String action, FilterForm form, BulkResult result) {
        return layout(view, "bulk", "Bulk " + action + " done", h -> {
            h.raw("<dl class=\"meta\" id=\"bulk-result\">");
            dt(h, "Matched", result.matched());
            dt(h, "Affected", result.affected());
            dt(h, "Batches", result.batches());
            h.raw("</dl><p>").link(view.path("/instances" + (form.isEmpty() ? "" : "?" + form.query())),
                    "Back to the instances").raw("</p>");
        });
    }

    static String bulkProgress(View view, BulkProgress p, boolean served) {
        String title = "Bulk " + p.action().name().toLowerCase(java.util.Locale.ROOT).replace('_', ' ') + " #" + p.id();
        return layout(view, "bulk", title, p.finished() ? 0 : 1, h -> {
            long percent = Math.round(Math.floor(p.fraction() * 100));
            h.raw("<section class=\"bulk-progress\"><progress id=\"bulk-progress\" max=\"100\"").attr("value", percent)
                    .raw("></progress><p><b id=\"bulk-percent\">").text(percent + " %").raw("</b> ");
            badge(h, p.status());
            h.raw(" ").text(p.counting() ? "counting the matching instances…" : p.finished() ? "finished" : "working")
                    .raw("</p>");
            if (!served && !p.finished()) {
                h.raw("<p class=\"problem\">").text("No live engine runs queue " + dev.durable.admin.DurableAdmin.BULK_QUEUE
                        + ": the job waits until one does (QueueOptions.builder(DurableAdmin.BULK_QUEUE)).").raw("</p>");
            }
            h.raw("<dl class=\"meta\" id=\"bulk-result\">");
            dt(h, "Matched", p.total() + (p.counting() ? " so far" : ""));
            dt(h, "Gone through", p.done());
            dt(h, "Affected", p.affected());
            h.raw("</dl><p>").link(instancePath(view, p.id()), "The job's own instance").raw(" · ")
                    .link(view.path("/instances?type=" + Html.url(dev.durable.admin.DurableAdmin.BULK_TYPE)), "All bulk jobs")
                    .raw("</p></section>");
        });
    }

    static String error(View view, int status, String title, String message) {
        return layout(view, "error", title, h -> h.raw("<p class=\"problem\" id=\"problem\">").text(message)
                .raw("</p><p>").link(view.home(), "Back to the overview").raw("</p>"));
    }
}
