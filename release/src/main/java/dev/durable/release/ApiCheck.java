package dev.durable.release;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;
import java.util.stream.Stream;

/**
 * The API-compatibility check: each published module's public API, read from its compiled classes, against
 * the baseline recorded in {@code release/api/<artifactId>.api}.
 *
 * <p>The API is every public or protected class outside packages named {@code internal}, nested classes
 * only when their enclosing classes are API too, with its public and protected members, in javap's
 * notation (full generic signatures, {@code throws} clauses). One line per class, one indented line per
 * member, sorted, so a change reads as a one-line diff in review.
 *
 * <p>Any difference fails the build. A baseline line that the classes no longer have is a removed or
 * changed signature: code compiled against the baseline breaks, so it must be announced (re-recorded
 * and listed under "Breaking" in CHANGELOG.md). A line the classes have and the baseline lacks is an
 * addition: harmless to callers, but it must be recorded too, so that the baseline is exactly the API
 * and a later removal of that addition is caught, and every API change shows in the diff of a reviewed
 * file.
 *
 * <p>{@code main(baselineDir, mode, artifactId=classes...)}: mode {@code check} or {@code record}; the
 * classes are a jar or a directory.
 */
public final class ApiCheck {

    /** The command that re-records every baseline (docs/operations.md#releasing says the same). */
    public static final String RECORD_COMMAND =
            "mvn -B -pl release -am verify -DskipTests -Ddurable.api.record";

    private static final Pattern CLASS_NAME = Pattern.compile("\\b(?:class|interface) ([^\\s<]+)");

