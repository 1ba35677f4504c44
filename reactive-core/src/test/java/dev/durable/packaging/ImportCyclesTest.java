package dev.durable.packaging;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * No two classes of the build depend on each other through their imports, in any module: a reader
 * can take a class's dependencies as a tree, and a change can be made bottom up. A class depends
 * on another when it imports it (a nested or static import counts for its top-level class) or
 * names it fully qualified in its code; classes of one package need no import, and references
 * among them do not count. Every main source of every module is read, Java and Kotlin.
 */
class ImportCyclesTest {

    private static final Pattern PACKAGE = Pattern.compile("^package\\s+([\\w.]+)", Pattern.MULTILINE);
    private static final Pattern IMPORT = Pattern.compile("^import\\s+(?:static\\s+)?(dev\\.durable\\.[\\w.]+)",
            Pattern.MULTILINE);
    /** A fully qualified name in code: lower-case package segments, then an upper-case class name. */
    private static final Pattern QUALIFIED = Pattern.compile("\\bdev\\.durable(?:\\.[a-z]\\w*)*\\.[A-Z]\\w*");
    private static final Pattern COMMENTS = Pattern.compile("/\\*.*?\\*/|//[^\\n]*", Pattern.DOTALL);

    @Test
    void noClassOfAnyModuleDependsOnItselfThroughOthers() throws IOException {
        Map<String, Set<String>> graph = dependencies(sources(repositoryRoot()));
        assertThat(graph).as("classes read").hasSizeGreaterThan(200);
        List<List<String>> cycles = new ArrayList<>();
        for (Set<String> component : stronglyConnected(graph)) {
            if (component.size() > 1) {
                cycles.add(cycleThrough(graph, component));
            }
        }
        assertThat(cycles).as("import cycles (each shown as a path back to its start)").isEmpty();
    }

    @Test
    void theCheckFindsACycle() {
        Map<String, Set<String>> graph = new TreeMap<>();
        graph.put("a.A", new TreeSet<>(Set.of("b.B")));
        graph.put("b.B", new TreeSet<>(Set.of("c.C")));
        graph.put("c.C", new TreeSet<>(Set.of("a.A")));
        graph.put("d.D", new TreeSet<>(Set.of("a.A")));
        List<Set<String>> components = stronglyConnected(graph).stream().filter(c -> c.size() > 1).toList();
        assertThat(components).containsExactly(Set.of("a.A", "b.B", "c.C"));
        assertThat(cycleThrough(graph, components.get(0))).containsExactly("a.A", "b.B", "c.C", "a.A");
    }

    /** Every main source file of the build, by its top-level class name. */
    private static Map<String, String> sources(Path root) throws IOException {
        Map<String, String> sources = new TreeMap<>();
        try (Stream<Path> files = Files.walk(root)) {
            for (Path file : files.filter(ImportCyclesTest::isMainSource).toList()) {
                String text = Files.readString(file);
                Matcher pkg = PACKAGE.matcher(text);
                if (!pkg.find()) {
                    continue;
                }
                String name = file.getFileName().toString().replaceAll("\\.(java|kt)$", "");
                if (!name.equals("package-info")) {
                    sources.put(pkg.group(1) + "." + name, text);
                }
            }
        }
        return sources;
    }

    private static boolean isMainSource(Path file) {
        String path = file.toString().replace('\\', '/');
        return (path.endsWith(".java") || path.endsWith(".kt")) && path.contains("/src/main/")
                && !path.contains("/target/") && !path.contains("/.git/");
    }

