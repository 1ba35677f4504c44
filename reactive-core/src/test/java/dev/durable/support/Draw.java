package dev.durable.support;

import java.util.List;
import java.util.Random;

/**
 * The randomness of one try of a property: its source and whether this try is an edge-case try,
 * in which every generator yields one of its edge cases. Outside edge-case tries each generated
 * value is still an edge case 1 time in {@value #EDGE_CASE_ONE_IN}, so edge values also meet
 * ordinary ones.
 */
public final class Draw {

    /** How often a value outside an edge-case try is an edge case anyway. */
    public static final int EDGE_CASE_ONE_IN = 20;

    private final Random random;
    private final boolean edgeCaseTry;

    Draw(Random random, boolean edgeCaseTry) {
        this.random = random;
        this.edgeCaseTry = edgeCaseTry;
    }

    public Random random() {
        return random;
    }

    public boolean isEdgeCaseTry() {
        return edgeCaseTry;
    }

    /** Whether the value being generated now is one of its generator's edge cases. */
    boolean edgeCase() {
        return edgeCaseTry || random.nextInt(EDGE_CASE_ONE_IN) == 0;
    }

    <T> T pick(List<T> values) {
        return values.get(random.nextInt(values.size()));
    }
}
