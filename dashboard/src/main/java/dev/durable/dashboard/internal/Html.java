package dev.durable.dashboard.internal;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import org.jspecify.annotations.Nullable;

/**
 * The one way a page is written: {@link #raw} takes the page's own markup (string literals of this
 * module only), and every other value goes through {@link #text} or {@link #attr}, which escape it. Args,
 * state, results, errors, names and keys are data from the database and are never passed to {@code raw}.
 */
public final class Html {

    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss'Z'")
            .withZone(ZoneOffset.UTC);

    private final StringBuilder out = new StringBuilder(16_384);

    /** Escapes for HTML text and double- or single-quoted attribute values. */
    public static String escape(@Nullable Object value) {
        if (value == null) {
            return "";
        }
        String text = value.toString();
        StringBuilder escaped = null;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            String replacement = switch (c) {
                case '&' -> "&amp;";
                case '<' -> "&lt;";
                case '>' -> "&gt;";
                case '"' -> "&quot;";
                case '\'' -> "&#39;";
                case '`' -> "&#96;";
                default -> null;
            };
            if (replacement != null) {
                if (escaped == null) {
                    escaped = new StringBuilder(text.length() + 16).append(text, 0, i);
                }
                escaped.append(replacement);
            } else if (escaped != null) {
                escaped.append(c);
            }
        }
        return escaped == null ? text : escaped.toString();
    }

    /** One component of a URL's query or path, encoded (then escaped where it is written). */
    public static String url(@Nullable Object value) {
        return value == null ? "" : URLEncoder.encode(value.toString(), StandardCharsets.UTF_8).replace("+", "%20");
    }

    public static String time(@Nullable Instant instant) {
        return instant == null ? "" : TIME.format(instant);
    }

    /** The page's own markup: literals only. */
    public Html raw(String markup) {
        out.append(markup);
        return this;
    }

    /** A value as text, escaped. */
    public Html text(@Nullable Object value) {
        out.append(escape(value));
        return this;
    }

    /** {@code  name="value"}, the value escaped. */
    public Html attr(String name, @Nullable Object value) {
        out.append(' ').append(name).append("=\"").append(escape(value)).append('"');
        return this;
    }

    /** A time element in UTC, its ISO form in {@code datetime}. */
    public Html when(@Nullable Instant instant) {
        if (instant == null) {
            return this;
        }
        return raw("<time").attr("datetime", instant.toString()).raw(">").text(time(instant)).raw("</time>");
    }

    /** {@code <a href="...">text</a>}, both escaped. */
    public Html link(String href, @Nullable Object text) {
        return raw("<a").attr("href", href).raw(">").text(text).raw("</a>");
    }

    @Override
    public String toString() {
        return out.toString();
    }
}
