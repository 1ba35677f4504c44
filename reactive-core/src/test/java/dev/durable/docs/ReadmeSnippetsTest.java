package dev.durable.docs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Every code block of the READMEs in a language the build compiles (Java, Kotlin) or loads
 * (properties) is a copy of code in a test source, named by the marker on the line before it:
 * {@code <!-- snippet: path/from/repository/root#tag -->} for the lines between
 * {@code tag::tag[]} and {@code end::tag[]}, or without {@code #tag} for the whole file. The test
 * that holds it compiles and runs it; this test fails when the README and the code part ways, or
 * when a block has no marker.
 */
class ReadmeSnippetsTest {

    private static final List<String> READMES = List.of("README.md", "examples/webflux-service/README.md");
    private static final List<String> CHECKED = List.of("java", "kotlin", "properties");
    private static final Pattern MARKER = Pattern.compile("<!-- snippet: ([^#\\s]+)(?:#([\\w-]+))? -->");
    private static final Pattern FENCE = Pattern.compile("^```\\s*([\\w-]*)\\s*$");

    record Block(String readme, int line, String language, String text, String marker) {
    }

    @Test
    void everyJavaKotlinAndPropertiesBlockIsCodeTheBuildRuns() throws IOException {
        Path root = repositoryRoot();
        List<Block> blocks = new ArrayList<>();
        for (String readme : READMES) {
            blocks.addAll(blocks(root, readme));
        }
        assertThat(blocks).as("checked blocks").hasSizeGreaterThan(5);
        List<String> problems = new ArrayList<>();
        for (Block block : blocks) {
            String where = block.readme() + ":" + block.line();
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
                        + "\n--- README\n" + block.text() + "\n--- code\n" + expected);
            }
        }
        assertThat(problems).as("README blocks that are not the code the build runs").isEmpty();
    }

    @Test
    void theQuickStartsSecondLineIsTheTestCommandCiRuns() throws IOException {
        // .ci/run takes the second line of the first code block under "## Quick start".
        List<String> lines = Files.readAllLines(repositoryRoot().resolve("README.md"));
        int start = lines.indexOf("## Quick start");
        assertThat(start).isNotNegative();
        int fence = start;
        while (!lines.get(fence).startsWith("```")) {
            fence++;
        }
        assertThat(lines.get(fence + 1)).startsWith("mvn ").contains("exec:java");
        assertThat(lines.get(fence + 2)).isEqualTo("mvn -B verify");
    }

    private static List<Block> blocks(Path root, String readme) throws IOException {
        List<String> lines = Files.readAllLines(root.resolve(readme));
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            Matcher open = FENCE.matcher(lines.get(i));
            if (!open.matches()) {
                continue;
            }
            int end = i + 1;
            while (end < lines.size() && !lines.get(end).startsWith("```")) {
                end++;
            }
            String language = open.group(1);
            if (CHECKED.contains(language)) {
                int before = i - 1;
                while (before >= 0 && lines.get(before).isBlank()) {
                    before--;
                }
                blocks.add(new Block(readme, i + 1, language, String.join("\n", lines.subList(i + 1, end)),
                        before >= 0 ? lines.get(before).strip() : ""));
            }
            i = end;
        }
        return blocks;
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
