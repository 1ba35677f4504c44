package dev.durable.admin;

import dev.durable.InvalidRequestException;
import org.jspecify.annotations.Nullable;

/**
 * Which page of a listing: its order, its size and where it starts (the previous page's cursor, null
 * for the first). Pages are keyed on the instance id, which grows with each insert, so paging neither
 * repeats nor skips an instance while others are inserted or settle: newest first never meets the new
 * ones, oldest first reaches them at the end.
 */
public record PageRequest(Order order, int size, @Nullable String cursor) {

    /** The largest page. */
    public static final int MAX_SIZE = 1_000;

    /** The order of a listing. */
    public enum Order {
        /** Highest id (latest inserted) first. */
        NEWEST_FIRST,
        /** Lowest id first. */
        OLDEST_FIRST
    }

    public PageRequest {
        if (size < 1 || size > MAX_SIZE) {
            throw new InvalidRequestException("page size must be between 1 and " + MAX_SIZE + ", was " + size);
        }
        if (cursor != null) {
            parse(cursor);
        }
    }

    public static PageRequest newestFirst(int size) {
        return new PageRequest(Order.NEWEST_FIRST, size, null);
    }

    public static PageRequest oldestFirst(int size) {
        return new PageRequest(Order.OLDEST_FIRST, size, null);
    }

    /** The page that follows the one whose cursor this is, in the same order and size. */
    public PageRequest after(String cursor) {
        return new PageRequest(order, size, cursor);
    }

    /** The id the page starts after (exclusive), or the end of the order when there is no cursor. */
    public long startAfter() {
        if (cursor == null) {
            return order == Order.NEWEST_FIRST ? Long.MAX_VALUE : 0;
        }
        return parse(cursor);
    }

    private static long parse(String cursor) {
        if (cursor.length() > 1 && cursor.charAt(0) == 'i') {
            try {
                long id = Long.parseLong(cursor.substring(1));
                if (id >= 0) {
                    return id;
                }
            } catch (NumberFormatException notAnId) {
                // falls through to the typed error
            }
        }
        throw new InvalidRequestException("not a page cursor: '" + cursor + "' (pass a Page's next cursor)");
    }

    /** The cursor of a page that ended at the instance {@code lastId}. */
    public static String cursorFor(long lastId) {
        return "i" + lastId;
    }
}
