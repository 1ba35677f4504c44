package dev.durable;

import java.time.DayOfWeek;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
import java.util.BitSet;
import java.util.Locale;
import java.util.Map;

/**
 * A five-field cron expression: minute, hour, day of month, month, day of week, each {@code *}, a
 * value, a range {@code a-b}, a step {@code *}{@code /n} or {@code a-b/n}, or a comma list of those;
 * months and days may be named ({@code JAN}, {@code MON}); day of week 0 and 7 are Sunday. As in
 * classic cron, when both day fields are restricted a day matching either one is due. The macros
 * {@code @yearly}, {@code @monthly}, {@code @weekly}, {@code @daily} and {@code @hourly} are accepted.
 */
public final class Cron {

    private static final Map<String, String> MACROS = Map.of(
            "@yearly", "0 0 1 1 *", "@annually", "0 0 1 1 *", "@monthly", "0 0 1 * *",
            "@weekly", "0 0 * * 0", "@daily", "0 0 * * *", "@midnight", "0 0 * * *", "@hourly", "0 * * * *");
    private static final String[] MONTHS = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
    private static final String[] DAYS = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

    private final String expression;
    private final BitSet minutes;
    private final BitSet hours;
    private final BitSet daysOfMonth;
    private final BitSet months;
    private final BitSet daysOfWeek;
    private final boolean anyDayOfMonth;
    private final boolean anyDayOfWeek;

    private Cron(String expression, String[] fields) {
        this.expression = expression;
        this.minutes = parse(fields[0], 0, 59, null, "minute");
        this.hours = parse(fields[1], 0, 23, null, "hour");
        this.daysOfMonth = parse(fields[2], 1, 31, null, "day of month");
        this.months = parse(fields[3], 1, 12, MONTHS, "month");
        BitSet days = parse(fields[4], 0, 7, DAYS, "day of week");
        if (days.get(7)) {
            days.set(0);
        }
        this.daysOfWeek = days;
        this.anyDayOfMonth = fields[2].equals("*");
        this.anyDayOfWeek = fields[4].equals("*");
    }

    /** Parses an expression; a malformed one is an {@link IllegalArgumentException} naming the field. */
    public static Cron parse(String expression) {
        if (expression == null || expression.isBlank()) {
            throw new IllegalArgumentException("cron expression must not be blank");
        }
        String normalized = MACROS.getOrDefault(expression.strip().toLowerCase(Locale.ROOT), expression.strip());
        String[] fields = normalized.split("\\s+");
        if (fields.length != 5) {
            throw new IllegalArgumentException("cron expression must have 5 fields (minute hour day-of-month"
                    + " month day-of-week), was '" + expression + "'");
        }
        return new Cron(expression, fields);
    }

    /** The first due time strictly after {@code after}, in its zone, to the minute. */
    public ZonedDateTime next(ZonedDateTime after) {
        ZonedDateTime t = after.truncatedTo(ChronoUnit.MINUTES).plusMinutes(1);
        ZonedDateTime limit = after.plusYears(5);
        while (t.isBefore(limit)) {
            if (!months.get(t.getMonthValue())) {
                t = t.withDayOfMonth(1).truncatedTo(ChronoUnit.DAYS).plusMonths(1);
            } else if (!dayMatches(t)) {
                t = t.truncatedTo(ChronoUnit.DAYS).plusDays(1);
            } else if (!hours.get(t.getHour())) {
                t = t.truncatedTo(ChronoUnit.HOURS).plusHours(1);
            } else if (!minutes.get(t.getMinute())) {
                t = t.plusMinutes(1);
            } else {
                return t;
            }
        }
        throw new IllegalArgumentException("cron expression '" + expression + "' is never due");
    }

    private boolean dayMatches(ZonedDateTime t) {
        boolean dom = daysOfMonth.get(t.getDayOfMonth());
        boolean dow = daysOfWeek.get(t.getDayOfWeek() == DayOfWeek.SUNDAY ? 0 : t.getDayOfWeek().getValue());
        if (anyDayOfMonth && anyDayOfWeek) {
            return true;
        }
        if (anyDayOfMonth) {
            return dow;
        }
        if (anyDayOfWeek) {
            return dom;
        }
        return dom || dow;
    }

    private static BitSet parse(String field, int min, int max, String[] names, String what) {
        BitSet bits = new BitSet(max + 1);
        for (String part : field.split(",")) {
            int step = 1;
            String range = part;
            int slash = part.indexOf('/');
            if (slash >= 0) {
                step = number(part.substring(slash + 1), 1, max, null, what, field);
                range = part.substring(0, slash);
            }
            int from;
            int to;
            if (range.equals("*")) {
                from = min;
                to = max;
            } else if (range.contains("-")) {
                String[] ends = range.split("-", 2);
                from = number(ends[0], min, max, names, what, field);
                to = number(ends[1], min, max, names, what, field);
                if (to < from) {
                    throw new IllegalArgumentException(what + " range " + range + " runs backwards in '" + field + "'");
                }
            } else {
                from = number(range, min, max, names, what, field);
                to = slash >= 0 ? max : from;
            }
            for (int value = from; value <= to; value += step) {
                bits.set(value);
            }
        }
        return bits;
    }

    private static int number(String text, int min, int max, String[] names, String what, String field) {
        if (names != null) {
            for (int i = 0; i < names.length; i++) {
                if (names[i].equalsIgnoreCase(text)) {
                    return names == MONTHS ? i + 1 : i;
                }
            }
        }
        try {
            int value = Integer.parseInt(text);
            if (value < min || value > max) {
                throw new IllegalArgumentException(what + " must be " + min + " to " + max + ", was " + value
                        + " in '" + field + "'");
            }
            return value;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(what + " field '" + field + "' has '" + text + "', not a number", e);
        }
    }

    @Override
    public String toString() {
        return expression;
    }
}
