package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Layout.STATUSES;
import static dev.durable.dashboard.internal.Layout.badge;
import static dev.durable.dashboard.internal.Layout.clip;
import static dev.durable.dashboard.internal.Layout.csrf;
import static dev.durable.dashboard.internal.Layout.instancePath;
import static dev.durable.dashboard.internal.Layout.label;
import static dev.durable.dashboard.internal.Layout.layout;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * The instances listing: the filter form, a page of matching instances with its pager, and the form that
 * acts on every match.
 */
public final class InstanceListPage {

    private InstanceListPage() {
    }

    /** A page of the listing with the cursors of its neighbours (null at either end). */
    record Listing(List<Instance> items, boolean newestFirst, int size, @Nullable String previous,
            @Nullable String next) {
    }

    static String instances(View view, FilterForm form, Listing listing) {
        return layout(view, "instances", "Instances", h -> {
            filterForm(h, view, form, listing);
            h.raw("<section><div class=\"scroll\"><table id=\"instances\"><thead><tr>")
                    .raw("<th class=\"num\">ID</th><th>Type</th><th>Queue</th><th>Status</th><th>Step</th>")
                    .raw("<th class=\"num\">Attempt</th><th class=\"num\">Priority</th><th>Correlation key</th>")
                    .raw("<th>Inserted</th><th>Updated</th><th>Last error</th></tr></thead><tbody>");
            if (listing.items().isEmpty()) {
                h.raw("<tr><td class=\"empty\" colspan=\"11\">No instance matches.</td></tr>");
            }
            for (Instance i : listing.items()) {
                h.raw("<tr").attr("data-id", i.id()).attr("data-status", i.status().sqlName()).raw(">")
                        .raw("<td class=\"num\">").link(instancePath(view, i.id()), i.id()).raw("</td>")
                        .raw("<td>").text(i.type()).raw(" <span class=\"version\">v").text(i.typeVersion())
                        .raw("</span></td><td>").text(i.queue()).raw("</td><td>");
                badge(h, i.status());
                h.raw("</td><td>").text(i.step()).raw("</td><td class=\"num\">").text(i.attempt() + "/" + i.maxAttempts())
                        .raw("</td><td class=\"num\">").text(i.priority()).raw("</td><td class=\"key\">")
                        .text(i.correlationKey()).raw("</td><td class=\"time\">").when(i.insertedAt())
                        .raw("</td><td class=\"time\">").when(i.updatedAt()).raw("</td><td class=\"error\">")
                        .text(clip(i.lastError(), 160)).raw("</td></tr>");
            }
            h.raw("</tbody></table></div>");
            pager(h, view, form, listing);
            h.raw("</section>");
            if (view.actions()) {
                bulkForm(h, view, form);
            }
        });
    }

    private static void filterForm(Html h, View view, FilterForm form, Listing listing) {
        h.raw("<form class=\"filters\" method=\"get\"").attr("action", view.path("/instances")).raw(">");
        field(h, form, "queue", "Queue", "payments, mail");
        field(h, form, "type", "Type", "send-email");
        h.raw("<fieldset class=\"statuses\"><legend>Status</legend>");
        Set<String> chosen = new TreeSet<>(form.all("status"));
        for (InstanceStatus status : STATUSES) {
            h.raw("<label><input type=\"checkbox\" name=\"status\"").attr("value", status.sqlName());
            if (chosen.contains(status.sqlName())) {
                h.raw(" checked");
            }
            h.raw(">").text(label(status)).raw("</label>");
        }
        h.raw("</fieldset>");
        field(h, form, "contains", "Args/state contain (JSON)", "{\"customer\": \"c1\"}");
        field(h, form, "error", "Error contains", "timeout");
        field(h, form, "key", "Correlation key", "order:42");
        // The rarer fields fold away (open when one is set): the results stay near the top on a phone.
        boolean more = FilterForm.FIELDS.subList(4, FilterForm.FIELDS.size()).stream()
                .anyMatch(name -> !name.equals("contains") && !name.equals("error") && !form.all(name).isEmpty());
        h.raw("<details class=\"more\"").raw(more ? " open" : "").raw("><summary>More filters</summary><div class=\"more-fields\">");
        field(h, form, "keyPrefix", "Key prefix", "order:");
        field(h, form, "insertedFrom", "Inserted from", "2026-12-03T04:00");
        field(h, form, "insertedTo", "Inserted before", "");
        field(h, form, "updatedFrom", "Updated from", "");
        field(h, form, "updatedTo", "Updated before", "");
        field(h, form, "eligibleFrom", "Due from", "");
        field(h, form, "eligibleTo", "Due before", "");
        field(h, form, "parent", "Parent id", "");
        field(h, form, "version", "Type version", "1");
        h.raw("</div></details>");
        h.raw("<label>Order<select name=\"order\"><option value=\"newest\"")
                .raw(listing.newestFirst() ? " selected" : "").raw(">newest first</option><option value=\"oldest\"")
                .raw(listing.newestFirst() ? "" : " selected").raw(">oldest first</option></select></label>");
        h.raw("<label>Per page<select name=\"size\">");
        for (int size : new int[] {20, 50, 100, 200}) {
            h.raw("<option").attr("value", size).raw(size == listing.size() ? " selected" : "").raw(">").text(size)
                    .raw("</option>");
        }
        h.raw("</select></label><div class=\"buttons\"><button type=\"submit\" id=\"search\">Search</button> ")
                .link(view.path("/instances"), "Clear").raw("</div></form>");
    }

