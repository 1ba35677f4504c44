package dev.durable.support;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * Generators for {@link ForAll}, shaped like the defaults of the property-testing libraries we used
 * before: numbers biased towards zero, sizes mostly small, and edge cases (bounds, zero, empty and
 * single-character strings, minimum-length runs) mixed in.
 *
 * <ul>
 *   <li>Integral numbers: the range is cut into bands that widen away from zero (or from the bound
 *       nearest to it): 0..20, ..1e3, ..1e5, ..1e7, and so on; a band is chosen uniformly, then a
 *       value in it. Edge cases: the bounds and their neighbours, -2..2.
 *   <li>Sizes of strings, lists and maps: uniform up to {@code min + 32}; past that, 11% of draws
 *       go above it, 1% to the maximum itself.
 *   <li>Edge cases come in every edge-case try of {@link ForAll} and in 1 of
 *       {@value Draw#EDGE_CASE_ONE_IN} values otherwise.
 * </ul>
 */
public final class Gens {

    /** Band limits away from zero; the last band runs to the range's end. */
    private static final long[] BANDS = {20L, 1_000L, 100_000L, 10_000_000L, 1_000_000_000L, 1_000_000_000_000L,
            1_000_000_000_000_000L};
    /** Sizes above {@code min + SMALL_SIZES} are the rare ones. */
    private static final int SMALL_SIZES = 32;

    private Gens() {
    }

    public static <T> Gen<T> just(T value) {
        return draw -> value;
    }

    /** One of the values, each equally likely; the first and the last are the edge cases. */
    @SafeVarargs
    public static <T> Gen<T> of(T... values) {
        List<T> all = List.of(values);
        List<T> edges = List.of(values[0], values[values.length - 1]);
        return draw -> draw.edgeCase() ? draw.pick(edges) : draw.pick(all);
    }

    public static <T extends Enum<T>> Gen<T> enums(Class<T> type) {
        return of(type.getEnumConstants());
    }

    public static Gen<Boolean> booleans() {
        return of(false, true);
    }

    /** One of the generators, each equally likely. */
    @SafeVarargs
    public static <T> Gen<T> oneOf(Gen<? extends T>... generators) {
        List<Gen<? extends T>> all = List.of(generators);
        return draw -> draw.pick(all).next(draw);
    }

    /** A generator and its weight, for {@link #frequency}. */
    public record Weighted<T>(int weight, Gen<? extends T> generator) {
    }

    public static <T> Weighted<T> weighted(int weight, Gen<? extends T> generator) {
        return new Weighted<>(weight, generator);
    }

    /** One of the generators, chosen in proportion to its weight. */
    @SafeVarargs
    public static <T> Gen<T> frequency(Weighted<T>... choices) {
        int total = Arrays.stream(choices).mapToInt(Weighted::weight).sum();
        return draw -> {
            int ticket = draw.random().nextInt(total);
            for (Weighted<T> choice : choices) {
                ticket -= choice.weight();
                if (ticket < 0) {
                    return choice.generator().next(draw);
                }
            }
            throw new IllegalStateException("weights changed");
        };
    }

    public static Gen<Integer> ints() {
        return ints(Integer.MIN_VALUE, Integer.MAX_VALUE);
    }

    public static Gen<Integer> ints(int min, int max) {
        return longs(min, max).map(Long::intValue);
    }

    public static Gen<Long> longs() {
        return longs(Long.MIN_VALUE, Long.MAX_VALUE);
    }

    public static Gen<Long> longs(long min, long max) {
        long target = min > 0 ? min : Math.min(max, 0);
        Set<Long> edges = new LinkedHashSet<>();
        for (long edge : new long[] {target, -2, -1, 0, 2, 1, min, min + 1, max, max - 1}) {
            if (edge >= min && edge <= max) {
                edges.add(edge);
            }
        }
        List<Long> edgeCases = List.copyOf(edges);
        List<long[]> bands = bands(min, max, target);
        return draw -> {
            if (draw.edgeCase()) {
                return draw.pick(edgeCases);
            }
            long[] band = draw.pick(bands);
            return uniform(draw.random(), band[0], band[1]);
        };
    }

    /**
     * Doubles over the whole finite range with two decimals where a double has them, biased
     * towards zero like the integral numbers; edge cases 0, ±0.01, ±1 and ±{@link Double#MAX_VALUE}.
     */
    public static Gen<Double> doubles() {
        List<Double> edgeCases = List.of(0.0, 0.01, -0.01, 1.0, -1.0, Double.MAX_VALUE, -Double.MAX_VALUE);
        double[] limits = {0, 20, 1e3, 1e5, 1e7, 1e9, 1e12, 1e15, 1e50, 1e150, Double.MAX_VALUE};
        return draw -> {
            if (draw.edgeCase()) {
                return draw.pick(edgeCases);
            }
            Random random = draw.random();
            int band = random.nextInt(limits.length - 1);
            double low = limits[band];
            double high = limits[band + 1];
            double magnitude = high <= 1e15 ? low + random.nextDouble() * (high - low)
                    : Math.exp(Math.log(low) + random.nextDouble() * (Math.log(high) - Math.log(low)));
            magnitude = Math.min(magnitude, Double.MAX_VALUE);
            if (magnitude < 1e13) {
                magnitude = Math.round(magnitude * 100) / 100.0;
            }
            return random.nextBoolean() ? magnitude : -magnitude;
        };
    }

    /**
     * Strings of {@code chars}, {@code minLength} to {@code maxLength} long. Edge cases: the empty
     * string, one edge character alone, or a run of one edge character at the minimum length.
     */
    public static Gen<String> strings(Chars chars, int minLength, int maxLength) {
        return draw -> {
            Random random = draw.random();
            if (draw.edgeCase()) {
                List<String> edges = new ArrayList<>();
                if (minLength == 0) {
                    edges.add("");
                }
                for (char c : chars.edgeCases()) {
                    if (minLength <= 1 && maxLength >= 1) {
                        edges.add(String.valueOf(c));
                    }
                    if (minLength > 1) {
                        edges.add(String.valueOf(c).repeat(minLength));
                    }
                }
                return draw.pick(edges);
            }
            int length = size(random, minLength, maxLength);
            StringBuilder text = new StringBuilder(length);
            for (int i = 0; i < length; i++) {
                text.append(chars.next(random));
            }
            return text.toString();
        };
    }

    /** Lists of {@code minSize} to {@code maxSize} elements; in edge-case tries the smallest ones. */
    public static <T> Gen<List<T>> lists(Gen<T> elements, int minSize, int maxSize) {
        return draw -> {
            int size = draw.isEdgeCaseTry() ? Math.min(maxSize, Math.max(minSize, draw.random().nextInt(2)))
                    : size(draw.random(), minSize, maxSize);
            List<T> list = new ArrayList<>(size);
            for (int i = 0; i < size; i++) {
                list.add(elements.next(draw));
            }
            return list;
        };
    }

    /** Maps of up to {@code maxSize} entries (fewer when keys repeat); in edge-case tries 0 or 1. */
    public static <K, V> Gen<Map<K, V>> maps(Gen<K> keys, Gen<V> values, int maxSize) {
        return draw -> {
            int size = draw.isEdgeCaseTry() ? Math.min(maxSize, draw.random().nextInt(2))
                    : size(draw.random(), 0, maxSize);
            Map<K, V> map = new LinkedHashMap<>();
            for (int i = 0; i < size; i++) {
                map.put(keys.next(draw), values.next(draw));
            }
            return map;
        };
    }

    // ---- distributions ------------------------------------------------------------------------

    /** Mostly small: uniform up to {@code min + 32}; else 11% above it, 1% exactly the maximum. */
    static int size(Random random, int min, int max) {
        int cutoff = (int) Math.min((long) min + SMALL_SIZES, max);
        if (cutoff >= max) {
            return (int) uniform(random, min, max);
        }
        if (random.nextDouble() < 0.01) {
            return max;
        }
        if (random.nextDouble() < 0.11) {
            return (int) uniform(random, cutoff + 1L, max);
        }
        return (int) uniform(random, min, cutoff);
    }

    /**
     * The bands of [min, max] that widen away from {@code target}, on each side of it. Distances
     * compare unsigned: {@code max - target} of a range as wide as the longs overflows signed.
     */
    private static List<long[]> bands(long min, long max, long target) {
        List<long[]> bands = new ArrayList<>();
        long low = target;
        for (int i = 0; ; i++) {
            boolean last = i == BANDS.length || Long.compareUnsigned(max - target, BANDS[i]) <= 0;
            long high = last ? max : target + BANDS[i];
            bands.add(new long[] {low, high});
            if (last) {
                break;
            }
            low = high + 1;
        }
        if (target > min) {
            long high = target - 1;
            for (int i = 0; ; i++) {
                boolean last = i == BANDS.length || Long.compareUnsigned(target - min, BANDS[i]) <= 0;
                long bandLow = last ? min : target - BANDS[i];
                bands.add(new long[] {bandLow, high});
                if (last) {
                    break;
                }
                high = bandLow - 1;
            }
        }
        return bands;
    }

    /** Uniform over [low, high], both included, for any longs. */
    static long uniform(Random random, long low, long high) {
        if (low == high) {
            return low;
        }
        if (high != Long.MAX_VALUE) {
            return random.nextLong(low, high + 1);
        }
        if (low != Long.MIN_VALUE) {
            return random.nextLong(low - 1, high) + 1;
        }
        return random.nextLong();
    }
}
