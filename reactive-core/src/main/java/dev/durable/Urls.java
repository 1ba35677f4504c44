package dev.durable;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Connection URLs made safe to print: the one place that masks the secrets of an R2DBC, JDBC,
 * PostgreSQL or Redis URL for {@code toString}, logs and exception messages.
 *
 * <p>It masks by parsing the authority, not by pattern matching: the user info runs from {@code //}
 * to the last {@code @} before the host, because a host cannot hold {@code @} while a sloppy,
 * unencoded password can hold {@code @}, {@code /}, {@code :}, {@code ?} or {@code #}. A URL that
 * reads more than one way (an {@code @} that could end the user info or sit in a path) has masked
 * every character that is secret in any reading that parses; only a {@code ?} that starts a query
 * which parses is taken as the query's, not as part of a password. Masked are the password of the
 * user info (for Redis, whose {@code redis://secret@host} form has no user, the whole user info)
 * and the value of each query parameter whose name holds {@code password}, {@code passwd},
 * {@code secret}, {@code token} or {@code credential}, or is {@code pass} or {@code pwd}. Input that
 * parses no way at all has its whole authority masked. Neither method throws.
 */
public final class Urls {

    private static final String MASK = "****";
    /** Past this many {@code @}s a string is not a URL worth reading in every way. */
    private static final int MAX_AT_SIGNS = 32;

    private Urls() {
    }

    /**
     * {@code url} with its secrets replaced by {@code ****}; everything else (scheme, user name,
     * host, port, path, other query parameters) kept, so the result still says where it points.
     */
    public static String masked(@Nullable String url) {
        if (url == null) {
            return "null";
        }
        try {
            return render(url, secretChars(url));
        } catch (RuntimeException unexpected) {
            return MASK;
        }
    }

    /**
     * {@code text} (a driver's error message, say) with every quote of {@code url} masked, and each
     * of the URL's secrets masked wherever else it appears in the text, as written or decoded.
     */
    public static String maskedIn(@Nullable String text, @Nullable String url) {
        if (text == null) {
            return "null";
        }
        if (url == null || url.isEmpty()) {
            return text;
        }
        try {
            String result = text.replace(url, masked(url));
            for (String secret : secretsOf(url)) {
                result = result.replace(secret, MASK);
            }
            return result;
        } catch (RuntimeException unexpected) {
            return MASK;
        }
    }

    // ---- reading ------------------------------------------------------------------------------

    /** Marks the secret characters of {@code url}: the union over its readings that parse. */
    private static boolean[] secretChars(String url) {
        boolean[] secret = new boolean[url.length()];
        int schemeEnd = schemesEnd(url);
        boolean hasAuthority = url.startsWith("//", schemeEnd);
        int start = hasAuthority ? schemeEnd + 2 : 0;
        boolean redis = url.substring(0, schemeEnd).toLowerCase(Locale.ROOT).contains("redis");

        // Reading 1: no user info; any '@' sits in the path or in a query value.
        boolean[] reading = new boolean[url.length()];
        boolean withoutUser = readRest(url, start, hasAuthority, reading);
        boolean anyReading = withoutUser;
        if (withoutUser) {
            or(secret, reading);
        }
        // Readings 2..n: the user info ends at one of the '@'s.
        int atSigns = 0;
        for (int at = url.indexOf('@', start); at >= 0; at = url.indexOf('@', at + 1)) {
            if (++atSigns > MAX_AT_SIGNS) {
                anyReading = false;
                break;
            }
            String userInfo = url.substring(start, at);
            if (withoutUser && userInfo.indexOf('?') >= 0) {
                continue; // the '?' already starts a query that parses: not a password's
            }
            reading = new boolean[url.length()];
            if (!readRest(url, at + 1, true, reading)) {
                continue;
            }
            int colon = userInfo.indexOf(':');
            String user = colon < 0 ? userInfo : userInfo.substring(0, colon);
            boolean noPassword = colon < 0 || colon == userInfo.length() - 1;
            if (!isLikelyUser(user) || (redis && noPassword)) {
                mark(reading, start, at); // Redis's redis://secret@host form has no user
            } else if (colon >= 0) {
                mark(reading, start + colon + 1, at);
            }
            or(secret, reading);
            anyReading = true;
        }
        if (!anyReading) {
            maskAuthority(url, start, secret);
        }
        return secret;
    }

    /**
     * Reads {@code url} from {@code from} as host list (when {@code host}), path and query, marking
     * the secret query values; false when it does not parse that way.
     */
    private static boolean readRest(String url, int from, boolean host, boolean[] secret) {
        int query = url.indexOf('?', from);
        int pathEnd = query < 0 ? url.length() : query;
        int hostEnd = host ? indexOfAny(url, from, pathEnd, '/') : from;
        if (host && !isHostList(url, from, hostEnd)) {
            return false;
        }
        if (url.substring(hostEnd, pathEnd).indexOf('@') >= 0) {
            return false;
        }
        return query < 0 || readQuery(url, query + 1, secret);
    }

    /**
     * Marks the values of secret parameters, and what follows one up to the next part that reads as
     * a parameter of its own (an unencoded {@code &} in the secret); false when an {@code @} sits
     * anywhere else, which would leave a reading where it ends a user info unchecked.
     */
    private static boolean readQuery(String url, int from, boolean[] secret) {
        boolean inSecret = false;
        boolean emptySecret = false;
        int partStart = from;
        while (partStart <= url.length()) {
            int partEnd = url.indexOf('&', partStart);
            if (partEnd < 0) {
                partEnd = url.length();
            }
            String part = url.substring(partStart, partEnd);
            int equals = part.indexOf('=');
            String name = equals < 0 ? part : part.substring(0, equals);
            if (inSecret && (emptySecret || equals < 0 || !isLikelyName(name))) {
                // "password=&x=1" may be the secret "&x=1": an empty value takes the next part along.
                mark(secret, partStart - 1, partEnd);
                emptySecret = false;
            } else if (equals >= 0 && name.indexOf('@') < 0 && isSecretName(name)) {
                mark(secret, partStart + equals + 1, partEnd);
                inSecret = true;
                emptySecret = equals == part.length() - 1;
            } else if (part.indexOf('@') >= 0) {
                return false;
            } else {
                inSecret = false;
            }
            partStart = partEnd + 1;
        }
        return true;
    }

    /** When no reading parses: everything from the authority's start to its last '@' or its end. */
    private static void maskAuthority(String url, int start, boolean[] secret) {
        int lastAt = url.lastIndexOf('@');
        int end = lastAt >= start ? lastAt : indexOfAny(url, start, url.length(), '/', '?');
        mark(secret, start, end);
        int rest = lastAt >= start ? lastAt + 1 : end;
        boolean[] reading = new boolean[url.length()];
        if (readRest(url, rest, false, reading)) {
            or(secret, reading);
        } else {
            mark(secret, rest, url.length());
        }
    }

    private static boolean isSecretName(String name) {
        String decoded = decode(name).strip().toLowerCase(Locale.ROOT);
        return decoded.contains("password") || decoded.contains("passwd") || decoded.contains("secret")
                || decoded.contains("token") || decoded.contains("credential")
                || decoded.equals("pass") || decoded.equals("pwd");
    }

    /** The secrets as they appear in {@code url}, decoded, and in pieces a parser may print apart. */
    private static List<String> secretsOf(String url) {
        boolean[] secret = secretChars(url);
        Set<String> found = new LinkedHashSet<>();
        for (int i = 0; i < url.length(); i++) {
            if (!secret[i]) {
                continue;
            }
            int end = i;
            while (end < url.length() && secret[end]) {
                end++;
            }
            String run = url.substring(i, end);
            for (String form : List.of(run, decode(run))) {
                found.add(form);
                for (String piece : form.split("[@:/?#&=]")) {
                    if (piece.length() >= 4) {
                        found.add(piece);
                    }
                }
            }
            i = end;
        }
        found.remove("");
        List<String> longestFirst = new ArrayList<>(found);
        longestFirst.sort(Comparator.comparingInt(String::length).reversed());
        return longestFirst;
    }

    // ---- the grammar ----------------------------------------------------------------------------

    /** Where the scheme chain ({@code r2dbc:pool:postgresql:}) that starts {@code url} ends. */
    private static int schemesEnd(String url) {
        int at = 0;
        while (at < url.length() && Character.isWhitespace(url.charAt(at))) {
            at++;
        }
        while (true) {
            int end = at;
            if (end < url.length() && isAsciiLetter(url.charAt(end))) {
                end++;
                while (end < url.length() && (isAsciiLetter(url.charAt(end)) || isDigit(url.charAt(end))
                        || "+.-".indexOf(url.charAt(end)) >= 0)) {
                    end++;
                }
            }
            if (end == at || end >= url.length() || url.charAt(end) != ':') {
                return at;
            }
            at = end + 1;
        }
    }

    /** One host or a failover list ({@code h1:5432,h2:5433}), each a name or an IPv6 literal, with its port. */
    private static boolean isHostList(String url, int from, int to) {
        int at = from;
        while (true) {
            if (at < to && url.charAt(at) == '[') {
                at++;
                while (at < to && (isAsciiLetter(url.charAt(at)) || isDigit(url.charAt(at))
                        || ":.%".indexOf(url.charAt(at)) >= 0)) {
                    at++;
                }
                if (at >= to || url.charAt(at) != ']') {
                    return false;
                }
                at++;
            } else {
                while (at < to && (isAsciiLetter(url.charAt(at)) || isDigit(url.charAt(at))
                        || "._~%-".indexOf(url.charAt(at)) >= 0)) {
                    at++;
                }
            }
            if (at < to && url.charAt(at) == ':') {
                at++;
                while (at < to && isDigit(url.charAt(at))) {
                    at++;
                }
            }
            if (at == to) {
                return true;
            }
            if (url.charAt(at) != ',') {
                return false;
            }
            at++;
        }
    }

    /** A user name holds none of these; a reading that makes one part of it is not trusted. */
    private static boolean isLikelyUser(String user) {
        for (int i = 0; i < user.length(); i++) {
            char c = user.charAt(i);
            if ("/?#@=&[]".indexOf(c) >= 0 || Character.isWhitespace(c) || Character.isISOControl(c)) {
                return false;
            }
        }
        return true;
    }

    /** A query parameter's name as drivers spell them: letters, digits, {@code _ . - %}. */
    private static boolean isLikelyName(String name) {
        if (name.isEmpty()) {
            return false;
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (!isAsciiLetter(c) && !isDigit(c) && "_.-%".indexOf(c) < 0) {
                return false;
            }
        }
        return true;
    }

    private static boolean isAsciiLetter(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    // ---- helpers ------------------------------------------------------------------------------

    private static String render(String url, boolean[] secret) {
        StringBuilder out = new StringBuilder(url.length());
        for (int i = 0; i < url.length(); i++) {
            if (!secret[i]) {
                out.append(url.charAt(i));
            } else if (i == 0 || !secret[i - 1]) {
                out.append(MASK);
            }
        }
        return out.toString();
    }

    private static String decode(String text) {
        try {
            return URLDecoder.decode(text.replace("+", "%2B"), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException malformed) {
            return text;
        }
    }

    private static int indexOfAny(String text, int from, int to, char... chars) {
        for (int i = from; i < to; i++) {
            for (char c : chars) {
                if (text.charAt(i) == c) {
                    return i;
                }
            }
        }
        return to;
    }

    private static void mark(boolean[] secret, int from, int to) {
        for (int i = Math.max(from, 0); i < Math.min(to, secret.length); i++) {
            secret[i] = true;
        }
    }

    private static void or(boolean[] into, boolean[] from) {
        for (int i = 0; i < into.length; i++) {
            into[i] |= from[i];
        }
    }
}
