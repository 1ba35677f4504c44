package dev.durable;

import dev.durable.limit.LimiterUnderTest;
import dev.durable.limit.PostgresUnderTest;
import dev.durable.limit.StackedLimitsContract;

/** The limiter contract's stacked limits on the PostgreSQL limiter, which admits them in the pick statement. */
class StackedLimitsIT extends StackedLimitsContract {

    @Override
    protected LimiterUnderTest limiter() {
        return new PostgresUnderTest(db);
    }
}
