package dev.durable.support;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.jar.JarFile;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * The main jar a module's {@code package} phase built (under {@code target/}), read by failsafe ITs:
 * what the jar carries, and the dependencies its embedded pom declares at compile scope.
 */
public final class BuiltJar {

    private final Path path;

    private BuiltJar(Path path) {
        this.path = path;
    }

    /** The module's main jar in {@code target/} (not its test or sources jar); fails if none was built. */
    public static BuiltJar of(String artifactId) {
        Path target = Path.of("target");
        try (Stream<Path> files = Files.list(target)) {
            Path jar = files.filter(file -> {
                        String name = file.getFileName().toString();
                        return name.startsWith(artifactId + "-") && name.endsWith(".jar") && !name.endsWith("-tests.jar")
                                && !name.endsWith("-sources.jar") && !name.endsWith("-javadoc.jar");
                    })
                    .findFirst()
                    .orElseThrow(() -> new AssertionError("no " + artifactId + " jar in " + target.toAbsolutePath()
                            + ": run through the package phase (mvn verify)"));
            return new BuiltJar(jar);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public Path path() {
        return path;
    }

    /** Every entry's name. */
    public List<String> entries() {
        try (JarFile jar = new JarFile(path.toFile())) {
            return Collections.list(jar.entries()).stream().map(entry -> entry.getName()).toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** groupId:artifactId of each dependency the jar's embedded pom declares at compile (or no) scope. */
    public List<String> compileDependencies(String groupId, String artifactId) {
        String pom = "META-INF/maven/" + groupId + "/" + artifactId + "/pom.xml";
        try (JarFile jar = new JarFile(path.toFile())) {
            var entry = jar.getEntry(pom);
            if (entry == null) {
                throw new AssertionError(path + " has no " + pom);
            }
            try (InputStream in = jar.getInputStream(entry)) {
                var factory = DocumentBuilderFactory.newInstance();
                factory.setNamespaceAware(false);
                Element project = factory.newDocumentBuilder().parse(in).getDocumentElement();
                List<String> found = new ArrayList<>();
                NodeList dependencies = project.getElementsByTagName("dependency");
                for (int i = 0; i < dependencies.getLength(); i++) {
                    Element dependency = (Element) dependencies.item(i);
                    // Only the module's own dependencies, not its dependencyManagement.
                    if (!"dependencies".equals(dependency.getParentNode().getNodeName())
                            || !"project".equals(dependency.getParentNode().getParentNode().getNodeName())) {
                        continue;
                    }
                    String scope = text(dependency, "scope");
                    if (scope == null || scope.equals("compile")) {
                        found.add(text(dependency, "groupId") + ":" + text(dependency, "artifactId"));
                    }
                }
                return found;
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (Exception e) {
            throw new IllegalStateException("cannot read " + pom + " in " + path, e);
        }
    }

    private static String text(Element parent, String tag) {
        NodeList nodes = parent.getElementsByTagName(tag);
        return nodes.getLength() == 0 ? null : nodes.item(0).getTextContent().strip();
    }
}
