package dev.durable.docs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The repository's Markdown (the README, the guides under {@code docs/}, the examples' and the
 * benchmarks' READMEs) stays true to the code and to itself.
 *
 * <ul>
 *   <li>Every code block in a language the build compiles (Java, Kotlin) or loads (properties) is a
 *       copy of code in a test source, named by the marker on the line before it:
 *       {@code <!-- snippet: path/from/repository/root#tag -->} for the lines between
 *       {@code tag::tag[]} and {@code end::tag[]}, or without {@code #tag} for the whole file. The
 *       test that holds it compiles and runs it; this test fails when the docs and the code part
 *       ways, or when a block has no marker. A region is shown in one place only: the guides
 *       cross-link instead of repeating each other.
 *   <li>Every relative link resolves: the file exists, and its {@code #anchor} (or a bare
 *       {@code #anchor} in the same file) is a heading of the target by GitHub's rules, so moving
 *       a section cannot leave a dead link behind.
 *   <li>The README stays the entry (at most 400 lines), and its Quick start's second line is the
 *       test command {@code .ci/run} runs.
 * </ul>
 */
class DocsSnippetsTest {

    private static final List<String> CHECKED = List.of("java", "kotlin", "properties");
    private static final Pattern MARKER = Pattern.compile("<!-- snippet: ([^#\\s]+)(?:#([\\w-]+))? -->");
    private static final Pattern FENCE = Pattern.compile("^(```|~~~)\\s*([\\w-]*)\\s*$");
    private static final Pattern HEADING = Pattern.compile("^(#{1,6})\\s+(.*?)(?:\\s+#+)?\\s*$");
    private static final Pattern HTML_ANCHOR = Pattern.compile("<a\\s+(?:name|id)=\"([^\"]+)\"");
    /** An inline link or image: the text may hold one level of brackets; the target ends at a space or ')'. */
    private static final Pattern LINK = Pattern.compile("!?\\[(?:[^\\[\\]]|\\[[^\\]]*\\])*\\]\\(<?([^)\\s>]+)>?(?:\\s+\"[^\"]*\")?\\)");
    private static final Pattern REFERENCE = Pattern.compile("^\\s{0,3}\\[[^\\]]+\\]:\\s*<?(\\S+?)>?(?:\\s+\"[^\"]*\")?\\s*$");
    private static final Pattern CODE_SPAN = Pattern.compile("(`+)(?:(?!\\1).)+?\\1", Pattern.DOTALL);
    private static final Set<String> SKIPPED_DIRECTORIES = Set.of(".git", "target", "node_modules");
    private static final int README_MAX_LINES = 400;

    private static Path root;
    private static Map<String, Markdown> docs;

    /** A fenced code block: its first line (from 1), language, text and the line before it. */
    record Block(int line, String language, String text, String marker) {
    }

    /** A link's target and the line (from 1) where it starts. */
    record Link(int line, String target) {
    }

    /** One Markdown file: its lines, its code blocks and the lines outside them. */
    record Markdown(String path, List<String> lines, List<Block> blocks, List<Integer> prose) {
    }

    @BeforeAll
    static void read() throws IOException {
        root = repositoryRoot();
        docs = new LinkedHashMap<>();
        List<Path> files = new ArrayList<>();
        Files.walkFileTree(root, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attributes) {
                return SKIPPED_DIRECTORIES.contains(dir.getFileName().toString()) ? FileVisitResult.SKIP_SUBTREE
                        : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attributes) {
                if (attributes.isRegularFile() && file.getFileName().toString().endsWith(".md")) {
                    files.add(file);
                }
                return FileVisitResult.CONTINUE;
            }
        });
        for (Path file : files.stream().sorted().toList()) {
            String path = root.relativize(file).toString().replace('\\', '/');
            docs.put(path, parse(path, Files.readAllLines(file)));
        }
    }

    @Test
    void everyGuideIsChecked() {
        assertThat(docs.keySet()).contains("README.md", "docs/README.md", "examples/webflux-service/README.md",
                "benchmarks/README.md", "docs/jobs.md", "docs/workflows.md", "docs/limits-and-fairness.md",
                "docs/spring-boot.md", "docs/testing.md", "docs/operations.md", "docs/tracing.md",
                "docs/performance.md", "docs/reliability.md", "docs/sync-scheduler.md");
    }

    @Test
    void everyJavaKotlinAndPropertiesBlockIsCodeTheBuildRuns() throws IOException {
        int checked = 0;
        List<String> problems = new ArrayList<>();
        for (Markdown doc : docs.values()) {
            for (Block block : doc.blocks()) {
                if (!CHECKED.contains(block.language())) {
                    continue;
                }
                checked++;
                String where = doc.path() + ":" + block.line();
                Matcher marker = MARKER.matcher(block.marker());
                if (!marker.matches()) {
                    problems.add(where + ": a ```" + block.language() + " block without a <!-- snippet: path#tag --> line"
                            + " before it (every such block must be code a test compiles and runs)");
                    continue;
                }
                String path = marker.group(1);
                if (!path.contains("/src/test/")) {
                    problems.add(where + ": " + path + " is not a test source: nothing would run it");
                    continue;
                }
                Path source = root.resolve(path);
                if (!Files.isRegularFile(source)) {
                    problems.add(where + ": " + path + " does not exist");
                    continue;
                }
                String expected = marker.group(2) == null ? Files.readString(source).strip()
                        : region(Files.readAllLines(source), marker.group(2));
                if (expected == null) {
                    problems.add(where + ": no region tag::" + marker.group(2) + "[] in " + path);
                } else if (!normalized(expected).equals(normalized(block.text()))) {
                    problems.add(where + ": differs from " + path + (marker.group(2) == null ? "" : "#" + marker.group(2))
                            + "\n--- doc\n" + block.text() + "\n--- code\n" + expected);
                }
            }
        }
        assertThat(checked).as("checked blocks").isGreaterThan(20);
        assertThat(problems).as("blocks that are not the code the build runs").isEmpty();
    }

    @Test
    void everySnippetIsShownInOnePlace() {
        Map<String, List<String>> shown = new HashMap<>();
        for (Markdown doc : docs.values()) {
            for (Block block : doc.blocks()) {
                if (MARKER.matcher(block.marker()).matches()) {
                    shown.computeIfAbsent(block.marker(), marker -> new ArrayList<>()).add(doc.path() + ":" + block.line());
                }
            }
        }
        assertThat(shown.entrySet().stream().filter(entry -> entry.getValue().size() > 1)
                .map(entry -> entry.getKey() + " at " + entry.getValue()).toList())
                .as("snippets shown twice (link to the one place instead)").isEmpty();
    }

    @Test
    void everyRelativeLinkAndAnchorResolves() {
        Map<String, Set<String>> anchors = new HashMap<>();
        List<String> problems = new ArrayList<>();
        int checked = 0;
        for (Markdown doc : docs.values()) {
            for (Link link : links(doc)) {
                String target = link.target();
                String where = doc.path() + ":" + link.line() + ": (" + target + ")";
                URI uri;
                try {
                    uri = new URI(target);
                } catch (URISyntaxException e) {
                    problems.add(where + " is not a valid link: " + e.getMessage());
                    continue;
                }
                if (uri.getScheme() != null || uri.getRawAuthority() != null) {
                    continue; // external: not this test's to check
                }
                checked++;
                String path = uri.getPath() == null ? "" : uri.getPath();
                String fragment = uri.getFragment();
                Path file = path.isEmpty() ? root.resolve(doc.path())
                        : path.startsWith("/") ? root.resolve(path.substring(1)).normalize()
                        : root.resolve(doc.path()).getParent().resolve(path).normalize();
                if (!file.startsWith(root) || !Files.exists(file)) {
                    problems.add(where + ": " + path + " does not exist");
                    continue;
                }
                if (fragment == null) {
                    continue;
                }
                String targetPath = root.relativize(file).toString().replace('\\', '/');
                Markdown targetDoc = docs.get(targetPath);
                if (targetDoc == null) {
                    problems.add(where + ": an anchor into " + targetPath + ", which is not a checked Markdown file");
                } else if (!anchors.computeIfAbsent(targetPath, any -> anchors(targetDoc)).contains(fragment)) {
                    problems.add(where + ": no heading #" + fragment + " in " + targetPath);
                }
            }
        }
        assertThat(checked).as("checked links").isGreaterThan(100);
        assertThat(problems).as("links that lead nowhere").isEmpty();
    }

    @Test
    void theReadmeStaysTheEntry() {
        assertThat(docs.get("README.md").lines()).as("README.md's lines: the rest belongs in a guide under docs/")
                .hasSizeLessThanOrEqualTo(README_MAX_LINES);
    }

    @Test
    void theQuickStartsSecondLineIsTheTestCommandCiRuns() {
        // .ci/run takes the second line of the first code block under "## Quick start".
        List<String> lines = docs.get("README.md").lines();
        int start = lines.indexOf("## Quick start");
        assertThat(start).isNotNegative();
        int fence = start;
        while (!lines.get(fence).startsWith("```")) {
            fence++;
        }
        assertThat(lines.get(fence + 1)).startsWith("mvn ").contains("exec:java");
        assertThat(lines.get(fence + 2)).isEqualTo("mvn -B verify");
    }

    @Test
    void linksAreReadWhereverTheirTextWraps() {
        Markdown doc = parse("any.md", List.of("See [the", "guide](docs/a.md#b), not `[code](c.md)`", "",
                "```", "[fenced](d.md)", "```", "[ref]: e.md"));
        assertThat(links(doc)).containsExactly(new Link(1, "docs/a.md#b"), new Link(7, "e.md"));
    }

    @Test
    void slugsAreGitHubs() {
        assertThat(slug("Transactional enqueue (the outbox)")).isEqualTo("transactional-enqueue-the-outbox");
        assertThat(slug("All four systems on the sources of issue 16's fifth pass (schema version 16)"))
                .isEqualTo("all-four-systems-on-the-sources-of-issue-16s-fifth-pass-schema-version-16");
        assertThat(slug("`insertAsync` against `insert`, 64 callers (issue 17 #7)"))
                .isEqualTo("insertasync-against-insert-64-callers-issue-17-7");
        assertThat(slug("One step, no database: perform")).isEqualTo("one-step-no-database-perform");
        assertThat(slug("The [dashboard](operations.md) and `durable_history`")).isEqualTo("the-dashboard-and-durable_history");
    }

    /** GitHub's anchors of a file: each heading's slug (a repeated one gets -1, -2, ...), and HTML anchors. */
    static Set<String> anchors(Markdown doc) {
        Set<String> anchors = new LinkedHashSet<>();
        Map<String, Integer> seen = new HashMap<>();
        for (int index : doc.prose()) {
            String line = doc.lines().get(index);
            Matcher heading = HEADING.matcher(line);
            if (heading.matches()) {
                String slug = slug(heading.group(2));
                int repeats = seen.merge(slug, 1, Integer::sum) - 1;
                anchors.add(repeats == 0 ? slug : slug + "-" + repeats);
            }
            Matcher html = HTML_ANCHOR.matcher(line);
            while (html.find()) {
                anchors.add(html.group(1));
            }
        }
        return anchors;
    }

    /**
     * GitHub's slug of a heading: its rendered text (a link's text, not its target), lower-cased,
     * without punctuation and symbols (letters, digits, marks, '_', '-' and spaces stay), each space
     * a hyphen.
     */
    static String slug(String heading) {
        String text = heading.replaceAll("!?\\[([^\\]]*)\\]\\([^)]*\\)", "$1").replaceAll("<[^>]+>", "");
        return text.toLowerCase(Locale.ROOT).replaceAll("[^\\p{L}\\p{M}\\p{N}_\\- ]", "").replace(' ', '-');
    }

    /**
     * The links of a file's prose: reference definitions, and inline links and images outside code
     * spans, read paragraph by paragraph, as a link's text may wrap onto the next line.
     */
    static List<Link> links(Markdown doc) {
        List<Link> links = new ArrayList<>();
        List<Integer> prose = doc.prose();
        int i = 0;
        while (i < prose.size()) {
            int first = prose.get(i);
            int last = first;
            while (i + 1 < prose.size() && prose.get(i + 1) == last + 1 && !doc.lines().get(last + 1).isBlank()) {
                last = prose.get(++i);
            }
            i++;
            for (int line = first; line <= last; line++) {
                Matcher reference = REFERENCE.matcher(doc.lines().get(line));
                if (reference.matches()) {
                    links.add(new Link(line + 1, reference.group(1)));
                }
            }
            // Code spans go, their line breaks stay, so a link's line can still be counted.
            String paragraph = CODE_SPAN.matcher(String.join("\n", doc.lines().subList(first, last + 1)))
                    .replaceAll(span -> span.group().replaceAll("[^\n]", ""));
            Matcher link = LINK.matcher(paragraph);
            while (link.find()) {
                int line = first + 1 + (int) paragraph.substring(0, link.start()).chars().filter(c -> c == '\n').count();
                links.add(new Link(line, link.group(1)));
            }
        }
        return links;
    }

    private static Markdown parse(String path, List<String> lines) {
        List<Block> blocks = new ArrayList<>();
        List<Integer> prose = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            Matcher open = FENCE.matcher(lines.get(i));
            if (!open.matches()) {
                prose.add(i);
                continue;
            }
            int end = i + 1;
            while (end < lines.size() && !lines.get(end).startsWith(open.group(1))) {
                end++;
            }
            int before = i - 1;
            while (before >= 0 && lines.get(before).isBlank()) {
                before--;
            }
            blocks.add(new Block(i + 1, open.group(2), String.join("\n", lines.subList(i + 1, Math.min(end, lines.size()))),
                    before >= 0 ? lines.get(before).strip() : ""));
            i = end;
        }
        return new Markdown(path, List.copyOf(lines), List.copyOf(blocks), List.copyOf(prose));
    }

    /** The lines between the tag's markers, less their common indentation; null when there is no such tag. */
    private static String region(List<String> lines, String tag) {
        int start = -1;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).contains("tag::" + tag + "[]") && !lines.get(i).contains("end::")) {
                start = i + 1;
            } else if (start >= 0 && lines.get(i).contains("end::" + tag + "[]")) {
                List<String> region = lines.subList(start, i);
                int indent = region.stream().filter(line -> !line.isBlank())
                        .mapToInt(line -> line.length() - line.stripLeading().length()).min().orElse(0);
                return String.join("\n", region.stream()
                        .map(line -> line.isBlank() ? "" : line.substring(indent)).toList());
            }
        }
        return null;
    }

    private static String normalized(String text) {
        return String.join("\n", text.strip().lines().map(String::stripTrailing).toList());
    }

    private static Path repositoryRoot() {
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !(Files.isRegularFile(dir.resolve("README.md")) && Files.isDirectory(dir.resolve(".ci")))) {
            dir = dir.getParent();
        }
        assertThat(dir).as("the repository root (README.md and .ci) above the working directory").isNotNull();
        return dir;
    }
}
