package dev.durable.support;

import dev.durable.testing.TestDatabase;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A schema's catalog as the server describes it, one definition per object ("kind name"), in a form
 * that two schemas made by equivalent DDL share: tables, views and sequences with their storage
 * options, owner, grants and comments; columns in order with their type, nullability, default,
 * identity, generation, collation and storage; constraints, indexes, triggers and views as
 * PostgreSQL prints them back (pg_get_constraintdef, pg_get_indexdef, pg_get_triggerdef,
 * pg_get_viewdef); functions with their signature, volatility, security, settings and body; extended
 * statistics, types, rules and policies. The schema's own name is replaced by {@code <schema>}, and a
 * function's body is compared as its tokens: comments and whitespace do not count, anything else does.
 */
public final class SchemaCatalog {

    /** kind, name, definition and (functions only) body of every object of schema $1. */
    private static final String CATALOG = """
            WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = $1),
            rel AS (SELECT c.* FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns))
            SELECT 'relation', c.relname::text,
                   concat_ws(' | ', c.relkind::text, c.relpersistence::text,
                             'rls=' || c.relrowsecurity || '/' || c.relforcerowsecurity,
                             'options=' || coalesce((SELECT string_agg(o, ',' ORDER BY o) FROM unnest(c.reloptions) o), ''),
                             'owner=' || pg_get_userbyid(c.relowner)::text, 'acl=' || coalesce(c.relacl::text, ''),
                             'comment=' || coalesce(obj_description(c.oid, 'pg_class'), '')),
                   NULL::text
              FROM rel c WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c')
            UNION ALL
            SELECT 'column', c.relname || '.' || a.attname,
                   concat_ws(' | ', row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
                             format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN 'not null' ELSE 'null' END,
                             'default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''),
                             'identity=' || a.attidentity::text, 'generated=' || a.attgenerated::text,
                             'collation=' || coalesce((SELECT collname::text FROM pg_collation WHERE oid = a.attcollation), ''),
                             'storage=' || a.attstorage::text, 'compression=' || a.attcompression::text,
                             'stattarget=' || coalesce(a.attstattarget::text, ''), 'acl=' || coalesce(a.attacl::text, ''),
                             'comment=' || coalesce(col_description(c.oid, a.attnum), '')),
                   NULL
              FROM rel c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
            UNION ALL
            SELECT 'constraint', c.relname || '.' || k.conname,
                   concat_ws(' | ', k.contype::text, pg_get_constraintdef(k.oid),
                             'deferrable=' || k.condeferrable || '/' || k.condeferred, 'validated=' || k.convalidated),
                   NULL
              FROM rel c JOIN pg_constraint k ON k.conrelid = c.oid
            UNION ALL
            SELECT 'index', i.relname,
                   concat_ws(' | ', pg_get_indexdef(x.indexrelid), 'clustered=' || x.indisclustered,
                             'replident=' || x.indisreplident, 'comment=' || coalesce(obj_description(i.oid, 'pg_class'), '')),
                   NULL
              FROM rel i JOIN pg_index x ON x.indexrelid = i.oid
            UNION ALL
            SELECT 'sequence', c.relname,
                   concat_ws(' | ', format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
                             s.seqcache, s.seqcycle,
                             'owned by=' || coalesce((SELECT t.relname || '.' || a.attname || ' ' || d.deptype::text
                                                        FROM pg_depend d
                                                        JOIN pg_class t ON t.oid = d.refobjid
                                                        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                                                       WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                                         AND d.refclassid = 'pg_class'::regclass
                                                         AND d.deptype IN ('a', 'i')), '')),
                   NULL
              FROM rel c JOIN pg_sequence s ON s.seqrelid = c.oid
            UNION ALL
            SELECT 'function', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
                   concat_ws(' | ', p.prokind::text, 'args=' || pg_get_function_arguments(p.oid),
                             'returns=' || pg_get_function_result(p.oid),
                             'language=' || (SELECT lanname::text FROM pg_language WHERE oid = p.prolang),
                             'volatility=' || p.provolatile::text, 'security definer=' || p.prosecdef,
                             'strict=' || p.proisstrict, 'leakproof=' || p.proleakproof,
                             'parallel=' || p.proparallel::text, 'cost=' || p.procost, 'rows=' || p.prorows,
                             'config=' || coalesce(array_to_string(p.proconfig, ','), ''),
                             'owner=' || pg_get_userbyid(p.proowner)::text, 'acl=' || coalesce(p.proacl::text, ''),
                             'comment=' || coalesce(obj_description(p.oid, 'pg_proc'), '')),
                   p.prosrc
              FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM ns)
            UNION ALL
            SELECT 'trigger', c.relname || '.' || t.tgname,
                   concat_ws(' | ', pg_get_triggerdef(t.oid), 'enabled=' || t.tgenabled::text,
                             'comment=' || coalesce(obj_description(t.oid, 'pg_trigger'), '')),
                   NULL
              FROM rel c JOIN pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal
            UNION ALL
            SELECT 'view', c.relname, pg_get_viewdef(c.oid), NULL
              FROM rel c WHERE c.relkind IN ('v', 'm')
            UNION ALL
            SELECT 'statistics', s.stxname::text,
                   concat_ws(' | ', pg_get_statisticsobjdef(s.oid), 'target=' || coalesce(s.stxstattarget::text, '')),
                   NULL
              FROM pg_statistic_ext s WHERE s.stxnamespace = (SELECT oid FROM ns)
            UNION ALL
            SELECT 'type', t.typname::text, concat_ws(' | ', t.typtype::text, format_type(t.typbasetype, t.typtypmod)), NULL
              FROM pg_type t WHERE t.typnamespace = (SELECT oid FROM ns) AND t.typtype IN ('d', 'e', 'r', 'm')
            UNION ALL
            SELECT 'rule', r.tablename || '.' || r.rulename, r.definition, NULL FROM pg_rules r WHERE r.schemaname = $1
            UNION ALL
            SELECT 'policy', p.tablename || '.' || p.policyname,
                   concat_ws(' | ', p.permissive, p.roles::text, p.cmd, p.qual, p.with_check), NULL
              FROM pg_policies p WHERE p.schemaname = $1""";

