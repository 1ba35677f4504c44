package dev.durable.support;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.function.IntPredicate;

/**
 * The characters a string generator draws from, each equally likely, with the edge cases of the
 * set: its first and last character, and the blank when the set has it.
 */
public final class Chars {

    private final List<char[]> ranges;
    private final int size;
    private final IntPredicate allowed;
    private final List<Character> edgeCases;

    private Chars(List<char[]> ranges, IntPredicate allowed) {
        this.ranges = List.copyOf(ranges);
        this.size = ranges.stream().mapToInt(range -> range[1] - range[0] + 1).sum();
        this.allowed = allowed;
        Set<Character> edges = new LinkedHashSet<>();
        for (char[] range : ranges) {
            edges.add(range[0]);
            edges.add(range[1]);
            if (range[0] <= ' ' && ' ' <= range[1]) {
                edges.add(' ');
            }
        }
        edges.removeIf(c -> !allowed.test(c));
        this.edgeCases = List.copyOf(edges);
    }

    /** Every UTF-16 unit, {@code \u0000} to {@code \uFFFF}: NUL, controls, lone surrogates. */
    public static Chars all() {
        return new Chars(List.of(range('\u0000', '\uFFFF')), c -> true);
    }

    /**
     * The characters a user types: every UTF-16 unit but surrogates, noncharacters and the private
     * use area (NUL and controls stay).
     */
    public static Chars valid() {
        return new Chars(List.of(range('\u0000', '\uFFFF')),
                c -> !(c >= 0xd800 && c <= 0xdfff) && !(c >= 0xfdd0 && c <= 0xfdef) && c != 0xfffe && c != 0xffff
                        && !(c >= 0xe000 && c <= 0xf8ff));
    }

    /** CJK unified ideographs, {@code \u4E00} to {@code \u9FFF}: three bytes each in UTF-8. */
    public static Chars cjk() {
        return new Chars(List.of(range('\u4e00', '\u9fff')), c -> true);
    }

    /** {@code A-Z} and {@code a-z}. */
    public static Chars alpha() {
        return new Chars(List.of(range('A', 'Z'), range('a', 'z')), c -> true);
    }

    /** {@code A-Z}, {@code a-z}, {@code 0-9} and the given characters. */
    public static Chars alphaNumeric(String more) {
        List<char[]> ranges = new ArrayList<>(List.of(range('A', 'Z'), range('a', 'z'), range('0', '9')));
        for (char c : more.toCharArray()) {
            ranges.add(range(c, c));
        }
        return new Chars(ranges, c -> true);
    }

    /** Exactly these UTF-16 units (a supplementary character gives its two surrogates, apart). */
    public static Chars of(String chars) {
        List<char[]> ranges = new ArrayList<>();
        for (char c : chars.toCharArray()) {
            ranges.add(range(c, c));
        }
        return new Chars(ranges, c -> true);
    }

    char next(Random random) {
        while (true) {
            int index = random.nextInt(size);
            for (char[] range : ranges) {
                int width = range[1] - range[0] + 1;
                if (index < width) {
                    char c = (char) (range[0] + index);
                    if (allowed.test(c)) {
                        return c;
                    }
                    break;
                }
                index -= width;
            }
        }
    }

    List<Character> edgeCases() {
        return edgeCases;
    }

    private static char[] range(char first, char last) {
        return new char[] {first, last};
    }
}