    private ApiCheck() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 3 || !(args[1].equals("check") || args[1].equals("record"))) {
            throw new IllegalArgumentException(
                    "usage: ApiCheck <baselineDir> check|record <artifactId>=<jar or classes directory>...");
        }
        Path baselineDir = Path.of(args[0]);
        boolean record = args[1].equals("record");
        List<String> failures = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            String[] module = args[i].split("=", 2);
            String artifactId = module[0];
            SortedMap<String, ClassApi> api = read(Path.of(module[1]));
            Path baselineFile = baselineDir.resolve(artifactId + ".api");
            SortedMap<String, ClassApi> baseline = Files.exists(baselineFile)
                    ? parse(Files.readAllLines(baselineFile, StandardCharsets.UTF_8))
                    : new TreeMap<>();
            Diff diff = diff(baseline, api);
            if (record) {
                boolean first = !Files.exists(baselineFile);
                Files.createDirectories(baselineDir);
                Files.writeString(baselineFile, render(artifactId, api), StandardCharsets.UTF_8);
                if (first || diff.isEmpty()) {
                    System.out.println("API of " + artifactId + (first ? ": recorded, " : ": unchanged, ")
                            + api.size() + " classes in " + baselineFile);
                } else {
                    System.out.println("API of " + artifactId + " recorded in " + baselineFile + ":\n"
                            + diff.report() + (diff.breaking() ? "Announce the removals (-) under \"### Breaking\""
                                    + " in the Unreleased section of CHANGELOG.md.\n" : ""));
                }
            } else if (!Files.exists(baselineFile)) {
                failures.add(artifactId + " has no recorded API (" + baselineFile + "): record it with\n  "
                        + RECORD_COMMAND + "\n");
            } else if (!diff.isEmpty()) {
                failures.add(failure(artifactId, baselineFile, diff));
            } else {
                System.out.println("API of " + artifactId + ": as recorded (" + api.size() + " classes)");
            }
        }
        if (!failures.isEmpty()) {
            String message = String.join("\n", failures);
            System.out.println(message);
            // Thrown, not System.exit: the check runs inside Maven's JVM (exec:java).
            throw new IllegalStateException("API check failed: the compiled public API differs from the"
                    + " recorded baseline (above)");
        }
    }

    /** What the build prints when a module's API differs from its baseline. */
    static String failure(String artifactId, Path baselineFile, Diff diff) {
        StringBuilder out = new StringBuilder()
                .append("API of ").append(artifactId).append(" differs from ").append(baselineFile).append(":\n")
                .append(diff.report());
        if (diff.breaking()) {
            out.append("Lines marked - are removed or changed public signatures: code compiled against the"
                            + " recorded API breaks.\n")
                    .append("If the break is meant, announce it:\n")
                    .append("  1. re-record the baseline: ").append(RECORD_COMMAND).append('\n')
                    .append("  2. add an entry under \"### Breaking\" in the \"## [Unreleased]\" section of"
                            + " CHANGELOG.md: what changed and what callers do instead.\n")
                    .append("If it is not meant, put the signatures back.\n");
        } else {
            out.append("Only additions (+): record them so the baseline stays exactly the API:\n  ")
                    .append(RECORD_COMMAND).append('\n');
        }
        return out.toString();
    }

    /** The public API in the classes under {@code classes}, a jar or a directory, by class name. */
    public static SortedMap<String, ClassApi> read(Path classes) throws IOException {
        if (Files.isDirectory(classes)) {
            return read(classes, classes);
        }
        try (FileSystem jar = FileSystems.newFileSystem(classes)) {
            return read(jar.getPath("/"), classes);
        }
    }

    private static SortedMap<String, ClassApi> read(Path root, Path classpath) throws IOException {
        List<String> names;
        try (Stream<Path> files = Files.walk(root)) {
            names = files.map(root::relativize)
                    .map(Path::toString)
                    .filter(name -> name.endsWith(".class") && !name.startsWith("META-INF"))
                    .map(name -> name.substring(0, name.length() - ".class".length()).replace('/', '.'))
                    .filter(name -> !name.endsWith("module-info") && !name.endsWith("package-info"))
                    .filter(name -> !isInternal(name))
                    .sorted()
                    .toList();
        }
        Map<String, ClassApi> all = new LinkedHashMap<>();
        if (names.isEmpty()) {
            return new TreeMap<>();
        }
        for (ClassApi type : javap(classpath, names)) {
            all.put(type.name(), type);
        }
        SortedMap<String, ClassApi> api = new TreeMap<>();
        for (ClassApi type : all.values()) {
            if (isApi(type, all)) {
                api.put(type.name(), type);
            }
        }
        return api;
    }

    private static boolean isInternal(String className) {
        String[] parts = className.split("\\.");
        for (int i = 0; i < parts.length - 1; i++) {
            if (parts[i].equals("internal")) {
                return true;
            }
        }
        return false;
    }

    /** Public or protected, and so is every class it is nested in. */
    private static boolean isApi(ClassApi type, Map<String, ClassApi> all) {
        if (!isPublicOrProtected(type.header())) {
            return false;
        }
        int nested = type.name().lastIndexOf('$');
        if (nested < 0) {
            return true;
        }
        ClassApi outer = all.get(type.name().substring(0, nested));
        return outer != null && isApi(outer, all);
    }

    private static boolean isPublicOrProtected(String declaration) {
        return declaration.startsWith("public ") || declaration.startsWith("protected ");
    }

    /** javap -protected over every class at once (in this JVM: a few hundred classes take a second). */
    private static List<ClassApi> javap(Path classpath, List<String> names) {
        ToolProvider javap = ToolProvider.findFirst("javap")
                .orElseThrow(() -> new IllegalStateException("javap not found: the check needs a JDK"));
        List<String> args = new ArrayList<>(List.of("-protected", "-cp", classpath.toString()));
        args.addAll(names);
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int exit = javap.run(new PrintWriter(out), new PrintWriter(err), args.toArray(String[]::new));
        if (exit != 0) {
            throw new IllegalStateException("javap failed (" + exit + "): " + err);
        }
        List<ClassApi> types = new ArrayList<>();
        String header = null;
        SortedSet<String> members = new TreeSet<>();
        for (String line : out.toString().split("\n")) {
            if (line.startsWith("Compiled from") || line.isBlank()) {
                continue;
            }
            if (header == null) {
                header = line.substring(0, line.length() - " {".length()).strip();
            } else if (line.equals("}")) {
                types.add(new ClassApi(className(header), header, members));
                header = null;
                members = new TreeSet<>();
            } else {
                String member = line.strip();
                member = member.substring(0, member.length() - 1); // the ';'
                if (isPublicOrProtected(member)) {
                    members.add(member);
                }
            }
        }
        return types;
    }

    private static String className(String header) {
        Matcher name = CLASS_NAME.matcher(header);
        if (!name.find()) {
            throw new IllegalStateException("not a class declaration: " + header);
        }
        return name.group(1);
    }

    /** The baseline file's text: a comment, then each class's line and its members' indented lines. */
    public static String render(String artifactId, SortedMap<String, ClassApi> api) {
        StringBuilder out = new StringBuilder()
                .append("# The public API of ").append(artifactId)
                .append(" (public and protected; packages named internal are not API).\n")
                .append("# Checked by mvn verify (release/). Re-record: ").append(RECORD_COMMAND).append('\n')
                .append("# and list any removed or changed line under \"### Breaking\" in CHANGELOG.md.\n");
        for (ClassApi type : api.values()) {
            out.append(type.header()).append('\n');
            for (String member : type.members()) {
                out.append("  ").append(member).append('\n');
            }
        }
        return out.toString();
    }

    /** Reads what {@link #render} wrote (comments and blank lines are skipped). */
    public static SortedMap<String, ClassApi> parse(List<String> lines) {
        SortedMap<String, ClassApi> api = new TreeMap<>();
        ClassApi current = null;
        for (String line : lines) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            if (line.startsWith(" ")) {
                if (current == null) {
                    throw new IllegalArgumentException("a member before any class: " + line);
                }
                current.members().add(line.strip());
            } else {
                current = new ClassApi(className(line), line.strip(), new TreeSet<>());
                api.put(current.name(), current);
            }
        }
        return api;
    }

    /** What the baseline has and the classes lack (removed), and the other way round (added). */
    public static Diff diff(SortedMap<String, ClassApi> baseline, SortedMap<String, ClassApi> api) {
        SortedMap<String, List<String>> lines = new TreeMap<>();
        boolean breaking = false;
        TreeSet<String> names = new TreeSet<>(baseline.keySet());
        names.addAll(api.keySet());
        for (String name : names) {
            ClassApi before = baseline.get(name);
            ClassApi after = api.get(name);
            List<String> changes = new ArrayList<>();
            if (after == null) {
                changes.add("- " + before.header() + "   (the whole class)");
                breaking = true;
            } else if (before == null) {
                changes.add("+ " + after.header() + "   (a new class, " + after.members().size() + " members)");
            } else {
                if (!before.header().equals(after.header())) {
                    changes.add("- " + before.header());
                    changes.add("+ " + after.header());
                    breaking = true;
                }
                for (String member : before.members()) {
                    if (!after.members().contains(member)) {
                        changes.add("-   " + member);
                        breaking = true;
                    }
                }
                for (String member : after.members()) {
                    if (!before.members().contains(member)) {
                        changes.add("+   " + member);
                    }
                }
            }
            if (!changes.isEmpty()) {
                lines.put(name, changes);
            }
        }
        return new Diff(lines, breaking);
    }

    /** One class: its name, its declaration line and its members' lines. */
    public record ClassApi(String name, String header, SortedSet<String> members) {
        public ClassApi {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(header, "header");
            Objects.requireNonNull(members, "members");
        }
    }

    /** The differences by class; breaking when anything recorded is gone or changed. */
    public record Diff(SortedMap<String, List<String>> changes, boolean breaking) {
        public boolean isEmpty() {
            return changes.isEmpty();
        }

        /** The differences, one class after the other, {@code -} for the baseline's lines, {@code +} for new ones. */
        public String report() {
            StringBuilder out = new StringBuilder();
            changes.forEach((name, lines) -> {
                out.append("  ").append(name).append('\n');
                lines.forEach(line -> out.append("    ").append(line).append('\n'));
            });
            return out.toString();
        }
    }
}
