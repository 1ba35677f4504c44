package dev.durable.internal.sql;

/**
 * A statement's text as sent: comments dropped and each run of whitespace one space. The statements
 * are written indented over many lines to be read; the driver tokenizes a statement's whole text
 * each time one is created (a tenth of the engine's CPU at saturation went to the settle's and the
 * pick's), and the text also travels to the server and sits in pg_stat_statements. Literals
 * ('...', E'...' with its backslash escapes, "identifiers" and $tag$ bodies) are kept as written.
 */
final class SqlText {

    private SqlText() {
    }

    static String compact(String sql) {
        StringBuilder out = new StringBuilder(sql.length());
        int n = sql.length();
        int i = 0;
        boolean space = false;
        while (i < n) {
            char c = sql.charAt(i);
            if (Character.isWhitespace(c)) {
                space = true;
                i++;
            } else if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-') {
                int end = sql.indexOf('\n', i);
                i = end < 0 ? n : end;
                space = true;
            } else if (c == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
                i = blockCommentEnd(sql, i);
                space = true;
            } else {
                if (space && !out.isEmpty()) {
                    out.append(' ');
                }
                space = false;
                int end = literalEnd(sql, i);
                out.append(sql, i, end);
                i = end;
            }
        }
        return out.toString();
    }

    /** Where the token at {@code start} ends: past a whole literal, or past one character. */
    private static int literalEnd(String sql, int start) {
        char c = sql.charAt(start);
        if (c == '\'') {
            boolean escapes = start > 0 && (sql.charAt(start - 1) == 'E' || sql.charAt(start - 1) == 'e')
                    && (start < 2 || !isIdentifierPart(sql.charAt(start - 2)));
            return quotedEnd(sql, start, '\'', escapes);
        }
        if (c == '"') {
            return quotedEnd(sql, start, '"', false);
        }
        if (c == '$' && (start == 0 || !isIdentifierPart(sql.charAt(start - 1)))) {
            int tagEnd = start + 1;
            while (tagEnd < sql.length() && isIdentifierPart(sql.charAt(tagEnd))) {
                tagEnd++;
            }
            boolean tag = tagEnd < sql.length() && sql.charAt(tagEnd) == '$'
                    && (tagEnd == start + 1 || !Character.isDigit(sql.charAt(start + 1)));
            if (tag) {
                String delimiter = sql.substring(start, tagEnd + 1);
                int close = sql.indexOf(delimiter, tagEnd + 1);
                if (close < 0) {
                    throw new IllegalArgumentException("unterminated " + delimiter + " body in: " + sql);
                }
                return close + delimiter.length();
            }
        }
        return start + 1;
    }

    /** The end of a literal quoted by {@code quote} (a doubled quote stays inside; a backslash escapes with E''). */
    private static int quotedEnd(String sql, int start, char quote, boolean backslashEscapes) {
        int i = start + 1;
        while (i < sql.length()) {
            char c = sql.charAt(i);
            if (backslashEscapes && c == '\\') {
                i += 2;
            } else if (c == quote) {
                if (i + 1 < sql.length() && sql.charAt(i + 1) == quote) {
                    i += 2;
                } else {
                    return i + 1;
                }
            } else {
                i++;
            }
        }
        throw new IllegalArgumentException("unterminated " + quote + " literal in: " + sql);
    }

    /** The end of the (nesting, as PostgreSQL's) block comment at {@code start}. */
    private static int blockCommentEnd(String sql, int start) {
        int depth = 0;
        int i = start;
        while (i < sql.length()) {
            if (sql.startsWith("/*", i)) {
                depth++;
                i += 2;
            } else if (sql.startsWith("*/", i)) {
                depth--;
                i += 2;
                if (depth == 0) {
                    return i;
                }
            } else {
                i++;
            }
        }
        throw new IllegalArgumentException("unterminated comment in: " + sql);
    }

    private static boolean isIdentifierPart(char c) {
        return Character.isLetterOrDigit(c) || c == '_';
    }
}
