package dev.durable.support;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The generators stay in their ranges, reach their edge cases, and replay from a seed. */
class GensTest {

    private static <T> List<T> sample(Gen<T> generator, int count, long seed) {
        Random random = new Random(seed);
        List<T> values = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            values.add(generator.next(new Draw(random, random.nextInt(ForAll.EDGE_CASE_TRY_ONE_IN) == 0)));
        }
        return values;
    }

    @Test
    void integralNumbersStayInRangeReachTheirEdgesAndLeanTowardsZero() {
        long[][] ranges = {{Long.MIN_VALUE, Long.MAX_VALUE}, {Integer.MIN_VALUE, Integer.MAX_VALUE}, {-3, 1000},
                {-5_000, 5_000}, {-Long.MAX_VALUE / 2, Long.MAX_VALUE}, {7, 9}, {-9, -7},
                {Long.MAX_VALUE - 1, Long.MAX_VALUE}, {Long.MIN_VALUE, Long.MIN_VALUE + 100}, {5, 5}};
        for (long[] range : ranges) {
            List<Long> values = sample(Gens.longs(range[0], range[1]), 5_000, 1);
            assertThat(values).as("%d..%d", range[0], range[1])
                    .allSatisfy(value -> assertThat(value).isBetween(range[0], range[1]));
            assertThat(values).contains(range[0], range[1]);
        }
        List<Integer> priorities = sample(Gens.ints(), 5_000, 2);
        assertThat(priorities).contains(Integer.MIN_VALUE, Integer.MIN_VALUE + 1, -2, -1, 0, 1, 2,
                Integer.MAX_VALUE - 1, Integer.MAX_VALUE);
        assertThat(priorities.stream().filter(p -> Math.abs((long) p) <= 20).count()).as("small ones")
                .isGreaterThan(priorities.size() / 20);
        assertThat(priorities.stream().filter(p -> Math.abs((long) p) > 1_000_000_000).count()).as("huge ones")
                .isGreaterThan(priorities.size() / 20);
    }

    @Test
    void stringsKeepTheirLengthsAndCharactersAndReachEmptyHugeNulAndLoneSurrogates() {
        List<String> any = sample(Gens.strings(Chars.all(), 0, 40), 5_000, 3);
        assertThat(any).allSatisfy(s -> assertThat(s.length()).isBetween(0, 40))
                .contains("", "\u0000", "\uffff", " ");
        assertThat(any).anySatisfy(s -> assertThat(s.chars().anyMatch(c -> Character.isSurrogate((char) c))).isTrue());
        List<String> keys = sample(Gens.strings(Chars.alpha(), 1000, 1100), 2_000, 4);
        assertThat(keys).allSatisfy(s -> assertThat(s).hasSizeBetween(1000, 1100).matches("[A-Za-z]+"));
        assertThat(keys).anySatisfy(s -> assertThat(s).hasSizeGreaterThan(1024))
                .anySatisfy(s -> assertThat(s).hasSize(1100)).contains("A".repeat(1000));
        List<String> odd = sample(Gens.strings(Chars.of(" \t\u0000,é𝄞"), 0, 5), 2_000, 5);
        assertThat(String.join("", odd).chars().distinct().count()).isEqualTo(7);
        List<String> valid = sample(Gens.strings(Chars.valid(), 0, 12), 2_000, 6);
        assertThat(String.join("", valid).chars().noneMatch(c -> Character.isSurrogate((char) c) || c == 0xffff))
                .isTrue();
    }

    @Test
    void sizesAreMostlySmallSometimesLargeAndTheSameSeedGivesTheSameValues() {
        List<List<Integer>> lists = sample(Gens.lists(Gens.ints(), 0, 50), 3_000, 7);
        assertThat(lists).allSatisfy(list -> assertThat(list).hasSizeBetween(0, 50))
                .anySatisfy(list -> assertThat(list).isEmpty()).anySatisfy(list -> assertThat(list).hasSize(50));
        assertThat(lists.stream().filter(list -> list.size() <= 32).count()).isGreaterThan(lists.size() * 8 / 10);
        Gen<Object> mixed = Gens.oneOf(Gens.doubles(), Gens.strings(Chars.all(), 0, 20),
                Gens.maps(Gens.ints(), Gens.ints(), 5));
        assertThat(sample(mixed, 500, 42)).isEqualTo(sample(mixed, 500, 42));
        Set<Object> nulls = new HashSet<>(sample(Gens.of("a", "b").injectNull(0.5), 200, 8));
        assertThat(nulls).containsExactlyInAnyOrder(null, "a", "b");
    }

    @Test
    void aFailureNamesTheTryTheValueAndTheSeed() {
        assertThatThrownBy(() -> ForAll.check("neverSeven", 1_000, Gens.ints(0, 9),
                        i -> assertThat(i).isNotEqualTo(7)))
                .isInstanceOf(AssertionError.class)
                .hasMessageContaining("neverSeven failed on try").hasMessageContaining("value: 7")
                .hasMessageContaining("-D" + ForAll.SEED_PROPERTY + "=" + ForAll.seed());
        assertThat(ForAll.printable("a\u0000\ud800" + "x".repeat(1000)))
                .startsWith("a\\u0000\\ud800x").endsWith("(1003 chars)");
    }
}
