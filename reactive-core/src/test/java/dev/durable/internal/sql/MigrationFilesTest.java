package dev.durable.internal.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.durable.internal.sql.Migrator.Migration;
import java.net.URL;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The shipped migrations are what {@link Migrator#MIGRATIONS} lists, each a Flyway-named pair in the
 * main jar: V&lt;n&gt;__&lt;description&gt;.sql and its undo U&lt;n&gt;__&lt;description&gt;.sql, numbered from 1
 * without a gap, with nothing Flyway would take for a placeholder. The pre-release migrations the
 * baseline replaced are test resources, never in the jar.
 */
class MigrationFilesTest {

    @Test
    void theShippedMigrationsAreFlywayNamedPairsInTheJar() throws Exception {
        List<String> expected = new ArrayList<>();
        for (Migration migration : Migrator.MIGRATIONS) {
            assertThat(migration.directory()).isEqualTo(Migrator.SHIPPED);
            assertThat(migration.description()).matches("[a-z0-9_]+");
            expected.add(Path.of(migration.upResource()).getFileName().toString());
            expected.add(Path.of(migration.downResource()).getFileName().toString());
        }
        assertThat(Migrator.MIGRATIONS).extracting(Migration::version)
                .containsExactlyElementsOf(IntStream.rangeClosed(1, Migrator.MIGRATIONS.size()).boxed().toList());
        assertThat(expected).contains("V1__baseline.sql", "U1__baseline.sql");

        Path main = Path.of(Migrator.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        try (FileSystem jar = Files.isDirectory(main) ? null : FileSystems.newFileSystem(main)) {
            Path root = jar == null ? main : jar.getPath("/");
            Path shipped = root.resolve(Migrator.SHIPPED.substring(1));
            try (Stream<Path> files = Files.list(shipped)) {
                assertThat(files.map(file -> file.getFileName().toString()))
                        .containsExactlyInAnyOrderElementsOf(expected);
            }
            for (String file : expected) {
                assertThat(Files.readString(shipped.resolve(file))).as(file).doesNotContain("${");
            }
            assertThat(root.resolve("dev/durable/legacy-migrations")).doesNotExist();
        }
        URL preRelease = MigrationFilesTest.class.getResource("/dev/durable/legacy-migrations/V1__durable_schema.sql");
        assertThat(preRelease).as("a test resource").isNotNull();
        assertThat(preRelease.toString()).doesNotStartWith(main.toUri().toString());
    }
}
