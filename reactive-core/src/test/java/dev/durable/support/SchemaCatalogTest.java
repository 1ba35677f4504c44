package dev.durable.support;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** A function body compares as its tokens: comments and whitespace do not count, anything else does. */
class SchemaCatalogTest {

    private static final String BODY = """
            DECLARE
                t timestamptz := now();
            BEGIN
                -- The key's lock first.
                PERFORM pg_advisory_xact_lock(1262836055, hashtext(k));
                UPDATE durable_instances SET key_waiting = (f->>'id')::bigint <> 0, note = 'it''s -- not a comment'
                 WHERE id = $1 AND label = $q$a /* kept */ b$q$;
                RETURN;
            END
            """;

    @Test
    void commentsAndWhitespaceDoNotCount() {
        String reformatted = "DECLARE t timestamptz:=now(); /* set\n once */ BEGIN PERFORM pg_advisory_xact_lock("
                + "1262836055,hashtext( k )); -- locked\n UPDATE durable_instances SET key_waiting=(f ->> 'id')::bigint"
                + " <> 0,note='it''s -- not a comment' WHERE id=$1 AND label=$q$a /* kept */ b$q$ ; RETURN ; END";
        assertThat(SchemaCatalog.tokens(reformatted)).isEqualTo(SchemaCatalog.tokens(BODY));
        assertThat(SchemaCatalog.tokens(BODY)).contains("'it''s -- not a comment'", "$q$a /* kept */ b$q$", "->>",
                "::", ":=", "<>", "$1");
    }

    @Test
    void anythingElseCounts() {
        assertThat(SchemaCatalog.tokens(BODY.replace("1262836055", "1262836056")))
                .isNotEqualTo(SchemaCatalog.tokens(BODY));
        assertThat(SchemaCatalog.tokens(BODY.replace("'it''s -- not a comment'", "'it''s --  not a comment'")))
                .isNotEqualTo(SchemaCatalog.tokens(BODY));
        assertThat(SchemaCatalog.tokens(BODY.replace("a /* kept */ b", "a b"))).isNotEqualTo(SchemaCatalog.tokens(BODY));
        assertThat(SchemaCatalog.tokens(BODY.replace("<>", "<"))).isNotEqualTo(SchemaCatalog.tokens(BODY));
        assertThat(SchemaCatalog.tokens(BODY.replace("RETURN;", "RETURN NULL;")))
                .isNotEqualTo(SchemaCatalog.tokens(BODY));
    }
}
