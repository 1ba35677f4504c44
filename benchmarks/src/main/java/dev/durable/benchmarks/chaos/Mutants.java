package dev.durable.benchmarks.chaos;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The mutation check's patcher: applies one known-bad change of {@code benchmarks/mutants.txt} to a
 * throwaway copy of the sources (never to the real ones). JDK only, so {@code benchmarks/chaos-mutants}
 * runs it as a source file before anything is built.
 *
 * <pre>
 * java Mutants.java list FILE             a line a mutant: its name, whether lost or stuck rows alone
 *                                         catch it (true or false), the chaos arguments it needs beyond
 *                                         the run's own (none, or several words)
 * java Mutants.java describe FILE NAME    its one-line description
 * java Mutants.java apply FILE NAME COPY  applies it under the directory COPY
 * </pre>
 *
 * The file holds blocks like this, a {@code file}/{@code find}/{@code replace} triple per change
 * (the find text must occur exactly once in the file, or the patcher stops and says which mutant and
 * which pattern: re-point the pattern when the engine's statements move):
 *
 * <pre>
 * mutant NAME: what it breaks
 * args --redis                   (optional: what the chaos run needs to reach the change)
 * liveness                       (optional: the change breaks recovery, not safety, so rows the run
 *                                 lost or left stuck catch it, as no safety invariant can)
 * file path/from/the/root.java
 * find
 * ...exact lines...
 * replace
 * ...lines (none to delete)...
 * end
 * </pre>
 */
public final class Mutants {

    record Change(String file, String find, String replace) {
    }

    record Mutant(String name, String description, String args, boolean liveness, List<Change> changes) {
    }

    private Mutants() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            throw new IllegalArgumentException("usage: Mutants list|describe|apply FILE [NAME [COPY]]");
        }
        List<Mutant> mutants = parse(Path.of(args[1]));
        switch (args[0]) {
            case "list" -> mutants.forEach(mutant -> System.out.println(
                    (mutant.name() + " " + mutant.liveness() + " " + mutant.args()).strip()));
            case "describe" -> System.out.println(find(mutants, args[2]).description());
            case "apply" -> apply(find(mutants, args[2]), Path.of(args[3]));
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    private static Mutant find(List<Mutant> mutants, String name) {
        return mutants.stream().filter(mutant -> mutant.name().equals(name)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no mutant named " + name));
    }

    static void apply(Mutant mutant, Path copy) throws IOException {
        for (Change change : mutant.changes()) {
            Path file = copy.resolve(change.file());
            if (!Files.isRegularFile(file)) {
                fail(mutant, "its file " + change.file() + " does not exist");
            }
            String text = Files.readString(file, StandardCharsets.UTF_8);
            int at = text.indexOf(change.find());
            if (at < 0) {
                fail(mutant, "its pattern is not in " + change.file() + " (re-point it):\n" + change.find());
            }
            if (text.indexOf(change.find(), at + 1) >= 0) {
                fail(mutant, "its pattern occurs more than once in " + change.file() + ":\n" + change.find());
            }
            Files.writeString(file, text.substring(0, at) + change.replace() + text.substring(at + change.find().length()),
                    StandardCharsets.UTF_8);
        }
        System.out.println("applied " + mutant.name() + " (" + mutant.changes().size() + " change(s))");
    }

    private static void fail(Mutant mutant, String why) {
        System.err.println("mutant " + mutant.name() + ": " + why);
        System.exit(2);
    }

    static List<Mutant> parse(Path path) throws IOException {
        List<Mutant> mutants = new ArrayList<>();
        List<String> lines = Files.readAllLines(path, StandardCharsets.UTF_8);
        String name = null;
        String description = null;
        String runArgs = "";
        boolean liveness = false;
        List<Change> changes = new ArrayList<>();
        String file = null;
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            if (line.startsWith("mutant ")) {
                if (name != null) {
                    mutants.add(new Mutant(name, description, runArgs, liveness, List.copyOf(changes)));
                }
                int colon = line.indexOf(':');
                name = line.substring("mutant ".length(), colon < 0 ? line.length() : colon).strip();
                description = colon < 0 ? name : line.substring(colon + 1).strip();
                runArgs = "";
                liveness = false;
                changes.clear();
            } else if (line.equals("liveness")) {
                liveness = true;
            } else if (line.startsWith("args ")) {
                runArgs = line.substring("args ".length()).strip();
            } else if (line.startsWith("file ")) {
                file = line.substring("file ".length()).strip();
            } else if (line.equals("find")) {
                StringBuilder find = new StringBuilder();
                StringBuilder replace = new StringBuilder();
                StringBuilder into = find;
                for (i++; i < lines.size() && !lines.get(i).equals("end"); i++) {
                    if (lines.get(i).equals("replace")) {
                        into = replace;
                        continue;
                    }
                    into.append(lines.get(i)).append('\n');
                }
                if (name == null || file == null || find.isEmpty()) {
                    throw new IllegalArgumentException(path + ": a find block needs a mutant, a file and a pattern"
                            + " (near line " + i + ")");
                }
                changes.add(new Change(file, find.toString(), replace.toString()));
            }
        }
        if (name != null) {
            mutants.add(new Mutant(name, description, runArgs, liveness, List.copyOf(changes)));
        }
        return mutants;
    }
}