    private SchemaCatalog() {
    }

    /** The catalog of {@code schema} on {@code db}'s server: "kind name" to its normalised definition. */
    public static SortedMap<String, String> of(TestDatabase db, String schema) {
        Pattern name = Pattern.compile("(?<![A-Za-z0-9_$])\"?" + Pattern.quote(schema) + "\"?(?![A-Za-z0-9_$])");
        SortedMap<String, String> catalog = new TreeMap<>();
        for (String[] row : Sql.query(db, CATALOG, row -> new String[] {row.get(0, String.class),
                row.get(1, String.class), row.get(2, String.class), row.get(3, String.class)}, schema)) {
            String definition = row[2] + (row[3] == null ? "" : " | body=" + String.join(" ", tokens(row[3])));
            String previous = catalog.put(row[0] + " " + row[1],
                    name.matcher(definition).replaceAll(Matcher.quoteReplacement("<schema>")));
            if (previous != null) {
                throw new IllegalStateException("two objects named " + row[0] + " " + row[1]);
            }
        }
        return catalog;
    }

    /** The objects of {@code kind} in {@code catalog} (their names). */
    public static List<String> names(SortedMap<String, String> catalog, String kind) {
        return catalog.keySet().stream().filter(key -> key.startsWith(kind + " "))
                .map(key -> key.substring(kind.length() + 1)).toList();
    }

