package dev.durable.benchmarks.sql;

import dev.durable.internal.sql.OutcomeRow;
import dev.durable.internal.sql.Rows.ClaimedRow;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Outcome group commit: one {@code OutcomeSql.commit} statement for a batch of
 * {@code batch} done outcomes, each guarded by ownership and moved to the history table. Divide the time by the batch for the
 * cost per outcome, which is what grouping buys. Before each invocation the rows are put back to
 * executing and the table vacuumed (not measured).
 */
@State(Scope.Benchmark)
@Fork(1)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 2)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class CommitBenchmark {

    @Param({"1", "16", "256"})
    public int batch;

    private BenchDatabase db;
    private Long[] ids;
    private List<OutcomeRow> outcomes;

    @Setup(Level.Trial)
    public void setUp() {
        db = new BenchDatabase("commit_" + batch);
        db.fill(batch, true);
        List<Long> all = db.ids();
        ids = all.toArray(Long[]::new);
        outcomes = new ArrayList<>(batch);
        for (Long id : all) {
            ClaimedRow claim = new ClaimedRow(id, BenchDatabase.WORKER, "noop", 1, BenchDatabase.QUEUE, 0, 0, "run",
                    null, 0, 20, null, null, List.of(), List.of(), List.of(), null, null);
            outcomes.add(OutcomeRow.done(claim, "true", List.of()));
        }
    }

    /**
     * Puts the rows back executing in the hot table (the commit moved them, done, to the history),
     * then vacuums both: without it each invocation would leave dead row versions behind and later
     * commits would wade through them (a bloat the engine, which moves each row through a
     * transition once, does not see).
     */
    @Setup(Level.Invocation)
    public void reclaim() {
        db.execute("DELETE FROM " + db.history() + " WHERE id = ANY($1)", ids);
        db.execute("DELETE FROM " + db.instances() + " WHERE id = ANY($1)", ids);
        db.execute("INSERT INTO " + db.instances() + " (id, type, queue, step, state, max_attempts, status, claimed_by,"
                + " lease_expires_at) SELECT g, 'noop', '" + BenchDatabase.QUEUE + "', 'run', to_jsonb(g), 20,"
                + " 'executing', '" + BenchDatabase.WORKER + "', now() + interval '1 hour' FROM unnest($1::bigint[]) AS g",
                ids);
        db.execute("VACUUM " + db.instances());
        db.execute("VACUUM " + db.history());
    }

    @Benchmark
    public Long commit() {
        return db.statements.db().withConnection(connection -> db.statements.outcomes().commit(connection, outcomes))
                .count().block();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        db.close();
    }
}
