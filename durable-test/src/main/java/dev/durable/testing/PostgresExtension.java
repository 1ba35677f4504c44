package dev.durable.testing;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * JUnit 5: gives each test class a {@link TestDatabase} (a fresh schema on the shared server) as
 * a constructor, lifecycle-method or test parameter, and drops it after the class.
 *
 * <pre>{@code
 * @ExtendWith(PostgresExtension.class)
 * class MyWorkflowIT {
 *     @Test void runs(TestDatabase db) { ... db.engineOptions() ... }
 * }
 * }</pre>
 */
public final class PostgresExtension implements BeforeAllCallback, AfterAllCallback, ParameterResolver {

    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(PostgresExtension.class);

    @Override
    public void beforeAll(ExtensionContext context) {
        database(context);
    }

    @Override
    public void afterAll(ExtensionContext context) {
        TestDatabase database = context.getStore(NAMESPACE).remove("database", TestDatabase.class);
        if (database != null) {
            database.close();
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        return parameter.getParameter().getType() == TestDatabase.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        return database(context);
    }

    private static TestDatabase database(ExtensionContext context) {
        ExtensionContext classContext = context;
        while (classContext.getTestMethod().isPresent() && classContext.getParent().isPresent()) {
            classContext = classContext.getParent().get();
        }
        String label = classContext.getRequiredTestClass().getSimpleName();
        return classContext.getStore(NAMESPACE)
                .getOrComputeIfAbsent("database", key -> TestPostgres.newDatabase(label), TestDatabase.class);
    }
}
