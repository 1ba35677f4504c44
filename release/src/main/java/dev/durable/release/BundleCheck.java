package dev.durable.release;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

/**
 * Checks the release bundle (a zip laid out as a Maven repository) before anyone uploads it: what a central
 * repository refuses, found here first.
 *
 * <p>For each expected artifact ({@code artifactId:jar} or {@code artifactId:pom}): its POM, and for a jar
 * its jar, sources jar and javadoc jar (not empty); an {@code .md5} and {@code .sha1} beside every file,
 * matching it; an {@code .asc} beside every file once any file is signed. Each POM names a name,
 * description, url, licence, SCM (url and connection) and developers, itself or through its parent in the
 * bundle. The BOM ({@code durable-bom}) lists every jar. Nothing else is in the bundle (an unpublished
 * module deployed by mistake fails it).
 *
 * <p>{@code main(bundle.zip, groupId, version, artifactId:packaging...)}.
 */
public final class BundleCheck {

    private static final String BOM = "durable-bom";
    private static final List<String> CHECKSUMS = List.of(".md5", ".sha1");

    private BundleCheck() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 4) {
            throw new IllegalArgumentException(
                    "usage: BundleCheck <bundle.zip> <groupId> <version> <artifactId>:jar|pom...");
        }
        Path zip = Path.of(args[0]);
        Map<String, String> expected = new LinkedHashMap<>();
        for (int i = 3; i < args.length; i++) {
            String[] artifact = args[i].split(":", 2);
            expected.put(artifact[0], artifact[1]);
        }
        List<String> problems = check(read(zip), args[1], args[2], expected);
        if (!problems.isEmpty()) {
            problems.forEach(problem -> System.out.println("  " + problem));
            throw new IllegalStateException("The release bundle " + zip + " is not publishable: "
                    + problems.size() + " problem(s) above");
        }
        System.out.println("Release bundle " + zip + ": " + expected.size()
                + " artifacts, each with its POM (licence, SCM, developers), sources and javadoc, and checksums");
    }

    /** Every file of the zip, by path. */
    static Map<String, byte[]> read(Path zip) throws IOException {
        Map<String, byte[]> files = new TreeMap<>();
        try (InputStream in = Files.newInputStream(zip); ZipInputStream entries = new ZipInputStream(in)) {
            for (ZipEntry entry; (entry = entries.getNextEntry()) != null; ) {
                if (!entry.isDirectory()) {
                    files.put(entry.getName(), entries.readAllBytes());
                }
            }
        }
        return files;
    }

    /** What is wrong with the bundle's files; empty when it is publishable. */
    static List<String> check(Map<String, byte[]> files, String groupId, String version,
            Map<String, String> expected) {
        List<String> problems = new ArrayList<>();
        String groupPath = groupId.replace('.', '/') + "/";
        boolean signed = files.keySet().stream().anyMatch(name -> name.endsWith(".asc"));

        Set<String> found = new TreeSet<>();
        for (String name : files.keySet()) {
            if (!name.startsWith(groupPath)) {
                problems.add("outside " + groupId + ": " + name);
                continue;
            }
            String artifactId = name.substring(groupPath.length()).split("/")[0];
            found.add(artifactId);
            if (!expected.containsKey(artifactId)) {
                problems.add("not a published artifact: " + name);
            }
        }

        Map<String, Document> poms = new TreeMap<>();
        for (Map.Entry<String, String> artifact : expected.entrySet()) {
            String artifactId = artifact.getKey();
            String dir = groupPath + artifactId + "/" + version + "/";
            Map<String, String> main = mainFiles(files, dir, artifactId);
            List<String> needed = artifact.getValue().equals("jar")
                    ? List.of(".pom", ".jar", "-sources.jar", "-javadoc.jar")
                    : List.of(".pom");
            for (String kind : needed) {
                String file = main.get(kind);
                if (file == null) {
                    problems.add(artifactId + ": no " + describe(kind) + " in " + dir);
                    continue;
                }
                problems.addAll(checksums(files, file));
                if (signed && !files.containsKey(file + ".asc")) {
                    problems.add(artifactId + ": " + file + " is not signed (other files are)");
                }
                if (kind.endsWith(".jar") && !kind.equals(".jar")) {
                    problems.addAll(nonEmpty(artifactId, kind, file, files.get(file)));
                }
            }
            String pom = main.get(".pom");
            if (pom != null) {
                poms.put(artifactId, parse(files.get(pom)));
            }
        }

        for (Map.Entry<String, Document> pom : poms.entrySet()) {
            problems.addAll(metadata(pom.getKey(), pom.getValue(), poms));
        }
        Document bom = poms.get(BOM);
        if (expected.containsKey(BOM) && bom != null) {
            Set<String> listed = new TreeSet<>();
            for (Element dependency : children(first(bom.getDocumentElement(), "dependencyManagement"),
                    "dependencies", "dependency")) {
                listed.add(text(dependency, "artifactId"));
            }
            expected.forEach((artifactId, packaging) -> {
                if (packaging.equals("jar") && !listed.contains(artifactId)) {
                    problems.add(BOM + ": does not list " + artifactId);
                }
            });
        }
        return problems;
    }

    /**
     * The artifact's files in its version directory by kind ({@code .pom}, {@code .jar}, {@code -sources.jar},
     * {@code -javadoc.jar}), whether the version is a release ({@code x-0.1.0.jar}) or a deployed snapshot
     * ({@code x-0.1.0-20261207.101010-1.jar}).
     */
    private static Map<String, String> mainFiles(Map<String, byte[]> files, String dir, String artifactId) {
        Map<String, String> byKind = new TreeMap<>();
        for (String name : files.keySet()) {
            if (!name.startsWith(dir) || name.substring(dir.length()).contains("/")) {
                continue;
            }
            String file = name.substring(dir.length());
            if (!file.startsWith(artifactId + "-")) {
                continue;
            }
            for (String kind : List.of("-sources.jar", "-javadoc.jar", ".pom", ".jar")) {
                if (file.endsWith(kind)) {
                    if (kind.equals(".jar") && file.matches(".*-[a-z]+\\.jar")
                            && !file.matches(".*-\\d+\\.jar") && !file.matches(".*-SNAPSHOT\\.jar")) {
                        break; // a classified jar (tests): not the main one
                    }
                    byKind.putIfAbsent(kind, name);
                    break;
                }
            }
        }
        return byKind;
    }

    private static String describe(String kind) {
        return switch (kind) {
            case ".pom" -> "POM";
            case ".jar" -> "jar";
            case "-sources.jar" -> "sources jar";
            case "-javadoc.jar" -> "javadoc jar";
            default -> kind;
        };
    }

    private static List<String> checksums(Map<String, byte[]> files, String file) {
        List<String> problems = new ArrayList<>();
        for (String extension : CHECKSUMS) {
            byte[] sum = files.get(file + extension);
            if (sum == null) {
                problems.add("no checksum " + file + extension);
            } else if (!new String(sum).strip().startsWith(digest(extension, files.get(file)))) {
                problems.add("wrong checksum " + file + extension);
            }
        }
        return problems;
    }

    private static String digest(String extension, byte[] content) {
        try {
            String algorithm = extension.equals(".md5") ? "MD5" : "SHA-1";
            return HexFormat.of().formatHex(MessageDigest.getInstance(algorithm).digest(content));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A sources jar with a source file in it, a javadoc jar with an index page. */
    private static List<String> nonEmpty(String artifactId, String kind, String file, byte[] jar) {
        String wanted = kind.equals("-sources.jar") ? "a .java or .kt file" : "index.html";
        try (ZipInputStream entries = new ZipInputStream(new ByteArrayInputStream(jar))) {
            for (ZipEntry entry; (entry = entries.getNextEntry()) != null; ) {
                String name = entry.getName();
                if (kind.equals("-sources.jar") ? name.endsWith(".java") || name.endsWith(".kt")
                        : name.equals("index.html")) {
                    return List.of();
                }
            }
        } catch (IOException e) {
            return List.of(artifactId + ": " + file + " is not a jar (" + e.getMessage() + ")");
        }
        return List.of(artifactId + ": " + file + " has no " + wanted);
    }

    /** The elements a central repository requires of a POM, found in it or in its parent in the bundle. */
    private static List<String> metadata(String artifactId, Document pom, Map<String, Document> poms) {
        List<String> problems = new ArrayList<>();
        Map<String, String> required = new LinkedHashMap<>();
        required.put("name", "name");
        required.put("description", "description");
        required.put("url", "url");
        required.put("licenses/license/name", "licence");
        required.put("licenses/license/url", "licence url");
        required.put("scm/url", "SCM url");
        required.put("scm/connection", "SCM connection");
        required.put("developers/developer/id", "developers");
        required.forEach((path, what) -> {
            if (inherited(pom, path.split("/"), poms) == null) {
                problems.add(artifactId + ": the POM has no " + what + " (" + path + "), nor does its parent");
            }
        });
        return problems;
    }

    private static String inherited(Document pom, String[] path, Map<String, Document> poms) {
        String own = value(pom.getDocumentElement(), path);
        if (own != null || path[0].equals("name") || path[0].equals("description")) {
            return own; // name and description are the module's own
        }
        Element parent = first(pom.getDocumentElement(), "parent");
        Document parentPom = parent == null ? null : poms.get(text(parent, "artifactId"));
        return parentPom == null ? null : inherited(parentPom, path, poms);
    }

    private static String value(Element element, String[] path) {
        Element at = element;
        for (String name : path) {
            at = at == null ? null : first(at, name);
        }
        String text = at == null ? null : at.getTextContent().strip();
        return text == null || text.isEmpty() ? null : text;
    }

    private static Document parse(byte[] pom) {
        try {
            return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(new ByteArrayInputStream(pom));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (Exception e) {
            throw new IllegalStateException("not a POM: " + e.getMessage(), e);
        }
    }

    private static Element first(Element parent, String name) {
        for (Node child = parent.getFirstChild(); child != null; child = child.getNextSibling()) {
            if (child instanceof Element element && element.getTagName().equals(name)) {
                return element;
            }
        }
        return null;
    }

    private static List<Element> children(Element parent, String list, String name) {
        List<Element> found = new ArrayList<>();
        Element container = parent == null ? null : first(parent, list);
        if (container == null) {
            return found;
        }
        for (Node child = container.getFirstChild(); child != null; child = child.getNextSibling()) {
            if (child instanceof Element element && element.getTagName().equals(name)) {
                found.add(element);
            }
        }
        return found;
    }

    private static String text(Element parent, String name) {
        Element child = first(parent, name);
        return child == null ? null : child.getTextContent().strip();
    }
}
