package dev.durable.support;

import java.util.Random;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Property checks on plain JUnit 5: a property runs a fixed number of tries over generated values
 * and stops at the first that fails, naming the try, the value and the seed. Every run draws a new
 * seed; {@code -Ddurable.seed=<seed>} replays a run exactly (each property's values derive from the
 * seed and its name, so a replay needs no other property to run).
 *
 * <p>About one try in {@value #EDGE_CASE_TRY_ONE_IN} is an edge-case try, in which every generator
 * yields one of its edge cases (bounds, empty and minimum-length values), so they are met in
 * combination, not only one at a time.
 */
public final class ForAll {

    /** The system property that replays a run. */
    public static final String SEED_PROPERTY = "durable.seed";
    public static final int EDGE_CASE_TRY_ONE_IN = 6;
    private static final int MAX_DESCRIPTION = 600;

    private ForAll() {
    }

    public static <T> void check(String property, int tries, Gen<T> generator, Consumer<? super T> check) {
        check(property, tries, generator, check, String::valueOf);
    }

    /** As {@link #check(String, int, Gen, Consumer)}, describing a failing value with {@code describe}. */
    public static <T> void check(String property, int tries, Gen<T> generator, Consumer<? super T> check,
            Function<? super T, String> describe) {
        long seed = seed();
        Random random = new Random(seed ^ (0x9E3779B97F4A7C15L * property.hashCode()));
        for (int attempt = 1; attempt <= tries; attempt++) {
            Draw draw = new Draw(random, random.nextInt(EDGE_CASE_TRY_ONE_IN) == 0);
            T value = null;
            boolean generated = false;
            try {
                value = generator.next(draw);
                generated = true;
                check.accept(value);
            } catch (RuntimeException | AssertionError failure) {
                throw new AssertionError(String.format("%s failed on try %d of %d%s; seed %d, replay with -D%s=%d%n"
                                + "  value: %s", property, attempt, tries, draw.isEdgeCaseTry() ? " (edge cases)" : "",
                        seed, SEED_PROPERTY, seed, generated ? printable(describe.apply(value)) : "(not generated)"),
                        failure);
            }
        }
    }

    /** The seed of this run: the replayed one, or a new one. */
    public static long seed() {
        String replay = System.getProperty(SEED_PROPERTY);
        if (replay != null && !replay.isBlank()) {
            return Long.parseLong(replay.strip());
        }
        return Seeds.RUN;
    }

    /** Control characters, surrogates and the like escaped, and long values cut, for a readable report. */
    static String printable(String text) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < text.length() && out.length() < MAX_DESCRIPTION; i++) {
            char c = text.charAt(i);
            if (c >= 0x20 && c < 0x7f) {
                out.append(c);
            } else {
                out.append(String.format("\\u%04x", (int) c));
            }
        }
        return out.length() >= MAX_DESCRIPTION ? out + "... (" + text.length() + " chars)" : out.toString();
    }

    /** One seed per JVM, so the properties of one run share it and one -D replays them all. */
    private static final class Seeds {
        static final long RUN = ThreadLocalRandom.current().nextLong();
    }
}
