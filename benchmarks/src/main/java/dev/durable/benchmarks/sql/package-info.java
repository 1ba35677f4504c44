/** JMH benchmarks of the engine's statements against an embedded PostgreSQL. */
@NullMarked
package dev.durable.benchmarks.sql;

import org.jspecify.annotations.NullMarked;
