package dev.durable.support;

import java.util.function.Function;

/**
 * A generator of test values for {@link ForAll}: seeded, so a failing try can be replayed. Its
 * factories are in {@link Gens}.
 */
@FunctionalInterface
public interface Gen<T> {

    T next(Draw draw);

    default <R> Gen<R> map(Function<? super T, ? extends R> mapper) {
        return draw -> mapper.apply(next(draw));
    }

    /** {@code null} with the given probability, else a value of this generator. */
    default Gen<T> injectNull(double probability) {
        return draw -> draw.random().nextDouble() < probability ? null : next(draw);
    }
}
