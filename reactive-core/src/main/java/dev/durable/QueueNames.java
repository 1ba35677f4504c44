package dev.durable;

import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * The one rule for queue names, shared by {@link QueueOptions}, the definitions and every request:
 * 1 to 128 characters of letters, digits, {@code . _ : -}, starting with a letter or digit. A
 * request naming a queue no engine could ever be configured with is refused at insert, rather than
 * waiting for ever.
 */
public final class QueueNames {

    private static final Pattern QUEUE = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._:-]{0,127}");

    private QueueNames() {
    }

    /** True for a name an engine can run. */
    public static boolean isValid(@Nullable String name) {
        return name != null && QUEUE.matcher(name).matches();
    }

    /** What is wrong with {@code name} as a queue name, or null when nothing is. */
    static @Nullable String problem(String what, @Nullable String name) {
        if (isValid(name)) {
            return null;
        }
        return what + " must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or"
                + " digit, was " + (name == null ? "null" : "'" + name + "'");
    }

    /** The name, or an {@link IllegalArgumentException} naming the rule (options and definitions). */
    static String require(String what, @Nullable String name) {
        String problem = problem(what, name);
        if (problem != null) {
            throw new IllegalArgumentException(problem);
        }
        return name;
    }

    /** The name, or an {@link InvalidRequestException} naming the rule (requests). */
    public static String check(String what, @Nullable String name) {
        String problem = problem(what, name);
        if (problem != null) {
            throw new InvalidRequestException(problem);
        }
        return name;
    }
}
