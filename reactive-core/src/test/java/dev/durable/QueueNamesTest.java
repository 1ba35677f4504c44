package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.support.Chars;
import dev.durable.support.ForAll;
import dev.durable.support.Gens;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class QueueNamesTest {

    /** The rule as docs/reliability.md states it; the check itself is a loop (it runs on every request). */
    private static final Pattern RULE = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._:-]{0,127}");

    @Test
    void acceptsExactlyTheNamesOfTheRule() {
        assertThat(QueueNames.isValid("a")).isTrue();
        assertThat(QueueNames.isValid("0orders.eu-west:high_1")).isTrue();
        assertThat(QueueNames.isValid("q".repeat(128))).isTrue();
        assertThat(QueueNames.isValid("q".repeat(129))).isFalse();
        assertThat(QueueNames.isValid(null)).isFalse();
        assertThat(QueueNames.isValid("")).isFalse();
        assertThat(QueueNames.isValid("-a")).isFalse();
        assertThat(QueueNames.isValid(".a")).isFalse();
        assertThat(QueueNames.isValid("a b")).isFalse();
        assertThat(QueueNames.isValid("caf\u00e9")).isFalse();
        assertThat(QueueNames.isValid("a/b")).isFalse();
        for (char c = 0; c < 512; c++) {
            String one = String.valueOf(c);
            assertThat(QueueNames.isValid(one)).as("'%s'", one).isEqualTo(RULE.matcher(one).matches());
            String second = "a" + c;
            assertThat(QueueNames.isValid(second)).as("'%s'", second).isEqualTo(RULE.matcher(second).matches());
        }
        ForAll.check("the loop agrees with the rule's pattern", 2_000,
                Gens.oneOf(Gens.strings(Chars.all(), 0, 140), Gens.strings(Chars.of("aZ9._:- /\u00e9"), 0, 140),
                        Gens.strings(Chars.alphaNumeric("._:-"), 0, 140)),
                name -> assertThat(QueueNames.isValid(name)).isEqualTo(RULE.matcher(name).matches()));
    }
}
