package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Layout.badge;
import static dev.durable.dashboard.internal.Layout.clip;
import static dev.durable.dashboard.internal.Layout.csrf;
import static dev.durable.dashboard.internal.Layout.dt;
import static dev.durable.dashboard.internal.Layout.duration;
import static dev.durable.dashboard.internal.Layout.instancePath;
import static dev.durable.dashboard.internal.Layout.layout;
import static dev.durable.dashboard.internal.Layout.pretty;

import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.admin.Attempt;
import dev.durable.admin.InboxSignal;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.StepInput;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One instance: its summary, actions, attempts, the state each step started with (replay, fork), args and
 * result, its children as a two-level tree, and its inbox.
 */
public final class InstanceDetailPage {

    private InstanceDetailPage() {
    }

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
}
