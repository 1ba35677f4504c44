package dev.durable.spring;

import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanCreationException;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;

/**
 * Turns the ways a first start of Durable goes wrong into Boot's short "APPLICATION FAILED TO
 * START" report (description and action) instead of pages of stack: no database configured, a URL
 * that is not a usable R2DBC URL, an option out of range, a database the engine could not reach or
 * start on. The URL's password never shows.
 */
public final class DurableFailureAnalyzer implements FailureAnalyzer {

    private static final String SET_DATABASE = "Set durable.url (r2dbc:postgresql://user:password@host:5432/db), or"
            + " spring.r2dbc.url, or define one io.r2dbc.spi.ConnectionFactory bean.";

    @Override
    public @Nullable FailureAnalysis analyze(Throwable failure) {
        boolean engineBean = false;
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            if (cause instanceof BeanCreationException creation && creation.getBeanName() != null
                    && creation.getBeanName().startsWith("durable")) {
                engineBean = true;
            }
            String message = String.valueOf(cause.getMessage());
            if (cause instanceof DurableStartupException startup) {
                return new FailureAnalysis(startup.getMessage() + "\n\n    Cause: " + describe(root(startup)),
                        "Check that PostgreSQL is running and reachable at that address, and the user, password"
                                + " and database in durable.url (or spring.r2dbc.url). To start the application"
                                + " without starting the engine, set durable.auto-startup=false.",
                        startup);
            }
            if (cause instanceof IllegalArgumentException && message.startsWith("url is not a usable R2DBC URL")) {
                return new FailureAnalysis("Durable's database URL is not usable: " + message,
                        "Write it as r2dbc:postgresql://user:password@host:5432/database in durable.url (or"
                                + " spring.r2dbc.url), with nothing after the value on its line: a .properties"
                                + " file has no end-of-line comments.",
                        cause);
            }
            if (cause instanceof IllegalStateException && message.startsWith("Durable needs a PostgreSQL database")) {
                return new FailureAnalysis("Durable has no database to run on.", SET_DATABASE, cause);
            }
            if (engineBean && cause instanceof IllegalArgumentException && fromDurable(cause)) {
                return new FailureAnalysis("Durable's configuration is invalid: " + message,
                        "Fix the durable.* property (or the DurableEngineCustomizer) that sets the option named above.",
                        cause);
            }
        }
        return null;
    }

    private static boolean fromDurable(Throwable error) {
        StackTraceElement[] stack = error.getStackTrace();
        return stack.length > 0 && stack[0].getClassName().startsWith("dev.durable.");
    }

    private static Throwable root(Throwable error) {
        Throwable root = error;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return root;
    }

    private static String describe(Throwable error) {
        return error.getClass().getName() + (error.getMessage() == null ? "" : ": " + error.getMessage());
    }
}
