package dev.durable.support;

import java.util.LinkedHashSet;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The metric names a PromQL expression reads, found by a small tokenizer rather than a parser: it
 * drops comments, strings, label matchers ({@code {...}}), ranges and subqueries ({@code [...]}),
 * Grafana variables ({@code $queue}, {@code ${queue}}), numbers and durations, then looks at each
 * identifier left. One followed by {@code (} is a function; an aggregation operator ({@code sum},
 * {@code max}, ...) or a keyword ({@code by}, {@code unless}, {@code offset}, ...) is not a metric;
 * the parenthesised label list after {@code by}, {@code without}, {@code on}, {@code ignoring},
 * {@code group_left} and {@code group_right} is skipped. Every other identifier is a metric name.
 * Not handled (and not used by our dashboards): selectors by {@code {__name__="..."}} alone.
 */
public final class PromQl {

    private static final Set<String> AGGREGATIONS = Set.of("sum", "min", "max", "avg", "group", "stddev", "stdvar",
            "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio");
    private static final Set<String> LABEL_LISTS = Set.of("by", "without", "on", "ignoring", "group_left",
            "group_right");
    private static final Set<String> KEYWORDS = Set.of("and", "or", "unless", "bool", "offset", "atan2", "inf",
            "nan");
    /** Grafana's {@code label_values(metric{matchers}, label)} of a query variable. */
    private static final Pattern LABEL_VALUES = Pattern.compile(
            "^\\s*label_values\\(\\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\\s*(\\{[^}]*})?\\s*,\\s*[a-zA-Z_][a-zA-Z0-9_]*\\s*\\)\\s*$");

    private PromQl() {
    }

    /** The metric names {@code expression} reads, in order of first use. */
    public static Set<String> metricNames(String expression) {
        String text = expression;
        Set<String> names = new LinkedHashSet<>();
        int i = 0;
        int n = text.length();
        while (i < n) {
            char c = text.charAt(i);
            if (Character.isWhitespace(c)) {
                i++;
            } else if (c == '#') {
                i = endOfLine(text, i);
            } else if (c == '"' || c == '\'' || c == '`') {
                i = endOfString(text, i);
            } else if (c == '{') {
                i = closing(text, i, '{', '}');
            } else if (c == '[') {
                i = closing(text, i, '[', ']');
            } else if (c == '$') {
                i = endOfVariable(text, i);
            } else if (Character.isDigit(c) || (c == '.' && i + 1 < n && Character.isDigit(text.charAt(i + 1)))) {
                i = endOfWord(text, i); // 5, 0.05, 1e3, 0x1f, 5m, 1h30m
            } else if (identifierStart(c)) {
                int end = endOfWord(text, i);
                String word = text.substring(i, end);
                int next = skipSpace(text, end);
                boolean call = next < n && text.charAt(next) == '(';
                if (LABEL_LISTS.contains(word)) {
                    i = call ? closing(text, next, '(', ')') : next; // group_left may have no list
                } else if (call || AGGREGATIONS.contains(word) || KEYWORDS.contains(word.toLowerCase())) {
                    i = end;
                } else {
                    names.add(word);
                    i = end;
                }
            } else if ("()+-*/%^=!<>,@:".indexOf(c) >= 0) {
                i++;
            } else {
                throw new IllegalArgumentException("unexpected '" + c + "' at " + i + " in: " + expression);
            }
        }
        return names;
    }

    /** The metric a Grafana query variable reads: {@code label_values(metric, label)}, else as PromQL. */
    public static Set<String> variableMetricNames(String query) {
        Matcher matcher = LABEL_VALUES.matcher(query);
        return matcher.matches() ? Set.of(matcher.group(1)) : metricNames(query);
    }

    private static boolean identifierStart(char c) {
        return Character.isLetter(c) || c == '_' || c == ':';
    }

    /** Past an identifier, or past a number or duration (whose letters and dots this takes too). */
    private static int endOfWord(String text, int from) {
        boolean number = !identifierStart(text.charAt(from));
        int i = from;
        while (i < text.length() && (Character.isLetterOrDigit(text.charAt(i)) || text.charAt(i) == '_'
                || text.charAt(i) == (number ? '.' : ':'))) {
            i++;
        }
        return i;
    }

    private static int skipSpace(String text, int from) {
        int i = from;
        while (i < text.length() && Character.isWhitespace(text.charAt(i))) {
            i++;
        }
        return i;
    }

    private static int endOfLine(String text, int from) {
        int end = text.indexOf('\n', from);
        return end < 0 ? text.length() : end + 1;
    }

    /** Past the string opened at {@code from}; backslash escapes in '...' and "..." only. */
    private static int endOfString(String text, int from) {
        char quote = text.charAt(from);
        for (int i = from + 1; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '\\' && quote != '`') {
                i++;
            } else if (c == quote) {
                return i + 1;
            }
        }
        throw new IllegalArgumentException("unterminated string at " + from + " in: " + text);
    }

    /** Past the bracket closing the one at {@code from}, nested ones and strings inside skipped. */
    private static int closing(String text, int from, char open, char close) {
        int depth = 0;
        int i = from;
        while (i < text.length()) {
            char c = text.charAt(i);
            if (c == '"' || c == '\'' || c == '`') {
                i = endOfString(text, i);
                continue;
            }
            if (c == open) {
                depth++;
            } else if (c == close && --depth == 0) {
                return i + 1;
            }
            i++;
        }
        throw new IllegalArgumentException("unclosed '" + open + "' at " + from + " in: " + text);
    }

    /** Past a Grafana variable: {@code $name}, {@code $__name} or {@code ${name...}}. */
    private static int endOfVariable(String text, int from) {
        if (from + 1 < text.length() && text.charAt(from + 1) == '{') {
            return closing(text, from + 1, '{', '}');
        }
        int i = from + 1;
        while (i < text.length() && (Character.isLetterOrDigit(text.charAt(i)) || text.charAt(i) == '_')) {
            i++;
        }
        if (i == from + 1) {
            throw new IllegalArgumentException("'$' without a name at " + from + " in: " + text);
        }
        return i;
    }
}