    /**
     * What differs between two catalogs, one line per object: missing from either side, or defined
     * otherwise (both definitions). Empty when they are the same.
     */
    public static List<String> differences(SortedMap<String, String> expected, SortedMap<String, String> actual) {
        List<String> differences = new ArrayList<>();
        TreeSet<String> keys = new TreeSet<>(expected.keySet());
        keys.addAll(actual.keySet());
        for (String key : keys) {
            String want = expected.get(key);
            String got = actual.get(key);
            if (want == null) {
                differences.add("only in the second: " + key + "\n    " + got);
            } else if (got == null) {
                differences.add("only in the first: " + key + "\n    " + want);
            } else if (!Objects.equals(want, got)) {
                int at = 0;
                while (at < Math.min(want.length(), got.length()) && want.charAt(at) == got.charAt(at)) {
                    at++;
                }
                int from = Math.max(0, at - 60);
                differences.add("differs: " + key + "\n    at character " + at
                        + "\n    first:  ..." + want.substring(from, Math.min(want.length(), at + 60)) + "..."
                        + "\n    second: ..." + got.substring(from, Math.min(got.length(), at + 60)) + "...");
            }
        }
        return differences;
    }

    /**
     * The tokens of a function body as PostgreSQL's lexer splits them: words (identifiers, keywords,
     * numbers, parameters), quoted strings and identifiers and dollar-quoted strings whole, runs of
     * operator characters, and each other punctuation character; comments ({@code --} to the end of
     * the line, {@code /* *}{@code /}) and whitespace are dropped.
     */
    public static List<String> tokens(String body) {
        List<String> tokens = new ArrayList<>();
        int i = 0;
        int n = body.length();
        while (i < n) {
            char c = body.charAt(i);
            if (Character.isWhitespace(c)) {
                i++;
            } else if (body.startsWith("--", i)) {
                int end = body.indexOf('\n', i);
                i = end < 0 ? n : end + 1;
            } else if (body.startsWith("/*", i)) {
                int end = body.indexOf("*/", i + 2);
                i = end < 0 ? n : end + 2;
            } else if (c == '\'' || c == '"') {
                int end = i + 1;
                while (end < n && (body.charAt(end) != c || (end + 1 < n && body.charAt(end + 1) == c))) {
                    end += body.charAt(end) == c ? 2 : 1;
                }
                tokens.add(body.substring(i, Math.min(end + 1, n)));
                i = end + 1;
            } else if (c == '$' && dollarTag(body, i) != null) {
                String tag = dollarTag(body, i);
                int end = body.indexOf(tag, i + tag.length());
                int stop = end < 0 ? n : end + tag.length();
                tokens.add(body.substring(i, stop));
                i = stop;
            } else if (Character.isLetterOrDigit(c) || c == '_' || c == '$') {
                int end = i + 1;
                while (end < n && (Character.isLetterOrDigit(body.charAt(end)) || body.charAt(end) == '_'
                        || body.charAt(end) == '$')) {
                    end++;
                }
                tokens.add(body.substring(i, end));
                i = end;
            } else if (OPERATOR_CHARS.indexOf(c) >= 0) {
                int end = i + 1;
                while (end < n && OPERATOR_CHARS.indexOf(body.charAt(end)) >= 0 && !body.startsWith("--", end)
                        && !body.startsWith("/*", end)) {
                    end++;
                }
                tokens.add(body.substring(i, end));
                i = end;
            } else {
                tokens.add(String.valueOf(c));
                i++;
            }
        }
        return tokens;
    }

    private static final String OPERATOR_CHARS = "+-*/<>=~!@#%^&|`?:";

    /** The dollar-quote opening at {@code i} ({@code $$} or {@code $tag$}), or null ({@code $1}, say). */
    private static String dollarTag(String body, int i) {
        int end = i + 1;
        while (end < body.length() && (Character.isLetter(body.charAt(end)) || body.charAt(end) == '_'
                || (end > i + 1 && Character.isDigit(body.charAt(end))))) {
            end++;
        }
        return end < body.length() && body.charAt(end) == '$' ? body.substring(i, end + 1) : null;
    }
}
