package dev.durable;

/**
 * Durable's tables are not in the database (PostgreSQL's {@code 42P01}, undefined table): the engine
 * was used before {@link DurableEngine#start()} applied its migrations, or with migrations off and
 * none applied, or with another schema than the one they went to.
 */
public class SchemaMissingException extends DurableDatabaseException {

    private static final long serialVersionUID = 1L;

    public static final String UNDEFINED_TABLE = "42P01";

    public SchemaMissingException(String message, Throwable cause) {
        super(message + ": Durable's schema is not applied there. Start the engine first (start() applies its"
                + " migrations), or apply them with migrate(), or check EngineOptions.schema", UNDEFINED_TABLE, null,
                cause);
    }
}
