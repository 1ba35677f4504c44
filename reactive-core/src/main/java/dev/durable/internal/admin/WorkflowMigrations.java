package dev.durable.internal.admin;

import dev.durable.Definition;
import dev.durable.InvalidRequestException;
import dev.durable.WorkflowDefinition;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceFilter;
import dev.durable.internal.engine.ClaimMigration;
import dev.durable.internal.sql.VersionSql;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Versioned workflows' rows brought to the version this engine runs: which rows a migration covers,
 * one chunk of a bulk migration, and failing on purpose the rows of versions with no migration path.
 */
final class WorkflowMigrations {

    /** Rows failed per statement by {@link #failUnmigratable}: short transactions, however many rows. */
    private static final int FAIL_BATCH = 1000;
    private static final reactor.util.Logger log = reactor.util.Loggers.getLogger(WorkflowMigrations.class);

    private final EngineCalls engine;
    private final VersionSql versions;
    private final Map<String, Definition> definitions;

    WorkflowMigrations(EngineCalls engine, VersionSql versions, Map<String, Definition> definitions) {
        this.engine = engine;
        this.versions = versions;
        this.definitions = definitions;
    }

    /** The rows of {@code type} below the version this engine runs that its migrations cover. */
    InstanceFilter migratable(String type) {
        WorkflowDefinition<?> workflow = withMigrations(type);
        return InstanceFilter.builder().type(type)
                .typeVersionBetween(workflow.lowestVersion(), workflow.version() - 1).build();
    }

    Mono<Long> failUnmigratable(String type, int version) {
        return Mono.defer(() -> {
            Definition definition = definitions.get(type);
            if (!(definition instanceof WorkflowDefinition<?> workflow) || version >= definition.lowestVersion()) {
                return Mono.error(new InvalidRequestException(definition == null
                        ? "this engine does not know type '" + type + "', so it cannot tell which versions have no"
                                + " migration path"
                        : "version " + version + " of '" + type + "' is run or migrated by this engine (it runs versions "
                                + definition.lowestVersion() + " to " + definition.version() + "); only versions below "
                                + definition.lowestVersion() + " have no migration path"));
            }
            String error = "failed on purpose: workflow " + type + " has no migration path from version " + version
                    + " to " + workflow.version() + " (its migrations start at version " + workflow.lowestVersion() + ")";
            return versions.failVersion(type, version, error, FAIL_BATCH)
                    .expand(failed -> failed == FAIL_BATCH ? versions.failVersion(type, version, error, FAIL_BATCH)
                            : Mono.empty())
                    .reduce(0L, Long::sum);
        });
    }

    private WorkflowDefinition<?> withMigrations(String type) {
        if (definitions.get(type) instanceof WorkflowDefinition<?> workflow && !workflow.migrations().isEmpty()) {
            return workflow;
        }
        throw new InvalidRequestException("this engine does not know '" + type + "' as a workflow with state migrations"
                + " (WorkflowDefinition.Builder.migration): nothing to migrate to");
    }

    /**
     * One chunk of a bulk migration: reads the rows as they are, migrates those this engine's definitions
     * can (in the application, on the handler scheduler: it is user code), writes them back guarded by
     * what was read. A row whose migration throws is left as it was. When this engine knows none of the
     * chunk's types the chunk fails (retried with backoff): another engine of the bulk queue may know them.
     */
    Mono<Long> migrateChunk(List<Long> ids) {
        return versions.byIds(ids).collectList()
                .publishOn(engine.options().handlerScheduler())
                .flatMap(rows -> {
                    Map<String, List<VersionSql.Migrated>> byType = new TreeMap<>();
                    Set<String> unknown = new TreeSet<>();
                    for (VersionSql.Unmigrated row : rows) {
                        if (!(definitions.get(row.type()) instanceof WorkflowDefinition<?> workflow)
                                || workflow.migrations().isEmpty()) {
                            unknown.add(row.type());
                            continue;
                        }
                        if (row.typeVersion() < workflow.lowestVersion() || row.typeVersion() >= workflow.version()) {
                            continue;
                        }
                        try {
                            ClaimMigration.Migrated migrated = ClaimMigration.apply(workflow, row.type(), row.typeVersion(),
                                    row.step(), row.stateJson(), engine.options().codec());
                            byType.computeIfAbsent(row.type(), type -> new ArrayList<>())
                                    .add(new VersionSql.Migrated(row, migrated.step(), migrated.stateJson()));
                        } catch (ClaimMigration.MigrationFailedException failed) {
                            log.warn("instance {} not migrated: {}", row.id(), failed.getMessage());
                        }
                    }
                    if (!unknown.isEmpty() && byType.isEmpty() && unknown.size() == rows.stream()
                            .map(VersionSql.Unmigrated::type).distinct().count()) {
                        return Mono.error(new IllegalStateException("engine " + engine.options().name()
                                + " does not know " + unknown + " as workflows with state migrations: run queue "
                                + DurableAdmin.BULK_QUEUE + " on engines that do"));
                    }
                    return Flux.fromIterable(byType.entrySet())
                            .concatMap(entry -> versions.migrateSeen(entry.getKey(),
                                    ((WorkflowDefinition<?>) definitions.get(entry.getKey())).version(), entry.getValue()))
                            .reduce(0L, Long::sum);
                });
    }
}