    private static void field(Html h, FilterForm form, String name, String label, String placeholder) {
        h.raw("<label>").text(label).raw("<input type=\"text\"").attr("name", name).attr("id", "f-" + name)
                .attr("value", String.join(name.equals("queue") || name.equals("type") ? ", " : "", form.all(name)));
        if (!placeholder.isEmpty()) {
            h.attr("placeholder", placeholder);
        }
        h.raw("></label>");
    }

    private static void pager(Html h, View view, FilterForm form, Listing listing) {
        String base = view.path("/instances?") + (form.isEmpty() ? "" : form.query() + "&") + "order="
                + (listing.newestFirst() ? "newest" : "oldest") + "&size=" + listing.size();
        h.raw("<nav class=\"pager\">");
        if (listing.previous() != null) {
            h.raw("<a rel=\"prev\" id=\"prev\"").attr("href", base + "&before=" + Html.url(listing.previous())).raw(">")
                    .text(listing.newestFirst() ? "← Newer" : "← Older").raw("</a>");
        } else {
            h.raw("<span class=\"off\">").text(listing.newestFirst() ? "← Newer" : "← Older").raw("</span>");
        }
        if (listing.next() != null) {
            h.raw("<a rel=\"next\" id=\"next\"").attr("href", base + "&after=" + Html.url(listing.next())).raw(">")
                    .text(listing.newestFirst() ? "Older →" : "Newer →").raw("</a>");
        } else {
            h.raw("<span class=\"off\">").text(listing.newestFirst() ? "Older →" : "Newer →").raw("</span>");
        }
        h.raw("</nav>");
    }

    private static void bulkForm(Html h, View view, FilterForm form) {
        h.raw("<section class=\"bulk\"><h2>Act on every match</h2><form method=\"post\" id=\"bulk\"")
                .attr("action", view.path("/bulk")).attr("data-confirm", form.isEmpty()
                        ? "Act on EVERY instance (no filter is set)?" : "Act on every instance this filter matches?")
                .raw(">");
        csrf(h, view);
        for (Map.Entry<String, String> pair : form.pairs()) {
            h.raw("<input type=\"hidden\"").attr("name", pair.getKey()).attr("value", pair.getValue()).raw(">");
        }
        h.raw("<label>Action<select name=\"action\" id=\"bulk-action\"><option value=\"retry\">retry failed and"
                + " cancelled in place</option><option value=\"cancel\">cancel live</option><option value=\"delete\">"
                + "delete settled</option><option value=\"run-now\">run now (runnable, due later; at once)</option>"
                + "<option value=\"priority\">set priority (live)</option></select></label>"
                + "<label>Priority<input type=\"number\" name=\"priority\" class=\"small\" value=\"0\"></label>"
                + "<button type=\"submit\" class=\"danger\" id=\"bulk-submit\">"
                + "Apply to every match</button></form><p class=\"hint\">");
        h.text("Retry, cancel, delete and priority run as a durable job (chunked, resumable after a crash) whose"
                + " progress has its own page; run now is one short statement per batch.");
        h.raw("</p></section>");
    }
}
