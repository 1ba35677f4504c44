package dev.durable.release;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.release.ApiCheck.ClassApi;
import dev.durable.release.ApiCheck.Diff;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.SortedMap;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ApiCheckTest {

    /** The fixture classes (dev.durable.release.fixture), compiled with this test. */
    private static final Path TEST_CLASSES = Path.of("target/test-classes");

    private static final String SAMPLE = "dev.durable.release.fixture.Sample";

    @TempDir
    Path temp;

    @Test
    void readsPublicAndProtectedClassesAndMembersOfExportedPackagesOnly() throws Exception {
        SortedMap<String, ClassApi> api = fixtureApi();

        assertThat(api).containsOnlyKeys(SAMPLE, SAMPLE + "$Nested");
        assertThat(api.get(SAMPLE).header()).isEqualTo("public class " + SAMPLE);
        assertThat(api.get(SAMPLE).members()).containsExactlyInAnyOrder(
                "public static final int LIMIT",
                "public " + SAMPLE + "()",
                "public <T> T first(java.util.List<T>)",
                "public void kept(int)",
                "protected void forSubclasses()");
        assertThat(api.get(SAMPLE + "$Nested").members())
                .containsExactly("public " + SAMPLE + "$Nested()", "public void run()");
    }

    @Test
    void theRecordedApiPasses() throws Exception {
        SortedMap<String, ClassApi> api = fixtureApi();

        Diff diff = ApiCheck.diff(ApiCheck.parse(lines(ApiCheck.render("fixture", api))), api);

        assertThat(diff.isEmpty()).isTrue();
    }

    @Test
    void aRemovedMethodIsABreak() throws Exception {
        SortedMap<String, ClassApi> api = fixtureApi();
        String baseline = ApiCheck.render("fixture", api)
                .replace("  public void kept(int)\n", "  public void kept(int)\n  public void removed()\n");

        Diff diff = ApiCheck.diff(ApiCheck.parse(lines(baseline)), api);

        assertThat(diff.breaking()).isTrue();
        assertThat(diff.report()).contains(SAMPLE, "-   public void removed()");
        assertThat(ApiCheck.failure("fixture", Path.of("fixture.api"), diff))
                .contains("removed or changed", ApiCheck.RECORD_COMMAND, "### Breaking", "CHANGELOG.md");
    }

    @Test
    void aChangedSignatureIsABreak() throws Exception {
        SortedMap<String, ClassApi> api = fixtureApi();
        String baseline = ApiCheck.render("fixture", api).replace("kept(int)", "kept(long)");

        Diff diff = ApiCheck.diff(ApiCheck.parse(lines(baseline)), api);

        assertThat(diff.breaking()).isTrue();
        assertThat(diff.report()).contains("-   public void kept(long)", "+   public void kept(int)");
    }

    @Test
    void aRemovedClassIsABreak() throws Exception {
        SortedMap<String, ClassApi> api = fixtureApi();
        SortedMap<String, ClassApi> fewer = new TreeMap<>(api);
        fewer.remove(SAMPLE + "$Nested");

        Diff diff = ApiCheck.diff(api, fewer);

        assertThat(diff.breaking()).isTrue();
        assertThat(diff.report()).contains("- public final class " + SAMPLE + "$Nested   (the whole class)");
    }

    @Test
    void anAdditionMustBeRecordedButIsNoBreak() throws Exception {
        SortedMap<String, ClassApi> api = fixtureApi();
        String baseline = ApiCheck.render("fixture", api).replace("  public void kept(int)\n", "");

        Diff diff = ApiCheck.diff(ApiCheck.parse(lines(baseline)), api);

        assertThat(diff.isEmpty()).isFalse();
        assertThat(diff.breaking()).isFalse();
        assertThat(ApiCheck.failure("fixture", Path.of("fixture.api"), diff))
                .contains("+   public void kept(int)", "Only additions", ApiCheck.RECORD_COMMAND)
                .doesNotContain("Breaking");
    }

    @Test
    void theCheckFailsOnABaselineWithAnExtraLineAndPassesOnceReRecorded() throws Exception {
        Path classes = fixtureClasses();
        String module = "fixture=" + classes;
        ApiCheck.main(new String[] {temp.toString(), "record", module});
        Path baseline = temp.resolve("fixture.api");
        Files.writeString(baseline, Files.readString(baseline)
                .replace("  public void kept(int)\n", "  public void kept(int)\n  public void removed()\n"));

        String printed = printed(() -> assertThatThrownBy(() -> ApiCheck.main(new String[] {temp.toString(), "check", module}))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("API check failed"));

        assertThat(printed).contains("-   public void removed()", "### Breaking", ApiCheck.RECORD_COMMAND);
        ApiCheck.main(new String[] {temp.toString(), "record", module});
        ApiCheck.main(new String[] {temp.toString(), "check", module});
    }

    @Test
    void aModuleWithoutABaselineFails() {
        assertThatThrownBy(() -> ApiCheck.main(new String[] {temp.toString(), "check", "fixture=" + fixtureClasses()}))
                .hasMessageContaining("API check failed");
    }

    /** The fixture package alone, copied out of the test classes (which hold this test too). */
    private Path fixtureClasses() throws Exception {
        Path root = temp.resolve("classes");
        Path from = TEST_CLASSES.resolve("dev/durable/release/fixture");
        try (var files = Files.walk(from)) {
            for (Path file : files.filter(Files::isRegularFile).toList()) {
                Path to = root.resolve("dev/durable/release/fixture").resolve(from.relativize(file).toString());
                Files.createDirectories(to.getParent());
                Files.copy(file, to);
            }
        }
        return root;
    }

    private SortedMap<String, ClassApi> fixtureApi() throws Exception {
        return ApiCheck.read(fixtureClasses());
    }

    private static List<String> lines(String text) {
        return text.lines().toList();
    }

    private static String printed(Runnable action) {
        PrintStream out = System.out;
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        System.setOut(new PrintStream(bytes, true, StandardCharsets.UTF_8));
        try {
            action.run();
        } finally {
            System.setOut(out);
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }
}
