package dev.durable.release;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BundleCheckTest {

    private static final String DIR = "dev/durable/";
    private static final String VERSION = "0.1.0";

    private static final String PARENT_POM = """
            <project>
              <groupId>dev.durable</groupId><artifactId>durable-parent</artifactId><version>0.1.0</version>
              <name>Durable</name><description>Durable jobs.</description>
              <url>https://github.com/durable-dev/durable</url>
              <licenses><license><name>Apache License, Version 2.0</name>
                <url>https://www.apache.org/licenses/LICENSE-2.0.txt</url></license></licenses>
              <developers><developer><id>durable</id></developer></developers>
              <scm><connection>scm:git:https://github.com/durable-dev/durable.git</connection>
                <url>https://github.com/durable-dev/durable</url></scm>
            </project>
            """;

    private static final String CORE_POM = """
            <project>
              <parent><groupId>dev.durable</groupId><artifactId>durable-parent</artifactId><version>0.1.0</version></parent>
              <artifactId>durable-reactive-core</artifactId>
              <name>Durable reactive core</name><description>The engine.</description>
            </project>
            """;

    private static final String BOM_POM = PARENT_POM.replace("durable-parent", "durable-bom").replace("</project>", """
              <dependencyManagement><dependencies>
                <dependency><groupId>dev.durable</groupId><artifactId>durable-reactive-core</artifactId></dependency>
              </dependencies></dependencyManagement>
            </project>
            """);

    @TempDir
    Path temp;

    @Test
    void aCompleteBundlePasses() throws Exception {
        Path zip = zip(bundle());

        BundleCheck.main(args(zip));

        assertThat(BundleCheck.check(BundleCheck.read(zip), "dev.durable", VERSION, expected())).isEmpty();
    }

    @Test
    void aMissingSourcesJarFails() throws Exception {
        Map<String, byte[]> files = bundle();
        files.keySet().removeIf(name -> name.contains("-sources.jar"));

        assertThat(BundleCheck.check(files, "dev.durable", VERSION, expected()))
                .containsExactly("durable-reactive-core: no sources jar in dev/durable/durable-reactive-core/0.1.0/");
        assertThatThrownBy(() -> BundleCheck.main(args(zip(files))))
                .hasMessageContaining("is not publishable: 1 problem(s)");
    }

    @Test
    void aMissingJavadocJarOrAnEmptyOneFails() throws Exception {
        Map<String, byte[]> missing = bundle();
        missing.keySet().removeIf(name -> name.contains("-javadoc.jar"));
        Map<String, byte[]> empty = bundle();
        put(empty, DIR + "durable-reactive-core/0.1.0/durable-reactive-core-0.1.0-javadoc.jar", jar("README.txt"));

        assertThat(BundleCheck.check(missing, "dev.durable", VERSION, expected()))
                .containsExactly("durable-reactive-core: no javadoc jar in dev/durable/durable-reactive-core/0.1.0/");
        assertThat(BundleCheck.check(empty, "dev.durable", VERSION, expected())).singleElement()
                .asString().endsWith("has no index.html");
    }

    @Test
    void aPomWithoutLicenceScmOrDevelopersFails() throws Exception {
        Map<String, byte[]> files = bundle();
        String bare = PARENT_POM.replaceAll("(?s)<licenses>.*</licenses>", "")
                .replaceAll("(?s)<developers>.*</developers>", "")
                .replaceAll("(?s)<scm>.*</scm>", "");
        put(files, DIR + "durable-parent/0.1.0/durable-parent-0.1.0.pom", bare.getBytes(StandardCharsets.UTF_8));

        assertThat(BundleCheck.check(files, "dev.durable", VERSION, expected()))
                .contains("durable-parent: the POM has no licence (licenses/license/name), nor does its parent",
                        "durable-parent: the POM has no SCM url (scm/url), nor does its parent",
                        "durable-parent: the POM has no developers (developers/developer/id), nor does its parent",
                        // the core inherits them from that parent: it has none either
                        "durable-reactive-core: the POM has no licence (licenses/license/name), nor does its parent");
    }

    @Test
    void aWrongOrMissingChecksumFails() throws Exception {
        Map<String, byte[]> files = bundle();
        String jar = DIR + "durable-reactive-core/0.1.0/durable-reactive-core-0.1.0.jar";
        files.put(jar + ".sha1", "0000".getBytes(StandardCharsets.UTF_8));
        files.remove(jar + ".md5");

        assertThat(BundleCheck.check(files, "dev.durable", VERSION, expected()))
                .containsExactlyInAnyOrder("wrong checksum " + jar + ".sha1", "no checksum " + jar + ".md5");
    }

    @Test
    void anUnpublishedModuleOrAnArtifactMissingFromTheBomFails() throws Exception {
        Map<String, byte[]> files = bundle();
        put(files, DIR + "durable-benchmarks/0.1.0/durable-benchmarks-0.1.0.jar", jar("A.class"));
        put(files, DIR + "durable-bom/0.1.0/durable-bom-0.1.0.pom", PARENT_POM.replace("durable-parent", "durable-bom")
                .getBytes(StandardCharsets.UTF_8));

        assertThat(BundleCheck.check(files, "dev.durable", VERSION, expected())).contains(
                "not a published artifact: dev/durable/durable-benchmarks/0.1.0/durable-benchmarks-0.1.0.jar",
                "durable-bom: does not list durable-reactive-core");
    }

    @Test
    void onceOneFileIsSignedEveryFileMustBe() throws Exception {
        Map<String, byte[]> files = bundle();
        files.put(DIR + "durable-parent/0.1.0/durable-parent-0.1.0.pom.asc", "signature".getBytes(StandardCharsets.UTF_8));

        assertThat(BundleCheck.check(files, "dev.durable", VERSION, expected()))
                .contains("durable-reactive-core: dev/durable/durable-reactive-core/0.1.0/durable-reactive-core-0.1.0.jar"
                        + " is not signed (other files are)");
    }

    private static Map<String, String> expected() {
        Map<String, String> expected = new LinkedHashMap<>();
        expected.put("durable-parent", "pom");
        expected.put("durable-bom", "pom");
        expected.put("durable-reactive-core", "jar");
        return expected;
    }

    private static String[] args(Path zip) {
        return new String[] {zip.toString(), "dev.durable", VERSION, "durable-parent:pom", "durable-bom:pom",
                "durable-reactive-core:jar"};
    }

    /** A bundle as the release build lays it out: the parent, the BOM and one module, with checksums. */
    private static Map<String, byte[]> bundle() throws Exception {
        Map<String, byte[]> files = new TreeMap<>();
        put(files, DIR + "durable-parent/0.1.0/durable-parent-0.1.0.pom", PARENT_POM.getBytes(StandardCharsets.UTF_8));
        put(files, DIR + "durable-bom/0.1.0/durable-bom-0.1.0.pom", BOM_POM.getBytes(StandardCharsets.UTF_8));
        String core = DIR + "durable-reactive-core/0.1.0/durable-reactive-core-0.1.0";
        put(files, core + ".pom", CORE_POM.getBytes(StandardCharsets.UTF_8));
        put(files, core + ".jar", jar("dev/durable/Engine.class"));
        put(files, core + "-sources.jar", jar("dev/durable/Engine.java"));
        put(files, core + "-javadoc.jar", jar("index.html"));
        return files;
    }

    private static void put(Map<String, byte[]> files, String name, byte[] content) throws Exception {
        files.put(name, content);
        files.put(name + ".md5", hex("MD5", content));
        files.put(name + ".sha1", hex("SHA-1", content));
    }

    private static byte[] hex(String algorithm, byte[] content) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance(algorithm).digest(content))
                .getBytes(StandardCharsets.UTF_8);
    }

    private static byte[] jar(String entry) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ZipOutputStream jar = new ZipOutputStream(bytes)) {
            jar.putNextEntry(new ZipEntry(entry));
            jar.write(1);
            jar.closeEntry();
        }
        return bytes.toByteArray();
    }

    private Path zip(Map<String, byte[]> files) throws IOException {
        Path zip = temp.resolve("bundle.zip");
        try (OutputStream out = Files.newOutputStream(zip); ZipOutputStream entries = new ZipOutputStream(out)) {
            for (Map.Entry<String, byte[]> file : files.entrySet()) {
                entries.putNextEntry(new ZipEntry(file.getKey()));
                entries.write(file.getValue());
                entries.closeEntry();
            }
        }
        return zip;
    }
}
