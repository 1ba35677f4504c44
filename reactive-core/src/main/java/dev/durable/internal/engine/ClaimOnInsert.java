package dev.durable.internal.engine;

import dev.durable.ConflictPolicy;
import dev.durable.internal.sql.InsertSql.Inserted;
import dev.durable.internal.sql.InsertSql.Insertion;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.Rows.NewInstance;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Claim-on-insert: rows inserted while a local scheduler of their queue sits idle are inserted
 * already claimed by it, saving the pick's round trip (what brings an idle queue's enqueue-to-start
 * down to a few milliseconds). Only rows due now with no concurrency key, gate or rate limit are
 * claimed so, of types this engine runs, and only up to what each idle scheduler reserves
 * ({@link QueueScheduler#reserve}).
 */
public final class ClaimOnInsert {

    private final List<QueueScheduler> schedulers;
    /** Only types this engine can run are claimed: another engine's type is left for it to pick. */
    private final Set<String> runnableTypes;
    /** A paused queue's rows are never claimed so (the pick excludes them in the database). */
    private final java.util.function.Predicate<String> paused;

    ClaimOnInsert(List<QueueScheduler> schedulers, Set<String> runnableTypes,
            java.util.function.Predicate<String> paused) {
        this.schedulers = List.copyOf(schedulers);
        this.runnableTypes = Set.copyOf(runnableTypes);
        this.paused = paused;
    }

    /** No local scheduler takes anything (the engine is not running). */
    public static Plan none(List<NewInstance> rows) {
        return new Plan(rows, new String[rows.size()], Map.of());
    }

    /** Which rows to insert claimed, and by which scheduler. */
    public Plan plan(List<NewInstance> rows) {
        String[] claimers = new String[rows.size()];
        Map<QueueScheduler, Integer> reservations = new HashMap<>();
        for (QueueScheduler scheduler : schedulers) {
            if (paused.test(scheduler.queue())) {
                continue;
            }
            int eligible = 0;
            for (NewInstance row : rows) {
                if (claimable(row, scheduler.queue())) {
                    eligible++;
                }
            }
            int slots = eligible == 0 ? 0 : scheduler.reserve(eligible);
            if (slots == 0) {
                continue;
            }
            reservations.put(scheduler, slots);
            int left = slots;
            for (int i = 0; i < rows.size() && left > 0; i++) {
                if (claimable(rows.get(i), scheduler.queue())) {
                    claimers[i] = scheduler.worker();
                    left--;
                }
            }
        }
        return new Plan(rows, claimers, reservations);
    }

    private boolean claimable(NewInstance row, String queue) {
        // A debounced row waits for its window: its run time is the statement's, not a delay here.
        return row.queue().equals(queue) && row.runAt() == null && row.delayMillis() == 0
                && row.onConflict().kind() != ConflictPolicy.Kind.DEBOUNCE
                && row.concurrencyKey() == null && !row.limited() && runnableTypes.contains(row.type());
    }

    /** The claims of one insert, and the reservations behind them. */
    public static final class Plan {

        private final List<NewInstance> rows;
        private final String[] claimers;
        private final Map<QueueScheduler, Integer> reservations;

        private Plan(List<NewInstance> rows, String[] claimers, Map<QueueScheduler, Integer> reservations) {
            this.rows = rows;
            this.claimers = claimers;
            this.reservations = reservations;
        }

        /** The rows to insert, each with the worker that claims it (or none). */
        public List<Insertion> insertions() {
            List<Insertion> insertions = new ArrayList<>(rows.size());
            for (int i = 0; i < rows.size(); i++) {
                insertions.add(new Insertion(rows.get(i), claimers[i]));
            }
            return insertions;
        }

        /** Whether any row is claimed: then the insert must reach its schedulers whatever its caller does. */
        public boolean claimsAny() {
            return !reservations.isEmpty();
        }

        /** The insert committed: each scheduler gets the rows claimed for it. */
        public void handOver(List<Inserted> inserted) {
            reservations.forEach((scheduler, slots) -> {
                List<ClaimedRow> claimed = new ArrayList<>();
                for (Inserted row : inserted) {
                    if (row.claim() != null && row.claim().worker().equals(scheduler.worker())) {
                        claimed.add(row.claim());
                    }
                }
                scheduler.claimedOnInsert(slots, claimed);
            });
        }

        /** The insert failed: the reservations are given back. */
        public void cancel() {
            reservations.forEach(QueueScheduler::cancelReservation);
        }
    }
}
