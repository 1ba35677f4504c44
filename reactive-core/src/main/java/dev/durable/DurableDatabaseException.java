package dev.durable;

import org.jspecify.annotations.Nullable;

/** A database error Durable does not map to a more specific type; carries the SQLSTATE. */
public class DurableDatabaseException extends DurableException {

    private static final long serialVersionUID = 1L;

    private final @Nullable String sqlState;
    private final @Nullable String constraintName;

    public DurableDatabaseException(String message, @Nullable String sqlState,
            @Nullable String constraintName, Throwable cause) {
        super(message, cause);
        this.sqlState = sqlState;
        this.constraintName = constraintName;
    }

    /** The constraint an integrity violation broke, when the database named one. */
    public @Nullable String constraintName() {
        return constraintName;
    }

    public @Nullable String sqlState() {
        return sqlState;
    }
}
