package dev.durable.dashboard.internal;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.InstanceStatus;
import java.util.List;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * What every page shares: the frame (head, navigation, notice, heading) and the small pieces several pages
 * write (the CSRF fields of a form, a status badge, a definition row, a meter, an instance's path, a clipped
 * error, a duration, pretty JSON). Every dynamic value goes through {@link Html#text} or {@link Html#attr};
 * {@link Html#raw} gets the literals of this class and of the page classes only.
 */
public final class Layout {

    private static final ObjectMapper JSON = new ObjectMapper();
    static final List<InstanceStatus> STATUSES = List.of(InstanceStatus.values());

    private Layout() {
    }

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

    // ---- Widgets and value formatting -------------------------------------------------------------

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

    static void dt(Html h, String name, @Nullable Object value) {
        h.raw("<dt>").text(name).raw("</dt><dd>").text(value == null ? "–" : value).raw("</dd>");
    }

    static String pretty(String json) {
        try {
            return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(JSON.readTree(json));
        } catch (Exception notJson) {
            return json;
        }
    }

    /** A meter of {@code value} out of {@code max} with its percentage beside it. */
    static void meter(Html h, double value, double max, String percent) {
        h.raw("<meter min=\"0\"").attr("max", max).attr("value", Math.max(0, value)).raw(">").text(percent)
                .raw("</meter> <span class=\"pct\">").text(percent).raw("</span>");
    }
}
