package dev.durable;

/**
 * What one insert request came to, under its {@link ConflictPolicy}: the id of the instance that
 * carries it and how it got there.
 */
public record InsertResult(long id, Disposition disposition) {

    /** How a request was placed. */
    public enum Disposition {
        /** A new instance was inserted: {@code id} is it. */
        INSERTED,
        /** The key's live holder was left as it was: {@code id} is the holder ({@link ConflictPolicy#skip()}). */
        SKIPPED,
        /**
         * The holder had not started and took the request's arguments, run-at and priority (replace,
         * debounce): {@code id} is the holder.
         */
        REPLACED,
        /**
         * The holder had started: the request waits as its one follow-up, inserted as a new instance
         * with this {@code id} when the holder settles (until then, no instance has that id; a later
         * request to the same key replaces the follow-up and gets the same id).
         */
        FOLLOW_UP
    }

    /** A result of an insert that skips duplicates: inserted ({@code created}) or skipped. */
    public InsertResult(long id, boolean created) {
        this(id, created ? Disposition.INSERTED : Disposition.SKIPPED);
    }

    public InsertResult {
        java.util.Objects.requireNonNull(disposition, "disposition");
    }

    /** Whether this request inserted a new instance. */
    public boolean created() {
        return disposition == Disposition.INSERTED;
    }
}
