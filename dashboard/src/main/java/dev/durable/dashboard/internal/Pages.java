package dev.durable.dashboard.internal;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.JobEvent;
import dev.durable.LiveEngine;
import dev.durable.QueueStats;
import dev.durable.UnservedWork;
import dev.durable.admin.Attempt;
import dev.durable.admin.BulkProgress;
import dev.durable.admin.BulkResult;
import dev.durable.admin.InboxSignal;
import dev.durable.admin.GateUsage;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.LimitUsage;
import dev.durable.admin.RateBucket;
import dev.durable.admin.StatusCount;
import dev.durable.admin.StepInput;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The pages, rendered from what the handlers read. Every dynamic value goes through {@link Html#text} or
 * {@link Html#attr}; {@link Html#raw} gets this class's literals only.
 */
public final class Pages {

    private static final ObjectMapper JSON = new ObjectMapper();
    static final List<InstanceStatus> STATUSES = List.of(InstanceStatus.values());

    private Pages() {
    }

    // ---- Layout -----------------------------------------------------------------------------------

    static String layout(View view, String page, String heading, Consumer<Html> body) {
        return layout(view, page, heading, 0, body);
    }

    /** A page; one that refreshes itself every {@code refreshSeconds} (0: never), which works without JavaScript. */
    static String layout(View view, String page, String heading, int refreshSeconds, Consumer<Html> body) {
        Html h = new Html();
        h.raw("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
        if (refreshSeconds > 0) {
            h.raw("<meta http-equiv=\"refresh\"").attr("content", refreshSeconds).raw(">");
        }
        h
                .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
                .raw("<title>").text(heading).raw(" · ").text(view.title()).raw("</title>")
                .raw("<link rel=\"stylesheet\"").attr("href", view.path("/static/dashboard.css")).raw(">")
                .raw("<script defer").attr("src", view.path("/static/dashboard.js")).raw("></script>")
                .raw("</head><body").attr("data-base", view.base()).attr("data-page", page)
                .attr("data-rendered", System.currentTimeMillis()).raw(">");
        h.raw("<header class=\"top\"><a class=\"brand\"").attr("href", view.home()).raw(">").text(view.title())
                .raw("</a><nav>");
        nav(h, view, page, "overview", "/", "Overview");
        nav(h, view, page, "instances", "/instances", "Instances");
        nav(h, view, page, "recurring", "/recurring", "Recurring");
        nav(h, view, page, "limits", "/limits", "Limits");
        nav(h, view, page, "engines", "/engines", "Engines");
        h.raw("</nav><span id=\"connection\" class=\"conn\" title=\"live updates\">static</span></header><main>");
        if (view.notice() != null) {
            h.raw("<p class=\"notice\" id=\"notice\" role=\"status\">").text(view.notice()).raw("</p>");
        }
        h.raw("<h1>").text(heading).raw("</h1>");
        body.accept(h);
        h.raw("</main></body></html>\n");
        return h.toString();
    }

    private static void nav(Html h, View view, String page, String name, String path, String label) {
        h.raw("<a").attr("href", path.equals("/") ? view.home() : view.path(path));
        if (page.equals(name)) {
            h.raw(" aria-current=\"page\"");
        }
        h.raw(">").text(label).raw("</a>");
    }

    static void csrf(Html h, View view) {
        h.raw("<input type=\"hidden\"").attr("name", Csrf.FIELD).attr("value", view.csrfToken()).raw(">");
        view.formFields().forEach((name, value) ->
                h.raw("<input type=\"hidden\"").attr("name", name).attr("value", value).raw(">"));
    }

    static void badge(Html h, InstanceStatus status) {
        h.raw("<span").attr("class", "badge st-" + status.sqlName()).raw(">").text(status.sqlName()).raw("</span>");
    }

    static String instancePath(View view, long id) {
        return view.path("/instances/" + id);
    }

    static String label(InstanceStatus status) {
        return status.sqlName().replace('_', ' ');
    }

    // ---- Overview ---------------------------------------------------------------------------------

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

    // ---- Instances --------------------------------------------------------------------------------

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

    static String clip(@Nullable String text, int max) {
        if (text == null) {
            return "";
        }
        String line = text.strip();
        int newline = line.indexOf('\n');
        if (newline > 0) {
            line = line.substring(0, newline);
        }
        return line.length() <= max ? line : line.substring(0, max) + "…";
    }

    // ---- Detail -----------------------------------------------------------------------------------

    /** A child and its own children (one level more), for the tree. */
    record ChildNode(Instance instance, List<Instance> children, boolean more) {
    }

    static String detail(View view, InstanceDetail detail, List<ChildNode> tree, boolean runNow, boolean priority) {
        Instance i = detail.instance();
        return layout(view, "instance", "Instance #" + i.id(), h -> {
            h.raw("<p class=\"subtitle\">");
            badge(h, i.status());
            h.raw(" <b>").text(i.type()).raw("</b> v").text(i.typeVersion()).raw(" on ").text(i.queue())
                    .raw(", step <b>").text(i.step()).raw("</b></p>");
            if (view.actions()) {
                actions(h, view, i, runNow, priority);
            }
            h.raw("<section><h2>Summary</h2><dl class=\"meta\" id=\"meta\">");
            dt(h, "Status", i.status().sqlName());
            dt(h, "Attempt", i.attempt() + " of " + i.maxAttempts());
            dt(h, "Priority", i.priority());
            h.raw("<dt>Due at</dt><dd>").when(i.eligibleAt()).raw("</dd>");
            h.raw("<dt>Inserted</dt><dd>").when(i.insertedAt()).raw("</dd>");
            h.raw("<dt>Updated</dt><dd>").when(i.updatedAt()).raw("</dd>");
            dt(h, "Correlation key", i.correlationKey());
            dt(h, "Concurrency key", i.concurrencyKey());
            dt(h, "Claimed by", i.claimedBy());
            if (i.leaseExpiresAt() != null) {
                h.raw("<dt>Lease until</dt><dd>").when(i.leaseExpiresAt()).raw("</dd>");
            }
            if (i.parentId() != null) {
                h.raw("<dt>Parent</dt><dd>").link(instancePath(view, i.parentId()), "#" + i.parentId()).raw("</dd>");
            }
            if (detail.forkedFrom() != null) {
                h.raw("<dt>Forked from</dt><dd id=\"forked-from\">").link(instancePath(view, detail.forkedFrom()),
                        "#" + detail.forkedFrom()).raw("</dd>");
            }
            if (!detail.forks().isEmpty()) {
                h.raw("<dt>Forks</dt><dd id=\"forks\">");
                for (int k = 0; k < detail.forks().size(); k++) {
                    h.raw(k == 0 ? "" : ", ").link(instancePath(view, detail.forks().get(k)), "#" + detail.forks().get(k));
                }
                h.raw("</dd>");
            }
            if (i.childrenPending() > 0) {
                dt(h, "Children pending", i.childrenPending());
            }
            if (i.cancelRequested()) {
                dt(h, "Cancel", "requested");
            }
            dt(h, "Awaited signals", i.awaitedSignals().isEmpty() ? null : String.join(", ", i.awaitedSignals()));
            if (i.awaitDeadline() != null) {
                h.raw("<dt>Await deadline</dt><dd>").when(i.awaitDeadline()).raw("</dd>");
            }
            h.raw("</dl></section>");
            if (detail.lastError() != null) {
                h.raw("<section><h2>Last error</h2><pre class=\"error\" id=\"last-error\">").text(detail.lastError())
                        .raw("</pre></section>");
            }
            attempts(h, detail.attempts());
            stepInputs(h, view, detail);
            h.raw("<section><h2>Args / state</h2><pre class=\"json\" id=\"state\">").text(i.stateJson() == null ? "null" : pretty(i.stateJson()))
                    .raw("</pre></section>");
            if (i.resultJson() != null) {
                h.raw("<section><h2>Result</h2><pre class=\"json\" id=\"result\">").text(pretty(i.resultJson()))
                        .raw("</pre></section>");
            }
            children(h, view, i, tree, detail.moreChildren());
            inbox(h, detail);
        });
    }

    /** The attempts as a timeline, oldest first, each with its worker, times and error. */
    private static void attempts(Html h, List<Attempt> attempts) {
        if (attempts.isEmpty()) {
            return;
        }
        h.raw("<section><h2>Attempts</h2><ol class=\"timeline\" id=\"attempts\">");
        for (Attempt a : attempts) {
            String outcome = a.outcome().name().toLowerCase(java.util.Locale.ROOT);
            h.raw("<li").attr("class", "o-" + outcome).attr("data-attempt", a.attempt()).attr("data-outcome", outcome)
                    .raw("><b>").text("Attempt " + a.attempt()).raw("</b> <span class=\"step\">").text(a.step())
                    .raw("</span> <span").attr("class", "outcome o-" + outcome).raw(">").text(outcome.replace('_', ' '))
                    .raw("</span><div class=\"when\">");
            if (a.startedAt() != null) {
                h.when(a.startedAt());
            }
            if (a.finishedAt() != null) {
                h.raw(" → ").when(a.finishedAt());
                if (a.startedAt() != null) {
                    h.raw(" <span class=\"dur\">(").text(duration(java.time.Duration.between(a.startedAt(), a.finishedAt())))
                            .raw(")</span>");
                }
            }
            if (a.worker() != null) {
                h.raw(" <span class=\"worker\">on ").text(a.worker()).raw("</span>");
            }
            h.raw("</div>");
            if (a.error() != null) {
                h.raw("<pre class=\"error\">").text(a.error()).raw("</pre>");
            }
            h.raw("</li>");
        }
        h.raw("</ol></section>");
    }

    /**
     * The state each step last started with, oldest first, with a replay button (settled instances) and a
     * fork button per step, and a form to start a step with another state.
     */
    private static void stepInputs(Html h, View view, InstanceDetail detail) {
        Instance i = detail.instance();
        List<StepInput> inputs = detail.stepInputs();
        if (inputs.isEmpty()) {
            return;
        }
        String path = instancePath(view, i.id());
        boolean settled = i.status().isTerminal();
        h.raw("<section><h2>Step inputs</h2><div class=\"scroll\"><table id=\"step-inputs\"><thead><tr><th>Step</th>")
                .raw("<th class=\"num\">Version</th><th>Ran</th><th>State it started with</th>");
        if (view.actions()) {
            h.raw("<th>Actions</th>");
        }
        h.raw("</tr></thead><tbody>");
        for (StepInput input : inputs) {
            h.raw("<tr").attr("data-step", input.step()).raw("><td><span class=\"step\">").text(input.step())
                    .raw("</span>").raw(input.current() ? " <small>(" + (settled ? "settled here" : "now") + ")</small>" : "")
                    .raw("</td><td class=\"num\">").text(input.typeVersion()).raw("</td><td class=\"time\">");
            if (input.startedAt() != null) {
                h.when(input.startedAt()).raw(" → ");
            }
            h.when(input.recordedAt()).raw("</td><td><pre class=\"json\">")
                    .text(input.stateJson() == null ? "null" : pretty(input.stateJson())).raw("</pre></td>");
            if (view.actions()) {
                h.raw("<td>");
                if (settled) {
                    stepButton(h, view, path + "/replay", "replay", "Replay from here", input.step(),
                            "Run instance #" + i.id() + " again from step '" + input.step() + "' with this state?");
                }
                stepButton(h, view, path + "/fork", "fork", "Fork from here", input.step(),
                        "Start a new instance from step '" + input.step() + "' of #" + i.id() + " with this state?");
                h.raw("</td>");
            }
            h.raw("</tr>");
        }
        h.raw("</tbody></table></div>");
        if (view.actions()) {
            if (settled) {
                stateForm(h, view, path + "/replay", "replay-with-state", "Replay", inputs,
                        "Run instance #" + i.id() + " again from this step with this state?");
            }
            stateForm(h, view, path + "/fork", "fork-with-state", "Fork", inputs,
                    "Start a new instance from this step of #" + i.id() + " with this state?");
        }
        h.raw("</section>");
    }

    private static void stepButton(Html h, View view, String action, String cls, String label, String step,
            String confirm) {
        h.raw("<form method=\"post\" class=\"inline\"").attr("action", action).attr("data-confirm", confirm).raw(">");
        csrf(h, view);
        h.raw("<input type=\"hidden\" name=\"step\"").attr("value", step).raw("><button type=\"submit\"")
                .attr("class", cls).raw(">").text(label).raw("</button></form>");
    }

    private static void stateForm(Html h, View view, String action, String id, String label, List<StepInput> inputs,
            String confirm) {
        h.raw("<form method=\"post\" class=\"inline\"").attr("id", id).attr("action", action)
                .attr("data-confirm", confirm).raw(">");
        csrf(h, view);
        h.raw("<label>").text(label + " from").raw(" <select name=\"step\">");
        new java.util.LinkedHashSet<>(inputs.stream().map(StepInput::step).toList())
                .forEach(step -> h.raw("<option").attr("value", step).raw(">").text(step).raw("</option>"));
        h.raw("</select></label> <label>with state <input type=\"text\" name=\"state\" required"
                + " placeholder=\"JSON\"></label> <button type=\"submit\">").text(label).raw("</button></form>");
    }

    static String duration(java.time.Duration d) {
        long ms = d.toMillis();
        if (ms < 1000) {
            return ms + " ms";
        }
        if (ms < 60_000) {
            return String.format(java.util.Locale.ROOT, "%.1f s", ms / 1000.0);
        }
        return d.toMinutes() + " min " + d.toSecondsPart() + " s";
    }

    private static void dt(Html h, String name, @Nullable Object value) {
        h.raw("<dt>").text(name).raw("</dt><dd>").text(value == null ? "–" : value).raw("</dd>");
    }

    private static void actions(Html h, View view, Instance i, boolean runNow, boolean priority) {
        String path = instancePath(view, i.id());
        h.raw("<section class=\"actions\" id=\"actions\">");
        InstanceStatus s = i.status();
        if (s == InstanceStatus.FAILED || s == InstanceStatus.CANCELLED) {
            button(h, view, path + "/retry", "retry", "Retry in place", null);
        }
        if (runNow && s == InstanceStatus.RUNNABLE) {
            button(h, view, path + "/run-now", "run-now", "Run now", null);
        }
        if (!s.isTerminal()) {
            button(h, view, path + "/cancel", "cancel", "Cancel", "Cancel instance #" + i.id() + " and its live children?");
        }
        if (s.isTerminal()) {
            button(h, view, path + "/delete", "delete", "Delete", "Delete instance #" + i.id() + " for good?");
        }
        if (priority && !s.isTerminal()) {
            h.raw("<form method=\"post\" class=\"inline\"").attr("action", path + "/priority").raw(">");
            csrf(h, view);
            h.raw("<label>Priority <input type=\"number\" name=\"priority\" class=\"small\"").attr("value", i.priority())
                    .raw("></label><button type=\"submit\" class=\"priority\">Set</button></form>");
        }
        if (!s.isTerminal()) {
            h.raw("<form method=\"post\" class=\"inline signal\"").attr("action", path + "/signal").raw(">");
            csrf(h, view);
            h.raw("<label>Signal <input type=\"text\" name=\"name\" required placeholder=\"name\"");
            if (!i.awaitedSignals().isEmpty()) {
                h.attr("value", i.awaitedSignals().get(0));
            }
            h.raw("></label><label>Payload <input type=\"text\" name=\"payload\" placeholder=\"JSON (optional)\">"
                    + "</label><button type=\"submit\" class=\"signal\">Send</button></form>");
        }
        h.raw("</section>");
    }

    private static void button(Html h, View view, String action, String cls, String label, @Nullable String confirm) {
        h.raw("<form method=\"post\" class=\"inline\"").attr("action", action);
        if (confirm != null) {
            h.attr("data-confirm", confirm);
        }
        h.raw(">");
        csrf(h, view);
        h.raw("<button type=\"submit\"").attr("class", confirm != null ? cls + " danger" : cls).raw(">").text(label)
                .raw("</button></form>");
    }

    private static void children(Html h, View view, Instance parent, List<ChildNode> tree, boolean more) {
        if (tree.isEmpty()) {
            return;
        }
        h.raw("<section><h2>Children</h2><ul class=\"tree\" id=\"children\">");
        for (ChildNode node : tree) {
            h.raw("<li>");
            treeItem(h, view, node.instance());
            if (!node.children().isEmpty()) {
                h.raw("<ul>");
                for (Instance grandchild : node.children()) {
                    h.raw("<li>");
                    treeItem(h, view, grandchild);
                    h.raw("</li>");
                }
                if (node.more()) {
                    h.raw("<li>").link(view.path("/instances?parent=" + node.instance().id()), "more…").raw("</li>");
                }
                h.raw("</ul>");
            }
            h.raw("</li>");
        }
        if (more) {
            h.raw("<li>").link(view.path("/instances?parent=" + parent.id()), "all children…").raw("</li>");
        }
        h.raw("</ul></section>");
    }

    private static void treeItem(Html h, View view, Instance child) {
        h.link(instancePath(view, child.id()), "#" + child.id()).raw(" ");
        badge(h, child.status());
        h.raw(" ").text(child.type()).raw(" <span class=\"step\">").text(child.step()).raw("</span>");
        if (child.lastError() != null) {
            h.raw(" <span class=\"error\">").text(clip(child.lastError(), 100)).raw("</span>");
        }
    }

    private static void inbox(Html h, InstanceDetail detail) {
        if (!detail.inbox().isEmpty()) {
            h.raw("<section><h2>Inbox</h2><div class=\"scroll\"><table id=\"inbox\"><thead><tr><th class=\"num\">ID</th>")
                    .raw("<th>Name</th><th>Payload</th><th>Dedup key</th><th>Received</th><th>Consumed</th></tr></thead><tbody>");
            for (InboxSignal s : detail.inbox()) {
                h.raw("<tr><td class=\"num\">").text(s.id()).raw("</td><td>").text(s.name()).raw("</td><td><code>")
                        .text(s.payloadJson()).raw("</code></td><td>").text(s.dedupKey()).raw("</td><td class=\"time\">")
                        .when(s.insertedAt()).raw("</td><td class=\"time\">").when(s.consumedAt()).raw("</td></tr>");
            }
            h.raw("</tbody></table></div></section>");
        }
        if (!detail.consumedSignals().isEmpty()) {
            h.raw("<section><h2>Consumed signals</h2><ol class=\"signals\">");
            detail.consumedSignals().forEach(name -> h.raw("<li>").text(name).raw("</li>"));
            h.raw("</ol></section>");
        }
    }

    static String pretty(String json) {
        try {
            return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(JSON.readTree(json));
        } catch (Exception notJson) {
            return json;
        }
    }

    // ---- Confirmation, results, errors ------------------------------------------------------------

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

    // ---- Recurring, limits, engines ---------------------------------------------------------------

    record RecurringRow(String name, String cron, String zone, String type, @Nullable String queue,
            @Nullable Instant nextDue, @Nullable Instance last) {
    }

    static String recurring(View view, List<RecurringRow> rows) {
        return layout(view, "recurring", "Recurring jobs", h -> {
            h.raw("<div class=\"scroll\"><table id=\"recurring\"><thead><tr><th>Name</th><th>Schedule</th><th>Zone</th>")
                    .raw("<th>Type</th><th>Queue</th><th>Next due</th><th>Last run</th></tr></thead><tbody>");
            if (rows.isEmpty()) {
                h.raw("<tr><td class=\"empty\" colspan=\"7\">This engine schedules no recurring job.</td></tr>");
            }
            for (RecurringRow row : rows) {
                h.raw("<tr").attr("data-name", row.name()).raw("><td>").text(row.name()).raw("</td><td><code>")
                        .text(row.cron()).raw("</code></td><td>").text(row.zone()).raw("</td><td>").text(row.type())
                        .raw("</td><td>").text(row.queue() == null ? "(the type's)" : row.queue())
                        .raw("</td><td class=\"time\">").when(row.nextDue()).raw("</td><td>");
                if (row.last() != null) {
                    h.link(instancePath(view, row.last().id()), "#" + row.last().id()).raw(" ");
                    badge(h, row.last().status());
                    h.raw(" ").when(row.last().eligibleAt());
                    h.raw(" ").link(view.path("/instances?keyPrefix=" + Html.url("durable.cron:" + row.name() + "@")),
                            "all runs");
                } else {
                    h.text("never");
                }
                h.raw("</td></tr>");
            }
            h.raw("</tbody></table></div><p class=\"hint\">The recurring jobs this engine schedules; next due from"
                    + " the schedule, last run from the instances the schedule inserted.</p>");
        });
    }

    record GateRow(String name, int capacity, int shards) {
    }

    record RateRow(String name, double ratePerSecond, int burst) {
    }

    /**
     * Per gate, its keys with live claims (held of capacity, a meter and a percentage); per rate limit, its
     * buckets (tokens of burst). Gates and limits come from this engine's options and from what the usage
     * shows (another engine's gate or bucket is listed too, its capacity unknown here).
     */
    static String limits(View view, List<GateRow> gates, List<RateRow> rates, LimitUsage usage) {
        Map<String, List<GateUsage>> keysByGate = new java.util.TreeMap<>();
        gates.forEach(gate -> keysByGate.put(gate.name(), new java.util.ArrayList<>()));
        usage.gates().forEach(key -> keysByGate.computeIfAbsent(key.gate(), g -> new java.util.ArrayList<>()).add(key));
        Map<String, List<RateBucket>> bucketsByLimit = new java.util.TreeMap<>();
        rates.forEach(rate -> bucketsByLimit.put(rate.name(), new java.util.ArrayList<>()));
        usage.buckets().forEach(b -> bucketsByLimit.computeIfAbsent(b.limit(), l -> new java.util.ArrayList<>()).add(b));
        return layout(view, "limits", "Limits", h -> {
            h.raw("<section id=\"gates\"><h2>Gates</h2>");
            if (keysByGate.isEmpty()) {
                h.raw("<p class=\"empty\">No gate configured on this engine.</p>");
            }
            keysByGate.forEach((name, keys) -> {
                GateRow gate = gates.stream().filter(g -> g.name().equals(name)).findFirst().orElse(null);
                h.raw("<h3>").text(name).raw("</h3><p class=\"hint\">").text(gate == null
                        ? "Not configured on this engine (its capacity is another engine's)."
                        : "Capacity " + gate.capacity() + " per key, " + gate.shards()
                                + (gate.shards() == 1 ? " shard." : " shards.")).raw("</p>");
                h.raw("<div class=\"scroll\"><table class=\"usage\"").attr("data-gate", name).raw("><thead><tr>")
                        .raw("<th>Key</th><th class=\"num\">Held</th><th class=\"num\">Capacity</th>")
                        .raw("<th>Use</th></tr></thead><tbody>");
                if (keys.isEmpty()) {
                    h.raw("<tr><td class=\"empty\" colspan=\"4\">No key holds a claim now.</td></tr>");
                }
                for (GateUsage key : keys) {
                    Integer capacity = key.capacity();
                    h.raw("<tr").attr("data-key", key.key()).raw("><td class=\"key\">").text(key.key())
                            .raw("</td><td class=\"num held\">").text(key.held()).raw("</td><td class=\"num\">")
                            .text(capacity == null ? "?" : capacity).raw("</td><td class=\"use\">");
                    if (capacity != null) {
                        meter(h, key.held(), capacity, Math.round(key.fraction() * 100) + " %");
                    }
                    h.raw("</td></tr>");
                }
                h.raw("</tbody></table></div>");
            });
            if (usage.moreGates()) {
                h.raw("<p class=\"hint\">").text("Only the " + usage.gates().size() + " busiest keys are shown.")
                        .raw("</p>");
            }
            h.raw("<p class=\"hint\">Held: executing instances with a live lease, counted from the instances"
                    + " (whatever the limiter).</p></section><section id=\"rates\"><h2>Rate limits</h2>");
            if (usage.bucketsInLimiter()) {
                h.raw("<p class=\"notice\" id=\"buckets-elsewhere\">").text("The buckets live in the engine's limiter ("
                        + usage.limiter() + "), not in PostgreSQL: they are not shown here.").raw("</p>");
            }
            if (bucketsByLimit.isEmpty()) {
                h.raw("<p class=\"empty\">No rate limit configured on this engine.</p>");
            }
            bucketsByLimit.forEach((name, buckets) -> {
                RateRow rate = rates.stream().filter(r -> r.name().equals(name)).findFirst().orElse(null);
                h.raw("<h3>").text(name).raw("</h3><p class=\"hint\">").text(rate == null
                        ? "Not configured on this engine: tokens as last stored."
                        : rate.ratePerSecond() + " tokens a second, burst " + rate.burst() + ".").raw("</p>");
                if (usage.bucketsInLimiter()) {
                    return;
                }
                h.raw("<div class=\"scroll\"><table class=\"usage\"").attr("data-bucket", name).raw("><thead><tr>")
                        .raw("<th>Partition</th><th class=\"num\">Tokens</th><th class=\"num\">Burst</th>")
                        .raw("<th>Fill</th><th>Last taken</th></tr></thead><tbody>");
                if (buckets.isEmpty()) {
                    h.raw("<tr><td class=\"empty\" colspan=\"5\">").text(usage.moreBuckets()
                            ? "None among the emptiest buckets shown." : "No bucket: every partition is full.")
                            .raw("</td></tr>");
                }
                for (RateBucket bucket : buckets) {
                    Integer burst = bucket.burst();
                    h.raw("<tr").attr("data-partition", bucket.partition()).raw("><td class=\"key\">")
                            .text(bucket.partition().isEmpty() ? "(none)" : bucket.partition())
                            .raw("</td><td class=\"num tokens\">").text(String.format(java.util.Locale.ROOT, "%.1f",
                                    bucket.tokens())).raw("</td><td class=\"num\">").text(burst == null ? "?" : burst)
                            .raw("</td><td class=\"use\">");
                    if (burst != null) {
                        meter(h, bucket.tokens(), burst, Math.round(Math.max(0, bucket.tokens()) * 100 / burst) + " %");
                    }
                    h.raw("</td><td class=\"time\">").when(bucket.refilledAt()).raw("</td></tr>");
                }
                h.raw("</tbody></table></div>");
            });
            if (usage.moreBuckets()) {
                h.raw("<p class=\"hint\">").text("Only the " + usage.buckets().size() + " emptiest buckets are shown.")
                        .raw("</p>");
            }
            if (!usage.bucketsInLimiter()) {
                h.raw("<p class=\"hint\">Tokens refilled to now at the limit's rate, as the next pick sees them; a"
                        + " partition with no bucket is full.</p>");
            }
            h.raw("</section>");
        });
    }

    /** A meter of {@code value} out of {@code max} with its percentage beside it. */
    private static void meter(Html h, double value, double max, String percent) {
        h.raw("<meter min=\"0\"").attr("max", max).attr("value", Math.max(0, value)).raw(">").text(percent)
                .raw("</meter> <span class=\"pct\">").text(percent).raw("</span>");
    }

    static String engines(View view, List<LiveEngine> engines, List<UnservedWork> unserved) {
        return layout(view, "engines", "Engines", h -> {
            h.raw("<section><h2>Live engines</h2><div class=\"scroll\"><table id=\"engines\"><thead><tr><th>Name</th>")
                    .raw("<th>Origin</th><th>Queues</th><th>Types</th><th>Started</th><th>Seen</th></tr></thead><tbody>");
            if (engines.isEmpty()) {
                h.raw("<tr><td class=\"empty\" colspan=\"6\">No engine is running on this schema.</td></tr>");
            }
            for (LiveEngine e : engines) {
                h.raw("<tr").attr("data-origin", e.origin()).raw("><td>").text(e.name()).raw("</td><td class=\"key\">")
                        .text(e.origin()).raw("</td><td>").text(String.join(", ", e.queues())).raw("</td><td>");
                StringBuilder types = new StringBuilder();
                new java.util.TreeMap<>(e.types()).forEach((type, version) -> types.append(types.length() == 0 ? "" : ", ")
                        .append(type).append(" v").append(e.lowestVersion(type) > 1 && e.lowestVersion(type) < version
                                ? e.lowestVersion(type) + "-" + version : String.valueOf(version)));
                h.text(types).raw("</td><td class=\"time\">").when(e.startedAt()).raw("</td><td class=\"time\">")
                        .when(e.seenAt()).raw("</td></tr>");
            }
            h.raw("</tbody></table></div></section><section><h2>Unserved work</h2>");
            if (unserved.isEmpty()) {
                h.raw("<p>Every due instance has an engine that can run it.</p>");
            } else {
                h.raw("<div class=\"scroll\"><table id=\"unserved\"><thead><tr><th>Queue</th><th>Type</th><th>Why</th>")
                        .raw("<th class=\"num\">Instances</th><th>Due since</th></tr></thead><tbody>");
                for (UnservedWork w : unserved) {
                    h.raw("<tr><td>").text(w.queue()).raw("</td><td>")
                            .text(w.type() == null ? "(all)" : w.type() + " v" + w.typeVersion()).raw("</td><td>")
                            .text(switch (w.reason()) {
                                case NO_ENGINE_SERVES_QUEUE -> "no engine serves the queue";
                                case NO_ENGINE_KNOWS_TYPE -> "no engine knows the type";
                                case NO_MIGRATION_PATH -> "no migration path to the engines' version";
                            }).raw("</td><td class=\"num\">").text(w.instances())
                            .raw("</td><td class=\"time\">").when(w.oldestEligibleAt()).raw("</td></tr>");
                }
                h.raw("</tbody></table></div>");
            }
            h.raw("</section>");
        });
    }
}
