package dev.durable.internal.engine;

import dev.durable.DurableException;
import dev.durable.JsonCodec;
import dev.durable.StateMigration;
import dev.durable.WorkflowDefinition;
import dev.durable.internal.sql.Rows.ClaimedRow;
import dev.durable.internal.sql.VersionSql;
import io.micrometer.core.instrument.MeterRegistry;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;

/**
 * Claim-time migration: a claimed instance of an older version its definition can migrate goes
 * through the chain of state migrations, and the new version, step and state are written onto the
 * row before its step runs, with one UPDATE guarded by the claim (worker, attempt, claiming
 * transaction, executing) and the old version.
 *
 * <p>Why a separate UPDATE rather than riding the step's outcome commit: outcomes are group-committed
 * in a fixed set of statements shared by every row, and carrying a version and a possibly migrated
 * state in them would cost every commit (plain jobs and current rows included) for the rare row that
 * migrates. The UPDATE costs one round trip, only to rows that migrate. Either way a crash leaves a
 * consistent row: before the UPDATE it is as it was (old version, old state); after it, it is a
 * claimed row of the new version whose lease expires like any other, and the reaper returns it.
 */
public final class ClaimMigration {

    /**
     * A migration function (or the codec around it) failed, or timed out: the run ends as a step
     * error would. Or ({@link #noPath()}) the chain does not reach a step of the current version: the
     * row is handed back unrun, as a row at a step this engine lacks is, for an engine that still
     * runs its version (an old node of a rolling deploy).
     */
    public static final class MigrationFailedException extends DurableException {

        private final boolean noPath;

        MigrationFailedException(String message, @Nullable Throwable cause) {
            this(message, cause, false);
        }

        MigrationFailedException(String message, @Nullable Throwable cause, boolean noPath) {
            super(message);
            this.noPath = noPath;
            if (cause != null) {
                initCause(cause);
            }
        }

        /** True when no chain leads from the row's version and step to a step of the current version. */
        public boolean noPath() {
            return noPath;
        }
    }

    /** Claim-time migrations by type, from-version and outcome (migrated, failed, claim_lost). */
    static final String METER = "durable.workflow.migrations";

    private final VersionSql sql;
    private final JsonCodec codec;
    private final Scheduler handlerScheduler;
    private final MeterRegistry meters;

    ClaimMigration(VersionSql sql, JsonCodec codec, Scheduler handlerScheduler, MeterRegistry meters) {
        this.meters = meters;
        this.sql = sql;
        this.codec = codec;
        this.handlerScheduler = handlerScheduler;
    }

    /** Whether {@code row} needs migrating before {@code definition} runs it. */
    static boolean needed(WorkflowDefinition<?> definition, ClaimedRow row) {
        return row.typeVersion() < definition.version() && !definition.migrations().isEmpty();
    }

    /**
     * The row at the definition's version, written under its claim; empty when the claim was lost
     * meanwhile (nothing written). Errors with {@link MigrationFailedException} when the chain
     * fails, nothing written. Call on the handler scheduler; emits there too.
     */
    Mono<ClaimedRow> migrate(WorkflowDefinition<?> definition, ClaimedRow row) {
        // User code, bounded like a step: past the type's timeout the attempt fails and nothing is written.
        // It runs on a worker of its own, so the timeout can fire while a function blocks (and interrupts it).
        return Mono.fromCallable(() -> apply(definition, row, codec))
                .subscribeOn(handlerScheduler)
                .timeout(definition.timeout(), Mono.error(() -> new MigrationFailedException("migration of workflow "
                        + row.type() + " from version " + row.typeVersion() + " to " + definition.version()
                        + " timed out after " + definition.timeout(), null)))
                .doOnError(MigrationFailedException.class, failed -> count(row, failed.noPath() ? "no_path" : "failed"))
                .flatMap(migrated -> sql.migrateClaimed(row.id(), row.worker(), row.attempt(), row.claimXid(),
                                row.typeVersion(), migrated.typeVersion(), migrated.step(), migrated.stateJson())
                        .doOnNext(written -> count(row, written ? "migrated" : "claim_lost"))
                        .filter(Boolean::booleanValue)
                        .map(written -> migrated))
                // The answer arrives on a database event loop; the step's decoding and handler must not run there.
                .publishOn(handlerScheduler);
    }

    private void count(ClaimedRow row, String outcome) {
        meters.counter(METER, "type", row.type(), "from", Integer.toString(row.typeVersion()), "outcome", outcome)
                .increment();
    }

    /** The chain applied in memory: state and step of {@code definition}'s version, or why not. */
    static ClaimedRow apply(WorkflowDefinition<?> definition, ClaimedRow row, JsonCodec codec) {
        Migrated result = apply(definition, row.type(), row.typeVersion(), row.step(), row.stateJson(), codec);
        return row.migratedTo(definition.version(), result.step(), result.stateJson());
    }

    /** A step and state after the chain. */
    public record Migrated(String step, @Nullable String stateJson) {
    }

    /** The chain from {@code version} applied to a step and state; {@link MigrationFailedException} when it cannot. */
    public static Migrated apply(WorkflowDefinition<?> definition, String type, int version, String step,
            @Nullable String stateJson, JsonCodec codec) {
        if (version < definition.lowestVersion()) {
            throw new MigrationFailedException("workflow " + type + " has no migration path from version " + version
                    + " to " + definition.version() + " (migrations start at version " + definition.lowestVersion()
                    + ")", null, true);
        }
        String currentStep = step;
        String state = stateJson;
        for (StateMigration migration : definition.migrationsFrom(version)) {
            try {
                state = migration.migrateState(state, codec);
            } catch (RuntimeException error) {
                throw new MigrationFailedException("migration of workflow " + type + " from version "
                        + migration.fromVersion() + " to " + migration.toVersion() + " failed: " + error, error);
            }
            currentStep = migration.step(currentStep);
        }
        if (definition.step(currentStep) == null) {
            throw new MigrationFailedException("workflow " + type + " has no migration path for step '" + step
                    + "' of version " + version + ": version " + definition.version() + " has no step '" + currentStep
                    + "' (map it with StateMigration.mapStep)", null, true);
        }
        return new Migrated(currentStep, state);
    }
}
