package dev.durable.dashboard.internal;

import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What every page needs to know about the request it answers: where the dashboard is mounted, the CSRF
 * token its forms carry, whether actions are shown, and a notice to show at the top (fixed texts only).
 */
public record View(String base, String title, String csrfToken, Map<String, String> formFields, boolean actions,
        @Nullable String notice) {

    /** A path under the dashboard: {@code path("/instances")}. */
    public String path(String path) {
        return base + path;
    }

    public String home() {
        return base.isEmpty() ? "/" : base + "/";
    }
}
