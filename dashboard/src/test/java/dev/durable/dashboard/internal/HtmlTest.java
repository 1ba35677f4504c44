package dev.durable.dashboard.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.admin.InstanceFilter;
import java.time.Instant;
import org.junit.jupiter.api.Test;
import org.springframework.util.LinkedMultiValueMap;
import org.springframework.util.MultiValueMap;

/** The escaping helper, the signed CSRF tokens and the filter form, without a database. */
class HtmlTest {

    @Test
    void escapesEverythingThatCouldEndTextOrAnAttribute() {
        assertThat(Html.escape("<script>alert('x')</script>")).isEqualTo("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
        assertThat(Html.escape("\"><img src=x onerror=`y`>&")).isEqualTo("&quot;&gt;&lt;img src=x onerror=&#96;y&#96;&gt;&amp;");
        assertThat(Html.escape("plain")).isSameAs("plain");
        assertThat(Html.escape(null)).isEmpty();
        String page = new Html().raw("<p").attr("title", "a\"b").raw(">").text("<b>").raw("</p>").toString();
        assertThat(page).isEqualTo("<p title=\"a&quot;b\">&lt;b&gt;</p>");
        assertThat(Html.url("a b&c=d/é")).isEqualTo("a%20b%26c%3Dd%2F%C3%A9");
    }

    @Test
    void csrfTokensAreSignedAndMustMatchTheirCookie() {
        Csrf csrf = new Csrf("0123456789abcdef0123456789abcdef".getBytes());
        String token = csrf.mint();
        assertThat(csrf.valid(token)).isTrue();
        assertThat(csrf.accepts(token, token)).isTrue();
        assertThat(csrf.accepts(token, csrf.mint())).isFalse();
        assertThat(csrf.accepts(null, token)).isFalse();
        assertThat(csrf.accepts(token, null)).isFalse();
        String forged = new Csrf("another secret of 32 bytes......".getBytes()).mint();
        assertThat(csrf.accepts(forged, forged)).isFalse();
        assertThat(csrf.valid(token.substring(0, token.length() - 2) + "AA")).isFalse();
        assertThat(csrf.valid("no-dot")).isFalse();
        assertThat(csrf.valid("!!!.???")).isFalse();
    }

    @Test
    void theFilterFormReadsEveryFieldAndWritesItBack() {
        MultiValueMap<String, String> params = new LinkedMultiValueMap<>();
        params.add("queue", "payments, mail");
        params.add("status", "failed");
        params.add("status", "cancelled");
        params.add("keyPrefix", "order:");
        params.add("contains", "{\"customer\": \"c1\"}");
        params.add("error", "timeout");
        params.add("insertedFrom", "2026-12-03T04:00");
        params.add("updatedTo", "2026-12-03T05:00:00Z");
        params.add("parent", "42");
        params.add("version", "3");
        params.add("type", "  ");
        params.add("unknown", "ignored");
        FilterForm form = FilterForm.of(params);
        InstanceFilter filter = form.filter();
        assertThat(filter.queues()).containsExactly("payments", "mail");
        assertThat(filter.statuses()).containsExactlyInAnyOrder(InstanceStatus.FAILED, InstanceStatus.CANCELLED);
        assertThat(filter.types()).isEmpty();
        assertThat(filter.correlationKeyPrefix()).isEqualTo("order:");
        assertThat(filter.stateContains()).isEqualTo("{\"customer\": \"c1\"}");
        assertThat(filter.insertedFrom()).isEqualTo(Instant.parse("2026-12-03T04:00:00Z"));
        assertThat(filter.updatedTo()).isEqualTo(Instant.parse("2026-12-03T05:00:00Z"));
        assertThat(filter.parentId()).isEqualTo(42L);
        assertThat(filter.typeVersionFrom()).isEqualTo(3);
        assertThat(filter.typeVersionTo()).isEqualTo(3);
        assertThat(form.query()).contains("queue=payments&queue=mail").contains("status=failed&status=cancelled")
                .contains("contains=%7B%22customer%22%3A%20%22c1%22%7D").doesNotContain("unknown");
        assertThat(FilterForm.of(new LinkedMultiValueMap<>()).isEmpty()).isTrue();
    }

    @Test
    void aFieldThatDoesNotParseIsATypedErrorNamingIt() {
        for (String[] bad : new String[][] {{"status", "sleeping"}, {"insertedFrom", "yesterday"}, {"parent", "x"}, {"version", "v2"},
                {"contains", "{not json"}}) {
            MultiValueMap<String, String> params = new LinkedMultiValueMap<>();
            params.add(bad[0], bad[1]);
            assertThatThrownBy(() -> FilterForm.of(params).filter()).as(bad[0])
                    .isInstanceOf(InvalidRequestException.class);
        }
    }
}
