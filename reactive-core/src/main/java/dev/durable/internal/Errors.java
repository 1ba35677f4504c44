package dev.durable.internal;

import dev.durable.DuplicateCorrelationKeyException;
import dev.durable.DurableDatabaseException;
import dev.durable.DurableException;
import dev.durable.SchemaMissingException;
import io.r2dbc.postgresql.api.ErrorDetails;
import io.r2dbc.postgresql.api.PostgresqlException;
import io.r2dbc.spi.R2dbcException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/** Maps driver errors to Durable's typed errors by SQLSTATE and constraint name. */
public final class Errors {

    public static final String UNIQUE_VIOLATION = "23505";
    public static final String CORRELATION_CONSTRAINT = "durable_instances_correlation_uq";
    public static final String EXECUTING_KEY_CONSTRAINT = "durable_instances_executing_key_uq";

    private static final Pattern KEY_DETAIL = Pattern.compile("Key \\([^)]*\\)=\\((.*)\\) already exists");

    private Errors() {
    }

    public static Throwable translate(Throwable error) {
        if (error instanceof DurableException || !(error instanceof R2dbcException r2dbc)) {
            return error;
        }
        ErrorDetails details = error instanceof PostgresqlException pg ? pg.getErrorDetails() : null;
        String constraint = details == null ? null : details.getConstraintName().orElse(null);
        String sqlState = r2dbc.getSqlState();
        if (UNIQUE_VIOLATION.equals(sqlState) && CORRELATION_CONSTRAINT.equals(constraint)) {
            return new DuplicateCorrelationKeyException(duplicateKey(details), error);
        }
        if (SchemaMissingException.UNDEFINED_TABLE.equals(sqlState)) {
            return new SchemaMissingException(String.valueOf(error.getMessage()), error);
        }
        return new DurableDatabaseException("database error " + sqlState + ": " + error.getMessage(),
                sqlState, constraint, error);
    }

    /** True when a claim lost a race for an ungated concurrency key (the pick retries). */
    public static boolean isExecutingKeyTaken(Throwable error) {
        return error instanceof DurableDatabaseException db
                && UNIQUE_VIOLATION.equals(db.sqlState())
                && EXECUTING_KEY_CONSTRAINT.equals(db.constraintName());
    }

    /**
     * True when the database refused an outcome for what it holds, not for how it was sent: a
     * duplicate correlation key (of a child), another integrity violation (class 23) or a data
     * exception (class 22). Trying again would be refused again. A taken concurrency key is not one
     * of these: the executor sends that outcome back through the queue.
     */
    public static boolean isRefusedOutcome(Throwable error) {
        if (error instanceof DuplicateCorrelationKeyException) {
            return true;
        }
        return error instanceof DurableDatabaseException db && db.sqlState() != null && !isExecutingKeyTaken(error)
                && (db.sqlState().startsWith("22") || db.sqlState().startsWith("23"));
    }

    /**
     * The transaction was already aborted by an earlier statement's error (25P02): on a transactional
     * run's connection, a statement of the handler failed and the handler carried on without it.
     */
    public static boolean isAbortedTransaction(Throwable error) {
        Throwable translated = translate(error);
        return translated instanceof DurableDatabaseException db && "25P02".equals(db.sqlState());
    }

    /** Two transactions waited on each other's locks; PostgreSQL aborted this one. */
    public static boolean isDeadlock(Throwable error) {
        return error instanceof DurableDatabaseException db && "40P01".equals(db.sqlState());
    }

    /** Errors worth one more try: a lost or refused connection, a serialization failure. */
    public static boolean isTransient(Throwable error) {
        Throwable cause = error instanceof DurableDatabaseException ? error.getCause() : error;
        return cause instanceof io.r2dbc.spi.R2dbcTransientException
                || cause instanceof io.r2dbc.spi.R2dbcNonTransientResourceException
                || cause instanceof java.io.IOException
                || cause instanceof java.nio.channels.ClosedChannelException
                || (cause instanceof R2dbcException r2dbc && r2dbc.getSqlState() != null
                        && (r2dbc.getSqlState().startsWith("08") || r2dbc.getSqlState().equals("40001")
                            || r2dbc.getSqlState().equals("40P01") || r2dbc.getSqlState().startsWith("57P")));
    }

    private static @Nullable String duplicateKey(@Nullable ErrorDetails details) {
        if (details == null) {
            return null;
        }
        String detail = details.getDetail().orElse("");
        Matcher matcher = KEY_DETAIL.matcher(detail);
        return matcher.find() ? matcher.group(1) : null;
    }
}
