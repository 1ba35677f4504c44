/** The side-by-side harness: Durable against the raw-SQL ceiling, db-scheduler and JobRunr. */
@NullMarked
package dev.durable.benchmarks.shootout;

import org.jspecify.annotations.NullMarked;
