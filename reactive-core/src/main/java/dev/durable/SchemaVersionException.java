package dev.durable;

/**
 * The schema's recorded migrations are not this library's, so the engine neither migrates it nor
 * starts on it: its statements and migrations are written for the versions this library ships, and
 * running them on another schema could fail work or corrupt it silently. Two cases, each said in the
 * message with what to do:
 * <ul>
 * <li>the schema is at a version newer than the newest this library ships ({@link #recordedVersion()}
 *     above {@link #knownVersion()}): a newer Durable migrated it. An engine never migrates a schema
 *     down; run a Durable at least as new, or, for a rolling deploy whose newer release says its
 *     schema still serves older engines, start the older ones with {@code applyMigrations(false)}
 *     ({@link EngineOptions}), which neither migrates nor checks;</li>
 * <li>the schema records a version of this library's under another description: another history of
 *     Durable's migrations made it, such as a build from before the first release, whose versions 1
 *     to 16 the first release's baseline (version 1) replaced. A schema at that history's version 16
 *     has exactly the baseline's tables, functions and triggers; any other has to be dropped and
 *     made again.</li>
 * </ul>
 */
public class SchemaVersionException extends DurableException {

    private static final long serialVersionUID = 1L;

    private final int recordedVersion;
    private final int knownVersion;

    public SchemaVersionException(String message, int recordedVersion, int knownVersion) {
        super(message);
        this.recordedVersion = recordedVersion;
        this.knownVersion = knownVersion;
    }

    /** The newest version recorded in the schema. */
    public int recordedVersion() {
        return recordedVersion;
    }

    /** The newest version this library ships. */
    public int knownVersion() {
        return knownVersion;
    }
}
