package dev.durable.benchmarks.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Every known-bad change of {@code benchmarks/mutants.txt} still applies to the sources as they are:
 * each pattern occurs exactly once in its file. A change to the engine that moves a statement a
 * mutant patches fails here, in the suite, rather than when someone next runs
 * {@code benchmarks/chaos-mutants} (two mutants had gone stale that way before this test).
 */
class MutantsTest {

    /** The repository's root: the benchmarks module's parent (Maven runs tests in the module's folder). */
    private static final Path ROOT = Path.of("").toAbsolutePath().getParent();

    @Test
    void everyMutantsPatternsOccurExactlyOnceInTheirFiles() throws IOException {
        List<Mutants.Mutant> mutants = Mutants.parse(ROOT.resolve("benchmarks/mutants.txt"));
        assertThat(mutants).hasSizeGreaterThanOrEqualTo(20);
        List<String> stale = new ArrayList<>();
        for (Mutants.Mutant mutant : mutants) {
            assertThat(mutant.changes()).as(mutant.name()).isNotEmpty();
            for (Mutants.Change change : mutant.changes()) {
                Path file = ROOT.resolve(change.file());
                int found = Files.isRegularFile(file) ? occurrences(Files.readString(file, StandardCharsets.UTF_8),
                        change.find()) : -1;
                if (found != 1) {
                    stale.add(mutant.name() + ": " + change.file() + (found < 0 ? " is missing"
                            : " holds its pattern " + found + " times (re-point it)"));
                }
            }
        }
        assertThat(stale).isEmpty();
    }

    @Test
    void aMutantsArgumentsAreWhatItsRunNeeds() throws IOException {
        List<Mutants.Mutant> mutants = Mutants.parse(ROOT.resolve("benchmarks/mutants.txt"));
        assertThat(mutants).filteredOn(mutant -> mutant.name().startsWith("redis-"))
                .isNotEmpty()
                .allSatisfy(mutant -> assertThat(mutant.args()).as(mutant.name()).isEqualTo("--redis"));
        assertThat(mutants).filteredOn(mutant -> !mutant.name().startsWith("redis-"))
                .allSatisfy(mutant -> assertThat(mutant.args()).as(mutant.name()).isEmpty());
    }

    /**
     * Only a mutant that breaks recovery alone is marked liveness (lost or stuck rows then catch it):
     * the ledger's, whose whole effect is claims the reaper never finds. Marking a safety mutant so
     * would let a slow run's stuck rows pass for a catch.
     */
    @Test
    void onlyTheRecoveryMutantsAreCaughtByLiveness() throws IOException {
        List<Mutants.Mutant> mutants = Mutants.parse(ROOT.resolve("benchmarks/mutants.txt"));
        assertThat(mutants).filteredOn(Mutants.Mutant::liveness).extracting(Mutants.Mutant::name)
                .containsExactly("ledger-misses-stamped-claims");
    }

    private static int occurrences(String text, String pattern) {
        int count = 0;
        for (int at = text.indexOf(pattern); at >= 0; at = text.indexOf(pattern, at + 1)) {
            count++;
        }
        return count;
    }
}
