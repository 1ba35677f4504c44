package dev.durable;

import org.jspecify.annotations.Nullable;

/**
 * The one rule for queue names, shared by {@link QueueOptions}, the definitions and every request:
 * 1 to 128 characters of letters, digits, {@code . _ : -}, starting with a letter or digit. A
 * request naming a queue no engine could ever be configured with is refused at insert, rather than
 * waiting for ever.
 */
public final class QueueNames {

    private static final int MAX_LENGTH = 128;

    private QueueNames() {
    }

    /** True for a name an engine can run. */
    public static boolean isValid(@Nullable String name) {
        // Checked on every request: a loop, not a regex matcher per call.
        if (name == null || name.isEmpty() || name.length() > MAX_LENGTH || !letterOrDigit(name.charAt(0))) {
            return false;
        }
        for (int i = 1; i < name.length(); i++) {
            char c = name.charAt(i);
            if (!letterOrDigit(c) && c != '.' && c != '_' && c != ':' && c != '-') {
                return false;
            }
        }
        return true;
    }

    private static boolean letterOrDigit(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
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