    /** Each class's dependencies on other classes of the build, outside its own package. */
    private static Map<String, Set<String>> dependencies(Map<String, String> sources) {
        Map<String, Set<String>> graph = new TreeMap<>();
        for (Map.Entry<String, String> source : sources.entrySet()) {
            String self = source.getKey();
            String pkg = self.substring(0, self.lastIndexOf('.'));
            String code = COMMENTS.matcher(source.getValue()).replaceAll(" ");
            Set<String> uses = new TreeSet<>();
            for (Pattern pattern : List.of(IMPORT, QUALIFIED)) {
                Matcher reference = pattern.matcher(code);
                while (reference.find()) {
                    String target = topLevel(reference.group(pattern == IMPORT ? 1 : 0), sources);
                    if (target != null && !target.equals(self)
                            && !target.substring(0, target.lastIndexOf('.')).equals(pkg)) {
                        uses.add(target);
                    }
                }
            }
            graph.put(self, uses);
        }
        return graph;
    }

    /** The top-level class of the build a name starts with ({@code a.b.Outer.Inner.member} → {@code a.b.Outer}). */
    private static String topLevel(String name, Map<String, String> sources) {
        String candidate = name;
        while (candidate.contains(".")) {
            if (sources.containsKey(candidate)) {
                return candidate;
            }
            candidate = candidate.substring(0, candidate.lastIndexOf('.'));
        }
        return null;
    }

    /** Tarjan's strongly connected components, iteratively (deep graphs must not overflow the stack). */
    private static List<Set<String>> stronglyConnected(Map<String, Set<String>> graph) {
        Map<String, Integer> index = new HashMap<>();
        Map<String, Integer> low = new HashMap<>();
        Deque<String> stack = new ArrayDeque<>();
        Set<String> onStack = new TreeSet<>();
        List<Set<String>> components = new ArrayList<>();
        int[] counter = {0};
        for (String start : graph.keySet()) {
            if (index.containsKey(start)) {
                continue;
            }
            Deque<Map.Entry<String, java.util.Iterator<String>>> work = new ArrayDeque<>();
            index.put(start, counter[0]);
            low.put(start, counter[0]++);
            stack.push(start);
            onStack.add(start);
            work.push(Map.entry(start, graph.getOrDefault(start, Set.of()).iterator()));
            while (!work.isEmpty()) {
                String node = work.peek().getKey();
                java.util.Iterator<String> next = work.peek().getValue();
                if (next.hasNext()) {
                    String to = next.next();
                    if (!graph.containsKey(to)) {
                        continue;
                    }
                    if (!index.containsKey(to)) {
                        index.put(to, counter[0]);
                        low.put(to, counter[0]++);
                        stack.push(to);
                        onStack.add(to);
                        work.push(Map.entry(to, graph.get(to).iterator()));
                    } else if (onStack.contains(to)) {
                        low.put(node, Math.min(low.get(node), index.get(to)));
                    }
                    continue;
                }
                work.pop();
                if (!work.isEmpty()) {
                    String parent = work.peek().getKey();
                    low.put(parent, Math.min(low.get(parent), low.get(node)));
                }
                if (low.get(node).equals(index.get(node))) {
                    Set<String> component = new TreeSet<>();
                    String member;
                    do {
                        member = stack.pop();
                        onStack.remove(member);
                        component.add(member);
                    } while (!member.equals(node));
                    components.add(component);
                }
            }
        }
        return components;
    }

    /** A shortest path from the component's first class back to itself, inside the component. */
    private static List<String> cycleThrough(Map<String, Set<String>> graph, Set<String> component) {
        String start = component.iterator().next();
        Map<String, String> cameFrom = new HashMap<>();
        Deque<String> queue = new ArrayDeque<>(List.of(start));
        while (!queue.isEmpty()) {
            String node = queue.poll();
            for (String to : graph.get(node)) {
                if (!component.contains(to)) {
                    continue;
                }
                if (to.equals(start)) {
                    List<String> path = new ArrayList<>(List.of(start));
                    for (String at = node; !at.equals(start); at = cameFrom.get(at)) {
                        path.add(1, at);
                    }
                    path.add(start);
                    return path;
                }
                if (!cameFrom.containsKey(to)) {
                    cameFrom.put(to, node);
                    queue.add(to);
                }
            }
        }
        return List.copyOf(component);
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
