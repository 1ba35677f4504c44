package dev.durable.spring;

import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * The {@code durable.dashboard.*} properties: the operator's dashboard (add {@code durable-dashboard} to the
 * application's dependencies), mounted when {@code enabled}.
 *
 * <pre>
 * durable.dashboard.enabled=true
 * durable.dashboard.path=/durable
 * durable.dashboard.action-authority=ROLE_DURABLE_ADMIN
 * </pre>
 *
 * @param enabled whether the dashboard is mounted (off by default)
 * @param path where it is mounted
 * @param readOnly hides and refuses every action
 * @param title the name in its header
 * @param csrfSecret the key its form tokens are signed with (at least 16 characters, the same on every
 *     replica); unset, a random secret the engines keep in the database, which every replica reads alike
 * @param readAuthority with Spring Security, the authority a user needs to read the pages; unset, any
 *     authenticated user may
 * @param actionAuthority with Spring Security, the authority a user needs for actions (retry, cancel,
 *     delete, signal, bulk)
 */
@ConfigurationProperties("durable.dashboard")
public record DurableDashboardProperties(
        @DefaultValue("false") boolean enabled,
        @DefaultValue("/durable") String path,
        @DefaultValue("false") boolean readOnly,
        @DefaultValue("Durable") String title,
        @Nullable String csrfSecret,
        @Nullable String readAuthority,
        @DefaultValue("ROLE_DURABLE_ADMIN") String actionAuthority) {

    @Override
    public String toString() {
        return "DurableDashboardProperties[enabled=" + enabled + ", path=" + path + ", readOnly=" + readOnly
                + ", title=" + title + ", csrfSecret=" + (csrfSecret == null ? null : "******")
                + ", readAuthority=" + readAuthority + ", actionAuthority=" + actionAuthority + "]";
    }
}
