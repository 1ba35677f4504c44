package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Layout.badge;
import static dev.durable.dashboard.internal.Layout.instancePath;
import static dev.durable.dashboard.internal.Layout.layout;
import static dev.durable.dashboard.internal.Layout.meter;

import dev.durable.Instance;
import dev.durable.LiveEngine;
import dev.durable.UnservedWork;
import dev.durable.admin.GateUsage;
import dev.durable.admin.LimitUsage;
import dev.durable.admin.RateBucket;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What the engines run with: the recurring jobs this engine schedules, the gates and rate limits with their
 * usage, and the live engines with the work none of them can run.
 */
public final class EnginePages {

    private EnginePages() {
    }

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
