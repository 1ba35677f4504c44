package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class SqlTextTest {

    @Test
    void whitespaceRunsBecomeOneSpaceAndCommentsGo() {
        assertThat(SqlText.compact("""
                  WITH moved AS (   -- the settle
                      DELETE FROM t /* a /* nested */ note */ WHERE id = $1
                  )
                SELECT *
                  FROM moved\t-- trailing
                """)).isEqualTo("WITH moved AS ( DELETE FROM t WHERE id = $1 ) SELECT * FROM moved");
    }

    @Test
    void aCommentBetweenTokensStillSeparatesThem() {
        assertThat(SqlText.compact("SELECT 1/*x*/AS one--y\nFROM t")).isEqualTo("SELECT 1 AS one FROM t");
    }

    @Test
    void literalsAndQuotedNamesAreKeptAsWritten() {
        assertThat(SqlText.compact("SELECT  'a  --  b', 'it''s  /* no */', \"Odd  Name\" ,  x"))
                .isEqualTo("SELECT 'a  --  b', 'it''s  /* no */', \"Odd  Name\" , x");
        assertThat(SqlText.compact("SELECT E'a\\'  -- b'  ,  c")).isEqualTo("SELECT E'a\\'  -- b' , c");
        assertThat(SqlText.compact("SELECT $$ a  -- b $$,  $fn$ x $$ y $fn$ ,  $1::bigint,  $12"))
                .isEqualTo("SELECT $$ a  -- b $$, $fn$ x $$ y $fn$ , $1::bigint, $12");
    }

    @Test
    void aBackslashOutsideAnEscapeStringIsAnOrdinaryCharacter() {
        assertThat(SqlText.compact("SELECT 'a\\'  ,  name'x'")).isEqualTo("SELECT 'a\\' , name'x'");
    }

    @Test
    void anUnterminatedLiteralIsAnError() {
        assertThatThrownBy(() -> SqlText.compact("SELECT 'open")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> SqlText.compact("SELECT $x$ open")).isInstanceOf(IllegalArgumentException.class);
    }
}
