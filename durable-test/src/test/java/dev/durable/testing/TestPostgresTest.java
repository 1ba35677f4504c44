package dev.durable.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class TestPostgresTest {

    @Test
    void acceptsTheUsualSpellingsOfAPostgresUrl() {
        assertThat(TestPostgres.toR2dbcUrl("postgresql://u:p@h:5432/db")).isEqualTo("r2dbc:postgresql://u:p@h:5432/db");
        assertThat(TestPostgres.toR2dbcUrl("postgres://u@h/db")).isEqualTo("r2dbc:postgresql://u@h/db");
        assertThat(TestPostgres.toR2dbcUrl("jdbc:postgresql://h/db")).isEqualTo("r2dbc:postgresql://h/db");
        assertThat(TestPostgres.toR2dbcUrl("r2dbc:postgresql://h/db")).isEqualTo("r2dbc:postgresql://h/db");
        assertThatThrownBy(() -> TestPostgres.toR2dbcUrl("mysql://h/db"))
                .hasMessageContaining(TestPostgres.URL_ENV);
    }

    @Test
    void anUnusableUrlIsRefusedWithoutItsPassword() {
        assertThatThrownBy(() -> TestPostgres.toR2dbcUrl("mysql://u:pA55wOrD@h/db"))
                .hasNoCause().message().doesNotContain("pA55wOrD");
        assertThatThrownBy(() -> TestPostgres.connectionFactory("r2dbc:nosuch://u:pA55@wOrD@h/db?sslPassword=pA55wOrD"))
                .isInstanceOf(IllegalArgumentException.class).hasNoCause()
                .message().contains(TestPostgres.URL_ENV).doesNotContain("pA55").doesNotContain("wOrD");
    }
}
