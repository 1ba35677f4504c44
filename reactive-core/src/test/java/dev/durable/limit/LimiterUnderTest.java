package dev.durable.limit;

import java.util.List;

/**
 * A limiter as the contract suite ({@link LimiterContract}) drives it: how an engine makes it, and
 * how to read what it keeps, so a case can check a limit's state the same way on every limiter.
 */
public interface LimiterUnderTest {

    /** What an engine makes the limiter with. */
    LimiterFactory factory();

    /**
     * True when the limiter keeps its counters in the database (PostgreSQL): the pick admits in one
     * statement (no slot is ever held, for a moment, by a row another limit then refuses), it knows which
     * limit held a row back, and {@code admin().limits()} reads its buckets and windows. A limiter
     * elsewhere (Redis) counts a refused row with a gate as held by its gate, and admin leaves its
     * buckets and windows to it.
     */
    boolean inDatabase();

    /** The gate slots held now on {@code gate}'s counters of {@code key}, over its shards. */
    long heldSlots(String gate, String key);

    /** The tokens stored in the bucket of {@code rateLimit}, partition {@code partition} ("" for none); NaN when there is none. */
    double tokens(String rateLimit, String partition);

    /** What the sliding window {@code window} counted on {@code partition}; 0 when it holds nothing. */
    long windowCount(String window, String partition);

    /** Of {@code keys}, those of gate {@code gate} that have a permit stored, live or expired, in key order. */
    List<String> permitKeys(String gate, List<String> keys);
}
